//! Counters, `/metrics` (Prometheus text format) and `/api/status`.
//!
//! `/metrics` renders accepted and rejected spans and log records per protocol; refused requests by reason
//! (busy, in flight, malformed, too large, body timeout, receive budget); connections open,
//! allowed and refused per listener; bytes of bodies held; SQL queries running; and the
//! spans the service lists had no room for. `/api/status` gives the store's sizes.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;

use causeway_store::StoreStats;

use crate::AppState;

/// The ingest protocols of spans, in the order counters are kept (`ingest::Protocol`).
pub(crate) const PROTOCOLS: [&str; 5] = ["otlp_grpc", "otlp_http", "zipkin", "native", "jaeger"];
/// The ingest protocols of log records, whose counters follow those of spans.
const LOG_PROTOCOLS: [&str; 2] = ["otlp_grpc", "otlp_http"];

#[derive(Default)]
pub(crate) struct Metrics {
    /// Spans (log records, for the log protocols) accepted, by `ingest::Protocol`.
    pub accepted: [AtomicU64; 7],
    pub rejected: [AtomicU64; 7],
    pub refused_busy: AtomicU64,
    pub refused_inflight: AtomicU64,
    pub refused_malformed: AtomicU64,
    pub refused_too_large: AtomicU64,
    pub refused_body_timeout: AtomicU64,
    pub refused_receive_budget: AtomicU64,
}

pub(crate) fn add(c: &AtomicU64, n: usize) {
    c.fetch_add(n as u64, Ordering::Relaxed);
}

/// One metric with a value per listener: its help and type lines, then a line each.
fn per_listener(
    out: &mut String,
    (name, kind, help): (&str, &str, &str),
    values: impl IntoIterator<Item = (&'static str, u64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    for (listener, v) in values {
        let _ = writeln!(out, "{name}{{listener=\"{listener}\"}} {v}");
    }
}

/// Every metric of the server, in Prometheus' text format.
pub(crate) fn render(state: &crate::AppState) -> String {
    let mut out = state.metrics.render(&state.store.stats());
    let gates = || crate::listen::LISTENERS.into_iter().zip(state.gates.all());
    per_listener(
        &mut out,
        (
            "causeway_connections_open",
            "gauge",
            "Connections open, by listener.",
        ),
        gates().map(|(l, g)| (l, g.open() as u64)),
    );
    per_listener(
        &mut out,
        (
            "causeway_connections_max",
            "gauge",
            "Connections a listener holds at most.",
        ),
        gates().map(|(l, g)| (l, g.max() as u64)),
    );
    per_listener(
        &mut out,
        (
            "causeway_connections_refused_total",
            "counter",
            "Connections refused at the listener's cap.",
        ),
        gates().map(|(l, g)| (l, g.refused.load(Ordering::Relaxed))),
    );
    per_listener(
        &mut out,
        (
            "causeway_receiving_bytes",
            "gauge",
            "Bytes of request bodies held, by listener.",
        ),
        [
            ("ingest", state.ingest_receiving.held() as u64),
            ("query", state.api_receiving.held() as u64),
        ],
    );
    if let crate::Backend::Embedded(_) = state.backend {
        let name = "causeway_sql_queries_running";
        let _ = writeln!(
            out,
            "# HELP {name} SQL queries running, one past its time limit until it has stopped.\n# TYPE {name} gauge"
        );
        let _ = writeln!(
            out,
            "causeway_sql_queries_running {}",
            causeway_store::sql::running()
        );
    }
    out
}

impl Metrics {
    fn render(&self, store: &StoreStats) -> String {
        let mut out = String::new();
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let counted = [
            ("spans", "Spans", &PROTOCOLS[..], 0),
            (
                "log_records",
                "Log records",
                &LOG_PROTOCOLS[..],
                PROTOCOLS.len(),
            ),
        ];
        for (unit, what, protocols, first) in counted {
            let accepted = &self.accepted[first..];
            let rejected = &self.rejected[first..];
            for (name, help, counters) in [
                (
                    format!("causeway_ingest_{unit}_total"),
                    "accepted",
                    accepted,
                ),
                (
                    format!("causeway_ingest_rejected_{unit}_total"),
                    "rejected as invalid",
                    rejected,
                ),
            ] {
                let _ = writeln!(out, "# HELP {name} {what} {help}, by protocol.");
                let _ = writeln!(out, "# TYPE {name} counter");
                for (p, c) in protocols.iter().zip(counters) {
                    let _ = writeln!(out, "{name}{{protocol=\"{p}\"}} {}", get(c));
                }
            }
        }
        let _ = writeln!(
            out,
            "# HELP causeway_ingest_refused_requests_total Requests refused whole, by reason."
        );
        let _ = writeln!(out, "# TYPE causeway_ingest_refused_requests_total counter");
        for (reason, c) in [
            ("store_busy", &self.refused_busy),
            ("too_many_in_flight", &self.refused_inflight),
            ("malformed", &self.refused_malformed),
            ("too_large", &self.refused_too_large),
            ("body_timeout", &self.refused_body_timeout),
            ("receive_budget", &self.refused_receive_budget),
        ] {
            let _ = writeln!(
                out,
                "causeway_ingest_refused_requests_total{{reason=\"{reason}\"}} {}",
                get(c)
            );
        }
        for (name, help, v) in [
            (
                "causeway_store_blocks",
                "Blocks on disk.",
                store.blocks as u64,
            ),
            (
                "causeway_store_block_bytes",
                "Bytes of blocks on disk.",
                store.block_bytes,
            ),
            (
                "causeway_store_block_spans",
                "Spans in blocks.",
                store.block_spans,
            ),
            (
                "causeway_store_head_spans",
                "Spans in memory, not yet in a block.",
                store.head_spans,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        let name = "causeway_store_catalog_refused_spans_total";
        let _ = writeln!(
            out,
            "# HELP {name} Spans whose service or operation the lists had no room for.\n# TYPE {name} counter\n{name} {}",
            store.catalog_refused
        );
        out
    }
}

/// `GET /api/status`: the store's counts.
pub(crate) async fn status(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok", "store": state.store.stats() }))
}

/// `GET /metrics`, in Prometheus' text format.
pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        render(&state),
    )
}
