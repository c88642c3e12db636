//! Records each request's socket peer on the server span, so that a request can be
//! matched to the connection it came on (`causeway-bench infer --demo` uses it as the
//! ground truth of black-box inference).

use std::net::SocketAddr;
use std::task::{Context, Poll};

use tower_layer::Layer;
use tower_service::Service;

/// Sits inside `TraceLayer`: the server span is the current span when it runs.
#[derive(Clone, Copy, Default)]
pub(super) struct PeerAddrLayer;

impl<S> Layer<S> for PeerAddrLayer {
    type Service = PeerAddr<S>;
    fn layer(&self, inner: S) -> PeerAddr<S> {
        PeerAddr { inner }
    }
}

#[derive(Clone)]
pub(super) struct PeerAddr<S> {
    inner: S,
}

/// The peer of an axum connection (served with connect info) or a tonic one.
fn peer<B>(req: &http::Request<B>) -> Option<SocketAddr> {
    let ext = req.extensions();
    ext.get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|c| c.0)
        .or_else(|| {
            ext.get::<tonic::transport::server::TcpConnectInfo>()
                .and_then(|c| c.remote_addr())
        })
}

impl<S, B> Service<http::Request<B>> for PeerAddr<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> S::Future {
        if let Some(addr) = peer(&req) {
            let span = tracing::Span::current();
            span.record("network.peer.address", tracing::field::display(addr.ip()));
            span.record("network.peer.port", addr.port());
        }
        self.inner.call(req)
    }
}
