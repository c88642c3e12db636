//! Bags across process boundaries: in the W3C `baggage` header of requests (one member,
//! [`BAGGAGE_MEMBER`]) and, for the answers a server's advice packed, of responses.
//!
//! A member that arrives stays encoded in the span's W3C baggage until advice runs on
//! the span ([`take_from_baggage`]): a process none of whose advice runs in the request
//! forwards it untouched, as services in other languages do, and decodes nothing. A
//! request that carries a bag the process has changed gets the bag re-encoded; a
//! response carries only what the server added ([`Bags::since_arrival`]).
//!
//! The member stays in the span's W3C baggage (`SpanRecord::baggage`, copied to children)
//! until advice runs on a span; it is then decoded into that span's bag and marked as
//! arrived. `inject` writes the member as it is when the span has no bag of its own, else
//! the bag, merged with the member, re-encoded. The tower server layer adds to the
//! response's `baggage` header only what the server added to the request's bags (nothing
//! when its advice packed nothing), and the tower client layer and the `reqwest` client
//! merge a response's bags into the client span. A malformed bag is dropped and counted;
//! a bag cut to size is counted.

use std::sync::Arc;

use causeway_pivot::bag::Bags;
use causeway_pivot::wire::BAGGAGE_MEMBER;
use tracing_subscriber::registry::{LookupSpan, Registry};

use super::Runtime;
use crate::layer::CausewayLayer;
use crate::propagation::{self, Baggage};
use crate::record::SpanRecord;
use crate::subscriber::CausewaySubscriber;

/// Runs `f` on the runtime and the bag `span`'s advice reads and writes (its own, or its
/// nearest recorded ancestor's when it has no record).
pub(crate) fn with_bag<R>(
    span: &tracing::Span,
    f: impl FnOnce(&Runtime, &mut Option<Arc<Bags>>) -> R,
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

/// Moves a bag that arrived in W3C baggage into `bag`, marked as arrived (when the
/// process runs queries): advice is about to read or write it. Inlined: every advice
/// asks.
#[inline]
pub(crate) fn take_from_baggage(
    runtime: &Runtime,
    w3c: &mut Option<Arc<Baggage>>,
    bag: &mut Option<Arc<Bags>>,
) {
    if !runtime.active() || w3c.is_none() {
        return;
    }
    move_member(runtime, w3c, bag);
}

fn move_member(runtime: &Runtime, w3c: &mut Option<Arc<Baggage>>, bag: &mut Option<Arc<Bags>>) {
    let Some(b) = w3c.as_mut() else { return };
    if b.get(BAGGAGE_MEMBER).is_none() {
        return;
    }
    let text = Arc::make_mut(b).remove(BAGGAGE_MEMBER).unwrap_or_default();
    if b.is_empty() {
        *w3c = None;
    }
    if let Some(mut arrived) = runtime.decode_bag(&text) {
        Arc::make_mut(&mut arrived).mark_arrived();
        super::merge_bag(bag, Some(arrived));
    }
}

/// The text of the member that carries the bag on an outgoing request; none when the
/// process runs no query or the span has no bag of its own (a member that arrived then
/// goes on untouched). A member that arrived is first taken out of `w3c` and merged into
/// the bag, so the text replaces it.
pub(crate) fn outgoing_member(
    runtime: &Runtime,
    w3c: &mut Option<Arc<Baggage>>,
    mut bag: Option<Arc<Bags>>,
) -> Option<Arc<str>> {
    if !runtime.active() || bag.is_none() {
        return None;
    }
    take_from_baggage(runtime, w3c, &mut bag);
    bag.as_deref().and_then(|b| runtime.encode_bag(b))
}

/// The `baggage` header value carrying back on a response what `span`'s advice (and the
/// responses to its own calls) added to the request's bag; none when nothing was added
/// or the process runs no query.
pub fn response_baggage(span: &tracing::Span) -> Option<String> {
    with_bag(span, |runtime, bag| {
        if !runtime.active() {
            return None;
        }
        let added = bag.as_deref()?.since_arrival()?;
        let text = runtime.encode_bag(&added)?;
        Some(format!("{BAGGAGE_MEMBER}={text}"))
    })
    .flatten()
}

/// Merges the bag a response carried (in its `baggage` header) into `span`'s.
pub fn merge_response_baggage(span: &tracing::Span, headers: &http::HeaderMap) {
    if !headers.contains_key(propagation::BAGGAGE) {
        return;
    }
    with_bag(span, |runtime, bag| {
        if !runtime.active() {
            return;
        }
        let values = headers
            .get_all(propagation::BAGGAGE)
            .iter()
            .filter_map(|v| v.to_str().ok());
        let w3c = Baggage::parse(values);
        let Some(text) = w3c.get(BAGGAGE_MEMBER) else {
            return;
        };
        if let Some(arrived) = runtime.decode_bag(text) {
            super::merge_bag(bag, Some(arrived));
        }
    });
}
