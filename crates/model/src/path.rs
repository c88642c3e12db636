//! Pip's path view of a trace: one thread per sequential flow of a process (its host, pid
//! and service, and a lane for work that ran concurrently; see [`ThreadKey`]), each an
//! ordered list of events: task start/end (nested), notice, send and receive.

use std::sync::Arc;

use crate::ids::SpanId;
use crate::span::{Direction, SpanKind};
use crate::trace::Trace;

/// Identifies a Pip thread: where the events ran.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ThreadKey {
    /// The host.
    pub host: Arc<str>,
    /// The process id.
    pub pid: u32,
    /// The OS thread the flow's first span ran on. Flows are not split by it: async tasks
    /// move between a runtime's threads, so the lane says what ran in sequence.
    pub execution_unit: u64,
    /// The service, to tell apart processes that report no host or pid.
    pub service: Arc<str>,
    /// Which sequential flow of the process: 0, or 1, 2, ... for spans that ran
    /// concurrently with others (threads, or async tasks interleaved on one thread), since
    /// a Pip thread is sequential.
    pub lane: u32,
}

/// One event of a Pip thread.
#[derive(Debug, Clone, PartialEq)]
pub enum PathEvent {
    /// A task (span) began.
    TaskStart {
        /// The span.
        span_id: SpanId,
        /// Its index in the trace's spans.
        span: usize,
        /// Its name.
        name: Arc<str>,
        /// Unix ns.
        time: u64,
    },
    /// A task (span) ended.
    TaskEnd {
        /// The span.
        span_id: SpanId,
        /// Its name.
        name: Arc<str>,
        /// Unix ns.
        time: u64,
    },
    /// A notice (span event).
    Notice {
        /// The span it was recorded in.
        span_id: SpanId,
        /// The text.
        text: Arc<str>,
        /// Unix ns.
        time: u64,
    },
    /// A message left this thread.
    Send {
        /// Pairs the send with its receive.
        message_id: u64,
        /// The span it was sent from.
        span_id: SpanId,
        /// Payload size, if known.
        size: Option<u64>,
        /// Unix ns.
        time: u64,
    },
    /// A message arrived at this thread.
    Recv {
        /// Pairs the receive with its send.
        message_id: u64,
        /// The span it was received in.
        span_id: SpanId,
        /// Payload size, if known.
        size: Option<u64>,
        /// Unix ns.
        time: u64,
    },
}

impl PathEvent {
    /// When it happened.
    pub fn time(&self) -> u64 {
        match self {
            PathEvent::TaskStart { time, .. }
            | PathEvent::TaskEnd { time, .. }
            | PathEvent::Notice { time, .. }
            | PathEvent::Send { time, .. }
            | PathEvent::Recv { time, .. } => *time,
        }
    }
}

/// One Pip thread and its events in order.
#[derive(Debug, Clone, PartialEq)]
pub struct PathThread {
    /// Where it ran.
    pub key: ThreadKey,
    /// Its events, ordered by time with task nesting kept.
    pub events: Vec<PathEvent>,
}

/// The Pip path view of a trace.
#[derive(Debug, Clone, PartialEq)]
pub struct PathView {
    /// Threads, ordered by the time of their first event.
    pub threads: Vec<PathThread>,
}

/// The message id of an RPC's request (client to server), derived from the client span id.
pub fn rpc_request_id(client: SpanId) -> u64 {
    client.get().rotate_left(1) ^ 0x5250_4352_4551_0001
}

/// The message id of an RPC's reply (server to client), derived from the client span id.
pub fn rpc_reply_id(client: SpanId) -> u64 {
    client.get().rotate_left(1) ^ 0x5250_4352_4550_0002
}

// Order of a span's own events at equal times: receives, then notices, then sends.
fn rank(e: &PathEvent) -> u8 {
    match e {
        PathEvent::TaskStart { .. } => 0,
        PathEvent::Recv { .. } => 1,
        PathEvent::Notice { .. } => 2,
        PathEvent::Send { .. } => 3,
        PathEvent::TaskEnd { .. } => 4,
    }
}

/// The lane of each span, and the execution unit of the span that opened its lane: a
/// span stays in its parent's lane when it nests there (its parent is the innermost open
/// span of that lane and it ends within it); otherwise it opens a new lane.
fn lanes(trace: &Trace, depth: &[usize]) -> Vec<(u32, u64, usize)> {
    type Process<'t> = (&'t str, u32, &'t str);
    let mut order: Vec<usize> = (0..trace.spans.len()).collect();
    order.sort_by_key(|&i| (trace.spans[i].start, depth[i]));
    // Per process: each lane's open spans, the unit of its first span and its flow number
    // (unique in the trace).
    let mut open: foldhash::HashMap<Process, Vec<(Vec<usize>, u64, usize)>> = Default::default();
    let mut flows = 0usize;
    let mut lane = vec![(0u32, 0u64, 0usize); trace.spans.len()];
    let end = |i: usize| trace.spans[i].end.max(trace.spans[i].start);
    for i in order {
        let s = &trace.spans[i];
        let lanes = open.entry((&*s.host, s.pid, &*s.service)).or_default();
        for (stack, ..) in lanes.iter_mut() {
            while stack.last().is_some_and(|&top| end(top) <= s.start) {
                stack.pop();
            }
        }
        let parent = trace.parent[i];
        let nests = |(stack, ..): &(Vec<usize>, u64, usize)| {
            stack.last().copied() == parent && parent.is_some_and(|p| end(i) <= end(p))
        };
        // A span that cannot nest opens a lane of its own: reusing an idle lane would join
        // unrelated work (two requests a server handled one after the other).
        let chosen = match lanes.iter().position(nests) {
            Some(l) => l,
            None => {
                lanes.push((Vec::new(), s.execution_unit, flows));
                flows += 1;
                lanes.len() - 1
            }
        };
        lanes[chosen].0.push(i);
        lane[i] = (chosen as u32, lanes[chosen].1, lanes[chosen].2);
    }
    lane
}

impl PathView {
    /// Derives the path view. An RPC (a client span with a server child) becomes a send at
    /// the client's start, a receive at the server's start, a send at the server's end and
    /// a receive at the client's end; recorded messages become sends and receives as they are.
    pub fn from_trace(trace: &Trace) -> PathView {
        let depth: Vec<usize> = {
            let mut d = vec![0; trace.spans.len()];
            for (i, dep) in trace.depth_first() {
                d[i] = dep;
            }
            d
        };
        let lanes = lanes(trace, &depth);
        // Within a lane spans nest, so each thread is a walk of its span trees: a task's
        // start, its own events merged by time with its children, its end. A flow is one
        // lane of one process, so one thread.
        let flow: Vec<usize> = lanes.iter().map(|l| l.2).collect();
        let flows = flow.iter().max().map_or(0, |f| f + 1);
        let mut roots: Vec<Vec<usize>> = vec![Vec::new(); flows];
        let mut spans_in = vec![0usize; flows];
        for i in 0..trace.spans.len() {
            spans_in[flow[i]] += 1;
            let local_parent = trace.parent[i].filter(|&p| flow[p] == flow[i]);
            if local_parent.is_none() {
                roots[flow[i]].push(i);
            }
        }
        let mut threads: Vec<PathThread> = roots
            .into_iter()
            .filter(|rs| !rs.is_empty())
            .map(|mut rs| {
                rs.sort_by_key(|&i| (trace.spans[i].start, depth[i]));
                let s = &trace.spans[rs[0]];
                let (lane, unit, _) = lanes[rs[0]];
                let key = ThreadKey {
                    host: s.host.clone(),
                    pid: s.pid,
                    execution_unit: unit,
                    service: s.service.clone(),
                    lane,
                };
                let mut events = Vec::with_capacity(2 * spans_in[flow[rs[0]]] + 4);
                for r in rs {
                    walk(trace, &flow, r, &mut events);
                }
                PathThread { key, events }
            })
            .collect();
        // By first event, then by key as before (keys are unique).
        threads.sort_by(|a, b| {
            let first = |t: &PathThread| t.events.first().map(|e| e.time()).unwrap_or(0);
            first(a).cmp(&first(b)).then_with(|| a.key.cmp(&b.key))
        });
        PathView { threads }
    }
}

/// Names kept per OS thread at most; past it the cache starts over (unbounded names, such
/// as notices carrying ids, must not grow it forever).
const MAX_NAMES: usize = 1 << 16;

thread_local! {
    /// One shared copy of each name and text, kept across the traces a thread views: span
    /// names and notices repeat from trace to trace, so a bulk check allocates each once.
    static NAMES: std::cell::RefCell<foldhash::HashMap<Box<str>, Arc<str>>> =
        std::cell::RefCell::new(Default::default());
}

fn name(text: &str) -> Arc<str> {
    NAMES.with_borrow_mut(|names| {
        if let Some(a) = names.get(text) {
            return a.clone();
        }
        if names.len() >= MAX_NAMES {
            names.clear();
        }
        let a: Arc<str> = Arc::from(text);
        names.insert(Box::from(text), a.clone());
        a
    })
}

/// The RPC messages at a span's start and end: a client that calls a server sends the
/// request and receives the reply; the server receives the request and sends the reply.
/// At most two of each (a span both serving a call and calling out in the same span).
fn rpc_events(trace: &Trace, i: usize) -> ([Option<PathEvent>; 2], [Option<PathEvent>; 2]) {
    let s = &trace.spans[i];
    let (mut start, mut end) = ([None, None], [None, None]);
    let calls_server = s.kind == SpanKind::Client
        && trace.children[i]
            .iter()
            .any(|&c| trace.spans[c].kind == SpanKind::Server);
    if calls_server {
        start[0] = Some(PathEvent::Send {
            message_id: rpc_request_id(s.span_id),
            span_id: s.span_id,
            size: None,
            time: s.start,
        });
        end[0] = Some(PathEvent::Recv {
            message_id: rpc_reply_id(s.span_id),
            span_id: s.span_id,
            size: None,
            time: s.end.max(s.start),
        });
    }
    let client = trace.parent[i]
        .map(|p| &trace.spans[p])
        .filter(|p| p.kind == SpanKind::Client);
    if let (SpanKind::Server, Some(c)) = (s.kind, client) {
        start[1] = Some(PathEvent::Recv {
            message_id: rpc_request_id(c.span_id),
            span_id: s.span_id,
            size: None,
            time: s.start,
        });
        end[1] = Some(PathEvent::Send {
            message_id: rpc_reply_id(c.span_id),
            span_id: s.span_id,
            size: None,
            time: s.end.max(s.start),
        });
    }
    (start, end)
}

/// A span's recorded events (notices and messages), by time.
fn inside_events(trace: &Trace, i: usize) -> Vec<PathEvent> {
    let s = &trace.spans[i];
    let mut inside = Vec::with_capacity(s.events.len() + s.messages.len());
    for e in &s.events {
        inside.push(PathEvent::Notice {
            span_id: s.span_id,
            text: name(&e.name),
            time: e.time.clamp(s.start, s.end.max(s.start)),
        });
    }
    for m in &s.messages {
        inside.push(match m.direction {
            Direction::Send => PathEvent::Send {
                message_id: m.id,
                span_id: s.span_id,
                size: m.size,
                time: m.time,
            },
            Direction::Recv => PathEvent::Recv {
                message_id: m.id,
                span_id: s.span_id,
                size: m.size,
                time: m.time,
            },
        });
    }
    inside.sort_by_key(|e| (e.time(), rank(e)));
    inside
}

fn walk(trace: &Trace, flow: &[usize], i: usize, out: &mut Vec<PathEvent>) {
    let s = &trace.spans[i];
    let task = name(&s.name);
    out.push(PathEvent::TaskStart {
        span_id: s.span_id,
        span: i,
        name: task.clone(),
        time: s.start,
    });
    let (start, end) = rpc_events(trace, i);
    // An RPC's request and reply bound the work it caused, even if a child's recorded
    // start precedes the server span's own.
    out.extend(start.into_iter().flatten());
    let mut inside = inside_events(trace, i).into_iter().peekable();
    for &c in trace.children[i].iter().filter(|&&c| flow[c] == flow[i]) {
        while let Some(e) = inside.next_if(|e| e.time() <= trace.spans[c].start) {
            out.push(e);
        }
        walk(trace, flow, c, out);
    }
    out.extend(inside);
    out.extend(end.into_iter().flatten());
    out.push(PathEvent::TaskEnd {
        span_id: s.span_id,
        name: task,
        time: s.end.max(s.start),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TraceId;
    use crate::span::Span;

    fn sp(id: u64, parent: Option<u64>, svc: &str, kind: SpanKind, start: u64, end: u64) -> Span {
        let mut s = Span::new(
            TraceId::new(1).unwrap(),
            SpanId::new(id).unwrap(),
            parent.and_then(SpanId::new),
            format!("op{id}"),
            svc,
            start,
            end,
        );
        s.kind = kind;
        s
    }

    #[test]
    fn an_rpc_becomes_paired_send_and_receive_events_in_two_threads() {
        let mut root = sp(1, None, "web", SpanKind::Server, 0, 100);
        root.events.push(crate::span::Event {
            time: 5,
            name: "parsed".into(),
            attributes: vec![],
        });
        let client = sp(2, Some(1), "web", SpanKind::Client, 10, 90);
        let server = sp(3, Some(2), "db", SpanKind::Server, 20, 80);
        let trace = Trace::assemble(TraceId::new(1).unwrap(), vec![root, client, server]);
        let view = PathView::from_trace(&trace);
        assert_eq!(view.threads.len(), 2);
        let web = &view.threads[0];
        let kinds: Vec<&str> = web
            .events
            .iter()
            .map(|e| match e {
                PathEvent::TaskStart { .. } => "start",
                PathEvent::TaskEnd { .. } => "end",
                PathEvent::Notice { .. } => "notice",
                PathEvent::Send { .. } => "send",
                PathEvent::Recv { .. } => "recv",
            })
            .collect();
        assert_eq!(
            kinds,
            vec!["start", "notice", "start", "send", "recv", "end", "end"]
        );
        let db = &view.threads[1];
        let PathEvent::Recv { message_id, .. } = &db.events[1] else {
            panic!("expected a receive, got {:?}", db.events[1]);
        };
        let PathEvent::Send {
            message_id: sent, ..
        } = &web.events[3]
        else {
            panic!("expected a send");
        };
        assert_eq!(message_id, sent);
    }

    #[test]
    fn concurrent_spans_on_one_execution_unit_become_separate_sequential_threads() {
        // Two calls in flight at once from one async task: 2 runs 10..50, 3 runs 20..60.
        let root = sp(1, None, "web", SpanKind::Server, 0, 100);
        let a = sp(2, Some(1), "web", SpanKind::Internal, 10, 50);
        let b = sp(3, Some(1), "web", SpanKind::Internal, 20, 60);
        let inner = sp(4, Some(2), "web", SpanKind::Internal, 12, 40);
        let trace = Trace::assemble(TraceId::new(1).unwrap(), vec![root, a, b, inner]);
        let view = PathView::from_trace(&trace);
        assert_eq!(view.threads.len(), 2);
        let names = |t: &PathThread| -> Vec<String> {
            t.events
                .iter()
                .map(|e| match e {
                    PathEvent::TaskStart { name, .. } => format!("+{name}"),
                    PathEvent::TaskEnd { name, .. } => format!("-{name}"),
                    _ => "?".into(),
                })
                .collect()
        };
        assert_eq!(view.threads[0].key.lane, 0);
        assert_eq!(
            names(&view.threads[0]),
            ["+op1", "+op2", "+op4", "-op4", "-op2", "-op1"]
        );
        assert_eq!(view.threads[1].key.lane, 1);
        assert_eq!(names(&view.threads[1]), ["+op3", "-op3"]);
    }
}
