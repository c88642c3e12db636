//! A tonic client and server on loopback: the client layer opens a client span and
//! injects its context, the server layer joins it.

use std::time::Duration;

use causeway::middleware::tower::{ClientTraceLayer, Layer, TraceLayer};
use causeway::model::{SpanKind, Value};
use causeway::testing::Recorder;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_call_is_one_trace_with_client_and_server_spans() {
    let rec = Recorder::new();
    tracing::dispatcher::set_global_default(rec.dispatch()).unwrap();
    tokio::time::timeout(Duration::from_secs(20), async {
        let (_reporter, health) = tonic_health::server::health_reporter();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(
            tonic::transport::Server::builder()
                .layer(TraceLayer::new())
                .add_service(health)
                .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
        );
        let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = HealthClient::new(ClientTraceLayer::new().layer(channel));
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
}
