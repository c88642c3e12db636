//! The stores and servers benchmarks measure: generated traces loaded straight into a
//! store, servers on free loopback ports, ClickHouse databases of their own.

use std::time::Duration;

use anyhow::Result;
use causeway_cli::progress::bar;
use causeway_model::{Span, TraceId};
use causeway_server::ServerConfig;
use causeway_store::{Store, StoreOptions, TraceStore};
use causeway_testkit::Generator;

pub(crate) fn generate(n: usize, seed: u64, start: u64) -> Vec<Vec<Span>> {
    let mut g = Generator::new(seed, start, 1_000_000);
    let mut traces = Vec::new();
    let mut total = 0;
    while total < n {
        let t = g.trace();
        total += t.len();
        traces.push(t);
    }
    traces
}

/// The ClickHouse store of a benchmark, in a fresh database named for it and this
/// process; none without --store.
pub(crate) fn bench_endpoint(
    args: &causeway_cli::ch::ClickHouseStoreArgs,
    bench: &str,
) -> Result<Option<causeway_clickhouse::Endpoint>> {
    Ok(args.endpoint()?.map(|mut e| {
        e.database = format!("causeway_bench_{bench}_{}", std::process::id());
        e
    }))
}

/// Drops a benchmark's database on every node (best effort: a benchmark's result stands
/// without it).
pub(crate) fn drop_database(endpoint: &causeway_clickhouse::Endpoint) {
    let Ok(client) =
        causeway_clickhouse::http::Client::new(endpoint.clone(), Duration::from_secs(600))
    else {
        return;
    };
    if let Err(e) = causeway_clickhouse::schema::drop_database(&client) {
        tracing::warn!(error = %e, "dropping the benchmark's database");
    }
}

/// A server on the ClickHouse store at `endpoint`, its spool in `dir`, on free loopback
/// ports.
pub(crate) async fn start_clickhouse_server(
    dir: &std::path::Path,
    endpoint: &causeway_clickhouse::Endpoint,
) -> Result<causeway_server::RunningServer> {
    Ok(causeway_server::start(ServerConfig {
        clickhouse: Some(causeway_server::ClickHouseConfig {
            endpoint: endpoint.clone(),
            options: causeway_clickhouse::ClickHouseOptions::default(),
            spool: causeway_clickhouse::SpoolOptions::default(),
        }),
        ..bench_server_config(dir)?
    })
    .await?)
}

/// A server over the store in `dir` on free loopback ports.
pub(crate) async fn start_server(
    dir: &std::path::Path,
    store: StoreOptions,
) -> Result<causeway_server::RunningServer> {
    Ok(causeway_server::start(ServerConfig {
        store,
        ..bench_server_config(dir)?
    })
    .await?)
}

/// A benchmark's server: its data in `dir`, free loopback ports, and no query timeout
/// to speak of (a benchmark times the whole scan, however long it takes).
pub(crate) fn bench_server_config(dir: &std::path::Path) -> Result<ServerConfig> {
    Ok(ServerConfig {
        data_dir: dir.to_path_buf(),
        grpc_addr: "127.0.0.1:0".parse()?,
        ingest_addr: "127.0.0.1:0".parse()?,
        http_addr: "127.0.0.1:0".parse()?,
        limits: causeway_server::Limits {
            query_timeout: std::time::Duration::from_secs(3600),
            ..causeway_server::Limits::default()
        },
        ..ServerConfig::default()
    })
}

/// How much to load.
#[derive(Clone, Copy)]
pub(crate) enum Goal {
    Spans(u64),
    Traces(u64),
}

/// Appends generated traces to the store until the goal is met, with a progress bar;
/// flushes and compacts. Returns up to 10 000 of the trace ids.
pub(crate) fn load(store: &Store, mut g: Generator, goal: Goal) -> Result<Vec<TraceId>> {
    let (total, unit) = match goal {
        Goal::Spans(n) => (n, "spans loaded"),
        Goal::Traces(n) => (n, "traces loaded"),
    };
    let progress = bar(total, unit);
    let mut sample = Vec::new();
    let (mut spans, mut traces) = (0u64, 0u64);
    let mut batch = Vec::new();
    let done = |spans: u64, traces: u64| match goal {
        Goal::Spans(n) => spans >= n,
        Goal::Traces(n) => traces >= n,
    };
    while !done(spans, traces) {
        let t = g.trace();
        spans += t.len() as u64;
        traces += 1;
        if sample.len() < 10_000 {
            sample.push(t[0].trace_id);
        }
        batch.extend(t);
        if batch.len() >= 10_000 {
            progress.set_position(if let Goal::Spans(_) = goal {
                spans
            } else {
                traces
            });
            append_when_taken(store, std::mem::take(&mut batch))?;
        }
    }
    if !batch.is_empty() {
        append_when_taken(store, batch)?;
    }
    progress.set_message("writing blocks");
    store.flush()?;
    progress.set_message("compacting");
    while store.compact()? {}
    progress.finish_and_clear();
    Ok(sample)
}

/// Appends `spans`, waiting while the store is busy writing blocks.
pub(crate) fn append_when_taken(store: &Store, spans: Vec<Span>) -> Result<()> {
    loop {
        // A refused append consumed its copy; block writing catches up.
        match store.append(spans.clone()) {
            Ok(()) => return Ok(()),
            Err(causeway_store::StoreError::Busy) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.into()),
        }
    }
}

/// Every span the store in `store_dir` holds, log carriers aside (each span once, whole
/// traces read as the API reads them).
pub(crate) fn stored_spans(store_dir: &std::path::Path) -> Result<Vec<Span>> {
    use anyhow::Context as _;
    let store = Store::open(store_dir, StoreOptions::default())
        .with_context(|| format!("opening the store in {}", store_dir.display()))?;
    let spans = std::sync::Mutex::new(Vec::new());
    store.scan(causeway_store::TimeWindow::ALL, &|t| {
        let kept = t.spans.into_iter().filter(|s| !s.is_carrier());
        if let Ok(mut spans) = spans.lock() {
            spans.extend(kept);
        }
    })?;
    Ok(spans.into_inner().unwrap_or_default())
}
