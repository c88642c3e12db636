//! The `tracing` Layer: turns `tracing` spans and events into model spans.
//!
//! The application's thread does as little as it can: ids, the sampling decision, and for
//! sampled spans the raw fields (keys stay `&'static str`, nothing is formatted that was
//! not formatted by `tracing` already). Turning a finished span into a model `Span`
//! (owned keys, service and host) happens on the writer thread.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::Arc;

use causeway_model::{
    Event, KeyValue, Link, Message, Source, Span, SpanId, SpanKind, Status, TraceId, Value,
};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::clock::{new_span_id, new_trace_id, now_ns, thread_cpu_ns, thread_no};
use crate::pipeline::Pipeline;
use crate::propagation::{Baggage, Extracted, SpanContext, TraceState, FLAG_SAMPLED};
use crate::sampling::SamplerState;

/// The tracestate key under which a sampling probability below 1 travels, so the
/// processes downstream record the probability that was in force at the root.
pub(crate) const PROBABILITY_KEY: &str = "cw";

/// A key-value recorded on the hot path: the key is a `tracing` field name.
pub(crate) type RawAttr = (Cow<'static, str>, Value);

/// What a sampled span collects while it runs.
pub(crate) struct Collected {
    name: Cow<'static, str>,
    pub(crate) kind: SpanKind,
    start: u64,
    pub(crate) status: Status,
    attributes: Vec<RawAttr>,
    events: Vec<(u64, Cow<'static, str>, Vec<RawAttr>)>,
    pub(crate) links: Vec<Link>,
    pub(crate) messages: Vec<Message>,
    dropped_attributes: u32,
    dropped_events: u32,
    cpu_total: u64,
    cpu_entered: Option<u64>,
    max_annotations: usize,
}

/// What the layer keeps per live span (in the registry's extensions). Small, so that
/// unsampled spans cost little; the collected data is boxed and only for sampled spans.
pub(crate) struct SpanRecord {
    pub(crate) trace_id: TraceId,
    pub(crate) span_id: SpanId,
    pub(crate) parent_id: Option<SpanId>,
    pub(crate) flags: u8,
    pub(crate) trace_state: TraceState,
    pub(crate) baggage: Option<Arc<Baggage>>,
    pub(crate) probability: f64,
    execution_unit: u64,
    max_annotations: u32,
    name: &'static str,
    pub(crate) data: Option<Box<Collected>>,
}

/// A finished sampled span on its way to the writer thread.
pub(crate) struct FinishedSpan {
    trace_id: TraceId,
    span_id: SpanId,
    parent_id: Option<SpanId>,
    trace_state: TraceState,
    probability: f64,
    execution_unit: u64,
    end: u64,
    cpu_time: Option<u64>,
    data: Box<Collected>,
}

/// The process-wide parts of every span, added on the writer thread.
pub(crate) struct Process {
    pub(crate) service: Arc<str>,
    pub(crate) host: Arc<str>,
    pub(crate) pid: u32,
}

fn owned(raw: &mut Vec<RawAttr>) -> Vec<KeyValue> {
    raw.drain(..)
        .map(|(k, value)| KeyValue {
            key: k.into_owned(),
            value,
        })
        .collect()
}

impl FinishedSpan {
    /// The model span, and the emptied data box (its vectors keep their capacity) for
    /// the application's threads to reuse.
    pub(crate) fn into_span(self, process: &Process) -> (Span, Box<Collected>) {
        let mut d = self.data;
        let span = Span {
            trace_id: self.trace_id,
            span_id: self.span_id,
            parent_id: self.parent_id,
            name: std::mem::take(&mut d.name).into_owned(),
            kind: d.kind,
            service: process.service.clone(),
            host: process.host.clone(),
            pid: process.pid,
            execution_unit: self.execution_unit,
            start: d.start,
            end: self.end,
            status: std::mem::take(&mut d.status),
            attributes: owned(&mut d.attributes),
            events: d
                .events
                .drain(..)
                .map(|(time, name, mut attrs)| Event {
                    time,
                    name: name.into_owned(),
                    attributes: owned(&mut attrs),
                })
                .collect(),
            links: std::mem::take(&mut d.links),
            messages: std::mem::take(&mut d.messages),
            cpu_time: self.cpu_time,
            sampling_probability: self.probability,
            dropped_attributes: d.dropped_attributes,
            dropped_events: d.dropped_events,
            trace_state: if self.trace_state.is_empty() {
                String::new()
            } else {
                self.trace_state.header()
            },
            source: Source::Instrumented,
        };
        (span, d)
    }
}

impl Collected {
    /// Data for a new sampled span, in a reused box when the writer has returned one.
    fn new(
        pipeline: Option<&Pipeline>,
        name: &'static str,
        start: u64,
        fields: usize,
        max_annotations: usize,
    ) -> Box<Collected> {
        if let Some(mut c) = pipeline.and_then(|p| p.reuse()) {
            c.name = Cow::Borrowed(name);
            c.kind = SpanKind::Internal;
            c.start = start;
            c.dropped_attributes = 0;
            c.dropped_events = 0;
            c.cpu_total = 0;
            c.cpu_entered = None;
            c.max_annotations = max_annotations;
            return c;
        }
        Box::new(Collected {
            name: Cow::Borrowed(name),
            kind: SpanKind::Internal,
            start,
            status: Status::Unset,
            attributes: Vec::with_capacity(fields.min(max_annotations)),
            events: Vec::new(),
            links: Vec::new(),
            messages: Vec::new(),
            dropped_attributes: 0,
            dropped_events: 0,
            cpu_total: 0,
            cpu_entered: None,
            max_annotations,
        })
    }

    fn annotations(&self) -> usize {
        self.attributes.len() + self.events.len()
    }

    fn add_attribute(&mut self, key: &'static str, value: Value) {
        if let Some(a) = self.attributes.iter_mut().find(|a| a.0 == key) {
            a.1 = value;
        } else if self.annotations() < self.max_annotations {
            self.attributes.push((Cow::Borrowed(key), value));
        } else {
            self.dropped_attributes += 1;
        }
    }
}

impl SpanRecord {
    pub(crate) fn is_sampled(&self) -> bool {
        self.flags & FLAG_SAMPLED != 0
    }

    pub(crate) fn context(&self) -> SpanContext {
        SpanContext {
            trace_id: self.trace_id,
            span_id: self.span_id,
            flags: self.flags,
            trace_state: self.trace_state.clone(),
            remote: false,
        }
    }

    /// Makes `parent` (from another process or a message) this span's parent. A span
    /// that turns sampled here starts collecting now: fields recorded before are lost,
    /// which is why the middleware sets the parent before the span is created
    /// ([`with_remote_parent`]).
    pub(crate) fn set_remote_parent(&mut self, parent: &SpanContext) {
        self.trace_id = parent.trace_id;
        self.parent_id = Some(parent.span_id);
        self.flags = parent.flags;
        self.trace_state = parent.trace_state.clone();
        self.probability = probability_from(&parent.trace_state, parent.is_sampled());
        if parent.is_sampled() && self.data.is_none() {
            self.data = Some(Collected::new(
                None,
                self.name,
                now_ns(),
                0,
                self.max_annotations as usize,
            ));
        } else if !parent.is_sampled() {
            self.data = None;
        }
    }

    pub(crate) fn add_message(&mut self, m: Message) {
        // Messages are structure (they join traces), never displaced by annotations.
        if let Some(d) = self.data.as_mut() {
            d.messages.push(m);
        }
    }
}

fn probability_from(ts: &TraceState, sampled: bool) -> f64 {
    ts.get(PROBABILITY_KEY)
        .and_then(|v| v.strip_prefix("p:"))
        .and_then(|p| p.parse::<f64>().ok())
        .filter(|p| (0.0..=1.0).contains(p))
        .unwrap_or(if sampled { 1.0 } else { 0.0 })
}

thread_local! {
    // The remote parent for the next span created on this thread without a local parent:
    // set by the server middleware around span creation, so the sampling decision is
    // right from the start.
    static PENDING_PARENT: RefCell<Option<Extracted>> = const { RefCell::new(None) };
}

/// Creates a span (with `make`) whose parent is the remote context in `extracted`, if it
/// has one, and which carries its baggage. Use it where a request arrives:
///
/// ```
/// # let headers = http::HeaderMap::new();
/// let extracted = causeway::extract(&headers);
/// let span = causeway::with_remote_parent(&extracted, || tracing::info_span!("handle"));
/// ```
pub fn with_remote_parent(
    extracted: &Extracted,
    make: impl FnOnce() -> tracing::Span,
) -> tracing::Span {
    PENDING_PARENT.with(|p| *p.borrow_mut() = Some(extracted.clone()));
    let span = make();
    PENDING_PARENT.with(|p| p.borrow_mut().take());
    span
}

pub(crate) struct LayerShared {
    pub(crate) sampler: Arc<SamplerState>,
    pub(crate) pipeline: Arc<Pipeline>,
    pub(crate) max_annotations: usize,
    pub(crate) cpu_time: bool,
}

/// The `tracing` Layer that records spans for Causeway. Build it with
/// [`crate::layer`]; it composes with other layers on a `tracing_subscriber::Registry`.
#[derive(Clone)]
pub struct CausewayLayer {
    pub(crate) shared: Arc<LayerShared>,
}

/// Reads span fields into collected data, treating OpenTelemetry's special fields as
/// structure.
struct FieldVisitor<'a> {
    data: &'a mut Collected,
}

impl FieldVisitor<'_> {
    fn structural(&mut self, field: &Field, value: &str) -> bool {
        match field.name() {
            "otel.name" => self.data.name = Cow::Owned(value.to_owned()),
            "otel.kind" | "span.kind" => {
                if let Some(k) = SpanKind::parse(value) {
                    self.data.kind = k;
                }
            }
            "otel.status_code" => {
                self.data.status = match value.to_ascii_lowercase().as_str() {
                    "ok" => Status::Ok,
                    "error" => Status::Error(match &self.data.status {
                        Status::Error(m) => m.clone(),
                        _ => String::new(),
                    }),
                    _ => Status::Unset,
                }
            }
            "otel.status_message" | "error" | "error.message" => {
                self.data.status = Status::Error(value.to_owned())
            }
            _ => return false,
        }
        true
    }
}

impl Visit for FieldVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.structural(field, value) {
            self.data
                .add_attribute(field.name(), Value::Str(value.to_owned()));
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.data.add_attribute(field.name(), Value::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        let value = i64::try_from(value)
            .map(Value::I64)
            .unwrap_or_else(|_| Value::Str(value.to_string()));
        self.data.add_attribute(field.name(), value);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.data.add_attribute(field.name(), Value::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "error" {
            if value {
                self.data.status = Status::Error(String::new());
            }
            return;
        }
        self.data.add_attribute(field.name(), Value::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_str(field, &value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.record_str(field, &format!("{value:?}"));
    }
}

/// Reads an event's fields: `message` names it, the rest are its attributes.
struct EventVisitor {
    name: Option<Cow<'static, str>>,
    attributes: Vec<RawAttr>,
}

impl Visit for EventVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.name = Some(Cow::Owned(value.to_owned()));
        } else {
            self.attributes
                .push((Cow::Borrowed(field.name()), Value::Str(value.to_owned())));
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.attributes
            .push((Cow::Borrowed(field.name()), Value::I64(value)));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        let v = i64::try_from(value)
            .map(Value::I64)
            .unwrap_or_else(|_| Value::Str(value.to_string()));
        self.attributes.push((Cow::Borrowed(field.name()), v));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.attributes
            .push((Cow::Borrowed(field.name()), Value::F64(value)));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.attributes
            .push((Cow::Borrowed(field.name()), Value::Bool(value)));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.name = Some(Cow::Owned(format!("{value:?}")));
        } else {
            self.attributes.push((
                Cow::Borrowed(field.name()),
                Value::Str(format!("{value:?}")),
            ));
        }
    }
}

impl<S> tracing_subscriber::Layer<S> for CausewayLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let parent = if let Some(p) = attrs.parent() {
            ctx.span(p)
        } else if attrs.is_contextual() {
            ctx.lookup_current()
        } else {
            None
        };
        let shared = &self.shared;
        let meta = attrs.metadata();
        let inherited = parent.as_ref().and_then(|p| {
            p.extensions().get::<SpanRecord>().map(|r| {
                (
                    r.trace_id,
                    r.span_id,
                    r.flags,
                    r.trace_state.clone(),
                    r.baggage.clone(),
                    r.probability,
                )
            })
        });
        let mut record = match inherited {
            Some((trace_id, parent_id, flags, trace_state, baggage, probability)) => SpanRecord {
                trace_id,
                span_id: new_span_id(),
                parent_id: Some(parent_id),
                flags,
                trace_state,
                baggage,
                probability,
                execution_unit: 0,
                max_annotations: 0,
                name: "",
                data: None,
            },
            None => match PENDING_PARENT.with(|p| p.borrow_mut().take()) {
                Some(Extracted {
                    parent: Some(remote),
                    baggage,
                }) => SpanRecord {
                    trace_id: remote.trace_id,
                    span_id: new_span_id(),
                    parent_id: Some(remote.span_id),
                    flags: remote.flags,
                    probability: probability_from(&remote.trace_state, remote.is_sampled()),
                    trace_state: remote.trace_state,
                    baggage: (!baggage.is_empty()).then(|| Arc::new(baggage)),
                    execution_unit: 0,
                    max_annotations: 0,
                    name: "",
                    data: None,
                },
                pending => {
                    let trace_id = new_trace_id();
                    let (sampled, probability) = shared.sampler.decide(trace_id);
                    let trace_state = if sampled && probability < 1.0 {
                        TraceState::parse([format!("{PROBABILITY_KEY}=p:{probability}").as_str()])
                    } else {
                        TraceState::default()
                    };
                    SpanRecord {
                        trace_id,
                        span_id: new_span_id(),
                        parent_id: None,
                        flags: if sampled { FLAG_SAMPLED } else { 0 },
                        trace_state,
                        baggage: pending
                            .map(|p| p.baggage)
                            .filter(|b| !b.is_empty())
                            .map(Arc::new),
                        probability,
                        execution_unit: 0,
                        max_annotations: 0,
                        name: "",
                        data: None,
                    }
                }
            },
        };
        record.execution_unit = thread_no();
        record.max_annotations = shared.max_annotations.min(u32::MAX as usize) as u32;
        record.name = meta.name();
        if record.is_sampled() {
            let mut data = Collected::new(
                Some(&shared.pipeline),
                meta.name(),
                now_ns(),
                meta.fields().len(),
                shared.max_annotations,
            );
            attrs.record(&mut FieldVisitor { data: &mut data });
            record.data = Some(data);
        }
        span.extensions_mut().insert(record);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(data) = ext.get_mut::<SpanRecord>().and_then(|r| r.data.as_mut()) {
            values.record(&mut FieldVisitor { data });
        }
    }

    fn on_follows_from(&self, id: &Id, follows: &Id, ctx: Context<'_, S>) {
        let Some(other) = ctx.span(follows).and_then(|s| {
            s.extensions()
                .get::<SpanRecord>()
                .map(|r| (r.trace_id, r.span_id))
        }) else {
            return;
        };
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(data) = ext.get_mut::<SpanRecord>().and_then(|r| r.data.as_mut()) {
            data.links.push(Link {
                trace_id: other.0,
                span_id: other.1,
                attributes: Vec::new(),
            });
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let mut ext = span.extensions_mut();
        let Some(data) = ext.get_mut::<SpanRecord>().and_then(|r| r.data.as_mut()) else {
            return;
        };
        if data.annotations() >= data.max_annotations {
            data.dropped_events += 1;
            return;
        }
        let mut v = EventVisitor {
            name: None,
            attributes: Vec::new(),
        };
        event.record(&mut v);
        data.events.push((
            now_ns(),
            v.name.unwrap_or(Cow::Borrowed(event.metadata().name())),
            v.attributes,
        ));
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.shared.cpu_time {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(data) = ext.get_mut::<SpanRecord>().and_then(|r| r.data.as_mut()) {
            data.cpu_entered = Some(thread_cpu_ns());
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.shared.cpu_time {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(data) = ext.get_mut::<SpanRecord>().and_then(|r| r.data.as_mut()) {
            if let Some(t) = data.cpu_entered.take() {
                data.cpu_total += thread_cpu_ns().saturating_sub(t);
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(record) = span.extensions_mut().remove::<SpanRecord>() else {
            return;
        };
        let SpanRecord {
            trace_id,
            span_id,
            parent_id,
            flags,
            trace_state,
            probability,
            execution_unit,
            data: Some(data),
            ..
        } = record
        else {
            return;
        };
        if flags & FLAG_SAMPLED == 0 {
            return;
        }
        let cpu_time = self.shared.cpu_time.then_some(data.cpu_total);
        self.shared.pipeline.submit(FinishedSpan {
            trace_id,
            span_id,
            parent_id,
            trace_state,
            probability,
            execution_unit,
            end: now_ns(),
            cpu_time,
            data,
        });
    }
}
