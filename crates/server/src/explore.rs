//! The search page's explorations of a window, under its filters: `GET /api/scatter`, the
//! traces as points of a duration scatter (all when few; a sample and every long one when
//! many), `GET /api/differences`, what sets a selection of them apart from the rest, and
//! `GET /api/attributes`, the keys and values the search form offers. All are bulk scans, in a scan's place and within the query time limit.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};
use causeway_analysis::attributes::Catalog;
use causeway_analysis::differences::{Differences, Report, Selection};
use causeway_analysis::scatter::{Point, Scatter};
use causeway_store::{parse_duration, parse_time, Fields};
use serde::Serialize;

use crate::analyses::PatternFilter;
use crate::params::{bad, limit_param, pairs, param, window_param};
use crate::scans::{scan_window, scan_window_some, structure, Window};
use crate::{ApiError, AppState};

/// Points a scatter answers at most.
const MOST_POINTS: usize = 10_000;
/// Differences listed at most.
const MOST_DIFFERENCES: usize = 200;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/scatter", get(scatter))
        .route("/api/differences", get(differences))
        .route("/api/attributes", get(attributes))
}

/// Traces an attribute catalog reads at most: what the search box offers is what is
/// common, which the first few thousand traces show.
const CATALOG_TRACES: u64 = 5_000;
/// Keys or values an attribute catalog answers at most.
const MOST_OFFERED: usize = 1_000;

/// `GET /api/attributes?service=&key=&limit=` over a window: the attribute keys of its
/// spans (of `service` when given), most common first, or with `key` that key's values;
/// counted over the first 5 000 traces read.
async fn attributes(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<serde_json::Value>, ApiError> {
    let params = pairs(query)?;
    let window = window_param(&params)?;
    let limit = limit_param(&params, 100)?;
    if limit == 0 || limit > MOST_OFFERED {
        return Err(bad(
            "limit",
            format!("{limit} is not between 1 and {MOST_OFFERED}"),
        ));
    }
    let service = param(&params, "service").map(str::to_string);
    let key = param(&params, "key").map(str::to_string);
    let (service2, key2) = (service.clone(), key.clone());
    let (catalog, scanned) = scan_window_some(
        &state,
        window,
        Fields::All,
        CATALOG_TRACES,
        move || Catalog::new(service2.clone(), key2.clone()),
        Catalog::add,
        Catalog::merge,
    )
    .await?;
    let offered = catalog.offered(limit);
    Ok(Json(serde_json::json!({
        "key": key,
        "service": service,
        "seen": offered.seen,
        "untracked": offered.untracked,
        "window": Window::of(window, scanned),
    })))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ScatterBody {
    window: Window,
    /// Traces in the window that pass the filters.
    total: u64,
    /// The points: every trace when `total` is at most `limit`; else an even sample and
    /// the longest tenth of `limit`.
    points: Vec<Point>,
}

async fn scatter(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<ScatterBody>, ApiError> {
    let params = pairs(query)?;
    let window = window_param(&params)?;
    let filter = PatternFilter::of(&params)?;
    let limit = limit_param(&params, 2_000)?;
    if limit == 0 || limit > MOST_POINTS {
        return Err(bad(
            "limit",
            format!("{limit} is not between 1 and {MOST_POINTS}"),
        ));
    }
    let longest = limit / 10;
    let (s, scanned) = scan_window(
        &state,
        window,
        structure(&filter.attributes()),
        move || Scatter::new(limit - longest, longest),
        move |s, t| {
            if filter.passes(t) {
                if let Some(p) = Point::of(t) {
                    s.add(p);
                }
            }
        },
        Scatter::merge,
    )
    .await?;
    Ok(Json(ScatterBody {
        window: Window::of(window, scanned),
        total: s.total(),
        points: s.points(),
    }))
}

/// The selection of `/api/differences`: `selStart`, `selEnd` (instants, as `start`),
/// `selMinDuration`, `selMaxDuration` (durations, as `minDuration`), `selErrors=true`.
fn selection(params: &[(String, String)]) -> Result<Selection, ApiError> {
    let time = |name: &str| {
        param(params, name)
            .map(|v| parse_time(v).map_err(|e| bad(name, e)))
            .transpose()
    };
    let span = |name: &str| {
        param(params, name)
            .map(|v| parse_duration(v).map_err(|e| bad(name, e)))
            .transpose()
    };
    let errors = match param(params, "selErrors") {
        None | Some("false") => false,
        Some("true") => true,
        Some(v) => return Err(bad("selErrors", format!("{v:?} is not true or false"))),
    };
    let sel = Selection {
        start_from: time("selStart")?,
        start_to: time("selEnd")?,
        min_duration: span("selMinDuration")?,
        max_duration: span("selMaxDuration")?,
        errors,
        pattern: param(params, "selPattern")
            .map(|p| p.parse().map_err(|e| bad("selPattern", e)))
            .transpose()?,
    };
    if sel.is_everything() {
        return Err(ApiError::BadRequest(
            "no selection: give selStart, selEnd, selMinDuration, selMaxDuration, selErrors=true or selPattern"
                .into(),
        ));
    }
    Ok(sel)
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DifferencesBody {
    window: Window,
    #[serde(flatten)]
    report: Report,
}

async fn differences(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<DifferencesBody>, ApiError> {
    let params = pairs(query)?;
    let window = window_param(&params)?;
    let filter = PatternFilter::of(&params)?;
    let sel = selection(&params)?;
    let limit = limit_param(&params, 30)?.min(MOST_DIFFERENCES);
    let (d, scanned) = scan_window(
        &state,
        window,
        Fields::All,
        Differences::default,
        move |d, t| {
            if filter.passes(t) {
                d.add(t, sel.holds(t));
            }
        },
        Differences::merge,
    )
    .await?;
    Ok(Json(DifferencesBody {
        window: Window::of(window, scanned),
        report: d.report(limit),
    }))
}
