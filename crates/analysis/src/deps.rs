//! The service dependency graph: who calls whom, how often, how often it fails and how
//! long it takes, accumulated over many traces.
//!
//! An edge is a parent span and a child span in different services, or a client span and
//! the server span it called (even within one service). It is `messaging` when the parent
//! is a producer or the child a consumer (one-way: its latency is the delivery delay, from
//! the producer's start to the consumer's start), else `rpc` (latency: the client span's
//! duration, or the child's when the parent is not a client span). A client or producer
//! span with no child elsewhere still makes an edge when it names its peer (`peer.service`,
//! `db.system` or `messaging.system`), so uninstrumented databases and brokers appear.
//! An edge's latency is kept in a log-linear histogram (`crate::histogram`, within 6.25%).
//!
//! By host ([`Dependencies::new`]), a node is a service on one host (`service@host`;
//! a span without a host, or a peer named by an attribute, stays its service): replicas
//! and co-located services show apart. From one source, an edge is counted when the span
//! that shows the call arrived (the child; the client span for a named peer) came from it:
//! the graph that instrumentation alone sees, or capture, or logs.

use std::collections::HashMap;
use std::sync::Arc;

use causeway_model::{Span, SpanKind, Trace};
use serde::Serialize;

use crate::histogram::{Histogram, Percentiles};

/// How the caller reaches the callee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum EdgeKind {
    /// Request and response.
    Rpc,
    /// One-way message, producer to consumer.
    Messaging,
}

#[derive(Debug, Clone, Default)]
struct EdgeTotals {
    calls: u64,
    errors: u64,
    latency: Histogram,
}

/// An accumulating dependency graph.
#[derive(Debug, Clone, Default)]
pub struct Dependencies {
    edges: HashMap<(Arc<str>, Arc<str>, EdgeKind), EdgeTotals>,
    traces: u64,
    by_host: bool,
    /// Only edges shown by spans of this source kind (`Source::kind`).
    source: Option<String>,
    /// By host, each node's service and host.
    placed: HashMap<Arc<str>, (Arc<str>, Arc<str>)>,
}

/// One edge of the graph.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Edge {
    /// The calling service.
    pub caller: String,
    /// The called service.
    pub callee: String,
    /// RPC or one-way message.
    pub kind: EdgeKind,
    /// Calls (or messages).
    pub calls: u64,
    /// Calls where either side recorded an error.
    pub errors: u64,
    /// Latency distribution, ns.
    pub latency: Percentiles,
}

/// One service (on one host, by host) of the graph.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Node {
    /// What edges call it: the service, or `service@host` by host.
    pub id: String,
    /// The service.
    pub service: String,
    /// Its host, by host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Calls it received over all edges.
    pub calls_in: u64,
    /// Of those, calls with an error.
    pub errors_in: u64,
    /// Calls it made.
    pub calls_out: u64,
}

/// The graph as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Graph {
    /// Traces looked at.
    pub traces: u64,
    /// Services, by name.
    pub nodes: Vec<Node>,
    /// Edges, most calls first.
    pub edges: Vec<Edge>,
}

/// The attributes that name an uninstrumented peer, in order of preference.
pub const PEER_KEYS: [&str; 3] = ["peer.service", "db.system", "messaging.system"];

impl Dependencies {
    /// A graph whose nodes are services on hosts when `by_host`, of the edges shown by
    /// spans of `source` (a `Source::kind`) when given.
    pub fn new(by_host: bool, source: Option<String>) -> Dependencies {
        Dependencies {
            by_host,
            source,
            ..Dependencies::default()
        }
    }

    /// Whether a span shows calls for this graph.
    fn shown_by(&self, s: &Span) -> bool {
        self.source
            .as_deref()
            .is_none_or(|kind| s.source.kind() == kind)
    }

    /// The node a span is a part of.
    fn node(&mut self, s: &Span) -> Arc<str> {
        if !self.by_host || s.host.is_empty() {
            return s.service.clone();
        }
        let id: Arc<str> = Arc::from(format!("{}@{}", s.service, s.host));
        self.placed
            .entry(id.clone())
            .or_insert_with(|| (s.service.clone(), s.host.clone()));
        id
    }

    /// Adds one trace's calls.
    pub fn add(&mut self, trace: &Trace) {
        self.traces += 1;
        let mut has_remote_child = vec![false; trace.spans.len()];
        for (c, p) in trace.parent.iter().enumerate() {
            let Some(p) = *p else { continue };
            let (parent, child) = (&trace.spans[p], &trace.spans[c]);
            // A producer's local children (the client call that carries the message, say)
            // are its own work, not a hop.
            let messaging = child.kind == SpanKind::Consumer
                || (parent.kind == SpanKind::Producer && parent.service != child.service);
            let rpc = parent.kind == SpanKind::Client && child.kind == SpanKind::Server;
            if !(messaging || rpc || parent.service != child.service) {
                continue;
            }
            has_remote_child[p] = true;
            if !self.shown_by(child) {
                continue;
            }
            let (kind, latency, error) = if messaging {
                (
                    EdgeKind::Messaging,
                    child.start.saturating_sub(parent.start),
                    child.is_error(),
                )
            } else {
                let latency = if parent.kind == SpanKind::Client {
                    parent.duration()
                } else {
                    child.duration()
                };
                (
                    EdgeKind::Rpc,
                    latency,
                    parent.is_error() || child.is_error(),
                )
            };
            let (from, to) = (self.node(parent), self.node(child));
            self.record(&from, &to, kind, latency, error);
        }
        for (i, s) in trace.spans.iter().enumerate() {
            if has_remote_child[i]
                || !matches!(s.kind, SpanKind::Client | SpanKind::Producer)
                || !self.shown_by(s)
            {
                continue;
            }
            if let Some(peer) = peer_of(s) {
                let kind = if s.kind == SpanKind::Producer {
                    EdgeKind::Messaging
                } else {
                    EdgeKind::Rpc
                };
                let from = self.node(s);
                self.record(&from, &Arc::from(peer), kind, s.duration(), s.is_error());
            }
        }
    }

    fn record(
        &mut self,
        caller: &Arc<str>,
        callee: &Arc<str>,
        kind: EdgeKind,
        ns: u64,
        error: bool,
    ) {
        let e = self
            .edges
            .entry((caller.clone(), callee.clone(), kind))
            .or_default();
        e.calls += 1;
        e.errors += u64::from(error);
        e.latency.record(ns);
    }

    /// Adds another graph's calls.
    pub fn merge(&mut self, other: Dependencies) {
        self.traces += other.traces;
        self.placed.extend(other.placed);
        for (k, v) in other.edges {
            let e = self.edges.entry(k).or_default();
            e.calls += v.calls;
            e.errors += v.errors;
            e.latency.merge(&v.latency);
        }
    }

    /// The graph: services and edges with their counts and latency.
    pub fn graph(&self) -> Graph {
        let mut edges: Vec<Edge> = self
            .edges
            .iter()
            .map(|((caller, callee, kind), t)| Edge {
                caller: caller.to_string(),
                callee: callee.to_string(),
                kind: *kind,
                calls: t.calls,
                errors: t.errors,
                latency: t.latency.percentiles(),
            })
            .collect();
        edges.sort_by(|a, b| {
            b.calls
                .cmp(&a.calls)
                .then_with(|| (&a.caller, &a.callee, a.kind).cmp(&(&b.caller, &b.callee, b.kind)))
        });
        let mut nodes: std::collections::BTreeMap<&str, Node> = Default::default();
        for e in &edges {
            for name in [&e.caller, &e.callee] {
                nodes.entry(name).or_insert_with(|| {
                    let (service, host) = match self.placed.get(name.as_str()) {
                        Some((service, host)) => (service.to_string(), Some(host.to_string())),
                        None => (name.clone(), None),
                    };
                    Node {
                        id: name.clone(),
                        service,
                        host,
                        calls_in: 0,
                        errors_in: 0,
                        calls_out: 0,
                    }
                });
            }
            if let Some(n) = nodes.get_mut(e.callee.as_str()) {
                n.calls_in += e.calls;
                n.errors_in += e.errors;
            }
            if let Some(n) = nodes.get_mut(e.caller.as_str()) {
                n.calls_out += e.calls;
            }
        }
        Graph {
            traces: self.traces,
            nodes: nodes.into_values().collect(),
            edges,
        }
    }
}

fn peer_of(s: &Span) -> Option<&str> {
    PEER_KEYS
        .iter()
        .find_map(|k| s.attribute(k).and_then(|v| v.as_str()))
        .filter(|p| !p.is_empty())
}
