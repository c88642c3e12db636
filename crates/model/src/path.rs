//! Pip's path view of a trace: one thread per (host, process, execution unit), each an
//! ordered list of events: task start/end (nested), notice, send and receive.

use std::collections::BTreeMap;
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
    /// The OS thread or async task.
    pub execution_unit: u64,
    /// The service, to tell apart processes that report no host or pid.
    pub service: Arc<str>,
    /// Which sequential flow of the execution unit: 0, or 1, 2, ... for spans that ran
    /// concurrently with others on it (async tasks interleaved on one thread), since a
    /// Pip thread is sequential.
    pub lane: u32,
}

/// One event of a Pip thread.
#[derive(Debug, Clone, PartialEq)]
pub enum PathEvent {
    /// A task (span) began.
    TaskStart {
        /// The span.
        span_id: SpanId,
        /// Its name.
        name: String,
        /// Unix ns.
        time: u64,
    },
    /// A task (span) ended.
    TaskEnd {
        /// The span.
        span_id: SpanId,
        /// Its name.
        name: String,
        /// Unix ns.
        time: u64,
    },
    /// A notice (span event).
    Notice {
        /// The span it was recorded in.
        span_id: SpanId,
        /// The text.
        text: String,
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

// Sort rank of events at equal times: a task starts before what it contains, and ends
// after it.
fn rank(e: &PathEvent) -> u8 {
    match e {
        PathEvent::TaskStart { .. } => 0,
        PathEvent::Recv { .. } => 1,
        PathEvent::Notice { .. } => 2,
        PathEvent::Send { .. } => 3,
        PathEvent::TaskEnd { .. } => 4,
    }
}

/// The lane of each span: a span stays in its parent's lane when it nests there (its
/// parent is the innermost open span of that lane and it ends within it); otherwise it
/// takes a free lane of its execution unit, or a new one.
fn lanes(trace: &Trace, depth: &[usize]) -> Vec<u32> {
    type Unit = (Arc<str>, u32, u64, Arc<str>);
    let mut order: Vec<usize> = (0..trace.spans.len()).collect();
    order.sort_by_key(|&i| (trace.spans[i].start, depth[i]));
    let mut open: BTreeMap<Unit, Vec<Vec<usize>>> = BTreeMap::new();
    let mut lane = vec![0u32; trace.spans.len()];
    for i in order {
        let s = &trace.spans[i];
        let unit = (s.host.clone(), s.pid, s.execution_unit, s.service.clone());
        let stacks = open.entry(unit).or_default();
        for stack in stacks.iter_mut() {
            while stack.last().is_some_and(|&top| {
                trace.spans[top].end.max(trace.spans[top].start) <= s.start && top != i
            }) {
                stack.pop();
            }
        }
        let parent = trace.parent[i];
        let nests = |stack: &Vec<usize>| {
            stack.last().copied() == parent
                && parent.is_some_and(|p| {
                    s.end.max(s.start) <= trace.spans[p].end.max(trace.spans[p].start)
                })
        };
        let chosen = match stacks.iter().position(nests) {
            Some(l) => l,
            None => match stacks.iter().position(Vec::is_empty) {
                Some(l) => l,
                None => {
                    stacks.push(Vec::new());
                    stacks.len() - 1
                }
            },
        };
        stacks[chosen].push(i);
        lane[i] = chosen as u32;
    }
    lane
}

impl PathView {
    /// Derives the path view. An RPC (a client span with a server child) becomes a send at
    /// the client's start, a receive at the server's start, a send at the server's end and
    /// a receive at the client's end; recorded messages become sends and receives as they are.
    pub fn from_trace(trace: &Trace) -> PathView {
        let mut threads: BTreeMap<ThreadKey, Vec<(u64, u8, usize, PathEvent)>> = BTreeMap::new();
        let depth: Vec<usize> = {
            let mut d = vec![0; trace.spans.len()];
            for (i, dep) in trace.depth_first() {
                d[i] = dep;
            }
            d
        };
        let mut push = |key: &ThreadKey, ev: PathEvent, depth: usize| {
            let r = rank(&ev);
            // Nesting at equal times: parents start first and end last.
            let order = match ev {
                PathEvent::TaskEnd { .. } => usize::MAX - depth,
                _ => depth,
            };
            threads
                .entry(key.clone())
                .or_default()
                .push((ev.time(), r, order, ev));
        };
        let lanes = lanes(trace, &depth);
        for (i, s) in trace.spans.iter().enumerate() {
            let key = ThreadKey {
                host: s.host.clone(),
                pid: s.pid,
                execution_unit: s.execution_unit,
                service: s.service.clone(),
                lane: lanes[i],
            };
            let d = depth[i];
            push(
                &key,
                PathEvent::TaskStart {
                    span_id: s.span_id,
                    name: s.name.clone(),
                    time: s.start,
                },
                d,
            );
            for e in &s.events {
                push(
                    &key,
                    PathEvent::Notice {
                        span_id: s.span_id,
                        text: e.name.clone(),
                        time: e.time.clamp(s.start, s.end.max(s.start)),
                    },
                    d,
                );
            }
            for m in &s.messages {
                let ev = match m.direction {
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
                };
                push(&key, ev, d);
            }
            let parent_client = trace.parent[i]
                .map(|p| &trace.spans[p])
                .filter(|p| p.kind == SpanKind::Client);
            match s.kind {
                SpanKind::Client
                    if trace.children[i]
                        .iter()
                        .any(|&c| trace.spans[c].kind == SpanKind::Server) =>
                {
                    push(
                        &key,
                        PathEvent::Send {
                            message_id: rpc_request_id(s.span_id),
                            span_id: s.span_id,
                            size: None,
                            time: s.start,
                        },
                        d,
                    );
                    push(
                        &key,
                        PathEvent::Recv {
                            message_id: rpc_reply_id(s.span_id),
                            span_id: s.span_id,
                            size: None,
                            time: s.end,
                        },
                        d,
                    );
                }
                SpanKind::Server => {
                    if let Some(c) = parent_client {
                        push(
                            &key,
                            PathEvent::Recv {
                                message_id: rpc_request_id(c.span_id),
                                span_id: s.span_id,
                                size: None,
                                time: s.start,
                            },
                            d,
                        );
                        push(
                            &key,
                            PathEvent::Send {
                                message_id: rpc_reply_id(c.span_id),
                                span_id: s.span_id,
                                size: None,
                                time: s.end,
                            },
                            d,
                        );
                    }
                }
                _ => {}
            }
            push(
                &key,
                PathEvent::TaskEnd {
                    span_id: s.span_id,
                    name: s.name.clone(),
                    time: s.end.max(s.start),
                },
                d,
            );
        }
        let mut out: Vec<PathThread> = threads
            .into_iter()
            .map(|(key, mut evs)| {
                evs.sort_by_key(|e| (e.0, e.1, e.2));
                PathThread {
                    key,
                    events: evs.into_iter().map(|e| e.3).collect(),
                }
            })
            .collect();
        out.sort_by_key(|t| t.events.first().map(|e| e.time()).unwrap_or(0));
        PathView { threads: out }
    }
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
