//! `causeway-bench capture`: what the socket-capture library adds, on `causeway
//! echo-node` run with and without it in the same round (interleaved, so both see the
//! same machine). Per intercepted call: the inline echo's median round (four socket calls,
//! no wake-ups) and a write to /dev/null (one call, not a socket). Throughput: the
//! two-process echo's round trips per second.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;

use crate::echo::EchoSummary;
use crate::stats::{mean_ci, median};

#[derive(Args)]
pub struct CaptureBenchArgs {
    /// Rounds; each runs every case with and without capture.
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Round trips per inline run (and writes per /dev/null run).
    #[arg(long, default_value_t = 200_000)]
    inline_rounds: u64,
    /// Round trips per two-process run.
    #[arg(long, default_value_t = 20_000)]
    pair_rounds: u64,
    /// Bytes per message.
    #[arg(long, default_value_t = 64)]
    size: usize,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// One case: its echo-node arguments and the intercepted calls per round.
struct Case {
    name: &'static str,
    args: &'static [&'static str],
    calls_per_round: f64,
    pair: bool,
}

const CASES: [Case; 3] = [
    Case {
        name: "inline tcp (4 socket calls a round)",
        args: &["--inline"],
        calls_per_round: 4.0,
        pair: false,
    },
    Case {
        name: "/dev/null write (not a socket)",
        args: &["--transport", "file"],
        calls_per_round: 1.0,
        pair: false,
    },
    Case {
        name: "two-process tcp echo",
        args: &["--transport", "tcp"],
        calls_per_round: 4.0,
        pair: true,
    },
];

fn echo(
    args: &[&str],
    rounds: u64,
    size: usize,
    preload: Option<(&Path, &Path)>,
) -> Result<EchoSummary> {
    let exe = std::env::current_exe().context("finding the causeway-bench binary")?;
    let mut cmd = Command::new(exe);
    cmd.arg("echo-node").args(args).args([
        "--rounds",
        &rounds.to_string(),
        "--size",
        &size.to_string(),
    ]);
    if let Some((library, dir)) = preload {
        cmd.env("LD_PRELOAD", library)
            .env(causeway_blackbox::format::DIR_VAR, dir);
    }
    let out = cmd.output().context("running echo-node")?;
    if !out.status.success() {
        bail!("echo-node failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    serde_json::from_slice(&out.stdout).context("reading echo-node's summary")
}

pub fn run(a: CaptureBenchArgs) -> Result<()> {
    if a.runs < 2 {
        bail!("--runs {}: at least 2, for a confidence interval", a.runs);
    }
    let library = causeway_cli::capture::library_file()?;
    let dir = std::env::temp_dir().join(format!("causeway-bench-capture-{}", std::process::id()));
    let progress = indicatif::ProgressBar::new((a.runs * CASES.len() * 2) as u64);
    // Per case: (plain, captured) summaries, one pair per round.
    let mut results: Vec<Vec<(EchoSummary, EchoSummary)>> =
        CASES.iter().map(|_| Vec::new()).collect();
    for round in 0..a.runs {
        for (case, out) in CASES.iter().zip(&mut results) {
            let rounds = if case.pair {
                a.pair_rounds
            } else {
                a.inline_rounds
            };
            std::fs::create_dir_all(&dir)?;
            // Alternate which goes first, so neither always runs on a warmer machine.
            let (plain, captured) = if round % 2 == 0 {
                let p = echo(case.args, rounds, a.size, None)?;
                progress.inc(1);
                (p, echo(case.args, rounds, a.size, Some((&library, &dir)))?)
            } else {
                let c = echo(case.args, rounds, a.size, Some((&library, &dir)))?;
                progress.inc(1);
                (echo(case.args, rounds, a.size, None)?, c)
            };
            progress.inc(1);
            std::fs::remove_dir_all(&dir)?;
            out.push((plain, captured));
        }
    }
    progress.finish_and_clear();
    let mut rows = Vec::new();
    for (case, runs) in CASES.iter().zip(&results) {
        let added: Vec<f64> = runs
            .iter()
            .map(|(p, c)| (c.median_ns as f64 - p.median_ns as f64) / case.calls_per_round)
            .collect();
        let loss: Vec<f64> = runs
            .iter()
            .map(|(p, c)| 100.0 * (1.0 - p.total_ns as f64 / c.total_ns as f64))
            .collect();
        let (added_mean, added_ci) = mean_ci(&added);
        let (loss_mean, loss_ci) = mean_ci(&loss);
        rows.push(json!({
            "case": case.name,
            "plain_median_round_ns": median(runs.iter().map(|(p, _)| p.median_ns as f64).collect()),
            "captured_median_round_ns": median(runs.iter().map(|(_, c)| c.median_ns as f64).collect()),
            "added_per_call_ns": added_mean,
            "added_per_call_ci_ns": added_ci,
            "throughput_loss_percent": loss_mean,
            "throughput_loss_ci_percent": loss_ci,
        }));
    }
    if a.json {
        outln!(
            "{}",
            serde_json::to_string(&json!({ "runs": a.runs, "size": a.size, "cases": rows }))?
        );
        return Ok(());
    }
    outln!(
        "{} rounds, captured and uncaptured interleaved; mean ± 95% CI over rounds",
        a.runs
    );
    outln!(
        "{:<38} {:>14} {:>14} {:>22} {:>20}",
        "case",
        "plain round",
        "captured",
        "added per call",
        "throughput loss"
    );
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        outln!(
            "{:<38} {:>11.0} ns {:>11.0} ns {:>11.1} ± {:>5.1} ns {:>10.2}% ± {:>5.2}",
            r["case"].as_str().unwrap_or_default(),
            f("plain_median_round_ns"),
            f("captured_median_round_ns"),
            f("added_per_call_ns"),
            f("added_per_call_ci_ns"),
            f("throughput_loss_percent"),
            f("throughput_loss_ci_percent"),
        );
    }
    Ok(())
}
