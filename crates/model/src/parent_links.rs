//! Parents found after the fact: a span recorded as a root (its caller was not
//! instrumented, a proxy say) whose caller another source saw. Stores append and never
//! rewrite, so the parent travels as a *link*: a span named [`PARENT_LINK`] with the id of
//! the span it is for, and that span's new parent as its parent. [`Trace::assemble`] gives
//! the parent to a span that has none and drops the link; a span's recorded parent is
//! never replaced. A link whose span is not in the trace is dropped.
//!
//! [`Trace::assemble`]: crate::Trace::assemble

use crate::span::Span;
use crate::SpanId;

/// The name of a span that gives another span its parent.
pub const PARENT_LINK: &str = "causeway.parent_link";

impl Span {
    /// Whether this span only gives a parent to another (see [the module](crate::parent_links)).
    pub fn is_parent_link(&self) -> bool {
        self.name == PARENT_LINK
    }

    /// Whether this span only carries something for another (log records, a parent found
    /// later): no work of its own, no root of a trace.
    pub fn is_carrier(&self) -> bool {
        self.is_log_carrier() || self.is_parent_link()
    }
}

/// The trace roots `spans` add to a store: its roots, less those its parent links give a
/// parent (each link's span was stored as a root before, or is one in `spans`).
pub fn roots_added(spans: &[Span]) -> i64 {
    spans.iter().fold(0, |n, s| {
        if s.is_parent_link() {
            n - 1
        } else if s.parent_id.is_none() && !s.is_carrier() {
            n + 1
        } else {
            n
        }
    })
}

/// A link giving span `child` of `template`'s trace the parent `parent`, with `template`'s
/// source and times.
pub fn parent_link(template: &Span, child: SpanId, parent: SpanId) -> Span {
    let mut link = Span::new(
        template.trace_id,
        child,
        Some(parent),
        PARENT_LINK,
        &template.service,
        template.start,
        template.end,
    );
    link.source = template.source;
    link
}

/// Applies the links among `spans` and removes them.
pub(crate) fn apply_parent_links(spans: &mut Vec<Span>) {
    if !spans.iter().any(Span::is_parent_link) {
        return;
    }
    let (links, mut rest): (Vec<Span>, Vec<Span>) = spans.drain(..).partition(Span::is_parent_link);
    // Carriers of a span's log records share its id: the link is for the span.
    let by_id: foldhash::HashMap<SpanId, usize> = rest
        .iter()
        .enumerate()
        .filter(|(_, s)| !s.is_log_carrier())
        .map(|(i, s)| (s.span_id, i))
        .collect();
    for link in links {
        if let Some(&i) = by_id.get(&link.span_id) {
            let span = &mut rest[i];
            if span.parent_id.is_none() && link.parent_id != Some(span.span_id) {
                span.parent_id = link.parent_id;
            }
        }
    }
    *spans = rest;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Source, Trace, TraceId};

    fn span(id: u64, parent: Option<u64>, service: &str) -> Span {
        Span::new(
            TraceId::new(5).unwrap(),
            SpanId::new(id).unwrap(),
            parent.and_then(SpanId::new),
            format!("op{id}"),
            service,
            id * 10,
            id * 10 + 100,
        )
    }

    #[test]
    fn a_root_takes_its_found_parent_and_a_recorded_parent_stays() {
        let mut proxy = span(1, None, "nginx");
        proxy.source = Source::Inferred { confidence: 0.9 };
        let id = |n| SpanId::new(n).unwrap();
        let spans = vec![
            proxy.clone(),
            span(2, None, "api"),
            span(3, Some(2), "db"),
            parent_link(&proxy, id(2), id(1)),
            // Never over a recorded parent, and never for a span not here.
            parent_link(&proxy, id(3), id(1)),
            parent_link(&proxy, id(9), id(1)),
        ];
        // The root's log records, on a carrier that has its id, arrived after it.
        let mut carrier = span(2, None, "api");
        carrier.name = crate::logs::LOG_RECORDS.into();
        carrier.source = Source::Logs;
        carrier
            .events
            .push(crate::logs::log_event(5, "a line".into(), None, vec![]));
        let spans = [spans, vec![carrier]].concat();
        let t = Trace::assemble(TraceId::new(5).unwrap(), spans);
        assert_eq!(t.spans.len(), 3);
        assert_eq!(t.span(id(2)).unwrap().events.len(), 1);
        assert_eq!(t.span(id(2)).unwrap().parent_id, Some(id(1)));
        assert_eq!(t.span(id(3)).unwrap().parent_id, Some(id(2)));
        assert_eq!(t.roots.len(), 1);
        assert_eq!(t.spans[t.roots[0]].span_id, id(1));
    }

    #[test]
    fn a_batch_that_gives_a_stored_root_its_parent_adds_no_trace() {
        let id = |n| SpanId::new(n).unwrap();
        let proxy = span(1, None, "nginx");
        // The instrumented trace, stored first: one root.
        assert_eq!(
            roots_added(&[span(2, None, "api"), span(3, Some(2), "db")]),
            1
        );
        // The proxy's part joined to it later: its root, and the link that makes the
        // stored root its child.
        assert_eq!(
            roots_added(&[proxy.clone(), parent_link(&proxy, id(2), id(1))]),
            0
        );
    }
}
