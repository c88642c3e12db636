//! SQL over the `spans` table (one row per span, attributes as a map) through DataFusion.
//! Read-only and bounded: a query runs on a thread of its own under a time limit that
//! stops every operator within a batch ([`guard`]), a memory pool for its joins, sorts and
//! groups, a limit on the values its functions make ([`bounded`]) and on the batches its
//! operators hand on, and limits on the rows and bytes it answers.
//!
//! The table is the block files (opened by path, read with today's schema) plus the
//! in-memory spans as batches (made under each head's lock, their bytes drawn from the SQL
//! memory), exposed as the read-only view `spans` (ids as hex, `detail` left out). DDL, DML
//! and other statements are refused. A query runs on a `causeway-sql` thread (256 MiB of
//! stack reserved), at most 4 at once, more answered "busy". Before planning, which cannot be
//! interrupted, `shape` bounds the text, relations and expressions. A value a function
//! makes may be at most a 32nd of the memory (`max_value_bytes`) and a batch an operator
//! hands on an eighth (`max_batch_bytes`). One `GreedyMemoryPool` per limit is shared by
//! every query, and nothing spills to disk. Answers are cut at `max_rows` and
//! `max_result_bytes`.
//!
//! Block files are opened by path, so a block removed by compaction or retention during a
//! query fails it. Aggregates that build strings (`string_agg`) hold up to about twice what
//! they account to the pool.

mod bounded;
mod bounded_aggregate;
mod guard;
mod shape;

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arrow::array::RecordBatch;
use arrow::json::writer::{JsonArray, WriterBuilder};
use arrow::json::StructMode;
use datafusion::common::DataFusionError;
use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};
use datafusion::execution::memory_pool::{
    GreedyMemoryPool, MemoryConsumer, MemoryPool, MemoryReservation, TrackConsumersPool,
};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::physical_plan::execute_stream;
use datafusion::prelude::{ParquetReadOptions, SQLOptions, SessionConfig, SessionContext};
use futures_util::StreamExt;
use serde::Serialize;

use crate::store::SqlSource;
use crate::{block, Store, StoreError};

/// The `spans` view: ids as hex text, everything else as stored (`detail` left out).
const SPANS_VIEW: &str = "CREATE VIEW spans AS SELECT \
    encode(arrow_cast(trace_id, 'Binary'), 'hex') AS trace_id, \
    encode(arrow_cast(span_id, 'Binary'), 'hex') AS span_id, \
    encode(arrow_cast(parent_id, 'Binary'), 'hex') AS parent_id, \
    service, operation, kind, host, pid, start_time, duration_ns, status_code, \
    status_message, attributes, source FROM spans_raw";

/// Bounds on one query.
#[derive(Debug, Clone, Copy)]
pub struct SqlLimits {
    /// Rows returned at most; more are cut and the result says so.
    pub max_rows: usize,
    /// Bytes of rows (as JSON) returned at most; more are cut and the result says so.
    pub max_result_bytes: usize,
    /// Wall-clock limit: past it the query stops, within a batch of every operator.
    pub timeout: Duration,
    /// Memory SQL may use, in bytes, all queries running together: their joins, sorts
    /// and groups draw on it; one batch an operator hands on may be an eighth of it,
    /// one value a function makes a thirty-second.
    pub max_memory: usize,
}

impl Default for SqlLimits {
    fn default() -> Self {
        SqlLimits {
            max_rows: 10_000,
            max_result_bytes: 64 << 20,
            timeout: Duration::from_secs(30),
            max_memory: 512 << 20,
        }
    }
}

impl SqlLimits {
    /// Bytes one batch an operator hands on may hold.
    pub fn max_batch_bytes(&self) -> usize {
        (self.max_memory / 8).max(1 << 20)
    }
    /// Bytes one value a function makes may take.
    pub fn max_value_bytes(&self) -> usize {
        (self.max_memory / 32).max(64 << 10)
    }
}

/// A result column.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SqlColumn {
    /// Its name.
    pub name: String,
    /// Its Arrow type, as text.
    #[serde(rename = "type")]
    pub data_type: String,
}

/// A query's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SqlResult {
    /// The columns, in order.
    pub columns: Vec<SqlColumn>,
    /// The rows, each a list of values in column order.
    pub rows: Vec<Vec<serde_json::Value>>,
    /// True when rows were cut at the row limit.
    pub truncated: bool,
}

fn sql_err(e: impl std::fmt::Display) -> StoreError {
    StoreError::Sql(e.to_string())
}

/// A DataFusion error as the store's: the query's fault (a mistake, or a limit it
/// passed), the time limit, or the engine's own fault.
fn classify(e: DataFusionError, limits: SqlLimits) -> StoreError {
    let root = e.find_root();
    let text = root.to_string();
    match root {
        _ if text.contains(guard::STOPPED) => StoreError::SqlTimeout(limits.timeout),
        // The value and batch limits say what passed them; the pool names operators.
        DataFusionError::ResourcesExhausted(m) if m.contains(bounded::WOULD_MAKE) => {
            StoreError::SqlLimit(m.clone())
        }
        DataFusionError::ResourcesExhausted(m) => StoreError::SqlLimit(format!(
            "the query needs more of the {} bytes of memory SQL may use than are free: {m}",
            limits.max_memory
        )),
        DataFusionError::Internal(_)
        | DataFusionError::IoError(_)
        | DataFusionError::ObjectStore(_) => StoreError::SqlInternal(text),
        _ => StoreError::Sql(e.to_string()),
    }
}

/// Making the in-memory spans' batches failed: the store's fault, not the query's.
impl From<arrow::error::ArrowError> for StoreError {
    fn from(e: arrow::error::ArrowError) -> StoreError {
        StoreError::SqlInternal(e.to_string())
    }
}

/// SQL queries running now (their threads included, until each ends).
pub fn running() -> usize {
    RUNNING.load(Ordering::SeqCst)
}

/// SQL queries running at once, one past its time limit included: DataFusion plans and
/// computes inside its futures' polls, and planning a many-way join can run for minutes
/// in one poll. Each query runs on a thread of its own, so such a query holds up neither
/// the caller's threads nor other queries; at most this many run, and beyond it the answer
/// is "busy" until one ends.
const MAX_RUNNING: usize = 4;
static RUNNING: AtomicUsize = AtomicUsize::new(0);

/// The stack of a query's thread: DataFusion plans and optimizes by recursion over the
/// plan, deeper with every relation joined; reserved, and touched only as deep as a
/// query goes.
const SQL_STACK_BYTES: usize = 256 << 20;

/// The memory every query running draws on, one pool per limit (a server has one): the
/// limit holds for all queries at once, not for each.
fn shared_pool(bytes: usize) -> Arc<dyn MemoryPool> {
    static POOLS: Mutex<Vec<(usize, Arc<dyn MemoryPool>)>> = Mutex::new(Vec::new());
    let mut pools = POOLS.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, pool)) = pools.iter().find(|(b, _)| *b == bytes) {
        return pool.clone();
    }
    let pool: Arc<dyn MemoryPool> = Arc::new(TrackConsumersPool::new(
        GreedyMemoryPool::new(bytes),
        NonZeroUsize::MIN.saturating_add(4),
    ));
    pools.push((bytes, pool.clone()));
    pool
}

/// A place among the [`MAX_RUNNING`] queries, given back when the query's thread ends.
struct Slot;

impl Slot {
    fn take() -> Option<Slot> {
        let before = RUNNING.fetch_add(1, Ordering::SeqCst);
        if before >= MAX_RUNNING {
            RUNNING.fetch_sub(1, Ordering::SeqCst);
            return None;
        }
        Some(Slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        RUNNING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs one read-only query against the store's spans on a thread of its own. Past the
/// time limit the answer is a timeout, and the query is cancelled at its next yield.
pub async fn query(store: &Store, sql: &str, limits: SqlLimits) -> Result<SqlResult, StoreError> {
    let slot = Slot::take().ok_or(StoreError::SqlBusy(MAX_RUNNING))?;
    let source = store.sql_source();
    let sql = sql.to_string();
    let watch = Arc::new(guard::Watch::new(limits.timeout, limits.max_batch_bytes()));
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("causeway-sql".into())
        .stack_size(SQL_STACK_BYTES)
        .spawn(move || {
            let _slot = slot;
            crate::priority::run_behind_ingest();
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(async {
                    let mut answer = answer;
                    tokio::select! {
                        r = run(&source, &sql, limits, &watch) => { let _ = answer.send(r); }
                        // The caller gave up (its time limit): every operator stops at
                        // its next batch.
                        _ = answer.closed() => watch.cancel(),
                    }
                }),
                Err(e) => {
                    let _ = answer.send(Err(StoreError::Sql(format!(
                        "cannot start the query's runtime: {e}"
                    ))));
                }
            }
        })
        .map_err(|e| StoreError::Sql(format!("cannot start the query's thread: {e}")))?;
    match tokio::time::timeout(limits.timeout, answered).await {
        Ok(Ok(r)) => r,
        Ok(Err(_)) => Err(StoreError::Sql("the query ended without an answer".into())),
        Err(_) => Err(StoreError::SqlTimeout(limits.timeout)),
    }
}

async fn run(
    source: &SqlSource,
    sql: &str,
    limits: SqlLimits,
    watch: &Arc<guard::Watch>,
) -> Result<SqlResult, StoreError> {
    let failed = |e: DataFusionError| classify(e, limits);
    shape::check(sql).map_err(StoreError::SqlLimit)?;

    // Nothing spills to disk: sorts and groups stay within the memory or fail.
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_pool(shared_pool(limits.max_memory))
        .with_disk_manager_builder(
            DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled),
        )
        .build_arc()
        .map_err(sql_err)?;
    let ctx =
        SessionContext::new_with_config_rt(SessionConfig::new().with_target_partitions(2), runtime);
    bounded::register(&ctx, limits.max_value_bytes(), limits.max_batch_bytes());
    bounded_aggregate::register(&ctx, limits.max_value_bytes());
    let (table, _in_memory) = spans_raw(&ctx, source, limits).await?;
    ctx.register_table("spans_raw", table).map_err(sql_err)?;
    ctx.sql(SPANS_VIEW).await.map_err(sql_err)?;

    let read_only = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    let df = ctx.sql_with_options(sql, read_only).await.map_err(failed)?;
    let schema = df.schema().as_arrow().clone();
    let columns = schema
        .fields()
        .iter()
        .map(|f| SqlColumn {
            name: f.name().clone(),
            data_type: f.data_type().to_string(),
        })
        .collect();
    let task = ctx.task_ctx();
    let plan = df.create_physical_plan().await.map_err(failed)?;
    let plan = guard::watch_plan(plan, watch).map_err(failed)?;
    let mut stream = execute_stream(plan, task).map_err(failed)?;
    let mut rows = Vec::new();
    let mut bytes = 0usize;
    let mut truncated = false;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(failed)?;
        let room = limits.max_rows - rows.len();
        let batch = if batch.num_rows() > room {
            truncated = true;
            batch.slice(0, room)
        } else {
            batch
        };
        for row in batch_rows(&batch)? {
            // The row's size as JSON: what the answer will hold.
            let size = serde_json::to_vec(&row).map_or(0, |v| v.len());
            if bytes + size > limits.max_result_bytes {
                truncated = true;
                break;
            }
            bytes += size;
            rows.push(row);
        }
        if truncated || rows.len() >= limits.max_rows {
            truncated |= stream.next().await.is_some();
            break;
        }
    }
    Ok(SqlResult {
        columns,
        rows,
        truncated,
    })
}

/// In-memory spans per batch of the `spans_raw` table (each batch's bytes are drawn from
/// the SQL memory as it is made, so a refusal comes one batch past the limit at most).
const SNAPSHOT_CHUNK: usize = 4096;

/// The `spans_raw` table: the blocks, and the in-memory spans' batches, which hold their
/// bytes of the SQL memory for as long as the query runs (the reservation returned).
async fn spans_raw(
    ctx: &SessionContext,
    source: &SqlSource,
    limits: SqlLimits,
) -> Result<
    (
        Arc<dyn datafusion::catalog::TableProvider>,
        MemoryReservation,
    ),
    StoreError,
> {
    let mut reservation =
        MemoryConsumer::new("in-memory spans").register(&ctx.runtime_env().memory_pool);
    let (blocks, memory) = source.snapshot(SNAPSHOT_CHUNK, &mut |batch: &RecordBatch| {
        reservation
            .try_grow(batch.get_array_memory_size())
            .map_err(|e| classify(e, limits))
    })?;
    let empty = block::to_batch(&[]).map_err(sql_err)?;
    let schema = empty.schema();
    // With nothing in memory the table still has its columns.
    let memory = if memory.is_empty() {
        vec![empty]
    } else {
        memory
    };
    let mut df = ctx.read_batches(memory).map_err(sql_err)?;
    if !blocks.is_empty() {
        let paths: Vec<String> = blocks
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        // Today's schema: blocks written before a column was added read it as null.
        let stored = ctx
            .read_parquet(paths, ParquetReadOptions::default().schema(&schema))
            .await
            .map_err(sql_err)?;
        df = stored.union(df).map_err(sql_err)?;
    }
    Ok((df.into_view(), reservation))
}

fn batch_rows(
    batch: &arrow::array::RecordBatch,
) -> Result<Vec<Vec<serde_json::Value>>, StoreError> {
    if batch.num_rows() == 0 {
        return Ok(Vec::new());
    }
    let mut buf = Vec::new();
    let mut writer = WriterBuilder::new()
        .with_explicit_nulls(true)
        .with_struct_mode(StructMode::ListOnly)
        .build::<_, JsonArray>(&mut buf);
    writer.write(batch).map_err(sql_err)?;
    writer.finish().map_err(sql_err)?;
    drop(writer);
    serde_json::from_slice(&buf).map_err(sql_err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engines_own_failures_are_not_the_querys() {
        let limits = SqlLimits::default();
        let internal = DataFusionError::Internal("a bug".into());
        assert!(matches!(
            classify(internal, limits),
            StoreError::SqlInternal(_)
        ));
        let wrapped = DataFusionError::Context(
            "planning".into(),
            Box::new(DataFusionError::Internal("a bug".into())),
        );
        assert!(matches!(
            classify(wrapped, limits),
            StoreError::SqlInternal(_)
        ));
        let mistake = DataFusionError::Plan("no column x".into());
        assert!(matches!(classify(mistake, limits), StoreError::Sql(_)));
        let pool = DataFusionError::ResourcesExhausted("Additional allocation failed".into());
        match classify(pool, limits) {
            StoreError::SqlLimit(m) => assert!(m.contains("bytes of memory SQL may use"), "{m}"),
            other => panic!("{other}"),
        }
        let stopped = DataFusionError::Execution(format!("{} (1s)", guard::STOPPED));
        assert!(matches!(
            classify(stopped, limits),
            StoreError::SqlTimeout(_)
        ));
    }
}
