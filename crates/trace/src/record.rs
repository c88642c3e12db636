//! What Causeway records of a span, whichever subscriber drives it (the exclusive
//! subscriber or the Layer): its context, the sampling decision, the raw fields and
//! events of sampled spans, and the hand-off of finished spans to the writer. Both modes
//! record the same `SpanRecord`s, so they write the same spans.
//!
//! The application's thread does as little as it can: ids, the sampling decision, and for
//! sampled spans the raw fields (keys stay `&'static str`, nothing is formatted that was
//! not formatted by `tracing` already). Turning a finished span into a model `Span`
//! (owned keys, service and host) happens on the writer thread.
//!
//! A new span's parent is the nearest ancestor with a record, else the remote parent set by
//! `with_remote_parent` (a thread-local the server middleware fills around span creation);
//! with neither, the span starts a trace and is sampled there (`crate::sampling`). A sampled
//! span gets a boxed `Collected` holding its raw fields and a text buffer, reused from the
//! thread's own spare boxes, so a sampled span allocates nothing in steady state and its
//! buffers stay in that thread's cache. Fields become attributes, except `otel.name`,
//! `otel.kind`, `otel.status_code`, `otel.status_message` and `error`, which set the name,
//! kind and status; events inside a span become span events, and `follows_from` becomes a
//! link. Attributes and events together are capped (`Config::max_annotations`, 128), the
//! excess counted. Spans of unsampled traces below their local root keep no record at all.
//! Times are raw time-stamp-counter readings, converted to Unix time on the writer
//! (`crate::clock`).

use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt::Write as _;
use std::sync::Arc;

use causeway_model::{Link, Message, SpanId, SpanKind, Status, TraceId};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Record};

use crate::clock::{new_span_id, new_trace_id, now_raw, raw_to_unix, thread_cpu_ns, thread_no};
use crate::lane::{Counts, Entry, Extra, RawName, RawValue, TEXT_CHUNK};
use crate::pipeline::Pipeline;
use crate::pivot::{Bags, Hooks, ProbeKind, Runtime, TracepointSpan};
use crate::propagation::{Baggage, Extracted, SpanContext, TraceState, FLAG_SAMPLED};
use crate::sampling::SamplerState;

/// The tracestate key under which a sampling probability below 1 travels, so the
/// processes downstream record the probability that was in force at the root.
pub(crate) const PROBABILITY_KEY: &str = "cw";

/// A key-value recorded on the hot path: the key is a `tracing` field name.
pub(crate) type RawAttr = (&'static str, RawValue);

/// A span event recorded on the hot path: its name is static or in the text buffer, its
/// attributes a range of the span's event-attribute list.
struct RawEvent {
    time: u64,
    name: RawName,
    attrs: (u32, u32),
}

thread_local! {
    // Emptied data boxes of this thread's finished spans: a sampled span allocates
    // nothing in steady state, and its buffers stay in this thread's cache. Boxes, as
    // a span holds its data by one pointer.
    #[allow(clippy::vec_box)]
    static SPARE: RefCell<Vec<Box<Collected>>> = const { RefCell::new(Vec::new()) };
}

/// Boxes kept per thread at most.
const SPARE_MAX: usize = 64;

/// What a sampled span collects while it runs.
pub(crate) struct Collected {
    name: Cow<'static, str>,
    pub(crate) kind: SpanKind,
    start: u64,
    pub(crate) status: Status,
    attributes: Vec<RawAttr>,
    events: Vec<RawEvent>,
    event_attributes: Vec<RawAttr>,
    text: String,
    pub(crate) links: Vec<Link>,
    pub(crate) messages: Vec<Message>,
    dropped_attributes: u32,
    dropped_events: u32,
    cpu_total: u64,
    cpu_entered: Option<u64>,
    max_annotations: usize,
}

/// What is kept per live span (in a slot, or in the Registry's extensions). Small, so that
/// unsampled spans cost little; the collected data is boxed and only for sampled spans.
pub(crate) struct SpanRecord {
    pub(crate) trace_id: TraceId,
    pub(crate) span_id: SpanId,
    pub(crate) parent_id: Option<SpanId>,
    pub(crate) flags: u8,
    pub(crate) trace_state: TraceState,
    pub(crate) baggage: Option<Arc<Baggage>>,
    /// The request's Pivot Tracing bags.
    pub(crate) bag: Option<Arc<Bags>>,
    /// The advice and fields of a span at a tracepoint callsite.
    pub(crate) tracepoint: Option<Box<TracepointSpan>>,
    pub(crate) probability: f64,
    execution_unit: u64,
    max_annotations: u32,
    name: &'static str,
    pub(crate) data: Option<Box<Collected>>,
}

/// The process-wide parts of every span, added on the writer thread.
pub(crate) struct Process {
    pub(crate) service: Arc<str>,
    pub(crate) host: Arc<str>,
    pub(crate) pid: u32,
}

impl Collected {
    /// Data for a new sampled span, in a box this thread has used before when it has one.
    fn new(
        name: &'static str,
        start: u64,
        fields: usize,
        max_annotations: usize,
    ) -> Box<Collected> {
        if let Some(mut c) = SPARE.with(|s| s.borrow_mut().pop()) {
            c.name = Cow::Borrowed(name);
            c.kind = SpanKind::Internal;
            c.start = start;
            c.status = Status::Unset;
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
            event_attributes: Vec::new(),
            text: String::new(),
            links: Vec::new(),
            messages: Vec::new(),
            dropped_attributes: 0,
            dropped_events: 0,
            cpu_total: 0,
            cpu_entered: None,
            max_annotations,
        })
    }

    /// Empties the box and keeps it for this thread's next sampled span, unless it grew
    /// too big to pin for good or enough are kept already.
    fn recycle(mut self: Box<Collected>) {
        if !self.worth_reusing() {
            return;
        }
        self.attributes.clear();
        self.events.clear();
        self.event_attributes.clear();
        self.text.clear();
        self.links.clear();
        self.messages.clear();
        let _ = SPARE.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < SPARE_MAX {
                s.push(self);
            }
        });
    }

    /// The span's rare parts (a name or error message of its own, links, messages),
    /// moved out of the box.
    fn take_extra(&mut self) -> Option<Box<Extra>> {
        let name = match &self.name {
            Cow::Owned(_) => Some(std::mem::take(&mut self.name).into_owned()),
            Cow::Borrowed(_) => None,
        };
        let error = match &mut self.status {
            Status::Error(m) => Some(std::mem::take(m)),
            _ => None,
        };
        if name.is_none()
            && error.is_none()
            && self.links.is_empty()
            && self.messages.is_empty()
            && self.dropped_attributes == 0
            && self.dropped_events == 0
        {
            return None;
        }
        Some(Box::new(Extra {
            name,
            error,
            dropped_attributes: self.dropped_attributes,
            dropped_events: self.dropped_events,
            links: std::mem::take(&mut self.links),
            messages: std::mem::take(&mut self.messages),
        }))
    }

    /// Whether an emptied box is small enough to keep for reuse: one huge span must not
    /// pin its buffers' memory for good.
    pub(crate) fn worth_reusing(&self) -> bool {
        self.text.capacity() <= 64 << 10
            && self.attributes.capacity() <= 256
            && self.events.capacity() <= 256
            && self.event_attributes.capacity() <= 1024
    }

    fn annotations(&self) -> usize {
        self.attributes.len() + self.events.len()
    }

    fn add_attribute(&mut self, key: &'static str, value: RawValue) {
        if let Some(a) = self.attributes.iter_mut().find(|a| a.0 == key) {
            a.1 = value;
        } else if self.annotations() < self.max_annotations {
            self.attributes.push((key, value));
        } else {
            self.dropped_attributes += 1;
        }
    }

    /// Appends text to the span's buffer; its range, or `None` past 4 GiB.
    fn push_text(&mut self, write: impl FnOnce(&mut String)) -> Option<(u32, u32)> {
        let from = self.text.len();
        write(&mut self.text);
        let to = self.text.len();
        match (u32::try_from(from), u32::try_from(to)) {
            (Ok(a), Ok(b)) => Some((a, b)),
            _ => {
                self.text.truncate(from);
                None
            }
        }
    }
}

impl SpanRecord {
    /// The trace, when it is sampled: the example Pivot Tracing results link to.
    pub(crate) fn example(&self) -> Option<TraceId> {
        (self.flags & FLAG_SAMPLED != 0).then_some(self.trace_id)
    }

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
                self.name,
                now_raw(),
                0,
                self.max_annotations as usize,
            ));
        } else if !parent.is_sampled() {
            self.data = None;
        }
    }

    /// A record for a span of an unsampled trace that had none, made when something
    /// asks for the span's own context: a child of its nearest recorded ancestor.
    pub(crate) fn unsampled_child(ancestor: &SpanRecord, name: &'static str) -> SpanRecord {
        SpanRecord {
            trace_id: ancestor.trace_id,
            span_id: new_span_id(),
            parent_id: Some(ancestor.span_id),
            flags: ancestor.flags,
            trace_state: ancestor.trace_state.clone(),
            baggage: ancestor.baggage.clone(),
            bag: ancestor.bag.clone(),
            tracepoint: None,
            probability: ancestor.probability,
            execution_unit: thread_no(),
            max_annotations: ancestor.max_annotations,
            name,
            data: None,
        }
    }

    /// The record of a span Causeway does not record (only the inner subscriber wants
    /// it): no trace of its own, nothing collected, nothing propagated from it.
    pub(crate) fn transparent(name: &'static str) -> SpanRecord {
        SpanRecord {
            trace_id: new_trace_id(),
            span_id: new_span_id(),
            parent_id: None,
            flags: 0,
            trace_state: TraceState::default(),
            baggage: None,
            bag: None,
            tracepoint: None,
            probability: 0.0,
            execution_unit: thread_no(),
            max_annotations: 0,
            name,
            data: None,
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
    // Cleared on the way out, also if `make` panics, so that a later root span on this
    // thread never picks up a stale parent.
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            PENDING_PARENT.with(|p| p.borrow_mut().take());
        }
    }
    PENDING_PARENT.with(|p| *p.borrow_mut() = Some(extracted.clone()));
    let _clear = Clear;
    make()
}

/// The configuration and pipeline every span of one subscriber is recorded with.
pub(crate) struct Recording {
    pub(crate) pivot: Arc<Runtime>,
    pub(crate) sampler: Arc<SamplerState>,
    pub(crate) pipeline: Arc<Pipeline>,
    pub(crate) max_annotations: usize,
    pub(crate) cpu_time: bool,
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

impl FieldVisitor<'_> {
    fn text(&mut self, field: &Field, write: impl FnOnce(&mut String)) {
        if let Some((a, b)) = self.data.push_text(write) {
            self.data.add_attribute(field.name(), RawValue::Text(a, b));
        }
    }
}

impl Visit for FieldVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.structural(field, value) {
            self.text(field, |t| t.push_str(value));
        }
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.data.add_attribute(field.name(), RawValue::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        match i64::try_from(value) {
            Ok(v) => self.data.add_attribute(field.name(), RawValue::I64(v)),
            Err(_) => self.text(field, |t| {
                let _ = write!(t, "{value}");
            }),
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.data.add_attribute(field.name(), RawValue::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        if field.name() == "error" {
            if value {
                self.data.status = Status::Error(String::new());
            }
            return;
        }
        self.data.add_attribute(field.name(), RawValue::Bool(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.record_str(field, &value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        match field.name() {
            // Structural fields are rare; formatting them first is fine.
            "otel.name"
            | "otel.kind"
            | "span.kind"
            | "otel.status_code"
            | "otel.status_message"
            | "error"
            | "error.message" => self.record_str(field, &format!("{value:?}")),
            _ => self.text(field, |t| {
                let _ = write!(t, "{value:?}");
            }),
        }
    }
}

/// Reads an event's fields into the span's buffers: `message` names the event, the
/// rest are its attributes.
struct EventVisitor<'a> {
    data: &'a mut Collected,
    name: Option<(u32, u32)>,
}

impl EventVisitor<'_> {
    fn text(&mut self, field: &Field, write: impl FnOnce(&mut String)) {
        let Some((a, b)) = self.data.push_text(write) else {
            return;
        };
        if field.name() == "message" {
            self.name = Some((a, b));
        } else {
            self.data
                .event_attributes
                .push((field.name(), RawValue::Text(a, b)));
        }
    }
    fn value(&mut self, field: &Field, v: RawValue) {
        self.data.event_attributes.push((field.name(), v));
    }
}

impl Visit for EventVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, |t| t.push_str(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.value(field, RawValue::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        match i64::try_from(value) {
            Ok(v) => self.value(field, RawValue::I64(v)),
            Err(_) => self.text(field, |t| {
                let _ = write!(t, "{value}");
            }),
        }
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.value(field, RawValue::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.value(field, RawValue::Bool(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.text(field, |t| {
            let _ = write!(t, "{value:?}");
        });
    }
}

/// What a child span takes from its parent's record.
pub(crate) struct Inherited {
    pub(crate) trace_id: TraceId,
    pub(crate) span_id: SpanId,
    pub(crate) flags: u8,
    pub(crate) trace_state: TraceState,
    pub(crate) baggage: Option<Arc<Baggage>>,
    pub(crate) bag: Option<Arc<Bags>>,
    pub(crate) probability: f64,
}

impl Inherited {
    pub(crate) fn is_sampled(&self) -> bool {
        self.flags & FLAG_SAMPLED != 0
    }
}

impl SpanRecord {
    pub(crate) fn inherited(&self) -> Inherited {
        Inherited {
            trace_id: self.trace_id,
            span_id: self.span_id,
            flags: self.flags,
            trace_state: self.trace_state.clone(),
            baggage: self.baggage.clone(),
            bag: self.bag.clone(),
            probability: self.probability,
        }
    }
}

impl Recording {
    /// The record of a new span: a child of `parent`, or else a root (of the remote
    /// context `with_remote_parent` left for it, or of a new trace the sampler decides
    /// on). A sampled span starts collecting its fields here.
    pub(crate) fn new_record(
        &self,
        parent: Option<Inherited>,
        attrs: &Attributes<'_>,
        start: u64,
    ) -> SpanRecord {
        let meta = attrs.metadata();
        let mut record = match parent {
            Some(p) => SpanRecord {
                trace_id: p.trace_id,
                span_id: new_span_id(),
                parent_id: Some(p.span_id),
                flags: p.flags,
                trace_state: p.trace_state,
                baggage: p.baggage,
                bag: p.bag,
                tracepoint: None,
                probability: p.probability,
                execution_unit: 0,
                max_annotations: 0,
                name: "",
                data: None,
            },
            None => self.root_record(),
        };
        record.execution_unit = thread_no();
        record.max_annotations = self.max_annotations.min(u32::MAX as usize) as u32;
        record.name = meta.name();
        if record.is_sampled() {
            let mut data = Collected::new(
                meta.name(),
                start,
                meta.fields().len(),
                self.max_annotations,
            );
            attrs.record(&mut FieldVisitor { data: &mut data });
            record.data = Some(data);
        }
        if let Some(hooks) = self.pivot.hooks(meta) {
            let fields = hooks.capture(attrs);
            let tracepoint = TracepointSpan::new(hooks, fields, start);
            let example = record.example();
            tracepoint.fire(
                &self.pivot,
                ProbeKind::Span,
                None,
                (&mut record.baggage, &mut record.bag),
                example,
            );
            record.tracepoint = Some(Box::new(tracepoint));
        }
        record
    }

    /// Runs the advice `hooks` (the event's callsite's) at an event, with the bag of the
    /// span it happened in (none outside a recorded span).
    pub(crate) fn pivot_event(
        &self,
        hooks: &Hooks,
        event: &tracing::Event<'_>,
        span: Option<&mut SpanRecord>,
    ) {
        let fields = hooks.capture(event);
        let (bag, example) = match span {
            Some(r) => {
                crate::pivot::carry::take_from_baggage(&self.pivot, &mut r.baggage, &mut r.bag);
                let example = r.example();
                (&mut r.bag, example)
            }
            None => (&mut None, None),
        };
        self.pivot
            .fire(hooks, ProbeKind::Event, &fields, None, bag, example);
    }

    /// Runs the advice at a span's entry or exit.
    pub(crate) fn pivot_moment(&self, record: &mut SpanRecord, kind: ProbeKind) {
        if let Some(t) = &record.tracepoint {
            let example = record.example();
            t.fire(
                &self.pivot,
                kind,
                None,
                (&mut record.baggage, &mut record.bag),
                example,
            );
        }
    }

    fn root_record(&self) -> SpanRecord {
        match PENDING_PARENT.with(|p| p.borrow_mut().take()) {
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
                bag: None,
                tracepoint: None,
                execution_unit: 0,
                max_annotations: 0,
                name: "",
                data: None,
            },
            pending => {
                let trace_id = new_trace_id();
                let (sampled, probability) = self.sampler.decide(trace_id);
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
                    bag: None,
                    tracepoint: None,
                    probability,
                    execution_unit: 0,
                    max_annotations: 0,
                    name: "",
                    data: None,
                }
            }
        }
    }

    /// Runs the advice at a span's close, then hands the span to the writer if it was
    /// sampled.
    pub(crate) fn finish(&self, record: &mut SpanRecord) {
        if let Some(t) = record.tracepoint.take() {
            let duration = raw_to_unix(now_raw()).saturating_sub(raw_to_unix(t.start()));
            let example = record.example();
            t.fire(
                &self.pivot,
                ProbeKind::SpanClose,
                Some(duration),
                (&mut record.baggage, &mut record.bag),
                example,
            );
        }
        if record.flags & FLAG_SAMPLED == 0 {
            return;
        }
        let Some(mut data) = record.data.take() else {
            return;
        };
        let SpanRecord {
            trace_id,
            span_id,
            parent_id,
            probability,
            execution_unit,
            name,
            ..
        } = *record;
        let trace_state = std::mem::take(&mut record.trace_state);
        let end = now_raw();
        let extra = data.take_extra();
        let d = &*data;
        let n = 2
            + d.text.len().div_ceil(TEXT_CHUNK)
            + usize::from(extra.is_some())
            + d.attributes.len()
            + d.events.len()
            + d.event_attributes.len();
        let mut entries = SpanEntries {
            stage: 0,
            head: Entry::Head {
                trace_hi: (trace_id.get() >> 64) as u64,
                trace_lo: trace_id.get() as u64,
                span_id,
                parent_id,
                start: d.start,
                end,
                execution_unit: execution_unit as u32,
                text_len: d.text.len() as u32,
            },
            trace_state: Some(trace_state),
            name,
            probability,
            counts: Counts {
                attributes: d.attributes.len() as u16,
                events: d.events.len() as u16,
                cpu_time: if self.cpu_time { d.cpu_total } else { u64::MAX },
                kind: d.kind,
                ok: d.status == Status::Ok,
                extra: extra.is_some(),
            },
            extra,
            text: d.text.as_bytes().chunks(TEXT_CHUNK),
            attributes: d.attributes.iter(),
            events: d.events.iter(),
            event_attributes: &d.event_attributes,
            current_event: [].iter(),
        };
        self.pipeline.submit(n, &mut entries);
        data.recycle();
    }
}

/// The entries of one finished span, in the order `lane` decodes them; made one at a
/// time as the lane's slots are written (nothing is built first and copied).
struct SpanEntries<'a> {
    stage: u8,
    head: Entry,
    trace_state: Option<TraceState>,
    name: &'static str,
    probability: f64,
    counts: Counts,
    extra: Option<Box<Extra>>,
    text: std::slice::Chunks<'a, u8>,
    attributes: std::slice::Iter<'a, RawAttr>,
    events: std::slice::Iter<'a, RawEvent>,
    event_attributes: &'a [RawAttr],
    current_event: std::slice::Iter<'a, RawAttr>,
}

impl Iterator for SpanEntries<'_> {
    type Item = Entry;

    fn next(&mut self) -> Option<Entry> {
        loop {
            match self.stage {
                0 => {
                    self.stage = 1;
                    return Some(std::mem::take(&mut self.head));
                }
                1 => {
                    self.stage = 2;
                    return Some(Entry::Meta {
                        name: self.name,
                        trace_state: self.trace_state.take().unwrap_or_default(),
                        probability: self.probability,
                        counts: self.counts,
                    });
                }
                2 => self.stage = 3,
                3 => match self.text.next() {
                    Some(c) => {
                        let mut chunk = [0u8; TEXT_CHUNK];
                        chunk[..c.len()].copy_from_slice(c);
                        return Some(Entry::Text(chunk));
                    }
                    None => self.stage = 4,
                },
                4 => {
                    self.stage = 5;
                    if let Some(e) = self.extra.take() {
                        return Some(Entry::Extra(e));
                    }
                }
                5 => match self.attributes.next() {
                    Some(&(k, v)) => return Some(Entry::Attr(k, v)),
                    None => self.stage = 6,
                },
                _ => {
                    if let Some(&(k, v)) = self.current_event.next() {
                        return Some(Entry::Attr(k, v));
                    }
                    let e = self.events.next()?;
                    let attrs = self
                        .event_attributes
                        .get(e.attrs.0 as usize..e.attrs.1 as usize)
                        .unwrap_or_default();
                    self.current_event = attrs.iter();
                    return Some(Entry::Event {
                        time: e.time,
                        name: e.name,
                        attributes: attrs.len() as u32,
                    });
                }
            }
        }
    }
}

impl Collected {
    /// Records `values` (a `span.record(..)`) as attributes.
    pub(crate) fn record_values(&mut self, values: &Record<'_>) {
        values.record(&mut FieldVisitor { data: self });
    }

    /// Records an event as a span event, or counts it as dropped past the cap.
    pub(crate) fn record_event(&mut self, event: &tracing::Event<'_>) {
        if self.annotations() >= self.max_annotations {
            self.dropped_events += 1;
            return;
        }
        let time = now_raw();
        let first_attr = self.event_attributes.len() as u32;
        let mut v = EventVisitor {
            data: self,
            name: None,
        };
        event.record(&mut v);
        let name = match v.name {
            Some((a, b)) => RawName::Text(a, b),
            None => RawName::Static(event.metadata().name()),
        };
        let last_attr = self.event_attributes.len() as u32;
        self.events.push(RawEvent {
            time,
            name,
            attrs: (first_attr, last_attr),
        });
    }

    /// Starts counting the thread's CPU time (the span was entered).
    pub(crate) fn enter_cpu(&mut self) {
        self.cpu_entered = Some(thread_cpu_ns());
    }

    /// Adds the thread's CPU time since `enter_cpu` (the span was exited).
    pub(crate) fn exit_cpu(&mut self) {
        if let Some(t) = self.cpu_entered.take() {
            self.cpu_total += thread_cpu_ns().saturating_sub(t);
        }
    }

    pub(crate) fn add_link(&mut self, trace_id: TraceId, span_id: SpanId) {
        self.links.push(Link {
            trace_id,
            span_id,
            attributes: Vec::new(),
        });
    }
}
