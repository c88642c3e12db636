//! The `causeway` command: every user-facing command, as a library so that the
//! benchmarks (`crates/bench`) drive the very code users run. The binary is `main.rs`.
//!
//! The query, analysis and `expect check/generate/reconcile` commands are thin HTTP clients
//! of the query API (`--server`, `--token`); `expect parse` runs locally; `import` sends
//! native batches to the ingest port; `causeway-bench` runs its server in its own process.
//! The binary uses mimalloc as its global allocator.
//!
//! Exit status: 0 on success, 1 when the command failed (the reason is printed on stderr),
//! 2 for a usage error. Output cut short by its reader (`| head`) ends the command quietly
//! with 0; `serve` and `demo` drop their status lines instead and keep running.
#![warn(missing_docs)]

#[macro_use]
pub mod stdout;

mod analyze;
pub mod capture;
pub mod ch;
pub mod client;
pub mod demo;
mod demo_sources;
mod expect;
mod import;
pub mod infer;
pub mod logs;
pub mod nodes;
mod pivot;
pub mod print;
pub mod progress;
pub mod replicas;
pub mod serve_limits;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use causeway_model::{Span, Trace, TraceId};
use causeway_server::agent::{Agent, AgentConfig};
use causeway_server::ServerConfig;
use causeway_store::{FsyncPolicy, StoreOptions};
use clap::{Args, Parser, Subcommand};

use client::{enc, Client};

/// Causeway: request tracing and performance debugging for distributed systems.
#[derive(Parser)]
#[command(name = "causeway", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the demo: the server, a ten-process shop sending it traces, and load.
    Demo(demo::DemoArgs),
    /// One process of the demo (started by `causeway demo`).
    #[command(hide = true)]
    DemoNode {
        /// The role: frontend, catalog, recommend, orders, cache, metadata, storage-N, queue.
        role: String,
    },
    /// One process of `causeway demo replicas`.
    #[command(hide = true)]
    ReplicasNode {
        /// `namenode`, `datanode HOST` or `client HOST INDEX`.
        #[arg(num_args = 1..=3, required = true)]
        args: Vec<String>,
    },
    /// Run the collector, the store, the query API and the UI.
    Serve(Box<ServeArgs>),
    /// Ship this host's span logs, application logs and socket captures to a collector.
    Agent(AgentArgs),
    /// Print one trace as a tree.
    Trace(TraceArgs),
    /// Find traces by service, operation, tags, duration and time.
    Search(SearchArgs),
    /// Show where a trace's time went: the chain of spans it waited on.
    CriticalPath(analyze::TraceAnalysisArgs),
    /// Per-service and per-operation time of a trace, and each RPC's network time.
    Stats(analyze::TraceAnalysisArgs),
    /// The service dependency graph of a time window.
    Deps(analyze::DepsArgs),
    /// Kinds of request (traces grouped by shape) with counts and latency, or one of them.
    Patterns(analyze::PatternsArgs),
    /// Two traces or two patterns side by side: missing, extra and slower spans.
    Compare(analyze::CompareArgs),
    /// Run a read-only SQL query over the `spans` table.
    Sql(SqlArgs),
    /// List services, or the operations of one.
    Services(ServicesArgs),
    /// Send files of spans (OTLP JSON or protobuf, Zipkin JSON, Jaeger JSON, native) to a
    /// collector.
    Import(import::ImportArgs),
    /// Write the spans of a time window to a file.
    Export(ExportArgs),
    /// Pip's expectations: check every path of a window against them, parse them, or
    /// list the reconciler's findings.
    #[command(subcommand)]
    Expect(expect::ExpectCommand),
    /// Pivot Tracing: install causal queries over the tracepoints of running processes
    /// and follow their results.
    #[command(subcommand)]
    Pivot(pivot::PivotCommand),
    /// Run a program with its socket calls captured (it and every process it starts
    /// write a log each, for `causeway infer`).
    Capture(capture::CaptureArgs),
    /// Print capture logs record by record, or summarised.
    CaptureLog(capture::CaptureLogArgs),
    /// Infer causal paths from captured socket calls or reconciled messages (WAP5).
    Infer(infer::InferArgs),
    /// Stitch request flows from the logs systems already write (lprof): log points,
    /// request identifiers, requests per log-point sequence.
    Logs(logs::LogsArgs),
    /// The ClickHouse store: create or upgrade its tables.
    #[command(subcommand)]
    Ch(ch::ChCommand),
}

/// Where the query API is.
#[derive(Args, Clone)]
struct Remote {
    /// The query API's address.
    #[arg(long, env = "CAUSEWAY_SERVER", default_value = "http://127.0.0.1:7070")]
    server: String,
    /// Access token, if the server requires one.
    #[arg(long, env = "CAUSEWAY_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

impl Remote {
    fn client(&self) -> Client {
        Client::new(&self.server, self.token.clone())
    }
}

/// The server's three listeners (OpenTelemetry's default ports for ingest).
#[derive(Args)]
struct Listen {
    /// OTLP/gRPC address.
    #[arg(long, default_value = causeway_server::DEFAULT_GRPC)]
    grpc: SocketAddr,
    /// OTLP/HTTP, Zipkin, Jaeger JSON and native ingest address.
    #[arg(long, default_value = causeway_server::DEFAULT_INGEST)]
    ingest: SocketAddr,
    /// Query API and UI address.
    #[arg(long, default_value = causeway_server::DEFAULT_HTTP)]
    http: SocketAddr,
}

impl Listen {
    /// A server configuration with these listeners and the store in `data_dir`.
    fn config(&self, data_dir: PathBuf) -> ServerConfig {
        ServerConfig {
            data_dir,
            grpc_addr: self.grpc,
            ingest_addr: self.ingest,
            http_addr: self.http,
            ..ServerConfig::default()
        }
    }
}

#[derive(Args)]
struct ServeArgs {
    /// Directory of the store.
    #[arg(long, default_value = "causeway-data")]
    data: PathBuf,
    #[command(flatten)]
    listen: Listen,
    /// Bearer token required on every request; required to listen beyond loopback.
    #[arg(long, env = "CAUSEWAY_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// When spans are synced: `always` (before each acknowledgement), an interval such as
    /// `100ms`, or `never`.
    #[arg(long, default_value = "always")]
    fsync: FsyncPolicy,
    /// Drop stored spans older than this (e.g. `7d`, `12h`).
    #[arg(long)]
    retention: Option<humantime::Duration>,
    /// Drop the oldest blocks while the store is larger than this many bytes.
    #[arg(long)]
    max_bytes: Option<u64>,
    /// Spans held in memory before they are written as a Parquet block.
    #[arg(long, default_value_t = StoreOptions::default().head_max_spans)]
    block_spans: usize,
    /// A file of Pivot Tracing tracepoint definitions to load at start (repeatable;
    /// later files replace definitions of the same name).
    #[arg(long = "pivot-tracepoints", value_name = "FILE")]
    pivot_tracepoints: Vec<PathBuf>,
    /// How often processes report their Pivot Tracing partial results.
    #[arg(long, default_value = "1s")]
    pivot_interval: humantime::Duration,
    /// Keep the spans in ClickHouse instead of the embedded store (see `causeway ch`);
    /// --data then holds the spool of spans acknowledged but not yet shipped.
    #[command(flatten)]
    clickhouse: ch::ClickHouseStoreArgs,
    /// With --store: most bytes of spans acknowledged and not yet in ClickHouse; past it
    /// ingest answers 503 until ClickHouse catches up.
    #[arg(long, default_value_t = causeway_clickhouse::SpoolOptions::default().max_unshipped_bytes)]
    spool_max_bytes: u64,
    /// A file naming the captured nodes of the capture logs agents send (`causeway agent
    /// --captures`), as for `causeway infer --names`: lines `NAME = TEXT`.
    #[arg(long, value_name = "FILE")]
    names: Option<PathBuf>,
    #[command(flatten)]
    limits: serve_limits::LimitArgs,
}

#[derive(Args)]
struct AgentArgs {
    /// A span-log directory (the library's CAUSEWAY_SPAN_LOG_DIR); repeatable.
    #[arg(long = "dir", required_unless_present_any = ["logs", "captures"])]
    dirs: Vec<PathBuf>,
    /// Application log files to follow, as a glob (`/var/log/shop/*.log*`; quote it);
    /// repeatable. Lines that name their trace (a traceparent, trace_id/span_id fields) go
    /// to its spans as log records. A file is followed across renames by its inode, so
    /// match the rotated names too to read the lines written just before a rotation.
    #[arg(long = "logs", value_name = "GLOB")]
    logs: Vec<String>,
    /// A capture directory (`causeway capture --out`) to follow; repeatable. Its logs are
    /// sent to the collector (`/v1/captures`) as they grow, and the server infers (WAP5)
    /// every host's logs a window at a time and joins each request's path to its trace
    /// once it is 3 s old. A restart sends from where the server last took each log.
    /// With --infer-here the agent infers them itself.
    #[arg(long = "captures", value_name = "DIR")]
    captures: Vec<PathBuf>,
    /// A file naming captured nodes, as for `causeway infer --names`: lines `NAME =
    /// TEXT`; a process whose command line contains TEXT is the node NAME.
    #[arg(long, requires = "captures")]
    names: Option<PathBuf>,
    /// The host name the captured processes' spans carry, instead of the one their
    /// capture recorded (as the instrumented services on this host name it).
    #[arg(long, requires = "captures")]
    host: Option<String>,
    /// Join the lines of followed files that name no trace, and the paths inferred
    /// from captures, here, to the traces of their requests read from this query API (as
    /// `causeway --api`, e.g. http://127.0.0.1:7070). Each log file is stitched (lprof)
    /// with what its last 5 passes read as context, and a request's lines go, once it is
    /// 3 s old, to the spans of its file's service that held them and share their values
    /// (as `causeway logs --join`); with --infer-here, paths inferred from captures go
    /// into the traces whose instrumented spans stand for their messages (as `causeway
    /// infer --join`).
    #[arg(long, value_name = "URL")]
    join: Option<String>,
    /// Infer the captures on this host, a window at a time with the last 10 s as
    /// context (the collector's port left out), and ship their paths, rather than send
    /// the logs to the server: the inference's work stays on each host, but only this
    /// host's processes are reconciled.
    #[arg(long, requires = "captures")]
    infer_here: bool,
    /// The collector's ingest address.
    #[arg(long, default_value = "http://127.0.0.1:4318")]
    collector: String,
    /// Where the agent remembers how far it got.
    #[arg(long, default_value = "causeway-agent.checkpoint")]
    checkpoint: PathBuf,
    /// Fraction of traces to keep (Dapper's second-stage sampling), 0 to 1.
    #[arg(long, default_value_t = 1.0)]
    keep: f64,
    /// Delete shipped segments whose last write is older than this.
    #[arg(long, default_value = "1h")]
    retain: humantime::Duration,
    /// Pause between passes.
    #[arg(long, default_value = "1s")]
    interval: humantime::Duration,
    /// Ship what is there now and exit.
    #[arg(long)]
    once: bool,
    /// Print each pass's counts as JSON.
    #[arg(long)]
    json: bool,
    /// Access token for the collector.
    #[arg(long, env = "CAUSEWAY_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[derive(Args)]
struct TraceArgs {
    /// Trace id: 32 hex digits, or 16 for a 64-bit id.
    id: String,
    /// Correct clock skew between hosts (a server span inside its client span).
    #[arg(long)]
    adjust_skew: bool,
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct SearchArgs {
    /// Service of a matching span.
    #[arg(long)]
    service: Option<String>,
    /// Span name of a matching span.
    #[arg(long)]
    operation: Option<String>,
    /// Host of a matching span.
    #[arg(long)]
    host: Option<String>,
    /// Attribute equality `key=value`; repeatable (all must hold on one span).
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// Least span duration (`250ms`, `1.5s`, or nanoseconds).
    #[arg(long)]
    min_duration: Option<String>,
    /// Greatest span duration.
    #[arg(long)]
    max_duration: Option<String>,
    /// Window start: Unix nanoseconds or RFC 3339.
    #[arg(long)]
    start: Option<String>,
    /// Window end: Unix nanoseconds or RFC 3339.
    #[arg(long)]
    end: Option<String>,
    /// Only spans that ended in error.
    #[arg(long)]
    error: bool,
    /// Only spans from this source.
    #[arg(long, value_parser = causeway_model::Source::KINDS)]
    source: Option<String>,
    /// Most traces to list.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    /// Sort every matching trace of the window and list the first: start, duration,
    /// spans, errors, services, root or trace, with a leading `-` for descending
    /// (`--order=-duration`: the longest). Without it, the newest, from the index.
    #[arg(long, allow_hyphen_values = true)]
    order: Option<String>,
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct SqlArgs {
    /// The query, e.g. "SELECT service, count(*) FROM spans GROUP BY service".
    query: String,
    /// Most rows to return.
    #[arg(long)]
    limit: Option<usize>,
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct ServicesArgs {
    /// List this service's operations instead.
    service: Option<String>,
    /// Print the API's JSON.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    remote: Remote,
}

#[derive(Args)]
struct ExportArgs {
    /// Window start: Unix nanoseconds or RFC 3339.
    #[arg(long)]
    start: Option<String>,
    /// Window end: Unix nanoseconds or RFC 3339.
    #[arg(long)]
    end: Option<String>,
    /// Only traces with a span of this service.
    #[arg(long)]
    service: Option<String>,
    /// native, otlp-json, otlp-protobuf, zipkin or jaeger.
    #[arg(long, default_value = "native")]
    format: String,
    /// Output file (stdout when absent).
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    remote: Remote,
}

/// Runs the command line this process was given; exits with the documented status.
pub fn main() {
    let cli = Cli::parse();
    if let Command::ReplicasNode { args } = &cli.command {
        if let Err(e) = replicas::node(args) {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    if let Command::DemoNode { role } = &cli.command {
        // A demo process traces itself through the causeway library instead of logging.
        if let Err(e) = demo::node(role) {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    let default_level = match cli.command {
        Command::Serve(_) | Command::Agent(_) | Command::Demo(_) => "info",
        _ => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("CAUSEWAY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Demo(a) => demo::run(a),
        Command::DemoNode { .. } | Command::ReplicasNode { .. } => Ok(()),
        Command::Serve(a) => serve(*a),
        Command::Agent(a) => agent(a),
        Command::Trace(a) => trace(a),
        Command::Search(a) => search(a),
        Command::CriticalPath(a) => analyze::critical_path(a),
        Command::Stats(a) => analyze::stats(a),
        Command::Deps(a) => analyze::deps(a),
        Command::Patterns(a) => analyze::patterns(a),
        Command::Compare(a) => analyze::compare(a),
        Command::Sql(a) => sql(a),
        Command::Services(a) => services(a),
        Command::Import(a) => import::run(a),
        Command::Export(a) => export(a),
        Command::Expect(c) => expect::run(c),
        Command::Pivot(c) => pivot::run(c),
        Command::Capture(a) => capture::capture(a),
        Command::CaptureLog(a) => capture::capture_log(a),
        Command::Infer(a) => infer::run(a),
        Command::Logs(a) => logs::run(a),
        Command::Ch(c) => ch::run(c),
    };
    if let Err(e) = result {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

/// Milliseconds since the Unix epoch.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Resolves at the first Ctrl-C (SIGINT) or SIGTERM: how a terminal, systemd, Docker and
/// Kubernetes ask a process to stop.
async fn stop_requested() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let mut terminate = signal(SignalKind::terminate())?;
        tokio::select! {
            stop = tokio::signal::ctrl_c() => stop,
            _ = terminate.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    tokio::signal::ctrl_c().await
}

/// A multi-threaded async runtime with time and I/O.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

fn serve(a: ServeArgs) -> Result<()> {
    if a.token.as_deref().is_some_and(|t| t.trim().is_empty()) {
        bail!("--token is blank: give a token, or leave the flag (and CAUSEWAY_TOKEN) out");
    }
    if a.clickhouse.store.is_some() && a.max_bytes.is_some() {
        bail!("--max-bytes applies to the embedded store; on ClickHouse use --retention");
    }
    let mut pivot_tracepoints = Vec::new();
    for path in &a.pivot_tracepoints {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--pivot-tracepoints {}", path.display()))?;
        pivot_tracepoints.push((path.display().to_string(), text));
    }
    let config = ServerConfig {
        pivot_tracepoints,
        pivot_interval: a.pivot_interval.into(),
        token: a.token,
        limits: a.limits.limits()?,
        store: StoreOptions {
            fsync: a.fsync,
            retention_age: a.retention.map(Into::into),
            retention_bytes: a.max_bytes,
            head_max_spans: a.block_spans.max(1),
            max_catalog_bytes: a.limits.catalog_bytes(),
            ..StoreOptions::default()
        },
        clickhouse: a.clickhouse.server_config(a.spool_max_bytes)?,
        capture_names: match &a.names {
            Some(path) => causeway_blackbox::infer::read_node_names(path)?,
            None => Vec::new(),
        },
        ..a.listen.config(a.data)
    };
    let data = config.data_dir.clone();
    let shown = config.clickhouse.as_ref().map(|c| c.endpoint.to_string());
    runtime()?.block_on(async move {
        let server = causeway_server::start(config).await?;
        match shown {
            Some(store) => statusln!(
                "causeway is running (spans in {store}, spool in {})",
                data.display()
            ),
            None => statusln!("causeway is running (data in {})", data.display()),
        }
        statusln!("  OTLP/gRPC        {}", server.grpc_addr);
        statusln!("  OTLP/HTTP        http://{}/v1/traces", server.ingest_addr);
        statusln!(
            "  Zipkin           http://{}/api/v2/spans",
            server.ingest_addr
        );
        statusln!("  Jaeger JSON      http://{}/v1/jaeger", server.ingest_addr);
        statusln!(
            "  capture logs     http://{}/v1/captures",
            server.ingest_addr
        );
        statusln!("  query API and UI http://{}", server.http_addr);
        statusln!("press Ctrl-C to stop");
        stop_requested().await.context("waiting for Ctrl-C")?;
        statusln!("stopping");
        server.shutdown().await;
        Ok(())
    })
}

fn agent(a: AgentArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&a.keep) {
        bail!("--keep {}: expected a fraction from 0 to 1", a.keep);
    }
    if a.join.is_some() && a.logs.is_empty() && !a.infer_here {
        bail!(
            "--join joins the lines of --logs, and the paths of --captures with --infer-here: give one of them"
        );
    }
    let node_names = match &a.names {
        Some(path) => causeway_blackbox::infer::read_node_names(path)?,
        None => Vec::new(),
    };
    let mut agent = Agent::new(AgentConfig {
        captures: a.captures,
        node_names,
        host: a.host,
        dirs: a.dirs,
        collector: a.collector,
        checkpoint: a.checkpoint,
        keep: a.keep,
        retention: a.retain.into(),
        token: a.token,
        logs: a.logs,
        join: a.join,
        infer_here: a.infer_here,
        ..AgentConfig::default()
    })?;
    loop {
        // A single pass joins every request it read: there is no later pass to wait for.
        let pass = if a.once {
            agent.finish()
        } else {
            agent.run_once()
        };
        match pass {
            Ok(stats) => {
                if a.json {
                    outln!("{}", serde_json::to_string(&stats)?);
                } else if stats.shipped
                    + stats.sampled_out
                    + stats.deleted
                    + stats.log_lines
                    + stats.inferred_paths
                    > 0
                    || a.once
                {
                    outln!(
                        "shipped {} spans in {} batches, sampled out {}, deleted {} segments, skipped {} damaged records; read {} log lines, {} of them log records of traces; {} requests stitched from lines without ids, {} joined to traces ({} lines on spans); {} paths inferred from captures, {} joined to traces",
                        stats.shipped, stats.batches, stats.sampled_out, stats.deleted, stats.damaged, stats.log_lines, stats.log_records, stats.plain_requests, stats.plain_requests_joined, stats.plain_lines_placed, stats.inferred_paths, stats.inferred_paths_joined
                    );
                }
            }
            Err(e) if a.once => return Err(e.into()),
            Err(e) => tracing::warn!(error = %e, "pass failed; retrying"),
        }
        if a.once {
            return Ok(());
        }
        std::thread::sleep(a.interval.into());
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct TraceBody {
    trace_id: TraceId,
    spans: Vec<Span>,
    #[serde(default)]
    clock_offsets: Vec<serde_json::Value>,
}

fn trace(a: TraceArgs) -> Result<()> {
    let id = TraceId::parse(&a.id).map_err(|e| anyhow::anyhow!("{e}"))?;
    let adjust = if a.adjust_skew { "?adjust=skew" } else { "" };
    let body = a
        .remote
        .client()
        .get_bytes(&format!("/api/traces/{id}{adjust}"))?;
    if a.json {
        outln!("{}", String::from_utf8_lossy(&body));
        return Ok(());
    }
    let t: TraceBody = serde_json::from_slice(&body).context("reading the trace")?;
    for o in t
        .clock_offsets
        .iter()
        .filter(|o| o["offsetNs"].as_i64() != Some(0))
    {
        let offset = o["offsetNs"].as_i64().unwrap_or(0);
        let sign = if offset < 0 { "-" } else { "+" };
        outln!(
            "clock of {} shifted {sign}{}",
            print::cell(&o["host"]),
            print::duration(offset.unsigned_abs())
        );
    }
    out!(
        "{}",
        print::trace_tree(&Trace::assemble(t.trace_id, t.spans))
    );
    Ok(())
}

fn search(a: SearchArgs) -> Result<()> {
    let mut q = vec![format!("limit={}", a.limit)];
    let mut add = |k: &str, v: &Option<String>| {
        if let Some(v) = v {
            q.push(format!("{k}={}", enc(v)));
        }
    };
    add("service", &a.service);
    add("operation", &a.operation);
    add("host", &a.host);
    add("source", &a.source);
    add("minDuration", &a.min_duration);
    add("maxDuration", &a.max_duration);
    add("start", &a.start);
    add("end", &a.end);
    add("order", &a.order);
    for t in &a.tags {
        if !t.contains('=') {
            bail!("--tag {t:?}: expected key=value");
        }
        q.push(format!("tags={}", enc(t)));
    }
    if a.error {
        q.push("error=true".into());
    }
    let v = a
        .remote
        .client()
        .get(&format!("/api/search?{}", q.join("&")))?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let traces = v["traces"].as_array().cloned().unwrap_or_default();
    if traces.is_empty() {
        outln!("no traces found");
        return Ok(());
    }
    let header: Vec<String> = ["trace id", "start", "duration", "spans", "errors", "root"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let rows: Vec<Vec<String>> = traces
        .iter()
        .map(|t| {
            vec![
                print::cell(&t["traceId"]),
                print::time(t["start"].as_u64().unwrap_or(0)),
                print::duration(t["duration"].as_u64().unwrap_or(0)),
                print::cell(&t["spanCount"]),
                print::cell(&t["errorCount"]),
                format!(
                    "{}: {}",
                    print::cell(&t["rootService"]),
                    print::cell(&t["rootOperation"])
                ),
            ]
        })
        .collect();
    out!("{}", print::table(&header, &rows));
    if let (Some(order), Some(total)) = (&a.order, v["total"].as_u64()) {
        outln!(
            "{} of {total} traces in the window, sorted by {order}",
            traces.len()
        );
    }
    Ok(())
}

fn sql(a: SqlArgs) -> Result<()> {
    let mut body = serde_json::json!({ "query": a.query });
    if let Some(l) = a.limit {
        body["limit"] = l.into();
    }
    let v = a
        .remote
        .client()
        .post("/api/sql", "application/json", body.to_string().as_bytes())?;
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    let header: Vec<String> = v["columns"]
        .as_array()
        .map(|c| c.iter().map(|c| print::cell(&c["name"])).collect())
        .unwrap_or_default();
    let rows: Vec<Vec<String>> = v["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    r.as_array()
                        .map(|r| r.iter().map(print::cell).collect())
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default();
    out!("{}", print::table(&header, &rows));
    let truncated = if v["truncated"].as_bool() == Some(true) {
        " (truncated at the row limit)"
    } else {
        ""
    };
    outln!("({} rows{truncated})", rows.len());
    Ok(())
}

fn services(a: ServicesArgs) -> Result<()> {
    let client = a.remote.client();
    let (v, key) = match &a.service {
        Some(s) => (
            client.get(&format!("/api/services/{}/operations", enc(s)))?,
            "operations",
        ),
        None => (client.get("/api/services")?, "services"),
    };
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for name in v[key].as_array().into_iter().flatten() {
        outln!("{}", print::cell(name));
    }
    Ok(())
}

fn export(a: ExportArgs) -> Result<()> {
    let mut q = vec![format!("format={}", enc(&a.format))];
    for (k, v) in [
        ("start", &a.start),
        ("end", &a.end),
        ("service", &a.service),
    ] {
        if let Some(v) = v {
            q.push(format!("{k}={}", enc(v)));
        }
    }
    let body = a
        .remote
        .client()
        .get_bytes(&format!("/api/export?{}", q.join("&")))?;
    match &a.output {
        Some(path) => {
            std::fs::write(path, &body).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("wrote {} bytes to {}", body.len(), path.display());
        }
        None => {
            std::io::Write::write_all(&mut std::io::stdout(), &body).context("writing to stdout")?
        }
    }
    Ok(())
}
