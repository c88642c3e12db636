//! The public fixtures in `testdata/` decode into the spans they hold.

use std::path::PathBuf;

use crate::spans::{find, sid};
use causeway_model::codec::{otlp, zipkin};
use causeway_model::{Span, SpanKind, Status, Trace, TraceId, Value};

fn fixture(rel: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn zipkin(name: &str) -> Vec<Span> {
    let d = zipkin::decode_json(&fixture(&format!("zipkin/{name}"))).unwrap();
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    d.spans
}

#[test]
fn otlp_example_decodes_with_upper_case_ids() {
    let d = otlp::decode_json(&fixture("otlp/trace.json")).unwrap();
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    assert_eq!(d.spans.len(), 1);
    let s = &d.spans[0];
    assert_eq!(s.trace_id.to_string(), "5b8efff798038103d269b633813fc60c");
    assert_eq!(s.span_id.to_string(), "eee19b7ec3c1b174");
    assert_eq!(s.parent_id, Some(sid("eee19b7ec3c1b173")));
    assert_eq!(s.name, "I'm a server span");
    assert_eq!(&*s.service, "my.service");
    assert_eq!(s.kind, SpanKind::Server);
    assert_eq!(s.start, 1_544_712_660_000_000_000);
    assert_eq!(s.end, 1_544_712_661_000_000_000);
    assert_eq!(
        s.attribute("my.span.attr"),
        Some(&Value::from("some value"))
    );
    assert_eq!(
        s.attribute("otel.scope.name"),
        Some(&Value::from("my.library"))
    );
    // and back: protobuf keeps every field
    let again = otlp::decode_protobuf(&otlp::encode_protobuf(&d.spans)).unwrap();
    assert_eq!(again.spans, d.spans);
}

#[test]
fn yelp_decodes_sixteen_spans_over_six_services_into_one_tree() {
    let spans = zipkin("yelp.json");
    assert_eq!(spans.len(), 16);
    let mut services: Vec<&str> = spans.iter().map(|s| &*s.service).collect();
    services.sort();
    services.dedup();
    assert_eq!(
        services,
        vec![
            "mobile_api",
            "routing",
            "spectre",
            "unknown",
            "yelp-main",
            "yelp_main/api_proxy"
        ]
    );
    let root = find(&spans, "2e8cfb154b59a41f");
    assert_eq!(root.kind, SpanKind::Server);
    assert_eq!(root.parent_id, None);
    assert_eq!(root.start, 1_571_896_375_237_354_000);
    assert_eq!(root.end, 1_571_896_375_237_354_000 + 131_848_000);
    // The shared id 668ed78ad94b35a1 is split: the client half keeps it, the server half
    // (api proxy) hangs under it, and the proxy's children hang under the server half.
    let client = find(&spans, "668ed78ad94b35a1");
    assert_eq!(client.kind, SpanKind::Client);
    let server = spans
        .iter()
        .find(|s| s.parent_id == Some(client.span_id) && s.kind == SpanKind::Server)
        .expect("server half");
    assert_eq!(server.span_id, zipkin::server_half_id(client.span_id));
    assert_eq!(&*server.service, "yelp_main/api_proxy");
    assert_eq!(
        find(&spans, "241cea1aa4cb2884").parent_id,
        Some(server.span_id)
    );
    let trace = Trace::assemble(spans[0].trace_id, spans.clone());
    assert_eq!(trace.roots.len(), 1, "one tree, no orphans");
    assert_eq!(trace.spans[trace.roots[0]].span_id, root.span_id);
    assert_eq!(trace.trace_id, TraceId::parse("a03ee8fff1dcd9b9").unwrap());
}

#[test]
fn skew_keeps_the_raw_times_of_a_server_that_starts_before_its_client() {
    let spans = zipkin("skew.json");
    assert_eq!(spans.len(), 4);
    let client = find(&spans, "74280ae0c10d8062");
    assert_eq!(client.kind, SpanKind::Client);
    assert_eq!(&*client.service, "servicea");
    let server = spans
        .iter()
        .find(|s| s.kind == SpanKind::Server && s.parent_id == Some(client.span_id))
        .unwrap();
    assert_eq!(&*server.service, "serviceb");
    assert!(
        server.start < client.start,
        "the fixture's skew is kept raw for the analysis"
    );
    assert_eq!(
        find(&spans, "43210ae0c10d1234").parent_id,
        Some(server.span_id)
    );
    let trace = Trace::assemble(spans[0].trace_id, spans);
    assert_eq!(trace.roots.len(), 1);
}

#[test]
fn kafka_messaging_keeps_producers_and_consumers() {
    let spans = zipkin("messaging-kafka.json");
    assert_eq!(spans.len(), 28);
    assert_eq!(
        spans
            .iter()
            .filter(|s| s.kind == SpanKind::Producer)
            .count(),
        9
    );
    assert_eq!(
        spans
            .iter()
            .filter(|s| s.kind == SpanKind::Consumer)
            .count(),
        7
    );
    let poll = find(&spans, "b4a2a87ee7f003bc");
    assert_eq!(poll.parent_id, Some(sid("2e22a0564764943a")));
    assert_eq!(&*poll.service, "serviceb");
    assert_eq!(poll.attribute("peer.service"), Some(&Value::from("kafka")));
    let trace = Trace::assemble(spans[0].trace_id, spans);
    assert_eq!(trace.roots.len(), 1);
}

#[test]
fn ascend_splits_shared_ids_and_keeps_the_remote_endpoint() {
    let spans = zipkin("ascend.json");
    assert_eq!(spans.len(), 8);
    let shared = sid("ecc00062ceef4bf0");
    let server = spans
        .iter()
        .find(|s| s.span_id == zipkin::server_half_id(shared))
        .unwrap();
    assert_eq!(&*server.service, "content-service");
    assert_eq!(server.name, "get /content/personal");
    assert_eq!(
        find(&spans, "c21c6c51ac71b3ba").parent_id,
        Some(server.span_id)
    );
    assert_eq!(
        find(&spans, "e6422f7ff7d78099").parent_id,
        Some(server.span_id)
    );
    assert_eq!(&*find(&spans, "ecc00062ceef4bf0").host, "172.17.0.13");
    let trace = Trace::assemble(spans[0].trace_id, spans);
    assert_eq!(trace.roots.len(), 1);
}

#[test]
fn envoy_keeps_a_shared_root_with_its_own_id() {
    let spans = zipkin("envoy.json");
    assert_eq!(spans.len(), 1);
    let s = &spans[0];
    assert_eq!(s.span_id, sid("978883983d506fa5"));
    assert_eq!(s.parent_id, None);
    assert_eq!(&*s.service, "unknown");
    assert_eq!(&*s.host, "169.254.65.45");
    assert_eq!(s.attribute("http.method"), Some(&Value::from("GET")));
    assert_eq!(s.start, 1_570_523_661_059_232_000);
}

#[test]
fn simple_db_has_four_database_clients_under_one_server() {
    let spans = zipkin("simple-db-p6.json");
    assert_eq!(spans.len(), 5);
    let root = find(&spans, "19f84f102048e047");
    assert_eq!(root.name, "http:/book");
    let kids: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_id == Some(root.span_id))
        .collect();
    assert_eq!(kids.len(), 4);
    assert!(kids.iter().all(|s| s.kind == SpanKind::Client));
    assert_eq!(
        find(&spans, "5d532ef6fed52445").attribute("peer.service"),
        Some(&Value::from("app_db"))
    );
    assert!(spans
        .iter()
        .all(|s| s.status == Status::Unset || s.is_error()));
}
