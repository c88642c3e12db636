//! Forwarding to an inner subscriber (such as `registry().with(fmt::layer())`, to keep a
//! service's log output): the callsites the inner subscriber wants are handed to it as
//! well, with its own span ids kept in the span's slot; the rest never reach it. A span
//! only the inner subscriber wants is transparent to Causeway: it gets a slot for the inner
//! id, and its children see its parent.
//!
//! A `tracing_subscriber::Registry` closes a span's parent by calling `try_close` on the
//! *current dispatcher*, which is Causeway, with the Registry's own id. Those calls only
//! happen while Causeway is closing a span in the inner subscriber, so a thread-local
//! flag set around that call tells them apart and hands them straight back.

use std::cell::Cell;

use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Interest, LevelFilter, Metadata, Subscriber};

thread_local! {
    static CLOSING_INNER: Cell<bool> = const { Cell::new(false) };
}

/// The inner subscriber and what it said it wants.
pub(crate) struct Inner {
    subscriber: Box<dyn Subscriber + Send + Sync>,
    max_level: LevelFilter,
}

impl Inner {
    pub(crate) fn new(subscriber: impl Subscriber + Send + Sync + 'static) -> Inner {
        let max_level = subscriber.max_level_hint().unwrap_or(LevelFilter::TRACE);
        Inner {
            subscriber: Box::new(subscriber),
            max_level,
        }
    }

    pub(crate) fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        if *metadata.level() > self.max_level {
            return Interest::never();
        }
        self.subscriber.register_callsite(metadata)
    }

    pub(crate) fn max_level(&self) -> LevelFilter {
        self.max_level
    }

    /// Whether the inner subscriber wants this span or event (its level hint first: a
    /// level it never wants costs one comparison).
    pub(crate) fn wants(&self, metadata: &Metadata<'_>) -> bool {
        *metadata.level() <= self.max_level && self.subscriber.enabled(metadata)
    }

    /// The span in the inner subscriber; `parent` is the inner id of an explicit parent.
    pub(crate) fn new_span(&self, attrs: &Attributes<'_>, parent: Option<u64>) -> u64 {
        let id = match (attrs.parent(), parent) {
            (Some(_), Some(p)) => self.subscriber.new_span(&Attributes::child_of(
                Id::from_u64(p),
                attrs.metadata(),
                attrs.values(),
            )),
            // An explicit parent the inner subscriber never saw: its own context decides.
            (Some(_), None) => self
                .subscriber
                .new_span(&Attributes::new(attrs.metadata(), attrs.values())),
            (None, _) => self.subscriber.new_span(attrs),
        };
        id.into_u64()
    }

    /// Hands on an event. One with an explicit `parent:` keeps Causeway's id for it
    /// (`tracing` gives no way to rebuild an event's values): the inner subscriber
    /// shows it without that span's context.
    pub(crate) fn event(&self, event: &Event<'_>) {
        self.subscriber.event(event);
    }

    pub(crate) fn record(&self, id: u64, values: &Record<'_>) {
        self.subscriber.record(&Id::from_u64(id), values);
    }

    pub(crate) fn record_follows_from(&self, id: u64, follows: u64) {
        self.subscriber
            .record_follows_from(&Id::from_u64(id), &Id::from_u64(follows));
    }

    pub(crate) fn enter(&self, id: u64) {
        self.subscriber.enter(&Id::from_u64(id));
    }

    pub(crate) fn exit(&self, id: u64) {
        self.subscriber.exit(&Id::from_u64(id));
    }

    pub(crate) fn clone_span(&self, id: u64) {
        // The inner id the clone returns is the same one (the Registry's always is).
        let _ = self.subscriber.clone_span(&Id::from_u64(id));
    }

    /// Closes the span in the inner subscriber, with the flag that routes its own calls
    /// back to it (see the module's docs).
    pub(crate) fn try_close(&self, id: Id) -> bool {
        struct Restore(bool);
        impl Drop for Restore {
            fn drop(&mut self) {
                CLOSING_INNER.with(|c| c.set(self.0));
            }
        }
        let _restore = Restore(CLOSING_INNER.with(|c| c.replace(true)));
        self.subscriber.try_close(id)
    }

    /// Whether a `try_close` that reaches Causeway now comes from the inner subscriber.
    pub(crate) fn is_closing() -> bool {
        CLOSING_INNER.with(|c| c.get())
    }
}
