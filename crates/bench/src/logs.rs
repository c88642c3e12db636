//! `causeway-bench logs`: request flows stitched from logs, scored against ground truth,
//! and how fast (issue 19).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use causeway_logflow::corpus::Corpus;
use causeway_logflow::drain::Options;
use causeway_logflow::ids::rank;
use causeway_logflow::links::{learn, LinkOptions};
use causeway_logflow::score::bcubed;
use causeway_logflow::stitch::{stitch, StitchOptions};
use clap::Args;
use serde::Deserialize;
use serde_json::json;

#[derive(Args)]
pub struct LogsBenchArgs {
    /// Directories each holding `logs/` and `truth.jsonl` (`{"file", "line", "trace"}`
    /// per line; default: testdata/nezha and testdata/nezha-ob).
    #[arg(long = "set")]
    sets: Vec<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// As `causeway logs --quiet-ms`.
    #[arg(long, value_name = "MS", default_value_t = 50)]
    quiet_ms: u64,
}

#[derive(Deserialize)]
struct TruthLine {
    file: String,
    line: u32,
    trace: String,
}

pub fn run(a: LogsBenchArgs) -> Result<()> {
    let sets = if a.sets.is_empty() {
        vec![
            PathBuf::from("testdata/nezha"),
            PathBuf::from("testdata/nezha-ob"),
        ]
    } else {
        a.sets.clone()
    };
    let rows = sets
        .iter()
        .map(|s| score_set(s, &stitch_options(a.quiet_ms)))
        .collect::<Result<Vec<_>>>()?;
    print_rows(&rows, a.json)
}

/// Stitches the logs of `set` (`logs/`, `truth.jsonl`) and scores them against the truth.
pub(crate) fn score_set(set: &Path, options: &StitchOptions) -> Result<serde_json::Value> {
    let files = read_logs(&set.join("logs"))?;
    let bytes: usize = files.iter().map(|(_, b)| b.len()).sum();
    let truth: Vec<((String, u32), String)> = read_truth::<TruthLine>(set)?
        .into_iter()
        .map(|t| ((t.file, t.line), t.trace))
        .collect();
    let true_requests = truth
        .iter()
        .map(|(_, t)| t.as_str())
        .collect::<foldhash::HashSet<_>>()
        .len();
    let start = Instant::now();
    let corpus = Corpus::read(&files, Options::default());
    let mined = start.elapsed();
    let ranked = rank(&corpus);
    let ranked_at = start.elapsed();
    let links = learn(&corpus, &LinkOptions::default());
    let learned_at = start.elapsed();
    let requests = stitch(&corpus, &ranked, &links, options);
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
    let baseline = bcubed(&truth, &per_second(&corpus, true));
    let baseline_all_files = bcubed(&truth, &per_second(&corpus, false));
    let stored = stored_bytes(&corpus, &files, &requests)?;
    Ok(json!({
        "stored_bytes": stored,
        "stored_share": stored as f64 / bytes.max(1) as f64,
        "concurrency": concurrency(&corpus, &truth),
        "set": set.file_name().map(|f| f.to_string_lossy().into_owned()),
        "files": files.len(),
        "lines": s.items,
        "bytes": bytes,
        "templates": corpus.miner.templates().len(),
        "requests": requests.iter().max().map_or(0, |m| m + 1),
        "true_requests": true_requests,
        "precision": s.precision,
        "recall": s.recall,
        "f1": s.f1,
        "exact": s.exact_items,
        "baseline_f1": baseline.f1,
        "baseline_all_files_f1": baseline_all_files.f1,
        "read_and_mined_s": mined.as_secs_f64(),
        "ranked_s": (ranked_at - mined).as_secs_f64(),
        "links_s": (learned_at - ranked_at).as_secs_f64(),
        "stitched_s": (took - learned_at).as_secs_f64(),
        "total_s": took.as_secs_f64(),
        "mb_per_s": bytes as f64 / 1e6 / took.as_secs_f64(),
    }))
}

/// The baselines: the lines of one wall-clock second as one request, each file's apart
/// (`by_file`) or all files' together (a line with no time, with the untimed lines).
fn per_second(corpus: &Corpus, by_file: bool) -> foldhash::HashMap<(String, u32), u32> {
    let mut ids: foldhash::HashMap<(u32, Option<i64>), u32> = Default::default();
    let mut found = foldhash::HashMap::default();
    for line in &corpus.lines {
        let second = line.time_ns.map(|t| t.div_euclid(1_000_000_000));
        let next = ids.len() as u32;
        let file = if by_file { line.file } else { 0 };
        let id = *ids.entry((file, second)).or_insert(next);
        let name = &corpus.files[line.file as usize];
        for n in std::iter::once(line.number).chain(line.continued.iter().copied()) {
            found.insert((name.clone(), n), id);
        }
    }
    found
}

/// `causeway logs`' stitching options with `--quiet-ms`.
pub(crate) fn stitch_options(quiet_ms: u64) -> StitchOptions {
    StitchOptions {
        quiet_ns: i64::try_from(quiet_ms.saturating_mul(1_000_000)).unwrap_or(i64::MAX),
        ..causeway_logflow::Options::default().stitch
    }
}

/// The logs in `dir`, read whole as `causeway logs` reads them.
pub(crate) fn read_logs(dir: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let read = causeway_logflow::input::read_paths(
        &[dir.to_path_buf()],
        &causeway_cli::progress::Reading::default(),
    )?;
    for w in &read.warnings {
        eprintln!("warning: {w}");
    }
    Ok(read.files)
}

/// The rows of `set/truth.jsonl`, one per line of the logs; a row that does not parse
/// is named by its line.
pub(crate) fn read_truth<T: serde::de::DeserializeOwned>(set: &Path) -> Result<Vec<T>> {
    let path = set.join("truth.jsonl");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str(l).with_context(|| format!("{}:{}", path.display(), n + 1))
        })
        .collect()
}

/// The bytes the stitched requests take in a store (its blocks, after flushing and
/// compacting), as `causeway logs --collector` would store them.
fn stored_bytes(corpus: &Corpus, files: &[(String, Vec<u8>)], requests: &[u32]) -> Result<usize> {
    let dir = crate::harness::TempDir::new(None, "logs-store");
    let store = causeway_store::Store::open(&dir.0, causeway_store::StoreOptions::default())
        .context("opening a scratch store")?;
    let spans = causeway_logflow::traces::spans(corpus, files, requests, 1);
    causeway_store::TraceStore::append(&store, spans).context("storing the stitched requests")?;
    store.flush()?;
    while store.compact()? {}
    Ok(store.stats().block_bytes as usize)
}

/// The mean number of true requests open at once: their time from first to last line,
/// summed, over the time the logs span.
fn concurrency(corpus: &Corpus, truth: &[((String, u32), String)]) -> f64 {
    let trace_of: foldhash::HashMap<(&str, u32), &str> = truth
        .iter()
        .map(|((f, n), t)| ((f.as_str(), *n), t.as_str()))
        .collect();
    let mut spans: foldhash::HashMap<&str, (i64, i64)> = Default::default();
    let (mut first, mut last) = (i64::MAX, i64::MIN);
    for line in &corpus.lines {
        let Some(t) = line.time_ns else { continue };
        (first, last) = (first.min(t), last.max(t));
        let file = corpus.files[line.file as usize].as_str();
        if let Some(trace) = trace_of.get(&(file, line.number)) {
            let e = spans.entry(trace).or_insert((t, t));
            *e = (e.0.min(t), e.1.max(t));
        }
    }
    let open: i64 = spans.values().map(|(a, b)| b - a).sum();
    if last > first {
        open as f64 / (last - first) as f64
    } else {
        0.0
    }
}

/// Prints scored sets as a table, or as JSON.
pub(crate) fn print_rows(rows: &[serde_json::Value], json_out: bool) -> Result<()> {
    if json_out {
        outln!("{}", serde_json::to_string(rows)?);
        return Ok(());
    }
    outln!(
        "{:<12} {:>6} {:>7} {:>6} {:>9} {:>9} {:>7} {:>7} {:>8} {:>6} {:>8} {:>8} {:>8} {:>7}",
        "set",
        "conc",
        "lines",
        "MB",
        "precision",
        "recall",
        "F1",
        "exact",
        "baseline",
        "/ all",
        "requests",
        "true",
        "MB/s",
        "stored"
    );
    for r in rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
        outln!(
            "{:<12} {:>6.1} {:>7} {:>6.1} {:>9.3} {:>9.3} {:>7.3} {:>7.3} {:>8.3} {:>6.3} {:>8} {:>8} {:>8.1} {:>6.1}%",
            r["set"].as_str().unwrap_or(""),
            f("concurrency"),
            f("lines"),
            f("bytes") / 1e6,
            f("precision"),
            f("recall"),
            f("f1"),
            f("exact"),
            f("baseline_f1"),
            f("baseline_all_files_f1"),
            f("requests"),
            f("true_requests"),
            f("mb_per_s"),
            f("stored_share") * 100.0,
        );
    }
    Ok(())
}
