//! Client spans for reqwest: each request gets a client span, a child of the current span,
//! whose context is injected into the request's headers.
//!
//! ```no_run
//! use causeway::middleware::reqwest::TracedRequest;
//! # async fn f() -> Result<(), reqwest::Error> {
//! let client = reqwest::Client::new();
//! let resp = client.get("http://127.0.0.1:8080/").send_traced().await?;
//! # Ok(()) }
//! ```

use std::future::Future;

use tracing::Instrument;

use crate::context::{inject_span, SpanExt};

/// Sends `request` with `client` inside a client span.
pub async fn send(
    client: &reqwest::Client,
    mut request: reqwest::Request,
) -> reqwest::Result<reqwest::Response> {
    let method = request.method().as_str().to_owned();
    let url = request.url().clone();
    let span = tracing::info_span!(
        "HTTP client",
        otel.name = %format!("{method} {}", url.path()),
        otel.kind = "client",
        http.request.method = %method,
        url.full = %url,
        server.address = tracing::field::Empty,
        server.port = tracing::field::Empty,
        network.peer.address = tracing::field::Empty,
        network.peer.port = tracing::field::Empty,
        http.response.status_code = tracing::field::Empty,
    );
    if let Ok(uri) = url.as_str().parse::<http::Uri>() {
        super::endpoints::record_client(&span, &uri, None);
    }
    inject_span(&span, request.headers_mut());
    let result = client.execute(request).instrument(span.clone()).await;
    match &result {
        Ok(resp) => {
            if let Some(peer) = resp.remote_addr() {
                super::endpoints::record_peer(&span, peer);
            }
            crate::pivot::carry::merge_response_baggage(&span, resp.headers());
            let status = resp.status();
            span.record("http.response.status_code", status.as_u16());
            if status.is_client_error() || status.is_server_error() {
                span.set_error(format!("HTTP {}", status.as_u16()));
            }
        }
        Err(e) => span.set_error(e.to_string()),
    }
    result
}

/// `send_traced()` for `reqwest::RequestBuilder`.
pub trait TracedRequest {
    /// Builds and sends the request inside a client span.
    fn send_traced(self) -> impl Future<Output = reqwest::Result<reqwest::Response>> + Send;
}

impl TracedRequest for reqwest::RequestBuilder {
    fn send_traced(self) -> impl Future<Output = reqwest::Result<reqwest::Response>> + Send {
        let (client, request) = self.build_split();
        async move { send(&client, request?).await }
    }
}
