//! Causeway's demo system: a small shop of ten processes on loopback, instrumented only
//! through the `causeway` library, its middleware and a few spans of their own.
//!
//! ```text
//!  load ──▶ frontend ─┬─▶ catalog ──┬─▶ cache
//!                     │             └─▶ metadata (gRPC) ─▶ storage-1 (always the first replica)
//!                     ├─▶ recommend ─▶ cache
//!                     └─▶ orders ───┬─▶ storage-1, -2, -3 (quorum write: answer after 2 of 3)
//!                                   └─▶ queue ~~one-way message~~▶ queue worker
//! ```
//!
//! What it exhibits, on purpose: cache hits and misses; a storage client that reads the
//! first replica in the order the metadata service returns, which never changes (HDFS-6268
//! in the Pivot Tracing paper), so storage-1 takes every read and queues; a quorum write
//! whose third reply arrives after the answer (FAB in the Pip paper); one-way messages;
//! random latency, occasional errors and an occasional slow path.
//!
//! [`run_node`] runs one process's role; `causeway demo` starts one process per role, and
//! an uninstrumented reverse proxy in front of the frontend ([`edge`]) under capture.
#![warn(missing_docs)]

pub mod edge;
mod load;
pub mod logs;
mod metadata;
mod peers;
pub mod replicas;
mod services;
mod topology;

pub use load::{Load, LoadCounts};
pub use topology::{Role, Topology, TopologyError};

use std::time::Duration;

/// Any error a demo process stops with.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A demo process's configuration for `service`, in the subscriber mode `CAUSEWAY_MODE`
/// names (the tests run the demos in both).
pub(crate) fn node_config(service: &str) -> Result<causeway::Config, BoxError> {
    let config = causeway::Config::new(service);
    Ok(match std::env::var("CAUSEWAY_MODE") {
        Ok(mode) => config.with_mode(causeway::Mode::parse(&mode)?),
        Err(_) => config,
    })
}

/// The target of the demo's log lines: they go to its log files (`causeway demo
/// --logs`), not into its traces, whose shape the demo's expectations describe.
pub(crate) const LOG: &str = "shop::log";

/// The environment variable that carries the topology to each process.
pub const TOPOLOGY_VAR: &str = "CAUSEWAY_DEMO_TOPOLOGY";

/// The environment variable naming the Pivot Tracing hub (`causeway serve`'s query API)
/// each process takes queries from.
pub const PIVOT_HUB_VAR: &str = "CAUSEWAY_PIVOT_HUB";

/// The shop's tracepoints (`demo/tracepoints/shop.pivot`), which `causeway demo` defines
/// on its hub.
pub const SHOP_TRACEPOINTS: &str = include_str!("../tracepoints/shop.pivot");

/// The query `causeway demo` installs: the catalog's block reads by the replica they land
/// on.
pub const SHOP_QUERY: &str = "From read In Storage.DiskRead\n\
    Join block In First(Catalog.ReadBlock) On block -> read\n\
    GroupBy read.host\n\
    Select read.host, COUNT";

/// Runs `role` until stdin closes or the process is interrupted, sending its spans to the
/// OTLP/HTTP endpoint `otlp_endpoint` (a `/v1/traces` URL).
pub fn run_node(role: Role, topology: Topology, otlp_endpoint: &str) -> Result<(), BoxError> {
    let mut config = node_config(role.service())?;
    config.host = role.host().to_owned();
    config.otlp_endpoint = Some(otlp_endpoint.to_owned());
    config.pivot_hub = std::env::var(PIVOT_HUB_VAR).ok().filter(|h| !h.is_empty());
    config.shutdown_timeout = Duration::from_secs(3);
    // Only the demo's own spans and the middleware's: not the internals of h2, hyper
    // and tonic, which also open `tracing` spans.
    config.targets = Some(
        tracing_subscriber::filter::Targets::new()
            .with_target("causeway_demo", tracing::Level::TRACE)
            .with_target("causeway", tracing::Level::TRACE),
    );
    let guard = match std::env::var_os(logs::LOGS_VAR) {
        Some(dir) => logs::init_with_log(config, std::path::Path::new(&dir), role.service())?,
        None => causeway::init(config)?,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let result = runtime.block_on(services::serve(role, topology, stopped()));
    drop(runtime);
    drop(guard); // flushes the last spans
    result
}

/// Resolves when stdin reaches its end (the parent went away or closed it) or on
/// SIGINT/SIGTERM.
async fn stopped() {
    use tokio::io::AsyncReadExt;
    let stdin_closed = async {
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 64];
        while matches!(stdin.read(&mut buf).await, Ok(n) if n > 0) {}
    };
    let terminated = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = stdin_closed => {}
        _ = tokio::signal::ctrl_c() => {}
        _ = terminated => {}
    }
}

/// A random duration between `low` and `high` milliseconds.
pub(crate) fn millis(low: f64, high: f64) -> Duration {
    Duration::from_secs_f64((low + fastrand::f64() * (high - low)) / 1e3)
}

/// True with probability `p`.
pub(crate) fn chance(p: f64) -> bool {
    fastrand::f64() < p
}
