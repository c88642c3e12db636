//! Merges the row-ordered spans of several blocks, and of memory, into traces: the reader
//! behind the bulk scan and the compaction. Each block is read front to back once, so a
//! page is decoded once however many blocks a trace-id range crosses.

use std::ops::Range;

use causeway_model::{Span, TraceId};

use crate::block::{row_order, Block, SpanBatches};
use crate::{Fields, StoreError};

/// Rows decoded from one block at a time: one page. A batch per block is held at once, and
/// with 19 blocks 4 096-row batches (~23 MB a thread) checked 1M paths slower than these.
const BATCH_ROWS: usize = 1024;

/// One source of spans in row order.
struct Cursor<'a> {
    /// None for memory, and once a block's rows are all read.
    batches: Option<SpanBatches<'a>>,
    buffer: std::vec::IntoIter<Span>,
}

impl Cursor<'_> {
    /// The trace id of the next span, if any.
    fn peek(&mut self) -> Result<Option<TraceId>, StoreError> {
        loop {
            if let Some(span) = self.buffer.as_slice().first() {
                return Ok(Some(span.trace_id));
            }
            if !self.refill()? {
                return Ok(None);
            }
        }
    }

    /// Reads the next batch into the (empty) buffer; false when there is none.
    fn refill(&mut self) -> Result<bool, StoreError> {
        let Some(batches) = self.batches.as_mut() else {
            return Ok(false);
        };
        let mut spans = Vec::with_capacity(BATCH_ROWS);
        while spans.is_empty() {
            if !batches.next_batch(&mut spans)? {
                self.batches = None;
                return Ok(false);
            }
        }
        self.buffer = spans.into_iter();
        Ok(true)
    }

    /// Moves the spans of trace `id` at the front of the cursor to `out`: a trace's rows
    /// may run on into the next batch.
    fn take(&mut self, id: TraceId, out: &mut Vec<Span>) -> Result<(), StoreError> {
        loop {
            let run = self
                .buffer
                .as_slice()
                .iter()
                .take_while(|s| s.trace_id == id)
                .count();
            out.reserve(run);
            out.extend(self.buffer.by_ref().take(run));
            if !self.buffer.as_slice().is_empty() || !self.refill()? {
                return Ok(());
            }
        }
    }
}

/// Traces in trace-id order, each with its spans from every source, in row order.
pub(crate) struct MergedTraces<'a> {
    cursors: Vec<Cursor<'a>>,
}

impl<'a> MergedTraces<'a> {
    /// Reads the given row ranges of each block (sorted and disjoint; blocks with none are
    /// left out) and `memory` (spans in row order), decoding the fields `fields` asks for.
    pub fn new(
        blocks: impl IntoIterator<Item = (&'a Block, Vec<Range<usize>>)>,
        memory: Vec<Span>,
        fields: &'a Fields,
    ) -> Result<MergedTraces<'a>, StoreError> {
        let mut cursors = Vec::new();
        for (block, rows) in blocks {
            if rows.is_empty() {
                continue;
            }
            cursors.push(Cursor {
                batches: Some(block.span_batches(&rows, fields, BATCH_ROWS)?),
                buffer: Vec::new().into_iter(),
            });
        }
        if !memory.is_empty() {
            cursors.push(Cursor {
                batches: None,
                buffer: memory.into_iter(),
            });
        }
        Ok(MergedTraces { cursors })
    }

    /// The next trace's spans, or None after the last.
    pub fn next_trace(&mut self) -> Result<Option<Vec<Span>>, StoreError> {
        let mut next: Option<TraceId> = None;
        for cursor in &mut self.cursors {
            if let Some(id) = cursor.peek()? {
                next = Some(next.map_or(id, |n| n.min(id)));
            }
        }
        let Some(id) = next else {
            return Ok(None);
        };
        let mut spans = Vec::new();
        let mut sources = 0;
        for cursor in &mut self.cursors {
            let before = spans.len();
            cursor.take(id, &mut spans)?;
            sources += usize::from(spans.len() > before);
        }
        if sources > 1 {
            spans.sort_by(row_order);
        }
        Ok(Some(spans))
    }
}
