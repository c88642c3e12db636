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
        for (i, s) in trace.spans.iter().enumerate() {
            let key = ThreadKey {
                host: s.host.clone(),
                pid: s.pid,
                execution_unit: s.execution_unit,
                service: s.service.clone(),
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
}
