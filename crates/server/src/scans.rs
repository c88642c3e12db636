//! Scans over a time window: every trace folded into per-thread accumulators on the
//! scan threads, stopping at the request's deadline, and the window reported back with
//! what was scanned.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};

use causeway_analysis::Sharded;
use causeway_model::Trace;
use causeway_store::{Fields, ScanStats, TimeWindow, TraceStore};
use serde::Serialize;

use crate::work::Deadline;
use crate::{ApiError, AppState};

/// Feeds every trace of the window, read with `fields`, to a per-thread accumulator and
/// merges them; the scan stops at the deadline. Analyses over many traces read the spans'
/// structure and a few named attributes ([`structure`]): it reads several times faster
/// than whole spans.
pub(crate) fn scan_fields_into<A: Send>(
    store: &dyn TraceStore,
    deadline: &Deadline,
    window: TimeWindow,
    fields: &Fields,
    make: impl Fn() -> A,
    add: impl Fn(&mut A, &Trace) + Sync,
    merge: impl Fn(&mut A, A),
) -> Result<(A, ScanStats), ApiError> {
    scan_some_into(store, deadline, window, fields, u64::MAX, make, add, merge)
}

/// [`scan_fields_into`], stopping once `most` traces were folded in (about: the scan
/// threads each finish the trace in hand).
#[allow(clippy::too_many_arguments)]
fn scan_some_into<A: Send>(
    store: &dyn TraceStore,
    deadline: &Deadline,
    window: TimeWindow,
    fields: &Fields,
    most: u64,
    make: impl Fn() -> A,
    add: impl Fn(&mut A, &Trace) + Sync,
    merge: impl Fn(&mut A, A),
) -> Result<(A, ScanStats), ApiError> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let acc = Sharded::new(threads, make);
    let folded = AtomicU64::new(0);
    // A request split in two traces is folded in as one (`causeway_store::linked`).
    let scanned = causeway_store::linked::scan_requests(store, window, fields, &|t| {
        acc.with(|a| add(a, &t));
        if folded.fetch_add(1, Ordering::Relaxed) + 1 >= most {
            return ControlFlow::Break(());
        }
        deadline.check()
    })?;
    Ok((acc.finish(merge), scanned))
}

/// A window's traces, read with `fields` (whole spans for `Fields::All`), folded into an
/// accumulator in a scan's place and within the query time limit.
pub(crate) async fn scan_window<A: Send + 'static>(
    state: &AppState,
    window: TimeWindow,
    fields: Fields,
    make: impl Fn() -> A + Send + 'static,
    add: impl Fn(&mut A, &Trace) + Sync + Send + 'static,
    merge: impl Fn(&mut A, A) + Send + 'static,
) -> Result<(A, ScanStats), ApiError> {
    scan_window_some(state, window, fields, u64::MAX, make, add, merge).await
}

/// [`scan_window`] over at most `most` traces of the window (those read first).
pub(crate) async fn scan_window_some<A: Send + 'static>(
    state: &AppState,
    window: TimeWindow,
    fields: Fields,
    most: u64,
    make: impl Fn() -> A + Send + 'static,
    add: impl Fn(&mut A, &Trace) + Sync + Send + 'static,
    merge: impl Fn(&mut A, A) + Send + 'static,
) -> Result<(A, ScanStats), ApiError> {
    let store = state.store.clone();
    state
        .scans
        .run(move |deadline| {
            scan_some_into(&*store, deadline, window, &fields, most, make, add, merge)
        })
        .await
}

/// The fields of a scan of structure: the columns and the attributes named.
pub(crate) fn structure(attributes: &[String]) -> Fields {
    Fields::Structure {
        attributes: attributes.to_vec(),
    }
}

/// The window a scan read, and how much it read.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Window {
    start: u64,
    end: u64,
    traces_scanned: u64,
    spans_scanned: u64,
}

impl Window {
    /// The window `w` and what its scan read.
    pub(crate) fn of(w: TimeWindow, s: ScanStats) -> Window {
        Window {
            start: w.start,
            end: w.end,
            traces_scanned: s.traces,
            spans_scanned: s.spans,
        }
    }
}
