//! Bags across process boundaries: in the W3C `baggage` header of requests (one member,
//! [`BAGGAGE_MEMBER`]) and, for the answers a server's advice packed, of responses.
//!
//! A process that runs no query leaves the member in the span's W3C baggage, so it is
//! forwarded untouched, as services in other languages do; one that runs queries takes
//! it out into the span's bag and writes the bag back on the way out.

use std::sync::Arc;

use causeway_pivot::bag::Baggage;
use causeway_pivot::wire::BAGGAGE_MEMBER;
use tracing_subscriber::registry::{LookupSpan, Registry};

use super::Runtime;
use crate::layer::CausewayLayer;
use crate::propagation::{self, Baggage as W3cBaggage};
use crate::record::SpanRecord;
use crate::subscriber::CausewaySubscriber;

/// Runs `f` on the runtime and the bag `span`'s advice reads and writes (its own, or its
/// nearest recorded ancestor's when it has no record).
pub(crate) fn with_bag<R>(
    span: &tracing::Span,
    f: impl FnOnce(&Runtime, &mut Option<Arc<Baggage>>) -> R,
) -> Option<R> {
    let mut f = Some(f);
    span.with_subscriber(|(id, dispatch)| {
        if let Some(exclusive) = dispatch.downcast_ref::<CausewaySubscriber>() {
            return exclusive.with_bag(id, f.take()?);
        }
        let layer = dispatch.downcast_ref::<CausewayLayer>()?;
        let registry = dispatch.downcast_ref::<Registry>()?;
        let data = registry.span(id)?;
        for s in data.scope() {
            let mut ext = s.extensions_mut();
            if let Some(r) = ext.get_mut::<SpanRecord>() {
                return f.take().map(|f| f(&layer.shared.pivot, &mut r.bag));
            }
        }
        None
    })
    .flatten()
}

/// Moves a bag that arrived in W3C baggage into `bag` (when the process runs queries).
/// Inlined: every root span asks.
#[inline]
pub(crate) fn take_from_baggage(
    runtime: &Runtime,
    w3c: &mut Option<Arc<W3cBaggage>>,
    bag: &mut Option<Arc<Baggage>>,
) {
    if !runtime.active() || w3c.is_none() {
        return;
    }
    move_member(runtime, w3c, bag);
}

fn move_member(
    runtime: &Runtime,
    w3c: &mut Option<Arc<W3cBaggage>>,
    bag: &mut Option<Arc<Baggage>>,
) {
    let Some(b) = w3c.as_mut() else { return };
    if b.get(BAGGAGE_MEMBER).is_none() {
        return;
    }
    let text = Arc::make_mut(b).remove(BAGGAGE_MEMBER).unwrap_or_default();
    if b.is_empty() {
        *w3c = None;
    }
    if let Some(arrived) = runtime.decode_bag(&text) {
        super::merge_bag(bag, Some(arrived));
    }
}

/// `w3c` with the bag written into its member, for an outgoing request (a member that
/// arrived before the process ran queries is merged in, not replaced).
pub(crate) fn add_to_baggage(
    runtime: &Runtime,
    mut w3c: Option<Arc<W3cBaggage>>,
    mut bag: Option<Arc<Baggage>>,
) -> Option<Arc<W3cBaggage>> {
    if !runtime.active() {
        return w3c;
    }
    take_from_baggage(runtime, &mut w3c, &mut bag);
    let Some(text) = bag.as_deref().and_then(|b| runtime.encode_bag(b)) else {
        return w3c;
    };
    let mut w3c = w3c.unwrap_or_default();
    Arc::make_mut(&mut w3c).set(BAGGAGE_MEMBER, &text);
    Some(w3c)
}

/// The `baggage` header value carrying `span`'s bag back on a response; none when the
/// bag is empty or the process runs no query.
pub fn response_baggage(span: &tracing::Span) -> Option<String> {
    with_bag(span, |runtime, bag| {
        if !runtime.active() {
            return None;
        }
        let text = runtime.encode_bag(bag.as_deref()?)?;
        Some(format!("{BAGGAGE_MEMBER}={text}"))
    })
    .flatten()
}

/// Merges the bag a response carried (in its `baggage` header) into `span`'s.
pub fn merge_response_baggage(span: &tracing::Span, headers: &http::HeaderMap) {
    let values = headers
        .get_all(propagation::BAGGAGE)
        .iter()
        .filter_map(|v| v.to_str().ok());
    let w3c = W3cBaggage::parse(values);
    let Some(text) = w3c.get(BAGGAGE_MEMBER) else {
        return;
    };
    with_bag(span, |runtime, bag| {
        if !runtime.active() {
            return;
        }
        if let Some(arrived) = runtime.decode_bag(text) {
            super::merge_bag(bag, Some(arrived));
        }
    });
}
