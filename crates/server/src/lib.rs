//! Causeway's server: the collector (OTLP/gRPC, OTLP/HTTP, Zipkin v2, Jaeger JSON, native
//! batches), the query API (and Jaeger's, under `/jaeger/api/`), and the agent that ships
//! span logs to it.
//!
//! [`start`] binds the three listeners, opens the store and serves until
//! [`RunningServer::shutdown`]:
//!
//! - `127.0.0.1:4317`: OTLP/gRPC `TraceService/Export`, gzip accepted (tonic, `grpc`).
//! - `127.0.0.1:4318`: OTLP/HTTP `POST /v1/traces` (protobuf or JSON, gzip), Zipkin
//!   `POST /api/v2/spans`, Jaeger JSON `POST /v1/jaeger`, native `POST /v1/native` (axum,
//!   `ingest`), and the stitching report `causeway logs` posts (`logflows`).
//! - `127.0.0.1:7070`: the query API (`/api/...`, `/metrics`), Jaeger's query API
//!   (`/jaeger/api/...`) and the UI (`/`, `/ui/{file}`). `api` routes each path to the module
//!   that answers it (`traces`, `sql`, `export`, `analyses`, `expect`, `logflows`, `pivot`,
//!   `jaeger`, `ui`), with `params` (query parameters) and `scans` (window scans).
//!
//! Every ingest path ends in the same place: spans are screened, then appended to the store
//! and acknowledged once durable. A request is bounded by its listener's connection cap
//! and timeouts (`listen`), the token (`auth`), its body's byte budget and time limit
//! (`receive`) and, for ingest, an in-flight place taken once the body is whole; decoding,
//! screening, reading and analysing run off the async workers (`work`). Every limit is a
//! field of `ServerConfig::limits` (`Limits`) and a `serve` flag
//! (`crates/cli/src/serve_limits.rs`). While the store has its most frozen heads waiting to
//! become blocks (`max_pending_heads`, 2), appends fail with `StoreError::Busy`, answered
//! 503. Why each resource is bounded where it is spent, ingest first:
//! `docs/decisions/004-bounds-inside-the-server-ingest-first.md`.
//!
//! `ServerConfig::clickhouse` picks the backend: `Backend` is the embedded `Store` or the
//! ClickHouse `ShippingStore` (its spool), and handlers hold it as `Arc<dyn TraceStore>`.
//! Stopping the server gives the spool up to [`SHIP_ON_SHUTDOWN`] (30 s) to ship what it
//! holds, so a demo with a temporary data directory loses nothing it acknowledged. `serve`
//! (like every long-running command) stops so on Ctrl-C or SIGTERM, as a process manager
//! stops it.
#![warn(missing_docs)]

pub mod agent;
mod analyses;
mod api;
mod auth;
pub mod captures;
pub mod error;
mod expect;
mod explore;
mod export;
mod grpc;
mod ingest;
mod jaeger;
mod json_errors;
mod listen;
mod logflows;
mod metrics;
mod monitor;
mod outline;
mod params;
mod pivot;
mod receive;
mod scans;
mod screen;
mod snapshot;
mod sql;
mod traces;
mod ui;
mod work;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use causeway_clickhouse::{
    ClickHouseOptions, ClickHouseStore, Endpoint, ShippingStore, SpoolOptions,
};
use causeway_store::sql::SqlLimits;
use causeway_store::{Store, StoreOptions, TraceStore};
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinHandle;

pub use error::ApiError;
pub use ingest::NATIVE_CONTENT_TYPE;
pub use listen::ConnectionLimits;
pub use pivot::PivotLimits;
pub use screen::SpanLimits;

/// OpenTelemetry's default OTLP/gRPC port.
pub const DEFAULT_GRPC: &str = "127.0.0.1:4317";
/// OpenTelemetry's default OTLP/HTTP port, shared by Zipkin and native ingest.
pub const DEFAULT_INGEST: &str = "127.0.0.1:4318";
/// The query API and UI.
pub const DEFAULT_HTTP: &str = "127.0.0.1:7070";

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The store's directory.
    pub data_dir: PathBuf,
    /// OTLP/gRPC listener.
    pub grpc_addr: SocketAddr,
    /// OTLP/HTTP, Zipkin and native listener.
    pub ingest_addr: SocketAddr,
    /// Query API listener.
    pub http_addr: SocketAddr,
    /// Bearer token required on every request when set (and required to bind beyond
    /// loopback). Blank is no token.
    pub token: Option<String>,
    /// What one client, or a few, may take of the server.
    pub limits: Limits,
    /// The store's behaviour.
    pub store: StoreOptions,
    /// Store the spans in ClickHouse rather than in `data_dir` (which then holds only
    /// the spool of spans not yet shipped, and the Pivot hub's state).
    pub clickhouse: Option<ClickHouseConfig>,
    /// Pivot Tracing tracepoint definitions loaded at start: (file name, text).
    pub pivot_tracepoints: Vec<(String, String)>,
    /// How often processes report Pivot Tracing results.
    pub pivot_interval: std::time::Duration,
    /// Rules naming the nodes of capture logs agents send (`NAME = TEXT` pairs, as
    /// `causeway infer --names` reads them).
    pub capture_names: Vec<(String, String)>,
}

/// Everything that bounds what requests take of the server: connections, time, memory
/// and the size of what is stored and answered. Past a limit a request is answered
/// (413, 408, 429, 503, or a cut reported), never left to take the server down.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Connections per listener, and their timeouts.
    pub connections: ConnectionLimits,
    /// How long a request body may take to arrive, from the end of its headers.
    pub body_timeout: Duration,
    /// Largest request body accepted, after decompression.
    pub max_body_bytes: usize,
    /// Bytes of ingest bodies (OTLP/HTTP, Zipkin, Jaeger, native and OTLP/gRPC) held at
    /// once, from their first byte (decompressed too) until the store answers; a body
    /// that finds no room is answered 429.
    pub max_receiving_bytes: usize,
    /// The same for request bodies of the query API.
    pub max_query_receiving_bytes: usize,
    /// Ingest requests decoded and stored at once (a body still arriving holds no
    /// place); more are answered 429.
    pub max_inflight: usize,
    /// How large a stored span may be.
    pub spans: SpanLimits,
    /// Requests that read across the store (searches, analyses, checks, exports) run at
    /// once; more wait for a place until their time limit.
    pub max_scans: usize,
    /// How long such a request may take, waiting for its place included: past it the
    /// answer is 503 (no place came free) or 408 (it ran out of time).
    pub query_timeout: Duration,
    /// Most traces a search answers (`limit` above it is refused; Jaeger's API cuts it).
    pub max_search_limit: usize,
    /// Most spans one answer of whole traces holds (a Jaeger search); traces past it are
    /// left out, and the answer says how many.
    pub max_answer_spans: usize,
    /// Bounds on SQL queries.
    pub sql: SqlLimits,
    /// Bytes of capture records held for the joins (a window and its context, across
    /// every log agents send); a piece that finds them full is answered 503.
    pub max_capture_bytes: usize,
    /// Capture logs held at once; a new one past it is answered 503.
    pub max_capture_logs: usize,
    /// Bounds on the Pivot Tracing hub.
    pub pivot: PivotLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections: ConnectionLimits::default(),
            body_timeout: Duration::from_secs(30),
            max_body_bytes: 16 << 20,
            max_receiving_bytes: 256 << 20,
            max_query_receiving_bytes: 64 << 20,
            max_inflight: 64,
            spans: SpanLimits::default(),
            max_scans: 2,
            query_timeout: Duration::from_secs(60),
            max_search_limit: 1500,
            max_answer_spans: 50_000,
            sql: SqlLimits::default(),
            max_capture_bytes: 64 << 20,
            max_capture_logs: 10_000,
            pivot: PivotLimits::default(),
        }
    }
}

/// The ClickHouse store a server ships to.
#[derive(Debug, Clone)]
pub struct ClickHouseConfig {
    /// The cluster.
    pub endpoint: Endpoint,
    /// How requests to it behave.
    pub options: ClickHouseOptions,
    /// The local spool (its fsync policy is the store options').
    pub spool: SpoolOptions,
}

/// The store a server answers from.
#[derive(Clone)]
pub enum Backend {
    /// The embedded store.
    Embedded(Arc<Store>),
    /// ClickHouse, fed through a local spool.
    ClickHouse(Arc<ShippingStore>),
}

impl Backend {
    /// The store behind either.
    pub fn store(&self) -> Arc<dyn TraceStore> {
        match self {
            Backend::Embedded(s) => s.clone(),
            Backend::ClickHouse(s) => s.clone(),
        }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        let addr = |s: &str| s.parse().unwrap_or(SocketAddr::from(([127, 0, 0, 1], 0)));
        ServerConfig {
            data_dir: PathBuf::from("causeway-data"),
            grpc_addr: addr(DEFAULT_GRPC),
            ingest_addr: addr(DEFAULT_INGEST),
            http_addr: addr(DEFAULT_HTTP),
            token: None,
            limits: Limits::default(),
            store: StoreOptions::default(),
            clickhouse: None,
            pivot_tracepoints: Vec::new(),
            pivot_interval: std::time::Duration::from_secs(1),
            capture_names: Vec::new(),
        }
    }
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A listener would be reachable beyond this machine without a token.
    #[error("binding {addr} ({role}) to a non-loopback address requires an access token (--token or CAUSEWAY_TOKEN)")]
    TokenRequired {
        /// The address.
        addr: SocketAddr,
        /// Which listener.
        role: &'static str,
    },
    /// A listener could not be bound.
    #[error("cannot listen on {addr} ({role}): {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Which listener.
        role: &'static str,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The store could not be opened.
    #[error(transparent)]
    Store(#[from] causeway_store::StoreError),
    /// The Pivot Tracing hub could not start (its tracepoint files or saved state).
    #[error("{0}")]
    Pivot(String),
    /// The limits contradict each other.
    #[error("{0}")]
    Limits(String),
}

impl ServerConfig {
    /// The token in force: none when unset or blank.
    pub(crate) fn token(&self) -> Option<&str> {
        self.token.as_deref().filter(|t| !t.trim().is_empty())
    }

    /// Refuses a configuration that would expose a listener without a token, or whose
    /// limits contradict each other.
    pub fn check(&self) -> Result<(), ServerError> {
        let l = &self.limits;
        if l.max_receiving_bytes < l.max_body_bytes
            || l.max_query_receiving_bytes < l.max_body_bytes
        {
            return Err(ServerError::Limits(format!(
                "the receive budgets ({} and {} bytes) must each hold one body of the largest \
                 size allowed ({} bytes)",
                l.max_receiving_bytes, l.max_query_receiving_bytes, l.max_body_bytes
            )));
        }
        if self.token().is_some() {
            return Ok(());
        }
        for (addr, role) in self.listeners() {
            if !addr.ip().is_loopback() {
                return Err(ServerError::TokenRequired { addr, role });
            }
        }
        Ok(())
    }

    fn listeners(&self) -> [(SocketAddr, &'static str); 3] {
        [
            (self.grpc_addr, "OTLP/gRPC"),
            (self.ingest_addr, "ingest"),
            (self.http_addr, "query API"),
        ]
    }
}

/// Nanoseconds since the Unix epoch, now (0 on a clock before it).
pub(crate) fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Longest a stopping server waits for its spool to reach ClickHouse.
pub const SHIP_ON_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(30);

/// What every handler shares.
pub(crate) struct AppState {
    pub store: Arc<dyn TraceStore>,
    pub backend: Backend,
    pub config: ServerConfig,
    pub metrics: metrics::Metrics,
    pub inflight: Semaphore,
    pub scans: work::Scans,
    pub pivot: pivot::Hub,
    pub gates: listen::Gates,
    pub ingest_receiving: receive::Budget,
    pub api_receiving: receive::Budget,
    pub captures: captures::Captures,
    pub last_outline: outline::LastOutline,
}

/// A server that is up; its addresses are the ones actually bound (port 0 resolved).
pub struct RunningServer {
    /// OTLP/gRPC address.
    pub grpc_addr: SocketAddr,
    /// OTLP/HTTP, Zipkin and native address.
    pub ingest_addr: SocketAddr,
    /// Query API address.
    pub http_addr: SocketAddr,
    /// The store, for in-process use (benchmarks, tests).
    pub store: Arc<dyn TraceStore>,
    /// Which store it is.
    pub backend: Backend,
    state: Arc<AppState>,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningServer {
    /// Infers and joins now every path the capture logs sent hold (the processes
    /// captured have stopped, their logs sent): what the passes would take as they
    /// settle.
    pub async fn settle_captures(&self) -> Result<(), ApiError> {
        captures::pass(&self.state, now_ns()).await
    }

    /// What the joins of the capture logs sent did (as `GET /api/captures`).
    pub fn capture_report(&self) -> captures::CaptureReport {
        self.state.captures.report()
    }

    /// Stops accepting, lets requests in flight finish, and closes the store; on
    /// ClickHouse, first gives the spool up to [`SHIP_ON_SHUTDOWN`] to ship what it holds
    /// (what is left is shipped by the next start on the same `--data`).
    pub async fn shutdown(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        if let Backend::ClickHouse(spool) = &self.backend {
            let spool = spool.clone();
            let shipped =
                tokio::task::spawn_blocking(move || spool.wait_shipped(SHIP_ON_SHUTDOWN)).await;
            if !matches!(shipped, Ok(true)) {
                tracing::warn!(
                    "spans left unshipped in the spool; the next start on this --data ships them"
                );
            }
        }
    }
}

async fn bind(
    addr: SocketAddr,
    role: &'static str,
) -> Result<tokio::net::TcpListener, ServerError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind { addr, role, source })
}

fn open_backend(
    dir: PathBuf,
    opts: StoreOptions,
    clickhouse: Option<ClickHouseConfig>,
) -> Result<Backend, causeway_store::StoreError> {
    let Some(ch) = clickhouse else {
        return Ok(Backend::Embedded(Arc::new(Store::open(dir, opts)?)));
    };
    let store = ClickHouseStore::open(ch.endpoint, ch.options)?;
    let spool = SpoolOptions {
        fsync: opts.fsync,
        retention: opts.retention_age,
        ..ch.spool
    };
    Ok(Backend::ClickHouse(Arc::new(ShippingStore::open(
        dir.join("clickhouse-spool"),
        store,
        spool,
    )?)))
}

/// Opens the store and starts the three listeners.
pub async fn start(mut config: ServerConfig) -> Result<RunningServer, ServerError> {
    config.check()?;
    config.limits.connections.fit_to_descriptors();
    let grpc = bind(config.grpc_addr, "OTLP/gRPC").await?;
    let ingest = bind(config.ingest_addr, "ingest").await?;
    let http = bind(config.http_addr, "query API").await?;
    let local = |l: &tokio::net::TcpListener, addr, role| {
        l.local_addr()
            .map_err(|source| ServerError::Bind { addr, role, source })
    };
    let grpc_addr = local(&grpc, config.grpc_addr, "OTLP/gRPC")?;
    let ingest_addr = local(&ingest, config.ingest_addr, "ingest")?;
    let http_addr = local(&http, config.http_addr, "query API")?;

    let store_dir = config.data_dir.clone();
    let store_opts = config.store.clone();
    let clickhouse = config.clickhouse.clone();
    let backend =
        tokio::task::spawn_blocking(move || open_backend(store_dir, store_opts, clickhouse))
            .await
            .map_err(|e| {
                ServerError::Store(causeway_store::StoreError::Io {
                    action: "open store",
                    path: config.data_dir.clone(),
                    source: std::io::Error::other(e.to_string()),
                })
            })??;
    let store = backend.store();
    let hub = pivot::Hub::open(
        config.data_dir.join("pivot.json"),
        config.pivot_interval,
        config.limits.pivot,
        &config.pivot_tracepoints,
    )
    .map_err(ServerError::Pivot)?;
    let limits = &config.limits;
    // Captured services export their spans to these: that traffic is not their requests.
    let own_ports = vec![grpc_addr.port(), ingest_addr.port(), http_addr.port()];
    let captures =
        captures::Captures::open(&config.data_dir, config.capture_names.clone(), own_ports);
    let state = Arc::new(AppState {
        captures,
        last_outline: outline::LastOutline::default(),
        pivot: hub,
        store: store.clone(),
        backend: backend.clone(),
        inflight: Semaphore::new(limits.max_inflight.max(1)),
        scans: work::Scans::new(limits.max_scans, limits.query_timeout),
        metrics: metrics::Metrics::default(),
        gates: listen::Gates::new(&limits.connections),
        ingest_receiving: receive::Budget::new(limits.max_receiving_bytes, "--max-receiving-bytes"),
        api_receiving: receive::Budget::new(
            limits.max_query_receiving_bytes,
            "--max-query-receiving-bytes",
        ),
        config,
    });

    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    tasks.push(tokio::spawn(listen::serve_http(
        ingest,
        ingest::router(state.clone()),
        state.clone(),
        |g| &g.ingest,
        stopped.clone(),
    )));
    tasks.push(tokio::spawn(listen::serve_http(
        http,
        api::router(state.clone()),
        state.clone(),
        |g| &g.query,
        stopped.clone(),
    )));
    let signal = move |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    let rx = stopped.clone();
    tasks.push(tokio::spawn(grpc::serve(state.clone(), grpc, signal(rx))));
    tasks.push(tokio::spawn(captures::run(state.clone(), stopped.clone())));
    tracing::info!(%grpc_addr, %ingest_addr, %http_addr, "causeway serving");
    Ok(RunningServer {
        grpc_addr,
        ingest_addr,
        http_addr,
        store,
        backend,
        state,
        stop,
        tasks,
    })
}
