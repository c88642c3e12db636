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
//! `opentracing.ref_type = follows_from` (see [`Span::follows_from_parent`]). Other
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

fn malformed(e: serde_json::Error) -> JaegerError {
    JaegerError {
        path: format!("line {} column {}", e.line(), e.column()),
        reason: format!("invalid Jaeger JSON: {}", super::json_message(&e)),
    }
}

/// Decodes Jaeger JSON: the query API's envelope, a bare trace or a list of traces.
/// Malformed JSON is an error with line and column; a span that cannot be read is
/// rejected alone, naming the field by its path.
pub fn decode_json(body: &[u8]) -> Result<Decoded, JaegerError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        let traces: Vec<JaegerTrace> = serde_json::from_slice(body).map_err(malformed)?;
        let mut out = Decoded::default();
        for (i, t) in traces.iter().enumerate() {
            decode_trace(t, &format!("[{i}]"), &mut out);
        }
        return Ok(out);
    }
    let top: TopObject = serde_json::from_slice(body).map_err(malformed)?;
    let mut out = Decoded::default();
    match top.data {
        Some(data) => {
            let traces = data.unwrap_or_default();
            if traces.is_empty() {
                if let Some(errors) = jaeger_errors(top.errors.as_ref()) {
                    return Err(JaegerError {
                        path: "errors".into(),
                        reason: format!("the document holds Jaeger's errors, not traces: {errors}"),
                    });
                }
            }
            for (i, t) in traces.iter().enumerate() {
                decode_trace(t, &format!("data[{i}]"), &mut out);
            }
        }
        None if top.spans.is_some() || top.trace_id.is_some() => {
            let trace = JaegerTrace {
                trace_id: top.trace_id,
                spans: top.spans.unwrap_or_default(),
                processes: top.processes,
                warnings: None,
            };
            decode_trace(&trace, "", &mut out);
        }
        None => {
            return Err(JaegerError {
                path: "body".into(),
                reason: "not Jaeger JSON: expected {\"data\": [traces]}, a trace \
                         {\"traceID\", \"spans\", \"processes\"} or a list of traces"
                    .into(),
            })
        }
    }
    Ok(out)
}

/// The messages of a non-empty `errors` list, joined.
fn jaeger_errors(errors: Option<&serde_json::Value>) -> Option<String> {
    let list = errors?.as_array().filter(|l| !l.is_empty())?;
    Some(
        list.iter()
            .map(|e| match e.get("msg").and_then(|m| m.as_str()) {
                Some(m) => m.to_string(),
                None => e.to_string(),
            })
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// Encodes spans as Jaeger's query API answers them: `{"data": [trace, ...], "total": 0,
/// "limit": 0, "offset": 0, "errors": null}`.
pub fn encode_json(spans: &[Span]) -> Vec<u8> {
    // Serializing plain structs to a Vec cannot fail.
    serde_json::to_vec(&Envelope::of(encode_traces(spans))).unwrap_or_default()
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

/// A process, read.
struct ProcessInfo {
    service: Arc<str>,
    host: Arc<str>,
    pid: u32,
    extra: Vec<KeyValue>,
}

fn decode_process(p: &Process, at: &str) -> Result<ProcessInfo, JaegerError> {
    let mut info = ProcessInfo {
        service: Arc::from(p.service_name.as_str()),
        host: Arc::from(""),
        pid: 0,
        extra: Vec::new(),
    };
    let (mut hostname, mut host_name) = (None, None);
    for (i, t) in p.tags.iter().enumerate() {
        let v = tag_value(t).map_err(|(field, reason)| JaegerError {
            path: join(at, &format!("tags[{i}].{field}")),
            reason,
        })?;
        match (t.key.as_str(), &v) {
            (TAG_HOSTNAME, Value::Str(h)) if hostname.is_none() => hostname = Some(h.clone()),
            (TAG_HOST_NAME, Value::Str(h)) if host_name.is_none() => host_name = Some(h.clone()),
            (TAG_PID | TAG_PID_SHORT, Value::I64(pid)) if info.pid == 0 && *pid > 0 => {
                match u32::try_from(*pid) {
                    Ok(pid) => info.pid = pid,
                    Err(_) => info.extra.push(KeyValue::new(t.key.as_str(), v)),
                }
            }
            _ => info.extra.push(KeyValue::new(t.key.as_str(), v)),
        }
    }
    // `hostname` is what Jaeger's clients write; `host.name` what OpenTelemetry's do.
    // Whichever is not the host stays an attribute.
    match (hostname, host_name) {
        (Some(h), other) => {
            info.host = Arc::from(h.as_str());
            if let Some(o) = other {
                info.extra.push(KeyValue::new(TAG_HOST_NAME, o));
            }
        }
        (None, Some(h)) => info.host = Arc::from(h.as_str()),
        (None, None) => {}
    }
    Ok(info)
}

fn decode_trace(t: &JaegerTrace, at: &str, out: &mut Decoded) {
    let processes: HashMap<&str, Result<ProcessInfo, JaegerError>> = t
        .processes
        .iter()
        .map(|(k, p)| {
            let path = join(at, &format!("processes.{k}"));
            (k.as_str(), decode_process(p, &path))
        })
        .collect();
    for (i, s) in t.spans.iter().enumerate() {
        let span_at = join(at, &format!("spans[{i}]"));
        match decode_span(s, t, at, &span_at, &processes) {
            Ok(span) => out.spans.push(span),
            Err(e) => out.rejected.push(e),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RefKind {
    ChildOf,
    FollowsFrom,
}

fn decode_span(
    s: &JaegerSpan,
    t: &JaegerTrace,
    trace_at: &str,
    at: &str,
    processes: &HashMap<&str, Result<ProcessInfo, JaegerError>>,
) -> Result<Span, JaegerError> {
    let err = |field: &str, reason: String| JaegerError {
        path: join(at, field),
        reason,
    };
    let (trace_text, trace_path) = match s.trace_id.as_deref().filter(|t| !t.is_empty()) {
        Some(id) => (id, join(at, "traceID")),
        None => match t.trace_id.as_deref().filter(|t| !t.is_empty()) {
            Some(id) => (id, join(trace_at, "traceID")),
            None => ("", join(at, "traceID")),
        },
    };
    let trace_id = parse_trace_id(trace_text).map_err(|e| JaegerError {
        path: trace_path,
        reason: e.to_string(),
    })?;
    let span_id = parse_span_id(&s.span_id).map_err(|e| err("spanID", e.to_string()))?;

    let mut refs = Vec::with_capacity(s.references.len());
    for (k, r) in s.references.iter().enumerate() {
        let kind = if r.ref_type.eq_ignore_ascii_case(CHILD_OF_REF) {
            RefKind::ChildOf
        } else if r.ref_type.eq_ignore_ascii_case(FOLLOWS_FROM_REF) {
            RefKind::FollowsFrom
        } else {
            return Err(err(
                &format!("references[{k}].refType"),
                format!(
                    "unknown reference type {:?}: expected CHILD_OF or FOLLOWS_FROM",
                    cut(&r.ref_type)
                ),
            ));
        };
        let ref_trace = match r.trace_id.as_deref().filter(|t| !t.is_empty()) {
            Some(id) => parse_trace_id(id)
                .map_err(|e| err(&format!("references[{k}].traceID"), e.to_string()))?,
            None => trace_id,
        };
        let ref_span = parse_span_id(&r.span_id)
            .map_err(|e| err(&format!("references[{k}].spanID"), e.to_string()))?;
        refs.push((kind, ref_trace, ref_span));
    }
    let in_trace = |kind: RefKind| {
        refs.iter()
            .position(|&(k, t, s)| k == kind && t == trace_id && s != span_id)
    };
    let parent_ref = in_trace(RefKind::ChildOf).or_else(|| in_trace(RefKind::FollowsFrom));
    let mut parent_id = parent_ref.map(|i| refs[i].2);
    if parent_id.is_none() {
        if let Some(p) = s.parent_span_id.as_deref().filter(|p| !p.is_empty()) {
            parent_id = match parse_span_id(p) {
                Ok(p) => Some(p).filter(|p| *p != span_id),
                // Old documents write a root's parent as zeros.
                Err(IdError::Zero { .. }) => None,
                Err(e) => return Err(err("parentSpanID", e.to_string())),
            };
        }
    }

    let start = s.start_time.saturating_mul(1000);
    let end = start.saturating_add(s.duration.saturating_mul(1000));
    let mut span = Span::new(
        trace_id,
        span_id,
        parent_id,
        s.operation_name.clone(),
        "",
        start,
        end,
    );
    span.source = Source::Imported;

    // The trace's process the span names, else the one embedded in it.
    let own;
    let info: Option<&ProcessInfo> = match (
        s.process_id.as_deref().filter(|p| !p.is_empty()),
        &s.process,
    ) {
        (Some(key), embedded) => match (processes.get(key), embedded) {
            (Some(Ok(info)), _) => Some(info),
            (Some(Err(e)), _) => return Err(e.clone()),
            (None, Some(p)) => {
                own = decode_process(p, &join(at, "process"))?;
                Some(&own)
            }
            (None, None) => {
                return Err(err(
                    "processID",
                    format!("process {:?} is not among the trace's processes", cut(key)),
                ))
            }
        },
        (None, Some(p)) => {
            own = decode_process(p, &join(at, "process"))?;
            Some(&own)
        }
        (None, None) => None,
    };
    match info {
        Some(info) => {
            span.service = info.service.clone();
            span.host = info.host.clone();
            span.pid = info.pid;
        }
        None => span.service = Arc::from(UNKNOWN_SERVICE),
    }

    let mut error_tag = false;
    let mut status_code: Option<Status> = None;
    let mut description: Option<String> = None;
    for (i, tag) in s.tags.iter().enumerate() {
        let v =
            tag_value(tag).map_err(|(field, reason)| err(&format!("tags[{i}].{field}"), reason))?;
        match (tag.key.as_str(), &v) {
            (TAG_KIND, Value::Str(k)) if SpanKind::parse(k).is_some() => {
                span.kind = SpanKind::parse(k).unwrap_or_default()
            }
            (TAG_ERROR, Value::Bool(b)) => error_tag |= *b,
            (TAG_ERROR, Value::Str(b)) if b == "true" || b == "false" => error_tag |= b == "true",
            (TAG_STATUS_CODE, Value::Str(c)) if c.eq_ignore_ascii_case("ok") => {
                status_code = Some(Status::Ok)
            }
            (TAG_STATUS_CODE, Value::Str(c)) if c.eq_ignore_ascii_case("error") => {
                status_code = Some(Status::Error(String::new()))
            }
            (TAG_STATUS_CODE, Value::Str(c)) if c.eq_ignore_ascii_case("unset") => {}
            (TAG_STATUS_DESCRIPTION, Value::Str(d)) if description.is_none() => {
                description = Some(d.clone())
            }
            (TAG_FORMAT, _) => {}
            (ATTR_THREAD, Value::I64(t)) => span.execution_unit = *t as u64,
            (ATTR_PROBABILITY, Value::F64(p)) => span.sampling_probability = *p,
            (ATTR_CPU, Value::I64(c)) => span.cpu_time = Some(*c as u64),
            (ATTR_SOURCE, Value::Str(src)) if Source::from_text(src).is_some() => {
                span.source = Source::from_text(src).unwrap_or_default()
            }
            (TAG_TRACE_STATE, Value::Str(ts)) if span.trace_state.is_empty() => {
                span.trace_state = ts.clone()
            }
            _ => span.attributes.push(KeyValue {
                key: tag.key.clone(),
                value: v,
            }),
        }
    }
    span.status = if error_tag || matches!(status_code, Some(Status::Error(_))) {
        Status::Error(description.take().unwrap_or_default())
    } else {
        status_code.unwrap_or_default()
    };
    // A description without an error status is not the status's: keep it.
    if let Some(d) = description {
        span.attributes
            .push(KeyValue::new(TAG_STATUS_DESCRIPTION, d));
    }
    if let Some(info) = info {
        span.attributes.extend(info.extra.iter().cloned());
    }

    for (li, log) in s.logs.iter().enumerate() {
        let mut name = None;
        let mut attributes = Vec::with_capacity(log.fields.len());
        for (fi, f) in log.fields.iter().enumerate() {
            let v = tag_value(f).map_err(|(field, reason)| {
                err(&format!("logs[{li}].fields[{fi}].{field}"), reason)
            })?;
            match v {
                Value::Str(n) if f.key == LOG_EVENT && name.is_none() => name = Some(n),
                v => attributes.push(KeyValue {
                    key: f.key.clone(),
                    value: v,
                }),
            }
        }
        let time = log.timestamp.saturating_mul(1000);
        let direction = match name.as_deref() {
            Some(EVENT_SEND) => Some(Direction::Send),
            Some(EVENT_RECV) => Some(Direction::Recv),
            _ => None,
        };
        if let Some(direction) = direction {
            let Some(msg) = super::otlp::message_of(direction, time, &attributes) else {
                return Err(err(
                    &format!("logs[{li}].fields"),
                    format!("{} log without an int64 {MSG_ID}", name.unwrap_or_default()),
                ));
            };
            span.messages.push(msg);
            continue;
        }
        span.events.push(Event {
            time,
            name: name.unwrap_or_else(|| LOG_DEFAULT_NAME.to_string()),
            attributes,
        });
    }

    let child_of_parent = parent_ref.filter(|&i| refs[i].0 == RefKind::ChildOf);
    for (k, &(kind, ref_trace, ref_span)) in refs.iter().enumerate() {
        if Some(k) == child_of_parent {
            continue;
        }
        // A parent the span is a child of is not also followed from: such a link would
        // make the parent's wait for it read as no wait.
        if child_of_parent.is_some()
            && kind == RefKind::FollowsFrom
            && ref_trace == trace_id
            && Some(ref_span) == parent_id
        {
            continue;
        }
        span.links.push(Link {
            trace_id: ref_trace,
            span_id: ref_span,
            attributes: vec![KeyValue::new(
                REF_TYPE,
                match kind {
                    RefKind::ChildOf => CHILD_OF,
                    RefKind::FollowsFrom => FOLLOWS_FROM,
                },
            )],
        });
    }
    Ok(span)
}

/// A JSON value, cut for an error message.
fn shown(v: &serde_json::Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 64 {
        format!("{}...", cut(&text))
    } else {
        text
    }
}

/// A tag's typed value; on error, the field at fault (`type` or `value`) and why.
fn tag_value(t: &Tag) -> Result<Value, (&'static str, String)> {
    use serde_json::Value as J;
    let v = &t.value;
    let key = cut(&t.key);
    let wrong = |ty: &str, what: &str| ("value", format!("{ty} tag {key:?}: {} {what}", shown(v)));
    let Some(ty) = t.value_type.as_deref().filter(|t| !t.is_empty()) else {
        // Untyped: the JSON value's own type.
        return Ok(match v {
            J::String(s) => Value::Str(s.clone()),
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Value::I64(i),
                None => Value::F64(n.as_f64().unwrap_or(f64::NAN)),
            },
            J::Array(_) | J::Object(_) => Value::Str(v.to_string()),
            J::Null => return Err(wrong("untyped", "is not a value")),
        });
    };
    match ty.to_ascii_lowercase().as_str() {
        "string" => match v {
            J::String(s) => Ok(Value::Str(s.clone())),
            _ => Err(wrong("string", "is not a string")),
        },
        "bool" => match v {
            J::Bool(b) => Ok(Value::Bool(*b)),
            J::String(s) if s == "true" || s == "false" => Ok(Value::Bool(s == "true")),
            _ => Err(wrong("bool", "is not true or false")),
        },
        "int64" => match v {
            J::Number(n) => n
                .as_i64()
                .map(Value::I64)
                .ok_or_else(|| wrong("int64", "is not a 64-bit integer")),
            J::String(s) => s
                .trim()
                .parse::<i64>()
                .map(Value::I64)
                .map_err(|_| wrong("int64", "is not a decimal 64-bit integer")),
            _ => Err(wrong("int64", "is not an integer")),
        },
        "float64" => match v {
            J::Number(n) => n
                .as_f64()
                .map(Value::F64)
                .ok_or_else(|| wrong("float64", "is not a number")),
            J::String(s) => s
                .trim()
                .parse::<f64>()
                .map(Value::F64)
                .map_err(|_| wrong("float64", "is not a number")),
            _ => Err(wrong("float64", "is not a number")),
        },
        "binary" => match v {
            J::String(s) => base64::engine::general_purpose::STANDARD
                .decode(s)
                .map(Value::Bytes)
                .map_err(|e| wrong("binary", &format!("is not base64 ({e})"))),
            _ => Err(wrong("binary", "is not a base64 string")),
        },
        _ => Err((
            "type",
            format!(
                "tag {key:?}: unknown type {:?} (string, bool, int64, float64 or binary)",
                cut(ty)
            ),
        )),
    }
}

/// An array as JSON, for the string tag that carries it.
fn array_json(v: &Value, depth: usize) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Str(s) => J::String(s.clone()),
        Value::Bool(b) => J::Bool(*b),
        Value::I64(i) => J::from(*i),
        Value::F64(f) if f.is_finite() => J::from(*f),
        Value::F64(f) => J::String(float_text(*f)),
        Value::Bytes(b) => J::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Value::Array(a) if depth >= MAX_ARRAY_DEPTH => {
            J::String(Value::Array(a.clone()).to_string())
        }
        Value::Array(a) => J::Array(a.iter().map(|v| array_json(v, depth + 1)).collect()),
    }
}

/// A float JSON cannot hold as a number, as text `str::parse` reads back.
fn float_text(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

fn tag(key: &str, v: &Value) -> Tag {
    use serde_json::Value as J;
    let (ty, value) = match v {
        Value::Str(s) => ("string", J::String(s.clone())),
        Value::Bool(b) => ("bool", J::Bool(*b)),
        Value::I64(i) if i.unsigned_abs() <= MAX_SAFE_INTEGER => ("int64", J::from(*i)),
        Value::I64(i) => ("int64", J::String(i.to_string())),
        Value::F64(f) if f.is_finite() => ("float64", J::from(*f)),
        Value::F64(f) => ("float64", J::String(float_text(*f))),
        Value::Bytes(b) => (
            "binary",
            J::String(base64::engine::general_purpose::STANDARD.encode(b)),
        ),
        Value::Array(_) => ("string", J::String(array_json(v, 0).to_string())),
    };
    Tag {
        key: key.to_string(),
        value_type: Some(ty.to_string()),
        value,
    }
}

/// Groups spans into Jaeger traces, in order of each trace's first span, with one process
/// per (service, host, pid) in each, keyed `p1`, `p2`, ...
pub fn encode_traces(spans: &[Span]) -> Vec<JaegerTrace> {
    let mut order: Vec<TraceId> = Vec::new();
    let mut by_trace: HashMap<TraceId, Vec<&Span>> = HashMap::new();
    for s in spans {
        by_trace
            .entry(s.trace_id)
            .or_insert_with(|| {
                order.push(s.trace_id);
                Vec::new()
            })
            .push(s);
    }
    order
        .into_iter()
        .map(|id| {
            let spans = by_trace.remove(&id).unwrap_or_default();
            encode_trace(id, &spans)
        })
        .collect()
}

fn encode_trace(id: TraceId, spans: &[&Span]) -> JaegerTrace {
    let mut keys: HashMap<(&str, &str, u32), String> = HashMap::new();
    let mut processes = BTreeMap::new();
    let mut out = Vec::with_capacity(spans.len());
    for s in spans {
        let next = keys.len() + 1;
        let key = keys
            .entry((&s.service, &s.host, s.pid))
            .or_insert_with(|| {
                let key = format!("p{next}");
                let mut tags = Vec::new();
                if !s.host.is_empty() {
                    tags.push(tag(TAG_HOSTNAME, &Value::from(&*s.host)));
                }
                if s.pid != 0 {
                    tags.push(tag(TAG_PID, &Value::I64(s.pid as i64)));
                }
                processes.insert(
                    key.clone(),
                    Process {
                        service_name: s.service.to_string(),
                        tags,
                    },
                );
                key
            })
            .clone();
        out.push(encode_span(s, key));
    }
    JaegerTrace {
        trace_id: Some(id.to_string()),
        spans: out,
        processes,
        warnings: None,
    }
}

fn reference(kind: &str, trace_id: TraceId, span_id: SpanId) -> Reference {
    Reference {
        ref_type: kind.to_string(),
        trace_id: Some(trace_id.to_string()),
        span_id: span_id.to_string(),
    }
}

fn encode_span(s: &Span, process_id: String) -> JaegerSpan {
    let mut references = Vec::with_capacity(s.links.len() + 1);
    let mut parent_link = None;
    if let Some(p) = s.parent_id {
        if s.follows_from_parent() {
            references.push(reference(FOLLOWS_FROM_REF, s.trace_id, p));
            // The link that marks the parent as followed-from is the reference itself.
            parent_link = s.links.iter().position(|l| {
                l.span_id == p
                    && l.trace_id == s.trace_id
                    && l.attributes.iter().any(|a| {
                        a.key == REF_TYPE && matches!(&a.value, Value::Str(v) if v == FOLLOWS_FROM)
                    })
            });
        } else {
            references.push(reference(CHILD_OF_REF, s.trace_id, p));
        }
    }
    for (i, l) in s.links.iter().enumerate() {
        if Some(i) == parent_link {
            continue;
        }
        let child_of = l
            .attributes
            .iter()
            .any(|a| a.key == REF_TYPE && matches!(&a.value, Value::Str(v) if v == CHILD_OF));
        let kind = if child_of {
            CHILD_OF_REF
        } else {
            FOLLOWS_FROM_REF
        };
        references.push(reference(kind, l.trace_id, l.span_id));
    }

    let mut tags: Vec<Tag> = s.attributes.iter().map(|a| tag(&a.key, &a.value)).collect();
    if s.execution_unit != 0 {
        tags.push(tag(ATTR_THREAD, &Value::I64(s.execution_unit as i64)));
    }
    if s.sampling_probability != 1.0 {
        tags.push(tag(ATTR_PROBABILITY, &Value::F64(s.sampling_probability)));
    }
    if let Some(c) = s.cpu_time {
        tags.push(tag(ATTR_CPU, &Value::I64(c as i64)));
    }
    if s.source != Source::Imported {
        tags.push(tag(ATTR_SOURCE, &Value::Str(s.source.to_text())));
    }
    if !s.trace_state.is_empty() {
        tags.push(tag(TAG_TRACE_STATE, &Value::from(s.trace_state.as_str())));
    }
    if s.kind != SpanKind::Internal {
        tags.push(tag(TAG_KIND, &Value::from(s.kind.as_str())));
    }
    match &s.status {
        Status::Unset => {}
        Status::Ok => tags.push(tag(TAG_STATUS_CODE, &Value::from("OK"))),
        Status::Error(m) => {
            tags.push(tag(TAG_STATUS_CODE, &Value::from("ERROR")));
            if !m.is_empty() {
                tags.push(tag(TAG_STATUS_DESCRIPTION, &Value::from(m.as_str())));
            }
            tags.push(tag(TAG_ERROR, &Value::Bool(true)));
        }
    }

    let mut logs: Vec<Log> = s
        .events
        .iter()
        .map(|e| {
            let mut fields = Vec::with_capacity(e.attributes.len() + 1);
            fields.push(tag(LOG_EVENT, &Value::from(e.name.as_str())));
            fields.extend(e.attributes.iter().map(|a| tag(&a.key, &a.value)));
            Log {
                timestamp: e.time / 1000,
                fields,
            }
        })
        .collect();
    for m in &s.messages {
        let name = match m.direction {
            Direction::Send => EVENT_SEND,
            Direction::Recv => EVENT_RECV,
        };
        let mut fields = vec![
            tag(LOG_EVENT, &Value::from(name)),
            tag(MSG_ID, &Value::I64(m.id as i64)),
        ];
        if let Some(p) = &m.peer {
            fields.push(tag(MSG_PEER, &Value::from(p.as_str())));
        }
        if let Some(z) = m.size {
            fields.push(tag(MSG_SIZE, &Value::I64(z as i64)));
        }
        logs.push(Log {
            timestamp: m.time / 1000,
            fields,
        });
    }

    let start_us = s.start / 1000;
    JaegerSpan {
        trace_id: Some(s.trace_id.to_string()),
        span_id: s.span_id.to_string(),
        parent_span_id: None,
        flags: Some(1), // sampled: only sampled spans are recorded
        operation_name: s.name.clone(),
        references,
        start_time: start_us,
        // Both ends cut to microseconds, so the end reads back as it was cut.
        duration: (s.end / 1000).saturating_sub(start_us),
        tags,
        logs,
        process_id: Some(process_id),
        process: None,
        warnings: None,
    }
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
