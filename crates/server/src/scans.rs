//! Scans over a time window: every trace folded into per-thread accumulators on the
//! scan threads, stopping at the request's deadline, and the window reported back with
//! what was scanned.

use causeway_analysis::Sharded;
use causeway_model::Trace;
use causeway_store::{Fields, ScanStats, TimeWindow, TraceStore};
use serde::Serialize;

use crate::work::Deadline;
use crate::{ApiError, AppState};

/// Feeds every trace of the window to a per-thread accumulator and merges them. Only the
/// spans' structure is read, and the attributes named in `attributes`: analyses over many
/// traces need no more, and it reads several times faster.
pub(crate) fn scan_into<A: Send>(
    store: &dyn TraceStore,
    deadline: &Deadline,
    window: TimeWindow,
    attributes: &[String],
    make: impl Fn() -> A,
    add: impl Fn(&mut A, &Trace) + Sync,
    merge: impl Fn(&mut A, A),
) -> Result<(A, ScanStats), ApiError> {
    let fields = Fields::Structure {
        attributes: attributes.to_vec(),
    };
    scan_fields_into(store, deadline, window, &fields, make, add, merge)
}

/// [`scan_into`] reading the given fields; the scan stops at the deadline.
pub(crate) fn scan_fields_into<A: Send>(
    store: &dyn TraceStore,
    deadline: &Deadline,
    window: TimeWindow,
    fields: &Fields,
    make: impl Fn() -> A,
    add: impl Fn(&mut A, &Trace) + Sync,
    merge: impl Fn(&mut A, A),
) -> Result<(A, ScanStats), ApiError> {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let acc = Sharded::new(threads, make);
    // A request split in two traces is folded in as one (`causeway_store::linked`).
    let scanned = causeway_store::linked::scan_requests(store, window, fields, &|t| {
        acc.with(|a| add(a, &t));
        deadline.check()
    })?;
    Ok((acc.finish(merge), scanned))
}

/// A window's traces, whole spans (attributes, events, sources), folded into an
/// accumulator on the scan pool.
pub(crate) async fn scan_whole_spans<A: Send + 'static>(
    state: &AppState,
    window: TimeWindow,
    make: fn() -> A,
    add: fn(&mut A, &Trace),
    merge: fn(&mut A, A),
) -> Result<(A, ScanStats), ApiError> {
    let store = state.store.clone();
    state
        .scans
        .run(move |deadline| {
            scan_fields_into(&*store, deadline, window, &Fields::All, make, add, merge)
        })
        .await
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
