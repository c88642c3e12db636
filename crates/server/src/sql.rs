//! `POST /api/sql`: a read-only SQL query over the `spans` table, on the store's SQL
//! threads (or ClickHouse), within the server's SQL limits.

use std::sync::Arc;

use axum::extract::State;
use axum::Json;
use causeway_store::sql::{self, SqlLimits};
use serde::Deserialize;

use crate::work::store_blocking;
use crate::{ApiError, AppState};

#[derive(Deserialize)]
struct SqlRequest {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
}

pub(crate) async fn run_sql(
    State(state): State<Arc<AppState>>,
    body: axum::body::Bytes,
) -> Result<Json<sql::SqlResult>, ApiError> {
    let req: SqlRequest = serde_json::from_slice(&body).map_err(|e| {
        ApiError::BadRequest(format!(
            "invalid request body at line {} column {}: {} (expected {{\"query\": \"...\"}})",
            e.line(),
            e.column(),
            causeway_model::codec::json_message(&e)
        ))
    })?;
    let limits = SqlLimits {
        max_rows: req
            .limit
            .unwrap_or(state.config.limits.sql.max_rows)
            .min(state.config.limits.sql.max_rows),
        ..state.config.limits.sql
    };
    let result = match &state.backend {
        // The query runs on the store's SQL threads, not on these.
        crate::Backend::Embedded(store) => sql::query(store, &req.query, limits).await?,
        crate::Backend::ClickHouse(spool) => {
            let spool = spool.clone();
            store_blocking(move || spool.clickhouse().sql(&req.query, limits)).await?
        }
    };
    Ok(Json(result))
}
