//! Tower layers for HTTP services: [`TraceLayer`] on the server side (axum, hyper, tonic
//! servers) extracts the W3C context and opens a server span around each request;
//! [`ClientTraceLayer`] on the client side (hyper clients, tonic channels) opens a client
//! span and injects its context into the request. Both carry Pivot Tracing bags back on
//! responses.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use causeway_model::SpanKind;
use pin_project_lite::pin_project;

use tower_service::Service;
use tracing::instrument::Instrumented;
use tracing::Instrument;

pub use tower_layer::Layer;

use super::endpoints;
use crate::context::{inject_span, SpanExt};
use crate::propagation;
use crate::record::with_remote_parent;

fn is_grpc<B>(req: &http::Request<B>) -> bool {
    req.headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

fn new_span<B>(req: &http::Request<B>, kind: SpanKind) -> tracing::Span {
    let method = req.method().as_str();
    let path = req.uri().path();
    let grpc = is_grpc(req);
    let name = if grpc {
        path.trim_start_matches('/').to_owned()
    } else {
        format!("{method} {path}")
    };
    let span = match kind {
        SpanKind::Client => tracing::info_span!(
            "HTTP client",
            otel.name = %name,
            otel.kind = "client",
            http.request.method = %method,
            url.full = %req.uri(),
            server.address = tracing::field::Empty,
            server.port = tracing::field::Empty,
            rpc.system = if grpc { "grpc" } else { "" },
            http.response.status_code = tracing::field::Empty,
            rpc.grpc.status_code = tracing::field::Empty,
        ),
        // A server span's parent is the remote caller, never the local current span.
        _ => tracing::info_span!(
            parent: None,
            "HTTP request",
            otel.name = %name,
            otel.kind = "server",
            http.request.method = %method,
            url.path = %path,
            rpc.system = if grpc { "grpc" } else { "" },
            http.response.status_code = tracing::field::Empty,
            rpc.grpc.status_code = tracing::field::Empty,
            server.address = tracing::field::Empty,
            server.port = tracing::field::Empty,
            client.address = tracing::field::Empty,
            client.port = tracing::field::Empty,
            network.peer.address = tracing::field::Empty,
            network.peer.port = tracing::field::Empty,
            network.local.address = tracing::field::Empty,
            network.local.port = tracing::field::Empty,
        ),
    };
    span
}

fn record_response<B>(span: &tracing::Span, resp: &http::Response<B>, kind: SpanKind) {
    let status = resp.status();
    span.record("http.response.status_code", status.as_u16());
    let grpc_status = resp
        .headers()
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok());
    if let Some(code) = grpc_status {
        span.record("rpc.grpc.status_code", code);
        if code != 0 {
            let msg = resp
                .headers()
                .get("grpc-message")
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default();
            span.set_error(format!("grpc status {code} {msg}").trim_end().to_owned());
            return;
        }
    }
    // A server errs on 5xx; a client on 4xx too (its request failed).
    let failed = status.is_server_error() || (kind == SpanKind::Client && status.is_client_error());
    if failed {
        span.set_error(format!("HTTP {}", status.as_u16()));
    }
}

/// Pivot Tracing bags on the way back: a server adds what its request's advice packed
/// to the response; a client merges what the response carried into its span.
fn carry_bags_back<B>(span: &tracing::Span, resp: &mut http::Response<B>, kind: SpanKind) {
    if kind == SpanKind::Client {
        crate::pivot::carry::merge_response_baggage(span, resp.headers());
    } else if let Some(v) = crate::pivot::carry::response_baggage(span)
        .and_then(|v| http::HeaderValue::from_str(&v).ok())
    {
        resp.headers_mut().append(propagation::BAGGAGE, v);
    }
}

/// The server-side layer: one server span per request, joined to the caller's trace.
///
/// The span records the connection's ends (see [`super::endpoints`]) when the server puts
/// them in the request's extensions: serve axum with
/// `into_make_service_with_connect_info::<Endpoints>()` (feature `axum`); tonic's servers
/// put them there themselves (feature `tonic-server`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceLayer;

impl TraceLayer {
    /// The layer.
    pub fn new() -> TraceLayer {
        TraceLayer
    }
}

impl<S> Layer<S> for TraceLayer {
    type Service = TraceService<S>;
    fn layer(&self, inner: S) -> TraceService<S> {
        TraceService {
            inner,
            kind: SpanKind::Server,
            server: None,
        }
    }
}

/// The client-side layer: one client span per request, its context injected into the
/// request's headers (`traceparent`, `tracestate`, `baggage`).
///
/// The span's `server.address`/`server.port` come from the request's URI; a channel that
/// adds its origin below this layer (tonic's) sends bare paths, so name the server with
/// [`ClientTraceLayer::server`].
#[derive(Debug, Clone, Default)]
pub struct ClientTraceLayer {
    server: Option<http::uri::Authority>,
}

impl ClientTraceLayer {
    /// The layer.
    pub fn new() -> ClientTraceLayer {
        ClientTraceLayer::default()
    }

    /// The server every request goes to, for requests whose URI names none.
    pub fn server(mut self, server: http::uri::Authority) -> ClientTraceLayer {
        self.server = Some(server);
        self
    }
}

impl<S> Layer<S> for ClientTraceLayer {
    type Service = TraceService<S>;
    fn layer(&self, inner: S) -> TraceService<S> {
        TraceService {
            inner,
            kind: SpanKind::Client,
            server: self.server.clone(),
        }
    }
}

/// The service made by [`TraceLayer`] (server spans) and [`ClientTraceLayer`] (client
/// spans).
#[derive(Debug, Clone)]
pub struct TraceService<S> {
    inner: S,
    kind: SpanKind,
    /// The server a client's bare-path requests go to.
    server: Option<http::uri::Authority>,
}

impl<S, B, ResB> Service<http::Request<B>> for TraceService<S>
where
    S: Service<http::Request<B>, Response = http::Response<ResB>>,
    S::Error: std::fmt::Display,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut req: http::Request<B>) -> Self::Future {
        let span = if self.kind == SpanKind::Server {
            let extracted = propagation::extract(req.headers());
            // Created with its remote parent in place, so the sampling decision (and the
            // fields it keeps) is right from the start.
            let span = with_remote_parent(&extracted, || new_span(&req, SpanKind::Server));
            endpoints::record_server(&span, &req);
            span
        } else {
            let span = new_span(&req, SpanKind::Client);
            endpoints::record_client(&span, req.uri(), self.server.as_ref());
            inject_span(&span, req.headers_mut());
            span
        };
        let fut = span.in_scope(|| self.inner.call(req));
        ResponseFuture {
            inner: fut.instrument(span.clone()),
            span,
            kind: self.kind,
        }
    }
}

pin_project! {
    /// The response future of the traced services: records the status on the span.
    pub struct ResponseFuture<F> {
        #[pin]
        inner: Instrumented<F>,
        span: tracing::Span,
        kind: SpanKind,
    }
}

impl<F, ResB, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<ResB>, E>>,
    E: std::fmt::Display,
{
    type Output = F::Output;
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let mut out = ready!(this.inner.poll(cx));
        match &mut out {
            Ok(resp) => {
                record_response(this.span, resp, *this.kind);
                carry_bags_back(this.span, resp, *this.kind);
            }
            Err(e) => this.span.set_error(e.to_string()),
        }
        Poll::Ready(out)
    }
}
