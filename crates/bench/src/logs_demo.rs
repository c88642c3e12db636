//! `causeway-bench logs-demo`: request flows stitched from the demo's own logs, at
//! several loads. The demo writes `tracing` fmt logs with each line's trace id at its
//! end; the ids are stripped before stitching and kept as the ground truth. The stitched
//! requests are then joined to the demo's stored traces, as `causeway logs --join` joins
//! them, and each line's trace is held against the one it named.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use causeway_demo::logs::{FILEPATH_KEY, LINENO_KEY, SPAN_ID_KEY, TRACE_ID_KEY};
use causeway_logflow::join::join;
use causeway_logflow::stitch::StitchOptions;
use causeway_logflow::stitch_logs;
use causeway_logflow::traces::RequestSpans;
use causeway_model::attributes::{LOG_FILE, LOG_LINE, PARENT_CONFIDENCE};
use causeway_model::Value;
use clap::Args;
use foldhash::HashMap;
use serde_json::json;

#[derive(Args)]
pub struct LogsDemoArgs {
    #[command(flatten)]
    runs: crate::infer_demo::DemoRuns,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// As `causeway logs --quiet-ms`.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    quiet_ms: u64,
}

/// Runs the demo at `rate`, its logs in `dir/raw`.
fn run_demo(dir: &Path, rate: f64, duration: humantime::Duration) -> Result<()> {
    let exe = crate::harness::causeway_exe()?;
    let (args, _) = crate::infer_demo::demo_args(&dir.join("store"), rate, duration, false)?;
    let status = Command::new(&exe)
        .args(args)
        .arg("--logs")
        .arg(dir.join("raw"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .context("running the demo")?;
    if !status.success() {
        bail!("the demo ended with {status}");
    }
    Ok(())
}

/// The line without the hex id of `len` digits after `key` at its end, and the id (None
/// when the line has none).
fn strip_id<'a>(line: &'a str, key: &str, len: usize) -> (&'a str, Option<&'a str>) {
    let Some(at) = line.rfind(key) else {
        return (line, None);
    };
    let id = &line[at + key.len()..];
    if id.len() == len && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        (line[..at].trim_end(), Some(id))
    } else {
        (line, None)
    }
}

/// The line without its trace id, and the id (None when the line has none).
fn strip_trace_id(line: &str) -> (&str, Option<&str>) {
    strip_id(line, TRACE_ID_KEY, 32)
}

/// The line without its span id, and the id (None when the line has none).
fn strip_span_id(line: &str) -> (&str, Option<&str>) {
    strip_id(line, SPAN_ID_KEY, 16)
}

/// The line without the place of the macro call that wrote it, and the place
/// (`file:line`; None when the line has none).
fn strip_place(line: &str) -> (&str, Option<String>) {
    let Some(at) = line.rfind(&format!(" {FILEPATH_KEY}")) else {
        return (line, None);
    };
    let place = line[at + 1 + FILEPATH_KEY.len()..]
        .split_once(&format!(" {LINENO_KEY}"))
        .filter(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    match place {
        Some((file, n)) => (&line[..at], Some(format!("{file}:{n}"))),
        None => (line, None),
    }
}

/// Writes `dir/raw`'s logs without their trace ids and places to `dir/logs`, and both to
/// `dir/truth.jsonl` with the span it was written in (a line with no trace id is a
/// request of its own).
fn strip(dir: &Path) -> Result<()> {
    let (raw, logs) = (dir.join("raw"), dir.join("logs"));
    std::fs::create_dir_all(&logs)?;
    let mut names: Vec<_> = std::fs::read_dir(&raw)
        .with_context(|| format!("reading {}", raw.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name())
        .collect();
    names.sort();
    let mut truth = std::io::BufWriter::new(std::fs::File::create(dir.join("truth.jsonl"))?);
    for name in names {
        let text = std::fs::read_to_string(raw.join(&name))
            .with_context(|| format!("reading {}", raw.join(&name).display()))?;
        let file = name.to_string_lossy();
        let mut out = std::io::BufWriter::new(std::fs::File::create(logs.join(&name))?);
        for (n, line) in text.lines().enumerate() {
            let (stripped, trace) = strip_trace_id(line);
            let (stripped, span) = strip_span_id(stripped);
            let (stripped, point) = strip_place(stripped);
            writeln!(out, "{stripped}")?;
            let trace = trace.map_or_else(|| format!("-{file}:{}", n + 1), str::to_owned);
            let row =
                json!({"file": file, "line": n + 1, "trace": trace, "span": span, "point": point});
            writeln!(truth, "{row}")?;
        }
        out.flush()?;
    }
    Ok(truth.flush()?)
}

/// The stitched requests of `dir/logs` (stitched as `causeway logs` stitches, window by
/// window) joined to the traces in `dir/store`, each line's placement scored against the
/// trace it named: placed on it, placed on another, or left out of every stored trace.
fn score_join(dir: &Path, stitch: StitchOptions) -> Result<serde_json::Value> {
    let options = causeway_logflow::Options {
        stitch,
        keep_lines: true,
        ..causeway_logflow::Options::default()
    };
    let mut input = causeway_logflow::input::open(
        &[dir.join("logs")],
        options.window,
        None,
        Arc::new(causeway_cli::progress::Reading::default()),
    )?;
    let names = input.names.clone();
    let mut requests = RequestSpans::new(1);
    let Ok(_) = stitch_logs(|| input.next_window(), names, &options, &mut requests);
    // Stitched spans the store may hold are never anchors (the join leaves them out).
    let traces = crate::stores::stored_spans(&dir.join("store"))?;
    let start = Instant::now();
    let joined = join(requests.spans, &traces);
    let took = start.elapsed();
    // Each line's placement: (trace, span); a line kept under a trace as a span of its
    // own has its stitched span's id, which no truth names.
    let mut placed: HashMap<(String, i64), (String, String)> = HashMap::default();
    let in_trace = joined
        .spans
        .iter()
        .filter(|s| s.is_log_carrier() || s.attributes.iter().any(|a| a.key == PARENT_CONFIDENCE));
    for span in in_trace {
        let span_file = span
            .attributes
            .iter()
            .find(|a| a.key == LOG_FILE)
            .map(|a| &a.value);
        for e in &span.events {
            let attr = |key: &str| e.attributes.iter().find(|a| a.key == key).map(|a| &a.value);
            if let (Some(Value::Str(file)), Some(Value::I64(line))) =
                (attr(LOG_FILE).or(span_file), attr(LOG_LINE))
            {
                let at = (span.trace_id.to_string(), span.span_id.to_string());
                placed.insert((file.clone(), *line), at);
            }
        }
    }
    let (mut lines, mut right, mut right_span, mut wrong) = (0u64, 0u64, 0u64, 0u64);
    // Where lines on the right trace but another span went: their true span's
    // service and name, and the one they were put on.
    // (A log carrier shares its span's id: the span names it.)
    let names: HashMap<String, String> = traces
        .iter()
        .chain(&joined.spans)
        .filter(|s| !s.is_log_carrier())
        .map(|s| (s.span_id.to_string(), format!("{} {}", s.service, s.name)))
        .collect();
    let mut misplaced: HashMap<(String, String), u64> = HashMap::default();
    for t in crate::logs::read_truth::<TruthLine>(dir)? {
        // A line written outside every span names no trace.
        if t.trace.starts_with('-') {
            continue;
        }
        lines += 1;
        match placed.get(&(t.file.clone(), i64::from(t.line))) {
            Some((trace, span)) if *trace == t.trace => {
                right += 1;
                if t.span.as_ref() == Some(span) {
                    right_span += 1;
                } else {
                    let name = |id: Option<&String>| {
                        id.and_then(|id| names.get(id))
                            .cloned()
                            .unwrap_or_else(|| "?".into())
                    };
                    *misplaced
                        .entry((name(t.span.as_ref()), name(Some(span))))
                        .or_default() += 1;
                }
            }
            Some(_) => wrong += 1,
            None => {}
        }
    }
    let share = |n: u64| n as f64 / lines.max(1) as f64;
    let mut misplaced: Vec<_> = misplaced.into_iter().collect();
    misplaced.sort_by_key(|m| std::cmp::Reverse(m.1));
    let misplaced: Vec<_> = misplaced
        .iter()
        .take(8)
        .map(|((truth, placed), n)| json!({"span": truth, "placed_on": placed, "lines": n}))
        .collect();
    Ok(json!({
        "lines": lines,
        "misplaced_most": misplaced,
        "right_trace": share(right),
        "right_span": share(right_span),
        "wrong_trace": share(wrong),
        "left_out": share(lines - right - wrong),
        "report": joined.report,
        "join_ns_per_line": took.as_nanos() as f64 / joined.report.lines.max(1) as f64,
    }))
}

/// A line of `truth.jsonl`: the trace and span its line named.
#[derive(serde::Deserialize)]
struct TruthLine {
    file: String,
    line: u32,
    trace: String,
    span: Option<String>,
}

pub fn run(a: LogsDemoArgs) -> Result<()> {
    let (_root, dirs) = a.runs.dirs("logs-demo")?;
    let mut rows = Vec::new();
    for (rate, dir) in dirs {
        if !a.runs.reuse {
            eprintln!("running the demo at {rate}/s for {}", a.runs.duration);
            run_demo(&dir, rate, a.runs.duration)?;
            strip(&dir)?;
        }
        let options = crate::logs::stitch_options(a.quiet_ms);
        let mut row = crate::logs::score_set(&dir, &options)?;
        row["join"] = score_join(&dir, options)?;
        row["set"] = json!(format!("demo {rate}/s"));
        row["rate"] = json!(rate);
        rows.push(row);
    }
    crate::logs::print_rows(&rows, a.json)?;
    if !a.json {
        outln!();
        outln!("joined to the stored traces (`causeway logs --join`), lines that named a trace:");
        outln!(
            "{:<12} {:>8} {:>12} {:>11} {:>12} {:>9} {:>12}",
            "set",
            "lines",
            "right trace",
            "right span",
            "wrong trace",
            "left out",
            "ns per line"
        );
        for r in &rows {
            let j = &r["join"];
            let f = |k: &str| j[k].as_f64().unwrap_or(f64::NAN);
            outln!(
                "{:<12} {:>8} {:>11.1}% {:>10.1}% {:>11.1}% {:>8.1}% {:>12.0}",
                r["set"].as_str().unwrap_or(""),
                f("lines"),
                f("right_trace") * 100.0,
                f("right_span") * 100.0,
                f("wrong_trace") * 100.0,
                f("left_out") * 100.0,
                f("join_ns_per_line"),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_trace_id_and_place_are_cut_off_and_returned() {
        let id = "a2cd7f8497f529f3ae8ebcab0f2ac4a1";
        let line = format!(
            "2026-11-26T09:53:08Z  INFO x: lookup key=rec-27 span_id=00f067aa0ba902b7 trace_id={id}"
        );
        let (rest, trace) = strip_trace_id(&line);
        assert_eq!(trace, Some(id));
        assert_eq!(
            strip_span_id(rest),
            (
                "2026-11-26T09:53:08Z  INFO x: lookup key=rec-27",
                Some("00f067aa0ba902b7")
            )
        );
        assert_eq!(strip_span_id("x span_id=123"), ("x span_id=123", None));
        let placed = "INFO x: lookup key=rec-27 code.filepath=demo/src/x.rs code.lineno=31";
        assert_eq!(
            strip_place(placed),
            (
                "INFO x: lookup key=rec-27",
                Some("demo/src/x.rs:31".to_owned())
            )
        );
        let unplaced = "INFO x: code.filepath=a.rs code.lineno=x1";
        assert_eq!(strip_place(unplaced), (unplaced, None));
        let short = "INFO x: note trace_id=abc";
        assert_eq!(strip_trace_id(short), (short, None));
        assert_eq!(strip_trace_id("no id here"), ("no id here", None));
    }
}
