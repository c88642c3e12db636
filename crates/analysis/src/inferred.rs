//! Paths inferred from black-box messages (`causeway infer`), summarised as WAP5 draws
//! them: path patterns with their count and expected count (the sum of the instances'
//! probabilities), each hop with its mean network delay and its sender's mean delay
//! before sending it, and each node's delay histogram.
//!
//! An inferred trace has a server (or consumer) span per request at its receiver, under the
//! caller's client span (see `causeway-blackbox`'s `traces`): the server span starts at the
//! receipt and names the sender (`net.peer.name`), the send time (`message.send_ns`), the
//! span of the message that caused it (`causeway.cause`: a node's delay runs from that
//! receipt, else from the parent's), and its reply's send and receipt
//! (`message.reply.send_ns`, `message.reply.recv_ns`, `causeway.reply.cause`): each
//! request and each reply is a hop, as WAP5 draws them. A receiver that was not captured is
//! marked `causeway.untraced` and timed on the sender's clock. Of a trace inferred paths
//! joined (see `causeway-blackbox`'s `join`), the inferred spans are the path; traces
//! without any are left out.
//!
//! `GET /api/inferred` (the server's `analyses` endpoints) runs this over a bulk scan of
//! the window, grouping the traces by shape: per pattern the count, the expected count,
//! and per hop the mean send and receive offsets from the path's first message, the
//! network delay and the sender's delay; per node a power-of-two histogram of delays.

use std::collections::{BTreeMap, HashMap};

use causeway_model::{attributes, Source, Span, SpanId, SpanKind, Trace, TraceId, Value};
use serde::Serialize;

/// Powers of two of nanoseconds a node delay histogram spans.
const BUCKETS: usize = 64;

/// A running mean.
#[derive(Clone, Copy, Debug, Default)]
struct Mean {
    sum: f64,
    n: u64,
}

impl Mean {
    fn add(&mut self, v: Option<i64>) {
        if let Some(v) = v {
            self.sum += v as f64;
            self.n += 1;
        }
    }
    fn merge(&mut self, o: Mean) {
        self.sum += o.sum;
        self.n += o.n;
    }
    fn get(self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// One message of a pattern, at the same place in every instance.
#[derive(Clone, Debug, Default)]
struct HopTotals {
    src: String,
    dst: String,
    parent: Option<usize>,
    untraced: bool,
    send: Mean,
    recv: Mean,
    network: Mean,
    node: Mean,
}

#[derive(Clone, Debug, Default)]
struct PatternTotals {
    count: u64,
    expected: f64,
    max_probability: f64,
    example: Option<TraceId>,
    hops: Vec<HopTotals>,
}

/// The accumulator over a window's traces.
#[derive(Clone, Debug, Default)]
pub struct InferredPaths {
    patterns: HashMap<String, PatternTotals>,
    nodes: BTreeMap<String, [u64; BUCKETS]>,
    traces: u64,
}

/// One message of an inferred pattern, with mean times.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InferredHop {
    /// The sending node.
    pub src: String,
    /// The receiving node.
    pub dst: String,
    /// The hop (index into the pattern's hops) of the request this one was sent for.
    pub parent: Option<usize>,
    /// The receiver was not captured (WAP5 draws it as a diamond).
    pub untraced: bool,
    /// Mean send time, from the path's first message (ns).
    pub send_offset_ns: Option<f64>,
    /// Mean receipt time, from the path's first message (ns).
    pub recv_offset_ns: Option<f64>,
    /// Mean network delay: receipt minus send, across two clocks.
    pub network_ns: Option<f64>,
    /// Mean delay at the sender: from its cause's receipt (else its parent's) to this
    /// send (one clock).
    pub node_delay_ns: Option<f64>,
}

/// An inferred path pattern.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InferredPattern {
    /// `src>dst` per message, children in brackets (as `causeway infer` prints).
    pub shape: String,
    /// Instances.
    pub count: u64,
    /// The sum of the instances' probabilities.
    pub expected: f64,
    /// The most probable instance's probability.
    pub max_probability: f64,
    /// The most probable instance.
    pub example: Option<TraceId>,
    /// Messages in depth-first order, children ordered by shape.
    pub hops: Vec<InferredHop>,
}

/// A power-of-two bucket of node delays.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DelayBucket {
    /// The least delay in it (ns).
    pub low_ns: u64,
    /// The first delay past it (ns).
    pub high_ns: u64,
    /// Delays in it.
    pub count: u64,
}

/// One node's delays between a message's receipt and a send it caused.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeDelays {
    /// The node (as inferred spans name their service).
    pub node: String,
    /// Delays measured.
    pub count: u64,
    /// From the first to the last non-empty bucket.
    pub buckets: Vec<DelayBucket>,
}

/// What a window's inferred traces show.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InferredSummary {
    /// Inferred traces seen.
    pub traces: u64,
    /// Distinct patterns (all of them, not only those listed).
    pub pattern_count: usize,
    /// The patterns by expected count, most first.
    pub patterns: Vec<InferredPattern>,
    /// Each node's delays, by name.
    pub nodes: Vec<NodeDelays>,
}

/// A node's program: `program[pid]@host` as reconciliation names a process, shortened
/// the way inferred spans name their service.
fn program(node: &str) -> &str {
    node.split_once('[').map_or(node, |(p, _)| p)
}

fn int(s: &Span, key: &str) -> Option<i64> {
    match s.attribute(key)? {
        Value::I64(v) => Some(*v),
        Value::Str(v) => v.parse().ok(),
        _ => None,
    }
}

/// One message as the spans tell it: a request (its server or consumer span), or a reply
/// (the `message.reply.*` of the server span it answers).
struct Hop<'a> {
    src: &'a str,
    dst: &'a str,
    send: Option<i64>,
    recv: Option<i64>,
    /// Where it sorts among its siblings: its receipt, else its send.
    at: i64,
    /// The hop of the request it was sent for.
    parent: Option<usize>,
    /// The hop after whose receipt it was sent: `Some(None)` when named but not in the
    /// trace; `None` (spans written before causes were) falls back to the parent.
    cause: Option<Option<usize>>,
}

impl Hop<'_> {
    fn untraced(&self) -> bool {
        self.recv.is_none()
    }
}

fn is_untraced(span: &Span) -> bool {
    matches!(
        span.attribute(attributes::UNTRACED),
        Some(Value::Bool(true))
    ) || matches!(span.attribute(attributes::UNTRACED), Some(Value::Str(s)) if s == "true")
}

fn text<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    match span.attribute(key)? {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

/// The messages of an inferred trace: a hop per request, and one per reply.
fn hops(trace: &Trace) -> Vec<Hop<'_>> {
    let spans = &trace.spans;
    // A caller's client (or producer) span is the other end of its server span's hop.
    let caller_side = |i: usize| matches!(spans[i].kind, SpanKind::Client | SpanKind::Producer);
    let mut request: Vec<Option<usize>> = vec![None; spans.len()];
    let mut reply: Vec<Option<usize>> = vec![None; spans.len()];
    let mut out = Vec::with_capacity(spans.len());
    let inferred = |i: usize| matches!(spans[i].source, Source::Inferred { .. });
    for (i, s) in spans.iter().enumerate() {
        if caller_side(i) {
            continue;
        }
        let (src, send, recv, replied) = if inferred(i) {
            let src = text(s, attributes::NET_PEER_NAME).map_or("?", program);
            let recv = (!is_untraced(s)).then_some(s.start as i64);
            let send = int(s, attributes::MESSAGE_SEND_NS);
            let replied = (
                int(s, attributes::REPLY_SEND_NS),
                int(s, attributes::REPLY_RECV_NS),
            );
            (src, send, recv, replied)
        } else {
            // Of a joined trace's instrumented spans, only a server an inferred call
            // reached is a hop: the join put it in place of the call's inferred server
            // span, so the call's ends are its caller's span and its own.
            let Some(p) = trace.parent[i].filter(|&p| caller_side(p) && inferred(p)) else {
                continue;
            };
            let caller = &spans[p];
            let replied = match s.kind {
                SpanKind::Server => (Some(s.end as i64), Some(caller.end as i64)),
                _ => (None, None),
            };
            let send = Some(caller.start as i64);
            (&*caller.service, send, Some(s.start as i64), replied)
        };
        request[i] = Some(out.len());
        out.push(Hop {
            src,
            dst: &s.service,
            send,
            recv,
            at: s.start as i64,
            parent: None,
            cause: None,
        });
        let (sent, received) = replied;
        if sent.is_some() || received.is_some() {
            reply[i] = Some(out.len());
            out.push(Hop {
                src: &s.service,
                dst: src,
                send: sent,
                recv: received,
                at: received.or(sent).unwrap_or(s.end as i64),
                parent: request[i],
                cause: None,
            });
        }
    }
    // What each span's id stands for as a cause: a server span its request's receipt, a
    // client span its reply's.
    let mut receipt: HashMap<SpanId, usize> = HashMap::new();
    for (i, s) in spans.iter().enumerate() {
        if let Some(h) = request[i] {
            receipt.insert(s.span_id, h);
        }
        if let (Some(h), Some(p)) = (reply[i], trace.parent[i]) {
            if caller_side(p) {
                receipt.insert(spans[p].span_id, h);
            }
        }
    }
    let named = |s: &Span, key: &str| match s.attribute(key) {
        // A cause named but not found gives no delay (not the parent's: that would be
        // the whole handling so far).
        Some(Value::Str(id)) => Some(
            id.parse::<SpanId>()
                .ok()
                .and_then(|id| receipt.get(&id).copied()),
        ),
        _ => None,
    };
    for (i, s) in spans.iter().enumerate() {
        let Some(h) = request[i] else { continue };
        // The nearest hop above, past the caller's own span; assembled traces have no
        // cycles, and the walk is bounded by the spans anyway.
        let mut up = trace.parent[i];
        for _ in 0..spans.len() {
            match up {
                Some(p) if request[p].is_none() => up = trace.parent[p],
                _ => break,
            }
        }
        out[h].parent = up.and_then(|p| request[p]);
        out[h].cause = named(s, attributes::CAUSE);
        if let Some(r) = reply[i] {
            out[r].cause = named(s, attributes::REPLY_CAUSE);
        }
    }
    out
}

fn bucket(ns: i64) -> usize {
    (64 - (ns.max(0) as u64).leading_zeros() as usize).min(BUCKETS - 1)
}

impl InferredPaths {
    /// Adds the inferred part of one trace (ignored when it has none).
    pub fn add(&mut self, trace: &Trace) {
        let probability = trace
            .spans
            .iter()
            .filter_map(|s| match s.source {
                Source::Inferred { confidence } => Some(f64::from(confidence)),
                _ => None,
            })
            .reduce(f64::max);
        let Some(probability) = probability else {
            return;
        };
        self.traces += 1;
        let hops = hops(trace);
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); hops.len()];
        let mut roots = Vec::new();
        for (i, h) in hops.iter().enumerate() {
            match h.parent {
                Some(p) if p != i => children[p].push(i),
                _ => roots.push(i),
            }
        }
        // Each hop's subtree shape, children first: an explicit post-order, since the
        // input decides how deep trees go. A span reached twice (a cycle) is cut.
        let mut shape: Vec<Option<String>> = vec![None; hops.len()];
        let mut seen = vec![false; hops.len()];
        for &r in &roots {
            let mut stack = vec![(r, false)];
            while let Some((i, expanded)) = stack.pop() {
                if expanded {
                    let mut kids: Vec<(&str, i64, usize)> = children[i]
                        .iter()
                        .filter_map(|&c| Some((shape[c].as_deref()?, hops[c].at, c)))
                        .collect();
                    kids.sort();
                    let mut s = format!("{}>{}", hops[i].src, hops[i].dst);
                    if !kids.is_empty() {
                        let inner: Vec<&str> = kids.iter().map(|k| k.0).collect();
                        s = format!("{s}[{}]", inner.join(","));
                    }
                    children[i] = kids.iter().map(|k| k.2).collect();
                    shape[i] = Some(s);
                } else if !seen[i] {
                    seen[i] = true;
                    stack.push((i, true));
                    stack.extend(children[i].iter().map(|&c| (c, false)));
                }
            }
        }
        roots.sort_by(|&a, &b| (&shape[a], hops[a].at).cmp(&(&shape[b], hops[b].at)));
        let key = roots
            .iter()
            .filter_map(|&r| shape[r].as_deref())
            .collect::<Vec<_>>()
            .join(" + ");
        // Depth-first order, children as sorted: the same place in every instance.
        let mut order: Vec<(usize, Option<usize>)> = Vec::with_capacity(hops.len());
        let mut stack: Vec<(usize, Option<usize>)> =
            roots.iter().rev().map(|&r| (r, None)).collect();
        let mut placed = vec![false; hops.len()];
        while let Some((i, parent)) = stack.pop() {
            if std::mem::replace(&mut placed[i], true) {
                continue;
            }
            let at = order.len();
            order.push((i, parent));
            stack.extend(children[i].iter().rev().map(|&c| (c, Some(at))));
        }
        let origin = order
            .iter()
            .filter_map(|&(i, _)| hops[i].send.or(hops[i].recv))
            .min()
            .unwrap_or(0);
        let p = self.patterns.entry(key).or_default();
        if p.hops.is_empty() {
            p.hops = order
                .iter()
                .map(|&(i, parent)| HopTotals {
                    src: hops[i].src.to_string(),
                    dst: hops[i].dst.to_string(),
                    parent,
                    untraced: hops[i].untraced(),
                    ..HopTotals::default()
                })
                .collect();
        }
        p.count += 1;
        p.expected += probability;
        if probability >= p.max_probability {
            p.max_probability = probability;
            p.example = Some(trace.trace_id);
        }
        for (place, &(i, parent)) in order.iter().enumerate() {
            let hop = &hops[i];
            let from = hop.cause.unwrap_or_else(|| parent.map(|q| order[q].0));
            let node_delay = from.and_then(|c| Some(hop.send? - hops[c].recv?));
            let totals = &mut p.hops[place];
            totals.send.add(hop.send.map(|t| t - origin));
            totals.recv.add(hop.recv.map(|t| t - origin));
            totals
                .network
                .add(hop.send.zip(hop.recv).map(|(s, r)| r - s));
            totals.node.add(node_delay);
            if let Some(d) = node_delay {
                self.nodes
                    .entry(hop.src.to_string())
                    .or_insert([0; BUCKETS])[bucket(d)] += 1;
            }
        }
    }

    /// Adds another accumulator's traces.
    pub fn merge(&mut self, other: InferredPaths) {
        self.traces += other.traces;
        for (key, o) in other.patterns {
            let p = self.patterns.entry(key).or_default();
            if p.hops.is_empty() {
                *p = o;
                continue;
            }
            p.count += o.count;
            p.expected += o.expected;
            if o.max_probability > p.max_probability {
                p.max_probability = o.max_probability;
                p.example = o.example;
            }
            for (a, b) in p.hops.iter_mut().zip(o.hops) {
                a.send.merge(b.send);
                a.recv.merge(b.recv);
                a.network.merge(b.network);
                a.node.merge(b.node);
            }
        }
        for (node, counts) in other.nodes {
            let mine = self.nodes.entry(node).or_insert([0; BUCKETS]);
            for (a, b) in mine.iter_mut().zip(counts) {
                *a += b;
            }
        }
    }

    /// The `top` patterns by expected count, and every node's delays.
    pub fn summary(self, top: usize) -> InferredSummary {
        let pattern_count = self.patterns.len();
        let mut patterns: Vec<InferredPattern> = self
            .patterns
            .into_iter()
            .map(|(shape, p)| InferredPattern {
                shape,
                count: p.count,
                expected: p.expected,
                max_probability: p.max_probability,
                example: p.example,
                hops: p
                    .hops
                    .into_iter()
                    .map(|h| InferredHop {
                        src: h.src,
                        dst: h.dst,
                        parent: h.parent,
                        untraced: h.untraced,
                        send_offset_ns: h.send.get(),
                        recv_offset_ns: h.recv.get(),
                        network_ns: h.network.get(),
                        node_delay_ns: h.node.get(),
                    })
                    .collect(),
            })
            .collect();
        patterns.sort_by(|a, b| {
            b.expected
                .total_cmp(&a.expected)
                .then(a.shape.cmp(&b.shape))
        });
        patterns.truncate(top);
        let nodes = self
            .nodes
            .into_iter()
            .map(|(node, counts)| {
                let first = counts.iter().position(|&c| c > 0).unwrap_or(0);
                let last = counts.iter().rposition(|&c| c > 0).unwrap_or(0);
                NodeDelays {
                    node,
                    count: counts.iter().sum(),
                    buckets: (first..=last)
                        .map(|b| DelayBucket {
                            low_ns: if b == 0 { 0 } else { 1 << (b - 1) },
                            high_ns: 1 << b,
                            count: counts[b],
                        })
                        .collect(),
                }
            })
            .collect();
        InferredSummary {
            traces: self.traces,
            pattern_count,
            patterns,
            nodes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::KeyValue;

    const MS: u64 = 1_000_000;

    /// A client's request to web, web's call to an uncaptured db, db's reply; web's
    /// delay before calling db is `think` ms.
    fn path(n: u128, t: u64, think: u64, p: f32) -> Trace {
        let trace = TraceId::new(n).unwrap();
        let id = |k: u64| SpanId::new(k).unwrap();
        let span = |k, parent, from: &str, to: &str, sent: u64, received: Option<u64>| {
            let start = received.unwrap_or(sent);
            let mut s = Span::new(
                trace,
                id(k),
                parent,
                format!("from {from}"),
                to,
                start,
                start + MS,
            );
            s.source = Source::Inferred { confidence: p };
            s.attributes.push(KeyValue::new("net.peer.name", from));
            s.attributes
                .push(KeyValue::new("message.send_ns", sent as i64));
            if received.is_none() {
                s.attributes.push(KeyValue::new("causeway.untraced", true));
            }
            s
        };
        let spans = vec![
            span(1, None, "curl[7]@h", "web", t, Some(t + MS)),
            span(2, Some(id(1)), "web[9]@h", "db", t + (1 + think) * MS, None),
            span(
                3,
                Some(id(2)),
                "db",
                "web",
                t + (2 + think) * MS,
                Some(t + (3 + think) * MS),
            ),
        ];
        Trace::assemble(trace, spans)
    }

    #[test]
    fn instances_of_one_shape_make_one_pattern_with_mean_delays() {
        let mut a = InferredPaths::default();
        a.add(&path(1, 0, 2, 0.5));
        let mut b = InferredPaths::default();
        b.add(&path(2, 100 * MS, 4, 0.75));
        // An instrumented trace is not an inferred path.
        let mut plain = path(3, 0, 1, 1.0);
        for s in &mut plain.spans {
            s.source = Source::Instrumented;
        }
        b.add(&plain);
        a.merge(b);
        let s = a.summary(10);
        assert_eq!(s.traces, 2);
        assert_eq!(s.patterns.len(), 1);
        let p = &s.patterns[0];
        assert_eq!(p.shape, "curl>web[web>db[db>web]]");
        assert_eq!(p.count, 2);
        assert!((p.expected - 1.25).abs() < 1e-6, "{}", p.expected);
        assert_eq!(p.example, TraceId::new(2));
        let web_to_db = &p.hops[1];
        assert_eq!(
            (web_to_db.src.as_str(), web_to_db.dst.as_str()),
            ("web", "db")
        );
        assert_eq!(web_to_db.parent, Some(0));
        assert!(web_to_db.untraced);
        // web waited 2 and 4 ms before calling db.
        assert_eq!(web_to_db.node_delay_ns, Some(3.0 * MS as f64));
        assert_eq!(p.hops[0].network_ns, Some(MS as f64));
        assert_eq!(p.hops[2].recv_offset_ns, Some(6.0 * MS as f64));
        let web = s
            .nodes
            .iter()
            .find(|n| n.node == "web")
            .expect("web's delays");
        assert_eq!(web.count, 2);
        assert_eq!(web.buckets.iter().map(|b| b.count).sum::<u64>(), 2);
        assert!(web.buckets[0].low_ns <= 2 * MS && web.buckets.last().unwrap().high_ns > 4 * MS);
    }

    #[test]
    fn the_inferred_part_of_a_joined_trace_is_a_path() {
        // curl's request to web was instrumented; web's call to db was inferred.
        let mut joined = path(4, 0, 1, 0.5);
        joined.spans[0].source = Source::Instrumented;
        let mut a = InferredPaths::default();
        a.add(&joined);
        let s = a.summary(10);
        assert_eq!(s.traces, 1);
        assert_eq!(s.patterns[0].shape, "web>db[db>web]");
        assert_eq!(s.patterns[0].hops[0].parent, None);
    }

    #[test]
    fn an_instrumented_server_an_inferred_call_reached_ends_that_calls_hop() {
        // A captured edge proxy (inferred: its server span and its call) in front of an
        // instrumented frontend, which the join made the call's child.
        let trace = TraceId::new(9).unwrap();
        let id = |k: u64| SpanId::new(k).unwrap();
        let mut server = Span::new(trace, id(1), None, "from lb", "edge", 0, 10 * MS);
        server.kind = SpanKind::Server;
        server.attributes.push(KeyValue::new("net.peer.name", "lb"));
        server
            .attributes
            .push(KeyValue::new("message.reply.send_ns", (10 * MS) as i64));
        let mut call = Span::new(trace, id(2), Some(id(1)), "to frontend", "edge", MS, 9 * MS);
        call.kind = SpanKind::Client;
        for s in [&mut server, &mut call] {
            s.source = Source::Inferred { confidence: 0.9 };
        }
        let mut frontend = Span::new(
            trace,
            id(3),
            Some(id(2)),
            "GET /",
            "frontend",
            2 * MS,
            8 * MS,
        );
        frontend.kind = SpanKind::Server;
        let mut inner = Span::new(
            trace,
            id(4),
            Some(id(3)),
            "render",
            "frontend",
            3 * MS,
            4 * MS,
        );
        inner.kind = SpanKind::Server;
        let mut a = InferredPaths::default();
        a.add(&Trace::assemble(trace, vec![server, call, frontend, inner]));
        let s = a.summary(10);
        assert_eq!(
            s.patterns[0].shape,
            "lb>edge[edge>frontend[frontend>edge],edge>lb]"
        );
        let hop = &s.patterns[0].hops[1];
        assert_eq!((hop.src.as_str(), hop.dst.as_str()), ("edge", "frontend"));
        assert_eq!(hop.network_ns, Some(MS as f64));
    }

    #[test]
    fn a_node_delay_runs_from_the_cause_not_the_request() {
        // web answers curl 1 ms after db's reply: the answer's parent is the request,
        // its cause db's reply.
        let base = path(1, 0, 2, 0.5);
        let mut answer = Span::new(
            base.trace_id,
            SpanId::new(4).unwrap(),
            Some(SpanId::new(1).unwrap()),
            "from web".to_string(),
            "curl",
            7 * MS,
            7 * MS,
        );
        answer.source = Source::Inferred { confidence: 0.5 };
        answer
            .attributes
            .push(KeyValue::new("net.peer.name", "web[9]@h"));
        answer
            .attributes
            .push(KeyValue::new("message.send_ns", (6 * MS) as i64));
        answer.attributes.push(KeyValue::new(
            "causeway.cause",
            SpanId::new(3).unwrap().to_string(),
        ));
        let mut spans = base.spans;
        spans.push(answer);
        let mut a = InferredPaths::default();
        a.add(&Trace::assemble(base.trace_id, spans));
        let p = &a.summary(10).patterns[0];
        assert_eq!(p.shape, "curl>web[web>curl,web>db[db>web]]");
        let answer = p.hops.iter().find(|h| h.dst == "curl").expect("the answer");
        assert_eq!(answer.parent, Some(0));
        // db's reply reached web at 5 ms; the request at 1 ms.
        assert_eq!(answer.node_delay_ns, Some(MS as f64));
    }
}
