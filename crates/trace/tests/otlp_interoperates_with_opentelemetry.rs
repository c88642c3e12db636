//! Causeway talks to the OpenTelemetry world: its OTLP exporter's requests decode with
//! `opentelemetry-proto`, and W3C context written by the `opentelemetry` crate's own
//! propagator is read by Causeway (and the other way round).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::routing::post;
use axum::Router;
use causeway::SpanExt;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use prost::Message;

#[test]
fn exported_spans_decode_with_opentelemetry_proto() {
    let received: Arc<Mutex<Vec<(String, Bytes)>>> = Arc::default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let sink = received.clone();
    let addr = rt.block_on(async move {
        let app = Router::new().route(
            "/v1/traces",
            post(move |headers: axum::http::HeaderMap, body: Bytes| {
                let sink = sink.clone();
                async move {
                    let ct = headers
                        .get("content-type")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    sink.lock().unwrap().push((ct, body));
                    ""
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        addr
    });

    let config =
        causeway::testing::config("exporter-test").with_otlp_endpoint(format!("http://{addr}"));
    let (dispatch, guard) = causeway::dispatch(config).unwrap();
    let (trace_id, span_id) = tracing::dispatcher::with_default(&dispatch, || {
        let root = tracing::info_span!("GET /items", otel.kind = "server", http.route = "/items");
        let ctx = root.context().unwrap();
        root.in_scope(|| {
            let _db = tracing::info_span!("select items", db.system = "postgresql").entered();
            tracing::info!(rows = 3, "fetched");
        });
        (ctx.trace_id, ctx.span_id)
    });
    drop(guard); // flushes through the exporter, within the shutdown timeout

    let got = received.lock().unwrap().clone();
    assert!(!got.is_empty(), "the collector received a request");
    let mut spans = Vec::new();
    for (ct, body) in &got {
        assert_eq!(ct, "application/x-protobuf");
        let req = ExportTraceServiceRequest::decode(body.as_ref()).expect("valid OTLP protobuf");
        for rs in req.resource_spans {
            let service = rs
                .resource
                .as_ref()
                .and_then(|r| r.attributes.iter().find(|a| a.key == "service.name"))
                .and_then(|a| a.value.clone())
                .map(|v| format!("{:?}", v.value));
            assert!(service.unwrap().contains("exporter-test"));
            for ss in rs.scope_spans {
                spans.extend(ss.spans);
            }
        }
    }
    assert_eq!(spans.len(), 2);
    let root = spans.iter().find(|s| s.name == "GET /items").unwrap();
    assert_eq!(root.trace_id, trace_id.to_bytes());
    assert_eq!(root.span_id, span_id.to_bytes());
    assert_eq!(root.kind, 2, "SPAN_KIND_SERVER");
    let db = spans.iter().find(|s| s.name == "select items").unwrap();
    assert_eq!(db.parent_span_id, span_id.to_bytes());
    assert_eq!(db.events[0].name, "fetched");
    drop(rt);
}

#[test]
fn context_from_the_opentelemetry_propagator_is_extracted() {
    let otel_ctx = SpanContext::new(
        TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
        SpanId::from_hex("00f067aa0ba902b7").unwrap(),
        TraceFlags::SAMPLED,
        true,
        TraceState::from_key_value([("congo", "t61rcWkgMzE")]).unwrap(),
    );
    let cx = opentelemetry::Context::new().with_remote_span_context(otel_ctx);
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(&cx, &mut carrier);

    let extracted = causeway::extract(&carrier);
    let parent = extracted.parent.clone().expect("a valid parent");
    assert_eq!(
        parent.trace_id.to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(parent.span_id.to_string(), "00f067aa0ba902b7");
    assert!(parent.is_sampled());
    assert_eq!(parent.trace_state.get("congo"), Some("t61rcWkgMzE"));

    // and back: what Causeway injects, OpenTelemetry extracts
    let rec = causeway::testing::Recorder::new();
    let mut out: HashMap<String, String> = HashMap::new();
    let child = rec.in_scope(|| {
        let span = causeway::with_remote_parent(&extracted, || tracing::info_span!("handler"));
        let _g = span.enter();
        causeway::inject(&mut out);
        span.context().unwrap()
    });
    let back = TraceContextPropagator::new().extract(&out);
    let sc = back.span().span_context().clone();
    assert_eq!(
        sc.trace_id().to_string(),
        "4bf92f3577b34da6a3ce929d0e0e4736"
    );
    assert_eq!(sc.span_id().to_string(), child.span_id.to_string());
    assert!(sc.is_sampled());
    assert_eq!(sc.trace_state().get("congo"), Some("t61rcWkgMzE"));
}

#[test]
fn a_silent_collector_does_not_hold_up_the_guard() {
    // A server that accepts and never answers.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let conns: Vec<_> = listener.incoming().take(3).collect();
        std::thread::sleep(Duration::from_secs(120));
        drop(conns);
    });
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut config =
            causeway::testing::config("blackhole").with_otlp_endpoint(format!("http://{addr}"));
        config.shutdown_timeout = Duration::from_millis(500);
        let (dispatch, guard) = causeway::dispatch(config).unwrap();
        tracing::dispatcher::with_default(&dispatch, || {
            let _s = tracing::info_span!("lost").entered();
        });
        drop(guard);
        done_tx.send(()).unwrap();
    });
    // A hang detector, not a timing: the guard gives up after its 500 ms timeout, long
    // before the collector would ever answer.
    done_rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the guard returned although the collector never answered");
}
