//! OTLP (protobuf and JSON) in both directions, through the messages of [`proto`].
//!
//! OTLP has no fields for some of the model's parts, so they travel as reserved attributes
//! and events, and come back on decoding: the execution unit as `thread.id`, the sampling
//! probability as `causeway.sampling.probability`, thread CPU time as
//! `causeway.cpu_time_ns`, the source as `causeway.source`, and Pip messages as events named
//! `causeway.message.send` / `causeway.message.recv`. `service.name`, `host.name` and
//! `process.pid` come from the resource; other resource attributes and the instrumentation
//! scope (name, version, attributes) are kept as span attributes, so nothing sent is lost.
//! Decoded spans are `imported` unless `causeway.source` says otherwise. OTLP logs are read
//! by [`logs`].

use std::collections::BTreeMap;
use std::sync::Arc;

use prost::Message as _;

pub mod logs;
pub mod proto;

use proto as pc;
use proto as pt;
use proto::{ExportTraceServiceRequest, Resource};

use crate::ids::{SpanId, TraceId};
use crate::span::{
    Direction, Event, KeyValue, Link, Message, Source, Span, SpanKind, Status, Value,
};

/// The OTLP request type this module reads and writes.
pub type Request = ExportTraceServiceRequest;

// Shared with the Jaeger codec, which carries the same parts the same way.
pub(crate) const ATTR_THREAD: &str = "thread.id";
pub(crate) const ATTR_PROBABILITY: &str = "causeway.sampling.probability";
pub(crate) const ATTR_CPU: &str = "causeway.cpu_time_ns";
pub(crate) const ATTR_SOURCE: &str = "causeway.source";
pub(crate) const EVENT_SEND: &str = "causeway.message.send";
pub(crate) const EVENT_RECV: &str = "causeway.message.recv";
pub(crate) const MSG_ID: &str = "message.id";
pub(crate) const MSG_PEER: &str = "message.peer";
pub(crate) const MSG_SIZE: &str = "message.size";

/// An OTLP payload or span that could not be read, naming the field by its JSON path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} at {path}")]
pub struct OtlpError {
    /// Where, e.g. `resourceSpans[0].scopeSpans[2].spans[7].traceId`.
    pub path: String,
    /// What was wrong.
    pub reason: String,
}

/// The spans decoded from one request, and the spans rejected with the reason for each.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Spans that were read.
    pub spans: Vec<Span>,
    /// Spans that were not, each with where and why.
    pub rejected: Vec<OtlpError>,
}

/// Decodes an OTLP/HTTP protobuf body. A body that is not a valid message is an error;
/// otherwise invalid spans are listed in `rejected` and the rest are kept.
pub fn decode_protobuf(body: &[u8]) -> Result<Decoded, OtlpError> {
    Ok(decode_request(&read_protobuf(body, "OTLP protobuf")?))
}

/// Decodes an OTLP/JSON body, with serde's line and column on a malformed one.
pub fn decode_json(body: &[u8]) -> Result<Decoded, OtlpError> {
    Ok(decode_request(&read_json(body, "OTLP/JSON")?))
}

/// A protobuf body as the message `M` (`what` names it in the error).
pub(crate) fn read_protobuf<M: prost::Message + Default>(
    body: &[u8],
    what: &str,
) -> Result<M, OtlpError> {
    M::decode(body).map_err(|e| OtlpError {
        path: "body".into(),
        reason: format!("invalid {what}: {e}"),
    })
}

/// A JSON body as the message `M`, with serde's line and column on a malformed one.
pub(crate) fn read_json<M: serde::de::DeserializeOwned>(
    body: &[u8],
    what: &str,
) -> Result<M, OtlpError> {
    serde_json::from_slice(body).map_err(|e| OtlpError {
        path: format!("line {} column {}", e.line(), e.column()),
        reason: format!("invalid {what}: {}", super::json_message(&e)),
    })
}

/// Encodes spans as an OTLP protobuf body.
pub fn encode_protobuf(spans: &[Span]) -> Vec<u8> {
    encode_request(spans).encode_to_vec()
}

/// Encodes spans as an OTLP/JSON body.
pub fn encode_json(spans: &[Span]) -> Vec<u8> {
    // Serializing plain structs to a Vec cannot fail.
    serde_json::to_vec(&encode_request(spans)).unwrap_or_default()
}

fn any_to_value(v: &pc::AnyValue) -> Option<Value> {
    any_to_value_at(v, 0)
}

/// Arrays nested deeper than the native record allows are kept as their text, so every
/// decoded span can be stored and read back.
fn any_to_value_at(v: &pc::AnyValue, depth: usize) -> Option<Value> {
    use pc::Any as V;
    Some(match v.value.as_ref()? {
        V::Array(a) if depth + 1 >= super::native::MAX_VALUE_DEPTH => {
            let inner = Value::Array(a.values.iter().filter_map(any_to_value).collect());
            Value::Str(inner.to_string())
        }
        V::String(s) => Value::Str(s.clone()),
        V::Bool(b) => Value::Bool(*b),
        V::Int(i) => Value::I64(*i),
        V::Double(d) => Value::F64(*d),
        V::Bytes(b) => Value::Bytes(b.clone()),
        V::Array(a) => Value::Array(
            a.values
                .iter()
                .filter_map(|v| any_to_value_at(v, depth + 1))
                .collect(),
        ),
        // The model has no maps; keep the content as text rather than lose it.
        V::Kvlist(kv) => Value::Str(
            kv.values
                .iter()
                .map(|e| {
                    let v = e.value.as_ref().and_then(any_to_value);
                    format!("{}={}", e.key, v.map(|v| v.to_string()).unwrap_or_default())
                })
                .collect::<Vec<_>>()
                .join(","),
        ),
    })
}

fn value_to_any(v: &Value) -> pc::AnyValue {
    use pc::Any as V;
    pc::AnyValue {
        value: Some(match v {
            Value::Str(s) => V::String(s.clone()),
            Value::Bool(b) => V::Bool(*b),
            Value::I64(i) => V::Int(*i),
            Value::F64(d) => V::Double(*d),
            Value::Bytes(b) => V::Bytes(b.clone()),
            Value::Array(a) => V::Array(pc::ArrayValue {
                values: a.iter().map(value_to_any).collect(),
            }),
        }),
    }
}

fn kv(key: &str, v: Value) -> pc::KeyValue {
    pc::KeyValue {
        key: key.to_owned(),
        value: Some(value_to_any(&v)),
    }
}

fn attrs_from(list: &[pc::KeyValue]) -> Vec<KeyValue> {
    list.iter()
        .filter_map(|a| {
            Some(KeyValue {
                key: a.key.clone(),
                value: any_to_value(a.value.as_ref()?)?,
            })
        })
        .collect()
}

fn attrs_to(list: &[KeyValue]) -> Vec<pc::KeyValue> {
    list.iter().map(|a| kv(&a.key, a.value.clone())).collect()
}

fn kind_from(k: i32) -> SpanKind {
    match k {
        2 => SpanKind::Server,
        3 => SpanKind::Client,
        4 => SpanKind::Producer,
        5 => SpanKind::Consumer,
        _ => SpanKind::Internal,
    }
}

fn kind_to(k: SpanKind) -> i32 {
    match k {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    }
}

struct ResourceInfo {
    service: Arc<str>,
    host: Arc<str>,
    pid: u32,
    extra: Vec<KeyValue>,
}

fn resource_info(r: Option<&Resource>) -> ResourceInfo {
    let mut info = ResourceInfo {
        service: Arc::from("unknown_service"),
        host: Arc::from(""),
        pid: 0,
        extra: Vec::new(),
    };
    for a in r.map(|r| r.attributes.as_slice()).unwrap_or_default() {
        let Some(v) = a.value.as_ref().and_then(any_to_value) else {
            continue;
        };
        match (a.key.as_str(), &v) {
            ("service.name", Value::Str(s)) => info.service = Arc::from(s.as_str()),
            ("host.name", Value::Str(s)) => info.host = Arc::from(s.as_str()),
            ("process.pid", Value::I64(p)) if u32::try_from(*p).is_ok() => info.pid = *p as u32,
            _ => info.extra.push(KeyValue {
                key: a.key.clone(),
                value: v,
            }),
        }
    }
    info
}

/// Decodes every span of a request; invalid spans are rejected one by one.
pub fn decode_request(req: &Request) -> Decoded {
    let mut out = Decoded::default();
    for (ri, rs) in req.resource_spans.iter().enumerate() {
        let info = resource_info(rs.resource.as_ref());
        for (si, ss) in rs.scope_spans.iter().enumerate() {
            let mut scope_attrs = Vec::new();
            if let Some(scope) = &ss.scope {
                if !scope.name.is_empty() {
                    scope_attrs.push(KeyValue::new("otel.scope.name", scope.name.as_str()));
                }
                if !scope.version.is_empty() {
                    scope_attrs.push(KeyValue::new("otel.scope.version", scope.version.as_str()));
                }
                scope_attrs.extend(attrs_from(&scope.attributes));
            }
            for (pi, ps) in ss.spans.iter().enumerate() {
                let path = || format!("resourceSpans[{ri}].scopeSpans[{si}].spans[{pi}]");
                match decode_span(ps, &info, &scope_attrs) {
                    Ok(s) => out.spans.push(s),
                    Err((field, reason)) => out.rejected.push(OtlpError {
                        path: format!("{}.{field}", path()),
                        reason,
                    }),
                }
            }
        }
    }
    out
}

fn id_err(e: crate::ids::IdError) -> String {
    e.to_string()
}

fn decode_span(
    ps: &pt::Span,
    info: &ResourceInfo,
    scope_attrs: &[KeyValue],
) -> Result<Span, (String, String)> {
    let trace_id = TraceId::from_bytes(&ps.trace_id).map_err(|e| ("traceId".into(), id_err(e)))?;
    let span_id = SpanId::from_bytes(&ps.span_id).map_err(|e| ("spanId".into(), id_err(e)))?;
    let parent_id = if ps.parent_span_id.is_empty() {
        None
    } else {
        Some(
            SpanId::from_bytes(&ps.parent_span_id)
                .map_err(|e| ("parentSpanId".into(), id_err(e)))?,
        )
    };
    let mut span = Span::new(
        trace_id,
        span_id,
        parent_id,
        ps.name.clone(),
        "",
        ps.start_time_unix_nano,
        ps.end_time_unix_nano,
    );
    span.service = info.service.clone();
    span.host = info.host.clone();
    span.pid = info.pid;
    span.kind = kind_from(ps.kind);
    span.trace_state = ps.trace_state.clone();
    span.source = Source::Imported;
    span.dropped_attributes = ps.dropped_attributes_count;
    span.dropped_events = ps.dropped_events_count;
    for a in attrs_from(&ps.attributes) {
        match (a.key.as_str(), &a.value) {
            (ATTR_THREAD, Value::I64(t)) => span.execution_unit = *t as u64,
            (ATTR_PROBABILITY, Value::F64(p)) => span.sampling_probability = *p,
            (ATTR_CPU, Value::I64(c)) => span.cpu_time = Some(*c as u64),
            (ATTR_SOURCE, Value::Str(s)) => match Source::from_text(s) {
                Some(src) => span.source = src,
                None => span.attributes.push(a),
            },
            _ => span.attributes.push(a),
        }
    }
    span.attributes.extend(info.extra.iter().cloned());
    span.attributes.extend(scope_attrs.iter().cloned());
    for (ei, e) in ps.events.iter().enumerate() {
        let attributes = attrs_from(&e.attributes);
        let direction = match e.name.as_str() {
            EVENT_SEND => Some(Direction::Send),
            EVENT_RECV => Some(Direction::Recv),
            _ => None,
        };
        if let Some(direction) = direction {
            let Some(msg) = message_of(direction, e.time_unix_nano, &attributes) else {
                return Err((
                    format!("events[{ei}].attributes"),
                    format!("{} event without an integer {MSG_ID}", e.name),
                ));
            };
            span.messages.push(msg);
            continue;
        }
        span.events.push(Event {
            time: e.time_unix_nano,
            name: e.name.clone(),
            attributes,
        });
    }
    for (li, l) in ps.links.iter().enumerate() {
        span.links.push(Link {
            trace_id: TraceId::from_bytes(&l.trace_id)
                .map_err(|e| (format!("links[{li}].traceId"), id_err(e)))?,
            span_id: SpanId::from_bytes(&l.span_id)
                .map_err(|e| (format!("links[{li}].spanId"), id_err(e)))?,
            attributes: attrs_from(&l.attributes),
        });
    }
    if let Some(st) = &ps.status {
        span.status = match st.code {
            1 => Status::Ok,
            2 => Status::Error(st.message.clone()),
            _ => Status::Unset,
        };
    }
    Ok(span)
}

/// A Pip message from the attributes of the event (or log) that carries it; `None` without
/// an integer `message.id`.
pub(crate) fn message_of(
    direction: Direction,
    time: u64,
    attributes: &[KeyValue],
) -> Option<Message> {
    let mut msg = Message {
        direction,
        id: 0,
        time,
        peer: None,
        size: None,
    };
    let mut has_id = false;
    for a in attributes {
        match (a.key.as_str(), &a.value) {
            (MSG_ID, Value::I64(i)) => {
                msg.id = *i as u64;
                has_id = true;
            }
            (MSG_PEER, Value::Str(p)) => msg.peer = Some(p.clone()),
            (MSG_SIZE, Value::I64(z)) => msg.size = Some(*z as u64),
            _ => {}
        }
    }
    has_id.then_some(msg)
}

/// Builds an OTLP request, one resource per (service, host, pid).
pub fn encode_request(spans: &[Span]) -> Request {
    let mut groups: BTreeMap<(&str, &str, u32), Vec<pt::Span>> = BTreeMap::new();
    for s in spans {
        groups
            .entry((&s.service, &s.host, s.pid))
            .or_default()
            .push(encode_span(s));
    }
    Request {
        resource_spans: groups
            .into_iter()
            .map(|((service, host, pid), spans)| {
                let mut attributes = vec![kv("service.name", Value::from(service))];
                if !host.is_empty() {
                    attributes.push(kv("host.name", Value::from(host)));
                }
                if pid != 0 {
                    attributes.push(kv("process.pid", Value::I64(pid as i64)));
                }
                pt::ResourceSpans {
                    resource: Some(Resource {
                        attributes,
                        ..Default::default()
                    }),
                    scope_spans: vec![pt::ScopeSpans {
                        scope: None,
                        spans,
                        schema_url: String::new(),
                    }],
                    schema_url: String::new(),
                }
            })
            .collect(),
    }
}

fn encode_span(s: &Span) -> pt::Span {
    let mut attributes = attrs_to(&s.attributes);
    if s.execution_unit != 0 {
        attributes.push(kv(ATTR_THREAD, Value::I64(s.execution_unit as i64)));
    }
    if s.sampling_probability != 1.0 {
        attributes.push(kv(ATTR_PROBABILITY, Value::F64(s.sampling_probability)));
    }
    if let Some(c) = s.cpu_time {
        attributes.push(kv(ATTR_CPU, Value::I64(c as i64)));
    }
    if s.source != Source::Imported {
        attributes.push(kv(ATTR_SOURCE, Value::Str(s.source.to_text())));
    }
    let mut events: Vec<pt::Event> = s
        .events
        .iter()
        .map(|e| pt::Event {
            time_unix_nano: e.time,
            name: e.name.clone(),
            attributes: attrs_to(&e.attributes),
            dropped_attributes_count: 0,
        })
        .collect();
    for m in &s.messages {
        let mut attributes = vec![kv(MSG_ID, Value::I64(m.id as i64))];
        if let Some(p) = &m.peer {
            attributes.push(kv(MSG_PEER, Value::Str(p.clone())));
        }
        if let Some(z) = m.size {
            attributes.push(kv(MSG_SIZE, Value::I64(z as i64)));
        }
        events.push(pt::Event {
            time_unix_nano: m.time,
            name: match m.direction {
                Direction::Send => EVENT_SEND,
                Direction::Recv => EVENT_RECV,
            }
            .to_owned(),
            attributes,
            dropped_attributes_count: 0,
        });
    }
    pt::Span {
        trace_id: s.trace_id.to_bytes().to_vec(),
        span_id: s.span_id.to_bytes().to_vec(),
        trace_state: s.trace_state.clone(),
        parent_span_id: s
            .parent_id
            .map(|p| p.to_bytes().to_vec())
            .unwrap_or_default(),
        flags: 1, // sampled: only sampled spans are recorded
        name: s.name.clone(),
        kind: kind_to(s.kind),
        start_time_unix_nano: s.start,
        end_time_unix_nano: s.end,
        attributes,
        dropped_attributes_count: s.dropped_attributes,
        events,
        dropped_events_count: s.dropped_events,
        links: s
            .links
            .iter()
            .map(|l| pt::Link {
                trace_id: l.trace_id.to_bytes().to_vec(),
                span_id: l.span_id.to_bytes().to_vec(),
                trace_state: String::new(),
                attributes: attrs_to(&l.attributes),
                dropped_attributes_count: 0,
                flags: 0,
            })
            .collect(),
        dropped_links_count: 0,
        status: match &s.status {
            Status::Unset => None,
            Status::Ok => Some(pt::Status {
                message: String::new(),
                code: 1,
            }),
            Status::Error(m) => Some(pt::Status {
                message: m.clone(),
                code: 2,
            }),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::strategies;
    use proptest::prelude::*;

    fn plain(mut s: Span) -> Span {
        // Reserved keys would be read back into their fields.
        s.attributes
            .retain(|a| !a.key.starts_with("causeway.") && a.key != "thread.id");
        if s.service.is_empty() {
            s.service = "svc".into();
        }
        s
    }

    fn normalize(mut spans: Vec<Span>) -> Vec<Span> {
        spans.sort_by_key(|s| (s.trace_id, s.span_id));
        spans
    }

    proptest! {
        #[test]
        fn spans_round_trip_through_protobuf(spans in proptest::collection::vec(strategies::span().prop_map(plain), 1..6)) {
            let d = decode_protobuf(&encode_protobuf(&spans)).unwrap();
            prop_assert!(d.rejected.is_empty());
            prop_assert_eq!(normalize(d.spans), normalize(spans));
        }

        #[test]
        fn spans_round_trip_through_json(spans in proptest::collection::vec(strategies::span().prop_map(plain), 1..6)) {
            let d = decode_json(&encode_json(&spans)).unwrap();
            prop_assert!(d.rejected.is_empty());
            prop_assert_eq!(normalize(d.spans), normalize(spans));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_protobuf(&bytes);
            let _ = decode_json(&bytes);
        }
    }

    #[test]
    fn a_bad_span_is_rejected_with_its_path_and_the_rest_kept() {
        let body = br#"{"resourceSpans":[{"scopeSpans":[{"spans":[
            {"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"good"},
            {"traceId":"00000000000000000000000000000000","spanId":"eee19b7ec3c1b175","name":"bad"}
        ]}]}]}"#;
        let d = decode_json(body).unwrap();
        assert_eq!(d.spans.len(), 1);
        assert_eq!(d.spans[0].name, "good");
        assert_eq!(d.rejected.len(), 1);
        assert_eq!(
            d.rejected[0].to_string(),
            "invalid trace id: all zeros is not a valid id at resourceSpans[0].scopeSpans[0].spans[1].traceId"
        );
    }

    #[test]
    fn malformed_json_names_line_and_column() {
        let e = decode_json(b"{\n  \"resourceSpans\": [}").unwrap_err();
        assert!(e.path.starts_with("line 2 column"), "{e}");
    }
}
