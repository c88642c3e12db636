//! Zipkin v2 JSON span lists, both directions.
//!
//! Zipkin lets an RPC's client and server halves share one span id. The model needs
//! unique span ids, so on decoding the server half of a shared id gets a new id derived
//! from the shared one, with the client half as its parent; children of the shared id
//! become children of the server half, unless they ran in the client's service.
//! Tags become string attributes (`error` becomes the error status), annotations become
//! events, the remote endpoint becomes `peer.service`, `peer.ipv4`, `peer.ipv6` and
//! `peer.port` attributes. The host is the local endpoint's IP; the pid is 0.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{SpanId, TraceId};
use crate::span::{Event, KeyValue, Source, Span, SpanKind, Status, Value};

/// A Zipkin payload or span that could not be read, naming where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} at {path}")]
pub struct ZipkinError {
    /// Where, e.g. `[3].traceId`, or `line 4 column 9` for malformed JSON.
    pub path: String,
    /// What was wrong.
    pub reason: String,
}

/// The spans decoded from a list, and the spans rejected with the reason for each.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Spans that were read.
    pub spans: Vec<Span>,
    /// Spans that were not.
    pub rejected: Vec<ZipkinError>,
}

/// A Zipkin endpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// The service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_name: Option<String>,
    /// IPv4 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<String>,
    /// IPv6 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<String>,
    /// Port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
}

/// A Zipkin annotation: a timestamped string.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Annotation {
    /// Epoch microseconds.
    pub timestamp: u64,
    /// The text.
    pub value: String,
}

/// A Zipkin v2 span as it appears in JSON.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ZipkinSpan {
    /// 16 or 32 hex digits.
    pub trace_id: String,
    /// 16 hex digits.
    pub id: String,
    /// 16 hex digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// CLIENT, SERVER, PRODUCER or CONSUMER.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Operation name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Epoch microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<u64>,
    /// Microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u64>,
    /// Where the span was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_endpoint: Option<Endpoint>,
    /// The other side of an RPC or message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_endpoint: Option<Endpoint>,
    /// Timestamped strings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub annotations: Vec<Annotation>,
    /// String tags.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// Forced sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug: Option<bool>,
    /// True on the server half of a shared span id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
}

/// Decodes a Zipkin v2 JSON list. Malformed JSON is an error with line and column; a span
/// with bad ids is rejected alone.
pub fn decode_json(body: &[u8]) -> Result<Decoded, ZipkinError> {
    let list: Vec<ZipkinSpan> = serde_json::from_slice(body).map_err(|e| ZipkinError {
        path: format!("line {} column {}", e.line(), e.column()),
        reason: format!("invalid Zipkin JSON: {}", super::json_message(&e)),
    })?;
    Ok(decode_spans(&list))
}

/// Encodes spans as a Zipkin v2 JSON list.
pub fn encode_json(spans: &[Span]) -> Vec<u8> {
    let list: Vec<ZipkinSpan> = spans.iter().map(encode_span).collect();
    serde_json::to_vec(&list).unwrap_or_default()
}

/// The id given to the server half of a shared span id.
pub fn server_half_id(shared: SpanId) -> SpanId {
    // A fixed odd multiplier makes this a bijection on u64; xor keeps it away from the
    // shared id itself. Zero maps to a fixed non-zero id.
    let v = shared.get().wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5A17;
    SpanId::new(v).unwrap_or(SpanId::new(0x5A17).unwrap_or(shared))
}

fn parse_kind(k: Option<&str>) -> SpanKind {
    match k {
        Some("CLIENT") => SpanKind::Client,
        Some("SERVER") => SpanKind::Server,
        Some("PRODUCER") => SpanKind::Producer,
        Some("CONSUMER") => SpanKind::Consumer,
        _ => SpanKind::Internal,
    }
}

/// Decodes parsed Zipkin spans, splitting shared span ids into two halves.
pub fn decode_spans(list: &[ZipkinSpan]) -> Decoded {
    let mut out = Decoded::default();
    // Non-server spans by (trace, id), to find the client half of a shared id.
    let mut non_server: HashMap<(TraceId, SpanId), Arc<str>> = HashMap::new();
    let mut parsed = Vec::with_capacity(list.len());
    for (i, z) in list.iter().enumerate() {
        match decode_one(z) {
            Ok(s) => {
                if s.kind != SpanKind::Server {
                    non_server.insert((s.trace_id, s.span_id), s.service.clone());
                }
                parsed.push((s, z.shared.unwrap_or(false)));
            }
            Err((field, reason)) => out.rejected.push(ZipkinError {
                path: format!("[{i}].{field}"),
                reason,
            }),
        }
    }
    // A server span shares its id when the client half is here, or when it is flagged
    // shared and names a parent (a flagged root, such as a proxy called by an untraced
    // client, keeps its id: there is no client half to tell it from).
    struct Split {
        server_id: SpanId,
        server_service: Arc<str>,
        client_service: Option<Arc<str>>,
    }
    let mut split: HashMap<(TraceId, SpanId), Split> = HashMap::new();
    for (s, shared) in &parsed {
        let key = (s.trace_id, s.span_id);
        let client = non_server.get(&key);
        if s.kind == SpanKind::Server && (client.is_some() || (*shared && s.parent_id.is_some())) {
            split.insert(
                key,
                Split {
                    server_id: server_half_id(s.span_id),
                    server_service: s.service.clone(),
                    client_service: client.cloned(),
                },
            );
        }
    }
    for (mut s, _) in parsed {
        if s.kind == SpanKind::Server {
            if let Some(sp) = split.get(&(s.trace_id, s.span_id)) {
                s.parent_id = Some(s.span_id);
                s.span_id = sp.server_id;
                out.spans.push(s);
                continue;
            }
        }
        if let Some(p) = s.parent_id {
            if let Some(sp) = split.get(&(s.trace_id, p)) {
                // Children of a shared id were made by the server, unless they plainly ran
                // on the client's side.
                let on_client = sp.client_service.as_ref() == Some(&s.service)
                    && s.service != sp.server_service;
                if !on_client {
                    s.parent_id = Some(sp.server_id);
                }
            }
        }
        out.spans.push(s);
    }
    out
}

fn decode_one(z: &ZipkinSpan) -> Result<Span, (String, String)> {
    let trace_id =
        TraceId::parse(&z.trace_id).map_err(|e| ("traceId".to_owned(), e.to_string()))?;
    let span_id = SpanId::parse(&z.id).map_err(|e| ("id".to_owned(), e.to_string()))?;
    let parent_id = match z.parent_id.as_deref() {
        None | Some("") => None,
        Some(p) => Some(SpanId::parse(p).map_err(|e| ("parentId".to_owned(), e.to_string()))?),
    };
    let start = z.timestamp.unwrap_or(0).saturating_mul(1000);
    let end = start.saturating_add(z.duration.unwrap_or(0).saturating_mul(1000));
    let local = z.local_endpoint.clone().unwrap_or_default();
    let service = local.service_name.as_deref().unwrap_or("unknown");
    let mut s = Span::new(
        trace_id,
        span_id,
        parent_id.filter(|p| *p != span_id),
        z.name.clone().unwrap_or_default(),
        service,
        start,
        end,
    );
    s.kind = parse_kind(z.kind.as_deref());
    s.source = Source::Imported;
    s.host = Arc::from(
        local
            .ipv4
            .as_deref()
            .or(local.ipv6.as_deref())
            .unwrap_or(""),
    );
    if let Some(port) = local.port {
        s.attributes.push(KeyValue::new("local.port", port as i64));
    }
    if let Some(r) = &z.remote_endpoint {
        if let Some(v) = &r.service_name {
            s.attributes.push(KeyValue::new("peer.service", v.as_str()));
        }
        if let Some(v) = &r.ipv4 {
            s.attributes.push(KeyValue::new("peer.ipv4", v.as_str()));
        }
        if let Some(v) = &r.ipv6 {
            s.attributes.push(KeyValue::new("peer.ipv6", v.as_str()));
        }
        if let Some(v) = r.port {
            s.attributes.push(KeyValue::new("peer.port", v as i64));
        }
    }
    for (k, v) in &z.tags {
        if k == "error" {
            s.status = Status::Error(v.clone());
        } else {
            s.attributes.push(KeyValue::new(k.as_str(), v.as_str()));
        }
    }
    for a in &z.annotations {
        s.events.push(Event {
            time: a.timestamp.saturating_mul(1000),
            name: a.value.clone(),
            attributes: Vec::new(),
        });
    }
    Ok(s)
}

fn encode_span(s: &Span) -> ZipkinSpan {
    let trace_id = if s.trace_id.is_short() {
        format!("{:016x}", s.trace_id.get())
    } else {
        s.trace_id.to_string()
    };
    let mut remote = Endpoint::default();
    let mut local = Endpoint {
        service_name: Some(s.service.to_string()),
        ..Default::default()
    };
    if !s.host.is_empty() {
        if s.host.contains(':') {
            local.ipv6 = Some(s.host.to_string());
        } else {
            local.ipv4 = Some(s.host.to_string());
        }
    }
    let mut tags = BTreeMap::new();
    for a in &s.attributes {
        match (a.key.as_str(), &a.value) {
            ("local.port", Value::I64(p)) if u16::try_from(*p).is_ok() => {
                local.port = Some(*p as u16)
            }
            ("peer.service", Value::Str(v)) => remote.service_name = Some(v.clone()),
            ("peer.ipv4", Value::Str(v)) => remote.ipv4 = Some(v.clone()),
            ("peer.ipv6", Value::Str(v)) => remote.ipv6 = Some(v.clone()),
            ("peer.port", Value::I64(p)) if u16::try_from(*p).is_ok() => {
                remote.port = Some(*p as u16)
            }
            _ => {
                tags.insert(a.key.clone(), a.value.to_string());
            }
        }
    }
    if let Status::Error(m) = &s.status {
        tags.insert("error".into(), m.clone());
    }
    ZipkinSpan {
        trace_id,
        id: s.span_id.to_string(),
        parent_id: s.parent_id.map(|p| p.to_string()),
        kind: match s.kind {
            SpanKind::Internal => None,
            SpanKind::Server => Some("SERVER".into()),
            SpanKind::Client => Some("CLIENT".into()),
            SpanKind::Producer => Some("PRODUCER".into()),
            SpanKind::Consumer => Some("CONSUMER".into()),
        },
        name: Some(s.name.clone()),
        timestamp: Some(s.start / 1000),
        duration: Some(s.duration() / 1000),
        local_endpoint: Some(local),
        remote_endpoint: (remote != Endpoint::default()).then_some(remote),
        annotations: s
            .events
            .iter()
            .map(|e| Annotation {
                timestamp: e.time / 1000,
                value: e.name.clone(),
            })
            .collect(),
        tags,
        debug: None,
        shared: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn endpoint() -> impl Strategy<Value = Endpoint> {
        (
            proptest::option::of("[a-z]{1,8}"),
            proptest::option::of("[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}"),
            proptest::option::of(1u16..),
        )
            .prop_map(|(service_name, ipv4, port)| Endpoint {
                service_name,
                ipv4,
                ipv6: None,
                port,
            })
    }

    fn zspan() -> impl Strategy<Value = ZipkinSpan> {
        (
            (any::<bool>(), 1u128.., 1u64.., proptest::option::of(1u64..)),
            (
                proptest::option::of(prop_oneof![
                    Just("CLIENT"),
                    Just("SERVER"),
                    Just("PRODUCER"),
                    Just("CONSUMER")
                ]),
                "[a-z/]{0,10}",
                0u64..1 << 50,
                0u64..1 << 30,
            ),
            ("[a-z]{1,8}", endpoint()),
            proptest::option::of(
                endpoint().prop_filter("non-empty", |e| e != &Endpoint::default()),
            ),
            proptest::collection::vec((0u64..1 << 50, "[ -~]{0,10}"), 0..3),
            proptest::collection::btree_map("[a-z][a-z._]{0,8}", "[ -~]{0,10}", 0..4),
        )
            .prop_map(
                |(
                    (short, t, id, parent),
                    (kind, name, ts, dur),
                    (svc, mut local),
                    remote,
                    ann,
                    tags,
                )| {
                    local.service_name = Some(svc);
                    let t = if short { t as u64 as u128 } else { t };
                    let t = if t == 0 { 1 } else { t };
                    ZipkinSpan {
                        trace_id: if t >> 64 == 0 {
                            format!("{t:016x}")
                        } else {
                            format!("{t:032x}")
                        },
                        id: format!("{id:016x}"),
                        parent_id: parent.filter(|p| *p != id).map(|p| format!("{p:016x}")),
                        kind: kind.map(str::to_owned),
                        name: Some(name),
                        timestamp: Some(ts),
                        duration: Some(dur),
                        local_endpoint: Some(local),
                        remote_endpoint: remote,
                        annotations: ann
                            .into_iter()
                            .map(|(timestamp, value)| Annotation { timestamp, value })
                            .collect(),
                        tags: tags
                            .into_iter()
                            .filter(|(k, _)| k != "local.port" && !k.starts_with("peer."))
                            .collect(),
                        debug: None,
                        shared: None,
                    }
                },
            )
    }

    proptest! {
        #[test]
        fn zipkin_spans_round_trip_through_the_model(z in zspan()) {
            let d = decode_spans(std::slice::from_ref(&z));
            prop_assert!(d.rejected.is_empty());
            let back: Vec<ZipkinSpan> = serde_json::from_slice(&encode_json(&d.spans)).unwrap();
            prop_assert_eq!(back, vec![z]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_json(&bytes);
        }
    }

    #[test]
    fn a_shared_span_id_becomes_a_client_half_and_a_server_half() {
        let body = br#"[
          {"traceId":"a","id":"000000000000000b","kind":"CLIENT","name":"get","timestamp":10,"duration":100,"localEndpoint":{"serviceName":"web"}},
          {"traceId":"a","id":"000000000000000b","kind":"SERVER","name":"get","timestamp":20,"duration":80,"localEndpoint":{"serviceName":"db"},"shared":true},
          {"traceId":"a","id":"000000000000000c","parentId":"000000000000000b","name":"query","timestamp":30,"duration":10,"localEndpoint":{"serviceName":"db"}}
        ]"#;
        // "a" is not a valid trace id: every span is rejected with its index.
        let d = decode_json(body).unwrap();
        assert_eq!(d.rejected.len(), 3);
        assert!(d.rejected[1].path == "[1].traceId", "{:?}", d.rejected);
        let body = String::from_utf8_lossy(body).replace("\"a\"", "\"000000000000000a\"");
        let d = decode_json(body.as_bytes()).unwrap();
        assert!(d.rejected.is_empty());
        let client = d.spans.iter().find(|s| s.kind == SpanKind::Client).unwrap();
        let server = d.spans.iter().find(|s| s.kind == SpanKind::Server).unwrap();
        let query = d.spans.iter().find(|s| s.name == "query").unwrap();
        assert_eq!(client.span_id.get(), 0xb);
        assert_ne!(server.span_id, client.span_id);
        assert_eq!(server.parent_id, Some(client.span_id));
        assert_eq!(query.parent_id, Some(server.span_id));
    }
}
