//! Inferred path instances as traces of the common model, so that search, patterns,
//! dependencies, the critical path, the trace view and expectations work on them.
//!
//! A request and its reply are one RPC, as instrumented ones are: a client span at the
//! caller, from the send to the reply's receipt, and under it a server span at the
//! receiver, from the receipt to the reply's send (`message.reply.*` on it say when the
//! reply was sent and received, and what caused it). A message with no reply is one-way: a
//! producer span and a consumer span. A reply is the message sent for a request back to its
//! sender, between the same two endpoints. A caller that was not captured (a client outside)
//! has no client span; a receiver that was not captured gets the caller's clock: from the
//! send to the reply's receipt. A call's client span hangs under the server span of the
//! request its caller was handling; `causeway.cause` names the span of the message that
//! caused this one (WAP5's sense), a call's client span standing for its reply. Spans are
//! `Source::Inferred` with the instance's probability as confidence; the message's
//! endpoints, size and send time are attributes.
//!
//! `causeway infer --collector` posts these spans to the native ingest like any client
//! (`crates/cli/src/import.rs`); the trace view shows a trace's source in its header and
//! each span's in its detail.

use foldhash::HashMap;
use std::sync::Arc;

use causeway_model::{attributes, KeyValue, Source, Span, SpanId, SpanKind, TraceId};

use crate::link::Assignment;
use crate::reconcile::{connection_of, Message, MessageId, MessageIndex};

/// A node name's service, host and pid: `program[pid]@host` as reconciliation names a
/// captured process, else the name as the service.
fn parse_node(node: &str) -> (String, String, u32) {
    let parsed = node.split_once('[').and_then(|(program, rest)| {
        let (pid, host) = rest.split_once("]@")?;
        Some((program.to_string(), host.to_string(), pid.parse().ok()?))
    });
    parsed.unwrap_or_else(|| (node.to_string(), String::new(), 0))
}

/// Whether `reply` goes back to `request`'s sender between the same two endpoints.
fn answers(reply: &Message, request: &Message) -> bool {
    reply.src == request.dst
        && reply.dst == request.src
        && reply.src_ep == request.dst_ep
        && reply.dst_ep == request.src_ep
}

/// A message's attributes at one of its ends: the other end (`peer`: node and endpoint),
/// this end's endpoint, and the size.
/// An HTTP/2 message's endpoints name its stream (`crate::reconcile::connection_of`): the
/// addresses are the connection's, and the stream is an attribute of its own.
fn endpoints((node, endpoint): (&str, &str), own: &str, bytes: u64) -> Vec<KeyValue> {
    let mut kvs = vec![
        KeyValue::new(attributes::NET_PEER_NAME, node),
        KeyValue::new(attributes::NET_SOCK_PEER_ADDR, connection_of(endpoint)),
        KeyValue::new(attributes::NET_SOCK_HOST_ADDR, connection_of(own)),
        KeyValue::new(attributes::MESSAGE_BYTES, bytes as i64),
    ];
    if let Some(stream) = own.split_once('#').and_then(|(_, s)| s.parse::<i64>().ok()) {
        kvs.push(KeyValue::new(HTTP2_STREAM, stream));
    }
    kvs
}

/// The HTTP/2 stream an inferred call travelled on.
pub const HTTP2_STREAM: &str = "causeway.http2.stream";

/// A span at `node` of the inferred trace `trace`.
fn inferred_span(
    (trace, id, parent): (TraceId, SpanId, Option<SpanId>),
    name: String,
    node: &str,
    (start, end): (i64, i64),
    probability: f64,
) -> Span {
    let (service, host, pid) = parse_node(node);
    let start = start.max(0);
    let mut span = Span::new(
        trace,
        id,
        parent,
        name,
        &service,
        start as u64,
        end.max(start) as u64,
    );
    span.host = Arc::from(host.as_str());
    span.pid = pid;
    span.source = Source::Inferred {
        confidence: probability as f32,
    };
    span
}

/// The spans of every inferred trace. `salt` keeps ids of separate runs apart.
pub fn spans(messages: &[Message], assignments: &[Assignment], salt: u64) -> Vec<Span> {
    let index = MessageIndex::of(messages);
    let by_id: HashMap<&MessageId, &Assignment> = assignments.iter().map(|a| (&a.id, a)).collect();
    let assigned: Vec<Option<&Assignment>> =
        messages.iter().map(|m| by_id.get(&m.id).copied()).collect();
    let parent: Vec<Option<usize>> = assigned
        .iter()
        .map(|a| a.and_then(|a| a.parent.as_ref()).and_then(|p| index.get(p)))
        .collect();
    // Each request's replies (the latest is the one the caller waited for), and the latest
    // time each message's children were sent (or, unsent, received).
    let mut is_reply = vec![false; messages.len()];
    let mut reply: Vec<Option<usize>> = vec![None; messages.len()];
    let mut reply_bytes = vec![0u64; messages.len()];
    let mut last_child: Vec<Option<i64>> = vec![None; messages.len()];
    for (child, p) in parent.iter().enumerate() {
        let Some(p) = *p else { continue };
        let m = &messages[child];
        if answers(m, &messages[p]) {
            is_reply[child] = true;
            reply_bytes[p] += m.bytes;
            let time = |r: usize| messages[r].send_ns.get().or(messages[r].recv_ns.get());
            if reply[p].is_none_or(|r| time(r) <= time(child)) {
                reply[p] = Some(child);
            }
        }
        let at = if messages[p].recv_ns.get().is_some() {
            m.send_ns.get().or(m.recv_ns.get())
        } else {
            // An uncaptured receiver's span ends when its reply arrived.
            m.recv_ns.get().or(m.send_ns.get())
        };
        last_child[p] = last_child[p].max(at);
    }
    let server_id = |i: usize| {
        SpanId::new(salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64 + 1)).or(SpanId::new(1))
    };
    // The top bit apart from every server span id of the run.
    let client_id = |i: usize| server_id(i).and_then(|s| SpanId::new(s.get() ^ (1 << 63)));
    // The span a message's receipt is: a reply's is its call's client span.
    let receipt_span = |c: usize| match (is_reply[c], parent[c]) {
        (true, Some(call)) => client_id(call),
        _ => server_id(c),
    };
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let Some(a) = assigned[i] else { continue };
        if is_reply[i] {
            continue;
        }
        let (Some(trace_id), Some(server)) = (
            TraceId::new((u128::from(salt) << 64) | u128::from(a.trace)),
            server_id(i),
        ) else {
            continue;
        };
        let answer = reply[i].map(|r| &messages[r]);
        let caller_parent = parent[i].and_then(server_id);
        let client = m.send_ns.get().zip(client_id(i));
        if let Some((sent, id)) = client {
            let end = answer.and_then(|r| r.recv_ns.get()).unwrap_or(sent);
            let mut span = inferred_span(
                (trace_id, id, caller_parent),
                format!("to {}", parse_node(&m.dst).0),
                &m.src,
                (sent, end),
                a.probability,
            );
            span.kind = if answer.is_some() {
                SpanKind::Client
            } else {
                SpanKind::Producer
            };
            span.attributes
                .extend(endpoints((&m.dst, &m.dst_ep), &m.src_ep, m.bytes));
            out.push(span);
        }
        let start = m.recv_ns.get().or(m.send_ns.get()).unwrap_or(0);
        let end = last_child[i].unwrap_or(start);
        let mut span = inferred_span(
            (trace_id, server, client.map(|c| c.1).or(caller_parent)),
            format!("from {}", parse_node(&m.src).0),
            &m.dst,
            (start, end),
            a.probability,
        );
        span.kind = if answer.is_some() {
            SpanKind::Server
        } else {
            SpanKind::Consumer
        };
        span.attributes
            .extend(endpoints((&m.src, &m.src_ep), &m.dst_ep, m.bytes));
        if let Some(sent) = m.send_ns.get() {
            span.attributes
                .push(KeyValue::new(attributes::MESSAGE_SEND_NS, sent));
        }
        if m.recv_ns.get().is_none() {
            span.attributes
                .push(KeyValue::new(attributes::UNTRACED, true));
        }
        let cause = a.cause.as_ref().and_then(|c| index.get(c));
        if let Some(cause) = cause.and_then(receipt_span) {
            span.attributes
                .push(KeyValue::new(attributes::CAUSE, cause.to_string()));
        }
        if let (Some(r), Some(answer)) = (reply[i], answer) {
            if let Some(sent) = answer.send_ns.get() {
                span.attributes
                    .push(KeyValue::new(attributes::REPLY_SEND_NS, sent));
            }
            if let Some(received) = answer.recv_ns.get() {
                span.attributes
                    .push(KeyValue::new(attributes::REPLY_RECV_NS, received));
            }
            span.attributes.push(KeyValue::new(
                attributes::REPLY_BYTES,
                reply_bytes[i] as i64,
            ));
            let cause = assigned[r]
                .and_then(|a| a.cause.as_ref())
                .and_then(|c| index.get(c));
            if let Some(cause) = cause.and_then(receipt_span) {
                span.attributes
                    .push(KeyValue::new(attributes::REPLY_CAUSE, cause.to_string()));
            }
        }
        out.push(span);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::MaybeNs;

    #[test]
    fn a_request_through_two_nodes_is_a_parent_and_a_child_span() {
        let messages = vec![
            Message {
                id: MessageId::Int(1),
                src: "CLIENT".into(),
                src_ep: "1.1.1.1:4000".into(),
                dst: "web[10]@h1".into(),
                dst_ep: "2.2.2.2:80".into(),
                send_ns: MaybeNs::NONE,
                recv_ns: Some(1_000).into(),
                bytes: 10,
            },
            Message {
                id: MessageId::Int(2),
                src: "web[10]@h1".into(),
                src_ep: "2.2.2.2:5000".into(),
                dst: "db".into(),
                dst_ep: "3.3.3.3:5432".into(),
                send_ns: Some(2_000).into(),
                recv_ns: MaybeNs::NONE,
                bytes: 20,
            },
            Message {
                id: MessageId::Int(3),
                src: "db".into(),
                src_ep: "3.3.3.3:5432".into(),
                dst: "web[10]@h1".into(),
                dst_ep: "2.2.2.2:5000".into(),
                send_ns: MaybeNs::NONE,
                recv_ns: Some(5_000).into(),
                bytes: 30,
            },
            Message {
                id: MessageId::Int(4),
                src: "web[10]@h1".into(),
                src_ep: "2.2.2.2:80".into(),
                dst: "CLIENT".into(),
                dst_ep: "1.1.1.1:4000".into(),
                send_ns: Some(6_000).into(),
                recv_ns: MaybeNs::NONE,
                bytes: 40,
            },
        ];
        let assign = |id, parent: Option<i64>| Assignment {
            id: MessageId::Int(id),
            trace: 1,
            parent: parent.map(MessageId::Int),
            cause: parent.map(MessageId::Int),
            probability: 0.75,
        };
        // The answer to the client is for request 1, and caused by db's reply.
        let answer = Assignment {
            cause: Some(MessageId::Int(3)),
            ..assign(4, Some(1))
        };
        let a = vec![
            assign(1, None),
            assign(2, Some(1)),
            assign(3, Some(2)),
            answer,
        ];
        let s = spans(&messages, &a, 42);
        // CLIENT was not captured: web's server span is the root; web's call to db is a
        // client span with db's server span under it; the replies are no spans.
        assert_eq!(s.len(), 3, "{s:#?}");
        assert!(s.iter().all(|x| x.trace_id == s[0].trace_id));
        let (web, call, db) = (&s[0], &s[1], &s[2]);
        assert_eq!((&*web.service, &*web.host, web.pid), ("web", "h1", 10));
        assert_eq!((web.kind, web.parent_id), (SpanKind::Server, None));
        // The request's span at web lasts until web answered it.
        assert_eq!((web.start, web.end), (1_000, 6_000));
        assert_eq!(
            web.attribute(attributes::REPLY_SEND_NS),
            Some(&6_000i64.into())
        );
        assert_eq!(web.attribute(attributes::REPLY_RECV_NS), None);
        assert_eq!(web.attribute(attributes::REPLY_BYTES), Some(&40i64.into()));
        assert_eq!(
            (&*call.service, call.kind, call.name.as_str()),
            ("web", SpanKind::Client, "to db")
        );
        assert_eq!(call.parent_id, Some(web.span_id));
        assert_eq!((call.start, call.end), (2_000, 5_000));
        // db (not captured) is timed on web's clock: from the call to the reply's receipt.
        assert_eq!((&*db.service, db.kind), ("db", SpanKind::Server));
        assert_eq!(db.parent_id, Some(call.span_id));
        assert_eq!((db.start, db.end), (2_000, 5_000));
        assert_eq!(db.source, Source::Inferred { confidence: 0.75 });
        // web's answer was caused by db's reply: the call's client span stands for it.
        assert_eq!(
            web.attribute(attributes::REPLY_CAUSE),
            Some(&causeway_model::Value::Str(call.span_id.to_string()))
        );
        let ids: std::collections::HashSet<_> = s.iter().map(|x| x.span_id).collect();
        assert_eq!(ids.len(), 3);

        // The Inferred page sees every message again: two requests, two replies.
        let mut paths = causeway_analysis::inferred::InferredPaths::default();
        paths.add(&causeway_model::Trace::assemble(s[0].trace_id, s.clone()));
        let summary = paths.summary(10);
        let pattern = &summary.patterns[0];
        assert_eq!(pattern.shape, "CLIENT>web[web>CLIENT,web>db[db>web]]");
        let hop = |src: &str, dst: &str| {
            pattern
                .hops
                .iter()
                .find(|h| h.src == src && h.dst == dst)
                .unwrap_or_else(|| panic!("no hop {src}>{dst}: {:?}", pattern.hops))
        };
        // web waited 1 µs before calling db, and answered 1 µs after db's reply.
        assert_eq!(hop("web", "db").node_delay_ns, Some(1_000.0));
        assert_eq!(hop("web", "CLIENT").node_delay_ns, Some(1_000.0));
        assert!(hop("web", "db").untraced && !hop("CLIENT", "web").untraced);
    }

    #[test]
    fn a_message_with_no_reply_is_a_producer_and_a_consumer() {
        let messages = vec![Message {
            id: MessageId::Int(1),
            src: "app[5]@h".into(),
            src_ep: "1.1.1.1:4000".into(),
            dst: "queue[6]@h".into(),
            dst_ep: "1.1.1.1:9000".into(),
            send_ns: Some(1_000).into(),
            recv_ns: Some(1_500).into(),
            bytes: 10,
        }];
        let a = vec![Assignment {
            id: MessageId::Int(1),
            trace: 1,
            parent: None,
            cause: None,
            probability: 1.0,
        }];
        let s = spans(&messages, &a, 7);
        let kinds: Vec<(&str, SpanKind)> = s.iter().map(|x| (&*x.service, x.kind)).collect();
        assert_eq!(
            kinds,
            [("app", SpanKind::Producer), ("queue", SpanKind::Consumer)]
        );
        assert_eq!(s[1].parent_id, Some(s[0].span_id));
        assert_eq!((s[0].start, s[0].end, s[1].start), (1_000, 1_000, 1_500));
    }
}
