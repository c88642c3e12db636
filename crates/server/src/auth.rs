//! The bearer token check, for HTTP (a middleware) and gRPC (an interceptor). The token
//! is compared in constant time and never logged.
//!
//! With `--token` (or `CAUSEWAY_TOKEN`), every ingest and API request must carry
//! `Authorization: Bearer <token>`. A refusal is 401 with `WWW-Authenticate: Bearer` (gRPC:
//! `unauthenticated`), after reading at most 64 KiB of the body so that the connection stays
//! usable. The UI's static files are served without the token (`crate::ui`); the UI asks for
//! it on a 401 and keeps it in `localStorage`. The server refuses to start with a listener
//! beyond loopback and no token.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::{ApiError, AppState};

fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// True when no token is configured or `header` carries it as `Bearer <token>`.
pub(crate) fn allowed(token: Option<&str>, header: Option<&[u8]>) -> bool {
    let Some(token) = token.filter(|t| !t.trim().is_empty()) else {
        return true;
    };
    let Some(value) = header else { return false };
    let Some(given) = value
        .strip_prefix(b"Bearer ")
        .or_else(|| value.strip_prefix(b"bearer "))
    else {
        return false;
    };
    same(given, token.as_bytes())
}

pub(crate) async fn require_token(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Response {
    let header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| v.as_bytes());
    if allowed(state.config.token(), header) {
        next.run(req).await
    } else {
        // Read a small body so the connection stays usable for the client's next
        // request; a large one is not worth reading for a stranger.
        let _ = axum::body::to_bytes(req.into_body(), 64 << 10).await;
        ApiError::Unauthorized.into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::allowed;

    #[test]
    fn the_token_must_match_exactly() {
        assert!(allowed(None, None));
        assert!(allowed(Some("s3cret"), Some(b"Bearer s3cret")));
        assert!(!allowed(Some("s3cret"), None));
        assert!(!allowed(Some("s3cret"), Some(b"Bearer s3cre")));
        assert!(!allowed(Some("s3cret"), Some(b"Bearer s3cret2")));
        assert!(!allowed(Some("s3cret"), Some(b"s3cret")));
        assert!(!allowed(Some("s3cret"), Some(b"Basic s3cret")));
    }
}
