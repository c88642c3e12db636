//! Wire formats: the native span-log record, OTLP (protobuf and JSON), Zipkin v2 JSON,
//! Jaeger's JSON.
//!
//! `detect` tells the formats apart by their first bytes (the native magic, `{` with its
//! first key, `[`, else OTLP protobuf); `causeway import` uses it. The OTLP, Zipkin and Jaeger
//! decoders reject a bad span (a wrong-length or zero id, for instance) alone, naming its JSON
//! path, and keep the rest; a body that is not the format at all is an error. The native
//! decoder reports damage by byte offset.

pub mod jaeger;
pub mod native;
pub mod otlp;
pub mod zipkin;

/// The formats a payload may be in, as told apart by [`detect`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A sequence of native records.
    Native,
    /// OTLP/JSON (`{"resourceSpans": ...}`).
    OtlpJson,
    /// Zipkin v2 JSON (a list of spans).
    ZipkinJson,
    /// Jaeger's JSON (`{"data": [traces]}`, a trace, or a list of traces).
    JaegerJson,
    /// Anything else binary, tried as OTLP protobuf.
    OtlpProtobuf,
}

/// serde_json's message without the " at line L column C" it ends with, for errors that
/// state the position themselves (once).
pub fn json_message(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    match text.strip_suffix(&position) {
        Some(message) => message.to_string(),
        None => text,
    }
}

/// Guesses a payload's format from its first bytes: an object is OTLP/JSON unless its
/// first key is one of Jaeger's, a list is Zipkin's unless its first element's first key is
/// one of a Jaeger trace's. Only the first key is looked at, so this stays cheap.
pub fn detect(body: &[u8]) -> Format {
    if body.starts_with(&native::MAGIC) {
        return Format::Native;
    }
    let Some((first, rest)) = skip_whitespace(body).split_first() else {
        return Format::OtlpProtobuf;
    };
    match first {
        b'{' => match first_key(rest) {
            Some(k) if JAEGER_TOP_KEYS.contains(&k) || JAEGER_TRACE_KEYS.contains(&k) => {
                Format::JaegerJson
            }
            _ => Format::OtlpJson,
        },
        b'[' => match skip_whitespace(rest).split_first() {
            Some((b'{', element)) => match first_key(element) {
                Some(k) if JAEGER_TRACE_KEYS.contains(&k) => Format::JaegerJson,
                _ => Format::ZipkinJson,
            },
            _ => Format::ZipkinJson,
        },
        _ => Format::OtlpProtobuf,
    }
}

/// First keys of Jaeger's answer envelope.
const JAEGER_TOP_KEYS: [&[u8]; 5] = [b"data", b"total", b"limit", b"offset", b"errors"];
/// First keys of a Jaeger trace (Zipkin's spans spell theirs `traceId`).
const JAEGER_TRACE_KEYS: [&[u8]; 3] = [b"traceID", b"spans", b"processes"];

fn skip_whitespace(b: &[u8]) -> &[u8] {
    let at = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    &b[at..]
}

/// The first key of an object whose `{` has been read, if it is short and plain.
fn first_key(b: &[u8]) -> Option<&[u8]> {
    let b = skip_whitespace(b).strip_prefix(b"\"")?;
    let end = b.iter().take(32).position(|&c| c == b'"' || c == b'\\')?;
    (b[end] == b'"').then(|| &b[..end])
}

/// Proptest strategies for model values, shared by the codec tests.
#[cfg(test)]
pub(crate) mod strategies {
    use std::sync::Arc;

    use proptest::prelude::*;

    use crate::ids::{SpanId, TraceId};
    use crate::span::*;

    pub fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::I64),
            (-1e12f64..1e12).prop_map(Value::F64),
            "[a-z0-9 ]{0,12}".prop_map(Value::Str),
            proptest::collection::vec(any::<u8>(), 0..8).prop_map(Value::Bytes),
        ];
        leaf.prop_recursive(2, 8, 4, |inner| {
            proptest::collection::vec(inner, 0..4).prop_map(Value::Array)
        })
    }

    pub fn attrs() -> impl Strategy<Value = Vec<KeyValue>> {
        proptest::collection::vec(
            ("[a-z][a-z.]{0,10}", value()).prop_map(|(key, value)| KeyValue { key, value }),
            0..5,
        )
    }

    pub fn span() -> impl Strategy<Value = Span> {
        (
            (
                1u128..,
                1u64..,
                proptest::option::of(1u64..),
                "[ -~]{0,20}",
                0u8..5,
            ),
            (
                "[a-z-]{1,10}",
                "[a-z0-9.]{0,10}",
                any::<u32>(),
                any::<u64>(),
            ),
            (0u64..1 << 62, 0u64..1 << 40, 0u8..3, "[ -~]{0,10}"),
            attrs(),
            proptest::collection::vec((0u64..1 << 40, "[ -~]{0,10}", attrs()), 0..3),
            proptest::collection::vec((1u128.., 1u64.., attrs()), 0..2),
            proptest::collection::vec(
                (
                    any::<bool>(),
                    any::<u64>(),
                    0u64..1 << 40,
                    proptest::option::of("[a-z]{1,8}"),
                    proptest::option::of(any::<u64>()),
                ),
                0..3,
            ),
            (
                proptest::option::of(any::<u64>()),
                0.0f64..=1.0,
                any::<u32>(),
                any::<u32>(),
                "[a-z]{0,3}(=[a-z0-9]{1,4})?",
                0u8..4,
                0.0f32..=1.0,
            ),
        )
            .prop_map(
                |(
                    (t, s, p, name, kind),
                    (service, host, pid, eu),
                    (start, dur, status, msg),
                    attributes,
                    events,
                    links,
                    messages,
                    (cpu, prob, da, de, ts, src, conf),
                )| Span {
                    trace_id: TraceId::new(t).unwrap(),
                    span_id: SpanId::new(s).unwrap(),
                    parent_id: p.and_then(SpanId::new),
                    name,
                    kind: [
                        SpanKind::Internal,
                        SpanKind::Server,
                        SpanKind::Client,
                        SpanKind::Producer,
                        SpanKind::Consumer,
                    ][kind as usize],
                    service: Arc::from(service.as_str()),
                    host: Arc::from(host.as_str()),
                    pid,
                    execution_unit: eu,
                    start,
                    end: start + dur,
                    status: match status {
                        0 => Status::Unset,
                        1 => Status::Ok,
                        _ => Status::Error(msg),
                    },
                    attributes,
                    events: events
                        .into_iter()
                        .map(|(d, name, attributes)| Event {
                            time: start + d,
                            name,
                            attributes,
                        })
                        .collect(),
                    links: links
                        .into_iter()
                        .map(|(t, s, attributes)| Link {
                            trace_id: TraceId::new(t).unwrap(),
                            span_id: SpanId::new(s).unwrap(),
                            attributes,
                        })
                        .collect(),
                    messages: messages
                        .into_iter()
                        .map(|(send, id, d, peer, size)| Message {
                            direction: if send {
                                Direction::Send
                            } else {
                                Direction::Recv
                            },
                            id,
                            time: start + d,
                            peer,
                            size,
                        })
                        .collect(),
                    cpu_time: cpu,
                    sampling_probability: prob,
                    dropped_attributes: da,
                    dropped_events: de,
                    trace_state: ts,
                    source: match src {
                        0 => Source::Instrumented,
                        1 => Source::Imported,
                        2 => Source::Logs,
                        _ => Source::Inferred { confidence: conf },
                    },
                },
            )
    }
}
