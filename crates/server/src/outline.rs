//! `GET /api/traces/{id}/outline`: what the trace page opens with. A trace of at most
//! `whole` spans comes whole, with its critical path, in one answer; a bigger one comes as
//! an outline (`causeway_analysis::outline`): a summary, the first steps of its critical
//! path, and at most `rows` rows of its tree, each closed row standing for its subtree.
//! Opening a row asks again with `under` (and `from`, past a cut list).
//!
//! Parameters: `adjust` (`skew` or `none`), `whole` (default 0: always an outline; at most
//! `--max-answer-spans`), `rows` (default 2000, at most 10 000), `under` (a span id),
//! `from` (a count), `tree` (`spans`, or `services`: collapsed to services, a span's
//! children the spans below it where another service's work begins), `reuse=1`.
//!
//! Reading a trace of a million spans takes seconds, so the last outlined trace is kept
//! (one at a time, for five minutes) for the rows asked under it. An answer without
//! `under` reads the trace again (a trace still growing is seen as it is now) unless
//! `reuse=1` (the page switching how it cuts the tree).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, RawQuery, State};
use axum::Json;
use causeway_analysis::outline::{Outline, Row, Tree};
use causeway_analysis::skew;
use causeway_model::{SpanId, Trace, TraceId};
use serde_json::{json, Value};

use crate::analyses::critical_body;
use crate::params::{adjust_param, bad, count_param, pairs, param, parse_trace_id};
use crate::traces::TraceBody;
use crate::work::blocking;
use crate::{ApiError, AppState};

/// The most rows one answer lists.
const MOST_ROWS: usize = 10_000;
/// Critical-path steps an outline lists (the page lists 200 at once).
const PATH_STEPS: usize = 200;
/// How long the last outlined trace is kept for the rows asked under it.
const KEPT_FOR: Duration = Duration::from_secs(300);

/// The last outlined trace.
#[derive(Default)]
pub(crate) struct LastOutline(Mutex<Option<Kept>>);

struct Kept {
    id: TraceId,
    adjusted: bool,
    at: Instant,
    outline: Arc<Outline>,
}

impl LastOutline {
    fn get(&self, id: TraceId, adjusted: bool) -> Option<Arc<Outline>> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.as_ref()
            .filter(|k| k.id == id && k.adjusted == adjusted && k.at.elapsed() < KEPT_FOR)
            .map(|k| k.outline.clone())
    }

    fn keep(&self, id: TraceId, adjusted: bool, outline: Arc<Outline>) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(Kept {
            id,
            adjusted,
            at: Instant::now(),
            outline,
        });
    }
}

pub(crate) async fn outline(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let id = parse_trace_id(&id)?;
    let params = pairs(query)?;
    let adjust = adjust_param(&params)?;
    let whole = count_param(&params, "whole", 0, state.config.limits.max_answer_spans)?;
    let budget = count_param(&params, "rows", 2_000, MOST_ROWS)?;
    let from = count_param(&params, "from", 0, usize::MAX)?;
    let under: Option<SpanId> = param(&params, "under")
        .map(|u| u.parse().map_err(|e| bad("under", format!("{e}"))))
        .transpose()?;
    let tree = match param(&params, "tree") {
        None | Some("spans") => Tree::Spans,
        Some("services") => Tree::Services,
        Some(v) => return Err(bad("tree", format!("{v:?} is not spans or services"))),
    };
    let reuse = under.is_some() || param(&params, "reuse") == Some("1");
    let state2 = state.clone();
    let body = blocking(move || {
        if reuse {
            if let Some(kept) = state2.last_outline.get(id, adjust) {
                return Ok(match under {
                    Some(u) => rows_under(&kept, u, from, budget, tree)?,
                    None => first_body(&kept, budget, from, tree),
                });
            }
        }
        let Some(t) = causeway_store::linked::joined_trace(&*state2.store, id)? else {
            return Err(ApiError::NotFound(format!("trace {id} not found")));
        };
        if under.is_none() && t.spans.len() <= whole {
            return Ok(whole_body(t, adjust));
        }
        let (trace, offsets) = if adjust {
            let corrected = skew::correct_owned(t);
            (corrected.trace, corrected.offsets)
        } else {
            (t, Vec::new())
        };
        let outline = Arc::new(Outline::new(trace, offsets));
        state2.last_outline.keep(id, adjust, outline.clone());
        match under {
            None => Ok(first_body(&outline, budget, from, tree)),
            Some(u) => rows_under(&outline, u, from, budget, tree),
        }
    })
    .await?;
    Ok(Json(body))
}

/// The rows under span `under`, its children from the `from`th on.
fn rows_under(
    o: &Outline,
    under: SpanId,
    from: usize,
    budget: usize,
    tree: Tree,
) -> Result<Value, ApiError> {
    let index = o.trace.index_of(under).ok_or_else(|| {
        ApiError::NotFound(format!(
            "span {under} not found in trace {}",
            o.trace.trace_id
        ))
    })?;
    Ok(json!({
        "spanCount": o.trace.spans.len(),
        "rows": rows_json(o, &o.rows(Some(index), from, budget, tree), tree),
    }))
}

/// A trace small enough to send: its spans and its critical path (skew-corrected, as
/// every analysis is).
fn whole_body(t: Trace, adjust: bool) -> Value {
    let corrected = skew::correct(&t);
    let critical = critical_body(&corrected);
    let count = t.spans.len();
    let body = if adjust {
        let mut b = TraceBody::of(corrected.trace);
        b.clock_offsets = Some(corrected.offsets);
        b
    } else {
        TraceBody::of(t)
    };
    json!({ "spanCount": count, "whole": body, "criticalPath": critical })
}

/// The outline's first answer: the summary, the critical path's first steps, the rows
/// from the roots (the `from`th on).
fn first_body(o: &Outline, budget: usize, from: usize, tree: Tree) -> Value {
    let root = causeway_analysis::main_root(&o.trace);
    json!({
        "traceId": o.trace.trace_id,
        "spanCount": o.trace.spans.len(),
        "summary": o.summary(),
        "clockOffsets": o.offsets,
        "criticalPath": {
            "rootSpanId": root.map(|r| o.trace.spans[r].span_id),
            "durationNs": root.map_or(0, |r| o.trace.spans[r].duration()),
            "sectionCount": o.critical.len(),
            "sections": o.critical.iter().take(PATH_STEPS).map(|s| json!({
                "spanId": s.span_id,
                "start": s.start,
                "end": s.end,
                "service": o.trace.spans[s.span].service,
                "name": o.trace.spans[s.span].name,
            })).collect::<Vec<_>>(),
        },
        "rows": rows_json(o, &o.rows(None, from, budget, tree), tree),
    })
}

fn rows_json(o: &Outline, rows: &[Row], tree: Tree) -> Vec<Value> {
    let t = &o.trace;
    rows.iter()
        .map(|r| match *r {
            Row::Span { index, open } => {
                let below = o.subtrees[index];
                json!({
                    "span": t.spans[index],
                    "depth": o.depth(index, tree),
                    "open": open,
                    "children": o.children(index, tree).len(),
                    "descendants": below.spans - 1,
                    "subtreeEnd": below.end,
                    "subtreeErrors": below.errors,
                })
            }
            Row::More {
                parent,
                from,
                count,
            } => json!({
                "more": count,
                "from": from,
                "parent": parent.map(|p| t.spans[p].span_id),
                "depth": parent.map_or(0, |p| o.depth(p, tree) + 1),
            }),
        })
        .collect()
}
