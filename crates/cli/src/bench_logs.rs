//! `causeway bench logs`: request flows stitched from logs, scored against ground truth,
//! and how fast (issue 19).

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use causeway_logflow::corpus::Corpus;
use causeway_logflow::drain::Options;
use causeway_logflow::ids::rank;
use causeway_logflow::score::bcubed;
use causeway_logflow::stitch::{stitch, StitchOptions};
use clap::Args;
use serde::Deserialize;
use serde_json::json;

#[derive(Args)]
pub struct LogsBenchArgs {
    /// Directories each holding `logs/` and `truth.jsonl` (`{"file", "line", "trace"}`
    /// per line; default: testdata/nezha).
    #[arg(long = "set")]
    sets: Vec<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Deserialize)]
struct TruthLine {
    file: String,
    line: u32,
    trace: String,
}

pub fn run(a: LogsBenchArgs) -> Result<()> {
    let sets = if a.sets.is_empty() {
        vec![PathBuf::from("testdata/nezha")]
    } else {
        a.sets.clone()
    };
    let mut rows = Vec::new();
    for set in &sets {
        let (files, _) = crate::logs::read_paths(&[set.join("logs")])?;
        let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
        let truth_path = set.join("truth.jsonl");
        let text = std::fs::read_to_string(&truth_path)
            .with_context(|| format!("reading {}", truth_path.display()))?;
        let truth: Vec<((String, u32), String)> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(n, l)| {
                let t: TruthLine = serde_json::from_str(l)
                    .with_context(|| format!("{}:{}", truth_path.display(), n + 1))?;
                Ok(((t.file, t.line), t.trace))
            })
            .collect::<Result<_>>()?;
        let start = Instant::now();
        let corpus = Corpus::read(&files, Options::default());
        let mined = start.elapsed();
        let ranked = rank(&corpus);
        let requests = stitch(&corpus, &ranked, &StitchOptions::default());
        let took = start.elapsed();
        let found: foldhash::HashMap<(String, u32), u32> = corpus
            .lines
            .iter()
            .zip(&requests)
            .flat_map(|(line, &r)| {
                let file = corpus.files[line.file as usize].clone();
                std::iter::once(line.number)
                    .chain(line.continued.iter().copied())
                    .map(move |n| ((file.clone(), n), r))
            })
            .collect();
        let s = bcubed(&truth, &found);
        rows.push(json!({
            "set": set.file_name().map(|f| f.to_string_lossy().into_owned()),
            "files": files.len(),
            "lines": s.items,
            "bytes": bytes,
            "templates": corpus.miner.templates().len(),
            "requests": requests.iter().max().map_or(0, |m| m + 1),
            "precision": s.precision,
            "recall": s.recall,
            "f1": s.f1,
            "exact": s.exact_items,
            "read_and_mined_s": mined.as_secs_f64(),
            "total_s": took.as_secs_f64(),
            "mb_per_s": bytes as f64 / 1e6 / took.as_secs_f64(),
        }));
    }
    if a.json {
        outln!("{}", serde_json::to_string(&rows)?);
        return Ok(());
    }
    outln!(
        "{:<10} {:>7} {:>6} {:>9} {:>9} {:>7} {:>7} {:>8} {:>8}",
        "set",
        "lines",
        "MB",
        "precision",
        "recall",
        "F1",
        "exact",
        "requests",
        "MB/s"
    );
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        outln!(
            "{:<10} {:>7} {:>6.1} {:>9.3} {:>9.3} {:>7.3} {:>7.3} {:>8} {:>8.1}",
            r["set"].as_str().unwrap_or(""),
            r["lines"],
            f("bytes") / 1e6,
            f("precision"),
            f("recall"),
            f("f1"),
            f("exact"),
            r["requests"],
            f("mb_per_s"),
        );
    }
    Ok(())
}
