//! Counters for `/metrics` (Prometheus text format).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

use causeway_store::StoreStats;

/// The ingest protocols, in the order counters are kept.
pub(crate) const PROTOCOLS: [&str; 5] = ["otlp_grpc", "otlp_http", "zipkin", "native", "jaeger"];

#[derive(Default)]
pub(crate) struct Metrics {
    pub accepted: [AtomicU64; 5],
    pub rejected: [AtomicU64; 5],
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

/// Every metric of the server, in Prometheus' text format.
pub(crate) fn render(state: &crate::AppState) -> String {
    let mut out = state.metrics.render(&state.store.stats());
    let gauge = |out: &mut String, name: &str, help: &str| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
    };
    gauge(
        &mut out,
        "causeway_connections_open",
        "Connections open, by listener.",
    );
    for (name, gate) in crate::listen::LISTENERS.iter().zip(state.gates.all()) {
        let _ = writeln!(
            out,
            "causeway_connections_open{{listener=\"{name}\"}} {}",
            gate.open()
        );
    }
    gauge(
        &mut out,
        "causeway_connections_max",
        "Connections a listener holds at most.",
    );
    for (name, gate) in crate::listen::LISTENERS.iter().zip(state.gates.all()) {
        let _ = writeln!(
            out,
            "causeway_connections_max{{listener=\"{name}\"}} {}",
            gate.max()
        );
    }
    let _ = writeln!(
        out,
        "# HELP causeway_connections_refused_total Connections refused at the listener's cap.\n# TYPE causeway_connections_refused_total counter"
    );
    for (name, gate) in crate::listen::LISTENERS.iter().zip(state.gates.all()) {
        let _ = writeln!(
            out,
            "causeway_connections_refused_total{{listener=\"{name}\"}} {}",
            gate.refused.load(Ordering::Relaxed)
        );
    }
    gauge(
        &mut out,
        "causeway_receiving_bytes",
        "Bytes of request bodies held, by listener.",
    );
    for (name, budget) in [
        ("ingest", &state.ingest_receiving),
        ("query", &state.api_receiving),
    ] {
        let _ = writeln!(
            out,
            "causeway_receiving_bytes{{listener=\"{name}\"}} {}",
            budget.held()
        );
    }
    if let crate::Backend::Embedded(_) = state.backend {
        gauge(
            &mut out,
            "causeway_sql_queries_running",
            "SQL queries running, one past its time limit until it has stopped.",
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
        let _ = writeln!(
            out,
            "# HELP causeway_ingest_spans_total Spans accepted, by protocol."
        );
        let _ = writeln!(out, "# TYPE causeway_ingest_spans_total counter");
        for (p, c) in PROTOCOLS.iter().zip(&self.accepted) {
            let _ = writeln!(
                out,
                "causeway_ingest_spans_total{{protocol=\"{p}\"}} {}",
                get(c)
            );
        }
        let _ = writeln!(
            out,
            "# HELP causeway_ingest_rejected_spans_total Spans rejected as invalid, by protocol."
        );
        let _ = writeln!(out, "# TYPE causeway_ingest_rejected_spans_total counter");
        for (p, c) in PROTOCOLS.iter().zip(&self.rejected) {
            let _ = writeln!(
                out,
                "causeway_ingest_rejected_spans_total{{protocol=\"{p}\"}} {}",
                get(c)
            );
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
