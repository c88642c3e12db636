//! `GET /api/monitor`: requests per second, error share and duration quantiles over time,
//! per service (or per operation of one service), computed from the stored traces at query
//! time (Jaeger's Monitor tab without span metrics to set up). A bulk scan reading the
//! spans' structure, in a scan's place and within the query time limit.

use std::sync::Arc;

use axum::extract::{RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};
use causeway_analysis::monitor::{Monitor, Series};
use causeway_store::parse_duration;
use serde::Serialize;

use crate::params::{bad, limit_param, pairs, param, window_param};
use crate::scans::{scan_window, structure, Window};
use crate::{ApiError, AppState};

/// Points a series has when no `step` is given.
const POINTS: u64 = 60;
/// Series answered at most.
const MOST_SERIES: usize = 200;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/api/monitor", get(monitor))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MonitorBody {
    window: Window,
    /// Bucket width, ns.
    step: u64,
    /// Each bucket's start, Unix ns.
    starts: Vec<u64>,
    /// Requests not counted for want of room for their series.
    untracked: u64,
    series: Vec<Series>,
}

/// A step that is a round duration, giving about `POINTS` buckets over `span` ns.
fn round_step(span: u64) -> u64 {
    const S: u64 = 1_000_000_000;
    let want = span / POINTS;
    [
        S,
        2 * S,
        5 * S,
        10 * S,
        15 * S,
        30 * S,
        60 * S,
        120 * S,
        300 * S,
        600 * S,
        900 * S,
        1_800 * S,
        3_600 * S,
        7_200 * S,
        21_600 * S,
        43_200 * S,
        86_400 * S,
    ]
    .into_iter()
    .find(|&s| s >= want)
    .unwrap_or(86_400 * S)
}

async fn monitor(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<MonitorBody>, ApiError> {
    let params = pairs(query)?;
    let window = window_param(&params)?;
    // Time series need a window with two ends: "all time" has none to cut into buckets.
    if window.start == 0 || window.end == u64::MAX {
        return Err(bad(
            "lookback",
            "give a window with both ends: lookback, or start and end".into(),
        ));
    }
    let step = match param(&params, "step") {
        Some(v) => parse_duration(v).map_err(|e| bad("step", e))?.max(1),
        None => round_step(window.end - window.start),
    };
    let service = param(&params, "service").map(str::to_string);
    let limit = limit_param(&params, 50)?.min(MOST_SERIES);
    let (m, scanned) = scan_window(
        &state,
        window,
        structure(&[]),
        move || Monitor::new(window.start, window.end, step),
        Monitor::add,
        Monitor::merge,
    )
    .await?;
    Ok(Json(MonitorBody {
        window: Window::of(window, scanned),
        step: m.step(),
        starts: m.starts(),
        untracked: m.untracked(),
        series: m.report(service.as_deref(), limit),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_step_is_round_and_gives_about_sixty_points() {
        const S: u64 = 1_000_000_000;
        assert_eq!(round_step(3_600 * S), 60 * S);
        assert_eq!(round_step(15 * 60 * S), 15 * S);
        assert_eq!(round_step(5 * 60 * S), 5 * S);
        // A week: 2.8 h a point asked, 6 h the round step above it.
        assert_eq!(round_step(7 * 86_400 * S), 21_600 * S);
    }
}
