//! Writing a block: spans as Arrow columns, written to a temporary file with the
//! writer's properties (row groups, pages, statistics, compression), synced and renamed.
//!
//! Spans come in (trace id, start, span id) order, the store having dropped exact
//! duplicates. They are written to `<name>.parquet.tmp`, which is fsynced, renamed and its
//! directory fsynced, so a block file is either whole or absent; the block's index is built
//! as the rows go by. The key-value metadata records `causeway.wal_through` and
//! `causeway.replaces` (see `crate::store`).

use super::*;
use crate::query::nested_attributes;

/// Arrow columns for a run of spans (the file schema, `detail` included).
pub(crate) fn to_batch(spans: &[&Span]) -> Result<RecordBatch, arrow::error::ArrowError> {
    let n = spans.len();
    let mut trace_id = FixedSizeBinaryBuilder::with_capacity(n, 16);
    let mut span_id = FixedSizeBinaryBuilder::with_capacity(n, 8);
    let mut parent_id = FixedSizeBinaryBuilder::with_capacity(n, 8);
    let mut service = StringBuilder::new();
    let mut operation = StringBuilder::new();
    let mut kind = StringBuilder::new();
    let mut host = StringBuilder::new();
    let mut pid = UInt32Builder::with_capacity(n);
    let mut start = TimestampNanosecondBuilder::with_capacity(n).with_timezone("UTC");
    let mut duration = Int64Builder::with_capacity(n);
    let mut status = StringBuilder::new();
    let mut message = StringBuilder::new();
    let mut attributes = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    let mut nested = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    let mut source = StringBuilder::new();
    let mut detail = BinaryBuilder::new();
    let mut scratch = Vec::with_capacity(512);
    let mut detail_bytes = Vec::with_capacity(512);
    let mut events = crate::events::EventsBuilder::new();
    for s in spans {
        trace_id.append_value(s.trace_id.to_bytes())?;
        span_id.append_value(s.span_id.to_bytes())?;
        match s.parent_id {
            Some(p) => parent_id.append_value(p.to_bytes())?,
            None => parent_id.append_null(),
        }
        service.append_value(&s.service);
        operation.append_value(&s.name);
        kind.append_value(s.kind.as_str());
        host.append_value(&s.host);
        pid.append_value(s.pid);
        start.append_value(clamp(s.start));
        duration.append_value(clamp(s.duration()));
        status.append_value(status_code(&s.status));
        match &s.status {
            Status::Error(m) if !m.is_empty() => message.append_value(m),
            _ => message.append_null(),
        }
        for kv in &s.attributes {
            attributes.keys().append_value(&kv.key);
            match kv.value.as_str() {
                Some(v) => attributes.values().append_value(v),
                None => attributes.values().append_value(kv.value.to_string()),
            }
        }
        attributes.append(true)?;
        let whole = !crate::detail::columns_fit(s);
        for kv in nested_column_attributes(s, whole) {
            nested.keys().append_value(&kv.key);
            match kv.value.as_str() {
                Some(v) => nested.values().append_value(v),
                None => nested.values().append_value(kv.value.to_string()),
            }
        }
        nested.append(true)?;
        source.append_value(s.source.to_text());
        detail_bytes.clear();
        crate::detail::encode(s, &mut scratch, &mut detail_bytes);
        detail.append_value(&detail_bytes);
        events.push(s, whole);
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(trace_id.finish()),
        Arc::new(span_id.finish()),
        Arc::new(parent_id.finish()),
        Arc::new(service.finish()),
        Arc::new(operation.finish()),
        Arc::new(kind.finish()),
        Arc::new(host.finish()),
        Arc::new(pid.finish()),
        Arc::new(start.finish()),
        Arc::new(duration.finish()),
        Arc::new(status.finish()),
        Arc::new(message.finish()),
        Arc::new(attributes.finish()),
        Arc::new(source.finish()),
        Arc::new(detail.finish()),
        Arc::new(nested.finish()),
        events.finish(n)?,
    ];
    let nullable = |name: &str| matches!(name, "parent_id" | "status_message");
    RecordBatch::try_from_iter_with_nullable(
        COLUMNS
            .iter()
            .zip(columns)
            .map(|(name, col)| (*name, col, nullable(name))),
    )
}

/// The nested attributes the `nested_attributes` column holds: those the `events` column
/// does not (all of them when the span is kept `whole` in the detail).
fn nested_column_attributes(
    s: &Span,
    whole: bool,
) -> impl Iterator<Item = &causeway_model::KeyValue> {
    s.events
        .iter()
        .flat_map(|e| &e.attributes)
        .filter(move |kv| whole || !crate::events::in_column(&kv.value))
        .chain(s.links.iter().flat_map(|l| &l.attributes))
}

fn properties(wal_through: u64, replaces: &[String]) -> WriterProperties {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::default()))
        .set_max_row_group_size(ROW_GROUP_ROWS)
        .set_data_page_row_count_limit(PAGE_ROWS)
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_key_value_metadata(Some(vec![
            KeyValue::new(WAL_THROUGH.to_string(), wal_through.to_string()),
            KeyValue::new(
                REPLACES.to_string(),
                serde_json::to_string(replaces).unwrap_or_else(|_| "[]".into()),
            ),
        ]));
    // Random ids and the opaque detail gain nothing from dictionaries, nor do start times
    // and numbers that are seldom the same twice (a dictionary of all-distinct values
    // costs its indexes on top of the values: start times took 7.9 bytes a span with one,
    // 5.9 without). Durations and event times' steps do repeat.
    for col in ["span_id", "parent_id", "detail", "start_time"] {
        b = b.set_column_dictionary_enabled(ColumnPath::from(col), false);
    }
    for leaf in crate::events::UNIQUE_LEAVES {
        b = b.set_column_dictionary_enabled(
            ColumnPath::new(leaf.iter().map(|p| p.to_string()).collect()),
            false,
        );
    }
    // Dictionary indexes of a few names hardly compress (0.35 bytes a span in all), while
    // every compressed page costs a zstd context to read. Span ids are compressed: random
    // ones do not shrink, but ids of one trace that share their high bits (a log
    // request's segments) do.
    for col in UNCOMPRESSED_COLUMNS {
        b = b.set_column_compression(ColumnPath::from(col), Compression::UNCOMPRESSED);
    }
    b.build()
}

/// Writes a block from spans given in trace-id order: to a temporary file, synced, then
/// renamed, so a block file is either whole or absent. The index is built as rows go by.
pub(crate) struct BlockWriter {
    dir: PathBuf,
    name: String,
    tmp: PathBuf,
    wal_through: u64,
    replaces: Vec<String>,
    file: Option<File>,
    writer: Option<ArrowWriter<File>>,
    index: IndexBuilder,
}

impl BlockWriter {
    pub fn new(
        dir: &Path,
        name: String,
        wal_through: u64,
        replaces: Vec<String>,
    ) -> Result<BlockWriter, StoreError> {
        let tmp = dir.join(format!("{name}.parquet.tmp"));
        let file = File::create(&tmp).map_err(StoreError::io("create block", &tmp))?;
        Ok(BlockWriter {
            dir: dir.to_path_buf(),
            name,
            tmp,
            wal_through,
            replaces,
            file: Some(file),
            writer: None,
            index: IndexBuilder::default(),
        })
    }

    /// Appends spans; across calls they must come in (trace id, start) order.
    pub fn write(&mut self, spans: &[&Span]) -> Result<(), StoreError> {
        for chunk in spans.chunks(BATCH_ROWS) {
            let batch = to_batch(chunk).map_err(arrow_err(&self.tmp))?;
            let writer = match (&mut self.writer, self.file.take()) {
                (Some(w), _) => w,
                (None, Some(file)) => self.writer.insert(
                    ArrowWriter::try_new(
                        file,
                        batch.schema(),
                        Some(properties(self.wal_through, &self.replaces)),
                    )
                    .map_err(block_err(&self.tmp))?,
                ),
                (None, None) => return Err(self.corrupt("block writer has no file")),
            };
            writer.write(&batch).map_err(block_err(&self.tmp))?;
            for s in chunk {
                self.index.push(IndexRow {
                    trace: s.trace_id.get(),
                    service: &s.service,
                    operation: &s.name,
                    host: &s.host,
                    start: s.start.min(i64::MAX as u64),
                    duration: s.duration().min(i64::MAX as u64),
                    error: s.is_error(),
                });
                for kv in s.attributes.iter().chain(nested_attributes(s)) {
                    match kv.value.as_str() {
                        Some(v) => self.index.attribute(&kv.key, v),
                        None => self.index.attribute(&kv.key, &kv.value.to_string()),
                    }
                }
            }
        }
        Ok(())
    }

    fn corrupt(&self, reason: &str) -> StoreError {
        StoreError::Block {
            path: self.tmp.clone(),
            reason: reason.to_string(),
        }
    }

    /// Seals the file and opens it as a block; `None` when no span was written.
    pub fn finish(self) -> Result<Option<Block>, StoreError> {
        let Some(writer) = self.writer else {
            let _ = std::fs::remove_file(&self.tmp);
            return Ok(None);
        };
        let file = writer.into_inner().map_err(block_err(&self.tmp))?;
        file.sync_all()
            .map_err(StoreError::io("sync block", &self.tmp))?;
        drop(file);
        let path = self.dir.join(format!("{}.parquet", self.name));
        std::fs::rename(&self.tmp, &path).map_err(StoreError::io("rename block", &path))?;
        crate::wal::sync_dir(&self.dir)?;
        Block::open_with(path, self.name, Some(self.index.finish())).map(Some)
    }
}

/// The order of rows in a block.
pub(crate) fn row_order(a: &Span, b: &Span) -> std::cmp::Ordering {
    (a.trace_id, a.start, a.span_id).cmp(&(b.trace_id, b.start, b.span_id))
}
