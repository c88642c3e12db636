//! A tonic client and server on loopback: the client layer opens a client span and
//! injects its context, the server layer joins it; both record the connection's ends.

mod common;

use std::time::Duration;

use causeway::model::{SpanKind, Value};
use causeway::testing::Recorder;
use tonic_health::pb::HealthCheckRequest;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_is_one_trace_with_client_and_server_spans() {
    let rec = Recorder::new();
    tracing::dispatcher::set_global_default(rec.dispatch()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), async {
        let mut client = common::traced_health_client().await;
        let _root = tracing::info_span!("health probe");
        let resp = client
            .check(HealthCheckRequest {
                service: String::new(),
            })
            .await
            .unwrap();
        assert_eq!(resp.into_inner().status, 1); // SERVING
    })
    .await
    .expect("the call finished in time");

    let spans = rec.spans();
    let client = spans
        .iter()
        .find(|s| s.kind == SpanKind::Client)
        .expect("client span");
    let server = spans
        .iter()
        .find(|s| s.kind == SpanKind::Server)
        .expect("server span");
    assert_eq!(client.name, "grpc.health.v1.Health/Check");
    assert_eq!(server.name, "grpc.health.v1.Health/Check");
    assert_eq!(server.trace_id, client.trace_id);
    assert_eq!(server.parent_id, Some(client.span_id));
    assert_eq!(server.attribute("rpc.system"), Some(&Value::from("grpc")));
    assert!(!server.is_error() && !client.is_error());
    assert_eq!(
        server
            .attribute("http.response.status_code")
            .and_then(|v| v.as_i64()),
        Some(200)
    );
    let int = |s: &causeway::model::Span, key: &str| {
        s.attribute(key)
            .and_then(|v| v.as_i64())
            .unwrap_or_else(|| panic!("{key} missing on {:?}", s.attributes))
    };
    let port = int(client, "server.port");
    assert_eq!(int(server, "server.port"), port);
    assert_eq!(int(server, "network.local.port"), port);
    assert_ne!(int(server, "network.peer.port"), port);
    assert_eq!(
        server.attribute("network.peer.address"),
        Some(&Value::from("127.0.0.1"))
    );
}
