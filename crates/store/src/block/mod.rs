//! Immutable Parquet blocks: spans sorted by trace id so that a trace is a contiguous run
//! of rows, with page statistics for pruning and a `detail` column holding what the other
//! columns do not (`crate::detail`), so that the columns and the detail give back each span
//! exactly.
//!
//! This module opens a block and builds its in-memory index; `write` makes blocks,
//! `read` decodes their spans.
//!
//! One row per span, in (trace id, start, span id) order. Columns: `trace_id` (16 bytes),
//! `span_id`, `parent_id` (8 bytes, nullable), `service`, `operation`, `kind`, `host`,
//! `pid`, `start_time` (timestamp ns UTC), `duration_ns`, `status_code`
//! (`UNSET`/`OK`/`ERROR`), `status_message` (nullable), `attributes` (a map of string to
//! string; non-string values as text), `source`, `detail`, `nested_attributes` (the
//! attributes of the span's links, and of its events when the `events` column has no place
//! for their value, as text, for search) and `events` (`crate::events`). Blocks written
//! before `nested_attributes` lack it and read as if it were empty; blocks written before
//! `events` keep events in the detail and all their attributes in `nested_attributes`, and
//! read as before.
//!
//! Row groups are 32 768 rows and pages 1 024 rows, with page statistics and zstd. The
//! columns of a few repeated names (`service`, `operation`, `kind`, `host`, `pid`, the
//! status columns, `source`) are stored uncompressed: their dictionary indexes hardly
//! compress, while every compressed page costs a zstd context to read. `span_id`,
//! `parent_id`, `start_time`, `detail` and the events' integer attribute values have no
//! dictionary: their values seldom repeat, and a dictionary of distinct values costs its
//! indexes on top of them.
//!
//! A block file is read by position through a shared descriptor, so concurrent readers never
//! share a seek offset, and a block unlinked by compaction or retention stays readable to
//! the readers that hold it.

mod read;
mod write;

pub(crate) use read::merge_ranges;
pub use read::SpanBatches;
pub(crate) use write::{row_order, to_batch, BlockWriter};

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
use causeway_model::{Source, Span, SpanId, SpanKind, Status, TraceId};

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
