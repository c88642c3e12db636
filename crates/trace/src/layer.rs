//! The `tracing` Layer: Causeway's recording on a `tracing_subscriber::Registry`, for
//! applications that build their own Registry stack (with `fmt`, filters); see
//! docs/decisions/001. Each span's record lives in the Registry's extensions.

use std::sync::Arc;

use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::Subscriber;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::{Context, Filter};
use tracing_subscriber::registry::LookupSpan;

use crate::clock::now_raw;
use crate::pivot::{Hooks, ProbeKind, Runtime};
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
        // `context::with_record` gives it one). This keeps unsampled spans cheap. A span
        // whose close, entry or fields a Pivot Tracing query reads gets a record.
        if inherited.as_ref().is_some_and(|p| !p.is_sampled())
            && self.shared.pivot.hooks(attrs.metadata()).is_none()
        {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let record = self.shared.new_record(inherited, attrs, now_raw());
        span.extensions_mut().insert(record);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        let Some(record) = ext.get_mut::<SpanRecord>() else {
            return;
        };
        if let Some(data) = record.data.as_mut() {
            data.record_values(values);
        }
        if let Some(t) = record.tracepoint.as_mut() {
            t.record(values);
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
        if let Some(hooks) = self.shared.pivot.hooks(event.metadata()) {
            self.pivot_event(&hooks, event, &ctx);
        }
        let Some(span) = ctx.event_span(event) else {
            return;
        };
        let mut ext = span.extensions_mut();
        if let Some(data) = ext.get_mut::<SpanRecord>().and_then(|r| r.data.as_mut()) {
            data.record_event(event);
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        self.pivot_moment(id, &ctx, ProbeKind::SpanEnter);
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
        self.pivot_moment(id, &ctx, ProbeKind::SpanExit);
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
        // The bag goes back to the nearest recorded ancestor.
        if let Some(bag) = record.bag.take() {
            for a in span.scope().skip(1) {
                if let Some(r) = a.extensions_mut().get_mut::<SpanRecord>() {
                    crate::pivot::merge_bag(&mut r.bag, Some(bag));
                    break;
                }
            }
        }
    }

    fn on_register_dispatch(&self, subscriber: &tracing::Dispatch) {
        self.shared.pivot.set_dispatch(subscriber);
    }

    fn register_callsite(&self, metadata: &'static tracing::Metadata<'static>) -> Interest {
        self.shared.pivot.register(metadata);
        Interest::always()
    }
}

impl CausewayLayer {
    /// Runs the advice at an event with the bag of the nearest recorded span around it.
    fn pivot_event<S>(&self, hooks: &Hooks, event: &tracing::Event<'_>, ctx: &Context<'_, S>)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if let Some(span) = ctx.event_span(event) {
            for s in span.scope() {
                if let Some(r) = s.extensions_mut().get_mut::<SpanRecord>() {
                    self.shared.pivot_event(hooks, event, Some(r));
                    return;
                }
            }
        }
        self.shared.pivot_event(hooks, event, None);
    }

    /// Runs the advice at a span's entry or exit.
    fn pivot_moment<S>(&self, id: &Id, ctx: &Context<'_, S>, kind: ProbeKind)
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if !self.shared.pivot.active() {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut ext = span.extensions_mut();
        if let Some(r) = ext.get_mut::<SpanRecord>() {
            self.shared.pivot_moment(r, kind);
        }
    }
}

/// The Layer's filter when targets are configured: a callsite passes when the targets
/// enable it or an installed query reads it. A callsite that neither wants gets
/// `Interest::never`, so it costs nothing; installing or uninstalling a query rebuilds
/// the interest, and the level hint is `TRACE` only while a query is installed.
pub(crate) struct TargetsOrQueried {
    pub(crate) targets: Targets,
    pub(crate) pivot: Arc<Runtime>,
}

impl<S> Filter<S> for TargetsOrQueried {
    fn enabled(&self, meta: &tracing::Metadata<'_>, _: &Context<'_, S>) -> bool {
        self.targets.would_enable(meta.target(), meta.level()) || self.pivot.hooks(meta).is_some()
    }

    fn callsite_enabled(&self, meta: &'static tracing::Metadata<'static>) -> Interest {
        if self.targets.would_enable(meta.target(), meta.level())
            || self.pivot.hooks(meta).is_some()
        {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        if self.pivot.active() {
            Some(LevelFilter::TRACE)
        } else {
            Filter::<S>::max_level_hint(&self.targets)
        }
    }
}
