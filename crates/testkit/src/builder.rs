//! Spans and traces built by hand, with only the fields a test varies.

use causeway_model::{Direction, Event, Message, Span, SpanId, SpanKind, Trace, TraceId};

/// A span of `service` named `name`, from `start` to `end` (ns).
///
/// # Panics
/// On a zero trace or span id: a test's mistake.
pub fn span(
    trace: u128,
    id: u64,
    parent: Option<u64>,
    name: &str,
    service: &str,
    start: u64,
    end: u64,
) -> Span {
    Span::new(
        TraceId::new(trace).expect("a nonzero trace id"),
        SpanId::new(id).expect("a nonzero span id"),
        parent.and_then(SpanId::new),
        name,
        service,
        start,
        end,
    )
}

/// A root span of service `svc`, a microsecond long, that ended a second ago: inside any
/// server's window for fresh spans.
pub fn recent_span(trace: u128, id: u64, name: &str) -> Span {
    let start = crate::now_ns() - 1_000_000_000;
    span(trace, id, None, name, "svc", start, start + 1_000)
}

/// The spans of one trace, built one call at a time; each new span gets the next id.
#[derive(Debug)]
pub struct TraceBuilder {
    trace: TraceId,
    spans: Vec<Span>,
    next: u64,
}

impl TraceBuilder {
    /// A trace with id `trace` whose spans are numbered from 1.
    ///
    /// # Panics
    /// On a zero trace id.
    pub fn new(trace: u128) -> TraceBuilder {
        TraceBuilder {
            trace: TraceId::new(trace).expect("a nonzero trace id"),
            spans: Vec::new(),
            next: 0,
        }
    }

    /// Spans numbered from `first` instead (traces built apart, stored together, keep
    /// distinct span ids).
    pub fn ids_from(mut self, first: u64) -> TraceBuilder {
        self.next = first.saturating_sub(1);
        self
    }

    /// The trace's id.
    pub fn id(&self) -> TraceId {
        self.trace
    }

    /// A span of `service` on host `host`, of `kind`, named `name`.
    #[allow(clippy::too_many_arguments)]
    pub fn span(
        &mut self,
        parent: Option<SpanId>,
        service: &str,
        host: &str,
        kind: SpanKind,
        name: &str,
        start: u64,
        end: u64,
    ) -> SpanId {
        self.next += 1;
        let id = SpanId::new(self.next).expect("span ids from 1");
        let mut s = Span::new(self.trace, id, parent, name, service, start, end);
        s.kind = kind;
        s.host = host.into();
        self.spans.push(s);
        id
    }

    /// A server span with no parent: the request's entry into `service` on `host`.
    pub fn root(&mut self, service: &str, host: &str, name: &str, start: u64, end: u64) -> SpanId {
        self.span(None, service, host, SpanKind::Server, name, start, end)
    }

    /// A span on one thread of host `host` (service `host`, pid 1, execution unit 1):
    /// a task in Pip's words, each host one thread.
    pub fn task(
        &mut self,
        parent: Option<SpanId>,
        host: &str,
        name: &str,
        start: u64,
        end: u64,
    ) -> SpanId {
        let id = self.span(parent, host, host, SpanKind::Internal, name, start, end);
        let s = self.get(id);
        s.pid = 1;
        s.execution_unit = 1;
        id
    }

    /// A client span on `from` (service, host) and its server span on `to`, the server
    /// inside the client by a tenth of its time (at most half a millisecond) at each end,
    /// shifted by `skew` (the server's clock ahead). Returns the server span.
    #[allow(clippy::too_many_arguments)]
    pub fn rpc(
        &mut self,
        parent: SpanId,
        from: (&str, &str),
        to: (&str, &str),
        name: &str,
        start: u64,
        end: u64,
        skew: u64,
    ) -> SpanId {
        let client = self.span(
            Some(parent),
            from.0,
            from.1,
            SpanKind::Client,
            name,
            start,
            end,
        );
        let lag = ((end - start) / 10).min(500_000);
        self.span(
            Some(client),
            to.0,
            to.1,
            SpanKind::Server,
            name,
            start + lag + skew,
            end - lag + skew,
        )
    }

    /// The span `id`.
    ///
    /// # Panics
    /// When this trace has no such span.
    pub fn get(&mut self, id: SpanId) -> &mut Span {
        self.spans
            .iter_mut()
            .find(|s| s.span_id == id)
            .expect("a span of this trace")
    }

    /// The span added last.
    ///
    /// # Panics
    /// When there is none yet.
    pub fn last(&mut self) -> &mut Span {
        self.spans.last_mut().expect("a span added")
    }

    /// An event (Pip's notice) named `text` on span `id`.
    pub fn notice(&mut self, id: SpanId, text: &str, time: u64) {
        self.get(id).events.push(Event {
            time,
            name: text.into(),
            attributes: vec![],
        });
    }

    /// A Pip message end on span `id`: sent or received, message `message`, `size` bytes.
    pub fn message(
        &mut self,
        id: SpanId,
        direction: Direction,
        message: u64,
        time: u64,
        size: u64,
    ) {
        self.get(id).messages.push(Message {
            direction,
            id: message,
            time,
            peer: None,
            size: Some(size),
        });
    }

    /// The spans, in the order added.
    pub fn spans(self) -> Vec<Span> {
        self.spans
    }

    /// The spans assembled into a trace.
    pub fn trace(self) -> Trace {
        Trace::assemble(self.trace, self.spans)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_built_trace_has_its_spans_numbered_with_their_parents() {
        let mut b = TraceBuilder::new(7).ids_from(100);
        let root = b.task(None, "web", "GET /", 0, 10_000_000);
        let server = b.rpc(
            root,
            ("web", "web-1"),
            ("db", "db-1"),
            "query",
            1_000,
            9_000,
            0,
        );
        b.notice(server, "rows read", 5_000);
        b.message(root, Direction::Send, 3, 1_000, 64);
        let trace = b.trace();
        let ids: Vec<(u64, Option<u64>)> = trace
            .spans
            .iter()
            .map(|s| (s.span_id.get(), s.parent_id.map(SpanId::get)))
            .collect();
        assert_eq!(ids, vec![(100, None), (101, Some(100)), (102, Some(101))]);
        let s = &trace.spans[2];
        assert_eq!((s.kind, s.start, s.end), (SpanKind::Server, 1_800, 8_200));
        assert_eq!(s.events[0].name, "rows read");
        assert_eq!((trace.spans[0].pid, trace.spans[0].execution_unit), (1, 1));
        assert_eq!(trace.spans[0].messages[0].size, Some(64));
    }

    #[test]
    fn a_recent_span_ended_about_a_second_ago() {
        let s = recent_span(1, 2, "op");
        let now = crate::now_ns();
        assert!(
            s.end < now && now - s.end < 60_000_000_000,
            "{} vs {now}",
            s.end
        );
        assert_eq!(s.end - s.start, 1_000);
    }
}
