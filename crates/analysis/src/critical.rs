//! The critical path of a trace: the chain of sections, each a stretch of time one span was
//! what the request waited on, from the main root's start to its end. It is the path
//! Jaeger's UI and Uber's CRISP draw, and passes Jaeger's published test cases.
//!
//! Walking back from the root's end: the child that finished last at or before the cursor
//! is what the parent waited for, so the time after it is the parent's own, the child's
//! section is found the same way inside it, and the cursor moves to the child's start. A
//! child still running at the cursor was not waited for there (the parent went on while
//! it ran), so it is not on the path, nor are siblings it overtook. Children that do not
//! block their parent are left out with everything below them: a CONSUMER under a
//! PRODUCER, and a span that only FOLLOWS_FROM its parent. Children are clipped to their
//! parent, so a child that overflows it (skew, or async work that outlives it) only counts
//! inside it, and one wholly outside it is dropped. Orphans are adopted by the main root.
//!
//! The sections never overlap and add up to the main root's duration exactly.
//!
//! One deliberate difference from Jaeger's UI: it takes only children that ended strictly
//! before the cursor, so of two back-to-back calls (A ends as B starts) it skips A; here A
//! is on the path.

use causeway_model::{Span, SpanId, SpanKind, Trace};
use serde::Serialize;

use crate::{children_adopted, main_root};

/// A stretch of the critical path: span `span` (an index into the trace's spans) was what
/// the request waited on from `start` to `end` (Unix ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Section {
    /// Index into `Trace::spans`.
    #[serde(skip)]
    pub span: usize,
    /// The span's id.
    pub span_id: SpanId,
    /// Start, Unix ns.
    pub start: u64,
    /// End, Unix ns.
    pub end: u64,
}

/// The critical path, sorted by start; adjacent sections of the same span are joined.
/// Empty for an empty trace or a root without duration.
pub fn critical_path(trace: &Trace) -> Vec<Section> {
    let Some(root) = main_root(trace) else {
        return Vec::new();
    };
    let children = children_adopted(trace);
    let mut out = Vec::new();
    let r = &trace.spans[root];
    // An explicit stack: a 10K-deep chain must not exhaust the thread's stack.
    let mut stack = vec![(root, r.start, r.end)];
    let mut kids: Vec<(u64, u64, usize)> = Vec::new();
    while let Some((i, lo, hi)) = stack.pop() {
        kids.clear();
        let parent = &trace.spans[i];
        for &c in &children[i] {
            let s = &trace.spans[c];
            if !blocks(parent, s) {
                continue;
            }
            let (cs, ce) = (s.start.max(lo), s.end.min(hi));
            if cs < ce {
                kids.push((cs, ce, c));
            }
        }
        // Latest end first; for equal ends the earliest start, then the lower index, so
        // ties resolve the same way every time.
        kids.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)).then(a.2.cmp(&b.2)));
        let mut cursor = hi;
        let mut k = 0;
        while cursor > lo {
            // Children still running at the cursor were not waited for here.
            while k < kids.len() && kids[k].1 > cursor {
                k += 1;
            }
            // The child that finished last at or before the cursor.
            let chosen = kids.get(k).copied().inspect(|_| k += 1);
            match chosen {
                Some((cs, ce, c)) => {
                    if ce < cursor {
                        out.push(Section {
                            span: i,
                            span_id: trace.spans[i].span_id,
                            start: ce,
                            end: cursor,
                        });
                    }
                    stack.push((c, cs, ce));
                    cursor = cs;
                }
                None => {
                    out.push(Section {
                        span: i,
                        span_id: trace.spans[i].span_id,
                        start: lo,
                        end: cursor,
                    });
                    cursor = lo;
                }
            }
        }
    }
    out.sort_unstable_by_key(|s| (s.start, s.end));
    let mut joined: Vec<Section> = Vec::with_capacity(out.len());
    for s in out {
        match joined.last_mut() {
            Some(last) if last.span == s.span && last.end == s.start => last.end = s.end,
            _ => joined.push(s),
        }
    }
    joined
}

/// Whether `parent` waited for `child`: not for a message it produced (the consumer runs on
/// its own time), nor for work that only follows from it.
fn blocks(parent: &Span, child: &Span) -> bool {
    let consumes = parent.kind == SpanKind::Producer && child.kind == SpanKind::Consumer;
    !consumes && !child.follows_from_parent()
}

/// Each span's self time: its duration less the time covered by at least one child
/// (clipped to the span; orphans count as children of the main root).
pub fn self_times(trace: &Trace) -> Vec<u64> {
    let children = children_adopted(trace);
    let mut intervals: Vec<(u64, u64)> = Vec::new();
    trace
        .spans
        .iter()
        .enumerate()
        .map(|(i, s)| {
            intervals.clear();
            intervals.extend(children[i].iter().filter_map(|&c| {
                let k = &trace.spans[c];
                let (a, b) = (k.start.max(s.start), k.end.min(s.end));
                (a < b).then_some((a, b))
            }));
            intervals.sort_unstable();
            let mut covered = 0;
            let mut reach = s.start;
            for &(a, b) in intervals.iter() {
                if b > reach {
                    covered += b - a.max(reach);
                    reach = b;
                }
            }
            s.duration().saturating_sub(covered)
        })
        .collect()
}
