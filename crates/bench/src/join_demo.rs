//! `causeway-bench join-demo`: one request, one trace, when part of the system is not
//! instrumented. `causeway demo` runs its shop behind an edge proxy with no
//! instrumentation, under socket capture, and joins the edge's inferred part of each
//! request to the request's instrumented trace while it runs. The frontend is
//! instrumented, so each of its entry spans is one request the load sent (the ground
//! truth); the store is then read for how many of them became exactly one trace with
//! the edge's part in place, how many inferred parts stayed traces of their own, and (from
//! the demo's own report) how long after a request began its part was sent, joined, and
//! how long the catalog's lines (its log prints no ids) took to be joined, and what
//! inferring the edge's capture cost the demo's agent a pass.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{bail, Context, Result};
use causeway_model::{Source, SpanKind, Trace};
use causeway_store::{Store, StoreOptions, TimeWindow, TraceStore as _};
use clap::Args;
use serde_json::json;

#[derive(Args)]
pub struct JoinDemoArgs {
    #[command(flatten)]
    runs: crate::infer_demo::DemoRuns,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// The demo's line on how fresh the edge's joins were, kept in the run's directory.
const FRESHNESS_FILE: &str = "edge-freshness.txt";
/// Its line on how fresh the joins of the catalog's plain log were.
const PLAIN_FRESHNESS_FILE: &str = "plain-log-freshness.txt";

/// Runs the demo (with its edge) at `rate`, its store in `dir/store`, and keeps its line
/// on the joins' freshness.
fn run_demo(dir: &Path, rate: f64, duration: humantime::Duration) -> Result<()> {
    let exe = crate::harness::causeway_exe()?;
    let (args, _) = crate::infer_demo::demo_args(&dir.join("store"), rate, duration, true)?;
    let out = Command::new(&exe)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running the demo")?;
    if !out.status.success() {
        bail!("the demo ended with {}", out.status);
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("edge: "))
        .context("the demo printed no line on the edge's joins")?;
    std::fs::write(dir.join(FRESHNESS_FILE), line)?;
    let plain = stdout
        .lines()
        .find(|l| l.contains("'s plain log: "))
        .unwrap_or_default();
    std::fs::write(dir.join(PLAIN_FRESHNESS_FILE), plain)?;
    Ok(())
}

/// The p50 and p99 (seconds) of `edge: the parts of N requests joined, p50 X s, p99 Y s
/// after they began`.
fn freshness(line: &str) -> Option<(f64, f64)> {
    let after = |key: &str| -> Option<f64> {
        line.split_once(key)?
            .1
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    Some((after(" p50 ")?, after(" p99 ")?))
}

/// What inferring a window cost the demo's agent: the median pass (ms), the messages it
/// linked and the slowest pass (ms), from `... inferring a window took p50 X ms (N
/// messages), at most Y ms, ...`.
fn inference_cost(line: &str) -> Option<(f64, f64, f64)> {
    let (_, rest) = line.split_once("inferring a window took p50 ")?;
    let number = |text: &str| -> Option<f64> { text.split_whitespace().next()?.parse().ok() };
    let p50 = number(rest)?;
    let messages = number(rest.split_once('(')?.1)?;
    let max = number(rest.split_once("at most ")?.1)?;
    Some((p50, messages, max))
}

/// What the stored traces say of the requests that entered `entry` through `proxy`, a
/// program nobody instrumented.
pub(crate) struct Counts {
    /// The proxy's service, as inferred.
    proxy: &'static str,
    /// The first instrumented service.
    entry: &'static str,
    /// Requests: the entry's server spans not under one of its own.
    requests: AtomicU64,
    /// Requests whose trace has one root (log-record carriers aside), the proxy's inferred
    /// server span, with the proxy's call to the entry the parent of the entry's span.
    joined: AtomicU64,
    /// Proxy calls to the entry that ended at an instrumented entry span (the
    /// dependency graph's proxy -> entry calls).
    edge_calls: AtomicU64,
    /// Traces of inferred spans only: a part of a request that joined no trace.
    stray: AtomicU64,
}

impl Counts {
    pub(crate) fn new(proxy: &'static str, entry: &'static str) -> Counts {
        Counts {
            proxy,
            entry,
            requests: AtomicU64::new(0),
            joined: AtomicU64::new(0),
            edge_calls: AtomicU64::new(0),
            stray: AtomicU64::new(0),
        }
    }

    /// The counts as a row of the report, at `rate` requests a second.
    pub(crate) fn row(&self, rate: f64) -> serde_json::Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let requests = get(&self.requests);
        let share = |n: u64| n as f64 / requests.max(1) as f64;
        json!({
            "rate": rate,
            "requests": requests,
            "joined": get(&self.joined),
            "one_trace": share(get(&self.joined)),
            "edge_calls": get(&self.edge_calls),
            "edge_calls_per_request": share(get(&self.edge_calls)),
            "stray_inferred_traces": get(&self.stray),
        })
    }

    pub(crate) fn add(&self, t: &Trace) {
        let spans = &t.spans;
        if spans
            .iter()
            .all(|s| matches!(s.source, Source::Inferred { .. }))
        {
            self.stray.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let edge = |i: usize| {
            &*spans[i].service == self.proxy && matches!(spans[i].source, Source::Inferred { .. })
        };
        for (i, s) in spans.iter().enumerate() {
            let parent = t.parent[i];
            let entry = &*s.service == self.entry
                && s.kind == SpanKind::Server
                && parent.is_none_or(|p| &*spans[p].service != self.entry);
            if !entry {
                continue;
            }
            self.requests.fetch_add(1, Ordering::Relaxed);
            let Some(call) = parent.filter(|&p| edge(p) && spans[p].kind == SpanKind::Client)
            else {
                continue;
            };
            self.edge_calls.fetch_add(1, Ordering::Relaxed);
            let from_edge = t.parent[call].is_some_and(|r| {
                edge(r) && spans[r].kind == SpanKind::Server && t.parent[r].is_none()
            });
            // Log records no span took stay on a carrier of their own, a root that is no
            // part of the request's tree.
            let roots = t.roots.iter().filter(|&&r| !spans[r].is_carrier()).count();
            if from_edge && roots == 1 {
                self.joined.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

fn measure(dir: &Path, rate: f64, a: &JoinDemoArgs) -> Result<serde_json::Value> {
    if !a.runs.reuse {
        run_demo(dir, rate, a.runs.duration)?;
    }
    let store_dir = dir.join("store");
    let store = Store::open(&store_dir, StoreOptions::default())
        .with_context(|| format!("opening the store in {}", store_dir.display()))?;
    let counts = Counts::new("edge", "frontend");
    store.scan(TimeWindow::ALL, &|t| counts.add(&t))?;
    let line = std::fs::read_to_string(dir.join(FRESHNESS_FILE)).unwrap_or_default();
    let (p50, p99) = freshness(&line).unzip();
    let plain = std::fs::read_to_string(dir.join(PLAIN_FRESHNESS_FILE)).unwrap_or_default();
    let (plain_p50, plain_p99) = freshness(&plain).unzip();
    let cost = inference_cost(&line);
    let mut row = counts.row(rate);
    for (key, value) in [
        ("freshness_p50_s", p50),
        ("freshness_p99_s", p99),
        ("plain_log_freshness_p50_s", plain_p50),
        ("plain_log_freshness_p99_s", plain_p99),
        ("infer_pass_p50_ms", cost.map(|c| c.0)),
        ("infer_pass_messages_p50", cost.map(|c| c.1)),
        ("infer_pass_max_ms", cost.map(|c| c.2)),
    ] {
        row[key] = json!(value);
    }
    Ok(row)
}

pub fn run(a: JoinDemoArgs) -> Result<()> {
    let (_root, dirs) = a.runs.dirs("join-demo")?;
    let mut rows = Vec::new();
    for (rate, dir) in dirs {
        if !a.runs.reuse {
            eprintln!("running the demo at {rate}/s for {}", a.runs.duration);
        }
        rows.push(measure(&dir, rate, &a)?);
    }
    if a.json {
        outln!("{}", serde_json::to_string(&rows)?);
        return Ok(());
    }
    print_rows(&rows, "edge");
    Ok(())
}

/// Prints the rows as a table; `proxy` names the uninstrumented program in front.
pub(crate) fn print_rows(rows: &[serde_json::Value], proxy: &str) {
    let calls = format!("{proxy} calls");
    let logs = rows
        .iter()
        .any(|r| r["plain_log_freshness_p50_s"].is_number());
    let mut header = format!(
        "{:>6} {:>8} {:>8} {:>9} {:>12} {:>6} {:>8} {:>8}",
        "rate/s", "requests", "joined", "one trace", calls, "stray", "fresh50", "fresh99"
    );
    if logs {
        header += &format!(" {:>9} {:>9}", "log50", "log99");
    }
    header += &format!(" {:>10} {:>9} {:>10}", "infer50", "messages", "infer max");
    outln!("{header}");
    for r in rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        let mut line = format!(
            "{:>6} {:>8} {:>8} {:>8.1}% {:>11.1}% {:>6} {:>7.1}s {:>7.1}s",
            f("rate"),
            f("requests"),
            f("joined"),
            f("one_trace") * 100.0,
            f("edge_calls_per_request") * 100.0,
            f("stray_inferred_traces"),
            f("freshness_p50_s"),
            f("freshness_p99_s"),
        );
        if logs {
            line += &format!(
                " {:>8.1}s {:>8.1}s",
                f("plain_log_freshness_p50_s"),
                f("plain_log_freshness_p99_s")
            );
        }
        line += &format!(
            " {:>8.1}ms {:>9} {:>8.1}ms",
            f("infer_pass_p50_ms"),
            f("infer_pass_messages_p50"),
            f("infer_pass_max_ms"),
        );
        outln!("{line}");
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_demos_freshness_line_reads_back() {
        let line = "edge: the parts of 640 requests joined, p50 4.1 s, p99 5.9 s after they began; inferring a window took p50 42.6 ms (1067 messages), at most 81.5 ms, in 9 passes";
        assert_eq!(super::freshness(line), Some((4.1, 5.9)));
        assert_eq!(super::inference_cost(line), Some((42.6, 1067.0, 81.5)));
        assert_eq!(
            super::inference_cost("edge: the parts of 1 requests joined"),
            None
        );
        assert_eq!(super::freshness("edge: nothing"), None);
        let plain = "catalog's plain log: 278 requests stitched and sent, p50 4.0 s, p99 5.1 s after they began";
        assert_eq!(super::freshness(plain), Some((4.0, 5.1)));
    }
}
