//! `causeway logs`: request flows stitched from the logs systems already write (lprof).
//!
//! `causeway logs PATH...` reads files and directory trees (`causeway_logflow::input`):
//! gzip files decompressed (a cut one up to the damage), binary files (a NUL in the first
//! 8 KiB) skipped. It stitches window by window, writing assignments and sending closed
//! requests as it goes; the report's templates, identifiers and links are the first
//! window's (`"windows"` in `--json` says how many there were). It prints the ranking, the
//! links and the table, or `--json`; writes `--assignments`; and sends the traces to
//! `--collector`, then its report (the first 50 identifiers with their evidence, and the
//! first 50 links) to `/v1/logflow/report` on the same ingest listener, which the server
//! keeps (`crates/server/src/logflows.rs`). With `--collector`, lines that name their
//! trace (`causeway_logflow::context`) are also sent, window by window, as log records of
//! their spans.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use causeway_logflow::context::LogRecords;
use causeway_logflow::corpus::ReadCounts;
use causeway_logflow::flows::{Flows, Request};
use causeway_logflow::format::Format;
use causeway_logflow::join::LogJoinReport;
use causeway_logflow::learned::Learned;
use causeway_logflow::sequences::Sequence;
use causeway_logflow::source::SourceIndex;
use causeway_logflow::traces::request_spans;
use causeway_logflow::{stitch_logs, Options, Sink, Stitched};
use clap::Args;
use serde_json::json;

/// `causeway logs`: request flows stitched from the logs a system writes (lprof).
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
    /// thread) segment, an event per line, marked as stitched from logs. Lines that name
    /// their trace (a `traceparent`, `trace_id=`/`span_id=` fields) also go to that
    /// trace's span, under its logs (a file's service is its name: `orders.log`, orders).
    #[arg(long)]
    collector: Option<String>,
    /// Join the stitched requests to the traces of the same requests, read from this
    /// query API (as `causeway --api`, e.g. http://127.0.0.1:7070) for each window: a
    /// node's lines of a request go, as its log records, to the span of that node whose
    /// interval holds them and whose attributes share most of their values, saying how
    /// sure that is; requests matching no trace stay traces of their own. Needs
    /// --collector.
    #[arg(long, requires = "collector", value_name = "URL")]
    join: Option<String>,
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

/// Where stitched lines and requests go: the assignments file, the collector.
struct Outputs<'a> {
    assignments: Option<std::io::BufWriter<std::fs::File>>,
    /// Each file's record start, its name quoted, made once: a JSON value built per
    /// line took a tenth of the whole run, and formatting each line with `write!` 4%.
    record_starts: Vec<Vec<u8>>,
    digits: itoa::Buffer,
    collector: Option<(crate::client::Client, &'a str)>,
    /// Ids differ between runs, so stitching twice does not merge two runs' traces.
    salt: u64,
    /// Spans the collector accepted and refused.
    sent: (usize, usize),
    /// The query API the requests are joined to traces from, with its token.
    join: Option<(String, Option<String>)>,
    /// What joining did, summed over windows.
    joined: LogJoinReport,
}

impl Sink for Outputs<'_> {
    type Error = anyhow::Error;

    fn warning(&mut self, warning: &str) {
        eprintln!("warning: {warning}");
    }

    fn line(&mut self, file: u32, number: u32, request: u32) -> Result<()> {
        let Some(w) = self.assignments.as_mut() else {
            return Ok(());
        };
        w.write_all(&self.record_starts[file as usize])?;
        w.write_all(self.digits.format(number).as_bytes())?;
        w.write_all(br#","request":"#)?;
        w.write_all(self.digits.format(request).as_bytes())?;
        w.write_all(b"}\n")?;
        Ok(())
    }

    fn closed(&mut self, flows: &Flows, requests: &[Request]) -> Result<()> {
        let Some((client, url)) = &self.collector else {
            return Ok(());
        };
        let mut spans: Vec<_> = requests
            .iter()
            .flat_map(|r| request_spans(flows, r, self.salt))
            .collect();
        if let Some((api, token)) = &self.join {
            let traces = crate::infer::instrumented_spans(api, token.clone(), &spans)?;
            let joined = causeway_logflow::join::join(spans, &traces);
            self.joined.add(&joined.report);
            spans = joined.spans;
        }
        let (accepted, rejected) =
            crate::import::send_spans(client, &spans, |e| eprintln!("collector: {e}"))
                .with_context(|| format!("sending the stitched requests to {url}"))?;
        self.sent = (self.sent.0 + accepted, self.sent.1 + rejected);
        Ok(())
    }
}

/// Runs `causeway logs`.
pub fn run(a: LogsArgs) -> Result<()> {
    let defaults = Options::default();
    let options = Options {
        stitch: causeway_logflow::stitch::StitchOptions {
            pinned: a.ids.clone(),
            excluded: a.not_ids.clone(),
            quiet_ns: i64::try_from(a.quiet_ms.saturating_mul(1_000_000)).unwrap_or(i64::MAX),
            ..defaults.stitch
        },
        window: causeway_logflow::window::WindowOptions {
            max_bytes: usize::try_from(a.window_mb.max(1).saturating_mul(1 << 20))
                .unwrap_or(usize::MAX),
            ..defaults.window
        },
        format: a
            .format
            .as_deref()
            .map(Format::parse)
            .transpose()
            .context("--format")?,
        sources: read_sources(&a.sources)?,
        keep_lines: a.collector.is_some(),
    };
    let mut input = causeway_logflow::input::open(
        &a.paths,
        options.window,
        options.format.clone(),
        Arc::new(crate::progress::Reading::default()),
    )?;
    for w in &input.warnings {
        eprintln!("warning: {w}");
    }
    let mut outputs = Outputs {
        assignments: a
            .assignments
            .as_ref()
            .map(|path| {
                std::fs::File::create(path)
                    .map(std::io::BufWriter::new)
                    .with_context(|| format!("creating {}", path.display()))
            })
            .transpose()?,
        record_starts: input
            .names
            .iter()
            .map(|name| {
                serde_json::to_string(name).map(|q| format!(r#"{{"file":{q},"line":"#).into_bytes())
            })
            .collect::<Result<_, _>>()?,
        digits: itoa::Buffer::new(),
        collector: a
            .collector
            .as_deref()
            .map(|url| (crate::client::Client::new(url, a.token.clone()), url)),
        salt: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 | 1),
        sent: (0, 0),
        join: a.join.clone().map(|api| (api, a.token.clone())),
        joined: LogJoinReport::default(),
    };
    let names = input.names.clone();
    // Lines that name their trace go to their spans, a window at a time.
    let mut records = LogRecords::default();
    let mut records_sent = (0, 0);
    let mut records_failed = None;
    let records_to = a
        .collector
        .as_deref()
        .map(|url| (crate::client::Client::new(url, a.token.clone()), url));
    let next_window = || {
        let window = input.next_window()?;
        if let Some((client, url)) = &records_to {
            records.read_window(&window);
            let carriers = records.take_carriers();
            if !carriers.is_empty() && records_failed.is_none() {
                match crate::import::send_spans(client, &carriers, |e| eprintln!("collector: {e}"))
                {
                    Ok((accepted, refused)) => {
                        records_sent = (records_sent.0 + accepted, records_sent.1 + refused)
                    }
                    Err(e) => {
                        records_failed = Some(
                            e.context(format!("sending the log lines with trace ids to {url}")),
                        )
                    }
                }
            }
        }
        Some(window)
    };
    let stitched = stitch_logs(next_window, names, &options, &mut outputs)?;
    if let Some(e) = records_failed {
        return Err(e);
    }
    if let Some(w) = outputs.assignments.as_mut() {
        w.flush()?;
    }
    if stitched.untimed > 0 {
        eprintln!(
            "warning: {} lines with no timestamp recognised: placed in file order",
            stitched.untimed
        );
    }
    let report = Report {
        stitched: &stitched,
        skipped: &input.skipped,
        lines_with_trace_ids: records_to.is_some().then_some(records.lines),
        joined: outputs.join.is_some().then_some(&outputs.joined),
    };
    if let Some((client, url)) = &outputs.collector {
        eprintln!(
            "sent {} spans to {url} ({} refused); {} lines named their trace: sent to their spans on {} carriers ({} refused, {} without a time left out)",
            outputs.sent.0, outputs.sent.1, records.lines, records_sent.0, records_sent.1, records.untimed
        );
        if let Some(j) = &report.joined {
            eprintln!(
                "joined {} of {} requests to traces: {} of {} lines on their spans, {} kept under their trace (no span of their node held them), {} left for want of evidence telling two traces apart",
                j.joined, j.requests, j.placed, j.lines, j.kept, j.ambiguous
            );
        }
        let summary = stitched.report(outputs.salt);
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

/// Everything `causeway logs` reports.
struct Report<'a> {
    stitched: &'a Stitched,
    skipped: &'a [String],
    /// Lines that named their trace (looked for only when sending to a collector).
    lines_with_trace_ids: Option<usize>,
    /// What joining to traces did, with `--join`.
    joined: Option<&'a LogJoinReport>,
}

impl Report<'_> {
    fn flows(&self) -> &Flows {
        &self.stitched.flows
    }

    fn learned(&self) -> &Learned {
        &self.stitched.learned
    }

    fn counts(&self) -> &ReadCounts {
        &self.stitched.counts
    }

    fn found(&self) -> &[Sequence] {
        &self.stitched.sequences
    }

    fn json(&self) -> serde_json::Value {
        let c = self.counts();
        json!({
            "files": self.flows().files,
            "skipped_files": self.skipped,
            "windows": self.stitched.windows,
            "lines": c.lines,
            "lines_cut": c.cut,
            "continuation_lines": c.continuations,
            "lossy_lines": c.lossy,
            "formats": c.formats.iter().map(|(file, f)| {
                let (format, parsed) = f.detected();
                json!({
                    "file": file,
                    "format": format.name(),
                    "lines": f.lines,
                    "parsed": parsed,
                    "json_lines": f.json,
                    "logfmt_lines": f.logfmt,
                    "timed_text_lines": f.timed_text,
                })
            }).collect::<Vec<_>>(),
            "requests": self.stitched.requests,
            "lines_with_trace_ids": self.lines_with_trace_ids,
            "join": self.joined,
            "templates": self.learned().templates,
            "points": self.flows().points().iter().enumerate().map(|(id, (text, count))| json!({
                "id": id,
                "template": self.learned().point_templates.get(id),
                "text": text,
                "count": count,
            })).collect::<Vec<_>>(),
            "identifiers": self.learned().identifiers,
            "links": self.learned().links,
            "sequences": self.found().iter().map(|s| json!({
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
        let c = self.counts();
        outln!(
            "{} files ({} skipped), {} lines ({} cut, {} continuing the line before), {} templates, {} log points, {} requests{}",
            self.flows().files.len(),
            self.skipped.len(),
            c.lines,
            c.cut,
            c.continuations,
            self.learned().templates.len(),
            self.flows().points().len(),
            self.stitched.requests,
            if self.stitched.windows > 1 {
                format!(" (in {} windows; templates, identifiers and links of the first)", self.stitched.windows)
            } else {
                String::new()
            }
        );
        let mut files_by_format = std::collections::BTreeMap::<&str, usize>::new();
        for f in c.formats.values() {
            *files_by_format.entry(f.detected().0.name()).or_default() += 1;
        }
        let by_format: Vec<String> = files_by_format
            .iter()
            .map(|(format, n)| format!("{format} {n}"))
            .collect();
        outln!("files by format: {}", by_format.join(", "));
        // A file read mostly as something else than its own format is worth naming.
        for (file, f) in &c.formats {
            let (format, parsed) = f.detected();
            if parsed < 0.9 {
                outln!(
                    "  {file}: {}, {:.0}% of {} lines read so",
                    format.name(),
                    parsed * 100.0,
                    f.lines
                );
            }
        }
        outln!();
        outln!(
            "request identifiers, likeliest first (* taken; score, values, lines, shared, bursts: name, log point)"
        );
        let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
        let number = |v: &serde_json::Value| v.as_f64().unwrap_or_default();
        for e in self.learned().identifiers.iter().take(top) {
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
        for l in self.learned().links.iter().take(top) {
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
        for s in self.found().iter().take(top) {
            let first: Vec<String> = s
                .segments
                .iter()
                .filter_map(|seg| seg.first())
                .map(|&p| shorten(self.flows().point(p), 40))
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

fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}
