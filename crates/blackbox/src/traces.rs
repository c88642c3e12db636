//! Inferred path instances as traces of the common model, so that search, patterns,
//! dependencies, the critical path, the trace view and expectations work on them.
//!
//! Each message becomes a span at its receiver: from the receipt to the last message the
//! receiver sent for it (for a request, its work until the answer), its parent the span
//! of the request the message was sent for, and `causeway.cause` the span of the message
//! that caused it (WAP5's sense). A receiver that was not captured (no receive time) gets
//! the sender's clock: from the send to the receipt of the last reply. Spans are
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
use crate::reconcile::{Message, MessageId, MessageIndex};

/// A node name's service, host and pid: `program[pid]@host` as reconciliation names a
/// captured process, else the name as the service.
fn parse_node(node: &str) -> (String, String, u32) {
    let parsed = node.split_once('[').and_then(|(program, rest)| {
        let (pid, host) = rest.split_once("]@")?;
        Some((program.to_string(), host.to_string(), pid.parse().ok()?))
    });
    parsed.unwrap_or_else(|| (node.to_string(), String::new(), 0))
}

/// The spans of every inferred trace. `salt` keeps ids of separate runs apart.
pub fn spans(messages: &[Message], assignments: &[Assignment], salt: u64) -> Vec<Span> {
    let index = MessageIndex::of(messages);
    let by_id: HashMap<&MessageId, &Assignment> = assignments.iter().map(|a| (&a.id, a)).collect();
    // The latest time each message's children were sent (or, unsent, received).
    let mut last_child: Vec<Option<i64>> = vec![None; messages.len()];
    for a in assignments {
        let (Some(child), Some(parent)) = (index.get(&a.id), a.parent.as_ref()) else {
            continue;
        };
        let Some(p) = index.get(parent) else {
            continue;
        };
        let m = &messages[child];
        let at = if messages[p].recv_ns.get().is_some() {
            m.send_ns.get().or(m.recv_ns.get())
        } else {
            // An uncaptured receiver's span ends when its reply arrived.
            m.recv_ns.get().or(m.send_ns.get())
        };
        last_child[p] = last_child[p].max(at);
    }
    let span_id = |i: usize| {
        SpanId::new(salt.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64 + 1)).or(SpanId::new(1))
    };
    let mut out = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        let Some(a) = by_id.get(&m.id) else { continue };
        let (Some(trace_id), Some(id)) = (
            TraceId::new((u128::from(salt) << 64) | u128::from(a.trace)),
            span_id(i),
        ) else {
            continue;
        };
        let parent = a
            .parent
            .as_ref()
            .and_then(|p| index.get(p))
            .and_then(span_id);
        let start = m.recv_ns.get().or(m.send_ns.get()).unwrap_or(0).max(0);
        let end = last_child[i].unwrap_or(start).max(start);
        let (service, host, pid) = parse_node(&m.dst);
        let mut span = Span::new(
            trace_id,
            id,
            parent,
            format!("from {}", parse_node(&m.src).0),
            &service,
            start as u64,
            end as u64,
        );
        span.kind = if a.parent.is_none() {
            SpanKind::Server
        } else {
            SpanKind::Consumer
        };
        span.host = Arc::from(host.as_str());
        span.pid = pid;
        span.source = Source::Inferred {
            confidence: a.probability as f32,
        };
        span.attributes
            .push(KeyValue::new(attributes::NET_PEER_NAME, &*m.src));
        span.attributes
            .push(KeyValue::new(attributes::NET_SOCK_PEER_ADDR, &*m.src_ep));
        span.attributes
            .push(KeyValue::new(attributes::NET_SOCK_HOST_ADDR, &*m.dst_ep));
        span.attributes
            .push(KeyValue::new(attributes::MESSAGE_BYTES, m.bytes as i64));
        if let Some(sent) = m.send_ns.get() {
            span.attributes
                .push(KeyValue::new(attributes::MESSAGE_SEND_NS, sent));
        }
        if m.recv_ns.get().is_none() {
            span.attributes
                .push(KeyValue::new(attributes::UNTRACED, true));
        }
        let cause = a.cause.as_ref().and_then(|c| index.get(c));
        if let Some(cause) = cause.and_then(span_id) {
            span.attributes
                .push(KeyValue::new(attributes::CAUSE, cause.to_string()));
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
        assert_eq!(s.len(), 4);
        assert!(s.iter().all(|x| x.trace_id == s[0].trace_id));
        assert_eq!((&*s[0].service, &*s[0].host, s[0].pid), ("web", "h1", 10));
        assert_eq!(s[0].parent_id, None);
        // The request's span at web lasts until web answered it.
        assert_eq!((s[0].start, s[0].end), (1_000, 6_000));
        // db (not captured) is timed on web's clock: from the call to the reply's receipt.
        assert_eq!(&*s[1].service, "db");
        assert_eq!(s[1].parent_id, Some(s[0].span_id));
        assert_eq!((s[1].start, s[1].end), (2_000, 5_000));
        assert_eq!(s[2].parent_id, Some(s[1].span_id));
        assert_eq!(s[2].source, Source::Inferred { confidence: 0.75 });
        assert_eq!(s[3].parent_id, Some(s[0].span_id));
        let cause = s[2].span_id.to_string();
        assert_eq!(
            s[3].attribute("causeway.cause"),
            Some(&causeway_model::Value::Str(cause.as_str().into()))
        );
    }
}
