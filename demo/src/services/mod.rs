//! The HTTP and gRPC servers of each role.

mod cache;
mod catalog;
mod frontend;
mod orders;
mod queue;
mod recommend;
mod storage;

use std::future::Future;
use std::time::Duration;

use axum::response::{IntoResponse, Response};
use causeway::middleware::endpoints::Endpoints;
use causeway::middleware::tower::TraceLayer;
use http::StatusCode;
use tracing::Instrument;

use crate::metadata::MetadataServer;
use crate::peers::{CallError, Peers};
use crate::{BoxError, Role, Topology};

/// Serves `role` at its address in `topology` until `stop` resolves.
pub(crate) async fn serve(
    role: Role,
    topology: Topology,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), BoxError> {
    let addr = topology.addr(role)?;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    if role == Role::Metadata {
        tonic::transport::Server::builder()
            .layer(TraceLayer::new())
            .add_service(MetadataServer)
            .serve_with_incoming_shutdown(
                // Without TCP_NODELAY an answer's last frame waited for the client's
                // delayed ACK: 11% of Locate calls spent 30-64 ms on loopback.
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
                stop,
            )
            .await?;
        return Ok(());
    }
    let peers = Peers::new(topology)?;
    let router = match role {
        Role::Frontend => frontend::router(peers),
        Role::Catalog => catalog::router(peers)?,
        Role::Recommend => recommend::router(peers),
        Role::Orders => orders::router(peers),
        Role::Cache => cache::router(),
        Role::Storage(n) => storage::router(n),
        Role::Queue => queue::router(),
        Role::Metadata => unreachable!("served over gRPC above"),
    };
    let router = router
        .layer(axum::middleware::from_fn(access_log))
        .layer(TraceLayer::new());
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<Endpoints>(),
    )
    .with_graceful_shutdown(stop)
    .await?;
    Ok(())
}

/// The access log lines a web framework's tracing middleware writes, inside the request's
/// span.
async fn access_log(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let started = std::time::Instant::now();
    tracing::info!(target: crate::LOG, method = %request.method(), uri = %request.uri(), "started processing request");
    let response = next.run(request).await;
    tracing::info!(
        target: crate::LOG,
        status = response.status().as_u16(),
        latency_ms = started.elapsed().as_millis() as u64,
        "finished processing request"
    );
    response
}

/// Work that takes `time` inside its own span.
pub(crate) async fn work(span: tracing::Span, time: Duration) {
    tokio::time::sleep(time).instrument(span).await
}

/// A request that failed: the status and the reason, sent back as the body.
#[derive(Debug)]
pub(crate) struct Failure(pub StatusCode, pub String);

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.0, self.1).into_response()
    }
}

impl From<CallError> for Failure {
    fn from(e: CallError) -> Failure {
        Failure(StatusCode::BAD_GATEWAY, e.to_string())
    }
}

impl From<tonic::Status> for Failure {
    fn from(s: tonic::Status) -> Failure {
        Failure(
            StatusCode::BAD_GATEWAY,
            format!("metadata: {}", s.message()),
        )
    }
}
