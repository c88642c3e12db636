//! The analysis endpoints: a trace's critical path and statistics (on skew-corrected
//! times), and the dependency graph, execution patterns and comparisons over a time window
//! through the store's parallel bulk scan.

use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::routing::get;
use axum::{Json, Router};
use causeway_analysis::compare::{compare, Comparison, Profile};
use causeway_analysis::critical::{critical_path, self_times, Section};
use causeway_analysis::deps::{Dependencies, Graph, PEER_KEYS};
use causeway_analysis::inferred::{InferredPaths, InferredSummary};
use causeway_analysis::main_root;
use causeway_analysis::patterns::{
    PatternDetail, PatternId, PatternSummary, Patterns, SortBy, TraceShape,
};
use causeway_analysis::skew::{self, Adjusted, ClockOffset};
use causeway_analysis::stats::{trace_stats, TraceStats};
use causeway_model::{SpanId, Trace, TraceId};
use causeway_store::{Fields, ScanStats, SearchQuery, TimeWindow};
use serde::Serialize;

use crate::params::{
    bad, limit_param, pairs, param, parse_trace_id, search_query, source_kind, window_param,
};
use crate::scans::{scan_window, structure, Window};
use crate::work::blocking;
use crate::{ApiError, AppState};

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/traces/{trace_id}/critical-path", get(critical))
        .route("/api/traces/{trace_id}/stats", get(stats))
        .route("/api/dependencies", get(dependencies))
        .route("/api/patterns", get(patterns))
        .route("/api/patterns/{pattern_id}", get(pattern))
        .route("/api/compare", get(comparison))
        .route("/api/inferred", get(inferred))
}

/// Loads a trace, corrects its clock skew and analyses it with `f`, off the async workers.
async fn with_adjusted<T: Send + 'static>(
    state: &AppState,
    id: &str,
    f: impl FnOnce(Adjusted) -> T + Send + 'static,
) -> Result<T, ApiError> {
    let id = parse_trace_id(id)?;
    let store = state.store.clone();
    blocking(
        move || match causeway_store::linked::joined_trace(&*store, id)? {
            Some(t) => Ok(f(skew::correct_owned(t))),
            None => Err(ApiError::NotFound(format!("trace {id} not found"))),
        },
    )
    .await
}

/// Self time of one span.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SelfTime {
    span_id: SpanId,
    self_ns: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CriticalPathBody {
    trace_id: TraceId,
    /// The main root.
    root_span_id: Option<SpanId>,
    /// The main root's duration: the sections add up to it.
    duration_ns: u64,
    sections: Vec<Section>,
    self_times: Vec<SelfTime>,
    /// Offsets applied to each host's times before the analysis.
    clock_offsets: Vec<ClockOffset>,
}

async fn critical(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<CriticalPathBody>, ApiError> {
    let body = with_adjusted(&state, &id, |a| critical_body(&a)).await?;
    Ok(Json(body))
}

/// The critical path of a skew-corrected trace, with every span's self time.
pub(crate) fn critical_body(a: &Adjusted) -> CriticalPathBody {
    let t = &a.trace;
    let root = main_root(t);
    let own = self_times(t);
    CriticalPathBody {
        trace_id: t.trace_id,
        root_span_id: root.map(|r| t.spans[r].span_id),
        duration_ns: root.map_or(0, |r| t.spans[r].duration()),
        sections: critical_path(t),
        self_times: t
            .spans
            .iter()
            .zip(own)
            .map(|(s, self_ns)| SelfTime {
                span_id: s.span_id,
                self_ns,
            })
            .collect(),
        clock_offsets: a.offsets.clone(),
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StatsBody {
    trace_id: TraceId,
    #[serde(flatten)]
    stats: TraceStats,
    clock_offsets: Vec<ClockOffset>,
}

async fn stats(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<Json<StatsBody>, ApiError> {
    let body = with_adjusted(&state, &id, |a| StatsBody {
        trace_id: a.trace.trace_id,
        stats: trace_stats(&a.trace),
        clock_offsets: a.offsets,
    })
    .await?;
    Ok(Json(body))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DependenciesBody {
    window: Window,
    #[serde(flatten)]
    graph: Graph,
}

async fn dependencies(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<DependenciesBody>, ApiError> {
    let params = pairs(query)?;
    let window = window_param(&params)?;
    let by_host = match param(&params, "group") {
        None | Some("service") => false,
        Some("host") => true,
        Some(v) => return Err(bad("group", format!("{v:?} is not service or host"))),
    };
    let source = param(&params, "source")
        .map(|v| source_kind("source", v))
        .transpose()?;
    let (deps, scanned) = scan_window(
        &state,
        window,
        structure(&PEER_KEYS.map(String::from)),
        move || Dependencies::new(by_host, source.clone()),
        |d, t| d.add(t),
        Dependencies::merge,
    )
    .await?;
    Ok(Json(DependenciesBody {
        window: Window::of(window, scanned),
        graph: deps.graph(),
    }))
}

/// Which traces a pattern scan groups: those through `service`, and of those, when
/// `spans` is given, only the ones with a span that meets its conditions (the search
/// page's span name, attribute, duration and error filters).
#[derive(Default)]
pub(crate) struct PatternFilter {
    pub(crate) service: Option<String>,
    spans: Option<SearchQuery>,
    /// `pattern`: only the traces of this shape.
    pattern: Option<PatternId>,
}

impl PatternFilter {
    /// Reads `service` and the span conditions of `/api/search` (the window is the scan's).
    pub(crate) fn of(params: &[(String, String)]) -> Result<PatternFilter, ApiError> {
        let mut q = search_query(params)?;
        q.window = None;
        q.limit = 0;
        let service = q.service.clone();
        let only_service = SearchQuery {
            service: service.clone(),
            ..SearchQuery::default()
        };
        Ok(PatternFilter {
            service,
            spans: (q != only_service).then_some(q),
            pattern: param(params, "pattern")
                .map(|p| p.parse().map_err(|e| bad("pattern", e)))
                .transpose()?,
        })
    }

    /// The attributes the span conditions read.
    pub(crate) fn attributes(&self) -> Vec<String> {
        self.spans
            .iter()
            .flat_map(|q| q.tags.iter().map(|(k, _)| k.clone()))
            .collect()
    }

    fn admits(&self, t: &Trace) -> bool {
        self.spans.as_ref().is_none_or(|q| {
            t.spans.iter().any(|s| q.matches(s)) && q.trace_duration_holds(trace_duration(t))
        }) && self
            .pattern
            .is_none_or(|p| TraceShape::of(t).is_some_and(|s| s.id == p))
    }

    /// Whether the trace passes every filter, its service among them (which the patterns
    /// apply themselves, as a pattern's root).
    pub(crate) fn passes(&self, t: &Trace) -> bool {
        self.admits(t)
            && self
                .service
                .as_deref()
                .is_none_or(|s| t.spans.iter().any(|sp| &*sp.service == s))
    }
}

/// Latest end less earliest start, ns.
fn trace_duration(t: &Trace) -> u64 {
    let start = t.spans.iter().map(|s| s.start).min().unwrap_or(0);
    let end = t.spans.iter().map(|s| s.end).max().unwrap_or(0);
    end.saturating_sub(start)
}

/// Accumulates the patterns of a window.
async fn scan_patterns(
    state: &AppState,
    window: TimeWindow,
    filter: PatternFilter,
    only: Option<PatternId>,
) -> Result<(Patterns, ScanStats), ApiError> {
    let max_nodes = causeway_analysis::patterns::DEFAULT_MAX_NODES;
    let service = filter.service.clone();
    scan_window(
        state,
        window,
        structure(&filter.attributes()),
        move || Patterns::new(service.clone(), only, max_nodes),
        move |p, t| {
            if filter.admits(t) {
                p.add(t)
            }
        },
        Patterns::merge,
    )
    .await
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PatternsBody {
    window: Window,
    /// Traces grouped (those through the service, when one is given).
    traces: u64,
    /// Traces of shapes not held because the memory bound was reached.
    untracked_traces: u64,
    /// Patterns found; the list holds the first `limit` of them.
    total: usize,
    patterns: Vec<PatternSummary>,
}

async fn patterns(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<PatternsBody>, ApiError> {
    let params = pairs(query)?;
    let window = window_param(&params)?;
    let sort: SortBy = param(&params, "sort")
        .map_or(Ok(SortBy::Count), str::parse)
        .map_err(|e| bad("sort", e))?;
    let limit = limit_param(&params, 100)?;
    let filter = PatternFilter::of(&params)?;
    let (p, scanned) = scan_patterns(&state, window, filter, None).await?;
    let mut list = p.summaries(sort);
    let total = list.len();
    list.truncate(limit);
    Ok(Json(PatternsBody {
        window: Window::of(window, scanned),
        traces: p.traces(),
        untracked_traces: p.untracked(),
        total,
        patterns: list,
    }))
}

fn parse_pattern_id(text: &str) -> Result<PatternId, ApiError> {
    text.parse().map_err(ApiError::BadRequest)
}

async fn pattern_detail(
    state: &AppState,
    window: TimeWindow,
    filter: PatternFilter,
    id: PatternId,
) -> Result<PatternDetail, ApiError> {
    let (p, _) = scan_patterns(state, window, filter, Some(id)).await?;
    p.detail(id)
        .ok_or_else(|| ApiError::NotFound(format!("pattern {id} has no traces in the window")))
}

async fn pattern(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<PatternDetail>, ApiError> {
    let id = parse_pattern_id(&id)?;
    let params = pairs(query)?;
    let window = window_param(&params)?;
    // The same filters as the list it was picked from, so the histogram's examples match.
    let filter = PatternFilter::of(&params)?;
    Ok(Json(pattern_detail(&state, window, filter, id).await?))
}

/// One side of a comparison: a trace id, or a pattern id (`p` and 16 hex digits).
async fn profile(
    state: &AppState,
    name: &str,
    text: &str,
    window: TimeWindow,
) -> Result<Profile, ApiError> {
    if text.starts_with('p') {
        let id = text.parse().map_err(|e| bad(name, e))?;
        return Ok(Profile::of_pattern(
            &pattern_detail(state, window, PatternFilter::default(), id).await?,
        ));
    }
    TraceId::parse(text).map_err(|e| bad(name, format!("{e}")))?;
    with_adjusted(state, text, |a| Profile::of_trace(&a.trace)).await
}

async fn comparison(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<Comparison>, ApiError> {
    let params = pairs(query)?;
    let window = window_param(&params)?;
    let side = |name: &str| {
        param(&params, name)
            .map(str::to_string)
            .ok_or_else(|| bad(name, "is required: a trace id or a pattern id".into()))
    };
    let (a, b) = (side("a")?, side("b")?);
    let a = profile(&state, "a", &a, window).await?;
    let b = profile(&state, "b", &b, window).await?;
    Ok(Json(compare(&a, &b)))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InferredBody {
    window: Window,
    #[serde(flatten)]
    summary: InferredSummary,
}

/// Paths inferred from black-box messages in a window: patterns with their hops' mean
/// delays (WAP5's timelines) and each node's delay histogram. `limit` patterns (20).
async fn inferred(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Json<InferredBody>, ApiError> {
    let params = pairs(query)?;
    let window = window_param(&params)?;
    let limit = limit_param(&params, 20)?;
    // The hops' senders and send times are attributes, and the probability is the
    // spans' source: the whole spans are read.
    let (paths, scanned) = scan_window(
        &state,
        window,
        Fields::All,
        InferredPaths::default,
        InferredPaths::add,
        InferredPaths::merge,
    )
    .await?;
    Ok(Json(InferredBody {
        window: Window::of(window, scanned),
        summary: paths.summary(limit),
    }))
}
