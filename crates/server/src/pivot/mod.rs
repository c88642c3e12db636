//! The Pivot Tracing hub: processes report partial results and learn the installed
//! queries (`POST /api/pivot/agent`); operators install, list and remove queries, read
//! their totals and time series, follow them live, and list the tracepoint definitions
//! and the callsites processes registered.
//!
//! Routes: `POST/GET /api/pivot/queries`, `GET/DELETE /api/pivot/queries/{id}`,
//! `GET .../results` (one example trace per row, `examples`), `GET .../stream` (server-sent
//! events, one per change at most once per interval), `GET/POST /api/pivot/tracepoints`
//! (the definitions; the named queries the hub knows, which stay sources after an
//! uninstall; and, a page at a time, the callsites connected processes registered with the
//! definitions that match each), `POST /api/pivot/explain`, and `GET /api/pivot/processes`
//! (each process's queries, failures and drop counters: malformed and cut bags, fan-out
//! drops, and the batches its agent dropped after an hour without an answer). Every handler
//! that holds the hub's lock runs on the blocking pool. `causeway pivot install -f` checks
//! each query of a file against the hub's definitions and named queries before sending it,
//! so an error names the file's own line and column.

mod hub;

use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use causeway_model::source::SyntaxError;
use causeway_pivot::install::MAX_QUERY_BYTES;
use causeway_pivot::matching::moments;
use causeway_pivot::protocol::{Reply, Report};
use causeway_pivot::value::Value;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::watch;

pub(crate) use hub::HubState;
pub use hub::PivotLimits;
use hub::{HubQuery, Refused};

use crate::snapshot::save;

use crate::params::{limit_param, pairs, param};
use crate::work::blocking;
use crate::{ApiError, AppState};

/// Callsites listed per page by default, and at most.
const CALLSITES_PAGE: usize = 1000;
const MAX_CALLSITES_PAGE: usize = 10_000;

/// The hub: its state, where it is saved, and a signal for live followers.
pub(crate) struct Hub {
    state: Mutex<HubState>,
    file: PathBuf,
    /// Held while a report is applied and saved: saves happen in the order of the states.
    saving: tokio::sync::Mutex<()>,
    changes: watch::Sender<u64>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Hub {
    /// Opens the hub, restoring `file` if it exists, with the tracepoint definitions
    /// `definitions` (file name, text) loaded.
    pub(crate) fn open(
        file: PathBuf,
        interval: Duration,
        limits: PivotLimits,
        definitions: &[(String, String)],
    ) -> Result<Hub, String> {
        let mut state = HubState::new(interval.as_millis() as u64, limits);
        match std::fs::read(&file) {
            Ok(bytes) => state
                .restore(&bytes)
                .map_err(|e| format!("cannot read Pivot Tracing state {}: {e}", file.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
        }
        // After the saved ones: a file given at start replaces what it defines again.
        for (name, text) in definitions {
            state.define(name, text).map_err(|e| match e {
                Refused::Syntax(e) => e.render(name, text),
                Refused::Full(m) => format!("{name}: {m}"),
            })?;
        }
        Ok(Hub {
            state: Mutex::new(state),
            file,
            saving: tokio::sync::Mutex::new(()),
            changes: watch::channel(0).0,
        })
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn changed(&self) {
        self.changes.send_modify(|v| *v += 1);
    }
}

/// Saves the hub's state (snapshot and write on the blocking pool); an error is the
/// server's.
async fn persist(app: &Arc<AppState>) -> Result<(), ApiError> {
    let app = app.clone();
    blocking(move || {
        let bytes = app.pivot.lock().snapshot();
        save(&app.pivot.file, &bytes)
            .map_err(|e| ApiError::Internal(format!("saving Pivot Tracing state: {e}")))
    })
    .await
}

pub(crate) fn routes(max_body: usize) -> Router<Arc<AppState>> {
    Router::new()
        .route(
            causeway_pivot::protocol::AGENT_PATH,
            post(agent_report).layer(DefaultBodyLimit::max(max_body)),
        )
        .route("/api/pivot/queries", post(install).get(list))
        .route("/api/pivot/queries/{id}", get(one).delete(uninstall))
        .route("/api/pivot/queries/{id}/results", get(results))
        .route("/api/pivot/queries/{id}/stream", get(stream))
        .route("/api/pivot/tracepoints", get(tracepoints).post(define))
        .route("/api/pivot/processes", get(processes))
        .route("/api/pivot/explain", post(explain))
}

fn syntax(e: &SyntaxError, text: &str) -> ApiError {
    ApiError::BadRequest(e.render("query", text))
}

fn refused(e: Refused, file: &str, text: &str) -> ApiError {
    match e {
        Refused::Syntax(e) => ApiError::BadRequest(e.render(file, text)),
        Refused::Full(m) => ApiError::Conflict(m),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryText {
    query: String,
}

fn check_size(text: &str) -> Result<(), ApiError> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(ApiError::PayloadTooLarge(format!(
            "query of {} bytes; at most {MAX_QUERY_BYTES}",
            text.len()
        )));
    }
    Ok(())
}

async fn agent_report(
    State(app): State<Arc<AppState>>,
    Json(report): Json<Report>,
) -> Result<Json<Reply>, ApiError> {
    let _saving = app.pivot.saving.lock().await;
    let state = app.clone();
    let (reply, changed) = blocking(move || {
        state
            .pivot
            .lock()
            .report(report, now_ms())
            .map_err(ApiError::Unavailable)
    })
    .await?;
    let hub = &app.pivot;
    if changed {
        // Saved before the answer: what the hub acknowledges survives a restart.
        persist(&app).await?;
        hub.changed();
    }
    Ok(Json(reply))
}

async fn install(
    State(app): State<Arc<AppState>>,
    Json(body): Json<QueryText>,
) -> Result<Response, ApiError> {
    check_size(&body.query)?;
    let hub = &app.pivot;
    let _saving = hub.saving.lock().await;
    let state = app.clone();
    let installed = blocking(move || {
        let text = body.query;
        state
            .pivot
            .lock()
            .install(&text, now_ms())
            .map_err(|e| refused(e, "query", &text))
    })
    .await?;
    persist(&app).await?;
    hub.changed();
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "id": installed.id,
            "name": installed.name,
            "columns": installed.columns,
            "explain": installed.explain,
        })),
    )
        .into_response())
}

async fn explain(
    State(app): State<Arc<AppState>>,
    Json(body): Json<QueryText>,
) -> Result<Json<serde_json::Value>, ApiError> {
    check_size(&body.query)?;
    let explained = blocking(move || {
        let text = body.query;
        app.pivot
            .lock()
            .explain(&text)
            .map_err(|e| syntax(&e, &text))
    })
    .await?;
    Ok(Json(json!({ "explain": explained })))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProcessAck {
    proc_name: String,
    host: String,
    service: String,
    pid: u32,
    acknowledged: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QuerySummary {
    id: u32,
    name: Option<String>,
    query: String,
    columns: Vec<String>,
    installed_at: u64,
    explain: String,
    processes: Vec<ProcessAck>,
}

fn summary(state: &HubState, q: &HubQuery, now: u64) -> QuerySummary {
    let mut processes: Vec<ProcessAck> = state
        .processes
        .values()
        .filter(|p| state.connected(p, now))
        .map(|p| ProcessAck {
            proc_name: p.info.proc_name.clone(),
            host: p.info.host.clone(),
            service: p.info.service.clone(),
            pid: p.info.pid,
            acknowledged: p.installed.contains(&q.id),
            error: p
                .failed
                .iter()
                .find(|f| f.query == q.id)
                .map(|f| f.error.clone()),
        })
        .collect();
    processes.sort_by(|a, b| (&a.proc_name, a.pid).cmp(&(&b.proc_name, b.pid)));
    QuerySummary {
        id: q.id,
        name: q.name.clone(),
        query: q.query.clone(),
        columns: q.columns.clone(),
        installed_at: q.installed_at_ms,
        explain: q.explain.clone(),
        processes,
    }
}

async fn list(State(app): State<Arc<AppState>>) -> Result<Json<serde_json::Value>, ApiError> {
    blocking(move || {
        let state = app.pivot.lock();
        let now = now_ms();
        let queries: Vec<QuerySummary> = state
            .queries
            .values()
            .map(|q| summary(&state, q, now))
            .collect();
        Ok(Json(json!({ "queries": queries })))
    })
    .await
}

fn parse_id(id: &str) -> Result<u32, ApiError> {
    id.parse()
        .map_err(|_| ApiError::BadRequest(format!("query id {id:?} is not a number")))
}

fn not_found(id: u32) -> ApiError {
    ApiError::NotFound(format!("no Pivot Tracing query {id}"))
}

async fn one(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<QuerySummary>, ApiError> {
    let id = parse_id(&id)?;
    blocking(move || {
        let state = app.pivot.lock();
        let q = state.queries.get(&id).ok_or_else(|| not_found(id))?;
        Ok(Json(summary(&state, q, now_ms())))
    })
    .await
}

async fn uninstall(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let id = parse_id(&id)?;
    let hub = &app.pivot;
    let _saving = hub.saving.lock().await;
    let state = app.clone();
    if !blocking(move || Ok(state.pivot.lock().uninstall(id))).await? {
        return Err(not_found(id));
    }
    persist(&app).await?;
    hub.changed();
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SeriesPoint {
    at: u64,
    rows: Vec<Vec<Value>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Results {
    id: u32,
    name: Option<String>,
    columns: Vec<String>,
    rows: Vec<Vec<Value>>,
    /// Per row, a sampled trace where the query's tracepoints ran for that group.
    examples: Vec<Option<String>>,
    /// Tuples (or, merged at the hub, groups) beyond the group limit.
    overflow: u64,
    interval_ms: u64,
    last_result_at: Option<u64>,
    series: Vec<SeriesPoint>,
}

fn results_of(state: &HubState, q: &HubQuery) -> Results {
    let (rows, examples) = q
        .totals
        .rows_with_examples()
        .into_iter()
        .map(|(row, example)| (row, example.map(|t| t.to_string())))
        .unzip();
    Results {
        id: q.id,
        name: q.name.clone(),
        columns: q.columns.clone(),
        rows,
        examples,
        overflow: q.totals.overflow,
        interval_ms: state.interval_ms,
        last_result_at: q.last_result_ms,
        series: q
            .series
            .iter()
            .map(|(at, a)| SeriesPoint {
                at: *at,
                rows: a.rows(),
            })
            .collect(),
    }
}

async fn results(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<Results>, ApiError> {
    let id = parse_id(&id)?;
    blocking(move || {
        let state = app.pivot.lock();
        let q = state.queries.get(&id).ok_or_else(|| not_found(id))?;
        Ok(Json(results_of(&state, q)))
    })
    .await
}

/// Server-sent events: the results once, then again after each change (at most once per
/// interval); ends when the query is uninstalled.
async fn stream(
    State(app): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<impl IntoResponse, ApiError> {
    let id = parse_id(&id)?;
    let interval = {
        let state = app.pivot.lock();
        state.queries.get(&id).ok_or_else(|| not_found(id))?;
        Duration::from_millis(state.interval_ms)
    };
    let rx = app.pivot.changes.subscribe();
    let events =
        futures_util::stream::unfold((app, rx, true), move |(app, mut rx, first)| async move {
            if !first {
                tokio::time::sleep(interval).await;
                rx.changed().await.ok()?;
            }
            let shared = app.clone();
            let data = blocking(move || {
                let state = shared.pivot.lock();
                Ok(state
                    .queries
                    .get(&id)
                    .and_then(|q| serde_json::to_string(&results_of(&state, q)).ok()))
            })
            .await
            .ok()??;
            let event: Result<Event, Infallible> = Ok(Event::default().event("results").data(data));
            Some((event, (app, rx, false)))
        });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ProcessEntry {
    instance: String,
    proc_name: String,
    host: String,
    service: String,
    pid: u32,
    connected: bool,
    last_seen: u64,
    installed: Vec<u32>,
    failed: Vec<causeway_pivot::protocol::InstallFailure>,
    callsites: usize,
    /// Callsites it registered that the hub did not keep (past its limits).
    callsites_dropped: u64,
    /// What the process's advice, baggage and agent dropped since it started.
    counters: serde_json::Value,
}

/// Every process that reported (connected or not, since the hub started), with what
/// it runs and what it dropped.
async fn processes(State(app): State<Arc<AppState>>) -> Result<Json<serde_json::Value>, ApiError> {
    blocking(move || Ok(Json(processes_of(&mut app.pivot.lock())))).await
}

fn processes_of(state: &mut HubState) -> serde_json::Value {
    let now = now_ms();
    state.expire(now);
    let mut processes: Vec<ProcessEntry> = state
        .processes
        .iter()
        .map(|(instance, p)| ProcessEntry {
            instance: format!("{instance:016x}"),
            proc_name: p.info.proc_name.clone(),
            host: p.info.host.clone(),
            service: p.info.service.clone(),
            pid: p.info.pid,
            connected: state.connected(p, now),
            last_seen: p.last_seen_ms,
            installed: p.installed.clone(),
            failed: p.failed.clone(),
            callsites: p.callsites.len(),
            callsites_dropped: p.callsites_dropped,
            counters: json!({
                "bagsMalformed": p.counters.bags_malformed,
                "bagsOverflowed": p.counters.bags_overflowed,
                "fanoutDropped": p.counters.fanout_dropped,
                "batchesDropped": p.counters.batches_dropped,
            }),
        })
        .collect();
    processes.sort_by(|a, b| (&a.proc_name, a.pid).cmp(&(&b.proc_name, b.pid)));
    json!({ "processes": processes })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DefinitionText {
    text: String,
}

async fn define(
    State(app): State<Arc<AppState>>,
    Json(body): Json<DefinitionText>,
) -> Result<Json<serde_json::Value>, ApiError> {
    check_size(&body.text)?;
    let hub = &app.pivot;
    let _saving = hub.saving.lock().await;
    let state = app.clone();
    let added = blocking(move || {
        let text = body.text;
        state
            .pivot
            .lock()
            .define("tracepoints", &text)
            .map_err(|e| refused(e, "tracepoints", &text))
    })
    .await?;
    persist(&app).await?;
    Ok(Json(json!({ "added": added })))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallsiteEntry {
    #[serde(flatten)]
    callsite: causeway_pivot::protocol::CallsiteInfo,
    /// The processes that registered it.
    processes: Vec<String>,
    /// The defined tracepoints that fire at it.
    tracepoints: Vec<String>,
}

/// The definitions, the named queries, and a page (`offset`, `limit`) of the callsites
/// the connected processes registered, sorted by target and name, with their total.
async fn tracepoints(
    State(app): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<serde_json::Value>, ApiError> {
    let params = pairs(query)?;
    let limit = limit_param(&params, CALLSITES_PAGE)?;
    if limit > MAX_CALLSITES_PAGE {
        return Err(crate::params::bad(
            "limit",
            format!("{limit} is over the page's most, {MAX_CALLSITES_PAGE}"),
        ));
    }
    let offset: usize = param(&params, "offset")
        .map_or(Ok(0), str::parse)
        .map_err(|_| crate::params::bad("offset", "is not a count".into()))?;
    blocking(move || Ok(Json(catalog_page(&app.pivot.lock(), offset, limit)))).await
}

fn catalog_page(state: &HubState, offset: usize, limit: usize) -> serde_json::Value {
    let now = now_ms();
    let mut callsites: Vec<CallsiteEntry> = Vec::new();
    let mut index: std::collections::HashMap<&causeway_pivot::protocol::CallsiteInfo, usize> =
        std::collections::HashMap::new();
    for p in state.processes.values().filter(|p| state.connected(p, now)) {
        for c in &p.callsites {
            let at = *index.entry(c).or_insert_with(|| {
                callsites.push(CallsiteEntry {
                    callsite: c.clone(),
                    processes: Vec::new(),
                    tracepoints: Vec::new(),
                });
                callsites.len() - 1
            });
            if let Some(e) = callsites.get_mut(at) {
                e.processes.push(p.info.proc_name.clone());
            }
        }
    }
    drop(index);
    callsites.sort_by(|a, b| {
        (&a.callsite.target, &a.callsite.name).cmp(&(&b.callsite.target, &b.callsite.name))
    });
    let total = callsites.len();
    let mut page: Vec<CallsiteEntry> = callsites.into_iter().skip(offset).take(limit).collect();
    let defs: Vec<_> = state
        .definitions
        .iter()
        .filter_map(|(name, _)| state.catalog.tracepoint(name))
        .collect();
    for e in &mut page {
        e.processes.sort();
        e.processes.dedup();
        e.tracepoints = defs
            .iter()
            .filter(|d| !moments(d, &e.callsite).is_empty())
            .map(|d| d.name.text.clone())
            .collect();
    }
    let definitions: Vec<_> = state
        .definitions
        .iter()
        .map(|(name, text)| json!({ "name": name, "text": text }))
        .collect();
    // Named queries the hub knows stay usable as sources after they are uninstalled.
    let mut named: Vec<_> = state
        .catalog
        .queries()
        .filter_map(|q| {
            let name = q.name.as_ref()?.text.clone();
            Some(json!({ "name": name, "text": causeway_pivot::lang::print_query(q) }))
        })
        .collect();
    named.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    json!({
        "definitions": definitions,
        "namedQueries": named,
        "callsites": page,
        "total": total,
        "offset": offset,
        "limit": limit,
    })
}
