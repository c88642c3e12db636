//! Pip's path view of a trace: one thread per sequential flow of a process (its host, pid
//! and service, and a strand for work that ran concurrently; see [`ThreadKey`]), each an
//! ordered list of events: task start/end (nested), notice, send and receive.
//!
//! `PathView::from_trace`, and the visitor `for_each_thread` (one reused event buffer, no
//! list per thread), turn a trace into Pip threads. A thread is a strand: one sequential
//! flow inside a process, where a process is (host, pid, service), not an execution unit
//! (ADR 002, `docs/decisions/002-pip-threads-are-lanes-per-process.md`, says why; it
//! calls strands lanes, the name the writer's per-thread rings keep).
//!
//! Strands are assigned by visiting spans in (start, depth) order. A span joins its parent's
//! strand when the parent is in the same process, is that strand's innermost open span at the
//! span's start (spans that ended by then are closed first), and the span ends no later
//! than the parent. Otherwise it opens a new strand of its process; strands are numbered
//! 0, 1, ... per process in order of creation and never reused (an idle strand reused would join
//! unrelated work, two requests a server handled one after the other). So a concurrent
//! sibling, a served RPC, a consumer, a span that outlives its parent, or one recorded as
//! starting before its parent each starts a thread. `ThreadKey` is (host, pid, execution
//! unit of the strand's first span, service, strand); the execution unit is informational.
//!
//! The events of a thread are a walk of its span trees: `TaskStart`; at a client span with a
//! server child a `Send` of the request (at a server span with a client parent a `Recv`);
//! the span's own notices (span events other than attached log records, clamped to the
//! span; log-record carriers are no part of a path) and recorded messages, merged
//! by time with its same-strand children (an own event at or before a child's start comes
//! first; at equal times receives, then notices, then sends); the children, recursively;
//! the remaining own events; the reply `Recv` (client) or `Send` (server); `TaskEnd`. RPC
//! message ids derive from the client span id (`rpc_request_id`, `rpc_reply_id`). Tasks nest
//! by construction. Threads are ordered by their first event's time, then by key. Names
//! and notice texts are interned in a per-OS-thread table of at most 65 536 entries.

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
    /// move between a runtime's threads, so the strand says what ran in sequence.
    pub execution_unit: u64,
    /// The service, to tell apart processes that report no host or pid.
    pub service: Arc<str>,
    /// Which sequential flow of the process: 0, or 1, 2, ... for spans that ran
    /// concurrently with others (threads, or async tasks interleaved on one thread), since
    /// a Pip thread is sequential.
    pub strand: u32,
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

/// One strand of a process while the strands are assigned.
struct Strand {
    /// Index of its process.
    process: usize,
    /// Its number within the process.
    number: u32,
    /// The execution unit of its first span.
    unit: u64,
    /// Its innermost open span.
    top: Option<usize>,
}

/// The strand of each span, and the execution unit of the span that opened its strand: a
/// span stays in its parent's strand when it nests there (its parent is the innermost open
/// span of that strand and it ends within it); otherwise it opens a new strand.
fn strands(trace: &Trace, depth: &[usize]) -> Vec<(u32, u64, usize)> {
    type Process<'t> = (&'t str, u32, &'t str);
    let mut order: Vec<usize> = (0..trace.spans.len()).collect();
    order.sort_by_key(|&i| (trace.spans[i].start, depth[i]));
    // A trace has few processes: a list compared by pointer first (the store shares one
    // copy of each name) beats hashing the names of every span. Each with its strand count.
    let mut processes: Vec<(Process, u32)> = Vec::new();
    // Every strand of the trace, in order of creation: the flow number is the index.
    let mut flows: Vec<Strand> = Vec::new();
    // Each strand's open spans form a stack, linked through the span below each one.
    let mut below: Vec<Option<usize>> = vec![None; trace.spans.len()];
    // Each span's process, and its flow once it has one.
    let mut process_of: Vec<usize> = vec![0; trace.spans.len()];
    let mut flow_of: Vec<Option<usize>> = vec![None; trace.spans.len()];
    let mut strand = vec![(0u32, 0u64, 0usize); trace.spans.len()];
    let end = |i: usize| trace.spans[i].end.max(trace.spans[i].start);
    for i in order {
        let s = &trace.spans[i];
        let process: Process = (&s.host, s.pid, &s.service);
        let same = |(host, pid, service): &Process| {
            *pid == process.1
                && (std::ptr::eq(*host, process.0) || *host == process.0)
                && (std::ptr::eq(*service, process.2) || *service == process.2)
        };
        let parent = trace.parent[i];
        // Most spans run in their parent's process.
        let at = match parent.filter(|&p| flow_of[p].is_some() && same(&processes[process_of[p]].0))
        {
            Some(p) => process_of[p],
            None => match processes.iter().position(|(p, _)| same(p)) {
                Some(at) => at,
                None => {
                    processes.push((process, 0));
                    processes.len() - 1
                }
            },
        };
        process_of[i] = at;
        // A span nests in a strand when its parent is that strand's innermost open span (at
        // most one strand's) and it ends within it. Spans that ended by this start are
        // closed first; starts only grow, so closing one strand late closes the same spans.
        let nests = parent.and_then(|p| {
            let f = flow_of[p]?;
            let l = &mut flows[f];
            while let Some(top) = l.top.filter(|&top| end(top) <= s.start) {
                l.top = below[top];
            }
            (l.process == at && l.top == Some(p) && end(i) <= end(p)).then_some(f)
        });
        // A span that cannot nest opens a strand of its own: reusing an idle strand would join
        // unrelated work (two requests a server handled one after the other).
        let flow = match nests {
            Some(f) => f,
            None => {
                let number = processes[at].1;
                processes[at].1 += 1;
                flows.push(Strand {
                    process: at,
                    number,
                    unit: s.execution_unit,
                    top: None,
                });
                flows.len() - 1
            }
        };
        let l = &mut flows[flow];
        below[i] = l.top;
        l.top = Some(i);
        flow_of[i] = Some(flow);
        strand[i] = (l.number, l.unit, flow);
    }
    strand
}

impl PathView {
    /// Derives the path view. An RPC (a client span with a server child) becomes a send at
    /// the client's start, a receive at the server's start, a send at the server's end and
    /// a receive at the client's end; recorded messages become sends and receives as they are.
    pub fn from_trace(trace: &Trace) -> PathView {
        let mut threads = Vec::new();
        for_each_thread(trace, |key, events| {
            threads.push(PathThread {
                key,
                events: std::mem::take(events),
            })
        });
        PathView { threads }
    }
}

/// Visits the threads of the path view of `trace` (see [`PathView::from_trace`]) in its
/// order, each with its events in one buffer the visitor may take from: a reader that
/// converts the events into its own form allocates no list per thread for them.
pub fn for_each_thread(trace: &Trace, mut visit: impl FnMut(ThreadKey, &mut Vec<PathEvent>)) {
    let depth: Vec<usize> = {
        let mut d = vec![0; trace.spans.len()];
        for (i, dep) in trace.depth_first() {
            d[i] = dep;
        }
        d
    };
    let strands = strands(trace, &depth);
    // Within a strand spans nest, so each thread is a walk of its span trees: a task's
    // start, its own events merged by time with its children, its end. A flow is one
    // strand of one process, so one thread.
    let flow: Vec<usize> = strands.iter().map(|l| l.2).collect();
    let flows = flow.iter().max().map_or(0, |f| f + 1);
    // Each flow's roots, in one list grouped by flow: (flow, start, depth, span).
    let mut roots: Vec<(usize, u64, usize, usize)> = Vec::with_capacity(trace.spans.len());
    let mut spans_in = vec![0usize; flows];
    for i in 0..trace.spans.len() {
        spans_in[flow[i]] += 1;
        let local_parent = trace.parent[i].filter(|&p| flow[p] == flow[i]);
        // Log records are not the program's path: a carrier has no parent or children, so
        // it is left out here.
        if local_parent.is_none() && !trace.spans[i].is_log_carrier() {
            roots.push((flow[i], trace.spans[i].start, depth[i], i));
        }
    }
    roots.sort_unstable();
    // A thread's first event is the start of its first root; threads are ordered by it,
    // then by key (keys are unique). Each with the span where its roots begin.
    let mut threads: Vec<(u64, ThreadKey, usize)> = Vec::new();
    for (at, root) in roots.iter().enumerate() {
        if at > 0 && roots[at - 1].0 == root.0 {
            continue;
        }
        let s = &trace.spans[root.3];
        let (strand, unit, _) = strands[root.3];
        let key = ThreadKey {
            host: s.host.clone(),
            pid: s.pid,
            execution_unit: unit,
            service: s.service.clone(),
            strand,
        };
        threads.push((s.start, key, at));
    }
    threads.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let mut events = Vec::new();
    for (_, key, at) in threads {
        let f = roots[at].0;
        events.clear();
        events.reserve(2 * spans_in[f] + 4);
        for &(.., r) in roots[at..].iter().take_while(|r| r.0 == f) {
            walk(trace, &flow, r, &mut events);
        }
        visit(key, &mut events);
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

/// Where a span stands in an RPC: whether it calls a server, and the client calling it.
fn rpc_roles(trace: &Trace, i: usize) -> (bool, Option<SpanId>) {
    let s = &trace.spans[i];
    let calls_server = s.kind == SpanKind::Client
        && trace.children[i]
            .iter()
            .any(|&c| trace.spans[c].kind == SpanKind::Server);
    let client = match s.kind {
        SpanKind::Server => trace.parent[i]
            .map(|p| &trace.spans[p])
            .filter(|p| p.kind == SpanKind::Client)
            .map(|p| p.span_id),
        _ => None,
    };
    (calls_server, client)
}

/// The RPC messages at a span's start or end (`at_end`): a client that calls a server
/// sends the request and receives the reply; the server receives the request and sends
/// the reply.
fn push_rpc_events(
    s: &crate::span::Span,
    (calls_server, client): (bool, Option<SpanId>),
    at_end: bool,
    out: &mut Vec<PathEvent>,
) {
    let time = if at_end { s.end.max(s.start) } else { s.start };
    let span_id = s.span_id;
    if calls_server {
        out.push(if at_end {
            PathEvent::Recv {
                message_id: rpc_reply_id(span_id),
                span_id,
                size: None,
                time,
            }
        } else {
            PathEvent::Send {
                message_id: rpc_request_id(span_id),
                span_id,
                size: None,
                time,
            }
        });
    }
    if let Some(c) = client {
        out.push(if at_end {
            PathEvent::Send {
                message_id: rpc_reply_id(c),
                span_id,
                size: None,
                time,
            }
        } else {
            PathEvent::Recv {
                message_id: rpc_request_id(c),
                span_id,
                size: None,
                time,
            }
        });
    }
}

/// A span's recorded events (notices and messages), by time.
fn inside_events(trace: &Trace, i: usize) -> Vec<PathEvent> {
    let s = &trace.spans[i];
    let mut inside = Vec::with_capacity(s.events.len() + s.messages.len());
    // Log records attached to a span are not its notices: a path's verdict must not change
    // when its logs arrive.
    for e in s.events.iter().filter(|e| !crate::logs::is_log_event(e)) {
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
    let roles = rpc_roles(trace, i);
    // An RPC's request and reply bound the work it caused, even if a child's recorded
    // start precedes the server span's own.
    push_rpc_events(s, roles, false, out);
    let mut inside = inside_events(trace, i).into_iter().peekable();
    for &c in trace.children[i].iter().filter(|&&c| flow[c] == flow[i]) {
        while let Some(e) = inside.next_if(|e| e.time() <= trace.spans[c].start) {
            out.push(e);
        }
        walk(trace, flow, c, out);
    }
    out.extend(inside);
    push_rpc_events(s, roles, true, out);
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
    fn a_child_recorded_as_starting_before_its_parent_runs_in_a_thread_of_its_own() {
        // Clock skew: 2's recorded start precedes its parent's, so it cannot nest in it;
        // 3 nests in 1 as usual.
        let root = sp(1, None, "web", SpanKind::Internal, 10, 100);
        let early = sp(2, Some(1), "web", SpanKind::Internal, 5, 50);
        let inner = sp(3, Some(1), "web", SpanKind::Internal, 60, 70);
        let trace = Trace::assemble(TraceId::new(1).unwrap(), vec![root, early, inner]);
        let view = PathView::from_trace(&trace);
        let starts: Vec<Vec<u64>> = view
            .threads
            .iter()
            .map(|t| {
                t.events
                    .iter()
                    .filter_map(|e| match e {
                        PathEvent::TaskStart { span_id, .. } => Some(span_id.get()),
                        _ => None,
                    })
                    .collect()
            })
            .collect();
        assert_eq!(starts, [vec![2], vec![1, 3]]);
        assert_eq!(view.threads[1].key.strand, 1);
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
        assert_eq!(view.threads[0].key.strand, 0);
        assert_eq!(
            names(&view.threads[0]),
            ["+op1", "+op2", "+op4", "-op4", "-op2", "-op1"]
        );
        assert_eq!(view.threads[1].key.strand, 1);
        assert_eq!(names(&view.threads[1]), ["+op3", "-op3"]);
    }
}
