//! `causeway-bench logs-demo`: request flows stitched from the demo's own logs, at
//! several loads. The demo writes `tracing` fmt logs with each line's trace id at its
//! end; the ids are stripped before stitching and kept as the ground truth.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use causeway_demo::logs::{FILEPATH_KEY, LINENO_KEY, TRACE_ID_KEY};
use clap::Args;
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

/// The line without its trace id, and the id (None when the line has none).
fn strip_trace_id(line: &str) -> (&str, Option<&str>) {
    let Some(at) = line.rfind(TRACE_ID_KEY) else {
        return (line, None);
    };
    let id = &line[at + TRACE_ID_KEY.len()..];
    if id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        (line[..at].trim_end(), Some(id))
    } else {
        (line, None)
    }
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
/// `dir/truth.jsonl` (a line with no trace id is a request of its own).
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
            let (stripped, point) = strip_place(stripped);
            writeln!(out, "{stripped}")?;
            let trace = trace.map_or_else(|| format!("-{file}:{}", n + 1), str::to_owned);
            let row = json!({"file": file, "line": n + 1, "trace": trace, "point": point});
            writeln!(truth, "{row}")?;
        }
        out.flush()?;
    }
    Ok(truth.flush()?)
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
        let mut row = crate::logs::score_set(&dir, &crate::logs::stitch_options(a.quiet_ms))?;
        row["set"] = json!(format!("demo {rate}/s"));
        row["rate"] = json!(rate);
        rows.push(row);
    }
    crate::logs::print_rows(&rows, a.json)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trailing_trace_id_and_place_are_cut_off_and_returned() {
        let id = "a2cd7f8497f529f3ae8ebcab0f2ac4a1";
        let line = format!("2026-11-26T09:53:08Z  INFO x: lookup key=rec-27 trace_id={id}");
        assert_eq!(
            strip_trace_id(&line),
            ("2026-11-26T09:53:08Z  INFO x: lookup key=rec-27", Some(id))
        );
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
