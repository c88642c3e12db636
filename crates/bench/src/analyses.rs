//! `causeway-bench analyses` and `expect`: the dependency graph, execution patterns and
//! expectation checks over many stored traces.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Result;
use causeway_store::{FsyncPolicy, Store, StoreOptions};
use causeway_testkit::Generator;
use clap::Args;

use crate::harness::{
    current_rss_mib, now_ns, peak_rss_mib, percentiles, process_cpu_seconds, report, TempDir,
};
use crate::query::{load_into, side_by_side};
use crate::stores::{
    bench_endpoint, drop_database, load, start_clickhouse_server, start_server, Goal,
};
use causeway_cli::client::Client;

#[derive(Args)]
pub struct ExpectArgs {
    /// The store: traces, request types, runs, directory (as for `bench analyses`).
    #[command(flatten)]
    store: AnalysesArgs,
    /// Recognizers to check every path against.
    #[arg(long, default_value_t = 20)]
    recognizers: usize,
}

#[derive(Args)]
pub struct AnalysesBenchArgs {
    #[command(flatten)]
    store: AnalysesArgs,
    /// Also run it on this ClickHouse store (in a fresh database, dropped afterwards),
    /// side by side with the embedded store.
    #[command(flatten)]
    clickhouse: causeway_cli::ch::ClickHouseStoreArgs,
}

#[derive(Args)]
pub struct AnalysesArgs {
    /// Traces to store before analysing.
    #[arg(long, default_value_t = 1_000_000)]
    traces: u64,
    /// Request types (call trees) the generated traces follow; 3% take random shapes.
    /// Default: 40 for `analyses`; for `expect`, as many as there are recognizers.
    #[arg(long)]
    request_types: Option<u64>,
    /// Runs of each analysis.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Store directory (a fresh temporary one when absent; reused when it holds traces).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// Opens (and, when empty, fills) the store of generated traces the analyses read;
/// returns it with the seconds loading took.
/// Where the analysed traces start and how far apart: 100 µs apart, the last just before now.
fn analysis_span(a: &AnalysesArgs) -> (u64, u64) {
    let per_trace_ns = 100_000;
    (now_ns() - (a.traces + 1) * per_trace_ns, per_trace_ns)
}

fn analysis_store(
    a: &AnalysesArgs,
    name: &str,
    request_types: u64,
) -> Result<(TempDir, StoreOptions, f64)> {
    let dir = TempDir::new(a.data.clone(), name);
    let opts = StoreOptions {
        fsync: FsyncPolicy::Never,
        ..StoreOptions::default()
    };
    let load_started = Instant::now();
    {
        let store = Store::open(&dir.0, opts.clone())?;
        if store.stats().block_spans == 0 {
            let (start, per_trace_ns) = analysis_span(a);
            let g = Generator::new(7, start, per_trace_ns).with_request_types(request_types);
            load(&store, g, Goal::Traces(a.traces))?;
        }
    }
    Ok((dir, opts, load_started.elapsed().as_secs_f64()))
}

pub fn run(args: AnalysesBenchArgs) -> Result<()> {
    let a = &args.store;
    let request_types = a.request_types.unwrap_or(40);
    let (dir, opts, load_seconds) = analysis_store(a, "analyses", request_types)?;
    let rt = causeway_cli::runtime()?;
    let server = rt.block_on(start_server(&dir.0, opts))?;
    let stats = server.store.stats();
    let rss_before = current_rss_mib();
    let analysed = time_analyses(&format!("http://{}", server.http_addr), a.runs);
    rt.block_on(server.shutdown());
    let mut embedded = analysed?;
    embedded["stored_spans"] = (stats.block_spans + stats.head_spans).into();
    embedded["load_seconds"] = ((load_seconds * 10.0).round() / 10.0).into();
    embedded["rss_before_analyses_mib"] = rss_before.into();
    let Some(endpoint) = bench_endpoint(&args.clickhouse, "analyses")? else {
        embedded["peak_rss_mib"] = peak_rss_mib().into();
        return report(&embedded, a.json);
    };
    let on_clickhouse = analyses_clickhouse(a, request_types, &endpoint);
    drop_database(&endpoint);
    let kinds = ["dependencies", "patterns", "one_pattern_detail"];
    report(&side_by_side(embedded, on_clickhouse?, &kinds), a.json)
}

/// Times the dependency graph, the patterns, one pattern's detail, the duration scatter
/// and what sets the slowest 5% apart, through the API at `api`, `runs` times each.
fn time_analyses(api: &str, runs: usize) -> Result<serde_json::Value> {
    let api = Client::new(api, None);
    let measure = |path: &str| -> Result<(serde_json::Value, serde_json::Value)> {
        let mut times = Vec::new();
        let mut last = serde_json::Value::Null;
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            last = api.get(path)?;
            times.push(t.elapsed());
        }
        Ok((percentiles(times), last))
    };
    let (deps_time, deps) = measure("/api/dependencies")?;
    let (patterns_time, patterns) = measure("/api/patterns?limit=1000")?;
    let top = patterns["patterns"][0]["id"]
        .as_str()
        .unwrap_or("")
        .to_string();
    let (pattern_time, _) = measure(&format!("/api/patterns/{top}"))?;
    let (scatter_time, scatter) = measure("/api/scatter")?;
    // The slowest 5% of the points drawn, as the search page's button selects them.
    let mut durations: Vec<u64> = scatter["points"]
        .as_array()
        .map(|p| p.iter().filter_map(|p| p["duration"].as_u64()).collect())
        .unwrap_or_default();
    durations.sort_unstable();
    let slowest = durations
        .get(durations.len() * 19 / 20)
        .copied()
        .unwrap_or(0);
    let (differences_time, differences) =
        measure(&format!("/api/differences?selMinDuration={slowest}"))?;
    Ok(serde_json::json!({
        "stored_traces": deps["window"]["tracesScanned"],
        "dependencies": deps_time,
        "dependency_edges": deps["edges"].as_array().map_or(0, Vec::len),
        "patterns": patterns_time,
        "patterns_found": patterns["patterns"].as_array().map_or(0, Vec::len),
        "untracked_traces": patterns["untrackedTraces"],
        "one_pattern_detail": pattern_time,
        "scatter": scatter_time,
        "scatter_points": scatter["points"].as_array().map_or(0, Vec::len),
        "differences_of_slowest_5pct": differences_time,
        "differences_selected": differences["selected"],
        "differences_top": differences["differences"][0],
    }))
}

/// The analyses benchmark on ClickHouse: the same generated traces loaded straight into
/// the store, then the same requests through a server on it.
fn analyses_clickhouse(
    a: &AnalysesArgs,
    request_types: u64,
    endpoint: &causeway_clickhouse::Endpoint,
) -> Result<serde_json::Value> {
    let store = causeway_clickhouse::ClickHouseStore::open(
        endpoint.clone(),
        causeway_clickhouse::ClickHouseOptions::default(),
    )?;
    let load_started = Instant::now();
    let (start, per_trace_ns) = analysis_span(a);
    let g = Generator::new(7, start, per_trace_ns).with_request_types(request_types);
    load_into(&store, g, Goal::Traces(a.traces))?;
    let load_seconds = load_started.elapsed().as_secs_f64();
    let usage = store.disk_usage()?;
    let spool = TempDir::new(None, "analyses-spool");
    let rt = causeway_cli::runtime()?;
    let server = rt.block_on(start_clickhouse_server(&spool.0, endpoint))?;
    let mut result = time_analyses(&format!("http://{}", server.http_addr), a.runs);
    rt.block_on(server.shutdown());
    if let Ok(r) = &mut result {
        r["stored_spans"] = usage.spans.into();
        r["load_seconds"] = ((load_seconds * 10.0).round() / 10.0).into();
    }
    result
}

pub fn expect(a: ExpectArgs) -> Result<()> {
    // One request type per recognizer: then the recognizers can cover the workload (all
    // but the 3% of traces of random shape), and the check times matching, not rejection.
    let request_types = a.store.request_types.unwrap_or(a.recognizers as u64);
    let (dir, opts, load_seconds) = analysis_store(&a.store, "expect", request_types)?;
    let rt = causeway_cli::runtime()?;
    let server = rt.block_on(start_server(&dir.0, opts))?;
    let api = Client::with_timeout(
        &format!("http://{}", server.http_addr),
        None,
        Duration::from_secs(3600),
    );
    // Recognizers: one for each of the most common patterns (request types), generated
    // from one example trace of it (generating from the whole pattern would scan the store
    // once per recognizer).
    let found = api.get(&format!("/api/patterns?sort=count&limit={}", a.recognizers))?;
    let mut file = causeway_expect::lang::ast::File::default();
    for p in found["patterns"].as_array().into_iter().flatten() {
        let id = p["id"].as_str().unwrap_or_default();
        let detail = api.get(&format!("/api/patterns/{id}"))?;
        let Some(example) = detail["histogram"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|b| b["examples"].as_array().into_iter().flatten())
            .next()
        else {
            continue;
        };
        // Generated traces run on random hosts and log random notices (a retry, a cache
        // miss): describe the structure a request of this kind always has.
        let body = serde_json::json!({ "trace": example, "anyHost": true, "notices": "any" });
        let generated = api.post(
            "/api/expect/generate",
            "application/json",
            body.to_string().as_bytes(),
        )?;
        let text = generated["text"].as_str().unwrap_or_default();
        let parsed = causeway_expect::lang::parse(text)
            .map_err(|e| anyhow::anyhow!(e.render("generated", text)))?;
        for mut item in parsed.items {
            if let causeway_expect::lang::ast::Item::Recognizer(r) = &mut item {
                r.name = format!("R{}{}", file.items.len(), r.name);
            }
            file.items.push(item);
        }
    }
    file.items.truncate(a.recognizers);
    let text = file.to_string();
    let mut times = Vec::new();
    let mut cpu_seconds: Option<f64> = None;
    let mut last = serde_json::Value::Null;
    for _ in 0..a.store.runs.max(1) {
        let body = serde_json::json!({ "text": text, "limit": 10 });
        let t = Instant::now();
        let cpu = process_cpu_seconds();
        last = api.post(
            "/api/expect/check",
            "application/json",
            body.to_string().as_bytes(),
        )?;
        times.push(t.elapsed());
        if let (Some(before), Some(after)) = (cpu, process_cpu_seconds()) {
            let used = after - before;
            cpu_seconds = Some(cpu_seconds.map_or(used, |c: f64| c.min(used)));
        }
    }
    rt.block_on(server.shutdown());
    let paths = last["paths"].as_u64().unwrap_or(0);
    let best = times
        .iter()
        .min()
        .copied()
        .unwrap_or_default()
        .as_secs_f64();
    let result = serde_json::json!({
        "stored_paths": paths,
        "load_seconds": (load_seconds * 10.0).round() / 10.0,
        "recognizers": file.items.len(),
        "request_types": request_types,
        "check": percentiles(times),
        "paths_per_second": (paths as f64 / best.max(1e-9)).round(),
        "check_cpu_seconds_min": cpu_seconds.map(|c| (c * 100.0).round() / 100.0),
        "expected": last["expected"],
        // The share of paths that matched a recognizer: what the check timed.
        "expected_share": last["expected"]
            .as_u64()
            .map(|e| (e as f64 / paths.max(1) as f64 * 1000.0).round() / 1000.0),
        "unexpected": last["unexpected"],
        "undecided": last["undecided"],
        "paths_with_problems": last["pathsWithProblems"],
        "peak_rss_mib": peak_rss_mib(),
    });
    report(&result, a.store.json)
}
