//! A request's traces read as one. Where a process nobody instrumented split a request in
//! two (it passed no context on) and the capture joins linked them
//! (`causeway_model::parent_links::TraceLink`), reading either trace by id reads both,
//! joined under the upper one's id, and a search or an analysis over many traces counts
//! the request once, by its upper trace. Links are followed to at most [`MOST_LINKED`]
//! traces.

use std::ops::ControlFlow;
use std::sync::Mutex;

use causeway_model::parent_links::read_linked;
use causeway_model::{Trace, TraceId};

use crate::{Fields, ScanStats, StoreError, TimeWindow, TraceStore};

/// Traces one read joins at most.
pub const MOST_LINKED: usize = 16;

/// Trace `id` with the traces linked to it, joined; `None` when it is not stored.
pub fn joined_trace(store: &dyn TraceStore, id: TraceId) -> Result<Option<Trace>, StoreError> {
    match store.trace(id)? {
        Some(first) => Ok(Some(joined(store, first)?)),
        None => Ok(None),
    }
}

/// `first` (read whole or in part) with the traces linked to it, joined.
pub fn joined(store: &dyn TraceStore, first: Trace) -> Result<Trace, StoreError> {
    read_linked(first, MOST_LINKED, |id| store.trace(id))
}

/// The request `t` stands for in an analysis over many traces: `t` when it is linked to
/// no other, joined with the traces below it when it is the upper one, and `None` when it
/// continues a trace above it (which stands for the request).
pub fn request(store: &dyn TraceStore, t: Trace) -> Result<Option<Trace>, StoreError> {
    if t.links.is_empty() {
        return Ok(Some(t));
    }
    if t.continues_another() {
        return Ok(None);
    }
    Ok(Some(joined(store, t)?))
}

/// [`TraceStore::scan_fields`] over requests: `visit` is given each request of the window
/// once ([`request`]). A linked trace read again that fails stops the scan with its error.
pub fn scan_requests(
    store: &dyn TraceStore,
    window: TimeWindow,
    fields: &Fields,
    visit: &(dyn Fn(Trace) -> ControlFlow<()> + Sync),
) -> Result<ScanStats, StoreError> {
    let failed = Mutex::new(None);
    let scanned = store.scan_fields(window, fields, &|t| {
        if t.links.is_empty() {
            return visit(t);
        }
        match request(store, t) {
            Ok(Some(t)) => visit(t),
            Ok(None) => ControlFlow::Continue(()),
            Err(e) => {
                *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                ControlFlow::Break(())
            }
        }
    })?;
    match failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
        Some(e) => Err(e),
        None => Ok(scanned),
    }
}
