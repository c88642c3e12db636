//! An HTTP service for the W3C Trace Context test suite
//! (`python test/test.py http://127.0.0.1:5000/test` in w3c/trace-context).
//!
//! It listens on the address given as its first argument (default 127.0.0.1:5000) and
//! accepts `POST /test` with a JSON array of `{"url": ..., "arguments": [...]}`; for each
//! element it POSTs `arguments` as a JSON body to `url`, carrying the `traceparent` and
//! `tracestate` that the library propagates from the incoming request (the outgoing
//! call's client span is a child of the incoming request's server span), then answers 200.
//!
//! Run it with `cargo run -p causeway --features tower,reqwest --example w3c_tracecontext_service`.

use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use causeway::middleware::reqwest::TracedRequest;
use causeway::middleware::tower::TraceLayer;

#[derive(serde::Deserialize)]
struct Callback {
    url: String,
    #[serde(default)]
    arguments: serde_json::Value,
}

/// The service, with Causeway's server layer around it.
pub fn app() -> Router {
    let client = reqwest::Client::new();
    Router::new()
        .route(
            "/test",
            post(move |Json(callbacks): Json<Vec<Callback>>| {
                let client = client.clone();
                async move {
                    for cb in callbacks {
                        let body = serde_json::to_vec(&cb.arguments).unwrap_or_default();
                        let sent = client
                            .post(&cb.url)
                            .header("content-type", "application/json")
                            .body(body)
                            .send_traced()
                            .await;
                        if let Err(e) = sent {
                            tracing::warn!(url = %cb.url, error = %e, "callback failed");
                        }
                    }
                    StatusCode::OK
                }
            }),
        )
        .layer(TraceLayer::new())
}

#[allow(dead_code)] // the W3C test in tests/ includes this file for `app`
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:5000".to_owned());
    let mut config = causeway::Config::from_env()?;
    if std::env::var_os("CAUSEWAY_SERVICE").is_none()
        && std::env::var_os("OTEL_SERVICE_NAME").is_none()
    {
        config.service = "w3c-tracecontext-service".into();
    }
    let _guard = causeway::init(config)?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        eprintln!("listening on http://{}/test", listener.local_addr()?);
        axum::serve(listener, app()).await
    })?;
    Ok(())
}
