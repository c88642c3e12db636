//! `causeway logs`: request flows stitched from the logs systems already write (lprof).

use std::collections::HashSet;
use std::io::Write as _;
use std::path::PathBuf;

use anyhow::{Context, Result};
use causeway_logflow::corpus::{Corpus, ReadCounts};
use causeway_logflow::drain::Options;
use causeway_logflow::flows::{Flows, Request};
use causeway_logflow::format::Format;
use causeway_logflow::ids::{rank, Evidence, Variable};
use causeway_logflow::links::{learn, LinkOptions, Links};
use causeway_logflow::points::PointId;
use causeway_logflow::sequences::{Sequence, SequenceTable};
use causeway_logflow::source::SourceIndex;
use causeway_logflow::stitch::{stitch_after, StitchOptions};
use causeway_logflow::traces::request_spans;
use causeway_logflow::window::{Numbering, WindowOptions};
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
    /// Logs larger than this (in MiB) are read in time windows of this size, each
    /// learning afresh and reading the last 10 s of the one before again, so that
    /// memory stays bounded whatever the logs' length.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    window_mb: u64,
    /// Access token, if the collector requires one.
    #[arg(long, env = "CAUSEWAY_TOKEN", hide_env_values = true)]
    token: Option<String>,
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

/// How far back a window re-reads the one before: longer than the links' longest window
/// (3 s) and than most requests last, so that the window after the cut knows the
/// requests a line may continue.
const OVERLAP_NS: i64 = 10_000_000_000;

/// The default stitching options with `--quiet-ms`.
pub fn stitch_options(quiet_ms: u64) -> StitchOptions {
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
    let window_options = WindowOptions {
        max_bytes: usize::try_from(a.window_mb.max(1).saturating_mul(1 << 20))
            .unwrap_or(usize::MAX),
        overlap_ns: OVERLAP_NS,
    };
    let (mut input, names, skipped) =
        crate::logs_read::open(&a.paths, window_options, format.clone())?;
    let options = StitchOptions {
        pinned: a.ids.clone(),
        excluded: a.not_ids.clone(),
        ..stitch_options(a.quiet_ms)
    };
    let mut assignments = a
        .assignments
        .as_ref()
        .map(|path| {
            std::fs::File::create(path)
                .map(std::io::BufWriter::new)
                .with_context(|| format!("creating {}", path.display()))
        })
        .transpose()?;
    // Each file's record start, its name quoted, made once: a JSON value built per line
    // took a tenth of the whole run, and formatting each line with `write!` 4%.
    let record_starts: Vec<Vec<u8>> = names
        .iter()
        .map(|name| {
            serde_json::to_string(name).map(|q| format!(r#"{{"file":{q},"line":"#).into_bytes())
        })
        .collect::<Result<_, _>>()?;
    let mut digits = itoa::Buffer::new();
    // Ids differ between runs, so stitching twice does not merge two runs' traces.
    let salt = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 | 1);
    let client = a
        .collector
        .as_ref()
        .map(|url| crate::client::Client::new(url, a.token.clone()));
    let mut sent = (0, 0);
    let mut send = |flows: &Flows, closed: &[Request]| -> Result<()> {
        if let (Some(client), Some(url)) = (&client, &a.collector) {
            let spans: Vec<_> = closed
                .iter()
                .flat_map(|r| request_spans(flows, r, salt))
                .collect();
            let (accepted, rejected) =
                crate::import::send_spans(client, &spans, |e| eprintln!("collector: {e}"))
                    .with_context(|| format!("sending the stitched requests to {url}"))?;
            sent = (sent.0 + accepted, sent.1 + rejected);
        }
        Ok(())
    };
    let mut flows = Flows::new(names, client.is_some());
    let mut table = SequenceTable::default();
    let mut numbering = Numbering::default();
    let mut learned: Option<Learned> = None;
    let mut counts = ReadCounts::default();
    let mut untimed = 0;
    let mut windows = 0;
    let mut requests_total = 0;
    while let Some(window) = input.next_window() {
        windows += 1;
        for w in &window.warnings {
            eprintln!("warning: {w}");
        }
        let corpus = Corpus::read_numbered(
            &window.files,
            &window.first_lines,
            Options::default(),
            format.as_ref(),
            sources.as_ref(),
        );
        let c = window.counts.as_ref().unwrap_or(&corpus.counts);
        counts.lines += c.lines;
        counts.cut += c.cut;
        counts.continuations += c.continuations;
        counts.lossy += c.lossy;
        let ranked = rank(&corpus);
        let links = learn(&corpus, &LinkOptions::default());
        let given = numbering.given(&window, &corpus);
        let requests = stitch_after(&corpus, &ranked, &links, &options, &given);
        if learned.is_none() {
            learned = Some(Learned::of(&corpus, &ranked, &links, &options));
        }
        let (numbered, open) = numbering.number(&window, &corpus, &requests);
        for (line, request) in corpus.lines.iter().zip(&numbered) {
            let Some(request) = request else {
                continue;
            };
            untimed += usize::from(line.time_ns.is_none());
            requests_total = requests_total.max(request + 1);
            if let Some(w) = assignments.as_mut() {
                let start = &record_starts[line.file as usize];
                for number in std::iter::once(line.number).chain(line.continued.iter().copied()) {
                    w.write_all(start)?;
                    w.write_all(digits.format(number).as_bytes())?;
                    w.write_all(br#","request":"#)?;
                    w.write_all(digits.format(*request).as_bytes())?;
                    w.write_all(b"}\n")?;
                }
            }
        }
        flows.add(&corpus, &window.files, &numbered);
        drop(corpus);
        let closed = flows.close(|r| open.contains(&r));
        for r in &closed {
            table.add(r);
        }
        send(&flows, &closed)?;
    }
    let closed = flows.close(|_| false);
    for r in &closed {
        table.add(r);
    }
    send(&flows, &closed)?;
    if let Some(w) = assignments.as_mut() {
        w.flush()?;
    }
    if untimed > 0 {
        eprintln!("warning: {untimed} lines with no timestamp recognised: placed in file order");
    }
    let learned = learned.unwrap_or_default();
    let found = table.finish();
    let report = Report {
        flows: &flows,
        learned: &learned,
        counts: &counts,
        found: &found,
        requests: requests_total,
        windows,
        skipped: &skipped,
    };
    if let (Some(client), Some(url)) = (&client, &a.collector) {
        eprintln!("sent {} spans to {url} ({} refused)", sent.0, sent.1);
        // What the Logs page shows beside the requests: why they were stitched so.
        const SHOWN: usize = 50;
        let summary = json!({
            "run": format!("{salt:016x}"),
            "files": flows.files.len(),
            "lines": counts.lines,
            "requests": requests_total,
            "identifiers": learned.identifiers.iter().take(SHOWN).collect::<Vec<_>>(),
            "links": learned.links.iter().take(SHOWN).collect::<Vec<_>>(),
        });
        client
            .post_json("/v1/logflow/report", &summary)
            .with_context(|| format!("sending the stitching report to {url}"))?;
    }
    if a.json {
        outln!("{}", report.json());
        return Ok(());
    }
    report.print(a.top);
    Ok(())
}

/// What the first window learned, kept for the report once its corpus is gone.
#[derive(Default)]
struct Learned {
    templates: Vec<serde_json::Value>,
    identifiers: Vec<serde_json::Value>,
    links: Vec<serde_json::Value>,
    /// The template each of the first window's log points refines.
    point_templates: Vec<u32>,
}

impl Learned {
    fn of(corpus: &Corpus, ranked: &[Evidence], links: &Links, options: &StitchOptions) -> Learned {
        let taken: HashSet<Variable> = causeway_logflow::stitch::identifiers(ranked, options)
            .into_iter()
            .collect();
        Learned {
            templates: corpus
                .miner
                .templates()
                .iter()
                .enumerate()
                .map(|(id, t)| json!({"id": id, "text": t.text(), "count": t.count}))
                .collect(),
            identifiers: identifiers_json(corpus, ranked, &taken, usize::MAX),
            links: links_json(corpus, links, usize::MAX),
            point_templates: corpus.points().iter().map(|p| p.template).collect(),
        }
    }
}

/// Everything `causeway logs` reports.
struct Report<'a> {
    flows: &'a Flows,
    learned: &'a Learned,
    counts: &'a ReadCounts,
    found: &'a [Sequence],
    requests: u32,
    windows: usize,
    skipped: &'a [String],
}

impl Report<'_> {
    fn json(&self) -> serde_json::Value {
        let c = self.counts;
        json!({
            "files": self.flows.files,
            "skipped_files": self.skipped,
            "windows": self.windows,
            "lines": c.lines,
            "lines_cut": c.cut,
            "continuation_lines": c.continuations,
            "lossy_lines": c.lossy,
            "requests": self.requests,
            "templates": self.learned.templates,
            "points": self.flows.points().iter().enumerate().map(|(id, (text, count))| json!({
                "id": id,
                "template": self.learned.point_templates.get(id),
                "text": text,
                "count": count,
            })).collect::<Vec<_>>(),
            "identifiers": self.learned.identifiers,
            "links": self.learned.links,
            "sequences": self.found.iter().map(|s| json!({
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

    fn print(&self, top: usize) {
        let c = self.counts;
        outln!(
            "{} files ({} skipped), {} lines ({} cut, {} continuing the line before), {} templates, {} log points, {} requests{}",
            self.flows.files.len(),
            self.skipped.len(),
            c.lines,
            c.cut,
            c.continuations,
            self.learned.templates.len(),
            self.flows.points().len(),
            self.requests,
            if self.windows > 1 {
                format!(" (in {} windows; templates, identifiers and links of the first)", self.windows)
            } else {
                String::new()
            }
        );
        outln!();
        outln!(
            "request identifiers, likeliest first (* taken; score, values, lines, shared, bursts: name, log point)"
        );
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        let number = |v: &serde_json::Value| v.as_f64().unwrap_or_default();
        for e in self.learned.identifiers.iter().take(top) {
            outln!(
                "{}{:>6.3} {:>7} {:>7} {:>6.2} {:>6.1}  {}: #{} of {}  e.g. {}",
                if e["taken"].as_bool() == Some(true) {
                    '*'
                } else {
                    ' '
                },
                number(&e["score"]),
                number(&e["distinct"]),
                number(&e["lines"]),
                number(&e["shared"]),
                number(&e["bursts"]),
                text(&e["name"]),
                number(&e["parameter"]),
                shorten(&text(&e["log_point"]), 80),
                text(&e["examples"][0]),
            );
        }
        outln!();
        outln!("links between log points (precision, matches, window: from -> to)");
        for l in self.learned.links.iter().take(top) {
            let end = |v: &serde_json::Value| {
                format!(
                    "{}:#{} of {}",
                    text(&v["file"]),
                    number(&v["parameter"]),
                    shorten(&text(&v["log_point"]), 50)
                )
            };
            outln!(
                "{:>6.3} {:>7} {:>6}ms  {} -> {}",
                number(&l["precision"]),
                number(&l["matches"]),
                number(&l["window_ms"]).floor(),
                end(&l["from"]),
                end(&l["to"])
            );
        }
        outln!();
        outln!("requests per log-point sequence (count, latency p50 and p90 ms: first log points)");
        for s in self.found.iter().take(top) {
            let first: Vec<String> = s
                .segments
                .iter()
                .filter_map(|seg| seg.first())
                .map(|&p| shorten(self.flows.point(p), 40))
                .collect();
            outln!(
                "{:>7} {:>9.1} {:>9.1}  {} segments: {}",
                s.count,
                s.latency_ns(0.5) as f64 / 1e6,
                s.latency_ns(0.9) as f64 / 1e6,
                s.segments.len(),
                first.join(" | ")
            );
        }
    }
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
