//! The `tracing` Layer: Causeway's recording on a `tracing_subscriber::Registry`, for
//! applications that build their own Registry stack. Each span's record lives in the
//! Registry's extensions.

use std::sync::Arc;

use tracing::span::{Attributes, Id, Record};
use tracing::Subscriber;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

use crate::clock::now_raw;
use crate::record::{Recording, SpanRecord};

/// The `tracing` Layer that records spans for Causeway. Build it with
/// [`crate::layer`]; it composes with other layers on a `tracing_subscriber::Registry`.
#[derive(Clone)]
pub struct CausewayLayer {
    pub(crate) shared: Arc<Recording>,
}

impl<S> tracing_subscriber::Layer<S> for CausewayLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let parent = if let Some(p) = attrs.parent() {
            ctx.span(p)
        } else if attrs.is_contextual() {
            ctx.lookup_current()
        } else {
            None
        };
        // The nearest ancestor with a record: spans of unsampled traces below their
        // local root get none (see below). Every registry lookup costs, so the parent
        // is asked first and the walk up happens only when it has no record.
        let inherited = parent.as_ref().and_then(|p| {
            let own = p
                .extensions()
                .get::<SpanRecord>()
                .map(SpanRecord::inherited);
            own.or_else(|| {
                p.scope().skip(1).find_map(|a| {
                    a.extensions()
                        .get::<SpanRecord>()
                        .map(SpanRecord::inherited)
                })
            })
        });
        // Inside an unsampled trace a span records nothing, and its context is its
        // nearest recorded ancestor's until something asks for its own (then
        // `context::with_record` gives it one). This keeps unsampled spans cheap.
        if inherited.as_ref().is_some_and(|p| !p.is_sampled()) {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let record = self.shared.new_record(inherited, attrs, now_raw());
        span.extensions_mut().insert(record);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(data) = ext.get_mut::<SpanRecord>().and_then(|r| r.data.as_mut()) {
            data.record_values(values);
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
            data.add_link(other.0, other.1);
        }
    }

    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let mut ext = span.extensions_mut();
        if let Some(data) = ext.get_mut::<SpanRecord>().and_then(|r| r.data.as_mut()) {
            data.record_event(event);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.shared.cpu_time {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(data) = ext.get_mut::<SpanRecord>().and_then(|r| r.data.as_mut()) {
            data.enter_cpu();
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        if !self.shared.cpu_time {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(data) = ext.get_mut::<SpanRecord>().and_then(|r| r.data.as_mut()) {
            data.exit_cpu();
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else { return };
        let Some(mut record) = span.extensions_mut().remove::<SpanRecord>() else {
            return;
        };
        self.shared.finish(&mut record);
    }
}
