//! Jaeger's JSON, both directions: what Jaeger's query API answers (`/api/traces...`) and
//! its UI's "Download JSON" writes, `{"data": [trace, ...], "total", "limit", "offset",
//! "errors"}`. A bare trace object (`{"traceID", "spans", "processes"}`) and a bare list of
//! traces are read too.
//!
//! Trace ids are 1 to 32 hex digits (a 64-bit id is the low half), span ids 1 to 16; both
//! are written zero-padded to 32 and 16 digits. Times are microseconds.
//!
//! A span's parent is its first CHILD_OF reference within its trace, else its first
//! FOLLOWS_FROM one; a FOLLOWS_FROM parent is also kept as a link with
//! `opentracing.ref_type = follows_from` (see [`Span::follows_from_parent`]), which tells the
//! critical path that the parent did not wait for it. Other
//! references become links with their reference type (but for a FOLLOWS_FROM reference to
//! a CHILD_OF parent, which would read as the parent not waiting), and links are written
//! back as references. The deprecated `parentSpanID` is read when no reference names a parent.
//!
//! A process's `serviceName` is the service, its `hostname` (or `host.name`) tag the host
//! and its `process.pid` (or `pid`) tag the process id; its other tags become attributes of
//! each of its spans. Tags become attributes, except `span.kind` (the kind), `error`,
//! `otel.status_code` and `otel.status_description` (the status) and
//! `internal.span.format` (dropped). Logs become events named by their `event` field, or
//! `log` without one. The parts of a span Jaeger has no field for travel as OTLP carries
//! them ([`super::otlp`]): the execution unit as `thread.id`, the sampling probability,
//! CPU time and source as `causeway.*` tags, Pip messages as logs whose `event` is
//! `causeway.message.send` or `causeway.message.recv`, and the W3C tracestate as
//! `w3c.tracestate`.
//!
//! What Jaeger cannot carry: nanoseconds (times are cut to microseconds), arrays (written
//! as their JSON text), link attributes other than the reference type, a reference within
//! the trace on a span without a parent (it is read back as the parent), and the counts of
//! dropped attributes and events.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize};

use super::otlp::{
    ATTR_CPU, ATTR_PROBABILITY, ATTR_SOURCE, ATTR_THREAD, EVENT_RECV, EVENT_SEND, MSG_ID, MSG_PEER,
    MSG_SIZE,
};
use crate::ids::{IdError, SpanId, TraceId};
mod decode;
mod encode;

pub use decode::decode_json;
#[cfg(test)]
use decode::*;
#[cfg(test)]
use encode::*;
pub use encode::{encode_json, encode_traces};

use crate::span::{
    Direction, Event, KeyValue, Link, Source, Span, SpanKind, Status, Value, FOLLOWS_FROM, REF_TYPE,
};

/// The greatest integer a JavaScript number holds exactly; larger int64 tags are written
/// as decimal strings, as Jaeger writes them.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;
const CHILD_OF_REF: &str = "CHILD_OF";
const FOLLOWS_FROM_REF: &str = "FOLLOWS_FROM";
const CHILD_OF: &str = "child_of";
const TAG_KIND: &str = "span.kind";
const TAG_ERROR: &str = "error";
const TAG_STATUS_CODE: &str = "otel.status_code";
const TAG_STATUS_DESCRIPTION: &str = "otel.status_description";
const TAG_FORMAT: &str = "internal.span.format";
const TAG_TRACE_STATE: &str = "w3c.tracestate";
const TAG_HOSTNAME: &str = "hostname";
const TAG_HOST_NAME: &str = "host.name";
const TAG_PID: &str = "process.pid";
const TAG_PID_SHORT: &str = "pid";
const LOG_EVENT: &str = "event";
const LOG_DEFAULT_NAME: &str = "log";
const UNKNOWN_SERVICE: &str = "unknown_service";
/// Arrays nested deeper than this are written as their text rather than as JSON.
const MAX_ARRAY_DEPTH: usize = 32;

/// A Jaeger document or span that could not be read, naming where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason} at {path}")]
pub struct JaegerError {
    /// Where, e.g. `data[0].spans[3].spanID`, or `line 4 column 9` for malformed JSON.
    pub path: String,
    /// What was wrong.
    pub reason: String,
}

/// The spans decoded from a document, and the spans rejected with the reason for each.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Spans that were read.
    pub spans: Vec<Span>,
    /// Spans that were not, each with where and why.
    pub rejected: Vec<JaegerError>,
}

/// One trace as Jaeger's JSON has it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct JaegerTrace {
    /// The trace id, hex; each span may also carry its own.
    #[serde(rename = "traceID", default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The spans.
    #[serde(default, deserialize_with = "nullable")]
    pub spans: Vec<JaegerSpan>,
    /// The processes the spans name by `processID`.
    #[serde(default, deserialize_with = "nullable")]
    pub processes: BTreeMap<String, Process>,
    /// Problems Jaeger found with the trace (`null` when none).
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
}

/// One span as Jaeger's JSON has it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JaegerSpan {
    /// The trace id, hex; the trace's when absent.
    #[serde(rename = "traceID", default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The span id, hex.
    #[serde(rename = "spanID", default, deserialize_with = "nullable")]
    pub span_id: String,
    /// The parent's id in old documents (references replace it).
    #[serde(
        rename = "parentSpanID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub parent_span_id: Option<String>,
    /// Trace flags (1: sampled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flags: Option<u32>,
    /// The operation name.
    #[serde(default, deserialize_with = "nullable")]
    pub operation_name: String,
    /// CHILD_OF and FOLLOWS_FROM references to other spans.
    #[serde(default, deserialize_with = "nullable")]
    pub references: Vec<Reference>,
    /// Start, in microseconds since the Unix epoch.
    #[serde(default, deserialize_with = "nullable")]
    pub start_time: u64,
    /// Duration in microseconds.
    #[serde(default, deserialize_with = "nullable")]
    pub duration: u64,
    /// Typed key-values.
    #[serde(default, deserialize_with = "nullable")]
    pub tags: Vec<Tag>,
    /// Timestamped field lists.
    #[serde(default, deserialize_with = "nullable")]
    pub logs: Vec<Log>,
    /// The key of the span's process in the trace's `processes`.
    #[serde(rename = "processID", default, skip_serializing_if = "Option::is_none")]
    pub process_id: Option<String>,
    /// The process itself, in documents that embed it in each span.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<Process>,
    /// Problems Jaeger found with the span (`null` when none).
    #[serde(default)]
    pub warnings: Option<Vec<String>>,
}

/// A reference from a span to another.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reference {
    /// `CHILD_OF` or `FOLLOWS_FROM`.
    #[serde(rename = "refType", default, deserialize_with = "nullable")]
    pub ref_type: String,
    /// The referenced span's trace; the referring span's when absent.
    #[serde(rename = "traceID", default, skip_serializing_if = "Option::is_none")]
    pub trace_id: Option<String>,
    /// The referenced span.
    #[serde(rename = "spanID", default, deserialize_with = "nullable")]
    pub span_id: String,
}

/// A process: the service and its tags.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Process {
    /// The service.
    #[serde(default, deserialize_with = "nullable")]
    pub service_name: String,
    /// Typed key-values of the process.
    #[serde(default, deserialize_with = "nullable")]
    pub tags: Vec<Tag>,
}

/// A typed key-value: a span's or process's tag, or a log's field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Tag {
    /// The key.
    #[serde(default, deserialize_with = "nullable")]
    pub key: String,
    /// `string`, `bool`, `int64`, `float64` or `binary`; taken from the value when absent.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub value_type: Option<String>,
    /// The value: an int64 beyond 2^53 as a decimal string, binary as base64.
    #[serde(default)]
    pub value: serde_json::Value,
}

/// A log: timestamped fields.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Log {
    /// Microseconds since the Unix epoch.
    #[serde(default, deserialize_with = "nullable")]
    pub timestamp: u64,
    /// The fields.
    #[serde(default, deserialize_with = "nullable")]
    pub fields: Vec<Tag>,
}

/// Jaeger's answer envelope, as its query API writes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Envelope<T> {
    /// The answer.
    pub data: T,
    /// Counted only for services and operations.
    pub total: usize,
    /// Always 0.
    pub limit: usize,
    /// Always 0.
    pub offset: usize,
    /// `null` when none.
    pub errors: Option<Vec<serde_json::Value>>,
}

impl<T> Envelope<T> {
    /// An answer with no errors.
    pub fn of(data: T) -> Envelope<T> {
        Envelope {
            data,
            total: 0,
            limit: 0,
            offset: 0,
            errors: None,
        }
    }
}

/// `null` read as the default.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Present (even as `null`) or absent.
fn present<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Some(Option::<T>::deserialize(d)?))
}

/// A top-level object: an envelope, or a bare trace.
#[derive(Deserialize)]
struct TopObject {
    #[serde(default, deserialize_with = "present")]
    data: Option<Option<Vec<JaegerTrace>>>,
    #[serde(default)]
    errors: Option<serde_json::Value>,
    #[serde(rename = "traceID", default)]
    trace_id: Option<String>,
    #[serde(default)]
    spans: Option<Vec<JaegerSpan>>,
    #[serde(default, deserialize_with = "nullable")]
    processes: BTreeMap<String, Process>,
}

fn join(prefix: &str, field: &str) -> String {
    if prefix.is_empty() {
        field.to_string()
    } else {
        format!("{prefix}.{field}")
    }
}

fn cut(s: &str) -> String {
    s.chars().take(64).collect()
}

fn check_hex(kind: &'static str, s: &str, max: usize) -> Result<(), IdError> {
    let found = s.chars().count();
    if found == 0 || found > max {
        return Err(IdError::Length {
            kind,
            value: cut(s),
            expected: if max == 32 { "1 to 32" } else { "1 to 16" },
            found,
        });
    }
    match s.chars().enumerate().find(|(_, c)| !c.is_ascii_hexdigit()) {
        Some((position, found)) => Err(IdError::NotHex {
            kind,
            value: cut(s),
            found,
            position,
        }),
        None => Ok(()),
    }
}

/// Reads a trace id of 1 to 32 hex digits; shorter ids are left-padded with zeros.
pub fn parse_trace_id(s: &str) -> Result<TraceId, IdError> {
    check_hex("trace id", s, 32)?;
    let v = u128::from_str_radix(s, 16).unwrap_or(0);
    TraceId::new(v).ok_or(IdError::Zero { kind: "trace id" })
}

/// Reads a span id of 1 to 16 hex digits; shorter ids are left-padded with zeros.
pub fn parse_span_id(s: &str) -> Result<SpanId, IdError> {
    check_hex("span id", s, 16)?;
    let v = u64::from_str_radix(s, 16).unwrap_or(0);
    SpanId::new(v).ok_or(IdError::Zero { kind: "span id" })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::strategies;
    use proptest::prelude::*;

    /// What Jaeger cannot carry, taken out of a span before it goes through.
    fn carried(mut s: Span) -> Span {
        let reserved = |k: &str| {
            matches!(k, TAG_KIND | TAG_ERROR | TAG_TRACE_STATE | TAG_FORMAT)
                || k.starts_with("causeway.")
                || k.starts_with("otel.")
                || k == ATTR_THREAD
        };
        s.attributes.retain(|a| !reserved(&a.key));
        let micros = |t: u64| t / 1000 * 1000;
        s.start = micros(s.start);
        s.end = micros(s.end);
        for a in &mut s.attributes {
            if let Value::Array(_) = a.value {
                a.value = Value::Str(array_json(&a.value, 0).to_string());
            }
        }
        for e in &mut s.events {
            e.time = micros(e.time);
            e.attributes.retain(|a| a.key != LOG_EVENT);
            for a in &mut e.attributes {
                if let Value::Array(_) = a.value {
                    a.value = Value::Str(array_json(&a.value, 0).to_string());
                }
            }
        }
        for m in &mut s.messages {
            m.time = micros(m.time);
        }
        // Links keep only their reference type, follows_from unless it was child_of.
        for l in &mut s.links {
            let child_of = l
                .attributes
                .iter()
                .any(|a| a.key == REF_TYPE && a.value == Value::from(CHILD_OF));
            l.attributes = vec![KeyValue::new(
                REF_TYPE,
                if child_of { CHILD_OF } else { FOLLOWS_FROM },
            )];
        }
        s.dropped_attributes = 0;
        s.dropped_events = 0;
        s
    }

    fn normalize(mut spans: Vec<Span>) -> Vec<Span> {
        spans.sort_by_key(|s| (s.trace_id, s.span_id));
        spans
    }

    proptest! {
        #[test]
        fn spans_round_trip_through_jaeger_json(
            spans in proptest::collection::vec(strategies::span().prop_map(carried), 1..6)
        ) {
            let d = decode_json(&encode_json(&spans)).unwrap();
            prop_assert!(d.rejected.is_empty(), "{:?}", d.rejected);
            prop_assert_eq!(normalize(d.spans), normalize(spans));
        }

        #[test]
        fn a_follows_from_parent_round_trips(span in strategies::span().prop_map(carried), parent in 1u64..) {
            let mut span = span;
            let parent = SpanId::new(parent).unwrap();
            prop_assume!(parent != span.span_id);
            span.parent_id = Some(parent);
            span.links.insert(0, Link {
                trace_id: span.trace_id,
                span_id: parent,
                attributes: vec![KeyValue::new(REF_TYPE, FOLLOWS_FROM)],
            });
            prop_assert!(span.follows_from_parent());
            let d = decode_json(&encode_json(std::slice::from_ref(&span))).unwrap();
            prop_assert!(d.rejected.is_empty(), "{:?}", d.rejected);
            prop_assert_eq!(d.spans, vec![span]);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_json(&bytes);
        }
    }

    #[test]
    fn ids_of_any_length_up_to_the_limit_are_left_padded() {
        assert_eq!(parse_trace_id("1").unwrap().get(), 1);
        assert_eq!(
            parse_trace_id("a03ee8fff1dcd9b9").unwrap().get(),
            0xa03ee8fff1dcd9b9
        );
        assert_eq!(
            parse_trace_id("1a03ee8fff1dcd9b9").unwrap().get(),
            0x1a03ee8fff1dcd9b9
        );
        assert_eq!(
            parse_trace_id("5B8EFFF798038103D269B633813FC60C")
                .unwrap()
                .to_string(),
            "5b8efff798038103d269b633813fc60c"
        );
        assert_eq!(parse_span_id("ff").unwrap().to_string(), "00000000000000ff");
        let e = parse_trace_id(&"1".repeat(33)).unwrap_err();
        assert!(e.to_string().contains("expected 1 to 32 hex digits"), "{e}");
        let e = parse_span_id(&"1".repeat(17)).unwrap_err();
        assert!(e.to_string().contains("expected 1 to 16 hex digits"), "{e}");
        assert!(parse_span_id("+1").is_err());
        assert!(parse_span_id("").is_err());
        assert_eq!(parse_span_id("000"), Err(IdError::Zero { kind: "span id" }));
    }

    #[test]
    fn floats_json_cannot_hold_are_written_as_text_and_read_back() {
        for f in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let t = tag("x", &Value::F64(f));
            let Value::F64(back) = tag_value(&t).unwrap() else {
                panic!("not a float");
            };
            assert!(back.is_nan() == f.is_nan() && (f.is_nan() || back == f));
        }
    }
}
