//! `causeway-bench query`: latency of trace-by-id and searches over a store of many spans.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Result;
use causeway_cli::progress::bar;
use causeway_model::TraceId;
use causeway_store::{FsyncPolicy, Store, StoreOptions, TraceStore};
use causeway_testkit::Generator;
use clap::Args;

use crate::harness::{now_ns, peak_rss_mib, per_span, percentiles, report, TempDir};
use crate::stores::{
    bench_endpoint, drop_database, load, start_clickhouse_server, start_server, Goal,
};
use causeway_cli::client::{enc, Client};

#[derive(Args)]
pub struct QueryArgs {
    /// Spans to store before querying.
    #[arg(long, default_value_t = 10_000_000)]
    spans: usize,
    /// Queries of each kind.
    #[arg(long, default_value_t = 100)]
    queries: usize,
    /// Store directory (a fresh temporary one when absent; reused when it holds spans).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Also run it on this ClickHouse store (in a fresh database, dropped afterwards),
    /// side by side with the embedded store.
    #[command(flatten)]
    clickhouse: causeway_cli::ch::ClickHouseStoreArgs,
    /// Keep the ClickHouse database (`causeway_bench_query`) afterwards, and reuse it
    /// when it holds the spans (loading 10 M spans into ClickHouse takes minutes).
    #[arg(long, requires = "store")]
    keep_clickhouse: bool,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: QueryArgs) -> Result<()> {
    let dir = TempDir::new(a.data.clone(), "query");
    let opts = StoreOptions {
        fsync: FsyncPolicy::Never,
        ..StoreOptions::default()
    };
    // Load: generated traces straight into the store (ingest is measured separately).
    let per_trace_ns = 1_000_000;
    let start = now_ns() - (a.spans as u64 / 30 + 1) * per_trace_ns;
    let mut sample: Vec<TraceId> = Vec::new();
    {
        let store = Store::open(&dir.0, opts.clone())?;
        let have = store.stats().block_spans + store.stats().head_spans;
        if have < a.spans as u64 {
            let g = Generator::new(7, start, per_trace_ns);
            sample = load(&store, g, Goal::Spans(a.spans as u64 - have))?;
        }
    }
    let rt = causeway_cli::runtime()?;
    let server = rt.block_on(start_server(&dir.0, opts))?;
    let stats = server.store.stats();
    if sample.is_empty() {
        // A reused store: take ids from a search.
        let found = server.store.search(&causeway_store::SearchQuery {
            limit: 1000,
            ..Default::default()
        })?;
        sample = found.iter().map(|s| s.trace_id).collect();
    }
    let mut embedded = time_queries(&format!("http://{}", server.http_addr), &sample, a.queries)?;
    rt.block_on(server.shutdown());
    embedded["stored_spans"] = (stats.block_spans + stats.head_spans).into();
    embedded["blocks"] = stats.blocks.into();
    embedded["disk_bytes_per_span"] =
        per_span(stats.block_bytes as usize, stats.block_spans as usize).into();
    let Some(mut endpoint) = bench_endpoint(&a.clickhouse, "query")? else {
        embedded["peak_rss_mib"] = peak_rss_mib().into();
        return report(&embedded, a.json);
    };
    if a.keep_clickhouse {
        endpoint.database = "causeway_bench_query".into();
    }
    let on_clickhouse = query_clickhouse(&a, &endpoint, start, per_trace_ns);
    if !a.keep_clickhouse {
        drop_database(&endpoint);
    }
    let kinds = [
        "trace_by_id",
        "search_service_operation",
        "search_attribute",
        "search_service_attribute",
    ];
    report(&side_by_side(embedded, on_clickhouse?, &kinds), a.json)
}

/// Both stores' results of one benchmark, with the ClickHouse-to-embedded ratio of the
/// median of each of `kinds`.
pub(crate) fn side_by_side(
    embedded: serde_json::Value,
    on_clickhouse: serde_json::Value,
    kinds: &[&str],
) -> serde_json::Value {
    let ratios: serde_json::Map<String, serde_json::Value> = kinds
        .iter()
        .map(|&key| {
            let p50 = |v: &serde_json::Value| v[key]["p50_ms"].as_f64();
            let ratio = p50(&on_clickhouse)
                .zip(p50(&embedded))
                .map(|(c, e)| (c / e.max(1e-9) * 100.0).round() / 100.0);
            (key.to_string(), ratio.into())
        })
        .collect();
    serde_json::json!({
        "clickhouse_to_embedded_p50": ratios,
        "embedded": embedded,
        "clickhouse": on_clickhouse,
        "peak_rss_mib": peak_rss_mib(),
    })
}

/// The query benchmark on ClickHouse: the same generated spans loaded straight into the
/// store, then the same queries through a server on it.
fn query_clickhouse(
    a: &QueryArgs,
    endpoint: &causeway_clickhouse::Endpoint,
    start: u64,
    per_trace_ns: u64,
) -> Result<serde_json::Value> {
    let store = causeway_clickhouse::ClickHouseStore::open(
        endpoint.clone(),
        causeway_clickhouse::ClickHouseOptions::default(),
    )?;
    let have = store.disk_usage()?.spans;
    let sample = if have < a.spans as u64 {
        load_into(
            &store,
            Generator::new(7, start, per_trace_ns),
            Goal::Spans(a.spans as u64 - have),
        )?
    } else {
        let found = store.search(&causeway_store::SearchQuery {
            limit: 1000,
            ..Default::default()
        })?;
        found.iter().map(|s| s.trace_id).collect()
    };
    let usage = store.disk_usage()?;
    let spool = TempDir::new(None, "query-spool");
    let rt = causeway_cli::runtime()?;
    let server = rt.block_on(start_clickhouse_server(&spool.0, endpoint))?;
    let mut result = time_queries(&format!("http://{}", server.http_addr), &sample, a.queries);
    rt.block_on(server.shutdown());
    if let Ok(r) = &mut result {
        r["stored_spans"] = usage.spans.into();
        r["disk_bytes_per_span"] = per_span(usage.bytes as usize, usage.spans as usize).into();
    }
    result
}

/// Appends generated traces to a ClickHouse store in 50 000-span inserts until the goal;
/// returns up to 10 000 of the trace ids.
pub(crate) fn load_into(
    store: &causeway_clickhouse::ClickHouseStore,
    mut g: Generator,
    goal: Goal,
) -> Result<Vec<TraceId>> {
    let (total, unit) = match goal {
        Goal::Spans(n) => (n, "spans loaded into ClickHouse"),
        Goal::Traces(n) => (n, "traces loaded into ClickHouse"),
    };
    let progress = bar(total, unit);
    let (mut loaded, mut sample, mut batch) = (0u64, Vec::new(), Vec::new());
    while loaded < total {
        let t = g.trace();
        loaded += match goal {
            Goal::Spans(_) => t.len() as u64,
            Goal::Traces(_) => 1,
        };
        if sample.len() < 10_000 {
            sample.push(t[0].trace_id);
        }
        batch.extend(t);
        if batch.len() >= 50_000 || loaded >= total {
            store.append(std::mem::take(&mut batch))?;
            progress.set_position(loaded);
        }
    }
    progress.finish_and_clear();
    Ok(sample)
}

/// Times each kind of query through the API at `api`: trace by id (ids from `sample`),
/// search by service and operation, by attribute, by service and attribute.
fn time_queries(api: &str, sample: &[TraceId], n: usize) -> Result<serde_json::Value> {
    let api = Client::new(api, None);
    let users: Vec<String> = (0..n)
        .map(|i| format!("user-{}", (i * 7919) % 20_000))
        .collect();
    let time = |paths: Vec<String>| -> Result<(serde_json::Value, usize)> {
        let mut lat = Vec::new();
        let mut found = 0;
        for p in paths {
            let t = Instant::now();
            let v = api.get_bytes(&p)?;
            lat.push(t.elapsed());
            found += usize::from(v.len() > 20);
        }
        Ok((percentiles(lat), found))
    };
    let by_id: Vec<String> = sample
        .iter()
        .cycle()
        .step_by(97)
        .take(n)
        .map(|id| format!("/api/traces/{id}"))
        .collect();
    let pairs = [
        ("checkout", "PlaceOrder"),
        ("frontend", "GET /"),
        ("catalog", "GetProduct"),
        ("postgres", "SELECT users"),
        ("payments", "Charge"),
    ];
    let by_op: Vec<String> = (0..n)
        .map(|i| {
            let (s, o) = pairs[i % pairs.len()];
            format!(
                "/api/search?service={}&operation={}&limit=20",
                enc(s),
                enc(o)
            )
        })
        .collect();
    let by_attr: Vec<String> = users
        .iter()
        .map(|u| format!("/api/search?tags={}&limit=20", enc(&format!("user.id={u}"))))
        .collect();
    let by_attr_service: Vec<String> = users
        .iter()
        .map(|u| {
            format!(
                "/api/search?service=payments&tags={}&limit=20",
                enc(&format!("user.id={u}"))
            )
        })
        .collect();
    // Each timing comes with how many of its queries found something: a lookup that finds
    // nothing takes another path than one that reads traces.
    let (id_lat, id_found) = time(by_id)?;
    let (op_lat, op_found) = time(by_op)?;
    let (attr_lat, attr_found) = time(by_attr)?;
    let (attr_svc_lat, attr_svc_found) = time(by_attr_service)?;
    Ok(serde_json::json!({
        "trace_by_id": id_lat,
        "trace_by_id_found": id_found,
        "search_service_operation": op_lat,
        "search_service_operation_found": op_found,
        "search_attribute": attr_lat,
        "search_attribute_found": attr_found,
        "search_service_attribute": attr_svc_lat,
        "search_service_attribute_found": attr_svc_found,
        "queries_each": n,
    }))
}
