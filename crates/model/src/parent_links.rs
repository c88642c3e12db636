//! Parents found after the fact: a span recorded as a root (its caller was not
//! instrumented, a proxy say) whose caller another source saw. Stores append and never
//! rewrite, so the parent travels as a *link*: a span named [`PARENT_LINK`] with the id of
//! the span it is for, and that span's new parent as its parent. [`Trace::assemble`] gives
//! the parent to a span that has none, or whose recorded parent is not in the trace (an
//! orphan: its parent's spans were lost, [`ORPHAN`] on the link), and drops the link; a
//! recorded parent that is there is never replaced. A link whose span is not in the trace
//! is dropped.
//!
//! A request whose context a process in its middle did not pass on (a program nobody
//! instrumented, calling an instrumented service) is recorded as two traces. Where
//! another source saw that process link them, a *trace link* ([`TRACE_LINK`]) is stored in
//! both: a span with the id of the lower trace's first span, its parent in the upper
//! trace, and the other trace's id ([`LINKED_TRACE`]). [`Trace::assemble`] takes the links
//! out of the spans into [`Trace::links`]; a reader joins the traces
//! ([`join_linked`]).
//!
//! [`Trace::assemble`]: crate::Trace::assemble
//! [`Trace::links`]: crate::Trace::links

use crate::span::Span;
use crate::{SpanId, TraceId, Value};

/// The name of a span that gives another span its parent.
pub const PARENT_LINK: &str = "causeway.parent_link";

/// A parent link's attribute (`true`) when its span was recorded with a parent that was
/// never stored: no root of the trace, so the link takes none away.
pub const ORPHAN: &str = "causeway.parent_link.orphan";

/// The name of a span that links its trace to another (see [the module](crate::parent_links)).
pub const TRACE_LINK: &str = "causeway.trace_link";

/// A trace link's attribute: the other trace's id (32 hex digits).
pub const LINKED_TRACE: &str = "causeway.linked_trace";

impl Span {
    /// Whether this span only gives a parent to another (see [the module](crate::parent_links)).
    pub fn is_parent_link(&self) -> bool {
        self.name == PARENT_LINK
    }

    /// Whether this span only links its trace to another.
    pub fn is_trace_link(&self) -> bool {
        self.name == TRACE_LINK
    }

    /// Whether this span only carries something for another (log records, a parent found
    /// later, a link to another trace): no work of its own, no root of a trace.
    pub fn is_carrier(&self) -> bool {
        self.is_log_carrier() || self.is_parent_link() || self.is_trace_link()
    }
}

/// One request's two traces, linked: `child` (the lower trace's first span) has `parent`
/// (in the upper trace) as its parent.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TraceLink {
    /// The other trace; `None` where the spans were read without their attributes
    /// (an analysis's fields): read the trace whole to learn it.
    pub other: Option<TraceId>,
    /// The lower trace's first span.
    pub child: SpanId,
    /// Its parent, in the upper trace.
    pub parent: SpanId,
}

/// The link spans, for the traces `upper` and `lower`, that make `child` (in `lower`) a
/// child of `parent` (in `upper`); `template` gives their service, source and times.
pub fn trace_link(
    template: &Span,
    (upper, parent): (TraceId, SpanId),
    (lower, child): (TraceId, SpanId),
) -> [Span; 2] {
    let link = |trace: TraceId, other: TraceId| {
        let mut s = Span::new(
            trace,
            child,
            Some(parent),
            TRACE_LINK,
            &template.service,
            template.start,
            template.end,
        );
        s.source = template.source;
        s.attributes
            .push(crate::KeyValue::new(LINKED_TRACE, other.to_string()));
        s
    };
    [link(upper, lower), link(lower, upper)]
}

/// Takes the trace links out of `spans`.
pub(crate) fn take_trace_links(spans: &mut Vec<Span>) -> Vec<TraceLink> {
    if !spans.iter().any(Span::is_trace_link) {
        return Vec::new();
    }
    let mut links = Vec::new();
    spans.retain(|s| {
        if !s.is_trace_link() {
            return true;
        }
        // Absent, the attributes were not read; present and garbled, the link is dropped.
        let other = match s.attribute(LINKED_TRACE) {
            None => Some(None),
            Some(Value::Str(hex)) => TraceId::parse(hex).ok().map(Some),
            Some(_) => None,
        };
        if let (Some(other), Some(parent)) = (other, s.parent_id) {
            let link = TraceLink {
                other,
                child: s.span_id,
                parent,
            };
            if !links.contains(&link) {
                links.push(link);
            }
        }
        false
    });
    links
}

/// The spans of `traces` (one request's traces, linked) as one trace's, under the id of
/// `top`: each link's lower trace's first span is given its parent in the upper one.
pub fn join_linked(top: TraceId, traces: Vec<crate::Trace>) -> crate::Trace {
    let mut spans = Vec::new();
    let mut given = foldhash::HashSet::default();
    for t in traces {
        for link in &t.links {
            if given.insert((link.child, link.parent)) {
                let mut l = Span::new(top, link.child, Some(link.parent), PARENT_LINK, "", 0, 0);
                l.source = crate::Source::Inferred { confidence: 1.0 };
                spans.push(l);
            }
        }
        spans.extend(t.spans.into_iter().map(|mut s| {
            s.trace_id = top;
            s
        }));
    }
    crate::Trace::assemble(top, spans)
}

impl crate::Trace {
    /// Whether this trace continues one above it: a link's lower span is its own. The
    /// trace above stands for the request.
    pub fn continues_another(&self) -> bool {
        self.links
            .iter()
            .any(|l| self.spans.iter().any(|s| s.span_id == l.child))
    }
}

/// `first` joined with the traces linked to it, followed from trace to trace up to `most`
/// traces, under the id of the upper one (none of its links' lower spans is its own);
/// `fetch` reads a trace whole by id. A trace read without its links' other ids is read
/// again whole.
pub fn read_linked<E>(
    first: crate::Trace,
    most: usize,
    mut fetch: impl FnMut(TraceId) -> Result<Option<crate::Trace>, E>,
) -> Result<crate::Trace, E> {
    if first.links.is_empty() {
        return Ok(first);
    }
    let first = if first.links.iter().any(|l| l.other.is_none()) {
        match fetch(first.trace_id)? {
            Some(whole) => whole,
            None => return Ok(first),
        }
    } else {
        first
    };
    let mut seen = vec![first.trace_id];
    let mut traces = vec![first];
    let mut next = 0;
    while next < traces.len() && traces.len() < most {
        let others: Vec<TraceId> = traces[next].links.iter().filter_map(|l| l.other).collect();
        next += 1;
        for other in others {
            if seen.contains(&other) || traces.len() >= most {
                continue;
            }
            seen.push(other);
            if let Some(t) = fetch(other)? {
                traces.push(t);
            }
        }
    }
    if traces.len() == 1 {
        return Ok(traces.remove(0));
    }
    let top = traces
        .iter()
        .find(|t| !t.continues_another())
        .map_or(seen[0], |t| t.trace_id);
    Ok(join_linked(top, traces))
}

/// The trace roots `spans` add to a store: its roots, less those its parent links give a
/// parent (each link's span was stored as a root before, or is one in `spans`).
pub fn roots_added(spans: &[Span]) -> i64 {
    spans.iter().fold(0, |n, s| {
        if s.is_parent_link() && s.attribute(ORPHAN).is_none() {
            n - 1
        } else if s.parent_id.is_none() && !s.is_carrier() {
            n + 1
        } else {
            n
        }
    })
}

/// [`parent_link`] for a span recorded with a parent that was never stored.
pub fn orphan_link(template: &Span, child: SpanId, parent: SpanId) -> Span {
    let mut link = parent_link(template, child, parent);
    link.attributes.push(crate::KeyValue::new(ORPHAN, true));
    link
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
            // No parent recorded, or one that is not here: the link's stands.
            let orphan = rest[i].parent_id.is_none_or(|p| !by_id.contains_key(&p));
            let span = &mut rest[i];
            if orphan && link.parent_id != Some(span.span_id) {
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
            // A recorded parent that was never stored is no parent: the link's stands.
            span(4, Some(8), "cache"),
            orphan_link(&proxy, id(4), id(3)),
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
        assert_eq!(t.spans.len(), 4);
        assert_eq!(t.span(id(4)).unwrap().parent_id, Some(id(3)));
        assert!(t.orphans.is_empty());
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
        // An orphan was no root: its link takes none away.
        assert_eq!(
            roots_added(&[proxy.clone(), orphan_link(&proxy, id(3), id(1))]),
            1
        );
    }

    #[test]
    fn trace_links_leave_the_spans_and_a_garbled_one_is_dropped() {
        let id = |n| SpanId::new(n).unwrap();
        let upper = TraceId::new(5).unwrap();
        let lower = TraceId::new(6).unwrap();
        let call = span(2, None, "mid");
        let [in_upper, _in_lower] = trace_link(&call, (upper, id(1)), (lower, id(2)));
        let mut garbled = in_upper.clone();
        garbled.span_id = id(3);
        garbled.attributes = vec![crate::KeyValue::new(LINKED_TRACE, "not a trace id")];
        let t = crate::Trace::assemble(upper, vec![span(1, None, "web"), in_upper, garbled]);
        assert_eq!(t.spans.len(), 1);
        assert_eq!(
            t.links,
            [TraceLink {
                other: Some(lower),
                child: id(2),
                parent: id(1)
            }]
        );
    }

    #[test]
    fn either_linked_trace_reads_the_request_under_the_upper_id() {
        let id = |n| SpanId::new(n).unwrap();
        let (upper, lower) = (TraceId::new(5).unwrap(), TraceId::new(6).unwrap());
        let mut mid = span(2, Some(1), "mid");
        mid.source = Source::Inferred { confidence: 0.8 };
        let [in_upper, in_lower] = trace_link(&mid, (upper, id(2)), (lower, id(3)));
        let mut store_root = span(3, None, "store");
        store_root.trace_id = lower;
        let traces = [
            Trace::assemble(upper, vec![span(1, None, "web"), mid, in_upper]),
            Trace::assemble(lower, vec![store_root, in_lower.clone()]),
        ];
        assert!(!traces[0].continues_another());
        assert!(traces[1].continues_another());
        let fetch = |t: TraceId| -> Result<Option<Trace>, ()> {
            Ok(traces.iter().find(|x| x.trace_id == t).cloned())
        };
        for first in &traces {
            let joined = read_linked(first.clone(), 16, fetch).unwrap();
            assert_eq!(joined.trace_id, upper);
            assert_eq!(joined.spans.len(), 3);
            assert_eq!(joined.roots.len(), 1);
            assert_eq!(joined.span(id(3)).unwrap().parent_id, Some(id(2)));
        }
        // Read without attributes (an analysis's fields), the lower trace still knows it
        // continues another, and is read again whole to learn which.
        let mut bare = in_lower;
        bare.attributes.clear();
        let mut store_root = span(3, None, "store");
        store_root.trace_id = lower;
        let partial = Trace::assemble(lower, vec![store_root, bare]);
        assert_eq!(partial.links[0].other, None);
        assert!(partial.continues_another());
        assert_eq!(read_linked(partial, 16, fetch).unwrap().trace_id, upper);
        // At most `most` traces are read.
        assert_eq!(
            read_linked(traces[1].clone(), 1, fetch).unwrap().trace_id,
            lower
        );
    }
}
