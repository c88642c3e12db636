//! Search that sorts a whole window: every trace that starts in the window and has a span
//! meeting the conditions is counted, and the first `limit` in the asked order are kept.
//! The indexed search ([`TraceStore::search`]) stops at its limit, newest first; this one
//! reads the window through the bulk scan, so "longest first" means longest of all.
//!
//! It serves an order other than the index's (the UI's Traces tab, `order=` on
//! `/api/search`). The scan reads `Fields::Structure`, or `Fields::All` when tags are asked,
//! since a tag may be an event's. The first `limit` traces in that order (ties by trace id)
//! are kept in a buffer of twice the limit, cut by selection. It runs under a scan slot and
//! the query time limit.

use std::cmp::Ordering;
use std::fmt;
use std::ops::ControlFlow;
use std::str::FromStr;
use std::sync::Mutex;

use serde::Serialize;

use crate::{Fields, ScanStats, SearchQuery, StoreError, TimeWindow, TraceStore, TraceSummary};

/// What a sorted search orders traces by: a column of [`TraceSummary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// Earliest span start.
    Start,
    /// Trace duration.
    Duration,
    /// Spans stored.
    Spans,
    /// Spans that ended in error.
    Errors,
    /// Services the trace passes through.
    Services,
    /// The root's service, then its span name.
    Root,
    /// The trace id.
    Trace,
}

const KEYS: [(SortKey, &str); 7] = [
    (SortKey::Start, "start"),
    (SortKey::Duration, "duration"),
    (SortKey::Spans, "spans"),
    (SortKey::Errors, "errors"),
    (SortKey::Services, "services"),
    (SortKey::Root, "root"),
    (SortKey::Trace, "trace"),
];

/// A sort order: a key, ascending, or descending when written with a leading `-`
/// (`-duration`: longest first). Ties go by trace id, so a page is the same every time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOrder {
    /// What to compare.
    pub key: SortKey,
    /// Largest first.
    pub descending: bool,
}

impl Default for SearchOrder {
    /// Newest first, as the indexed search answers.
    fn default() -> SearchOrder {
        SearchOrder {
            key: SortKey::Start,
            descending: true,
        }
    }
}

impl FromStr for SearchOrder {
    type Err = String;

    fn from_str(text: &str) -> Result<SearchOrder, String> {
        let (descending, name) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        KEYS.iter()
            .find(|(_, n)| *n == name)
            .map(|&(key, _)| SearchOrder { key, descending })
            .ok_or_else(|| {
                format!(
                    "{text:?} is not a sort order: one of {}, with a leading - for descending",
                    KEYS.map(|(_, n)| n).join(", ")
                )
            })
    }
}

impl fmt::Display for SearchOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = KEYS
            .iter()
            .find(|(k, _)| *k == self.key)
            .map_or("start", |(_, n)| n);
        write!(f, "{}{name}", if self.descending { "-" } else { "" })
    }
}

impl SearchOrder {
    /// Which of two summaries comes first.
    pub fn compare(&self, a: &TraceSummary, b: &TraceSummary) -> Ordering {
        let by = match self.key {
            SortKey::Start => a.start.cmp(&b.start),
            SortKey::Duration => a.duration.cmp(&b.duration),
            SortKey::Spans => a.span_count.cmp(&b.span_count),
            SortKey::Errors => a.error_count.cmp(&b.error_count),
            SortKey::Services => a.services.len().cmp(&b.services.len()),
            SortKey::Root => {
                (&a.root_service, &a.root_operation).cmp(&(&b.root_service, &b.root_operation))
            }
            SortKey::Trace => Ordering::Equal,
        };
        let by = if self.descending { by.reverse() } else { by };
        by.then_with(|| {
            let ids = a.trace_id.get().cmp(&b.trace_id.get());
            if self.descending && self.key == SortKey::Trace {
                ids.reverse()
            } else {
                ids
            }
        })
    }
}

/// What a sorted search answers.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SortedTraces {
    /// The first traces in the order, at most the query's limit.
    pub traces: Vec<TraceSummary>,
    /// Every trace of the window that matched.
    pub total: u64,
    /// What the scan read.
    pub scanned: ScanStats,
}

/// The first `limit` summaries in an order, of any number offered, in memory for about
/// twice the limit.
struct Best {
    order: SearchOrder,
    limit: usize,
    kept: Vec<TraceSummary>,
    total: u64,
}

impl Best {
    fn offer(&mut self, s: TraceSummary) {
        self.total += 1;
        self.kept.push(s);
        if self.kept.len() >= 2 * self.limit {
            self.trim();
        }
    }

    fn trim(&mut self) {
        if self.kept.len() > self.limit {
            let order = self.order;
            self.kept
                .select_nth_unstable_by(self.limit, |a, b| order.compare(a, b));
            self.kept.truncate(self.limit);
        }
    }

    fn finish(mut self) -> (Vec<TraceSummary>, u64) {
        self.trim();
        let order = self.order;
        self.kept.sort_by(|a, b| order.compare(a, b));
        (self.kept, self.total)
    }
}

/// Every trace that starts in the query's window (all time without one) and has a span
/// meeting the query's other conditions, counted; the first `limit` of them in `order`.
/// `keep_going` is asked after each trace; `Break` stops the scan (a deadline passed), and
/// what was seen so far is answered.
pub fn search_sorted(
    store: &dyn TraceStore,
    query: &SearchQuery,
    order: SearchOrder,
    keep_going: &(dyn Fn() -> ControlFlow<()> + Sync),
) -> Result<SortedTraces, StoreError> {
    let window = query.window.unwrap_or(TimeWindow::ALL);
    // The scan's window is on the trace's start; spans are matched on the rest.
    let spans = SearchQuery {
        window: None,
        ..query.clone()
    };
    // A tag may be met in an event's or a link's attributes, which only whole spans hold.
    let fields = if spans.tags.is_empty() {
        Fields::Structure {
            attributes: Vec::new(),
        }
    } else {
        Fields::All
    };
    let best = Mutex::new(Best {
        order,
        limit: query.effective_limit(),
        kept: Vec::new(),
        total: 0,
    });
    let scanned = crate::linked::scan_requests(store, window, &fields, &|trace| {
        if trace.spans.iter().any(|s| spans.matches(s)) {
            let summary = TraceSummary::of(&trace);
            if query.trace_duration_holds(summary.duration) {
                best.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .offer(summary);
            }
        }
        keep_going()
    })?;
    let (traces, total) = best
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .finish();
    Ok(SortedTraces {
        traces,
        total,
        scanned,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::TraceId;

    fn summary(id: u128, duration: u64) -> TraceSummary {
        TraceSummary {
            trace_id: TraceId::new(id).unwrap(),
            root_service: "s".into(),
            root_operation: "op".into(),
            start: id as u64,
            duration,
            span_count: 1,
            error_count: 0,
            services: Vec::new(),
            root_missing: false,
        }
    }

    #[test]
    fn orders_read_back_as_written_and_unknown_ones_are_named() {
        for text in [
            "start",
            "-start",
            "duration",
            "-duration",
            "spans",
            "-errors",
            "services",
            "root",
            "-trace",
        ] {
            assert_eq!(text.parse::<SearchOrder>().unwrap().to_string(), text);
        }
        let err = "-size".parse::<SearchOrder>().unwrap_err();
        assert!(
            err.contains("\"-size\"") && err.contains("duration"),
            "{err}"
        );
    }

    #[test]
    fn the_best_of_many_are_kept_in_order_ties_by_trace_id() {
        let order: SearchOrder = "-duration".parse().unwrap();
        let mut best = Best {
            order,
            limit: 3,
            kept: Vec::new(),
            total: 0,
        };
        // Durations 0..100 shuffled by a stride, two traces of the longest.
        for i in 0..100u128 {
            best.offer(summary(i + 1, (i * 37 % 100) as u64));
        }
        best.offer(summary(500, 99));
        let (kept, total) = best.finish();
        assert_eq!(total, 101);
        let got: Vec<(u64, u128)> = kept
            .iter()
            .map(|s| (s.duration, s.trace_id.get()))
            .collect();
        // 99 = i*37 % 100 at i = 27 (trace 28), then trace 500; 98 at i = 54 (trace 55).
        assert_eq!(got, vec![(99, 28), (99, 500), (98, 55)]);
    }
}
