//! The OpenTelemetry SDK's own OTLP exporters, over HTTP (protobuf and JSON) and gRPC,
//! send to causeway; the spans come back through the query API with ids, parents,
//! attributes, events and status intact: from the embedded store, and from two servers
//! sharing a two-shard ClickHouse cluster, each answering for what the other received.

use crate::common;

use causeway_clickhouse::local_cluster::Cluster;
use common::TestServer;
use opentelemetry::trace::{Span as _, Status, TraceContextExt, Tracer, TracerProvider as _};
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, SpanExporter, WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;

struct Sent {
    trace_id: String,
    parent_id: String,
    child_id: String,
}

/// Records a parent with an attribute and an event, and a failing child.
fn record(provider: &SdkTracerProvider) -> Sent {
    let tracer = provider.tracer("e2e");
    let mut parent = tracer.start("checkout");
    parent.set_attribute(KeyValue::new("user.id", "alice"));
    parent.set_attribute(KeyValue::new("items", 3i64));
    parent.add_event("cart loaded", vec![KeyValue::new("cart.size", 3i64)]);
    let cx = opentelemetry::Context::current_with_span(parent);
    let mut child = tracer.start_with_context("charge card", &cx);
    child.set_status(Status::error("card declined"));
    let child_id = child.span_context().span_id().to_string();
    child.end();
    let span = cx.span();
    let sc = span.span_context();
    let sent = Sent {
        trace_id: sc.trace_id().to_string(),
        parent_id: sc.span_id().to_string(),
        child_id,
    };
    span.end();
    sent
}

fn provider(exporter: SpanExporter, service: &'static str) -> SdkTracerProvider {
    SdkTracerProvider::builder()
        .with_simple_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(service).build())
        .build()
}

fn check(server: &TestServer, sent: &Sent, service: &str) {
    let (status, body) = server.get(&format!("/api/traces/{}", sent.trace_id));
    assert_eq!(status, 200, "{body}");
    let spans = body["spans"].as_array().unwrap();
    assert_eq!(spans.len(), 2, "{body}");
    let by_id = |id: &str| {
        spans
            .iter()
            .find(|s| s["span_id"] == id)
            .unwrap_or_else(|| panic!("span {id} missing from {body}"))
    };
    let parent = by_id(&sent.parent_id);
    let child = by_id(&sent.child_id);
    assert_eq!(parent["trace_id"], sent.trace_id.as_str());
    assert_eq!(parent["name"], "checkout");
    assert_eq!(parent["service"], service);
    assert!(parent.get("parent_id").is_none());
    assert_eq!(child["parent_id"], sent.parent_id.as_str());
    let attrs = parent["attributes"].as_array().unwrap();
    assert!(
        attrs
            .iter()
            .any(|a| a["key"] == "user.id" && a["value"] == "alice"),
        "{attrs:?}"
    );
    assert!(
        attrs.iter().any(|a| a["key"] == "items" && a["value"] == 3),
        "{attrs:?}"
    );
    assert_eq!(parent["events"][0]["name"], "cart loaded");
    assert_eq!(parent["events"][0]["attributes"][0]["value"], 3);
    assert_eq!(child["status"]["code"], "error");
    assert_eq!(child["status"]["message"], "card declined");
    assert!(child["start"].as_u64().unwrap() >= parent["start"].as_u64().unwrap());

    // Searchable by service, operation and attribute.
    let (_, found) = server.get(&format!(
        "/api/search?service={service}&operation=checkout&tags=user.id%3Dalice"
    ));
    assert_eq!(
        found["traces"][0]["traceId"],
        sent.trace_id.as_str(),
        "{found}"
    );
    let (_, found) = server.get(&format!("/api/search?service={service}&error=true"));
    assert_eq!(found["traces"][0]["errorCount"], 1, "{found}");
}

fn http_exporter_round_trip(protocol: Protocol, service: &'static str) {
    let server = TestServer::start(service);
    let exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(server.ingest_url("/v1/traces"))
        .build()
        .unwrap();
    let p = provider(exporter, service);
    let sent = record(&p);
    p.shutdown().unwrap();
    check(&server, &sent, service);
}

#[test]
fn otlp_http_protobuf_exporter() {
    http_exporter_round_trip(Protocol::HttpBinary, "http-proto-app");
}

#[test]
fn otlp_http_json_exporter() {
    http_exporter_round_trip(Protocol::HttpJson, "http-json-app");
}

#[test]
fn otlp_grpc_exporter_with_gzip() {
    let server = TestServer::start("otel-grpc");
    let endpoint = format!("http://{}", server.server().grpc_addr);
    let sent = {
        let _rt = server.rt.enter();
        let exporter = SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .with_compression(opentelemetry_otlp::Compression::Gzip)
            .build()
            .unwrap();
        let p = provider(exporter, "grpc-app");
        let sent = record(&p);
        p.shutdown().unwrap();
        sent
    };
    check(&server, &sent, "grpc-app");
}

#[test]
fn two_servers_sharing_a_clickhouse_cluster() {
    let cluster = Cluster::start(2);
    let a = TestServer::start_on_clickhouse("otel-ch-a", &cluster.url("otel"));
    let b = TestServer::start_on_clickhouse("otel-ch-b", &cluster.url("otel"));
    let exporter = SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(a.ingest_url("/v1/traces"))
        .build()
        .unwrap();
    let p = provider(exporter, "ch-http-app");
    let sent_to_a = record(&p);
    p.shutdown().unwrap();
    let sent_to_b = {
        let _rt = b.rt.enter();
        let exporter = SpanExporter::builder()
            .with_tonic()
            .with_endpoint(format!("http://{}", b.server().grpc_addr))
            .build()
            .unwrap();
        let p = provider(exporter, "ch-grpc-app");
        let sent = record(&p);
        p.shutdown().unwrap();
        sent
    };
    a.wait_shipped();
    b.wait_shipped();
    check(&b, &sent_to_a, "ch-http-app");
    check(&a, &sent_to_b, "ch-grpc-app");
    for server in [&a, &b] {
        let (_, services) = server.get("/api/services");
        let services = services["services"].as_array().unwrap();
        for name in ["ch-http-app", "ch-grpc-app"] {
            assert!(services.iter().any(|s| s == name), "{services:?}");
        }
    }
}

#[test]
fn grpc_requires_the_token_when_one_is_set() {
    let server = TestServer::start_with("otel-grpc-token", |c| c.token = Some("s3cret".into()));
    let endpoint = format!("http://{}", server.server().grpc_addr);
    let _rt = server.rt.enter();
    let exporter = SpanExporter::builder()
        .with_tonic()
        .with_endpoint(endpoint)
        .build()
        .unwrap();
    let p = provider(exporter, "no-token-app");
    let sent = record(&p);
    let _ = p.shutdown();
    let mut r = server
        .http
        .get(&server.api_url(&format!("/api/traces/{}", sent.trace_id)))
        .header("authorization", "Bearer s3cret")
        .call()
        .unwrap();
    assert_eq!(
        r.status().as_u16(),
        404,
        "{}",
        r.body_mut().read_to_string().unwrap()
    );
}
