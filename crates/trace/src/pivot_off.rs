//! Pivot Tracing left out (the `pivot` feature off): the names the subscriber, the Layer
//! and the records use, doing nothing. No query can be installed, so no callsite has
//! advice, no span has a bag, and the types that would carry them have no values.

use std::sync::Arc;

use causeway_model::TraceId;
use tracing::span::Record;
use tracing::{Dispatch, Metadata};

use crate::propagation::Baggage;

/// A request's bags: none without Pivot Tracing.
pub(crate) enum Bags {}

/// When advice would run.
#[derive(Clone, Copy)]
pub(crate) enum ProbeKind {
    Span,
    Event,
    SpanEnter,
    SpanExit,
    SpanClose,
}

/// The member of W3C baggage bags would travel in.
pub(crate) const BAGGAGE_MEMBER: &str = "cw-pt";

/// A hit's captured fields: nothing to capture.
pub(crate) struct Fields;

/// A callsite's advice: none exists.
pub(crate) enum Hooks {}

impl Hooks {
    pub(crate) fn capture(&self, _: &impl tracing_subscriber::field::RecordFields) -> Fields {
        match *self {}
    }
}

/// A span at a tracepoint: made only from hooks, of which there are none.
pub(crate) struct TracepointSpan;

impl TracepointSpan {
    pub(crate) fn new(hooks: Arc<Hooks>, _: Fields, _: u64) -> TracepointSpan {
        drop(hooks);
        TracepointSpan
    }

    pub(crate) fn start(&self) -> u64 {
        0
    }

    pub(crate) fn record(&mut self, _: &Record<'_>) {}

    pub(crate) fn fire(
        &self,
        _: &Runtime,
        _: ProbeKind,
        _: Option<u64>,
        _: (&mut Option<Arc<Baggage>>, &mut Option<Arc<Bags>>),
        _: Option<TraceId>,
    ) {
    }
}

/// The runtime of a process that runs no query.
pub(crate) struct Runtime;

impl Runtime {
    pub(crate) fn for_process(_: &crate::Config, _: u64) -> Runtime {
        Runtime
    }

    pub(crate) fn active(&self) -> bool {
        false
    }

    pub(crate) fn set_dispatch(&self, _: &Dispatch) {}

    pub(crate) fn register(&self, _: &'static Metadata<'static>) {}

    pub(crate) fn hooks(&self, _: &Metadata<'_>) -> Option<Arc<Hooks>> {
        None
    }

    pub(crate) fn fire(
        &self,
        hooks: &Hooks,
        _: ProbeKind,
        _: &Fields,
        _: Option<u64>,
        _: &mut Option<Arc<Bags>>,
        _: Option<TraceId>,
    ) {
        match *hooks {}
    }
}

/// Nothing to merge: no span has a bag.
pub(crate) fn merge_bag(_: &mut Option<Arc<Bags>>, _: Option<Arc<Bags>>) {}

pub(crate) mod carry {
    //! Bags across processes: none to carry.

    use std::sync::Arc;

    use super::{Bags, Runtime};
    use crate::propagation::Baggage;

    pub(crate) fn with_bag<R>(
        _: &tracing::Span,
        _: impl FnOnce(&Runtime, &mut Option<Arc<Bags>>) -> R,
    ) -> Option<R> {
        None
    }

    pub(crate) fn take_from_baggage(
        _: &Runtime,
        _: &mut Option<Arc<Baggage>>,
        _: &mut Option<Arc<Bags>>,
    ) {
    }

    #[allow(dead_code)] // only the middleware features call it
    pub(crate) fn merge_response_baggage(_: &tracing::Span, _: &http::HeaderMap) {}

    #[allow(dead_code)] // only the middleware features call it
    pub(crate) fn response_baggage(_: &tracing::Span) -> Option<String> {
        None
    }

    pub(crate) fn outgoing_member(
        _: &Runtime,
        _: &mut Option<Arc<Baggage>>,
        _: Option<Arc<Bags>>,
    ) -> Option<Arc<str>> {
        None
    }
}
