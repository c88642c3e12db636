//! SQL over the `spans` table (one row per span, attributes as a map) through DataFusion.
//! Read-only, with a row limit and a time limit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use arrow::json::writer::{JsonArray, WriterBuilder};
use arrow::json::StructMode;
use causeway_model::Span;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::{ParquetReadOptions, SQLOptions, SessionConfig, SessionContext};
use futures_util::StreamExt;
use serde::Serialize;

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
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Memory the query may use, in bytes.
    pub max_memory: usize,
}

impl Default for SqlLimits {
    fn default() -> Self {
        SqlLimits {
            max_rows: 10_000,
            timeout: Duration::from_secs(30),
            max_memory: 512 << 20,
        }
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

/// SQL queries running at once, one past its time limit included: DataFusion plans and
/// computes inside its futures' polls, and planning a many-way join can run for minutes
/// in one poll. Each query runs on a thread of its own, so such a query holds up neither
/// the caller's threads nor other queries; at most this many run, and beyond it the answer
/// is "busy" until one ends.
const MAX_RUNNING: usize = 4;
static RUNNING: AtomicUsize = AtomicUsize::new(0);

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
    let (blocks, memory) = store.sql_snapshot();
    let sql = sql.to_string();
    let (answer, answered) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("causeway-sql".into())
        .spawn(move || {
            let _slot = slot;
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(async {
                    let mut answer = answer;
                    tokio::select! {
                        r = run(blocks, memory, &sql, limits) => { let _ = answer.send(r); }
                        // The caller gave up (its time limit): stop at the next yield.
                        _ = answer.closed() => {}
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
    blocks: Vec<std::path::PathBuf>,
    memory: Vec<Span>,
    sql: &str,
    limits: SqlLimits,
) -> Result<SqlResult, StoreError> {
    let runtime = RuntimeEnvBuilder::new()
        .with_memory_limit(limits.max_memory, 1.0)
        .build_arc()
        .map_err(sql_err)?;
    let ctx =
        SessionContext::new_with_config_rt(SessionConfig::new().with_target_partitions(2), runtime);
    ctx.register_table("spans_raw", spans_raw(&ctx, blocks, &memory).await?)
        .map_err(sql_err)?;
    ctx.sql(SPANS_VIEW).await.map_err(sql_err)?;

    let read_only = SQLOptions::new()
        .with_allow_ddl(false)
        .with_allow_dml(false)
        .with_allow_statements(false);
    let df = ctx
        .sql_with_options(sql, read_only)
        .await
        .map_err(sql_err)?;
    let schema = df.schema().as_arrow().clone();
    let columns = schema
        .fields()
        .iter()
        .map(|f| SqlColumn {
            name: f.name().clone(),
            data_type: f.data_type().to_string(),
        })
        .collect();
    let mut stream = df.execute_stream().await.map_err(sql_err)?;
    let mut rows = Vec::new();
    let mut truncated = false;
    while let Some(batch) = stream.next().await {
        let batch = batch.map_err(sql_err)?;
        let room = limits.max_rows - rows.len();
        let batch = if batch.num_rows() > room {
            truncated = true;
            batch.slice(0, room)
        } else {
            batch
        };
        rows.extend(batch_rows(&batch)?);
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

async fn spans_raw(
    ctx: &SessionContext,
    blocks: Vec<std::path::PathBuf>,
    memory: &[Span],
) -> Result<Arc<dyn datafusion::catalog::TableProvider>, StoreError> {
    let refs: Vec<&Span> = memory.iter().collect();
    let batch = block::to_batch(&refs).map_err(sql_err)?;
    let schema = batch.schema();
    let mut df = ctx.read_batch(batch).map_err(sql_err)?;
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
    Ok(df.into_view())
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
