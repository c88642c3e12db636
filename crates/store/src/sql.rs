//! SQL over the `spans` table (one row per span, attributes as a map) through DataFusion.
//! Read-only, with a row limit and a time limit.

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

/// The threads SQL runs on. DataFusion plans and computes inside its futures' polls, and
/// one poll of a big join can run for seconds: on its own threads it cannot hold up the
/// caller's, and the caller's timer can end it.
fn sql_runtime() -> Result<&'static tokio::runtime::Runtime, StoreError> {
    static RUNTIME: std::sync::OnceLock<Result<tokio::runtime::Runtime, String>> =
        std::sync::OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("causeway-sql")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| StoreError::Sql(format!("cannot start the SQL threads: {e}")))
}

/// Runs one read-only query against the store's spans, on the SQL threads; past the time
/// limit the query is cancelled (at its next yield) and the answer is a timeout.
pub async fn query(store: &Store, sql: &str, limits: SqlLimits) -> Result<SqlResult, StoreError> {
    let (blocks, memory) = store.sql_snapshot();
    let sql = sql.to_string();
    let task = sql_runtime()?.spawn(async move { run(blocks, memory, &sql, limits).await });
    let abort = task.abort_handle();
    match tokio::time::timeout(limits.timeout, task).await {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => Err(StoreError::Sql(format!("the query failed: {e}"))),
        Err(_) => {
            abort.abort();
            Err(StoreError::SqlTimeout(limits.timeout))
        }
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
