//! OTLP logs from the OpenTelemetry SDK's own exporters (HTTP protobuf, HTTP JSON, gRPC
//! with gzip) and a hand-made request: each record shows on the span it names, or, naming
//! only its trace, on the span of its service whose interval holds it, with its level and
//! attributes; records of a span that never arrived stay visible on a span of their own; a
//! record with no trace is rejected by name in OTLP's partial success; and the carriers
//! are no operation of any service.

use std::time::{Duration, UNIX_EPOCH};

use crate::common::TestServer;
use causeway_model::codec::otlp;
use causeway_testkit::{now_ns, TraceBuilder};
use opentelemetry::logs::{AnyValue, LogRecord as _, Logger as _, LoggerProvider as _, Severity};
use opentelemetry::trace::{SpanId, TraceFlags, TraceId};
use opentelemetry_otlp::{LogExporter, Protocol, WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::logs::SdkLoggerProvider;
use opentelemetry_sdk::Resource;
use serde_json::Value;

const TRACE: u128 = 0x5b8e_fff7_9803_8103_d269_b633_8130_0001;
const MS: u64 = 1_000_000;

/// One record through `exporter` from `service`: `body` at `at` ns, in span `span` (or
/// the trace only, for `None`) of [`TRACE`].
fn emit(
    exporter: LogExporter,
    service: &'static str,
    body: &'static str,
    at: u64,
    span: Option<u64>,
) {
    let provider = SdkLoggerProvider::builder()
        .with_simple_exporter(exporter)
        .with_resource(Resource::builder().with_service_name(service).build())
        .build();
    let logger = provider.logger("causeway-test");
    let mut record = logger.create_log_record();
    record.set_body(AnyValue::from(body));
    record.set_severity_number(if span.is_some() {
        Severity::Warn
    } else {
        Severity::Info
    });
    record.set_timestamp(UNIX_EPOCH + Duration::from_nanos(at));
    record.add_attribute("amount", 12i64);
    let span = span.map_or(SpanId::INVALID, |s| SpanId::from_bytes(s.to_be_bytes()));
    record.set_trace_context(
        TraceId::from_bytes(TRACE.to_be_bytes()),
        span,
        Some(TraceFlags::SAMPLED),
    );
    logger.emit(record);
    provider.shutdown().unwrap();
}

fn http_exporter(server: &TestServer, protocol: Protocol) -> LogExporter {
    LogExporter::builder()
        .with_http()
        .with_protocol(protocol)
        .with_endpoint(server.ingest_url("/v1/logs"))
        .build()
        .unwrap()
}

/// A span's events as (name, level).
fn lines(span: &Value) -> Vec<(String, String)> {
    span["events"]
        .as_array()
        .map(|events| {
            events
                .iter()
                .map(|e| {
                    let level = e["attributes"]
                        .as_array()
                        .and_then(|a| a.iter().find(|kv| kv["key"] == "level"))
                        .map_or(String::new(), |kv| {
                            kv["value"].as_str().unwrap().to_string()
                        });
                    (e["name"].as_str().unwrap().to_string(), level)
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn records_from_sdks_and_by_hand_show_on_their_spans() {
    let server = TestServer::start("otlp-logs");
    let base = now_ns() - 10_000 * MS;
    // The instrumented trace: shop's checkout calls payments' charge.
    let mut b = TraceBuilder::new(TRACE);
    let root = b.span(
        None,
        "shop",
        "web-1",
        causeway_model::SpanKind::Server,
        "checkout",
        base,
        base + 100 * MS,
    );
    b.span(
        Some(root),
        "payments",
        "app-1",
        causeway_model::SpanKind::Internal,
        "charge card",
        base + 10 * MS,
        base + 60 * MS,
    );
    let (status, _, body) = server.post(
        "/v1/traces",
        &[("content-type", "application/json")],
        &otlp::encode_json(&b.spans()),
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));

    emit(
        http_exporter(&server, Protocol::HttpBinary),
        "payments",
        "card charged",
        base + 30 * MS,
        Some(2),
    );
    emit(
        http_exporter(&server, Protocol::HttpJson),
        "shop",
        "basket read",
        base + 5 * MS,
        Some(1),
    );
    {
        let _rt = server.rt.enter();
        let exporter = LogExporter::builder()
            .with_tonic()
            .with_endpoint(format!("http://{}", server.server().grpc_addr))
            .with_compression(opentelemetry_otlp::Compression::Gzip)
            .build()
            .unwrap();
        emit(
            exporter,
            "payments",
            "retrying charge",
            base + 40 * MS,
            None,
        );
    }

    // By hand: a record of a span that never arrived, and one with no trace at all.
    let request = serde_json::json!({"resourceLogs": [{
    "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "ledger"}}]},
    "scopeLogs": [{"logRecords": [
        {"timeUnixNano": (base + 70 * MS).to_string(), "severityText": "ERROR",
         "body": {"stringValue": "ledger write failed"},
         "traceId": format!("{TRACE:032x}"), "spanId": "0000000000000063"},
        {"timeUnixNano": (base + 80 * MS).to_string(), "body": {"stringValue": "orphan line"}}
    ]}]}]});
    let (status, ct, body) = server.post(
        "/v1/logs",
        &[("content-type", "application/json")],
        request.to_string().as_bytes(),
    );
    assert_eq!((status, ct.as_str()), (200, "application/json"));
    let answer: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        answer["partialSuccess"]["rejectedLogRecords"], 1,
        "{answer}"
    );
    let message = answer["partialSuccess"]["errorMessage"].as_str().unwrap();
    assert!(
        message.contains("logRecords[1].traceId") && message.contains("names no trace"),
        "{message}"
    );

    let (status, trace) = server.get(&format!("/api/traces/{TRACE:032x}"));
    assert_eq!(status, 200, "{trace}");
    let spans = trace["spans"].as_array().unwrap();
    let by_name = |name: &str| {
        spans
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no span {name}: {trace}"))
    };
    let level = |l: &str| l.to_string();
    assert_eq!(
        lines(by_name("checkout")),
        [("basket read".to_string(), level("WARN"))]
    );
    assert_eq!(
        lines(by_name("charge card")),
        [
            ("card charged".to_string(), level("WARN")),
            ("retrying charge".to_string(), level("INFO"))
        ]
    );
    let amount = &by_name("charge card")["events"][0]["attributes"];
    assert!(
        amount
            .as_array()
            .unwrap()
            .iter()
            .any(|kv| kv["key"] == "amount" && kv["value"] == 12),
        "{amount}"
    );
    // The ledger's line stays on its carrier, a span of the ledger's own.
    let carrier = by_name(causeway_model::logs::LOG_RECORDS);
    assert_eq!(carrier["service"], "ledger");
    assert_eq!(
        lines(carrier),
        [("ledger write failed".to_string(), level("ERROR"))]
    );
    assert_eq!(spans.len(), 3, "{trace}");

    let (_, ops) = server.get("/api/services/payments/operations");
    assert_eq!(
        ops["operations"],
        serde_json::json!(["charge card"]),
        "{ops}"
    );

    let (_, metrics) = server.get("/metrics");
    let metrics = metrics.as_str().unwrap().to_string();
    for line in [
        "causeway_ingest_log_records_total{protocol=\"otlp_http\"} 3",
        "causeway_ingest_log_records_total{protocol=\"otlp_grpc\"} 1",
        "causeway_ingest_rejected_log_records_total{protocol=\"otlp_http\"} 1",
        "causeway_ingest_spans_total{protocol=\"otlp_http\"} 2",
    ] {
        assert!(metrics.contains(line), "{line} missing:\n{metrics}");
    }
}

#[test]
fn a_logs_body_of_another_type_or_garbled_is_refused_by_name() {
    let server = TestServer::start("otlp-logs-bad");
    let (status, _, body) = server.post("/v1/logs", &[("content-type", "text/plain")], b"hi");
    assert_eq!(status, 415);
    assert!(String::from_utf8_lossy(&body).contains("/v1/logs"));
    let (status, _, body) = server.post(
        "/v1/logs",
        &[("content-type", "application/json")],
        b"{\"resourceLogs\": [{",
    );
    assert_eq!(status, 400);
    assert!(
        String::from_utf8_lossy(&body).contains("line 1 column"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    let (status, _, _) = server.post(
        "/v1/logs",
        &[("content-type", "application/x-protobuf")],
        &[0x0a, 0xff],
    );
    assert_eq!(status, 400);
}
