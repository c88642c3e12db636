//! `causeway-bench infer`: how well linking recovers real traces from messages with
//! ground truth, WAP5's linking and the greedy baseline side by side, and how long each
//! takes.

use std::io::BufRead as _;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use std::collections::HashMap;

use causeway_blackbox::infer::read_messages;
use causeway_blackbox::link::{link, patterns_of, LinkOptions, Mode, Pattern};
use causeway_blackbox::score::{score, Truth};
use causeway_blackbox::truth::{assignments, latest_causes};
use clap::Args;
use serde_json::json;

/// True patterns whose expected counts are compared, at most.
const TOP_PATTERNS: usize = 5;

/// Patterns holding at least 1% of the traces, the commonest first.
pub(crate) fn common(patterns: &[Pattern]) -> Vec<&Pattern> {
    let total: u64 = patterns.iter().map(|p| p.count).sum();
    let mut common: Vec<&Pattern> = patterns
        .iter()
        .filter(|p| p.count as f64 >= 0.01 * total as f64)
        .collect();
    common.sort_by_key(|p| std::cmp::Reverse(p.count));
    common
}

#[derive(Args)]
pub struct InferBenchArgs {
    /// Directories each holding `messages.jsonl` and `truth.jsonl` (default: the two
    /// TraceWeaver sets in testdata/traceweaver).
    #[arg(long = "set")]
    sets: Vec<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

fn read_truth(path: &PathBuf) -> Result<Vec<Truth>> {
    let file = std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    std::io::BufReader::new(file)
        .lines()
        .enumerate()
        .filter(|(_, l)| l.as_ref().map_or(true, |l| !l.trim().is_empty()))
        .map(|(n, l)| {
            let l = l.with_context(|| format!("{}:{}", path.display(), n + 1))?;
            serde_json::from_str(&l).with_context(|| format!("{}:{}", path.display(), n + 1))
        })
        .collect()
}

pub fn run(a: InferBenchArgs) -> Result<()> {
    let sets = if a.sets.is_empty() {
        ["node_load150", "hotel_load150"]
            .iter()
            .map(|s| PathBuf::from("testdata/traceweaver").join(s))
            .collect()
    } else {
        a.sets.clone()
    };
    let mut rows = Vec::new();
    for set in &sets {
        let mut messages = Vec::new();
        for skipped in read_messages(&set.join("messages.jsonl"), &mut messages)? {
            eprintln!("warning: {skipped}");
        }
        // The fixtures' parents name the request a message serves, as linking's do;
        // its causes (WAP5's) are found from them.
        let truth = latest_causes(&messages, &read_truth(&set.join("truth.jsonl"))?);
        let true_patterns = patterns_of(&messages, &assignments(&truth), &LinkOptions::default());
        for (name, mode) in [
            ("greedy", Mode::Greedy),
            ("faithful", Mode::Faithful),
            ("connections", Mode::Connections),
        ] {
            let start = Instant::now();
            let linked = link(&messages, mode, &LinkOptions::default());
            let ms = start.elapsed().as_secs_f64() * 1e3;
            let s = score(&truth, &linked.assignments(&messages));
            // The expected counts of the commonest true patterns (of those with 1% of
            // the traces, as the pattern recall counts them), against their true
            // counts: the largest error.
            let expected: HashMap<&str, f64> = linked
                .patterns
                .iter()
                .map(|p| (p.shape.as_str(), p.expected))
                .collect();
            let top_pattern_error = common(&true_patterns)
                .iter()
                .take(TOP_PATTERNS)
                .map(|p| {
                    let got = expected.get(p.shape.as_str()).copied().unwrap_or(0.0);
                    (got - p.count as f64).abs() / p.count as f64
                })
                .fold(0.0, f64::max);
            rows.push(json!({
                "set": set.file_name().map(|f| f.to_string_lossy().into_owned()),
                "mode": name,
                "messages": messages.len(),
                "precision": s.precision,
                "recall": s.recall,
                "f1": s.f1,
                "exact_traces": s.exact_traces,
                "right_parents": s.right_parents,
                "right_causes": s.right_causes,
                "top_pattern_error": top_pattern_error,
                "link_ms": ms,
            }));
        }
    }
    if a.json {
        outln!("{}", serde_json::to_string(&rows)?);
        return Ok(());
    }
    outln!(
        "{:<16} {:<11} {:>9} {:>9} {:>7} {:>7} {:>8} {:>7} {:>9} {:>9}",
        "set",
        "mode",
        "precision",
        "recall",
        "F1",
        "exact",
        "parents",
        "causes",
        "top pat±",
        "link ms"
    );
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        outln!(
            "{:<16} {:<11} {:>9.3} {:>9.3} {:>7.3} {:>7.3} {:>8.3} {:>7.3} {:>8.1}% {:>9.1}",
            r["set"].as_str().unwrap_or_default(),
            r["mode"].as_str().unwrap_or_default(),
            f("precision"),
            f("recall"),
            f("f1"),
            f("exact_traces"),
            f("right_parents"),
            f("right_causes"),
            f("top_pattern_error") * 100.0,
            f("link_ms"),
        );
    }
    Ok(())
}
