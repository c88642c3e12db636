//! Hand-built spans for the analysis tests.
#![allow(dead_code)]

use std::sync::Arc;

use causeway_model::{Span, SpanKind, Trace, TraceId};

pub const TRACE: u128 = 0xabc;

/// A span of trace `TRACE` on a host named after its service.
pub fn span(
    id: u64,
    parent: Option<u64>,
    service: &str,
    name: &str,
    kind: SpanKind,
    start: u64,
    end: u64,
) -> Span {
    let mut s = causeway_testkit::span(TRACE, id, parent, name, service, start, end);
    s.kind = kind;
    s.host = Arc::from(format!("{service}-host"));
    s
}

/// An internal span of service `svc`.
pub fn op(id: u64, parent: Option<u64>, start: u64, end: u64) -> Span {
    span(
        id,
        parent,
        "svc",
        &format!("op{id}"),
        SpanKind::Internal,
        start,
        end,
    )
}

pub fn trace(spans: Vec<Span>) -> Trace {
    Trace::assemble(TraceId::new(TRACE).unwrap(), spans)
}

/// Every Zipkin fixture in `testdata/zipkin`.
pub const ZIPKIN_FIXTURES: [&str; 6] = [
    "yelp.json",
    "envoy.json",
    "ascend.json",
    "simple-db-p6.json",
    "messaging-kafka.json",
    "skew.json",
];

pub fn fixture(name: &str) -> Vec<Trace> {
    let path = format!(
        "{}/../../testdata/zipkin/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let body = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let decoded = causeway_model::codec::zipkin::decode_json(&body).expect("fixture parses");
    Trace::assemble_all(decoded.spans)
}

pub fn id_of(t: &Trace, i: usize) -> u64 {
    t.spans[i].span_id.get()
}
