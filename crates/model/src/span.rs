//! Spans and what they carry: attributes, events, links, messages, status, source.
//!
//! A `Span` holds its ids (`trace_id`, `span_id`, `parent_id`), `name`, `kind` (internal,
//! server, client, producer, consumer), `service` and `host` (both `Arc<str>`, shared rather
//! than copied per span), `pid`, `execution_unit`, `start`/`end` (Unix nanoseconds),
//! `status` (unset, ok, or error with a message), typed `attributes` (bool, i64, f64, string,
//! bytes, arrays), `events` (time, name, attributes), `links` (trace id, span id,
//! attributes), Pip `messages`, `cpu_time`, `sampling_probability`, the counts of dropped
//! attributes and events, the W3C `trace_state` and its `source`.
//!
//! For spans from the `causeway` library, `execution_unit` is a per-process number of the OS
//! thread that created the span (0 when unknown). It is informational: the path view's
//! threads are lanes of a process, not execution units
//! (`docs/decisions/002-pip-threads-are-lanes-per-process.md`).
//!
//! A `Message` is Pip's: a direction (send or receive), a 64-bit id equal on both ends, a
//! time, and optionally the peer and the size. One-way messages (queues, timers) join a
//! receiver's work to the sender's trace this way.
//!
//! `Source` says where a span came from: `instrumented` (the `causeway` library),
//! `imported` (OTLP, Zipkin, Jaeger JSON), `inferred` with a confidence (black-box inference,
//! `causeway infer`), `logs` (stitched from logs, `causeway logs`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{SpanId, TraceId};

/// What role a span plays in a request, as in OpenTelemetry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpanKind {
    /// Work inside one process.
    #[default]
    Internal,
    /// The callee's side of an RPC.
    Server,
    /// The caller's side of an RPC.
    Client,
    /// The sender of a one-way message.
    Producer,
    /// The receiver of a one-way message.
    Consumer,
}

impl SpanKind {
    /// The lower-case name used in text formats.
    pub fn as_str(self) -> &'static str {
        match self {
            SpanKind::Internal => "internal",
            SpanKind::Server => "server",
            SpanKind::Client => "client",
            SpanKind::Producer => "producer",
            SpanKind::Consumer => "consumer",
        }
    }
    /// Reads a kind name, either case; `None` for an unknown name.
    pub fn parse(s: &str) -> Option<SpanKind> {
        Some(match s.to_ascii_lowercase().as_str() {
            "internal" => SpanKind::Internal,
            "server" => SpanKind::Server,
            "client" => SpanKind::Client,
            "producer" => SpanKind::Producer,
            "consumer" => SpanKind::Consumer,
            _ => return None,
        })
    }
}

/// How a span ended.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "code", content = "message", rename_all = "lowercase")]
pub enum Status {
    /// Nobody said.
    #[default]
    Unset,
    /// Explicitly successful.
    Ok,
    /// Failed, with a message (possibly empty).
    Error(String),
}

/// A typed attribute value: Dapper's key-value annotations, OTel attributes, Pivot's variables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// A signed 64-bit integer.
    I64(i64),
    /// A 64-bit float.
    F64(f64),
    /// Text.
    Str(String),
    /// Raw bytes.
    Bytes(Vec<u8>),
    /// A list of values.
    Array(Vec<Value>),
}

impl Value {
    /// The value as text, if it is text.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }
    /// The value as an integer, if it is one.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Value::I64(v) => Some(*v),
            _ => None,
        }
    }
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::I64(v) => write!(f, "{v}"),
            Value::F64(v) => write!(f, "{v}"),
            Value::Str(s) => f.write_str(s),
            Value::Bytes(b) => {
                for x in b {
                    write!(f, "{x:02x}")?;
                }
                Ok(())
            }
            Value::Array(a) => {
                f.write_str("[")?;
                for (i, v) in a.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{v}")?;
                }
                f.write_str("]")
            }
        }
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}
impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}
impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::I64(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Bool(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::F64(v)
    }
}

/// One key-value attribute.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The typed value.
    pub value: Value,
}

impl KeyValue {
    /// Builds an attribute.
    pub fn new(key: impl Into<String>, value: impl Into<Value>) -> Self {
        KeyValue {
            key: key.into(),
            value: value.into(),
        }
    }
}

/// A timestamped annotation: Dapper's text annotation, Pip's notice, a log line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Unix nanoseconds.
    pub time: u64,
    /// The message or event name.
    pub name: String,
    /// Structured fields of the event.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<KeyValue>,
}

/// A causal link to a span of this or another trace (e.g. the requests a batched write served).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// The linked span's trace.
    pub trace_id: TraceId,
    /// The linked span.
    pub span_id: SpanId,
    /// Why the link exists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<KeyValue>,
}

/// The link attribute naming an OpenTracing reference's type.
pub const REF_TYPE: &str = "opentracing.ref_type";
/// [`REF_TYPE`]'s value for a span its parent did not wait for.
pub const FOLLOWS_FROM: &str = "follows_from";

/// Whether a message left or arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// This span sent the message.
    Send,
    /// This span received the message.
    Recv,
}

/// A message sent or received inside a span (Pip's messages). A send and a receive with
/// the same id are two ends of one message; one-way messages (queues, timers) join the
/// receiver's work to the sender's trace this way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Send or receive.
    pub direction: Direction,
    /// Identifies the message; equal on both ends.
    pub id: u64,
    /// Unix nanoseconds of the send or receive.
    pub time: u64,
    /// The other end (a queue name, host:port, service), if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// Payload size in bytes, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// Where a span came from; analyses may weigh inferred or stitched spans differently.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Source {
    /// Recorded by the `causeway` library in the process itself.
    #[default]
    Instrumented,
    /// Received from another tracer (OTLP, Zipkin).
    Imported,
    /// Inferred from black-box message timing (WAP5), with a confidence in [0, 1].
    Inferred {
        /// How sure the inference is, from 0 to 1.
        confidence: f32,
    },
    /// Stitched from unstructured log lines (lprof).
    Logs,
}

impl Source {
    /// The kinds of source, as [`Source::kind`] names them.
    pub const KINDS: [&'static str; 4] = ["instrumented", "imported", "inferred", "logs"];

    /// The source's kind without its confidence: one of [`Source::KINDS`].
    pub fn kind(self) -> &'static str {
        match self {
            Source::Instrumented => "instrumented",
            Source::Imported => "imported",
            Source::Inferred { .. } => "inferred",
            Source::Logs => "logs",
        }
    }

    /// A short textual form: `instrumented`, `imported`, `logs`, `inferred:0.75`.
    pub fn to_text(self) -> String {
        match self {
            Source::Instrumented => "instrumented".into(),
            Source::Imported => "imported".into(),
            Source::Logs => "logs".into(),
            Source::Inferred { confidence } => format!("inferred:{confidence}"),
        }
    }
    /// Reads the form written by [`Source::to_text`].
    pub fn from_text(s: &str) -> Option<Source> {
        Some(match s {
            "instrumented" => Source::Instrumented,
            "imported" => Source::Imported,
            "logs" => Source::Logs,
            _ => Source::Inferred {
                confidence: s.strip_prefix("inferred:")?.parse().ok()?,
            },
        })
    }
}

/// One unit of work in one process: the atom of every trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Span {
    /// The trace it belongs to.
    pub trace_id: TraceId,
    /// Its own id, unique within the trace.
    pub span_id: SpanId,
    /// The span that caused it; `None` for a root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<SpanId>,
    /// The operation name.
    pub name: String,
    /// Its role in the request.
    #[serde(default)]
    pub kind: SpanKind,
    /// The service (process role) that ran it.
    pub service: Arc<str>,
    /// The host that ran it.
    #[serde(default)]
    pub host: Arc<str>,
    /// The OS process id (0 when unknown).
    #[serde(default)]
    pub pid: u32,
    /// The OS thread or async task it ran in (0 when unknown); informational, since Pip's
    /// threads are lanes of a process (see `PathView`).
    #[serde(default)]
    pub execution_unit: u64,
    /// Unix nanoseconds at start.
    pub start: u64,
    /// Unix nanoseconds at end.
    pub end: u64,
    /// How it ended.
    #[serde(default)]
    pub status: Status,
    /// Typed key-value annotations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attributes: Vec<KeyValue>,
    /// Timestamped annotations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<Event>,
    /// Links to other spans.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub links: Vec<Link>,
    /// Messages sent and received.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<Message>,
    /// Thread CPU time spent inside the span, in nanoseconds, when recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_time: Option<u64>,
    /// The head-sampling probability in force when the trace was sampled (1.0 = all).
    #[serde(default = "one")]
    pub sampling_probability: f64,
    /// Attributes dropped by the annotation cap.
    #[serde(default)]
    pub dropped_attributes: u32,
    /// Events dropped by the annotation cap.
    #[serde(default)]
    pub dropped_events: u32,
    /// W3C tracestate carried with the span, if any.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trace_state: String,
    /// Where the span came from.
    #[serde(default)]
    pub source: Source,
}

fn one() -> f64 {
    1.0
}

impl Span {
    /// A span with the given ids, name, service and times, and nothing else.
    pub fn new(
        trace_id: TraceId,
        span_id: SpanId,
        parent_id: Option<SpanId>,
        name: impl Into<String>,
        service: &str,
        start: u64,
        end: u64,
    ) -> Span {
        Span {
            trace_id,
            span_id,
            parent_id,
            name: name.into(),
            kind: SpanKind::Internal,
            service: Arc::from(service),
            host: Arc::from(""),
            pid: 0,
            execution_unit: 0,
            start,
            end,
            status: Status::Unset,
            attributes: Vec::new(),
            events: Vec::new(),
            links: Vec::new(),
            messages: Vec::new(),
            cpu_time: None,
            sampling_probability: 1.0,
            dropped_attributes: 0,
            dropped_events: 0,
            trace_state: String::new(),
            source: Source::Instrumented,
        }
    }
    /// End minus start, in nanoseconds (0 if the clock went backwards).
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
    /// Whether the span only follows from its parent (OpenTracing's and Jaeger's
    /// FOLLOWS_FROM): the parent did not wait for it. Written as a link to the parent with
    /// `opentracing.ref_type = follows_from`, as OpenTelemetry's OpenTracing shim does.
    pub fn follows_from_parent(&self) -> bool {
        let Some(parent) = self.parent_id else {
            return false;
        };
        self.links.iter().any(|l| {
            l.span_id == parent
                && l.trace_id == self.trace_id
                && l.attributes.iter().any(|a| {
                    a.key == REF_TYPE && matches!(&a.value, Value::Str(v) if v == FOLLOWS_FROM)
                })
        })
    }
    /// The first attribute with this key.
    pub fn attribute(&self, key: &str) -> Option<&Value> {
        self.attributes
            .iter()
            .find(|kv| kv.key == key)
            .map(|kv| &kv.value)
    }
    /// True when the span ended in error.
    pub fn is_error(&self) -> bool {
        matches!(self.status, Status::Error(_))
    }
}
