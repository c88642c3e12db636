//! Reading a block: the spans of given row ranges, batch by batch, with only the fields
//! asked for decoded, and searches by attribute over its columns.
//!
//! `Fields::All` decodes the columns and `detail`; `Fields::Structure` reads only the
//! columns (ids, names, kind, host, pid, times, status) plus named attributes, for windowed
//! analyses; `Fields::Paths` reads everything but the attributes, for expectations. The
//! `events` column is read by the leaves a read needs: `Paths` its times and names, search
//! and the index its attributes.

use super::*;

impl Block {
    /// Decodes the spans in the given row ranges (sorted, disjoint), the fields `fields`
    /// asks for.
    pub fn read_spans(
        &self,
        rows: &[Range<usize>],
        fields: &Fields,
        out: &mut Vec<Span>,
    ) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        // Spans are large; growing `out` by doubling would copy each several times.
        out.reserve(rows.iter().map(|r| r.len()).sum());
        let mut batches = self.span_batches(rows, fields, BATCH_ROWS)?;
        while batches.next_batch(out)? {}
        Ok(())
    }

    /// A reader of the spans in the given row ranges (sorted, disjoint; empty means every
    /// row), `batch_rows` at a time, in row order.
    pub fn span_batches<'a>(
        &'a self,
        rows: &[Range<usize>],
        fields: &'a Fields,
        batch_rows: usize,
    ) -> Result<SpanBatches<'a>, StoreError> {
        let columns: Vec<&str> = COLUMNS
            .iter()
            .copied()
            .filter(|c| match (c, fields) {
                // Kind and source live in the detail too.
                (&"kind" | &"source", Fields::All | Fields::Paths) => false,
                // Only search reads it; the detail holds links.
                (&"nested_attributes", _) => false,
                (&crate::events::COLUMN, Fields::Structure { .. }) => false,
                (&"attributes", Fields::Paths) => false,
                (&"detail", Fields::Structure { .. }) => false,
                (&"attributes", Fields::Structure { attributes }) => !attributes.is_empty(),
                _ => true,
            })
            .collect();
        // Paths need events' times and names, not their attributes.
        let skipped: &[&str] = match fields {
            Fields::Paths => &crate::events::ATTRIBUTE_LEAVES,
            _ => &[],
        };
        Ok(SpanBatches {
            block: self,
            fields,
            reader: self.reader(&columns, skipped, rows, batch_rows)?,
            names: Default::default(),
        })
    }

    /// Of the candidate traces, those with one span carrying every tag of the query.
    pub fn filter_tags<'a>(
        &self,
        candidates: Vec<&'a crate::index::TraceEntry>,
        query: &SearchQuery,
    ) -> Result<Vec<&'a crate::index::TraceEntry>, StoreError> {
        if query.tags.is_empty() || candidates.is_empty() {
            return Ok(candidates);
        }
        // `error=true` also matches error status, which the filters do not hold.
        let pairs: Vec<u64> = query
            .tags
            .iter()
            .filter(|(k, v)| !(k == "error" && v == "true"))
            .map(|(k, v)| crate::index::pair_hash(k, v))
            .collect();
        let candidates: Vec<_> = candidates
            .into_iter()
            .filter(|t| {
                let start = t.first_row as usize;
                self.index
                    .may_have_pairs(start, start + t.rows as usize, &pairs)
            })
            .collect();
        if candidates.is_empty() {
            return Ok(candidates);
        }
        let ranges = merge_ranges(
            candidates
                .iter()
                .map(|t| t.first_row as usize..(t.first_row + t.rows) as usize),
        );
        // Row i of the selection belongs to the candidate whose run covers it.
        let mut owners = Vec::new();
        for (k, t) in candidates.iter().enumerate() {
            owners.extend(std::iter::repeat_n(k, t.rows as usize));
        }
        let mut hit = vec![false; candidates.len()];
        // Per row, which conditions its events' attributes meet.
        let mut in_events = vec![false; query.tags.len()];
        let mut row = 0usize;
        let columns = [
            "attributes",
            "nested_attributes",
            "status_code",
            crate::events::COLUMN,
        ];
        for batch in self.reader(
            &columns,
            &crate::events::TIME_AND_NAME_LEAVES,
            &ranges,
            BATCH_ROWS,
        )? {
            let batch = batch.map_err(arrow_err(&self.path))?;
            let (keys, values, offsets) = attribute_arrays(self, &batch, "attributes")?;
            let nested = optional_attribute_arrays(self, &batch, "nested_attributes")?;
            let events = crate::events::EventColumns::of(&batch).map_err(|e| self.corrupt(&e))?;
            let status = batch
                .column_by_name("status_code")
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(|| self.corrupt("status_code is not text"))?;
            for i in 0..batch.num_rows() {
                let (a, b) = (offsets[i] as usize, offsets[i + 1] as usize);
                in_events.fill(false);
                if let Some(events) = &events {
                    events
                        .each_attribute(i, |key, value| {
                            for (met, (k, v)) in in_events.iter_mut().zip(&query.tags) {
                                *met |= key == k && value == v;
                            }
                        })
                        .map_err(|e| self.corrupt(&e))?;
                }
                // Each condition may be met in a different place of the span.
                let all = query.tags.iter().zip(&in_events).all(|((k, v), &met)| {
                    met || (k == "error" && v == "true" && status.value(i) == "ERROR")
                        || (a..b).any(|j| keys.value(j) == k && values.value(j) == v)
                        || nested.is_some_and(|(keys, values, offsets)| {
                            (offsets[i] as usize..offsets[i + 1] as usize)
                                .any(|j| keys.value(j) == k && values.value(j) == v)
                        })
                });
                if all {
                    if let Some(&owner) = owners.get(row) {
                        hit[owner] = true;
                    }
                }
                row += 1;
            }
        }
        Ok(candidates
            .into_iter()
            .zip(hit)
            .filter_map(|(t, h)| h.then_some(t))
            .collect())
    }
}

/// Spans of a block decoded a batch at a time (see [`Block::span_batches`]).
pub struct SpanBatches<'a> {
    block: &'a Block,
    fields: &'a Fields,
    reader: parquet::arrow::arrow_reader::ParquetRecordBatchReader,
    /// Service and host names, shared by every span of the reader that carries them.
    names: foldhash::HashMap<String, Arc<str>>,
}

impl SpanBatches<'_> {
    /// Appends the next batch's spans to `out`; false once every row has been read.
    pub fn next_batch(&mut self, out: &mut Vec<Span>) -> Result<bool, StoreError> {
        let block = self.block;
        let Some(batch) = self.reader.next() else {
            return Ok(false);
        };
        let batch = batch.map_err(arrow_err(&block.path))?;
        let cols = RowColumns::of(block, &batch)?;
        let names = &mut self.names;
        let mut intern = |s: &str| -> Arc<str> {
            if let Some(a) = names.get(s) {
                return a.clone();
            }
            let a: Arc<str> = Arc::from(s);
            names.insert(s.to_string(), a.clone());
            a
        };
        match self.fields {
            Fields::All | Fields::Paths => {
                let keep_attributes = *self.fields == Fields::All;
                let detail = batch
                    .column_by_name("detail")
                    .and_then(|c| c.as_binary_opt::<i32>())
                    .ok_or_else(|| block.corrupt("detail is missing or not binary"))?;
                let events =
                    crate::events::EventColumns::of(&batch).map_err(|e| block.corrupt(&e))?;
                for i in 0..batch.num_rows() {
                    let row = cols.row(block, i, &mut intern, |_| true)?;
                    let events = events.as_ref().map(|e| (e, i));
                    let span = crate::detail::decode(row, detail.value(i), keep_attributes, events)
                        .map_err(|e| block.corrupt(&format!("row {i}: {e}")))?;
                    out.push(span);
                }
            }
            Fields::Structure { attributes: keys } => {
                let text = |name: &str| {
                    batch
                        .column_by_name(name)
                        .and_then(|c| c.as_string_opt::<i32>())
                        .ok_or_else(|| block.corrupt(&format!("{name} is missing or not text")))
                };
                let (kind, source) = (text("kind")?, text("source")?);
                for i in 0..batch.num_rows() {
                    let row = cols.row(block, i, &mut intern, |k| keys.iter().any(|x| x == k))?;
                    let mut span = crate::detail::from_columns(row);
                    span.kind = SpanKind::parse(kind.value(i)).unwrap_or_default();
                    // Searches and analyses filter by source, and read spans this way.
                    span.source = Source::from_text(source.value(i)).ok_or_else(|| {
                        block.corrupt(&format!("row {i}: source {:?}", source.value(i)))
                    })?;
                    out.push(span);
                }
            }
        }
        Ok(true)
    }
}

/// The columns every row decoder reads, taken from one batch.
struct RowColumns<'b> {
    trace_ids: &'b FixedSizeBinaryArray,
    span_ids: &'b FixedSizeBinaryArray,
    parent_ids: &'b FixedSizeBinaryArray,
    service: &'b arrow::array::StringArray,
    operation: &'b arrow::array::StringArray,
    host: &'b arrow::array::StringArray,
    status: &'b arrow::array::StringArray,
    message: &'b arrow::array::StringArray,
    pid: &'b arrow::array::PrimitiveArray<arrow::datatypes::UInt32Type>,
    start: &'b arrow::array::PrimitiveArray<TimestampNanosecondType>,
    duration: &'b arrow::array::PrimitiveArray<Int64Type>,
    /// Keys, values and per-row offsets, when the attributes were read.
    attributes: Option<(
        &'b arrow::array::StringArray,
        &'b arrow::array::StringArray,
        &'b [i32],
    )>,
}

impl<'b> RowColumns<'b> {
    fn of(block: &Block, batch: &'b RecordBatch) -> Result<RowColumns<'b>, StoreError> {
        let col = |name: &str| {
            batch
                .column_by_name(name)
                .ok_or_else(|| block.corrupt(&format!("missing column {name}")))
        };
        let fixed = |name: &str| {
            col(name)?
                .as_any()
                .downcast_ref::<FixedSizeBinaryArray>()
                .ok_or_else(|| block.corrupt(&format!("{name} is not fixed-size binary")))
        };
        let text = |name: &str| {
            col(name)?
                .as_string_opt::<i32>()
                .ok_or_else(|| block.corrupt(&format!("{name} is not text")))
        };
        let attributes = if batch.column_by_name("attributes").is_some() {
            Some(attribute_arrays(block, batch, "attributes")?)
        } else {
            None
        };
        Ok(RowColumns {
            trace_ids: fixed("trace_id")?,
            span_ids: fixed("span_id")?,
            parent_ids: fixed("parent_id")?,
            service: text("service")?,
            operation: text("operation")?,
            host: text("host")?,
            status: text("status_code")?,
            message: text("status_message")?,
            pid: col("pid")?
                .as_primitive_opt::<arrow::datatypes::UInt32Type>()
                .ok_or_else(|| block.corrupt("pid is not u32"))?,
            start: col("start_time")?
                .as_primitive_opt::<TimestampNanosecondType>()
                .ok_or_else(|| block.corrupt("start_time is not a timestamp"))?,
            duration: col("duration_ns")?
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| block.corrupt("duration_ns is not i64"))?,
            attributes,
        })
    }

    /// Row `i`, with the attributes whose key `keep` accepts.
    fn row(
        &self,
        block: &Block,
        i: usize,
        intern: &mut impl FnMut(&str) -> Arc<str>,
        keep: impl Fn(&str) -> bool,
    ) -> Result<crate::detail::Row<'b>, StoreError> {
        let bad_id = |what: &str| block.corrupt(&format!("row {i}: invalid {what}"));
        Ok(crate::detail::Row {
            trace_id: TraceId::from_bytes(self.trace_ids.value(i))
                .map_err(|_| bad_id("trace_id"))?,
            span_id: SpanId::from_bytes(self.span_ids.value(i)).map_err(|_| bad_id("span_id"))?,
            parent_id: if self.parent_ids.is_null(i) {
                None
            } else {
                Some(
                    SpanId::from_bytes(self.parent_ids.value(i))
                        .map_err(|_| bad_id("parent_id"))?,
                )
            },
            service: intern(self.service.value(i)),
            operation: self.operation.value(i),
            host: intern(self.host.value(i)),
            pid: self.pid.value(i),
            start: self.start.value(i).max(0) as u64,
            duration: self.duration.value(i).max(0) as u64,
            status_code: self.status.value(i),
            status_message: (!self.message.is_null(i)).then(|| self.message.value(i)),
            attributes: match self.attributes {
                Some((keys, values, offsets)) => (offsets[i] as usize..offsets[i + 1] as usize)
                    .filter(|&j| keep(keys.value(j)))
                    .map(|j| (keys.value(j), values.value(j)))
                    .collect(),
                None => Vec::new(),
            },
        })
    }
}

/// Sorted, coalesced row ranges.
pub(crate) fn merge_ranges(ranges: impl Iterator<Item = Range<usize>>) -> Vec<Range<usize>> {
    let mut v: Vec<Range<usize>> = ranges.filter(|r| !r.is_empty()).collect();
    v.sort_by_key(|r| r.start);
    let mut out: Vec<Range<usize>> = Vec::with_capacity(v.len());
    for r in v {
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
    out
}
