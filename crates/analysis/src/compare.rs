//! Two traces, or two patterns, side by side: which spans are missing, extra, or slower.
//!
//! Each side becomes a profile: its spans keyed by their path of (service, name, kind)
//! from the root, with spans of one path merged (their count and mean duration). A path on
//! one side only is missing (from B) or extra (in B); a path on both is slower or faster
//! when B's mean duration differs from A's by more than 10% and more than 10 µs.

use std::collections::BTreeMap;

use causeway_model::{SpanId, SpanKind, Trace};
use serde::Serialize;

use crate::patterns::PatternDetail;
use crate::{children_adopted, main_root};

const SEPARATOR: char = '\u{1f}';

#[derive(Debug, Clone)]
struct ProfileNode {
    service: String,
    operation: String,
    kind: SpanKind,
    depth: usize,
    /// Spans per trace.
    count: f64,
    /// Sum of durations per trace, ns.
    total_ns: f64,
    span_ids: Vec<SpanId>,
}

/// One side of a comparison.
#[derive(Debug, Clone)]
pub struct Profile {
    /// What it is (a trace id or a pattern id).
    pub name: String,
    /// End-to-end latency (the main root's duration; a pattern's mean), ns.
    pub latency_ns: u64,
    nodes: BTreeMap<String, ProfileNode>,
}

fn key(parent: &str, service: &str, operation: &str, kind: SpanKind) -> String {
    let mut k = String::with_capacity(parent.len() + service.len() + operation.len() + 12);
    if !parent.is_empty() {
        k.push_str(parent);
        k.push(SEPARATOR);
    }
    k.push_str(service);
    k.push('\u{1e}');
    k.push_str(operation);
    k.push('\u{1e}');
    k.push_str(kind.as_str());
    k
}

impl Profile {
    /// The profile of one trace.
    pub fn of_trace(trace: &Trace) -> Profile {
        let mut nodes: BTreeMap<String, ProfileNode> = BTreeMap::new();
        let Some(root) = main_root(trace) else {
            return Profile {
                name: trace.trace_id.to_string(),
                latency_ns: 0,
                nodes,
            };
        };
        let children = children_adopted(trace);
        let mut stack = vec![(root, String::new(), 0usize)];
        while let Some((i, parent_key, depth)) = stack.pop() {
            let s = &trace.spans[i];
            let k = key(&parent_key, &s.service, &s.name, s.kind);
            let n = nodes.entry(k.clone()).or_insert_with(|| ProfileNode {
                service: s.service.to_string(),
                operation: s.name.clone(),
                kind: s.kind,
                depth,
                count: 0.0,
                total_ns: 0.0,
                span_ids: Vec::new(),
            });
            n.count += 1.0;
            n.total_ns += s.duration() as f64;
            n.span_ids.push(s.span_id);
            for &c in &children[i] {
                stack.push((c, k.clone(), depth + 1));
            }
        }
        Profile {
            name: trace.trace_id.to_string(),
            latency_ns: trace.spans[root].duration(),
            nodes,
        }
    }

    /// The profile of one pattern: per node, its spans per trace and mean duration.
    pub fn of_pattern(p: &PatternDetail) -> Profile {
        let traces = p.summary.count.max(1) as f64;
        let mut keys: Vec<String> = Vec::with_capacity(p.nodes.len());
        let mut depths: Vec<usize> = Vec::with_capacity(p.nodes.len());
        let mut nodes: BTreeMap<String, ProfileNode> = BTreeMap::new();
        for n in &p.nodes {
            let (parent_key, depth) = match n.parent {
                Some(i) => (keys[i].as_str(), depths[i] + 1),
                None => ("", 0),
            };
            let k = key(parent_key, &n.service, &n.operation, n.kind);
            let e = nodes.entry(k.clone()).or_insert_with(|| ProfileNode {
                service: n.service.clone(),
                operation: n.operation.clone(),
                kind: n.kind,
                depth,
                count: 0.0,
                total_ns: 0.0,
                span_ids: Vec::new(),
            });
            e.count += n.instances as f64 / traces;
            e.total_ns += (n.mean_duration_ns as f64) * n.instances as f64 / traces;
            keys.push(k);
            depths.push(depth);
        }
        Profile {
            name: p.summary.id.to_string(),
            latency_ns: p.summary.latency.mean,
            nodes,
        }
    }
}

/// How a path differs from A to B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Change {
    /// Within 10% (or 10 µs).
    Same,
    /// Slower in B.
    Slower,
    /// Faster in B.
    Faster,
    /// In A, not in B.
    Missing,
    /// In B, not in A.
    Extra,
}

/// One side of a row.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Side {
    /// Spans on this path (per trace, for a pattern).
    pub count: f64,
    /// Mean duration, ns.
    pub mean_ns: u64,
    /// The spans (a trace's side only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub span_ids: Vec<SpanId>,
}

/// One path of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    /// Depth below the root.
    pub depth: usize,
    /// Service.
    pub service: String,
    /// Span name.
    pub operation: String,
    /// Span kind.
    pub kind: SpanKind,
    /// What changed.
    pub change: Change,
    /// A's side.
    pub a: Option<Side>,
    /// B's side.
    pub b: Option<Side>,
    /// B's mean less A's, ns; on one side only, that side's mean (less than 0 when only A
    /// has it).
    pub delta_ns: i64,
}

/// Two profiles side by side.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Comparison {
    /// A's name.
    pub a: String,
    /// B's name.
    pub b: String,
    /// A's latency, ns.
    pub latency_a_ns: u64,
    /// B's latency, ns.
    pub latency_b_ns: u64,
    /// Paths in tree order (a parent before its children).
    pub rows: Vec<Row>,
    /// Rows per change.
    pub missing: usize,
    /// Rows only in B.
    pub extra: usize,
    /// Rows slower in B.
    pub slower: usize,
    /// Rows faster in B.
    pub faster: usize,
}

fn side(n: &ProfileNode) -> Side {
    Side {
        count: n.count,
        mean_ns: if n.count > 0.0 {
            (n.total_ns / n.count) as u64
        } else {
            0
        },
        span_ids: n.span_ids.clone(),
    }
}

/// Compares A with B.
pub fn compare(a: &Profile, b: &Profile) -> Comparison {
    let mut keys: Vec<&String> = a.nodes.keys().chain(b.nodes.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut rows = Vec::with_capacity(keys.len());
    for k in keys {
        let (na, nb) = (a.nodes.get(k), b.nodes.get(k));
        let Some(n) = na.or(nb) else { continue };
        let (sa, sb) = (na.map(side), nb.map(side));
        let (change, delta) = match (&sa, &sb) {
            (Some(x), Some(y)) => {
                let delta = y.mean_ns as i64 - x.mean_ns as i64;
                let big = delta.unsigned_abs() > 10_000
                    && delta.unsigned_abs() as f64 > 0.1 * x.mean_ns as f64;
                let change = match (big, delta > 0) {
                    (false, _) => Change::Same,
                    (true, true) => Change::Slower,
                    (true, false) => Change::Faster,
                };
                (change, delta)
            }
            // On one side only: the time it took there, gone from B or added in B.
            (Some(x), None) => (Change::Missing, -(x.mean_ns as i64)),
            (None, Some(y)) => (Change::Extra, y.mean_ns as i64),
            (None, None) => (Change::Same, 0),
        };
        rows.push(Row {
            depth: n.depth,
            service: n.service.clone(),
            operation: n.operation.clone(),
            kind: n.kind,
            change,
            a: sa,
            b: sb,
            delta_ns: delta,
        });
    }
    let count = |c: Change| rows.iter().filter(|r| r.change == c).count();
    Comparison {
        a: a.name.clone(),
        b: b.name.clone(),
        latency_a_ns: a.latency_ns,
        latency_b_ns: b.latency_ns,
        missing: count(Change::Missing),
        extra: count(Change::Extra),
        slower: count(Change::Slower),
        faster: count(Change::Faster),
        rows,
    }
}
