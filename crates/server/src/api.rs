//! The query API's router: which endpoint module answers which path, and the layers
//! every request passes (receiving first, the token, JSON errors). The endpoints are in
//! their own modules; Jaeger's query API is merged in from [`crate::jaeger`].

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

use crate::AppState;

pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/api/traces/{trace_id}", get(crate::traces::trace))
        .route(
            "/api/traces/{trace_id}/outline",
            get(crate::outline::outline),
        )
        .route(
            "/api/traces/{trace_id}/export",
            get(crate::export::trace_export),
        )
        .route("/api/search", get(crate::traces::search))
        .route("/api/durations", get(crate::traces::durations))
        .route("/api/services", get(crate::traces::services))
        .route(
            "/api/services/{service}/operations",
            get(crate::traces::operations),
        )
        .route("/api/sql", post(crate::sql::run_sql))
        .route("/api/export", get(crate::export::export))
        .route("/api/status", get(crate::metrics::status))
        .route("/metrics", get(crate::metrics::metrics))
        .merge(crate::analyses::routes())
        .merge(crate::explore::routes())
        .merge(crate::monitor::routes())
        .merge(crate::logflows::routes())
        .merge(crate::captures::routes())
        .merge(crate::expect::routes())
        .merge(crate::jaeger::routes())
        .merge(crate::pivot::routes(state.config.limits.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::receive::receive_first,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::require_token,
        ))
        .merge(crate::ui::routes())
        .fallback(crate::json_errors::not_found)
        .layer(axum::middleware::from_fn(crate::json_errors::as_json))
        .with_state(state)
}
