//! Requests stitched from logs without ids joined to the traces of the same requests, so
//! that a request's lines show on the spans that wrote them, as lines that print their
//! trace id do (`crate::context`).
//!
//! A stitched request has a segment per node (or thread): that node's lines of it. Each
//! line belongs to a span of the same service (the log file's name) whose interval holds
//! its time, give or take [`SLACK_NS`] for two clocks of one host; such spans are the
//! requests running on that node then. A node's lines of one request may come from several
//! of its spans (a storage node written and then read), and stitching may have put two
//! requests' lines in one, so lines are placed one at a time. The values a line prints (a
//! user, an order, a block: words with a digit) are looked for in the attribute values of
//! each candidate's trace (a URL's query, a key read: the spans that used a value hold
//! it, not always the one that logged it), then those its segment prints; the trace
//! sharing the most wins, when no other shares as many. A tie is settled by the trace most
//! of the request's lines went to, else the line is not placed. In the trace, of its spans
//! holding the line, the one that takes it: one holding it without the slack, then one
//! its `tracing` scope fits (the span it names; for a line with none, in a log that names
//! scopes, none of the named ones), then one that is not a client span (code logs; an
//! outgoing call waits, though it carries the values the code prints), then the one
//! whose call (its attributes and its caller's) shares most of the line's values, then
//! the one with a start or end nearest the line. Each
//! placed line becomes a log record of its span saying how sure the placement is
//! ([`LOG_CONFIDENCE`]: `10^shared` of the chosen trace over the sum across the
//! candidates, `shared` counting the line's and its segment's values).
//!
//! The lines of a joined request that no span of their node held (a node with no
//! instrumentation) stay a span of their own per segment (source logs), moved into the
//! request's trace under the innermost span holding them, with [`PARENT_CONFIDENCE`]
//! that of the request's placement. Lines not placed otherwise stay in their stitched
//! request, a trace of its own. Spans from logs and carriers are never anchors; inferred
//! spans are (a proxy's access log joins its inferred part).

use std::collections::hash_map::Entry;

use causeway_model::attributes::{LOG_CONFIDENCE, LOG_FILE, PARENT_CONFIDENCE};
use causeway_model::logs::{log_event, LOG_RECORDS};
use causeway_model::{Event, KeyValue, Source, Span, SpanId, SpanKind, TraceId, Value};
use foldhash::{HashMap, HashSet};

/// How far (ns) a line may fall outside the interval of the span that wrote it: the log's
/// clock and the tracer's are read at different moments.
pub const SLACK_NS: u64 = 2_000_000;

/// The largest number of shared values weighed (`10^shared` stays finite and exact).
const MAX_SHARED: usize = 12;

/// What joining did, in lines.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct LogJoinReport {
    /// Stitched requests looked at.
    pub requests: usize,
    /// Of those, with lines placed in a trace.
    pub joined: usize,
    /// Lines looked at.
    pub lines: usize,
    /// Of those, placed on a span.
    pub placed: usize,
    /// Lines of joined requests that no span of their node held, kept as spans of their
    /// own in the request's trace.
    pub kept: usize,
    /// Lines held by spans of several traces sharing as many values, that the request's
    /// other lines did not settle.
    pub ambiguous: usize,
}

impl LogJoinReport {
    /// Adds another window's counts.
    pub fn add(&mut self, other: &LogJoinReport) {
        self.requests += other.requests;
        self.joined += other.joined;
        self.lines += other.lines;
        self.placed += other.placed;
        self.kept += other.kept;
        self.ambiguous += other.ambiguous;
    }
}

/// The spans to store, and what was done.
pub struct LogJoined {
    /// Carriers of the placed lines, lines kept in joined traces, and what is left of the
    /// requests as they were.
    pub spans: Vec<Span>,
    /// Counts.
    pub report: LogJoinReport,
}

/// What a line's candidates say.
enum Verdict {
    /// No span of its node holds it.
    Unheld,
    /// This span, this sure.
    Placed(usize, f64),
    /// Spans of these traces share as many values: (trace, span, confidence) each.
    Tied(Vec<(TraceId, usize, f64)>),
}

/// The spans that lines can go to, by service, in start order.
struct Anchors<'a> {
    spans: &'a [Span],
    by_service: HashMap<&'a str, Vec<usize>>,
    by_trace: HashMap<TraceId, Vec<usize>>,
    longest: HashMap<&'a str, u64>,
    values: HashMap<TraceId, HashSet<String>>,
    by_id: HashMap<(TraceId, SpanId), usize>,
    call_values: HashMap<usize, HashSet<String>>,
}

impl<'a> Anchors<'a> {
    fn new(spans: &'a [Span]) -> Anchors<'a> {
        let mut by_service: HashMap<&str, Vec<usize>> = HashMap::default();
        let mut by_trace: HashMap<TraceId, Vec<usize>> = HashMap::default();
        let mut by_id: HashMap<(TraceId, SpanId), usize> = HashMap::default();
        let mut longest: HashMap<&str, u64> = HashMap::default();
        for (i, s) in spans.iter().enumerate() {
            if s.source == Source::Logs || s.is_carrier() {
                continue;
            }
            by_service.entry(&s.service).or_default().push(i);
            by_trace.entry(s.trace_id).or_default().push(i);
            by_id.insert((s.trace_id, s.span_id), i);
            let l = longest.entry(&s.service).or_default();
            *l = (*l).max(s.end.saturating_sub(s.start));
        }
        for list in by_service.values_mut() {
            list.sort_by_key(|&i| spans[i].start);
        }
        Anchors {
            spans,
            by_service,
            by_trace,
            longest,
            values: HashMap::default(),
            by_id,
            call_values: HashMap::default(),
        }
    }

    /// The spans of `service` whose interval holds `[start, end]`.
    fn holding(&self, service: &str, start: u64, end: u64) -> Vec<usize> {
        let (Some(list), Some(&longest)) =
            (self.by_service.get(service), self.longest.get(service))
        else {
            return Vec::new();
        };
        let spans = self.spans;
        let last = list.partition_point(|&i| spans[i].start <= start.saturating_add(SLACK_NS));
        let earliest = start.saturating_sub(longest.saturating_add(SLACK_NS));
        list[..last]
            .iter()
            .rev()
            .take_while(|&&i| spans[i].start >= earliest)
            .copied()
            .filter(|&i| spans[i].end.saturating_add(SLACK_NS) >= end)
            .collect()
    }

    /// The values the attributes of trace `trace`'s spans print: a request's values are
    /// on the spans that used them (a server span has the path, the client span that
    /// called it the query, a child the key it read).
    fn values(&mut self, trace: TraceId) -> &HashSet<String> {
        match self.values.entry(trace) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let mut values = HashSet::default();
                for &i in self.by_trace.get(&trace).map_or(&[][..], Vec::as_slice) {
                    for a in &self.spans[i].attributes {
                        attribute_values(&a.value, &mut values);
                    }
                }
                e.insert(values)
            }
        }
    }

    /// The values of span `i`'s attributes and its parent's: a server span's call, whose
    /// client span has the query, or a child's work.
    fn call_values(&mut self, i: usize) -> &HashSet<String> {
        match self.call_values.entry(i) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let s = &self.spans[i];
                let parent = s
                    .parent_id
                    .and_then(|p| self.by_id.get(&(s.trace_id, p)))
                    .map(|&p| &self.spans[p]);
                let mut values = HashSet::default();
                for a in s
                    .attributes
                    .iter()
                    .chain(parent.into_iter().flat_map(|p| &p.attributes))
                {
                    attribute_values(&a.value, &mut values);
                }
                e.insert(values)
            }
        }
    }

    /// Where a line of `service` at `time` printing `line` goes, its segment printing
    /// `segment`.
    fn verdict(
        &mut self,
        service: &str,
        time: u64,
        line: &HashSet<String>,
        segment: &HashSet<String>,
        scope: Scope<'_>,
    ) -> Verdict {
        // Per trace: of its spans holding the line, one holding it without the slack
        // first (a call that began just after the line is the next one), then one its
        // scope fits, then not a client span (code logs; an outgoing call waits, though
        // its span carries the values the code prints), then the one whose call shares
        // most of the line's values (two lookups in parallel), then the one with a start
        // or end nearest the line, then the innermost.
        type Rank = (bool, bool, bool, usize, std::cmp::Reverse<u64>, u64);
        let mut inner: HashMap<TraceId, (usize, Rank)> = HashMap::default();
        for i in self.holding(service, time, time) {
            let shared = self.call_values(i).intersection(line).count();
            let s = &self.spans[i];
            let nearest_end = time.abs_diff(s.start).min(time.abs_diff(s.end));
            let rank = (
                s.start <= time && time <= s.end,
                scope.fits(&s.name),
                s.kind != SpanKind::Client,
                shared,
                std::cmp::Reverse(nearest_end),
                s.start,
            );
            match inner.entry(s.trace_id) {
                Entry::Occupied(mut e) => {
                    if rank > e.get().1 {
                        e.insert((i, rank));
                    }
                }
                Entry::Vacant(e) => {
                    e.insert((i, rank));
                }
            }
        }
        if inner.is_empty() {
            return Verdict::Unheld;
        }
        // The line's own values first, then its segment's.
        let mut scored: Vec<(TraceId, usize, (usize, usize))> = inner
            .into_iter()
            .map(|(trace, (i, _))| {
                let values = self.values(trace);
                let own = values.intersection(line).count();
                let segment = values.intersection(segment).count();
                (trace, i, (own, segment))
            })
            .collect();
        scored.sort_by_key(|&(t, _, score)| (std::cmp::Reverse(score), t));
        // A line's own values count twice: they are in its segment's too.
        let weight =
            |(own, segment): (usize, usize)| 10f64.powi((own + segment).min(MAX_SHARED) as i32);
        let total: f64 = scored.iter().map(|c| weight(c.2)).sum();
        let best = scored[0].2;
        let top: Vec<_> = scored
            .iter()
            .take_while(|c| c.2 == best)
            .map(|&(t, i, score)| (t, i, weight(score) / total))
            .collect();
        match top.as_slice() {
            [(_, i, p)] => Verdict::Placed(*i, *p),
            _ => Verdict::Tied(top),
        }
    }
}

/// The span a line says it was written in: `tracing`'s fmt output prints the names of the
/// spans it was entered in before its target (`quorum write{block=7}: orders: quorum
/// reached`), and a line of such a log with no scope was written in none of those spans
/// (a span that outlived its work, a write finishing in the background, holds the lines
/// its parent wrote after it).
#[derive(Clone, Copy)]
enum Scope<'a> {
    /// The innermost span named.
    Named(&'a str),
    /// None named, in a log that names these.
    Unnamed(&'a HashSet<String>),
}

impl Scope<'_> {
    fn fits(self, span: &str) -> bool {
        match self {
            Scope::Named(name) => name == span,
            Scope::Unnamed(named) => !named.contains(span),
        }
    }
}

/// The innermost span a line's scope names: the last of the `name{fields}:` it begins
/// with.
fn scope_of(text: &str) -> Option<&str> {
    let mut rest = text;
    let mut last = None;
    loop {
        let Some(open) = rest.find('{') else {
            return last;
        };
        let name = &rest[..open];
        if name.is_empty() || name.contains([':', '}', '"', '\n']) {
            return last;
        }
        // The fields' braces, nested in values, close at depth zero.
        let mut depth = 0usize;
        let mut close = None;
        for (i, c) in rest[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(open + i);
                        break;
                    }
                }
                _ => {}
            }
        }
        let Some(close) = close else {
            return last;
        };
        let Some(after) = rest[close + 1..].strip_prefix(':') else {
            return last;
        };
        last = Some(name.trim());
        rest = after.trim_start();
    }
}

/// The values an attribute's value prints.
fn attribute_values(value: &Value, into: &mut HashSet<String>) {
    match value {
        Value::Str(s) => values_in(s, into),
        other => values_in(&other.to_string(), into),
    }
}

/// The values in `text`: its words that hold a digit, a word running on through `.`, `-`
/// and `_` (so that a block `b-17`, an order `product-311` or an address `10.0.0.7`
/// is one value, and a user 42 another, and the words around them are none).
fn values_in(text: &str, into: &mut HashSet<String>) {
    let joiner = |c: char| matches!(c, '.' | '-' | '_');
    for word in text.split(|c: char| !(c.is_alphanumeric() || joiner(c))) {
        let word = word.trim_matches(joiner);
        if word.bytes().any(|b| b.is_ascii_digit()) {
            into.insert(word.to_string());
        }
    }
}

/// Joins the stitched requests `stitched` (as [`crate::traces`] makes them) to the traces
/// `traces` holds (see [the module](self)).
pub fn join(stitched: Vec<Span>, traces: &[Span]) -> LogJoined {
    let mut anchors = Anchors::new(traces);
    let mut report = LogJoinReport::default();
    let mut requests: Vec<Vec<Span>> = Vec::new();
    let mut index: HashMap<TraceId, usize> = HashMap::default();
    for s in stitched {
        match index.entry(s.trace_id) {
            Entry::Occupied(e) => requests[*e.get()].push(s),
            Entry::Vacant(e) => {
                e.insert(requests.len());
                requests.push(vec![s]);
            }
        }
    }
    // The span names each node's log prints as scopes.
    let mut scopes: HashMap<std::sync::Arc<str>, HashSet<String>> = HashMap::default();
    for s in requests.iter().flatten() {
        for e in &s.events {
            if let Some(name) = scope_of(&e.name) {
                scopes
                    .entry(s.service.clone())
                    .or_default()
                    .insert(name.to_string());
            }
        }
    }
    let mut out = Vec::new();
    for segments in requests {
        join_request(segments, &mut anchors, &scopes, &mut report, &mut out);
    }
    LogJoined { spans: out, report }
}

/// Joins one stitched request's segments, adding what to store to `out`.
fn join_request(
    segments: Vec<Span>,
    anchors: &mut Anchors<'_>,
    scopes: &HashMap<std::sync::Arc<str>, HashSet<String>>,
    report: &mut LogJoinReport,
    out: &mut Vec<Span>,
) {
    let none = HashSet::default();
    report.requests += 1;
    let verdicts: Vec<Vec<Verdict>> = segments
        .iter()
        .map(|seg| {
            let mut printed = HashSet::default();
            for e in &seg.events {
                values_in(&e.name, &mut printed);
            }
            seg.events
                .iter()
                .map(|e| {
                    let mut own = HashSet::default();
                    values_in(&e.name, &mut own);
                    let scope = match scope_of(&e.name) {
                        Some(name) => Scope::Named(name),
                        None => Scope::Unnamed(scopes.get(&seg.service).unwrap_or(&none)),
                    };
                    anchors.verdict(&seg.service, e.time, &own, &printed, scope)
                })
                .collect()
        })
        .collect();
    report.lines += verdicts.iter().map(Vec::len).sum::<usize>();
    // The trace most of the request's placed lines went to settles the ties.
    let mut votes: HashMap<TraceId, usize> = HashMap::default();
    for v in verdicts.iter().flatten() {
        if let Verdict::Placed(i, _) = v {
            *votes.entry(anchors.spans[*i].trace_id).or_default() += 1;
        }
    }
    let request_trace = votes
        .iter()
        .max_by_key(|&(t, n)| (*n, std::cmp::Reverse(*t)))
        .map(|(t, _)| *t);
    if request_trace.is_some() {
        report.joined += 1;
    }
    let request_confidence = request_trace.map_or(0.0, |t| {
        votes.get(&t).copied().unwrap_or(0) as f64 / votes.values().sum::<usize>().max(1) as f64
    });
    // Placed lines by the span they go to; the rest by segment.
    let mut carried: HashMap<usize, Vec<Event>> = HashMap::default();
    let mut left: Vec<Span> = Vec::new();
    for (seg, verdicts) in segments.into_iter().zip(verdicts) {
        let file = seg
            .attributes
            .iter()
            .find(|a| a.key == LOG_FILE)
            .map(|a| a.value.clone());
        let (mut unheld, mut unplaced) = (Vec::new(), Vec::new());
        for (e, v) in seg.events.iter().cloned().zip(verdicts) {
            let placed = match v {
                Verdict::Placed(i, p) => Some((i, p)),
                Verdict::Tied(top) => {
                    let settled = top.iter().find(|c| Some(c.0) == request_trace);
                    if settled.is_none() {
                        report.ambiguous += 1;
                    }
                    settled.map(|&(_, i, p)| (i, p))
                }
                Verdict::Unheld => {
                    unheld.push(e);
                    continue;
                }
            };
            match placed {
                Some((i, p)) => {
                    report.placed += 1;
                    carried
                        .entry(i)
                        .or_default()
                        .push(record(e, file.as_ref(), p));
                }
                None => unplaced.push(e),
            }
        }
        match request_trace {
            Some(trace) if !unheld.is_empty() => {
                report.kept += unheld.len();
                let kept = with_events(&seg, unheld);
                let parent = innermost_in(anchors, trace, &kept);
                out.push(moved(kept, trace, parent, request_confidence));
            }
            _ => unplaced.extend(unheld),
        }
        if !unplaced.is_empty() {
            unplaced.sort_by_key(|e| e.time);
            left.push(with_events(&seg, unplaced));
        }
    }
    let mut carried: Vec<_> = carried.into_iter().collect();
    carried.sort_by_key(|(i, _)| *i);
    for (i, events) in carried {
        out.push(carrier(&anchors.spans[i], events));
    }
    out.extend(rerooted(left));
}

/// `seg` with `events` only, its interval theirs.
fn with_events(seg: &Span, events: Vec<Event>) -> Span {
    let mut s = seg.clone();
    s.start = events.iter().map(|e| e.time).min().unwrap_or(seg.start);
    s.end = events.iter().map(|e| e.time).max().unwrap_or(seg.end);
    s.events = events;
    s
}

/// What is left of a stitched request, its parents among what is left: a span whose
/// parent went elsewhere hangs under the first left.
fn rerooted(mut left: Vec<Span>) -> Vec<Span> {
    let ids: HashSet<SpanId> = left.iter().map(|s| s.span_id).collect();
    let first = left.first().map(|s| s.span_id);
    for s in &mut left {
        if s.parent_id.is_some_and(|p| !ids.contains(&p))
            || (s.parent_id.is_none() && Some(s.span_id) != first)
        {
            s.parent_id = first.filter(|&f| f != s.span_id);
        }
    }
    left
}

/// The innermost span of `trace` whose interval holds `seg`'s.
fn innermost_in(anchors: &Anchors<'_>, trace: TraceId, seg: &Span) -> Option<SpanId> {
    let spans = anchors.spans;
    anchors
        .by_trace
        .get(&trace)?
        .iter()
        .map(|&i| &spans[i])
        .filter(|s| {
            s.start <= seg.start.saturating_add(SLACK_NS)
                && s.end.saturating_add(SLACK_NS) >= seg.end
        })
        .max_by_key(|s| (s.start, std::cmp::Reverse(s.end)))
        .map(|s| s.span_id)
}

/// A stitched line as a log record placed with confidence `p`.
fn record(e: Event, file: Option<&Value>, p: f64) -> Event {
    let mut attributes = Vec::with_capacity(e.attributes.len() + 2);
    if let Some(file) = file {
        attributes.push(KeyValue::new(LOG_FILE, file.clone()));
    }
    attributes.extend(e.attributes);
    attributes.push(KeyValue::new(LOG_CONFIDENCE, round(p)));
    log_event(e.time, e.name, None, attributes)
}

/// The carrier of `events` for `span`.
fn carrier(span: &Span, mut events: Vec<Event>) -> Span {
    events.sort_by_key(|e| e.time);
    let start = events.first().map_or(span.start, |e| e.time);
    let end = events.last().map_or(span.end, |e| e.time);
    let mut c = Span::new(
        span.trace_id,
        span.span_id,
        None,
        LOG_RECORDS,
        &span.service,
        start,
        end,
    );
    c.source = Source::Logs;
    c.host = span.host.clone();
    c.pid = span.pid;
    c.events = events;
    c
}

/// `seg` moved into `trace`, under `parent`, as sure as the request's placement there.
fn moved(mut seg: Span, trace: TraceId, parent: Option<SpanId>, confidence: f64) -> Span {
    seg.trace_id = trace;
    seg.parent_id = parent;
    seg.attributes
        .push(KeyValue::new(PARENT_CONFIDENCE, round(confidence)));
    seg
}

/// A confidence to three decimals, as the UI shows it.
fn round(p: f64) -> f64 {
    (p * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::attributes::{LOG_LINE, LOG_POINT};
    use causeway_model::{Event, SpanId, SpanKind, Trace};

    const MS: u64 = 1_000_000;

    fn span(trace: u128, id: u64, parent: Option<u64>, service: &str, at: (u64, u64)) -> Span {
        let mut s = Span::new(
            TraceId::new(trace).unwrap(),
            SpanId::new(id).unwrap(),
            parent.and_then(SpanId::new),
            format!("op{id}"),
            service,
            at.0 * MS,
            at.1 * MS,
        );
        s.kind = SpanKind::Server;
        s
    }

    fn with_url(mut s: Span, url: &str) -> Span {
        s.attributes.push(KeyValue::new("url.full", url));
        s
    }

    /// A stitched request's segment of `service` with a line per (ms, text).
    fn segment(request: u128, id: u64, service: &str, lines: &[(u64, &str)]) -> Span {
        let mut s = span(
            request,
            id,
            None,
            service,
            (lines[0].0, lines[lines.len() - 1].0),
        );
        s.source = Source::Logs;
        s.attributes
            .push(KeyValue::new(LOG_FILE, format!("{service}.log")));
        s.events = lines
            .iter()
            .enumerate()
            .map(|(n, (at, text))| Event {
                time: at * MS,
                name: text.to_string(),
                attributes: vec![
                    KeyValue::new(LOG_LINE, n as i64 + 1),
                    KeyValue::new(LOG_POINT, "p"),
                ],
            })
            .collect();
        s
    }

    fn events_on(spans: &[Span], trace: u128, span_id: u64) -> Vec<String> {
        let mine: Vec<Span> = spans
            .iter()
            .filter(|s| s.trace_id.get() == trace)
            .cloned()
            .collect();
        let assembled = Trace::assemble(TraceId::new(trace).unwrap(), mine);
        assembled
            .spans
            .iter()
            .find(|s| s.span_id.get() == span_id)
            .map(|s| s.events.iter().map(|e| e.name.clone()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn lines_go_to_the_overlapping_request_whose_values_they_print() {
        // Two requests on catalog at once: user 7's and user 9's.
        let traces = vec![
            with_url(span(1, 10, None, "catalog", (100, 140)), "/products?user=7"),
            with_url(span(2, 20, None, "catalog", (102, 150)), "/products?user=9"),
        ];
        let stitched = vec![segment(
            99,
            1,
            "catalog",
            &[
                (103, "started processing request uri=/products?user=9"),
                (120, "page products chosen user=9"),
                (130, "finished processing request status=200"),
            ],
        )];
        let joined = join(stitched, &traces);
        assert_eq!((joined.report.lines, joined.report.placed), (3, 3));
        let mut all = traces.clone();
        all.extend(joined.spans.iter().cloned());
        assert_eq!(events_on(&all, 2, 20).len(), 3);
        assert!(events_on(&all, 1, 10).is_empty());
        // Nothing left of the stitched trace, and each line says how sure it is: the
        // first shares user 9 itself and through its segment (10^2 against 10^0), the
        // last through its segment only (10^1 against 10^0).
        assert!(joined.spans.iter().all(|s| s.trace_id.get() == 2));
        let confidence = |n: usize| {
            let e = &joined.spans[0].events[n];
            assert!(causeway_model::logs::is_log_event(e));
            e.attributes
                .iter()
                .find(|a| a.key == LOG_CONFIDENCE)
                .map(|a| a.value.clone())
        };
        assert_eq!(confidence(0), Some(Value::F64(0.99)));
        assert_eq!(confidence(2), Some(Value::F64(0.909)));
    }

    #[test]
    fn a_segment_outside_every_span_or_shared_equally_stays_a_trace_of_its_own() {
        let traces = vec![
            span(1, 10, None, "catalog", (100, 140)),
            span(2, 20, None, "catalog", (102, 150)),
        ];
        // No value to tell the two apart.
        let tied = segment(98, 1, "catalog", &[(110, "finished processing request")]);
        // Before either began.
        let early = segment(99, 1, "catalog", &[(50, "started"), (60, "done")]);
        let joined = join(vec![tied.clone(), early.clone()], &traces);
        assert_eq!((joined.report.placed, joined.report.ambiguous), (0, 1));
        assert_eq!(joined.spans, vec![tied, early]);
    }

    #[test]
    fn in_one_trace_the_innermost_span_holding_a_line_takes_it() {
        let traces = vec![
            with_url(span(1, 10, None, "frontend", (100, 200)), "/home?user=3"),
            span(1, 11, Some(10), "frontend", (150, 160)),
        ];
        let one = segment(97, 1, "frontend", &[(155, "page rendered user=3")]);
        let both = segment(
            98,
            1,
            "frontend",
            &[(120, "checkout user=3"), (155, "done")],
        );
        let joined = join(vec![one], &traces);
        assert_eq!(joined.spans[0].span_id.get(), 11);
        let joined = join(vec![both], &traces);
        let on = |id: u64| {
            let c = joined.spans.iter().find(|s| s.span_id.get() == id).unwrap();
            c.events.iter().map(|e| e.name.as_str()).collect::<Vec<_>>()
        };
        assert_eq!((on(10), on(11)), (vec!["checkout user=3"], vec!["done"]));
    }

    #[test]
    fn a_node_without_spans_hangs_under_the_call_running_when_it_logged() {
        // frontend (instrumented) calls an uninstrumented legacy service during 120-140.
        let traces = vec![
            with_url(span(1, 10, None, "frontend", (100, 200)), "/home?user=3"),
            span(1, 11, Some(10), "frontend", (120, 140)),
            with_url(span(2, 20, None, "frontend", (100, 200)), "/home?user=4"),
        ];
        let mut stitched = vec![segment(
            90,
            1,
            "frontend",
            &[(101, "home user=3"), (190, "rendered")],
        )];
        let mut legacy = segment(90, 2, "legacy", &[(125, "lookup user=3"), (135, "hit")]);
        legacy.parent_id = SpanId::new(1);
        stitched.push(legacy);
        let joined = join(stitched, &traces);
        assert_eq!((joined.report.placed, joined.report.kept), (2, 2));
        let kept = joined
            .spans
            .iter()
            .find(|s| &*s.service == "legacy")
            .unwrap();
        assert_eq!(kept.trace_id.get(), 1);
        assert_eq!(kept.parent_id, SpanId::new(11));
        assert!(kept.attributes.iter().any(|a| a.key == PARENT_CONFIDENCE));
    }

    #[test]
    fn a_tie_is_settled_by_where_the_requests_other_segments_went() {
        let traces = vec![
            with_url(span(1, 10, None, "frontend", (100, 200)), "/home?user=3"),
            span(1, 11, Some(10), "cache", (120, 140)),
            with_url(span(2, 20, None, "frontend", (100, 200)), "/home?user=4"),
            span(2, 21, Some(20), "cache", (121, 141)),
        ];
        let stitched = vec![
            segment(
                90,
                1,
                "frontend",
                &[(101, "home user=3"), (190, "rendered")],
            ),
            segment(90, 2, "cache", &[(125, "miss"), (135, "stored")]),
        ];
        let joined = join(stitched, &traces);
        assert_eq!(joined.report.placed, 4);
        let cache = joined
            .spans
            .iter()
            .find(|s| &*s.service == "cache")
            .unwrap();
        assert_eq!((cache.trace_id.get(), cache.span_id.get()), (1, 11));
    }

    #[test]
    fn a_line_goes_to_the_span_its_scope_names_and_an_unscoped_one_to_none_named() {
        // orders' quorum write outlives the handler's work (its third write finishes in
        // the background): the handler's last line falls inside it.
        let mut quorum = span(1, 11, Some(10), "orders", (110, 199));
        quorum.name = "quorum write".into();
        let traces = vec![
            with_url(span(1, 10, None, "orders", (100, 200)), "/orders?user=3"),
            quorum,
        ];
        let stitched = vec![segment(
            90,
            1,
            "orders",
            &[
                (105, "order accepted user=3"),
                (150, "quorum write{block=7}: orders: quorum reached"),
                (160, "orders: order placed"),
            ],
        )];
        let joined = join(stitched, &traces);
        let on = |id: u64| {
            joined
                .spans
                .iter()
                .filter(|s| s.span_id.get() == id)
                .flat_map(|s| s.events.iter().map(|e| e.name.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(on(11), ["quorum write{block=7}: orders: quorum reached"]);
        assert_eq!(on(10), ["order accepted user=3", "orders: order placed"]);
        assert_eq!(scope_of("a{x={1}}:b{y=2}: t: m"), Some("b"));
        assert_eq!(scope_of("t: m {x}"), None);
    }

    #[test]
    fn a_line_printing_an_outgoing_calls_values_goes_to_the_code_that_waits_on_it() {
        // orders' third replica write is still in flight when the handler logs the order
        // it wrote: the line prints the block the write's span carries, but the handler
        // logged it, not the call.
        let mut write = span(1, 11, Some(10), "orders", (110, 190));
        write.kind = SpanKind::Client;
        write.name = "PUT /write".into();
        let write = with_url(write, "http://storage-3/write?block=77");
        let traces = vec![
            with_url(span(1, 10, None, "orders", (100, 200)), "/orders?user=3"),
            write,
        ];
        let stitched = vec![segment(
            90,
            1,
            "orders",
            &[
                (105, "order accepted user=3"),
                (150, "order placed order=77"),
            ],
        )];
        let joined = join(stitched, &traces);
        assert_eq!(
            events_on(&joined.spans, 1, 10),
            ["order accepted user=3", "order placed order=77"]
        );
        assert!(events_on(&joined.spans, 1, 11).is_empty());
    }

    #[test]
    fn stitched_spans_and_carriers_are_never_anchors() {
        let mut from_logs = span(1, 10, None, "catalog", (100, 140));
        from_logs.source = Source::Logs;
        let seg = segment(99, 1, "catalog", &[(110, "user=7")]);
        let joined = join(vec![seg.clone()], &[from_logs]);
        assert_eq!(joined.spans, vec![seg]);
    }
}
