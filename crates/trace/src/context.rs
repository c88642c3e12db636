//! Reaching a span's Causeway context from a `tracing::Span`, and carrying context across
//! threads and processes.

use std::sync::Arc;

use causeway_model::{KeyValue, Link, SpanKind, Status};

use tracing_subscriber::registry::{LookupSpan, Registry};

use crate::propagation::{self, Baggage, Extracted, Extractor, Injector, SpanContext};
use crate::record::{Collected, SpanRecord};
use crate::subscriber::CausewaySubscriber;

/// Runs `f` on the data a sampled `span` collects.
fn with_data(span: &tracing::Span, f: impl FnOnce(&mut Collected)) {
    with_record(span, |r| {
        if let Some(d) = r.data.as_mut() {
            f(d)
        }
    });
}

/// Runs `f` on the Causeway record of `span`, if the span is recorded by the exclusive
/// subscriber or by a `CausewayLayer` over a `tracing_subscriber::Registry`.
pub(crate) fn with_record<R>(
    span: &tracing::Span,
    f: impl FnOnce(&mut SpanRecord) -> R,
) -> Option<R> {
    let mut f = Some(f);
    span.with_subscriber(|(id, dispatch)| {
        if let Some(exclusive) = dispatch.downcast_ref::<CausewaySubscriber>() {
            return exclusive.with_record(id, f.take()?);
        }
        let registry = dispatch.downcast_ref::<Registry>()?;
        let data = registry.span(id)?;
        if data.extensions().get::<SpanRecord>().is_none() {
            // A span of an unsampled trace: give it its own record now, as a child of
            // its nearest recorded ancestor (none: Causeway does not trace it).
            let made = data.scope().skip(1).find_map(|a| {
                a.extensions()
                    .get::<SpanRecord>()
                    .map(|r| SpanRecord::unsampled_child(r, data.metadata().name()))
            })?;
            data.extensions_mut().insert(made);
        }
        let mut ext = data.extensions_mut();
        let record = ext.get_mut::<SpanRecord>()?;
        f.take().map(|f| f(record))
    })
    .flatten()
}

/// Causeway's additions to `tracing::Span`.
pub trait SpanExt {
    /// The span's context (trace id, span id, flags), if Causeway records it.
    fn context(&self) -> Option<SpanContext>;
    /// The span's baggage (inherited by its children).
    fn baggage(&self) -> Option<Arc<Baggage>>;
    /// Sets one baggage entry on this span, for it and the children created after.
    fn set_baggage(&self, key: &str, value: &str);
    /// Sets the span's kind (also settable with an `otel.kind` field).
    fn set_kind(&self, kind: SpanKind);
    /// Marks the span failed with a message.
    fn set_error(&self, message: impl Into<String>);
    /// Marks the span successful.
    fn set_ok(&self);
    /// Links this span to another span's context.
    fn add_link(&self, to: &SpanContext, attributes: Vec<KeyValue>);
}

impl SpanExt for tracing::Span {
    fn context(&self) -> Option<SpanContext> {
        with_record(self, |r| r.context())
    }

    fn baggage(&self) -> Option<Arc<Baggage>> {
        with_record(self, |r| r.baggage.clone()).flatten()
    }

    fn set_baggage(&self, key: &str, value: &str) {
        with_record(self, |r| {
            let b = r.baggage.get_or_insert_with(Default::default);
            Arc::make_mut(b).set(key, value);
        });
    }

    fn set_kind(&self, kind: SpanKind) {
        with_data(self, |d| d.kind = kind);
    }

    fn set_error(&self, message: impl Into<String>) {
        let m = message.into();
        with_data(self, |d| d.status = Status::Error(m));
    }

    fn set_ok(&self) {
        with_data(self, |d| d.status = Status::Ok);
    }

    fn add_link(&self, to: &SpanContext, attributes: Vec<KeyValue>) {
        with_data(self, |d| {
            d.links.push(Link {
                trace_id: to.trace_id,
                span_id: to.span_id,
                attributes,
            })
        });
    }
}

/// The context of the current `tracing` span, if Causeway records it.
pub fn current_context() -> Option<SpanContext> {
    tracing::Span::current().context()
}

/// Writes the current span's context and baggage into outgoing headers. Unsampled
/// requests propagate too (with the sampled flag clear). Returns false when there is no
/// current Causeway span.
pub fn inject(carrier: &mut impl Injector) -> bool {
    inject_span(&tracing::Span::current(), carrier)
}

/// Writes `span`'s context and baggage into outgoing headers.
pub fn inject_span(span: &tracing::Span, carrier: &mut impl Injector) -> bool {
    let Some((ctx, mut baggage)) = with_record(span, |r| (r.context(), r.baggage.clone())) else {
        return false;
    };
    // The request's Pivot Tracing bags travel as one member of the W3C baggage.
    let bag_text = crate::pivot::carry::with_bag(span, |runtime, bag| {
        crate::pivot::carry::outgoing_member(runtime, &mut baggage, bag.clone())
    })
    .flatten();
    let member = bag_text
        .as_deref()
        .map(|text| (crate::pivot::BAGGAGE_MEMBER, text));
    propagation::inject_context_with_member(&ctx, baggage.as_deref(), member, carrier);
    true
}

/// Reads the W3C context of an incoming request.
pub fn extract(carrier: &impl Extractor) -> Extracted {
    propagation::extract(carrier)
}

/// Wraps a closure so that it runs in the current span (and with the current
/// dispatcher) wherever it is called: a thread, a pool's worker, a callback.
///
/// ```
/// let job = causeway::in_current_span(|| tracing::info!("runs in the caller's span"));
/// std::thread::spawn(job).join().unwrap();
/// ```
pub fn in_current_span<F, R>(f: F) -> impl FnOnce() -> R + Send
where
    F: FnOnce() -> R + Send,
{
    let span = tracing::Span::current();
    let dispatch = tracing::dispatcher::get_default(|d| d.clone());
    move || tracing::dispatcher::with_default(&dispatch, || span.in_scope(f))
}

/// Makes a remote context (a message's sender) the parent of `span`, created already:
/// the span joins that trace and follows its sampling decision. For `message::receive`;
/// where a request arrives, [`crate::with_remote_parent`] sets the parent before the span
/// exists, which keeps the fields it is created with.
pub(crate) fn set_remote_parent(span: &tracing::Span, parent: &SpanContext) {
    with_record(span, |r| r.set_remote_parent(parent));
}
