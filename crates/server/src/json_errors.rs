//! Every error the server answers over HTTP is JSON (`{"error": "..."}`), including
//! those written by the framework (an unknown path, a method not allowed, a body its
//! extractor refused), so clients parse one shape: the framework's plain-text refusals (the
//! extractors', 405, the 404 fallback) are rewrapped here as `crate::error` writes its own.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// The longest error body read to be rewrapped; framework errors are a line.
const MAX_TEXT: usize = 64 << 10;

fn is_json(response: &Response) -> bool {
    response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// Rewraps an error response that is not JSON as `{"error": text}`.
pub(crate) async fn as_json(req: Request, next: Next) -> Response {
    let asked = format!("{} {}", req.method(), crate::error::clip(req.uri().path()));
    let response = next.run(req).await;
    if response.status().as_u16() < 400 || is_json(&response) {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_TEXT)
        .await
        .unwrap_or_default();
    let mut message = String::from_utf8_lossy(&text).trim().to_string();
    if message.is_empty() {
        let reason = parts.status.canonical_reason().unwrap_or("error");
        message = format!("{reason}: {asked}");
    }
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let body = serde_json::json!({ "error": crate::error::clip(&message) }).to_string();
    Response::from_parts(parts, Body::from(body))
}

/// What a path no route takes is answered.
pub(crate) async fn not_found(req: Request) -> Response {
    crate::ApiError::NotFound(format!(
        "no endpoint {} {}",
        req.method(),
        crate::error::clip(req.uri().path())
    ))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::StatusCode;
    use axum::routing::get;
    use axum::Router;
    use tower_service::Service;

    #[test]
    fn framework_errors_are_answered_as_json() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut app: Router = Router::new()
                .route(
                    "/plain",
                    get(|| async { (StatusCode::BAD_REQUEST, "bad thing") }),
                )
                .route("/fine", get(|| async { "ok" }))
                .fallback(not_found)
                .layer(axum::middleware::from_fn(as_json));
            for (method, path, status, error) in [
                ("GET", "/plain", 400, "bad thing"),
                ("GET", "/nowhere", 404, "no endpoint GET /nowhere"),
                ("POST", "/fine", 405, "Method Not Allowed: POST /fine"),
            ] {
                let req = Request::builder()
                    .method(method)
                    .uri(path)
                    .body(Body::empty())
                    .unwrap();
                let r = app.call(req).await.unwrap();
                assert_eq!(r.status().as_u16(), status, "{path}");
                assert!(is_json(&r), "{path}");
                let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                assert_eq!(v["error"], error, "{path}");
            }
            let r = app
                .call(Request::get("/fine").body(Body::empty()).unwrap())
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK);
        });
    }
}
