//! Requests stitched from logs (`causeway logs --collector`): their log-point sequences
//! over a window, and the latest stitching report (the identifier ranking with its
//! evidence, and the links learned), which `causeway logs` posts to the ingest listener
//! and the server keeps in its data directory. The report is kept as
//! `DATA/logflow-report.json`, the latest replacing the one before. `GET /api/logs` groups
//! a window's stitched traces by log-point sequence (`causeway_analysis::logflows`) with
//! counts, latency histograms and example traces, and returns the report with them; the
//! UI's Logs page draws both.

use std::path::PathBuf;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Json, Router};
use causeway_analysis::logflows::{LogFlows, LogFlowsSummary};
use serde::Serialize;

use crate::params::{limit_param, pairs, window_param};
use crate::receive::{receive, Received, Rules};
use crate::scans::{scan_window, Window};
use crate::work::blocking;
use crate::{ApiError, AppState};

/// The report's file in the data directory.
const REPORT_FILE: &str = "logflow-report.json";

/// The largest report kept.
const MAX_REPORT_BYTES: usize = 4 << 20;

/// The query API's routes.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/api/logs", get(flows))
}

/// The ingest listener's routes.
pub(crate) fn ingest_routes() -> Router<Arc<AppState>> {
    Router::new().route("/v1/logflow/report", post(keep_report))
}

fn report_path(state: &AppState) -> PathBuf {
    state.config.data_dir.join(REPORT_FILE)
}

/// Keeps a stitching report (a JSON object), replacing the one before.
async fn keep_report(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<serde_json::Value>, ApiError> {
    let rules = Rules {
        limit: MAX_REPORT_BYTES,
        timeout: state.config.limits.body_timeout,
        budget: &state.ingest_receiving,
    };
    let Received { bytes: body, held } = receive(&headers, body, rules)
        .await
        .map_err(|r| state.refused(r))?;
    let path = report_path(&state);
    blocking(move || {
        let _held = held;
        let report: serde_json::Value = serde_json::from_slice(&body).map_err(|e| {
            ApiError::BadRequest(format!(
                "the report is not JSON: {e} (line {}, column {})",
                e.line(),
                e.column()
            ))
        })?;
        if !report.is_object() {
            return Err(ApiError::BadRequest(
                "the report must be a JSON object".into(),
            ));
        }
        let partial = path.with_extension("json.partial");
        std::fs::write(&partial, &body)
            .and_then(|()| std::fs::rename(&partial, &path))
            .map_err(|e| ApiError::Internal(format!("keeping the report: {e}")))?;
        Ok(Json(serde_json::json!({"kept": true})))
    })
    .await
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FlowsBody {
    window: Window,
    #[serde(flatten)]
    summary: LogFlowsSummary,
    /// The latest stitching report, if one was posted.
    report: Option<serde_json::Value>,
}

/// The window's stitched requests by log-point sequence (`limit` sequences, 50), and
/// the latest report.
async fn flows(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<FlowsBody>, ApiError> {
    let params = pairs(query)?;
    let window = window_param(&params)?;
    let limit = limit_param(&params, 50)?;
    // The log points are the events' attributes: the whole spans are read.
    let (flows, scanned) = scan_window(
        &state,
        window,
        causeway_store::Fields::All,
        LogFlows::default,
        LogFlows::add,
        LogFlows::merge,
    )
    .await?;
    let path = report_path(&state);
    let report = blocking(move || {
        Ok(match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).ok(),
            Err(_) => None,
        })
    })
    .await?;
    Ok(Json(FlowsBody {
        window: Window::of(window, scanned),
        summary: flows.summary(limit),
        report,
    }))
}
