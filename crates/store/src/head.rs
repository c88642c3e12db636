//! The in-memory head: spans appended since the last block was cut, grouped by trace
//! (a map from trace id to its spans), queryable as soon as they are appended. A full head
//! is frozen and written as a block by the store's worker (see `crate::store`).

use std::collections::HashMap;
use std::time::Instant;

use causeway_model::{Span, TraceId};

use crate::query::SearchQuery;

#[derive(Default)]
pub(crate) struct Head {
    traces: HashMap<TraceId, Vec<Span>>,
    spans: usize,
    /// When the first span arrived: the head is cut into a block when it grows old.
    opened: Option<Instant>,
}

impl Head {
    pub fn insert(&mut self, spans: impl IntoIterator<Item = Span>) {
        for span in spans {
            self.traces.entry(span.trace_id).or_default().push(span);
            self.spans += 1;
        }
        if self.opened.is_none() && self.spans > 0 {
            self.opened = Some(Instant::now());
        }
    }

    pub fn spans(&self) -> usize {
        self.spans
    }

    pub fn age(&self) -> Option<std::time::Duration> {
        self.opened.map(|t| t.elapsed())
    }

    pub fn trace(&self, id: TraceId) -> &[Span] {
        self.traces.get(&id).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn iter_spans(&self) -> impl Iterator<Item = &Span> {
        self.traces.values().flatten()
    }

    /// Each trace's spans here.
    pub fn iter_traces(&self) -> impl Iterator<Item = (TraceId, &[Span])> {
        self.traces
            .iter()
            .map(|(id, spans)| (*id, spans.as_slice()))
    }

    /// Trace ids with a span matching the query, and each trace's earliest start here.
    pub fn search(&self, query: &SearchQuery, out: &mut HashMap<TraceId, u64>) {
        for (id, spans) in &self.traces {
            if spans.iter().any(|s| query.matches(s)) {
                let start = spans.iter().map(|s| s.start).min().unwrap_or(0);
                let e = out.entry(*id).or_insert(start);
                *e = (*e).min(start);
            }
        }
    }
}
