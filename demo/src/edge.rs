//! The shop's edge: a reverse proxy in front of the frontend with no instrumentation at
//! all (no `causeway` subscriber, no context propagated), as a load balancer or a legacy
//! gateway would be. `causeway demo` runs it under socket capture, so the requests' traces
//! start at it only through black-box inference joined to the instrumented spans.

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};

use crate::BoxError;

/// The environment variable that gives the edge its address and the frontend's:
/// `LISTEN UPSTREAM`.
pub const EDGE_VAR: &str = "CAUSEWAY_DEMO_EDGE";

/// Proxies every request on `listen` to `upstream` until stdin closes or the process is
/// interrupted.
pub fn run_edge(listen: SocketAddr, upstream: SocketAddr) -> Result<(), BoxError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            .build()?;
        let app = axum::Router::new()
            .fallback(forward)
            .with_state((client, upstream));
        let listener = tokio::net::TcpListener::bind(listen).await?;
        axum::serve(listener, app)
            .with_graceful_shutdown(crate::stopped())
            .await?;
        Ok(())
    })
}

/// Sends the request on to the frontend as it came, and its answer back.
async fn forward(
    State((client, upstream)): State<(reqwest::Client, SocketAddr)>,
    uri: Uri,
    request: Request,
) -> Response {
    let method = request.method().clone();
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let body = match axum::body::to_bytes(request.into_body(), 1 << 20).await {
        Ok(b) => b,
        Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    };
    let sent = client
        .request(method, format!("http://{upstream}{path}"))
        .body(body)
        .send()
        .await;
    let answer = match sent {
        Ok(a) => a,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let body: Bytes = answer.bytes().await.unwrap_or_default();
    (status, body).into_response()
}
