//! `causeway bench`: ingest and query benchmarks against a server run in this process,
//! driven over loopback, with generated realistic traces.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use causeway_model::codec::{native, otlp};
use causeway_model::{Span, TraceId};
use causeway_server::ServerConfig;
use causeway_store::generate::Generator;
use causeway_store::{FsyncPolicy, Store, StoreOptions, TraceStore};
use clap::{Args, Subcommand, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};

use crate::client::{enc, Client};

#[derive(Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// Spans per second into a server, durable, over loopback HTTP.
    Ingest(IngestArgs),
    /// Latency of trace-by-id and searches over a store of many spans.
    Query(QueryArgs),
    /// Time and memory of the dependency graph and execution patterns over many traces.
    Analyses(AnalysesBenchArgs),
    /// Time to reconcile and check every stored path against recognizers generated from
    /// the most common patterns.
    Expect(ExpectArgs),
    /// Pivot Tracing on `causeway demo replicas`: request latency overhead per
    /// configuration (interleaved paired runs, 95% confidence intervals) and the time
    /// from installing a query to its first result.
    Pivot(crate::bench_pivot::PivotArgs),
    /// What socket capture adds per intercepted call and to an echo's throughput
    /// (`causeway echo-node` with and without the preload library, interleaved).
    Capture(crate::bench_capture::CaptureBenchArgs),
    /// Accuracy of black-box linking against ground truth (B-cubed F1, exact traces,
    /// right parents), WAP5's and the greedy baseline's, and their time.
    Infer(crate::bench_infer::InferBenchArgs),
    /// Request flows stitched from logs (`causeway logs`), scored against ground truth
    /// (the Nezha TrainTicket logs by default), and their speed.
    Logs(crate::bench_logs::LogsBenchArgs),
    /// Request flows stitched from the demo's own logs (trace ids stripped, kept as the
    /// ground truth), at several loads.
    LogsDemo(crate::bench_logs_demo::LogsDemoArgs),
    /// Log points mined by Drain against the true ones (the macro calls that wrote the
    /// demo's lines, kept by `bench logs-demo --keep`), side by side with Drain3.
    Templates(crate::bench_templates::TemplatesBenchArgs),
    /// Black-box inference on the demo run under capture with its instrumentation on
    /// (the ground truth), at several loads: grouping, parents, patterns, node delays,
    /// injected clock offsets; WAP5's linking and the greedy baseline.
    InferDemo(crate::bench_infer_demo::InferDemoArgs),
    /// Time and peak memory of `causeway infer` on synthetic capture logs shaped like
    /// WAP5's CoDeeN trace (115 proxies, an hour, 4.7M messages).
    InferScale(crate::bench_infer_scale::InferScaleArgs),
    /// A well-behaved client's ingest alone and beside hostile clients (slow senders,
    /// an ingest flood, idle connections, greedy SQL, large exports, huge searches),
    /// with the server's peak memory against a bound.
    Hostile(crate::bench_hostile::HostileArgs),
}

#[derive(Args)]
struct ExpectArgs {
    /// The store: traces, request types, runs, directory (as for `bench analyses`).
    #[command(flatten)]
    store: AnalysesArgs,
    /// Recognizers to check every path against.
    #[arg(long, default_value_t = 20)]
    recognizers: usize,
}

#[derive(Args)]
struct AnalysesBenchArgs {
    #[command(flatten)]
    store: AnalysesArgs,
    /// Also run it on this ClickHouse store (in a fresh database, dropped afterwards),
    /// side by side with the embedded store.
    #[command(flatten)]
    clickhouse: crate::ch::ClickHouseStoreArgs,
}

#[derive(Args)]
struct AnalysesArgs {
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

#[derive(Clone, Copy, ValueEnum)]
enum Protocol {
    /// Native record batches to /v1/native.
    Native,
    /// OTLP protobuf to /v1/traces.
    Otlp,
}

#[derive(Args)]
struct IngestArgs {
    /// Spans to send.
    #[arg(long, default_value_t = 1_000_000)]
    spans: usize,
    /// Wire format.
    #[arg(long, value_enum, default_value = "native")]
    protocol: Protocol,
    /// Spans per request.
    #[arg(long, default_value_t = 2_000)]
    batch: usize,
    /// Client threads sending at once.
    #[arg(long, default_value_t = 2)]
    clients: usize,
    /// always, never, or an interval such as 100ms.
    #[arg(long, default_value = "always")]
    fsync: String,
    /// Store directory (a fresh temporary one when absent).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Also run it on this ClickHouse store (in a fresh database, dropped afterwards),
    /// side by side with the embedded store.
    #[command(flatten)]
    clickhouse: crate::ch::ClickHouseStoreArgs,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct QueryArgs {
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
    clickhouse: crate::ch::ClickHouseStoreArgs,
    /// Keep the ClickHouse database (`causeway_bench_query`) afterwards, and reuse it
    /// when it holds the spans (loading 10 M spans into ClickHouse takes minutes).
    #[arg(long, requires = "store")]
    keep_clickhouse: bool,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: BenchArgs) -> Result<()> {
    match a.what {
        What::Ingest(a) => ingest(a),
        What::Query(a) => query(a),
        What::Analyses(a) => analyses(a),
        What::Expect(a) => expect(a),
        What::Pivot(a) => crate::bench_pivot::run(a),
        What::Capture(a) => crate::bench_capture::run(a),
        What::Infer(a) => crate::bench_infer::run(a),
        What::Logs(a) => crate::bench_logs::run(a),
        What::LogsDemo(a) => crate::bench_logs_demo::run(a),
        What::Templates(a) => crate::bench_templates::run(a),
        What::InferDemo(a) => crate::bench_infer_demo::run(a),
        What::InferScale(a) => crate::bench_infer_scale::run(a),
        What::Hostile(a) => crate::bench_hostile::run(a),
    }
}

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

pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

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

fn peak_rss_mib() -> Option<f64> {
    memory_mib("VmHWM:")
}

/// CPU time this process has used (user and system), from /proc/self/stat. Less noisy
/// than wall time for comparing builds of a parallel scan on a shared machine.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let mut rest = stat.get(stat.rfind(')')? + 1..)?.split_whitespace();
    let user: f64 = rest.nth(11)?.parse().ok()?;
    let system: f64 = rest.next()?.parse().ok()?;
    // The kernel reports these in USER_HZ ticks, 100 a second on Linux.
    Some((user + system) / 100.0)
}

fn current_rss_mib() -> Option<f64> {
    memory_mib("VmRSS:")
}

/// A memory figure of this process from /proc/self/status, in MiB.
fn memory_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some((kb / 1024.0 * 10.0).round() / 10.0)
}

pub(crate) fn bar(len: u64, what: &str) -> ProgressBar {
    ProgressBar::new(len).with_style(
        ProgressStyle::with_template(&format!("{{bar:40}} {{pos}}/{{len}} {what} {{msg}}"))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
}

/// A progress bar over `len` bytes.
pub(crate) fn bytes_bar(len: u64, what: &str) -> ProgressBar {
    ProgressBar::new(len).with_style(
        ProgressStyle::with_template(&format!(
            "{{bar:40}} {{bytes}}/{{total_bytes}} {what} {{msg}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
}

fn generate(n: usize, seed: u64, start: u64) -> Vec<Vec<Span>> {
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

fn ingest(a: IngestArgs) -> Result<()> {
    if a.batch == 0 || a.clients == 0 {
        bail!("--batch and --clients must be at least 1");
    }
    let dir = TempDir::new(a.data.clone(), "ingest");
    let traces = generate(a.spans, 1, now_ns() - 3_600_000_000_000);
    let spans: Vec<Span> = traces.into_iter().flatten().collect();
    let bodies: Vec<(usize, Vec<u8>)> = spans
        .chunks(a.batch)
        .map(|c| {
            let body = match a.protocol {
                Protocol::Native => native::encode_all(c),
                Protocol::Otlp => otlp::encode_protobuf(c),
            };
            (c.len(), body)
        })
        .collect();
    let wire_bytes: usize = bodies.iter().map(|(_, b)| b.len()).sum();
    let sent: usize = bodies.iter().map(|(n, _)| n).sum();
    drop(spans);

    let fsync = crate::fsync_policy(&a.fsync)?;
    let embedded = ingest_into(&a, &bodies, dir.0.clone(), fsync, None)?;
    let Some(endpoint) = bench_endpoint(&a.clickhouse, "ingest")? else {
        let mut result = embedded;
        result["wire_bytes_per_span"] = per_span(wire_bytes, sent).into();
        return report(&result, a.json);
    };
    let spool = TempDir::new(None, "ingest-spool");
    let on_clickhouse = ingest_into(&a, &bodies, spool.0.clone(), fsync, Some(endpoint.clone()));
    drop_database(&endpoint);
    let on_clickhouse = on_clickhouse?;
    let ratio = |key: &str| {
        let (c, e) = (on_clickhouse[key].as_f64(), embedded[key].as_f64());
        c.zip(e)
            .map(|(c, e)| (c / e.max(1e-9) * 1000.0).round() / 1000.0)
    };
    let result = serde_json::json!({
        "wire_bytes_per_span": per_span(wire_bytes, sent),
        "embedded": embedded,
        "clickhouse": on_clickhouse,
        "clickhouse_to_embedded": {
            "spans_per_second": ratio("spans_per_second"),
            "sustained_spans_per_second": ratio("sustained_spans_per_second"),
            "disk_bytes_per_span": ratio("disk_bytes_per_span"),
        },
    });
    report(&result, a.json)
}

/// Sends the bodies to a fresh server (on ClickHouse when `clickhouse` is given) and
/// times it: acknowledged, then settled where queries read.
fn ingest_into(
    a: &IngestArgs,
    bodies: &[(usize, Vec<u8>)],
    data_dir: PathBuf,
    fsync: FsyncPolicy,
    clickhouse: Option<causeway_clickhouse::Endpoint>,
) -> Result<serde_json::Value> {
    let clickhouse_run = clickhouse.is_some();
    let (path, content_type) = match a.protocol {
        Protocol::Native => ("/v1/native", causeway_server::NATIVE_CONTENT_TYPE),
        Protocol::Otlp => ("/v1/traces", "application/x-protobuf"),
    };
    let rt = crate::runtime()?;
    let config = ServerConfig {
        data_dir,
        grpc_addr: "127.0.0.1:0".parse()?,
        ingest_addr: "127.0.0.1:0".parse()?,
        http_addr: "127.0.0.1:0".parse()?,
        store: StoreOptions {
            fsync,
            ..StoreOptions::default()
        },
        clickhouse: clickhouse.map(|endpoint| causeway_server::ClickHouseConfig {
            endpoint,
            options: causeway_clickhouse::ClickHouseOptions::default(),
            spool: causeway_clickhouse::SpoolOptions::default(),
        }),
        ..ServerConfig::default()
    };
    let server = rt.block_on(causeway_server::start(config))?;
    let ingest_url = format!("http://{}", server.ingest_addr);
    let api_url = format!("http://{}", server.http_addr);

    let next = AtomicUsize::new(0);
    let latencies = Mutex::new(Vec::new());
    let visible = Mutex::new(Vec::new());
    let retries = AtomicUsize::new(0);
    let done = std::sync::atomic::AtomicBool::new(false);
    let progress = bar(bodies.len() as u64, "batches");
    let started = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let mut handles = Vec::new();
        for _ in 0..a.clients {
            handles.push(s.spawn(|| -> Result<()> {
                let client = Client::new(&ingest_url, None);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((_, body)) = bodies.get(i) else {
                        return Ok(());
                    };
                    loop {
                        let t = Instant::now();
                        match client.post(path, content_type, body) {
                            Ok(_) => {
                                latencies
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .push(t.elapsed());
                                break;
                            }
                            Err(e)
                                if e.to_string().contains("HTTP 503")
                                    || e.to_string().contains("HTTP 429") =>
                            {
                                retries.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(Duration::from_millis(50));
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    progress.inc(1);
                }
            }));
        }
        // Span end to queryable: a one-span trace, sent and then polled for.
        s.spawn(|| {
            let ingest = Client::new(&ingest_url, None);
            let api = Client::new(&api_url, None);
            let mut g = Generator::new(99, now_ns(), 1);
            while !done.load(Ordering::Relaxed) {
                let mut span = g.trace().swap_remove(0);
                span.parent_id = None;
                let end = Instant::now();
                span.end = now_ns();
                let id = span.trace_id;
                if ingest
                    .post(
                        "/v1/native",
                        causeway_server::NATIVE_CONTENT_TYPE,
                        &native::encode_all([&span]),
                    )
                    .is_err()
                {
                    continue;
                }
                while api.get_bytes(&format!("/api/traces/{id}")).is_err() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                visible
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(end.elapsed());
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut first_err = None;
        for h in handles {
            if let Err(e) = h
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("client panicked")))
            {
                first_err.get_or_insert(e);
            }
        }
        done.store(true, Ordering::Relaxed);
        first_err.map_or(Ok(()), Err)
    })?;
    let elapsed = started.elapsed();
    progress.finish_and_clear();
    // Sustained: until the store has the spans where queries read them (blocks written,
    // or shipped to ClickHouse).
    let settled = Instant::now();
    let (disk_bytes, disk_spans) = match server.backend.clone() {
        causeway_server::Backend::Embedded(store) => {
            store.flush().context("writing the head to a block")?;
            let stats = store.stats();
            (stats.block_bytes, stats.block_spans)
        }
        causeway_server::Backend::ClickHouse(spool) => {
            if !spool.wait_shipped(Duration::from_secs(3600)) {
                bail!("the spool did not ship within an hour");
            }
            let usage = spool.clickhouse().disk_usage()?;
            (usage.bytes, usage.spans)
        }
    };
    let settle_time = settled.elapsed();
    rt.block_on(server.shutdown());
    let sent: usize = bodies.iter().map(|(n, _)| n).sum();
    let round3 = |s: f64| (s * 1000.0).round() / 1000.0;
    Ok(serde_json::json!({
        "store": if clickhouse_run { "clickhouse" } else { "embedded" },
        "protocol": match a.protocol { Protocol::Native => "native", Protocol::Otlp => "otlp-http-protobuf" },
        "fsync": a.fsync,
        "spans": sent,
        "batch_spans": a.batch,
        "clients": a.clients,
        "seconds": round3(elapsed.as_secs_f64()),
        "spans_per_second": (sent as f64 / elapsed.as_secs_f64()).round(),
        "settle_seconds": round3(settle_time.as_secs_f64()),
        "sustained_spans_per_second": (sent as f64 / (elapsed + settle_time).as_secs_f64()).round(),
        "disk_bytes_per_span": per_span(disk_bytes as usize, disk_spans as usize),
        "request_latency": percentiles(latencies.into_inner().unwrap_or_default()),
        "end_to_queryable": percentiles(visible.into_inner().unwrap_or_default()),
        "retried_requests": retries.load(Ordering::Relaxed),
        "peak_rss_mib": peak_rss_mib(),
    }))
}

fn per_span(bytes: usize, spans: usize) -> f64 {
    (bytes as f64 / spans.max(1) as f64 * 10.0).round() / 10.0
}

/// The ClickHouse store of a benchmark, in a fresh database named for it and this
/// process; none without --store.
fn bench_endpoint(
    args: &crate::ch::ClickHouseStoreArgs,
    bench: &str,
) -> Result<Option<causeway_clickhouse::Endpoint>> {
    Ok(args.endpoint()?.map(|mut e| {
        e.database = format!("causeway_bench_{bench}_{}", std::process::id());
        e
    }))
}

/// Drops a benchmark's database on every node (best effort: a benchmark's result stands
/// without it).
fn drop_database(endpoint: &causeway_clickhouse::Endpoint) {
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
async fn start_clickhouse_server(
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
async fn start_server(
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
fn bench_server_config(dir: &std::path::Path) -> Result<ServerConfig> {
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
enum Goal {
    Spans(u64),
    Traces(u64),
}

/// Appends generated traces to the store until the goal is met, with a progress bar;
/// flushes and compacts. Returns up to 10 000 of the trace ids.
fn load(store: &Store, mut g: Generator, goal: Goal) -> Result<Vec<TraceId>> {
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
fn append_when_taken(store: &Store, spans: Vec<Span>) -> Result<()> {
    loop {
        // A refused append consumed its copy; block writing catches up.
        match store.append(spans.clone()) {
            Ok(()) => return Ok(()),
            Err(causeway_store::StoreError::Busy) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.into()),
        }
    }
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

fn query(a: QueryArgs) -> Result<()> {
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
    let rt = crate::runtime()?;
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
fn side_by_side(
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
    let rt = crate::runtime()?;
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
fn load_into(
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

fn analyses(args: AnalysesBenchArgs) -> Result<()> {
    let a = &args.store;
    let request_types = a.request_types.unwrap_or(40);
    let (dir, opts, load_seconds) = analysis_store(a, "analyses", request_types)?;
    let rt = crate::runtime()?;
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

/// Times the dependency graph, the patterns and one pattern's detail through the API at
/// `api`, `runs` times each.
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
    Ok(serde_json::json!({
        "stored_traces": deps["window"]["tracesScanned"],
        "dependencies": deps_time,
        "dependency_edges": deps["edges"].as_array().map_or(0, Vec::len),
        "patterns": patterns_time,
        "patterns_found": patterns["patterns"].as_array().map_or(0, Vec::len),
        "untracked_traces": patterns["untrackedTraces"],
        "one_pattern_detail": pattern_time,
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
    let rt = crate::runtime()?;
    let server = rt.block_on(start_clickhouse_server(&spool.0, endpoint))?;
    let mut result = time_analyses(&format!("http://{}", server.http_addr), a.runs);
    rt.block_on(server.shutdown());
    if let Ok(r) = &mut result {
        r["stored_spans"] = usage.spans.into();
        r["load_seconds"] = ((load_seconds * 10.0).round() / 10.0).into();
    }
    result
}

fn expect(a: ExpectArgs) -> Result<()> {
    // One request type per recognizer: then the recognizers can cover the workload (all
    // but the 3% of traces of random shape), and the check times matching, not rejection.
    let request_types = a.store.request_types.unwrap_or(a.recognizers as u64);
    let (dir, opts, load_seconds) = analysis_store(&a.store, "expect", request_types)?;
    let rt = crate::runtime()?;
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
