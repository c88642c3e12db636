//! Traces: one by id (with clock skew corrected on request), search (indexed, or a
//! bulk scan in an order), services and their operations.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::Json;
use causeway_model::{Span, Trace, TraceId};
use causeway_store::{search_sorted, SearchOrder};
use serde::{Deserialize, Serialize};

use crate::params::{adjust_param, bad, pairs, param, parse_trace_id, search_query, window_param};
use crate::work::{blocking, store_blocking};
use crate::{ApiError, AppState};

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
    pub(crate) fn of(t: Trace) -> TraceBody {
        let ids = |idx: &[usize]| {
            idx.iter()
                .map(|&i| t.spans[i].span_id.to_string())
                .collect()
        };
        let (roots, orphans) = (ids(&t.roots), ids(&t.orphans));
        TraceBody {
            trace_id: t.trace_id,
            roots,
            orphans,
            spans: t.spans,
            clock_offsets: None,
        }
    }
}

pub(crate) async fn trace(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<TraceBody>, ApiError> {
    let id = parse_trace_id(&id)?;
    let adjust = adjust_param(&pairs(query)?)?;
    let store = state.store.clone();
    let body = blocking(move || {
        let Some(t) = causeway_store::linked::joined_trace(&*store, id)? else {
            return Err(ApiError::NotFound(format!("trace {id} not found")));
        };
        if !adjust {
            return Ok(TraceBody::of(t));
        }
        let adjusted = causeway_analysis::skew::correct_owned(t);
        let mut body = TraceBody::of(adjusted.trace);
        body.clock_offsets = Some(adjusted.offsets);
        Ok(body)
    })
    .await?;
    Ok(Json(body))
}

/// Without `order`, the indexed search: the newest matches, up to the limit. With
/// `order` (`-duration`, `spans`, ...), every trace of the window (`start`, `end`,
/// `lookback`) is read through a bulk scan, counted, and the first in that order listed.
/// Either runs in a scan's place and within the query time limit; `limit` is at most
/// the server's most.
pub(crate) async fn search(
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
        // The index finds spans; a whole trace's duration is known only to the scan.
        if q.trace_min_duration.is_some() || q.trace_max_duration.is_some() {
            return Err(bad(
                "traceMinDuration",
                "a trace's duration is searched with order= (the sorted search)".into(),
            ));
        }
        let found = state
            .scans
            .run(move |deadline| Ok(store.search_until(&q, &|| deadline.check())?))
            .await?;
        return Ok(Json(serde_json::json!({ "traces": found })));
    };
    let order: SearchOrder = order.parse().map_err(|e| bad("order", e))?;
    let window = window_param(&params)?;
    q.window = Some(window);
    // A page further on: the first `offset + limit` are kept in order, the first `offset`
    // dropped, so what a page costs is bounded by how far on it is.
    let offset = offset_param(&params, q.effective_limit())?;
    q.limit = q.effective_limit() + offset;
    let found = state
        .scans
        .run(move |deadline| Ok(search_sorted(&*store, &q, order, &|| deadline.check())?))
        .await?;
    let traces: Vec<_> = found.traces.into_iter().skip(offset).collect();
    Ok(Json(serde_json::json!({
        "traces": traces,
        "offset": offset,
        "total": found.total,
        "order": order.to_string(),
        "window": crate::scans::Window::of(window, found.scanned),
    })))
}

/// The most traces a sorted search pages through: the store keeps no more in order.
const MOST_PAGED: usize = 10_000;

/// `offset`: how many traces of the order to pass over, 0 unless given; the page it opens
/// (`limit` more) must end within the first [`MOST_PAGED`].
fn offset_param(params: &[(String, String)], limit: usize) -> Result<usize, ApiError> {
    let Some(text) = param(params, "offset") else {
        return Ok(0);
    };
    let offset: usize = text
        .parse()
        .map_err(|_| bad("offset", format!("{text:?} is not a count")))?;
    if offset.saturating_add(limit) > MOST_PAGED {
        return Err(bad(
            "offset",
            format!(
                "{offset} + limit {limit} goes past the first {MOST_PAGED} traces of an order; \
                 narrow the window or the filters"
            ),
        ));
    }
    Ok(offset)
}

/// Traces a durations request names at most (a page of the list).
const MOST_DURATIONS: usize = 200;

/// `GET /api/durations?ids=a,b,...`: each trace's duration as recorded and after clock-skew
/// correction (what the trace page shows), for the list, which sorts on recorded times.
/// Unknown ids are left out; `corrected` is null for a trace over `--max-answer-spans`.
pub(crate) async fn durations(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<serde_json::Value>, ApiError> {
    let params = pairs(query)?;
    let ids: Vec<TraceId> = param(&params, "ids")
        .unwrap_or_default()
        .split(',')
        .filter(|s| !s.is_empty())
        .map(parse_trace_id)
        .collect::<Result<_, _>>()?;
    if ids.len() > MOST_DURATIONS {
        return Err(bad(
            "ids",
            format!("{} traces is over the most, {MOST_DURATIONS}", ids.len()),
        ));
    }
    let store = state.store.clone();
    let most_spans = state.config.limits.max_answer_spans;
    let found = blocking(move || {
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(t) = causeway_store::linked::joined_trace(&*store, id)? else {
                continue;
            };
            let span = |t: &Trace| {
                let (start, end) = t.bounds();
                end.saturating_sub(start)
            };
            // A trace too big to answer whole is too big to correct for a list.
            let corrected = (t.spans.len() <= most_spans)
                .then(|| span(&causeway_analysis::skew::correct(&t).trace));
            out.push(serde_json::json!({
                "traceId": id,
                "recorded": span(&t),
                "corrected": corrected,
            }));
        }
        Ok(out)
    })
    .await?;
    Ok(Json(serde_json::json!({ "durations": found })))
}

pub(crate) async fn services(
    State(state): State<Arc<AppState>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let store = state.store.clone();
    let services = store_blocking(move || store.services()).await?;
    Ok(Json(serde_json::json!({ "services": services })))
}

pub(crate) async fn operations(
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
