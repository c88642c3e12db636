//! What every benchmark shares: scratch directories, clocks, latency percentiles, this
//! process's memory and CPU, and the report.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};

/// A directory given, or a temporary one removed when dropped.
pub(crate) struct TempDir(pub(crate) PathBuf, bool);

impl TempDir {
    pub(crate) fn new(given: Option<PathBuf>, tag: &str) -> TempDir {
        match given {
            Some(p) => TempDir(p, false),
            None => TempDir(
                std::env::temp_dir().join(format!("causeway-bench-{tag}-{}", std::process::id())),
                true,
            ),
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.1 {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

pub(crate) use causeway_testkit::now_ns;

/// Percentiles of latencies, in milliseconds.
pub(crate) fn percentiles(mut v: Vec<Duration>) -> serde_json::Value {
    if v.is_empty() {
        return serde_json::Value::Null;
    }
    v.sort();
    let at = |q: f64| {
        let i = ((v.len() as f64 - 1.0) * q).round() as usize;
        (v[i].as_secs_f64() * 1e6).round() / 1e3
    };
    serde_json::json!({ "p50_ms": at(0.5), "p90_ms": at(0.9), "p99_ms": at(0.99), "max_ms": at(1.0), "n": v.len() })
}

pub(crate) fn peak_rss_mib() -> Option<f64> {
    memory_mib("VmHWM:")
}

/// CPU time this process has used (user and system), from /proc/self/stat. Less noisy
/// than wall time for comparing builds of a parallel scan on a shared machine.
pub(crate) fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let mut rest = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let user: f64 = rest.nth(11)?.parse().ok()?;
    let system: f64 = rest.next()?.parse().ok()?;
    // The kernel reports these in USER_HZ ticks, 100 a second on Linux.
    Some((user + system) / 100.0)
}

pub(crate) fn current_rss_mib() -> Option<f64> {
    memory_mib("VmRSS:")
}

/// A memory figure of this process from /proc/self/status, in MiB.
pub(crate) fn memory_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some((kb / 1024.0 * 10.0).round() / 10.0)
}

pub(crate) fn report(result: &serde_json::Value, json: bool) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string_pretty(result)?);
    } else if let Some(map) = result.as_object() {
        for (k, v) in map {
            outln!("{k:>22}  {v}");
        }
    }
    Ok(())
}

/// The `causeway` binary built beside this one (`cargo build --release -p causeway-cli
/// -p causeway-bench` builds both): what a benchmark runs as processes of its own.
pub fn causeway_exe() -> Result<PathBuf> {
    let bench = std::env::current_exe().context("finding the causeway-bench executable")?;
    // A test's executable is one directory further down, in deps/.
    let beside =
        |dir: &std::path::Path| dir.join(format!("causeway{}", std::env::consts::EXE_SUFFIX));
    let candidates: Vec<PathBuf> = bench.ancestors().skip(1).take(2).map(beside).collect();
    candidates
        .iter()
        .find(|p| p.is_file())
        .cloned()
        .with_context(|| {
            format!(
                "no causeway binary at {}: build it beside causeway-bench \
                 (cargo build --release -p causeway-cli -p causeway-bench)",
                candidates[0].display()
            )
        })
}

/// Bytes per span, to a tenth.
pub(crate) fn per_span(bytes: usize, spans: usize) -> f64 {
    (bytes as f64 / spans.max(1) as f64 * 10.0).round() / 10.0
}
