//! A request's traces read as one: where a process nobody instrumented split a request in
//! two (it passed no context on) and the capture joins linked them
//! (`causeway_model::parent_links::TraceLink`), reading either trace reads both, joined
//! under the upper one's id. The links are followed to at most [`MOST_LINKED`] traces.

use causeway_model::parent_links::join_linked;
use causeway_model::{Trace, TraceId};
use causeway_store::{StoreError, TraceStore};

/// Traces one read joins at most.
const MOST_LINKED: usize = 16;

/// Trace `id` with the traces linked to it, joined; `None` when it is not stored.
pub(crate) fn read(store: &dyn TraceStore, id: TraceId) -> Result<Option<Trace>, StoreError> {
    let Some(first) = store.trace(id)? else {
        return Ok(None);
    };
    if first.links.is_empty() {
        return Ok(Some(first));
    }
    let mut traces = vec![first];
    let mut seen = vec![id];
    let mut next = 0;
    while next < traces.len() && traces.len() < MOST_LINKED {
        let others: Vec<TraceId> = traces[next].links.iter().map(|l| l.other).collect();
        next += 1;
        for other in others {
            if seen.contains(&other) || traces.len() >= MOST_LINKED {
                continue;
            }
            seen.push(other);
            if let Some(t) = store.trace(other)? {
                traces.push(t);
            }
        }
    }
    // The upper trace: none of its links' first spans is its own.
    let top = traces
        .iter()
        .find(|t| {
            t.links
                .iter()
                .all(|l| !t.spans.iter().any(|s| s.span_id == l.child))
        })
        .map_or(id, |t| t.trace_id);
    Ok(Some(join_linked(top, traces)))
}
