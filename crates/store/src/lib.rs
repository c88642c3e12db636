//! Causeway's embedded trace store: the write path and the three ways in of Dapper's Depot
//! API, plus SQL.
//!
//! Spans are appended to a write-ahead log and acknowledged once durable, indexed in an
//! in-memory head, and cut into immutable Parquet blocks sorted by trace id. Blocks are
//! merged by compaction and dropped by retention (age and size). Reads go through the
//! [`TraceStore`] trait: a trace by id, an indexed search, a parallel bulk scan of every trace
//! in a time window. [`sorted`] sorts a whole window's matches through the scan; [`sql`]
//! exposes a `spans` table through DataFusion.
//!
//! `TraceStore` is Dapper's Depot API: `append`, `trace(id)`, `search`, `scan`/`scan_fields`
//! (every trace starting in a window, each whole and once, from several threads),
//! `services`, `operations`. `Store` (`store.rs`) is its embedded implementation; the
//! ClickHouse store (`causeway-clickhouse`) implements the same trait, and `conformance`
//! (feature `conformance`) holds the checks both pass. The service and operation lists are
//! a `Catalog` (`catalog.rs`) bounded in bytes of names (`max_catalog_bytes`, 16 MiB);
//! ClickHouse lists at most 10 000.
#![warn(missing_docs)]

mod block;
mod catalog;
#[cfg(feature = "conformance")]
pub mod conformance;
mod detail;
mod events;
mod head;
mod index;
pub mod linked;
mod merge;
pub mod priority;
pub mod query;
pub mod sorted;
pub mod sql;
mod store;
pub mod wal;

pub use query::{
    attribute_text, parse_duration, parse_time, searchable_attributes, SearchQuery, TimeWindow,
    TraceSummary,
};
pub use sorted::{search_sorted, SearchOrder, SortedTraces};
pub use store::{FsyncPolicy, Store, StoreOptions, StoreStats, SMALL_BATCH_SPANS};

use causeway_model::{Span, Trace, TraceId};
use std::ops::ControlFlow;
use std::path::PathBuf;

/// What can go wrong in the store.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A Parquet block could not be read or written.
    #[error("parquet block {path}: {reason}")]
    Block {
        /// The block file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
    /// Another process holds the data directory.
    #[error("data directory {0} is in use by another causeway process")]
    Locked(PathBuf),
    /// Ingest is ahead of block writing; the caller should retry later.
    #[error("store is busy writing blocks; retry shortly")]
    Busy,
    /// A SQL query was rejected or failed.
    #[error("sql: {0}")]
    Sql(String),
    /// A SQL query ran past its time limit.
    #[error("sql: query exceeded its time limit of {0:?}")]
    SqlTimeout(std::time::Duration),
    /// A SQL query needed more than its limits allow (memory, a value's size).
    #[error("sql: {0}")]
    SqlLimit(String),
    /// The SQL engine failed on its own account.
    #[error("sql engine: {0}")]
    SqlInternal(String),
    /// A remote store's server (a ClickHouse node) could not be reached, or refused or
    /// failed a request.
    #[error("store node {node}: {reason}")]
    Remote {
        /// The node, as `host:port`.
        node: String,
        /// What it said, or why it could not be asked.
        reason: String,
    },
    /// As many SQL queries as may run at once are running (one past its time limit runs
    /// on until it can be cancelled).
    #[error("sql: {0} queries are running, the most at once; retry shortly")]
    SqlBusy(usize),
}

impl StoreError {
    /// An I/O error of `action` on `path`, for `map_err`.
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io {
            action,
            path,
            source,
        }
    }
}

/// Counts of a bulk scan.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct ScanStats {
    /// Traces visited.
    pub traces: u64,
    /// Spans in them.
    pub spans: u64,
}

/// What a bulk scan decodes of each span.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Fields {
    /// Every field, exactly as stored.
    #[default]
    All,
    /// What analyses of a trace's structure need, several times faster to read: ids,
    /// parent, name, kind, service, host, process id, start, end and status, plus the
    /// attributes with these keys (as text). No events, links, messages or other
    /// attributes. Spans not yet written to a block are given whole.
    Structure {
        /// Attribute keys to keep.
        attributes: Vec<String>,
    },
    /// What a path needs (expectations, causal orders): every field but the attributes
    /// of spans, events and links, which are left empty. Spans not yet written to a block
    /// are given whole.
    Paths,
}

/// The read and write interface of a trace store: Dapper's Depot API. The embedded
/// [`Store`] implements it; a scale-out backend implements the same trait.
pub trait TraceStore: Send + Sync {
    /// Appends spans; returns once they are durable under the store's fsync policy.
    fn append(&self, spans: Vec<Span>) -> Result<(), StoreError>;
    /// [`TraceStore::append`] for spans whose native records the caller already holds (a
    /// native batch as received), which a store that logs records need not encode again.
    /// `records` must encode exactly `spans`.
    fn append_records(&self, records: &[u8], spans: Vec<Span>) -> Result<(), StoreError> {
        let _ = records;
        self.append(spans)
    }
    /// Sizes and counters (zero where the store has no such thing).
    fn stats(&self) -> StoreStats;
    /// Every stored span of one trace, assembled; `None` if no span of it is stored.
    fn trace(&self, id: TraceId) -> Result<Option<Trace>, StoreError>;
    /// Traces with a span matching the query, most recent first.
    fn search(&self, query: &SearchQuery) -> Result<Vec<TraceSummary>, StoreError> {
        self.search_until(query, &|| ControlFlow::Continue(()))
    }
    /// [`TraceStore::search`], asking `stop` between steps (each trace read, each block
    /// searched): once it answers `Break` (a deadline passed) the search ends with what
    /// it found so far.
    fn search_until(
        &self,
        query: &SearchQuery,
        stop: &(dyn Fn() -> ControlFlow<()> + Sync),
    ) -> Result<Vec<TraceSummary>, StoreError>;
    /// Visits every trace that starts in `window`, each whole and once, from several
    /// threads at a time.
    fn scan(
        &self,
        window: TimeWindow,
        visit: &(dyn Fn(Trace) + Sync),
    ) -> Result<ScanStats, StoreError> {
        self.scan_fields(window, &Fields::All, &|t| {
            visit(t);
            ControlFlow::Continue(())
        })
    }
    /// [`TraceStore::scan`], decoding only `fields` of each stored span. A visit that
    /// answers `Break` stops the scan on every thread soon after (a deadline passed, the
    /// caller has seen enough); the stats then count the traces visited so far.
    fn scan_fields(
        &self,
        window: TimeWindow,
        fields: &Fields,
        visit: &(dyn Fn(Trace) -> ControlFlow<()> + Sync),
    ) -> Result<ScanStats, StoreError>;
    /// The services seen, sorted.
    fn services(&self) -> Result<Vec<String>, StoreError>;
    /// The span names seen for a service, sorted.
    fn operations(&self, service: &str) -> Result<Vec<String>, StoreError>;
}
