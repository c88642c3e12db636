//! Immutable Parquet blocks: spans sorted by trace id so that a trace is a contiguous run
//! of rows, with page statistics for pruning and a `detail` column holding each span's
//! complete native encoding.

use std::fs::File;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BinaryBuilder, FixedSizeBinaryArray, FixedSizeBinaryBuilder,
    Int64Builder, MapBuilder, RecordBatch, StringBuilder, TimestampNanosecondBuilder,
    UInt32Builder,
};
use arrow::datatypes::{Int64Type, TimestampNanosecondType};
use causeway_model::{Span, SpanId, SpanKind, Status, TraceId};

use crate::Fields;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::index::{BlockIndex, IndexBuilder, IndexRow};
use crate::query::SearchQuery;
use crate::StoreError;

const ROW_GROUP_ROWS: usize = 32 * 1024;
const PAGE_ROWS: usize = 1024;
const BATCH_ROWS: usize = 16 * 1024;
/// Columns written without compression (see [`properties`]).
const UNCOMPRESSED_COLUMNS: [&str; 8] = [
    "service",
    "operation",
    "kind",
    "host",
    "pid",
    "status_code",
    "status_message",
    "source",
];
const WAL_THROUGH: &str = "causeway.wal_through";
const REPLACES: &str = "causeway.replaces";

/// Column names of the `spans` table, in file order. Later columns came later: blocks
/// written before `nested_attributes` (attributes of a span's links, and of its events
/// when the `events` column cannot hold their value, as text, for search) lack it and
/// read as if it were empty; blocks written before `events` (see [`crate::events`]) keep
/// events in the detail and all their attributes in `nested_attributes`.
pub(crate) const COLUMNS: [&str; 17] = [
    "trace_id",
    "span_id",
    "parent_id",
    "service",
    "operation",
    "kind",
    "host",
    "pid",
    "start_time",
    "duration_ns",
    "status_code",
    "status_message",
    "attributes",
    "source",
    "detail",
    "nested_attributes",
    crate::events::COLUMN,
];

/// A block on disk with its index in memory.
pub(crate) struct Block {
    pub name: String,
    pub path: PathBuf,
    pub bytes: u64,
    /// The last WAL segment whose spans this block holds.
    pub wal_through: u64,
    /// Blocks this one was compacted from (deleted after it became durable).
    pub replaces: Vec<String>,
    pub index: BlockIndex,
    meta: ArrowReaderMetadata,
    file: BlockFile,
}

/// A block file read by position, so concurrent readers never share a seek offset (a
/// `try_clone`d `File` does, and parallel scans read garbage). Holding the descriptor
/// keeps a block readable after compaction or retention unlinks it.
#[derive(Clone)]
struct BlockFile {
    file: Arc<File>,
    len: u64,
}

struct PositionalRead {
    file: Arc<File>,
    pos: u64,
}

impl std::io::Read for PositionalRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = std::os::unix::fs::FileExt::read_at(&*self.file, buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl parquet::file::reader::Length for BlockFile {
    fn len(&self) -> u64 {
        self.len
    }
}

impl parquet::file::reader::ChunkReader for BlockFile {
    type T = PositionalRead;

    fn get_read(&self, start: u64) -> parquet::errors::Result<PositionalRead> {
        Ok(PositionalRead {
            file: self.file.clone(),
            pos: start,
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<bytes::Bytes> {
        let mut buf = vec![0; length];
        std::os::unix::fs::FileExt::read_exact_at(&*self.file, &mut buf, start)?;
        Ok(buf.into())
    }
}

fn block_err(path: &Path) -> impl Fn(parquet::errors::ParquetError) -> StoreError + '_ {
    move |e| StoreError::Block {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

fn arrow_err(path: &Path) -> impl Fn(arrow::error::ArrowError) -> StoreError + '_ {
    move |e| StoreError::Block {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

fn clamp(t: u64) -> i64 {
    i64::try_from(t).unwrap_or(i64::MAX)
}

fn status_code(s: &Status) -> &'static str {
    match s {
        Status::Unset => "UNSET",
        Status::Ok => "OK",
        Status::Error(_) => "ERROR",
    }
}

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

/// The attributes of a span's events and links: search finds a span by them too.
pub(crate) fn nested_attributes(s: &Span) -> impl Iterator<Item = &causeway_model::KeyValue> {
    s.events
        .iter()
        .flat_map(|e| &e.attributes)
        .chain(s.links.iter().flat_map(|l| &l.attributes))
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

impl Block {
    /// Opens a block written earlier, rebuilding its index from its columns.
    pub fn open(path: PathBuf) -> Result<Block, StoreError> {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_string();
        Self::open_with(path, name, None)
    }

    fn open_with(
        path: PathBuf,
        name: String,
        index: Option<BlockIndex>,
    ) -> Result<Block, StoreError> {
        let file = File::open(&path).map_err(StoreError::io("open block", &path))?;
        let bytes = file
            .metadata()
            .map_err(StoreError::io("stat block", &path))?
            .len();
        let file = BlockFile {
            file: Arc::new(file),
            len: bytes,
        };
        let meta =
            ArrowReaderMetadata::load(&file, ArrowReaderOptions::new().with_page_index(true))
                .map_err(block_err(&path))?;
        let kv = meta.metadata().file_metadata().key_value_metadata();
        let lookup = |key: &str| {
            kv.and_then(|kv| kv.iter().find(|e| e.key == key))
                .and_then(|e| e.value.clone())
        };
        let wal_through = lookup(WAL_THROUGH)
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| StoreError::Block {
                path: path.clone(),
                reason: format!("missing {WAL_THROUGH} metadata"),
            })?;
        let replaces = lookup(REPLACES)
            .and_then(|v| serde_json::from_str(&v).ok())
            .unwrap_or_default();
        let mut block = Block {
            name,
            path,
            bytes,
            wal_through,
            replaces,
            index: BlockIndex::default(),
            meta,
            file,
        };
        block.index = match index {
            Some(i) => i,
            None => block.build_index()?,
        };
        Ok(block)
    }

    /// A reader of `columns` (leaving out the `events` column's leaves named in
    /// `skipped_event_leaves`) over the given row ranges (sorted, disjoint; empty means
    /// every row).
    fn reader(
        &self,
        columns: &[&str],
        skipped_event_leaves: &[&str],
        rows: &[Range<usize>],
        batch_rows: usize,
    ) -> Result<parquet::arrow::arrow_reader::ParquetRecordBatchReader, StoreError> {
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
            self.file.clone(),
            self.meta.clone(),
        );
        // By the file's own schema: older blocks lack later columns.
        let leaves = builder
            .parquet_schema()
            .columns()
            .iter()
            .enumerate()
            .filter(|(_, leaf)| {
                let path = leaf.path().parts();
                let root = path.first().map_or("", String::as_str);
                columns.contains(&root)
                    && !(root == crate::events::COLUMN
                        && skipped_event_leaves.contains(&leaf.name()))
            })
            .map(|(i, _)| i)
            .collect::<Vec<_>>();
        let mask = ProjectionMask::leaves(builder.parquet_schema(), leaves);
        let mut builder = builder.with_projection(mask).with_batch_size(batch_rows);
        if !rows.is_empty() {
            // Read only the row groups the ranges touch; the selection then counts rows
            // within those groups.
            let groups = self.meta.metadata().row_groups();
            let mut chosen = Vec::new();
            let mut shifted = Vec::new();
            let (mut group_start, mut skipped) = (0usize, 0usize);
            let mut ranges = rows.iter().peekable();
            for (g, rg) in groups.iter().enumerate() {
                let group_end = group_start + rg.num_rows() as usize;
                let touched = rows
                    .iter()
                    .any(|r| r.start < group_end && r.end > group_start);
                if touched {
                    chosen.push(g);
                    while let Some(r) = ranges.peek() {
                        if r.start >= group_end {
                            break;
                        }
                        let a = r.start.max(group_start);
                        let b = r.end.min(group_end);
                        shifted.push(a - skipped..b - skipped);
                        if r.end <= group_end {
                            ranges.next();
                        } else {
                            break;
                        }
                    }
                } else {
                    skipped += group_end - group_start;
                }
                group_start = group_end;
            }
            let total = group_start - skipped;
            builder = builder.with_row_groups(chosen).with_row_selection(
                RowSelection::from_consecutive_ranges(shifted.into_iter(), total),
            );
        }
        builder.build().map_err(block_err(&self.path))
    }

    fn build_index(&self) -> Result<BlockIndex, StoreError> {
        let cols = [
            "trace_id",
            "service",
            "operation",
            "host",
            "start_time",
            "duration_ns",
            "status_code",
            "attributes",
            "nested_attributes",
            crate::events::COLUMN,
        ];
        let mut builder = IndexBuilder::default();
        for batch in self.reader(&cols, &crate::events::TIME_AND_NAME_LEAVES, &[], BATCH_ROWS)? {
            let batch = batch.map_err(arrow_err(&self.path))?;
            let get = |name: &str| {
                batch.column_by_name(name).ok_or_else(|| StoreError::Block {
                    path: self.path.clone(),
                    reason: format!("missing column {name}"),
                })
            };
            let ids = get("trace_id")?
                .as_any()
                .downcast_ref::<FixedSizeBinaryArray>()
                .ok_or_else(|| self.corrupt("trace_id is not 16-byte binary"))?;
            let service = get("service")?.as_string_opt::<i32>();
            let operation = get("operation")?.as_string_opt::<i32>();
            let host = get("host")?.as_string_opt::<i32>();
            let status = get("status_code")?.as_string_opt::<i32>();
            let start = get("start_time")?.as_primitive_opt::<TimestampNanosecondType>();
            let duration = get("duration_ns")?.as_primitive_opt::<Int64Type>();
            let (keys, values, offsets) = attribute_arrays(self, &batch, "attributes")?;
            let nested = optional_attribute_arrays(self, &batch, "nested_attributes")?;
            let events = crate::events::EventColumns::of(&batch).map_err(|e| self.corrupt(&e))?;
            let (
                Some(service),
                Some(operation),
                Some(host),
                Some(status),
                Some(start),
                Some(duration),
            ) = (service, operation, host, status, start, duration)
            else {
                return Err(self.corrupt("an indexed column has the wrong type"));
            };
            for i in 0..batch.num_rows() {
                let id: [u8; 16] = ids
                    .value(i)
                    .try_into()
                    .map_err(|_| self.corrupt("trace_id is not 16 bytes"))?;
                builder.push(IndexRow {
                    trace: u128::from_be_bytes(id),
                    service: service.value(i),
                    operation: operation.value(i),
                    host: host.value(i),
                    start: start.value(i).max(0) as u64,
                    duration: duration.value(i).max(0) as u64,
                    error: status.value(i) == "ERROR",
                });
                for j in offsets[i] as usize..offsets[i + 1] as usize {
                    builder.attribute(keys.value(j), values.value(j));
                }
                if let Some((keys, values, offsets)) = nested {
                    for j in offsets[i] as usize..offsets[i + 1] as usize {
                        builder.attribute(keys.value(j), values.value(j));
                    }
                }
                if let Some(events) = &events {
                    events
                        .each_attribute(i, |k, v| builder.attribute(k, v))
                        .map_err(|e| self.corrupt(&e))?;
                }
            }
        }
        Ok(builder.finish())
    }

    fn corrupt(&self, reason: &str) -> StoreError {
        StoreError::Block {
            path: self.path.clone(),
            reason: reason.to_string(),
        }
    }

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
                (&"detail" | &"source", Fields::Structure { .. }) => false,
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

/// The keys, values and per-row offsets of the `attributes` map column.
type AttributeArrays<'a> = (
    &'a arrow::array::StringArray,
    &'a arrow::array::StringArray,
    &'a [i32],
);

/// [`attribute_arrays`] of a column older blocks may lack.
fn optional_attribute_arrays<'a>(
    block: &Block,
    batch: &'a RecordBatch,
    column: &str,
) -> Result<Option<AttributeArrays<'a>>, StoreError> {
    if batch.column_by_name(column).is_none() {
        return Ok(None);
    }
    attribute_arrays(block, batch, column).map(Some)
}

fn attribute_arrays<'a>(
    block: &Block,
    batch: &'a RecordBatch,
    column: &str,
) -> Result<AttributeArrays<'a>, StoreError> {
    let map = batch
        .column_by_name(column)
        .and_then(|c| c.as_map_opt())
        .ok_or_else(|| block.corrupt(&format!("{column} is not a map")))?;
    let keys = map
        .keys()
        .as_string_opt::<i32>()
        .ok_or_else(|| block.corrupt("attribute keys are not text"))?;
    let values = map
        .values()
        .as_string_opt::<i32>()
        .ok_or_else(|| block.corrupt("attribute values are not text"))?;
    Ok((keys, values, map.value_offsets()))
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
                let kind = batch
                    .column_by_name("kind")
                    .and_then(|c| c.as_string_opt::<i32>())
                    .ok_or_else(|| block.corrupt("kind is missing or not text"))?;
                for i in 0..batch.num_rows() {
                    let row = cols.row(block, i, &mut intern, |k| keys.iter().any(|x| x == k))?;
                    let mut span = crate::detail::from_columns(row);
                    span.kind = SpanKind::parse(kind.value(i)).unwrap_or_default();
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
