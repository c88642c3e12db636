//! A trace: the spans of one trace id assembled into a tree (a forest when parents are missing).
//!
//! `Trace::assemble` keeps the spans of one trace id, sorts them by (start, span id) unless
//! they are sorted already (spans read from the store are), keeps the first copy of a
//! duplicated span id, links parents by index, breaks any parent cycle at its earliest span,
//! and keeps spans whose parent is missing as extra roots (listed in `orphans`). The result
//! is always a forest, with `roots`, `children` and `parent` by index. `assemble_all` groups
//! spans by trace id first.

use std::collections::HashMap;

use crate::ids::{SpanId, TraceId};
use crate::span::Span;

/// The spans of one trace, assembled into a tree. Spans whose parent is missing (not yet
/// arrived, dropped, or never recorded) are kept as extra roots, never discarded.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    /// The trace id shared by every span.
    pub trace_id: TraceId,
    /// The spans, sorted by start time (ties by span id) so that output is stable.
    pub spans: Vec<Span>,
    /// Indexes into `spans` of the spans without a parent in this trace, by start time.
    pub roots: Vec<usize>,
    /// For each span (by index), the indexes of its children, by start time.
    pub children: Vec<Vec<usize>>,
    /// For each span (by index), the index of its parent in this trace.
    pub parent: Vec<Option<usize>>,
    /// Indexes of roots that name a parent that is not here (orphans).
    pub orphans: Vec<usize>,
    /// Other traces of the same request, linked to this one
    /// ([`crate::parent_links::join_linked`] joins them).
    pub links: Vec<crate::parent_links::TraceLink>,
}

impl Trace {
    /// Assembles spans that share `trace_id`; spans of other traces are ignored.
    /// Parents found after the fact are given to spans recorded without one
    /// ([`crate::parent_links`]), and log records carried for spans are moved onto them
    /// ([`crate::logs`]). Duplicate span
    /// ids keep the first span seen. A parent cycle (corrupt input)
    /// is broken by making its earliest span a root, so the result is always a forest.
    pub fn assemble(trace_id: TraceId, spans: impl IntoIterator<Item = Span>) -> Trace {
        // A Vec passes through whole, and `retain` moves no span while all belong, as
        // they do from the store.
        let mut spans: Vec<Span> = spans.into_iter().collect();
        spans.retain(|s| s.trace_id == trace_id);
        let links = crate::parent_links::take_trace_links(&mut spans);
        crate::parent_links::apply_parent_links(&mut spans);
        crate::logs::place_log_records(&mut spans);
        let order = |a: &Span, b: &Span| a.start.cmp(&b.start).then(a.span_id.cmp(&b.span_id));
        // Spans read from the store arrive in this order; moving large spans is not free.
        if !spans.is_sorted_by(|a, b| order(a, b).is_le()) {
            spans.sort_by(order);
        }
        let mut index: foldhash::HashMap<SpanId, usize> =
            foldhash::HashMap::with_capacity_and_hasher(spans.len(), Default::default());
        let unique = spans
            .iter()
            .enumerate()
            .all(|(i, s)| index.insert(s.span_id, i).is_none());
        if !unique {
            // A span sent twice: keep its first copy.
            let mut seen = foldhash::HashSet::default();
            spans.retain(|s| seen.insert(s.span_id));
            index.clear();
            index.extend(spans.iter().enumerate().map(|(i, s)| (s.span_id, i)));
        }
        let mut parent: Vec<Option<usize>> = spans
            .iter()
            .map(|s| s.parent_id.and_then(|p| index.get(&p).copied()))
            .collect();
        // Break cycles: walk up from every span; a walk that returns to a visited span
        // of the same walk is a cycle.
        let n = spans.len();
        let mut state = vec![0u8; n]; // 0 unvisited, 1 on current walk, 2 done
        let mut path = Vec::new();
        for start in 0..n {
            path.clear();
            let mut cur = Some(start);
            while let Some(i) = cur {
                match state[i] {
                    2 => break,
                    1 => {
                        // cycle: cut it at its earliest member (lowest index = earliest start)
                        let pos = path.iter().position(|&p| p == i).unwrap_or(0);
                        if let Some(&first) = path[pos..].iter().min() {
                            parent[first] = None;
                        }
                        break;
                    }
                    _ => {
                        state[i] = 1;
                        path.push(i);
                        cur = parent[i];
                    }
                }
            }
            for &p in &path {
                state[p] = 2;
            }
        }
        let mut children = vec![Vec::new(); n];
        let mut roots = Vec::new();
        let mut orphans = Vec::new();
        for (i, p) in parent.iter().enumerate() {
            match p {
                Some(p) => children[*p].push(i),
                None => {
                    roots.push(i);
                    if spans[i].parent_id.is_some() {
                        orphans.push(i);
                    }
                }
            }
        }
        Trace {
            trace_id,
            spans,
            roots,
            children,
            parent,
            orphans,
            links,
        }
    }

    /// Groups spans by trace id and assembles each trace, ordered by trace id.
    pub fn assemble_all(spans: impl IntoIterator<Item = Span>) -> Vec<Trace> {
        let mut by_trace: HashMap<TraceId, Vec<Span>> = HashMap::new();
        for s in spans {
            by_trace.entry(s.trace_id).or_default().push(s);
        }
        let mut traces: Vec<Trace> = by_trace
            .into_iter()
            .map(|(id, spans)| Trace::assemble(id, spans))
            .collect();
        traces.sort_by_key(|t| t.trace_id);
        traces
    }

    /// The span with this id.
    pub fn span(&self, id: SpanId) -> Option<&Span> {
        self.spans.iter().find(|s| s.span_id == id)
    }

    /// The index of the span with this id.
    pub fn index_of(&self, id: SpanId) -> Option<usize> {
        self.spans.iter().position(|s| s.span_id == id)
    }

    /// The earliest start and latest end over all spans.
    pub fn bounds(&self) -> (u64, u64) {
        let start = self.spans.iter().map(|s| s.start).min().unwrap_or(0);
        let end = self.spans.iter().map(|s| s.end).max().unwrap_or(0);
        (start, end)
    }

    /// Depth-first order (parents before children, siblings by start), with each depth.
    pub fn depth_first(&self) -> Vec<(usize, usize)> {
        let mut out = Vec::with_capacity(self.spans.len());
        let mut stack: Vec<(usize, usize)> = self.roots.iter().rev().map(|&r| (r, 0)).collect();
        while let Some((i, d)) = stack.pop() {
            out.push((i, d));
            for &c in self.children[i].iter().rev() {
                stack.push((c, d + 1));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sp(span: u64, parent: Option<u64>, start: u64) -> Span {
        Span::new(
            TraceId::new(7).unwrap(),
            SpanId::new(span).unwrap(),
            parent.and_then(SpanId::new),
            format!("s{span}"),
            "svc",
            start,
            start + 10,
        )
    }

    #[test]
    fn builds_a_tree_with_children_in_start_order() {
        let t = Trace::assemble(
            TraceId::new(7).unwrap(),
            vec![sp(3, Some(1), 5), sp(1, None, 0), sp(2, Some(1), 2)],
        );
        assert_eq!(t.roots.len(), 1);
        let root = t.roots[0];
        assert_eq!(t.spans[root].span_id.get(), 1);
        let kids: Vec<u64> = t.children[root]
            .iter()
            .map(|&i| t.spans[i].span_id.get())
            .collect();
        assert_eq!(kids, vec![2, 3]);
        assert!(t.orphans.is_empty());
    }

    #[test]
    fn keeps_orphans_as_extra_roots() {
        let t = Trace::assemble(
            TraceId::new(7).unwrap(),
            vec![sp(1, None, 0), sp(5, Some(4), 3), sp(6, Some(5), 4)],
        );
        assert_eq!(t.roots.len(), 2);
        assert_eq!(t.orphans.len(), 1);
        assert_eq!(t.spans[t.orphans[0]].span_id.get(), 5);
        assert_eq!(t.depth_first().len(), 3);
    }

    #[test]
    fn breaks_parent_cycles_instead_of_losing_spans() {
        let t = Trace::assemble(
            TraceId::new(7).unwrap(),
            vec![sp(1, Some(2), 0), sp(2, Some(1), 1)],
        );
        assert_eq!(t.roots.len(), 1);
        assert_eq!(t.depth_first().len(), 2);
    }

    #[test]
    fn keeps_the_first_copy_of_a_span_sent_twice() {
        let mut late = sp(2, Some(1), 2);
        late.name = "resent".into();
        for (spans, kept) in [
            // In order, as the store gives them, and shuffled, as a client may.
            (
                vec![
                    sp(1, None, 0),
                    sp(2, Some(1), 2),
                    late.clone(),
                    sp(3, Some(2), 3),
                ],
                "s2",
            ),
            (
                vec![
                    sp(3, Some(2), 3),
                    late.clone(),
                    sp(1, None, 0),
                    sp(2, Some(1), 2),
                ],
                "resent",
            ),
        ] {
            let t = Trace::assemble(TraceId::new(7).unwrap(), spans);
            let ids: Vec<u64> = t.spans.iter().map(|s| s.span_id.get()).collect();
            assert_eq!(ids, vec![1, 2, 3]);
            let two = t.spans.iter().find(|s| s.span_id.get() == 2).unwrap();
            assert_eq!(two.name, kept);
            // Parents point at the kept copies.
            assert_eq!(t.depth_first().len(), 3);
            assert_eq!(t.children[t.roots[0]].len(), 1);
        }
    }

    #[test]
    fn groups_spans_by_trace() {
        let mut other = sp(9, None, 0);
        other.trace_id = TraceId::new(8).unwrap();
        let traces = Trace::assemble_all(vec![sp(1, None, 0), other, sp(2, Some(1), 1)]);
        assert_eq!(traces.len(), 2);
        assert_eq!(traces[0].spans.len(), 2);
        assert_eq!(traces[1].spans.len(), 1);
    }
}
