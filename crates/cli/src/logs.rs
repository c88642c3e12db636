//! `causeway logs`: request flows stitched from the logs systems already write (lprof).

use std::collections::HashSet;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use causeway_logflow::corpus::Corpus;
use causeway_logflow::drain::Options;
use causeway_logflow::format::Format;
use causeway_logflow::ids::{rank, Evidence, Variable};
use causeway_logflow::links::{learn, LinkOptions, Links};
use causeway_logflow::points::PointId;
use causeway_logflow::sequences::{sequences, Sequence};
use causeway_logflow::source::SourceIndex;
use causeway_logflow::stitch::{stitch, StitchOptions};
use clap::Args;
use serde_json::json;

#[derive(Args)]
pub struct LogsArgs {
    /// Log files, or directories of them (read recursively; a file is a node); gzip
    /// files are read decompressed.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Write one line per input line: `{"file", "line", "request"}` (the file as given,
    /// relative to the directory argument when one was given).
    #[arg(long)]
    assignments: Option<PathBuf>,
    /// Print the templates, the identifier ranking and the requests per log-point
    /// sequence as JSON.
    #[arg(long)]
    json: bool,
    /// Rows of each table printed.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// Send the requests as traces to this collector (the ingest address, as for
    /// `causeway agent --collector`, e.g. `http://127.0.0.1:4318`): a span per node (or
    /// thread) segment, an event per line, marked as stitched from logs.
    #[arg(long)]
    collector: Option<String>,
    /// Take variables of this name (the word before the value in its log point, as the
    /// ranking shows it) for request identifiers, whatever their score; repeatable.
    #[arg(long = "id", value_name = "NAME")]
    ids: Vec<String>,
    /// Never take variables of this name for request identifiers; repeatable.
    #[arg(long = "not-id", value_name = "NAME")]
    not_ids: Vec<String>,
    /// The lines' prefix as a pattern, where the automatic detection does not know it:
    /// `{time} [{thread}] {level} {logger} - {message}` (fields: time, level, thread,
    /// logger, skip, message; `{message}` last; `{{` for a brace). Lines it does not
    /// match are read by the detection.
    #[arg(long, value_name = "PATTERN")]
    format: Option<String>,
    /// Rust sources whose `tracing` and `log` macro calls (`info!`, `warn!`, ...) name
    /// the log points: a line one of them printed is that log point's, with the values
    /// its format and fields printed; other lines are mined. Repeatable.
    #[arg(long = "source", value_name = "DIR")]
    sources: Vec<PathBuf>,
    /// A value passed on over seconds (a link whose window is 1 s or more) ties a line
    /// to a request that has logged nothing for longer than this only if no request
    /// begun since precedes the line: such values go to later requests as often as
    /// within one.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    quiet_ms: u64,
    /// Access token, if the collector requires one.
    #[arg(long, env = "CAUSEWAY_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// Bytes looked at to tell a binary file from a log.
const SNIFF: usize = 8192;

/// How a gzip file starts (it is read decompressed, whatever its name).
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// The files `paths` name, each with the name reported for it.
fn files(paths: &[PathBuf]) -> Result<Vec<(String, PathBuf)>> {
    let mut out = Vec::new();
    for path in paths {
        if path.is_dir() {
            let mut found = Vec::new();
            walk(path, &mut found)?;
            found.sort();
            for f in found {
                let name = f
                    .strip_prefix(path)
                    .unwrap_or(&f)
                    .to_string_lossy()
                    .into_owned();
                out.push((name, f));
            }
        } else if path.is_file() {
            out.push((path.to_string_lossy().into_owned(), path.clone()));
        } else {
            bail!("{}: no such file or directory", path.display());
        }
    }
    Ok(out)
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// A log file read: the name reported for it, and its bytes.
pub(crate) type LogFile = (String, Vec<u8>);

/// The logs at `paths` read, and the names of binary files skipped (with a warning).
pub(crate) fn read_paths(paths: &[PathBuf]) -> Result<(Vec<LogFile>, Vec<String>)> {
    let files = files(paths)?;
    let progress = crate::bench::bar(files.len() as u64, "files read");
    // Files are read (and decompressed) on every core, a file at a time; the results and
    // warnings come out in file order.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len().max(1));
    let mut read: Vec<Option<Result<FileRead>>> = (0..files.len()).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((name, path)) = files.get(i) else {
                            break;
                        };
                        done.push((i, read_one(name, path)));
                        progress.inc(1);
                    }
                    done
                })
            })
            .collect();
        for h in handles {
            for (i, r) in h.join().unwrap_or_default() {
                read[i] = Some(r);
            }
        }
    });
    progress.finish_and_clear();
    let mut logs = Vec::new();
    let mut skipped = Vec::new();
    for ((name, _), r) in files.into_iter().zip(read) {
        let (bytes, warnings) = r.context("a file was not read")??;
        for w in warnings {
            eprintln!("warning: {name}: {w}");
        }
        match bytes {
            Some(bytes) => logs.push((name, bytes)),
            None => skipped.push(name),
        }
    }
    Ok((logs, skipped))
}

/// One file's bytes (decompressed), or none for a binary file, and what to warn of.
type FileRead = (Option<Vec<u8>>, Vec<String>);

fn read_one(name: &str, path: &Path) -> Result<FileRead> {
    let mut warnings = Vec::new();
    let mut bytes = std::fs::read(path).with_context(|| format!("reading {name}"))?;
    if bytes.starts_with(&GZIP_MAGIC) {
        let mut plain = Vec::new();
        if let Err(e) = flate2::read::MultiGzDecoder::new(&bytes[..]).read_to_end(&mut plain) {
            warnings.push(format!(
                "gzip data cut short or corrupt ({e}): read up to the damage"
            ));
        }
        bytes = plain;
    }
    if bytes[..bytes.len().min(SNIFF)].contains(&0) {
        warnings.push("not a log (binary), skipped".to_string());
        return Ok((None, warnings));
    }
    Ok((Some(bytes), warnings))
}

/// The log points of the `--source` directories, if any were given.
fn read_sources(dirs: &[PathBuf]) -> Result<Option<SourceIndex>> {
    if dirs.is_empty() {
        return Ok(None);
    }
    let mut points = Vec::new();
    for dir in dirs {
        let (found, failed) = causeway_logflow::source::read_dir(dir)
            .with_context(|| format!("reading the sources in {}", dir.display()))?;
        for (path, e) in failed {
            eprintln!("warning: {}: {e}; its log points left out", path.display());
        }
        points.extend(found);
    }
    eprintln!(
        "{} log points read from the sources in {}",
        points.len(),
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(Some(SourceIndex::new(points)))
}

/// The default stitching options with `--quiet-ms`.
pub(crate) fn stitch_options(quiet_ms: u64) -> StitchOptions {
    StitchOptions {
        quiet_ns: i64::try_from(quiet_ms.saturating_mul(1_000_000)).unwrap_or(i64::MAX),
        ..StitchOptions::default()
    }
}

pub fn run(a: LogsArgs) -> Result<()> {
    let format = a
        .format
        .as_deref()
        .map(Format::parse)
        .transpose()
        .context("--format")?;
    let sources = read_sources(&a.sources)?;
    let (read, skipped) = read_paths(&a.paths)?;
    let corpus = Corpus::read_with(&read, Options::default(), format.as_ref(), sources.as_ref());
    let untimed = corpus.lines.iter().filter(|l| l.time_ns.is_none()).count();
    if untimed > 0 {
        eprintln!("warning: {untimed} lines with no timestamp recognised: placed in file order");
    }
    let ranked = rank(&corpus);
    let options = StitchOptions {
        pinned: a.ids.clone(),
        excluded: a.not_ids.clone(),
        ..stitch_options(a.quiet_ms)
    };
    let taken: HashSet<Variable> = causeway_logflow::stitch::identifiers(&ranked, &options)
        .into_iter()
        .collect();
    let links = learn(&corpus, &LinkOptions::default());
    let requests = stitch(&corpus, &ranked, &links, &options);
    if let Some(path) = &a.assignments {
        let mut w = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        // Each file's name quoted once: a JSON value built per line took a tenth of the
        // whole run.
        let quoted: Vec<String> = corpus
            .files
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?;
        for (line, request) in corpus.lines.iter().zip(&requests) {
            let file = &quoted[line.file as usize];
            for number in std::iter::once(line.number).chain(line.continued.iter().copied()) {
                writeln!(
                    w,
                    r#"{{"file":{file},"line":{number},"request":{request}}}"#
                )?;
            }
        }
        w.flush()?;
    }
    if let Some(url) = &a.collector {
        // Ids differ between runs, so stitching twice does not merge two runs' traces.
        let salt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 | 1);
        let spans = causeway_logflow::traces::spans(&corpus, &requests, salt);
        let client = crate::client::Client::new(url, a.token.clone());
        let (accepted, rejected) =
            crate::import::send_spans(&client, &spans, |e| eprintln!("collector: {e}"))
                .with_context(|| format!("sending the stitched requests to {url}"))?;
        eprintln!("sent {accepted} spans to {url} ({rejected} refused)");
        // What the Logs page shows beside the requests: why they were stitched so.
        const SHOWN: usize = 50;
        let report = json!({
            "run": format!("{salt:016x}"),
            "files": corpus.files.len(),
            "lines": corpus.counts.lines,
            "requests": requests.iter().max().map_or(0, |m| m + 1),
            "identifiers": identifiers_json(&corpus, &ranked, &taken, SHOWN),
            "links": links_json(&corpus, &links, SHOWN),
        });
        client
            .post_json("/v1/logflow/report", &report)
            .with_context(|| format!("sending the stitching report to {url}"))?;
    }
    let found = sequences(&corpus, &requests);
    let count = requests.iter().max().map_or(0, |m| m + 1);
    if a.json {
        outln!(
            "{}",
            report_json(&corpus, &ranked, &links, &taken, &found, count, &skipped)
        );
        return Ok(());
    }
    let c = &corpus.counts;
    outln!(
        "{} files ({} skipped), {} lines ({} cut, {} continuing the line before), {} templates, {} log points, {} requests",
        corpus.files.len(),
        skipped.len(),
        c.lines,
        c.cut,
        c.continuations,
        corpus.miner.templates().len(),
        corpus.points().len(),
        count
    );
    outln!();
    outln!(
        "request identifiers, likeliest first (* taken; score, values, lines, shared, bursts: name, log point)"
    );
    for e in ranked.iter().take(a.top) {
        outln!(
            "{}{:>6.3} {:>7} {:>7} {:>6.2} {:>6.1}  {}: {}  e.g. {}",
            if taken.contains(&e.variable) {
                '*'
            } else {
                ' '
            },
            e.score,
            e.distinct,
            e.lines,
            e.shared,
            e.bursts,
            e.name,
            template_text(&corpus, e),
            e.examples.first().map_or("", String::as_str)
        );
    }
    outln!();
    outln!("links between log points (precision, matches, window: from -> to)");
    for l in links.all().into_iter().take(a.top) {
        let point = |v: causeway_logflow::links::Variable| {
            format!(
                "{}:#{} of {}",
                corpus.files[v.0 as usize],
                v.2,
                shorten(&point_text(&corpus, v.1), 50)
            )
        };
        outln!(
            "{:>6.3} {:>7} {:>6}ms  {} -> {}",
            l.precision,
            l.matches,
            l.window_ns / 1_000_000,
            point(l.from),
            point(l.to)
        );
    }
    outln!();
    outln!("requests per log-point sequence (count, latency p50 and p90 ms: first log points)");
    for s in found.iter().take(a.top) {
        outln!(
            "{:>7} {:>9.1} {:>9.1}  {}",
            s.count,
            s.latency_ns(0.5) as f64 / 1e6,
            s.latency_ns(0.9) as f64 / 1e6,
            sequence_text(&corpus, s)
        );
    }
    Ok(())
}

fn template_text(corpus: &Corpus, e: &Evidence) -> String {
    let text = point_text(corpus, e.variable.0);
    format!("#{} of {}", e.variable.1, shorten(&text, 80))
}

fn point_text(corpus: &Corpus, point: PointId) -> String {
    corpus.point_shape(point).text()
}

/// The template a log point refines.
fn template_of(corpus: &Corpus, point: PointId) -> Option<u32> {
    corpus.points().get(point as usize).map(|p| p.template)
}

fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

fn sequence_text(corpus: &Corpus, s: &Sequence) -> String {
    let first: Vec<String> = s
        .segments
        .iter()
        .filter_map(|seg| seg.first())
        .map(|&p| shorten(&point_text(corpus, p), 40))
        .collect();
    format!("{} segments: {}", s.segments.len(), first.join(" | "))
}

/// The identifier ranking as JSON, the first `limit`.
fn identifiers_json(
    corpus: &Corpus,
    ranked: &[Evidence],
    taken: &HashSet<Variable>,
    limit: usize,
) -> Vec<serde_json::Value> {
    ranked
        .iter()
        .take(limit)
        .map(|e| {
            json!({
                "point": e.variable.0,
                "template": template_of(corpus, e.variable.0),
                "parameter": e.variable.1,
                "log_point": point_text(corpus, e.variable.0),
                "name": e.name,
                "taken": taken.contains(&e.variable),
                "score": e.score,
                "lines": e.lines,
                "distinct": e.distinct,
                "shared": e.shared,
                "on_several_nodes": e.on_several_nodes,
                "bursts": e.bursts,
                "lifetime_ms": e.lifetime_ns as f64 / 1e6,
                "examples": e.examples,
            })
        })
        .collect()
}

/// The learned links as JSON, strongest first, the first `limit`.
fn links_json(corpus: &Corpus, links: &Links, limit: usize) -> Vec<serde_json::Value> {
    let end = |v: causeway_logflow::links::Variable| {
        json!({
            "file": corpus.files[v.0 as usize],
            "point": v.1,
            "template": template_of(corpus, v.1),
            "parameter": v.2,
            "log_point": point_text(corpus, v.1),
        })
    };
    links
        .all()
        .into_iter()
        .take(limit)
        .map(|l| {
            json!({
                "from": end(l.from),
                "to": end(l.to),
                "window_ms": l.window_ns as f64 / 1e6,
                "precision": l.precision,
                "matches": l.matches,
            })
        })
        .collect()
}

fn report_json(
    corpus: &Corpus,
    ranked: &[Evidence],
    links: &Links,
    taken: &HashSet<Variable>,
    found: &[Sequence],
    requests: u32,
    skipped: &[String],
) -> serde_json::Value {
    let c = &corpus.counts;
    json!({
        "files": corpus.files,
        "skipped_files": skipped,
        "lines": c.lines,
        "lines_cut": c.cut,
        "continuation_lines": c.continuations,
        "lossy_lines": c.lossy,
        "requests": requests,
        "templates": corpus.miner.templates().iter().enumerate().map(|(id, t)| json!({
            "id": id, "text": t.text(), "count": t.count,
        })).collect::<Vec<_>>(),
        "points": corpus.points().iter().enumerate().map(|(id, p)| json!({
            "id": id, "template": p.template, "text": point_text(corpus, id as PointId), "count": p.count,
        })).collect::<Vec<_>>(),
        "identifiers": identifiers_json(corpus, ranked, taken, usize::MAX),
        "links": links_json(corpus, links, usize::MAX),
        "sequences": found.iter().map(|s| json!({
            "count": s.count,
            "segments": s.segments,
            "latency_ms": {
                "p50": s.latency_ns(0.5) as f64 / 1e6,
                "p90": s.latency_ns(0.9) as f64 / 1e6,
                "max": s.latency_ns(1.0) as f64 / 1e6,
            },
        })).collect::<Vec<_>>(),
    })
}
