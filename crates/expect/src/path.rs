//! The paths the checker reads: Pip's path view of a trace (threads of task, notice, send
//! and receive events), with each message paired to its other end, each task to its end,
//! and the metrics limits and aggregates read. Building it also reconciles the path:
//! unpaired messages, reused message ids and tasks without a proper end are reported.
//!
//! `Path::of(trace)` builds it from the model's path view (`causeway_model::PathView`,
//! whose threads are a process's lanes of execution: ADR 002): each task with its
//! REAL_TIME and CPU_TIME, messages paired by id (the first send with the first receive)
//! with their peer thread, size and LATENCY, and the path metrics REAL_TIME, CPU_TIME,
//! DEPTH, MESSAGES, THREADS and HOSTS. In Pip's words this is the reconciler.

use std::sync::Arc;

use causeway_model::{for_each_thread, PathEvent, SpanId, ThreadKey, Trace, TraceId};
use serde::Serialize;

/// What an event is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Kind {
    /// A task (span) began.
    TaskStart,
    /// A task ended.
    TaskEnd,
    /// A notice (span event).
    Notice,
    /// A message left.
    Send,
    /// A message arrived.
    Recv,
}

/// One event of a thread.
#[derive(Debug, Clone)]
pub struct Event {
    /// What it is.
    pub kind: Kind,
    /// The task's name or the notice's text; empty for messages.
    pub name: Arc<str>,
    /// Unix ns.
    pub time: u64,
    /// The span it belongs to.
    pub span: SpanId,
    /// For a task start: the task's duration (REAL_TIME).
    pub real_ns: u64,
    /// For a task start: its CPU time, when recorded (CPU_TIME).
    pub cpu_ns: Option<u64>,
    /// For a message: its id.
    pub message: u64,
    /// For a message: its size in bytes, when known (SIZE).
    pub size: Option<u64>,
    /// For a message: the thread at its other end, when that end is in the path.
    pub peer: Option<usize>,
    /// For a message: receive time less send time, when both ends are known (LATENCY).
    pub latency: Option<i64>,
}

/// One thread of a path.
#[derive(Debug, Clone)]
pub struct Thread {
    /// Where it ran.
    pub key: ThreadKey,
    /// Its events in order.
    pub events: Vec<Event>,
    /// For each task start, the index of its end (for other events, their own index).
    pub end_of: Vec<usize>,
}

impl Thread {
    /// The host, or the service when no host was recorded.
    pub fn host(&self) -> &str {
        if self.key.host.is_empty() {
            &self.key.service
        } else {
            &self.key.host
        }
    }

    /// Last event time less first.
    pub fn real_ns(&self) -> u64 {
        match (self.events.first(), self.events.last()) {
            (Some(a), Some(b)) => b.time.saturating_sub(a.time),
            _ => 0,
        }
    }

    /// CPU time of its outermost tasks, when any was recorded.
    pub fn cpu_ns(&self) -> Option<u64> {
        let mut depth = 0usize;
        let mut sum = None;
        for e in &self.events {
            match e.kind {
                Kind::TaskStart => {
                    if depth == 0 {
                        if let Some(c) = e.cpu_ns {
                            sum = Some(sum.unwrap_or(0) + c);
                        }
                    }
                    depth += 1;
                }
                Kind::TaskEnd => depth = depth.saturating_sub(1),
                _ => {}
            }
        }
        sum
    }
}

/// A problem the reconciler found in a path.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Problem {
    /// A send whose receive is not in the path.
    UnpairedSend {
        /// The message id.
        message: u64,
        /// The span that sent it.
        span: SpanId,
    },
    /// A receive whose send is not in the path.
    UnpairedRecv {
        /// The message id.
        message: u64,
        /// The span that received it.
        span: SpanId,
    },
    /// One message id sent or received more than once.
    ReusedMessageId {
        /// The message id.
        message: u64,
        /// How many sends and receives carry it.
        times: usize,
    },
    /// A task that never properly ended: its end precedes its start, or it ends after
    /// a task that started inside it on the same thread.
    TaskWithoutEnd {
        /// The span.
        span: SpanId,
        /// The task's name.
        name: String,
        /// Why.
        why: String,
    },
}

/// Path-wide metrics, for limits on recognizers and for aggregates.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PathMetrics {
    /// First event to last, ns.
    pub real_ns: u64,
    /// Sum of the threads' CPU time, when recorded.
    pub cpu_ns: Option<u64>,
    /// Deepest task nesting, across threads joined by RPCs (the span tree's depth).
    pub depth: u64,
    /// Messages sent.
    pub messages: u64,
    /// Threads.
    pub threads: u64,
    /// Distinct hosts.
    pub hosts: u64,
}

/// A path, ready to check.
#[derive(Debug, Clone)]
pub struct Path {
    /// The trace it was built from.
    pub trace_id: TraceId,
    /// Its threads, by time of their first event.
    pub threads: Vec<Thread>,
    /// First event time.
    pub start: u64,
    /// Its metrics.
    pub metrics: PathMetrics,
    /// What the reconciler found.
    pub problems: Vec<Problem>,
}

impl Path {
    /// Builds the path of a trace and reconciles it.
    pub fn of(trace: &Trace) -> Path {
        let mut problems = Vec::new();
        let mut threads: Vec<Thread> = Vec::new();
        let mut scratch = Scratch {
            open: Vec::new(),
            empty: Arc::from(""),
        };
        for_each_thread(trace, |key, events| {
            threads.push(thread(key, events, trace, &mut problems, &mut scratch))
        });
        // Pair the two ends of each message: by id, the first send and the first receive
        // in thread and event order.
        let mut by_message: foldhash::HashMap<u64, Ends> =
            foldhash::HashMap::with_capacity_and_hasher(threads.len() * 2, Default::default());
        for (ti, t) in threads.iter().enumerate() {
            for (ei, e) in t.events.iter().enumerate() {
                if let Kind::Send | Kind::Recv = e.kind {
                    let ends = by_message.entry(e.message).or_default();
                    let (first, count) = if e.kind == Kind::Send {
                        (&mut ends.send, &mut ends.sends)
                    } else {
                        (&mut ends.recv, &mut ends.recvs)
                    };
                    first.get_or_insert((ti, ei));
                    *count += 1;
                }
            }
        }
        // Problems are found in no particular order and reported by message id.
        let mut found: Vec<(u64, Problem)> = Vec::new();
        for (&message, ends) in &by_message {
            if ends.sends > 1 || ends.recvs > 1 {
                found.push((
                    message,
                    Problem::ReusedMessageId {
                        message,
                        times: ends.sends + ends.recvs,
                    },
                ));
            }
            match (ends.send, ends.recv) {
                (Some((st, se)), Some((rt, re))) => {
                    let latency =
                        threads[rt].events[re].time as i64 - threads[st].events[se].time as i64;
                    let size = threads[st].events[se].size.or(threads[rt].events[re].size);
                    for (t, e, peer) in [(st, se, rt), (rt, re, st)] {
                        let ev = &mut threads[t].events[e];
                        ev.peer = Some(peer);
                        ev.latency = Some(latency);
                        ev.size = size;
                    }
                }
                (Some((t, e)), None) => found.push((
                    message,
                    Problem::UnpairedSend {
                        message,
                        span: threads[t].events[e].span,
                    },
                )),
                (None, Some((t, e))) => found.push((
                    message,
                    Problem::UnpairedRecv {
                        message,
                        span: threads[t].events[e].span,
                    },
                )),
                (None, None) => {}
            }
        }
        // Stable: a reused id's problem stays before its unpaired end.
        found.sort_by_key(|(message, _)| *message);
        problems.extend(found.into_iter().map(|(_, p)| p));
        let start = threads
            .iter()
            .filter_map(|t| t.events.first().map(|e| e.time))
            .min()
            .unwrap_or(0);
        let end = threads
            .iter()
            .filter_map(|t| t.events.last().map(|e| e.time))
            .max()
            .unwrap_or(0);
        let cpu = threads
            .iter()
            .filter_map(Thread::cpu_ns)
            .reduce(|a, b| a + b);
        let hosts: foldhash::HashSet<&str> = threads.iter().map(Thread::host).collect();
        let metrics = PathMetrics {
            real_ns: end.saturating_sub(start),
            cpu_ns: cpu,
            depth: trace
                .depth_first()
                .iter()
                .map(|&(_, d)| d as u64 + 1)
                .max()
                .unwrap_or(0),
            messages: threads
                .iter()
                .flat_map(|t| &t.events)
                .filter(|e| e.kind == Kind::Send)
                .count() as u64,
            threads: threads.len() as u64,
            hosts: hosts.len() as u64,
        };
        Path {
            trace_id: trace.trace_id,
            threads,
            start,
            metrics,
            problems,
        }
    }
}

/// The ends of one message id in a path.
#[derive(Default)]
struct Ends {
    /// The first send and receive: thread and event.
    send: Option<(usize, usize)>,
    recv: Option<(usize, usize)>,
    sends: usize,
    recvs: usize,
}

/// What building the threads of one path reuses from thread to thread.
struct Scratch {
    /// Open tasks.
    open: Vec<usize>,
    /// The name of message events.
    empty: Arc<str>,
}

fn thread(
    key: ThreadKey,
    events: &mut Vec<PathEvent>,
    trace: &Trace,
    problems: &mut Vec<Problem>,
    scratch: &mut Scratch,
) -> Thread {
    let mut out: Vec<Event> = Vec::with_capacity(events.len());
    let open = &mut scratch.open;
    open.clear();
    let mut end_of: Vec<usize> = Vec::with_capacity(events.len());
    let empty = &scratch.empty;
    let event = |kind, name: Arc<str>, time, span| Event {
        kind,
        name,
        time,
        span,
        real_ns: 0,
        cpu_ns: None,
        message: 0,
        size: None,
        peer: None,
        latency: None,
    };
    for ev in events.drain(..) {
        let i = out.len();
        end_of.push(i);
        match ev {
            PathEvent::TaskStart {
                span_id,
                span,
                name,
                time,
            } => {
                let mut e = event(Kind::TaskStart, name.clone(), time, span_id);
                if let Some(span) = trace.spans.get(span) {
                    e.real_ns = span.end.saturating_sub(span.start);
                    e.cpu_ns = span.cpu_time;
                    if span.end < span.start {
                        problems.push(Problem::TaskWithoutEnd {
                            span: span_id,
                            name: name.to_string(),
                            why: "its end precedes its start".into(),
                        });
                    }
                }
                open.push(i);
                out.push(e);
            }
            PathEvent::TaskEnd {
                span_id,
                name,
                time,
            } => {
                match open.iter().rposition(|&o| out[o].span == span_id) {
                    Some(at) => {
                        // Tasks started inside this one and still open did not end in it.
                        for &inner in &open[at + 1..] {
                            problems.push(Problem::TaskWithoutEnd {
                                span: out[inner].span,
                                name: out[inner].name.to_string(),
                                why: format!("it was still running when {name:?}, which it runs inside, ended"),
                            });
                            end_of[inner] = i;
                        }
                        end_of[open[at]] = i;
                        open.truncate(at);
                    }
                    None => problems.push(Problem::TaskWithoutEnd {
                        span: span_id,
                        name: name.to_string(),
                        why: "it ends without having started on this thread".into(),
                    }),
                }
                out.push(event(Kind::TaskEnd, name, time, span_id));
            }
            PathEvent::Notice {
                span_id,
                text,
                time,
            } => out.push(event(Kind::Notice, text, time, span_id)),
            PathEvent::Send {
                message_id,
                span_id,
                size,
                time,
            } => {
                let mut e = event(Kind::Send, empty.clone(), time, span_id);
                e.message = message_id;
                e.size = size;
                out.push(e);
            }
            PathEvent::Recv {
                message_id,
                span_id,
                size,
                time,
            } => {
                let mut e = event(Kind::Recv, empty.clone(), time, span_id);
                e.message = message_id;
                e.size = size;
                out.push(e);
            }
        }
    }
    Thread {
        key,
        events: out,
        end_of,
    }
}
