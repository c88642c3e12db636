//! The `tracing` Layer: turns `tracing` spans and events into model spans.

use std::borrow::Cow;
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
use crate::propagation::{Baggage, SpanContext, TraceState, FLAG_SAMPLED};
use crate::sampling::SamplerState;

/// The tracestate key under which a sampling probability below 1 travels, so the
/// processes downstream record the probability that was in force at the root.
pub(crate) const PROBABILITY_KEY: &str = "cw";

/// What the layer keeps per live span (in the registry's extensions).
pub(crate) struct SpanRecord {
    pub(crate) trace_id: TraceId,
    pub(crate) span_id: SpanId,
    pub(crate) parent_id: Option<SpanId>,
    pub(crate) flags: u8,
    pub(crate) trace_state: TraceState,
    pub(crate) baggage: Option<Arc<Baggage>>,
    pub(crate) probability: f64,
    /// Collect annotations: sampled spans, and local roots whose decision a remote
    /// parent may still change.
    collect: bool,
    name: Cow<'static, str>,
    pub(crate) kind: SpanKind,
    start: u64,
    pub(crate) status: Status,
    attributes: Vec<KeyValue>,
    events: Vec<Event>,
    pub(crate) links: Vec<Link>,
    pub(crate) messages: Vec<Message>,
    dropped_attributes: u32,
    dropped_events: u32,
    execution_unit: u64,
    cpu_total: u64,
    cpu_entered: Option<u64>,
    max_annotations: usize,
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

    /// Makes `parent` (from another process or a message) this span's parent.
    pub(crate) fn set_remote_parent(&mut self, parent: &SpanContext) {
        self.trace_id = parent.trace_id;
        self.parent_id = Some(parent.span_id);
        self.flags = parent.flags;
        self.trace_state = parent.trace_state.clone();
        self.probability = probability_from(&parent.trace_state, parent.is_sampled());
        self.collect = self.collect || parent.is_sampled();
    }

    fn annotations(&self) -> usize {
        self.attributes.len() + self.events.len()
    }

    fn add_attribute(&mut self, kv: KeyValue) {
        if !self.collect {
            return;
        }
        if let Some(a) = self.attributes.iter_mut().find(|a| a.key == kv.key) {
            a.value = kv.value;
        } else if self.annotations() < self.max_annotations {
            self.attributes.push(kv);
        } else {
            self.dropped_attributes += 1;
        }
    }

    pub(crate) fn add_message(&mut self, m: Message) {
        // Messages are structure (they join traces), never displaced by annotations.
        if self.collect {
            self.messages.push(m);
        }
    }

    fn into_span(self, end: u64, shared: &LayerShared) -> Span {
        Span {
            trace_id: self.trace_id,
            span_id: self.span_id,
            parent_id: self.parent_id,
            name: self.name.into_owned(),
            kind: self.kind,
            service: shared.service.clone(),
            host: shared.host.clone(),
            pid: shared.pid,
            execution_unit: self.execution_unit,
            start: self.start,
            end,
            status: self.status,
            attributes: self.attributes,
            events: self.events,
            links: self.links,
            messages: self.messages,
            cpu_time: shared.cpu_time.then_some(self.cpu_total),
            sampling_probability: self.probability,
            dropped_attributes: self.dropped_attributes,
            dropped_events: self.dropped_events,
            trace_state: if self.trace_state.is_empty() {
                String::new()
            } else {
                self.trace_state.header()
            },
            source: Source::Instrumented,
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

pub(crate) struct LayerShared {
    pub(crate) sampler: Arc<SamplerState>,
    pub(crate) pipeline: Arc<Pipeline>,
    pub(crate) service: Arc<str>,
    pub(crate) host: Arc<str>,
    pub(crate) pid: u32,
    pub(crate) max_annotations: usize,
    pub(crate) cpu_time: bool,
}

/// The `tracing` Layer that records spans for Causeway. Build it with
/// [`crate::layer`]; it composes with other layers on a `tracing_subscriber::Registry`.
#[derive(Clone)]
pub struct CausewayLayer {
    pub(crate) shared: Arc<LayerShared>,
}

/// Reads span fields into a record, treating OpenTelemetry's special fields as structure.
struct FieldVisitor<'a> {
    record: &'a mut SpanRecord,
}

impl FieldVisitor<'_> {
    fn structural(&mut self, field: &Field, value: &str) -> bool {
        match field.name() {
            "otel.name" => self.record.name = Cow::Owned(value.to_owned()),
            "otel.kind" | "span.kind" => {
                if let Some(k) = SpanKind::parse(value) {
                    self.record.kind = k;
                }
            }
            "otel.status_code" => {
                self.record.status = match value.to_ascii_lowercase().as_str() {
                    "ok" => Status::Ok,
                    "error" => Status::Error(match &self.record.status {
                        Status::Error(m) => m.clone(),
                        _ => String::new(),
                    }),
                    _ => Status::Unset,
                }
            }
            "otel.status_message" | "error" | "error.message" => {
                self.record.status = Status::Error(value.to_owned())
            }
            _ => return false,
        }
        true
    }
}

impl Visit for FieldVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.structural(field, value) {
            self.record.add_attribute(KeyValue {
                key: field.name().to_owned(),
                value: Value::Str(value.to_owned()),
            });
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.record.add_attribute(KeyValue {
            key: field.name().to_owned(),
            value: Value::I64(value),
        });
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        let value = i64::try_from(value)
            .map(Value::I64)
            .unwrap_or_else(|_| Value::Str(value.to_string()));
        self.record.add_attribute(KeyValue {
            key: field.name().to_owned(),
            value,
        });
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.record.add_attribute(KeyValue {
            key: field.name().to_owned(),
            value: Value::F64(value),
        });
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "error" {
            if value {
                self.record.status = Status::Error(String::new());
            }
            return;
        }
        self.record.add_attribute(KeyValue {
            key: field.name().to_owned(),
            value: Value::Bool(value),
        });
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_str(field, &value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if !self.record.collect {
            return;
        }
        self.record_str(field, &format!("{value:?}"));
    }
}

/// Reads an event's fields: `message` names it, the rest are its attributes.
struct EventVisitor {
    name: Option<String>,
    attributes: Vec<KeyValue>,
}

impl EventVisitor {
    fn push(&mut self, field: &Field, value: Value) {
        self.attributes.push(KeyValue {
            key: field.name().to_owned(),
            value,
        });
    }
}

impl Visit for EventVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.name = Some(value.to_owned());
        } else {
            self.push(field, Value::Str(value.to_owned()));
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, Value::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        let v = i64::try_from(value)
            .map(Value::I64)
            .unwrap_or_else(|_| Value::Str(value.to_string()));
        self.push(field, v);
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, Value::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, Value::Bool(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.name = Some(format!("{value:?}"));
        } else {
            self.push(field, Value::Str(format!("{value:?}")));
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
        let start = now_ns();
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
        let shared = &self.shared;
        let meta = attrs.metadata();
        let mut record = match inherited {
            Some((trace_id, parent_id, flags, trace_state, baggage, probability)) => SpanRecord {
                trace_id,
                span_id: new_span_id(),
                parent_id: Some(parent_id),
                flags,
                trace_state,
                baggage,
                probability,
                collect: flags & FLAG_SAMPLED != 0,
                name: Cow::Borrowed(meta.name()),
                kind: SpanKind::Internal,
                start,
                status: Status::Unset,
                attributes: Vec::new(),
                events: Vec::new(),
                links: Vec::new(),
                messages: Vec::new(),
                dropped_attributes: 0,
                dropped_events: 0,
                execution_unit: 0,
                cpu_total: 0,
                cpu_entered: None,
                max_annotations: shared.max_annotations,
            },
            None => {
                let trace_id = new_trace_id();
                let (sampled, probability) = shared.sampler.decide(trace_id, start);
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
                    baggage: None,
                    probability,
                    // A root keeps its fields even when unsampled: a remote parent set
                    // next (server middleware) may turn sampling on.
                    collect: true,
                    name: Cow::Borrowed(meta.name()),
                    kind: SpanKind::Internal,
                    start,
                    status: Status::Unset,
                    attributes: Vec::new(),
                    events: Vec::new(),
                    links: Vec::new(),
                    messages: Vec::new(),
                    dropped_attributes: 0,
                    dropped_events: 0,
                    execution_unit: 0,
                    cpu_total: 0,
                    cpu_entered: None,
                    max_annotations: shared.max_annotations,
                }
            }
        };
        if record.collect {
            attrs.record(&mut FieldVisitor {
                record: &mut record,
            });
        }
        span.extensions_mut().insert(record);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(record) = ext.get_mut::<SpanRecord>() {
            if record.collect {
                values.record(&mut FieldVisitor { record });
            }
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
        if let Some(record) = ext.get_mut::<SpanRecord>() {
            if record.collect {
                record.links.push(Link {
                    trace_id: other.0,
                    span_id: other.1,
                    attributes: Vec::new(),
                });
            }
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let mut ext = span.extensions_mut();
        let Some(record) = ext.get_mut::<SpanRecord>() else {
            return;
        };
        if !record.collect {
            return;
        }
        if record.annotations() >= record.max_annotations {
            record.dropped_events += 1;
            return;
        }
        let mut v = EventVisitor {
            name: None,
            attributes: Vec::new(),
        };
        event.record(&mut v);
        record.events.push(Event {
            time: now_ns(),
            name: v.name.unwrap_or_else(|| event.metadata().name().to_owned()),
            attributes: v.attributes,
        });
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(record) = ext.get_mut::<SpanRecord>() {
            if record.execution_unit == 0 {
                record.execution_unit = thread_no();
            }
            if self.shared.cpu_time && record.collect {
                record.cpu_entered = Some(thread_cpu_ns());
            }
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.shared.cpu_time {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(record) = ext.get_mut::<SpanRecord>() {
            if let Some(t) = record.cpu_entered.take() {
                record.cpu_total += thread_cpu_ns().saturating_sub(t);
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(mut record) = span.extensions_mut().remove::<SpanRecord>() else {
            return;
        };
        if !record.is_sampled() {
            return;
        }
        if record.execution_unit == 0 {
            record.execution_unit = thread_no();
        }
        let end = now_ns();
        self.shared
            .pipeline
            .submit(record.into_span(end, &self.shared));
    }
}
