//! Finding the spans a decoded file holds, by their ids as the file writes them.

use causeway_model::{Span, SpanId};

/// The span id `s` (hex, as the files write it).
pub fn sid(s: &str) -> SpanId {
    SpanId::parse(s).unwrap()
}

/// The span of `spans` with id `id`.
pub fn find<'a>(spans: &'a [Span], id: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.span_id == sid(id))
        .unwrap_or_else(|| panic!("no span {id}"))
}
