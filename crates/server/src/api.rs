//! The query API (JSON over HTTP): traces by id, search, services and operations, SQL,
//! export, and `/metrics`; Jaeger's query API is merged in from [`crate::jaeger`].

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};
use causeway_model::{Span, Trace, TraceId};
use causeway_store::sql::{self, SqlLimits};
use causeway_store::{
    parse_duration, parse_time, search_sorted, SearchOrder, SearchQuery, TimeWindow,
};
use serde::{Deserialize, Serialize};

use crate::work::{blocking, store_blocking};
use crate::{ApiError, AppState};

pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/api/traces/{trace_id}", get(trace))
        .route("/api/search", get(search))
        .route("/api/services", get(services))
        .route("/api/services/{service}/operations", get(operations))
        .route("/api/sql", post(run_sql))
        .route("/api/export", get(crate::export::export))
        .route("/api/status", get(status))
        .route("/metrics", get(metrics))
        .merge(crate::analyses::routes())
        .merge(crate::logflows::routes())
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

/// A trace as the API returns it: spans by start time, with the tree's roots and the
/// spans whose parent is missing.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceBody {
    /// The trace id.
    pub trace_id: TraceId,
    /// Every span.
    pub spans: Vec<Span>,
    /// Span ids of the roots.
    pub roots: Vec<String>,
    /// Span ids of roots that name a parent that is not stored.
    pub orphans: Vec<String>,
    /// With `?adjust=skew`: the offset added to each host's times (raw time = shown time
    /// less its host's offset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offsets: Option<Vec<causeway_analysis::skew::ClockOffset>>,
}

impl TraceBody {
    fn of(t: Trace) -> TraceBody {
        let ids = |idx: &[usize]| {
            idx.iter()
                .map(|&i| t.spans[i].span_id.to_string())
                .collect()
        };
        TraceBody {
            trace_id: t.trace_id,
            roots: ids(&t.roots),
            orphans: ids(&t.orphans),
            spans: t.spans.clone(),
            clock_offsets: None,
        }
    }
}

pub(crate) fn parse_trace_id(text: &str) -> Result<TraceId, ApiError> {
    TraceId::parse(text).map_err(|e| ApiError::BadRequest(format!("{e}")))
}

async fn trace(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<TraceBody>, ApiError> {
    let id = parse_trace_id(&id)?;
    let adjust = match pairs(query)?.iter().find(|(k, _)| k == "adjust") {
        None => false,
        Some((_, v)) if v == "skew" => true,
        Some((_, v)) if v == "none" || v.is_empty() => false,
        Some((k, v)) => return Err(bad(k, format!("{v:?} is not skew or none"))),
    };
    let store = state.store.clone();
    let body = blocking(move || {
        let Some(t) = store.trace(id)? else {
            return Err(ApiError::NotFound(format!("trace {id} not found")));
        };
        if !adjust {
            return Ok(TraceBody::of(t));
        }
        let adjusted = causeway_analysis::skew::correct(&t);
        let mut body = TraceBody::of(adjusted.trace);
        body.clock_offsets = Some(adjusted.offsets);
        Ok(body)
    })
    .await?;
    Ok(Json(body))
}

/// The first non-empty value of a query parameter.
pub(crate) fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, v)| k == name && !v.is_empty())
        .map(|(_, v)| v.as_str())
}

/// The `limit` parameter: a count, `default` when not given.
pub(crate) fn limit_param(params: &[(String, String)], default: usize) -> Result<usize, ApiError> {
    param(params, "limit")
        .map_or(Ok(default), str::parse)
        .map_err(|_| bad("limit", "is not a count".into()))
}

/// The time window of `start` and `end` (Unix ns or RFC 3339), or `lookback` (a duration
/// such as `1h`) before `end` (default now); everything when none is given.
pub(crate) fn window_param(params: &[(String, String)]) -> Result<TimeWindow, ApiError> {
    let get = |name: &str| param(params, name);
    let time = |name: &str| {
        get(name)
            .map(|v| parse_time(v).map_err(|e| bad(name, e)))
            .transpose()
    };
    let end = time("end")?;
    let start = match (time("start")?, get("lookback")) {
        (Some(start), _) => start,
        (None, Some(lookback)) => {
            let span = parse_duration(lookback).map_err(|e| bad("lookback", e))?;
            let end = end.unwrap_or_else(now_ns);
            end.saturating_sub(span)
        }
        (None, None) => 0,
    };
    let end = end.unwrap_or(if get("lookback").is_some() {
        now_ns()
    } else {
        u64::MAX
    });
    if start > end {
        return Err(ApiError::BadRequest(format!(
            "start {start} is after end {end}"
        )));
    }
    Ok(TimeWindow { start, end })
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

pub(crate) fn pairs(query: Option<String>) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(query.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::BadRequest(format!("invalid query string: {e}")))
}

pub(crate) fn bad(param: &str, e: String) -> ApiError {
    ApiError::BadRequest(format!("parameter {param}: {e}"))
}

/// Reads the search parameters (Jaeger's names; `tags` repeatable as `key=value`, or a
/// JSON object as Jaeger's UI sends).
pub(crate) fn search_query(params: &[(String, String)]) -> Result<SearchQuery, ApiError> {
    let mut q = SearchQuery::default();
    for (k, v) in params {
        if v.is_empty() {
            continue;
        }
        match k.as_str() {
            "service" => q.service = Some(v.clone()),
            "operation" => q.operation = Some(v.clone()),
            "host" => q.host = Some(v.clone()),
            "tags" | "tag" => {
                if v.trim_start().starts_with('{') {
                    let map: std::collections::BTreeMap<String, serde_json::Value> =
                        serde_json::from_str(v).map_err(|e| bad(k, e.to_string()))?;
                    for (key, val) in map {
                        let text = match val {
                            serde_json::Value::String(s) => s,
                            other => other.to_string(),
                        };
                        q.tags.push((key, text));
                    }
                } else {
                    for tag in v.split_whitespace() {
                        let (key, val) = tag
                            .split_once('=')
                            .ok_or_else(|| bad(k, format!("{tag:?} is not key=value")))?;
                        q.tags.push((key.to_string(), val.to_string()));
                    }
                }
            }
            "minDuration" => q.min_duration = Some(parse_duration(v).map_err(|e| bad(k, e))?),
            "maxDuration" => q.max_duration = Some(parse_duration(v).map_err(|e| bad(k, e))?),
            "error" => {
                q.error = v
                    .parse()
                    .map_err(|_| bad(k, format!("{v:?} is not true or false")))?
            }
            "limit" => {
                q.limit = v
                    .parse()
                    .map_err(|_| bad(k, format!("{v:?} is not a count")))?
            }
            _ => {}
        }
    }
    // `start`, `end` and `lookback`, read as every windowed request reads them.
    if ["start", "end", "lookback"]
        .iter()
        .any(|name| param(params, name).is_some())
    {
        q.window = Some(window_param(params)?);
    }
    Ok(q)
}

/// Without `order`, the indexed search: the newest matches, up to the limit. With
/// `order` (`-duration`, `spans`, ...), every trace of the window (`start`, `end`,
/// `lookback`) is read through a bulk scan, counted, and the first in that order listed.
/// Either runs in a scan's place and within the query time limit; `limit` is at most
/// the server's most.
async fn search(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<serde_json::Value>, ApiError> {
    let params = pairs(query)?;
    let mut q = search_query(&params)?;
    let most = state.config.limits.max_search_limit;
    if q.limit > most {
        return Err(bad(
            "limit",
            format!(
                "{} is over the most traces a search answers, {most} (--max-search-limit)",
                q.limit
            ),
        ));
    }
    let store = state.store.clone();
    let Some(order) = param(&params, "order") else {
        let found = state
            .scans
            .run(move |deadline| Ok(store.search_until(&q, &|| deadline.check())?))
            .await?;
        return Ok(Json(serde_json::json!({ "traces": found })));
    };
    let order: SearchOrder = order.parse().map_err(|e| bad("order", e))?;
    let window = window_param(&params)?;
    q.window = Some(window);
    let found = state
        .scans
        .run(move |deadline| Ok(search_sorted(&*store, &q, order, &|| deadline.check())?))
        .await?;
    Ok(Json(serde_json::json!({
        "traces": found.traces,
        "total": found.total,
        "order": order.to_string(),
        "window": crate::analyses::Window::of(window, found.scanned),
    })))
}

async fn services(State(state): State<Arc<AppState>>) -> Result<Json<serde_json::Value>, ApiError> {
    let store = state.store.clone();
    let services = store_blocking(move || store.services()).await?;
    Ok(Json(serde_json::json!({ "services": services })))
}

async fn operations(
    State(state): State<Arc<AppState>>,
    Path(service): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let store = state.store.clone();
    let (ops, known, service) = store_blocking(move || {
        let ops = store.operations(&service)?;
        let known = !ops.is_empty() || store.services()?.contains(&service);
        Ok((ops, known, service))
    })
    .await?;
    if !known {
        return Err(ApiError::NotFound(format!("service {service:?} not found")));
    }
    Ok(Json(serde_json::json!({ "operations": ops })))
}

#[derive(Deserialize)]
struct SqlRequest {
    query: String,
    #[serde(default)]
    limit: Option<usize>,
}

async fn run_sql(
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

async fn status(State(state): State<Arc<AppState>>) -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok", "store": state.store.stats() }))
}

async fn metrics(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::metrics::render(&state),
    )
}
