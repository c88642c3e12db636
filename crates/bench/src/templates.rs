//! `causeway-bench templates`: log points mined by Drain against the true ones (the
//! macro call that wrote each line, which the demo's logs carry and `bench logs-demo`
//! keeps as truth), side by side with Drain3 mining the same messages. Accuracy is
//! grouping accuracy as the Loghub benchmark counts it (a line is right when the lines
//! of its template are exactly the lines of its log point), and B-cubed F1. Drain3 is run
//! by `python3` from a script embedded in the binary (`crates/bench/src/drain3_peer.py`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use causeway_logflow::corpus::Corpus;
use causeway_logflow::drain::Options;
use causeway_logflow::header;
use causeway_logflow::score::{bcubed, Score};
use clap::Args;
use foldhash::HashMap;
use serde::Deserialize;
use serde_json::json;

/// The peer, run with `python3` (it needs `pip install drain3`).
const DRAIN3_PEER: &str = include_str!("drain3_peer.py");
/// The peer's configurations (see the script).
const PEER_MODES: [&str; 2] = ["default", "masked"];

#[derive(Args)]
pub struct TemplatesBenchArgs {
    /// Directories each holding `logs/` and `truth.jsonl` with each line's `point`, as
    /// `causeway-bench logs-demo --keep DIR` leaves them (DIR/rate-*).
    #[arg(long = "set", required = true)]
    sets: Vec<PathBuf>,
    /// Leave the peer (Drain3, run with python3) out.
    #[arg(long)]
    no_peer: bool,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Deserialize)]
struct TruthLine {
    file: String,
    line: u32,
    point: Option<String>,
}

type Key = (String, u32);

pub fn run(a: TemplatesBenchArgs) -> Result<()> {
    let scratch = crate::harness::TempDir::new(None, "templates");
    std::fs::create_dir_all(&scratch.0)?;
    let mut rows = Vec::new();
    for set in &a.sets {
        rows.push(score_set(set, !a.no_peer, &scratch.0)?);
    }
    print_rows(&rows, a.json)
}

fn score_set(set: &Path, peer: bool, scratch: &Path) -> Result<serde_json::Value> {
    let files = crate::logs::read_logs(&set.join("logs"))?;
    let truth: Vec<(Key, String)> = crate::logs::read_truth::<TruthLine>(set)?
        .into_iter()
        .filter_map(|t| Some(((t.file, t.line), t.point?)))
        .collect();
    if truth.is_empty() {
        bail!(
            "{} gives no line its log point (`point`): runs of `causeway-bench logs-demo` \
             from before the demo wrote them have none",
            set.join("truth.jsonl").display()
        );
    }
    let points = truth
        .iter()
        .map(|(_, p)| p.as_str())
        .collect::<foldhash::HashSet<_>>()
        .len();
    let start = Instant::now();
    let corpus = Corpus::read(&files, Options::default());
    let seconds = start.elapsed().as_secs_f64();
    let ours: HashMap<Key, u32> = corpus
        .lines
        .iter()
        .map(|l| {
            (
                (corpus.files[l.file as usize].clone(), l.number),
                l.template,
            )
        })
        .collect();
    let mut row = json!({
        "set": set.file_name().map(|f| f.to_string_lossy().into_owned()),
        "lines": truth.len(),
        "points": points,
        "causeway": scored(&truth, &ours, corpus.miner.templates().len(), seconds),
    });
    if peer {
        let (keys, messages) = messages(&files);
        let input = scratch.join("messages.txt");
        std::fs::write(&input, messages.join("\n") + "\n")?;
        let script = scratch.join("drain3_peer.py");
        std::fs::write(&script, DRAIN3_PEER)?;
        for mode in PEER_MODES {
            row[format!("drain3 {mode}")] = match run_peer(&script, &input, mode) {
                Ok(out) => {
                    let found: HashMap<Key, u64> = keys.iter().cloned().zip(out.clusters).collect();
                    scored(&truth, &found, out.templates, out.seconds)
                }
                Err(e) => json!({ "error": format!("{e:#}") }),
            };
        }
    }
    Ok(row)
}

/// Each line's key and message (its header taken off as `causeway logs` does), in file
/// order.
fn messages(files: &[causeway_logflow::input::LogFile]) -> (Vec<Key>, Vec<String>) {
    let (mut keys, mut messages) = (Vec::new(), Vec::new());
    for (name, bytes) in files {
        for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
            let line = String::from_utf8_lossy(line.strip_suffix(b"\r").unwrap_or(line));
            if line.is_empty() {
                continue;
            }
            // The peer reads a message a line.
            messages.push(header::parse(&line).message.replace(['\n', '\r'], " "));
            keys.push((name.clone(), n as u32 + 1));
        }
    }
    (keys, messages)
}

fn scored<F: std::hash::Hash + Eq>(
    truth: &[(Key, String)],
    found: &HashMap<Key, F>,
    templates: usize,
    seconds: f64,
) -> serde_json::Value {
    let Score {
        exact_items, f1, ..
    } = bcubed(truth, found);
    json!({
        "templates": templates,
        "grouping_accuracy": exact_items,
        "f1": f1,
        "seconds": seconds,
        "lines_per_s": truth.len() as f64 / seconds.max(1e-9),
    })
}

#[derive(Deserialize)]
struct PeerOutput {
    clusters: Vec<u64>,
    templates: usize,
    seconds: f64,
}

fn run_peer(script: &Path, input: &Path, mode: &str) -> Result<PeerOutput> {
    let out = Command::new("python3")
        .arg(script)
        .arg(input)
        .arg(mode)
        .output()
        .context("running python3 (the peer needs python3 and `pip install drain3`)")?;
    if !out.status.success() {
        bail!(
            "the Drain3 peer failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    serde_json::from_slice(&out.stdout).context("reading the Drain3 peer's output")
}

fn print_rows(rows: &[serde_json::Value], json_out: bool) -> Result<()> {
    if json_out {
        outln!("{}", serde_json::to_string(rows)?);
        return Ok(());
    }
    outln!(
        "{:<12} {:>7} {:>6}  {:<16} {:>9} {:>8} {:>7} {:>11}",
        "set",
        "lines",
        "points",
        "miner",
        "templates",
        "GA",
        "F1",
        "lines/s"
    );
    for r in rows {
        for miner in ["causeway", "drain3 default", "drain3 masked"] {
            let m = &r[miner];
            if m.is_null() {
                continue;
            }
            if let Some(e) = m["error"].as_str() {
                outln!("{:<12} {:>7} {:>6}  {miner:<16} {e}", "", "", "");
                continue;
            }
            let f = |k: &str| m[k].as_f64().unwrap_or(0.0);
            outln!(
                "{:<12} {:>7} {:>6}  {miner:<16} {:>9} {:>8.3} {:>7.3} {:>11.0}",
                r["set"].as_str().unwrap_or(""),
                r["lines"].as_u64().unwrap_or(0),
                r["points"].as_u64().unwrap_or(0),
                f("templates"),
                f("grouping_accuracy"),
                f("f1"),
                f("lines_per_s"),
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_gets_each_line_s_message_keyed_by_file_and_line() {
        let log = "2026-11-26T09:53:08.1Z  INFO worker shop::log: lookup key=rec-27\n\n\
                   2026-11-26T09:53:08.2Z  WARN worker shop::log: fsync stall\n";
        let (keys, messages) = messages(&[("a.log".into(), log.as_bytes().to_vec())]);
        assert_eq!(keys, [("a.log".to_owned(), 1), ("a.log".to_owned(), 3)]);
        assert_eq!(messages, ["lookup key=rec-27", "fsync stall"]);
    }

    #[test]
    fn grouping_accuracy_counts_the_lines_of_exactly_right_groups() {
        let key = |n: u32| ("a.log".to_owned(), n);
        // Point p is split in two templates; point q is found whole.
        let truth: Vec<(Key, String)> = [(1, "p"), (2, "p"), (3, "q"), (4, "q")]
            .into_iter()
            .map(|(n, p)| (key(n), p.to_owned()))
            .collect();
        let found: HashMap<Key, u32> = [(key(1), 0), (key(2), 1), (key(3), 2), (key(4), 2)]
            .into_iter()
            .collect();
        let row = scored(&truth, &found, 3, 2.0);
        assert_eq!(row["grouping_accuracy"], 0.5);
        assert_eq!(row["templates"], 3);
        assert_eq!(row["lines_per_s"], 2.0);
    }
}
