//! `POST /api/expect/check`: an expectations file in, the report on every path of a
//! window out (through the store's parallel bulk scan, reading whole spans: the path view
//! needs their events and messages).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use causeway_expect::check::{Checker, FailedAssertion, PathFacts, PathReport};
use causeway_expect::lang::{ast, parse};
use causeway_expect::path::{Path, Problem};
use causeway_model::TraceId;
use causeway_store::Fields;
use serde::{Deserialize, Serialize};

use crate::params::window_param;
use crate::scans::{scan_fields_into, Window};
use crate::work::{blocking, store_blocking, Deadline};
use crate::{ApiError, AppState};

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/expect/check", post(check))
        .route("/api/expect/generate", post(generate))
}

/// One expectations file.
#[derive(Deserialize)]
struct SourceFile {
    name: String,
    text: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct CheckRequest {
    /// One file's text (named "request").
    #[serde(default)]
    text: Option<String>,
    /// Several files.
    #[serde(default)]
    files: Vec<SourceFile>,
    /// Values of `$NAME` parameters.
    #[serde(default)]
    params: HashMap<String, f64>,
    #[serde(default)]
    start: Option<String>,
    #[serde(default)]
    end: Option<String>,
    #[serde(default)]
    lookback: Option<String>,
    /// Only paths with a span of this service.
    #[serde(default)]
    service: Option<String>,
    /// Most unexpected paths (and reconciler findings) listed; the counts cover all.
    #[serde(default)]
    limit: Option<usize>,
    /// A path metric (e.g. REAL_TIME) whose values are returned per recognizer, for plots.
    #[serde(default)]
    plot: Option<String>,
}

/// A metric's values over the paths one recognizer matched (up to 500 of them).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Distribution {
    recognizer: String,
    metric: String,
    count: u64,
    values: Vec<f64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RecognizerCount {
    name: String,
    role: String,
    matched: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Reconciled {
    trace_id: String,
    problems: Vec<Problem>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CheckReport {
    window: Window,
    paths: u64,
    expected: u64,
    unexpected: u64,
    /// Paths a recognizer ran out of budget on.
    undecided: u64,
    recognizers: Vec<RecognizerCount>,
    unexpected_paths: Vec<PathReport>,
    failed_assertions: Vec<FailedAssertion>,
    /// Paths the reconciler found problems in.
    paths_with_problems: u64,
    problems: Vec<Reconciled>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    distributions: Vec<Distribution>,
}

#[derive(Default)]
struct Acc {
    paths: u64,
    expected: u64,
    unexpected: u64,
    undecided: u64,
    matched: Vec<u64>,
    unexpected_paths: Vec<PathReport>,
    facts: Vec<PathFacts>,
    with_problems: u64,
    problems: Vec<Reconciled>,
}

impl Acc {
    fn merge(&mut self, o: Acc) {
        self.paths += o.paths;
        self.expected += o.expected;
        self.unexpected += o.unexpected;
        self.undecided += o.undecided;
        if self.matched.len() < o.matched.len() {
            self.matched.resize(o.matched.len(), 0);
        }
        for (a, b) in self.matched.iter_mut().zip(o.matched) {
            *a += b;
        }
        self.unexpected_paths.extend(o.unexpected_paths);
        self.facts.extend(o.facts);
        self.with_problems += o.with_problems;
        self.problems.extend(o.problems);
    }
}

/// Parses every file; errors are `file:line:col` with the line and a caret.
fn parse_all(req: &CheckRequest) -> Result<ast::File, ApiError> {
    let mut files: Vec<(&str, &str)> = req
        .files
        .iter()
        .map(|f| (f.name.as_str(), f.text.as_str()))
        .collect();
    if let Some(t) = &req.text {
        files.push(("request", t));
    }
    let mut all = ast::File::default();
    for (name, text) in files {
        let f = parse(text).map_err(|e| ApiError::BadRequest(e.render(name, text)))?;
        all.items.extend(f.items);
    }
    Ok(all)
}

/// A JSON request body; errors name the line and column.
fn json_body<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::BadRequest(format!(
            "request body, line {} column {}: {}",
            e.line(),
            e.column(),
            causeway_model::codec::json_message(&e)
        ))
    })
}

/// The window of a body's `start`, `end` and `lookback`, read as the query parameters are.
fn body_window(
    start: &Option<String>,
    end: &Option<String>,
    lookback: &Option<String>,
) -> Result<causeway_store::TimeWindow, ApiError> {
    let params: Vec<(String, String)> = [("start", start), ("end", end), ("lookback", lookback)]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k.to_string(), v)))
        .collect();
    window_param(&params)
}

async fn check(
    State(state): State<Arc<AppState>>,
    body: axum::body::Bytes,
) -> Result<Json<CheckReport>, ApiError> {
    // Parsing and compiling take CPU in proportion to the text: off the async workers,
    // and before a scan slot is taken.
    let (req, window, file, checker) = blocking(move || {
        let req: CheckRequest = json_body(&body)?;
        let window = body_window(&req.start, &req.end, &req.lookback)?;
        let file = parse_all(&req)?;
        let checker = Checker::new(&file, req.params.clone())
            .map_err(|e| ApiError::BadRequest(e.to_string()))?;
        Ok((req, window, file, checker))
    })
    .await?;
    let store = state.store.clone();
    let report = state
        .scans
        .run(move |deadline| check_window(&*store, deadline, window, &req, &file, checker))
        .await?;
    Ok(Json(report))
}

/// Classifies every path of the window; describes the unexpected ones up to the limit.
fn check_window(
    store: &dyn causeway_store::TraceStore,
    deadline: &Deadline,
    window: causeway_store::TimeWindow,
    req: &CheckRequest,
    file: &ast::File,
    checker: Checker,
) -> Result<CheckReport, ApiError> {
    let names: Vec<String> = checker.names().iter().map(|s| s.to_string()).collect();
    let roles = checker.roles();
    let recognizers = names.len();
    let limit = req.limit.unwrap_or(100).min(10_000);
    let service = &req.service;
    let plot = &req.plot;
    let keep_facts = plot.is_some()
        || file
            .items
            .iter()
            .any(|i| matches!(i, ast::Item::Assert { .. }));
    let (mut a, scanned) = scan_fields_into(
        store,
        deadline,
        window,
        &Fields::Paths,
        Acc::default,
        |a, t| {
            if let Some(s) = service {
                if !t.spans.iter().any(|sp| &*sp.service == s) {
                    return;
                }
            }
            let path = Path::of(t);
            // Only the paths listed in the answer are described.
            let classified = checker.classify(&path);
            a.paths += 1;
            if a.matched.len() < recognizers {
                a.matched.resize(recognizers, 0);
            }
            for &i in &classified.matched {
                a.matched[i] += 1;
            }
            if !classified.undecided.is_empty() {
                a.undecided += 1;
            }
            if !path.problems.is_empty() {
                a.with_problems += 1;
                if a.problems.len() < limit {
                    a.problems.push(Reconciled {
                        trace_id: path.trace_id.to_string(),
                        problems: path.problems.clone(),
                    });
                }
            }
            if keep_facts {
                a.facts
                    .push(checker.facts(&path, classified.matched.clone()));
            }
            if classified.expected {
                a.expected += 1;
            } else {
                a.unexpected += 1;
                if a.unexpected_paths.len() < limit {
                    a.unexpected_paths.push(checker.report(&path, classified));
                }
            }
        },
        Acc::merge,
    )?;
    let failed = checker.assertions(&a.facts);
    let distributions = match plot {
        None => Vec::new(),
        Some(metric) => {
            let m = causeway_expect::program::Metric::of(metric);
            names
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let mut values: Vec<f64> = a
                        .facts
                        .iter()
                        .filter(|f| f.matched.contains(&i))
                        .filter_map(|f| causeway_expect::check::path_metric(&f.metrics, m))
                        .collect();
                    let count = values.len() as u64;
                    // An even sample keeps the shape of a large set.
                    let step = values.len().div_ceil(500).max(1);
                    values = values.into_iter().step_by(step).collect();
                    Distribution {
                        recognizer: n.clone(),
                        metric: metric.to_string(),
                        count,
                        values,
                    }
                })
                .collect()
        }
    };
    a.unexpected_paths
        .sort_by(|x, y| x.trace_id.cmp(&y.trace_id));
    a.unexpected_paths.truncate(limit);
    a.problems.sort_by(|x, y| x.trace_id.cmp(&y.trace_id));
    a.problems.truncate(limit);
    a.matched.resize(names.len(), 0);
    Ok(CheckReport {
        window: Window::of(window, scanned),
        paths: a.paths,
        expected: a.expected,
        unexpected: a.unexpected,
        undecided: a.undecided,
        recognizers: names
            .iter()
            .zip(&roles)
            .zip(&a.matched)
            .map(|((n, r), m)| RecognizerCount {
                name: n.clone(),
                role: r.to_string(),
                matched: *m,
            })
            .collect(),
        unexpected_paths: std::mem::take(&mut a.unexpected_paths),
        failed_assertions: failed,
        paths_with_problems: a.with_problems,
        problems: std::mem::take(&mut a.problems),
        distributions,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct GenerateRequest {
    /// Describe this trace.
    #[serde(default)]
    trace: Option<String>,
    /// Describe the traces of this pattern (`p` and 16 hex digits) in the window.
    #[serde(default)]
    pattern: Option<String>,
    /// Describe the traces through this service in the window.
    #[serde(default)]
    service: Option<String>,
    /// Add each task's observed REAL_TIME range as a limit.
    #[serde(default)]
    timings: bool,
    /// Write `*` for hosts instead of the hosts seen.
    #[serde(default)]
    any_host: bool,
    /// `exact` (notices as seen) or `any` (no notice texts; any notices anywhere).
    #[serde(default)]
    notices: Option<String>,
    /// Most traces read (the first ones of the window).
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    start: Option<String>,
    #[serde(default)]
    end: Option<String>,
    #[serde(default)]
    lookback: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Generated {
    /// Traces described.
    paths: usize,
    /// The recognizers, in Pip's language.
    text: String,
}

async fn generate(
    State(state): State<Arc<AppState>>,
    body: axum::body::Bytes,
) -> Result<Json<Generated>, ApiError> {
    let req: GenerateRequest = blocking(move || json_body(&body)).await?;
    let store = state.store.clone();
    let traces = if let Some(id) = &req.trace {
        let id = TraceId::parse(id).map_err(|e| ApiError::BadRequest(format!("trace: {e}")))?;
        match store_blocking(move || causeway_store::linked::joined_trace(&*store, id)).await? {
            Some(t) => vec![t],
            None => return Err(ApiError::NotFound(format!("trace {id} not found"))),
        }
    } else {
        let pattern: Option<causeway_analysis::patterns::PatternId> = req
            .pattern
            .as_deref()
            .map(str::parse)
            .transpose()
            .map_err(|e| ApiError::BadRequest(format!("pattern: {e}")))?;
        if pattern.is_none() && req.service.is_none() {
            return Err(ApiError::BadRequest(
                "give one of trace, pattern or service".into(),
            ));
        }
        let window = body_window(&req.start, &req.end, &req.lookback)?;
        let limit = req.limit.unwrap_or(1000).min(100_000);
        let service = req.service.clone();
        let (mut found, _) = state
            .scans
            .run(move |deadline| {
                scan_fields_into(
                    &*store,
                    deadline,
                    window,
                    &Fields::Paths,
                    Vec::new,
                    |v: &mut Vec<causeway_model::Trace>, t| {
                        if v.len() >= limit {
                            return;
                        }
                        if let Some(s) = &service {
                            if !t.spans.iter().any(|sp| &*sp.service == s) {
                                return;
                            }
                        }
                        if let Some(p) = pattern {
                            if causeway_analysis::patterns::TraceShape::of(t).map(|s| s.id)
                                != Some(p)
                            {
                                return;
                            }
                        }
                        v.push(t.clone());
                    },
                    |a, b| a.extend(b),
                )
            })
            .await?;
        found.sort_by_key(|t| t.trace_id);
        found.truncate(limit);
        if found.is_empty() {
            return Err(ApiError::NotFound("no traces match in the window".into()));
        }
        found
    };
    let notices = match req.notices.as_deref() {
        None => Default::default(),
        Some(text) => text
            .parse()
            .map_err(|e| ApiError::BadRequest(format!("notices: {e}")))?,
    };
    let options = causeway_expect::generate::Options {
        timings: req.timings,
        any_host: req.any_host,
        notices,
    };
    let generated = blocking(move || {
        let paths: Vec<Path> = traces.iter().map(Path::of).collect();
        let file = causeway_expect::generate::generate(&paths, options);
        Ok(Generated {
            paths: paths.len(),
            text: file.to_string(),
        })
    })
    .await?;
    Ok(Json(generated))
}
