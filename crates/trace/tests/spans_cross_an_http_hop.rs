//! Two axum services on loopback, one calling the other with reqwest: one trace, with
//! server and client spans in the right parent-child order, each recording both ends of
//! its connection.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use causeway::middleware::endpoints::Endpoints;
use causeway::middleware::reqwest::TracedRequest;
use causeway::middleware::tower::TraceLayer;
use causeway::model::{SpanKind, Status};
use causeway::testing::Recorder;

fn recorder() -> &'static Recorder {
    static REC: OnceLock<Recorder> = OnceLock::new();
    REC.get_or_init(|| {
        let rec = Recorder::new();
        tracing::dispatcher::set_global_default(rec.dispatch()).expect("one global dispatcher");
        rec
    })
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<Endpoints>(),
        )
        .await
        .unwrap()
    });
    addr
}

async fn backend() -> SocketAddr {
    serve(
        Router::new()
            .route(
                "/inventory",
                get(|| async {
                    let _s = tracing::info_span!("lookup stock").entered();
                    "12"
                }),
            )
            .route(
                "/broken",
                get(|| async { (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "no") }),
            )
            .layer(TraceLayer::new()),
    )
    .await
}

async fn frontend(backend: SocketAddr) -> SocketAddr {
    let client = reqwest::Client::new();
    serve(
        Router::new()
            .route(
                "/checkout",
                get(move || {
                    let client = client.clone();
                    async move {
                        let stock = client
                            .get(format!("http://{backend}/inventory"))
                            .send_traced()
                            .await
                            .unwrap()
                            .text()
                            .await
                            .unwrap();
                        let _ = client
                            .get(format!("http://{backend}/broken"))
                            .send_traced()
                            .await
                            .unwrap();
                        format!("stock {stock}")
                    }
                }),
            )
            .layer(TraceLayer::new()),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_spans_both_services() {
    let rec = recorder();
    tokio::time::timeout(Duration::from_secs(20), async {
        let b = backend().await;
        let a = frontend(b).await;
        let body = reqwest::Client::new()
            .get(format!("http://{a}/checkout"))
            .header(
                "traceparent",
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            )
            .header("baggage", "tenant=acme")
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(body, "stock 12");
    })
    .await
    .expect("the hop finished in time");

    let traces = rec.traces();
    let t = traces
        .iter()
        .find(|t| t.trace_id.to_string() == "4bf92f3577b34da6a3ce929d0e0e4736")
        .expect("the caller's trace id is kept");
    let find = |name: &str| {
        t.spans
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no span {name}: {t:#?}"))
    };
    let a_server = find("GET /checkout");
    let a_client = find("GET /inventory");
    let b_server = t
        .spans
        .iter()
        .find(|s| s.name == "GET /inventory" && s.kind == SpanKind::Server)
        .unwrap();
    let b_work = find("lookup stock");
    assert_eq!(a_server.kind, SpanKind::Server);
    assert_eq!(a_server.parent_id.unwrap().to_string(), "00f067aa0ba902b7");
    let a_client = t
        .spans
        .iter()
        .find(|s| s.name == a_client.name && s.kind == SpanKind::Client)
        .unwrap();
    assert_eq!(a_client.parent_id, Some(a_server.span_id));
    assert_eq!(b_server.parent_id, Some(a_client.span_id));
    assert_eq!(b_work.parent_id, Some(b_server.span_id));
    assert_eq!(
        a_server
            .attribute("http.response.status_code")
            .and_then(|v| v.as_i64()),
        Some(200)
    );
    // the failed call is an error on both sides
    let broken: Vec<_> = t.spans.iter().filter(|s| s.name == "GET /broken").collect();
    assert_eq!(broken.len(), 2);
    assert!(broken
        .iter()
        .all(|s| s.status == Status::Error("HTTP 500".into())));
    // the client span lies around the server span it caused (same clock here)
    assert!(a_client.start <= b_server.start && b_server.end <= a_client.end);
    assert_eq!(t.spans.len(), 6);

    // Both ends of the connection, under OpenTelemetry's names.
    let text = |s: &causeway::model::Span, key: &str| {
        s.attribute(key)
            .map(|v| v.to_string())
            .unwrap_or_else(|| panic!("{key} missing on {}: {:?}", s.name, s.attributes))
    };
    let int = |s: &causeway::model::Span, key: &str| {
        s.attribute(key)
            .and_then(|v| v.as_i64())
            .unwrap_or_else(|| panic!("{key} missing on {}: {:?}", s.name, s.attributes))
    };
    let backend_port = int(b_server, "network.local.port");
    assert_eq!(text(a_client, "server.address"), "127.0.0.1");
    assert_eq!(int(a_client, "server.port"), backend_port);
    assert_eq!(text(a_client, "network.peer.address"), "127.0.0.1");
    assert_eq!(int(a_client, "network.peer.port"), backend_port);
    assert_eq!(text(b_server, "server.address"), "127.0.0.1");
    assert_eq!(int(b_server, "server.port"), backend_port);
    assert_eq!(text(b_server, "network.local.address"), "127.0.0.1");
    assert_eq!(text(b_server, "network.peer.address"), "127.0.0.1");
    let client_port = int(b_server, "network.peer.port");
    assert_eq!(int(b_server, "client.port"), client_port);
    assert_ne!(client_port, backend_port);
    // The frontend's server span was reached on another port.
    assert_ne!(int(a_server, "network.local.port"), backend_port);
}
