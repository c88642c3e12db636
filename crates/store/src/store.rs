//! The embedded store: ties the WAL, the head, the blocks and the background worker
//! (block cutting, compaction, retention, interval syncs) together.
//!
//! ```text
//! <data>/                    --data, default ./causeway-data
//!   LOCK                     locked while a Store is open (else StoreError::Locked)
//!   wal/
//!     00000000000000000007.wal        WAL segment: native records; number zero-padded to 20 digits
//!   blocks/
//!     000000000000002a.parquet        block: name is a counter in 16 hex digits
//!     000000000000002b.parquet.tmp    block being written; deleted on open
//! ```
//!
//! There is no separate checkpoint file: each block records in its Parquet key-value
//! metadata `causeway.wal_through` (the last WAL segment whose spans it holds) and
//! `causeway.replaces` (the JSON list of the blocks it was compacted from). Together they
//! say which WAL segments are covered and which blocks are stale.
//!
//! The write path:
//! 1. WAL (`crate::wal`): an append writes native records to the open segment and waits as
//!    the fsync policy says.
//! 2. Head (`crate::head`): the spans go into the head, queryable at once; the catalog of
//!    services and span names is updated.
//! 3. Cut: when the head reaches `head_max_spans` (200 000, `--block-spans`; checked by the
//!    append itself) or its first span is 60 s old (checked by the worker), the WAL segment
//!    is sealed (synced unless `never`), a new one opened, and the head frozen with the
//!    sealed segment's number. While `max_pending_heads` (2) frozen heads wait, appends fail
//!    with `StoreError::Busy`, which bounds memory under sustained overload.
//! 4. Block: the worker (thread `causeway-store`) writes frozen heads oldest first (spans
//!    sorted by trace id, start and span id, exact duplicates dropped; `crate::block`), then
//!    drops the frozen head and deletes the WAL segments up to its number.
//!
//! The worker wakes on a cut or every 200 ms, so an fsync interval shorter than 200 ms syncs
//! about every 200 ms.
//!
//! Reads: a trace by id reads the head, the frozen heads, then each block's index entry and
//! row range, and assembles the spans (duplicates across them collapse). A search
//! (`SearchQuery`; `search_until` asks its stop callback between blocks and between the
//! traces it loads) searches the head linearly, prunes blocks by time, narrows them by
//! posting lists and Bloom filters, and confirms tag matches from the columns; candidates are
//! then loaded whole, newest first, and kept when one span meets every condition, until the
//! limit. The bulk scan splits the trace ids in the window into four parts per scan thread;
//! each part merges (`crate::merge`) the rows of every block for its ids, read front to back
//! in 1 024-row batches, with a copy of the in-memory spans, and visits each trace whose
//! earliest start lies in the window.
//!
//! Compaction merges the oldest blocks under `compact_max_spans / 2` (1 M spans) while their
//! sum stays within 2 M, once at least four exist: it streams them by trace id, drops exact
//! duplicates, writes the new block with `causeway.replaces`, then unlinks the inputs.
//! Retention (every 10 s) drops blocks whose newest span is older than `--retention`, then
//! the oldest while the blocks exceed `--max-bytes`. The head is never dropped, and the
//! services catalog keeps the names of dropped blocks.
//!
//! Recovery (`Store::open`): take `LOCK`; delete `*.parquet.tmp`; open every block
//! (rebuilding its index, so opening costs time and memory in proportion to the store);
//! delete blocks named in another's `causeway.replaces` (an interrupted compaction); delete
//! WAL segments up to the highest `wal_through`; replay the rest into the head, logging and
//! skipping damage; open a new WAL segment after the last, never appending to an old,
//! possibly torn one.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fs::File;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use causeway_model::codec::native;
use causeway_model::{Span, Trace, TraceId};

use crate::block::{merge_ranges, row_order, Block, BlockWriter};
use crate::catalog::Catalog;
use crate::head::Head;
use crate::merge::MergedTraces;
use crate::query::{SearchQuery, TimeWindow, TraceSummary};
use crate::wal::{self, Wake, Wal};
use crate::{Fields, ScanStats, StoreError, TraceStore};

/// Spans a compaction hands the block writer at a time.
const COMPACT_WRITE_SPANS: usize = 16 * 1024;

/// When appended spans are synced to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Before an append returns (concurrent appends share one sync).
    Always,
    /// In the background at this interval; an append returns once written to the OS, so a
    /// machine crash can lose the last interval (a process crash loses nothing).
    Interval(Duration),
    /// Never explicitly: for tests and benchmarks of the rest of the path.
    Never,
}

impl std::fmt::Display for FsyncPolicy {
    /// As [`FromStr`](std::str::FromStr) reads it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsyncPolicy::Always => f.write_str("always"),
            FsyncPolicy::Never => f.write_str("never"),
            FsyncPolicy::Interval(d) => write!(f, "{}", humantime::format_duration(*d)),
        }
    }
}

impl std::str::FromStr for FsyncPolicy {
    type Err = String;

    /// `always`, `never`, or an interval such as `100ms` (as `causeway serve --fsync`).
    fn from_str(text: &str) -> Result<FsyncPolicy, String> {
        match text {
            "always" => Ok(FsyncPolicy::Always),
            "never" => Ok(FsyncPolicy::Never),
            other => other
                .parse::<humantime::Duration>()
                .map(|d| FsyncPolicy::Interval(*d))
                .map_err(|e| {
                    format!("{other:?}: expected always, never or an interval like 100ms ({e})")
                }),
        }
    }
}

/// How the store behaves.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// When appends are synced.
    pub fsync: FsyncPolicy,
    /// Cut the head into a block at this many spans.
    pub head_max_spans: usize,
    /// Cut the head into a block when its first span is this old.
    pub head_max_age: Duration,
    /// Refuse appends (with [`StoreError::Busy`]) while this many cut heads wait to be
    /// written (one more for batches of at most [`SMALL_BATCH_SPANS`]): this bounds
    /// memory under sustained overload.
    pub max_pending_heads: usize,
    /// Merge small blocks while the result stays under this many spans.
    pub compact_max_spans: u64,
    /// Merge once at least this many small blocks exist.
    pub compact_min_blocks: usize,
    /// Drop blocks whose newest span is older than this.
    pub retention_age: Option<Duration>,
    /// Drop the oldest blocks while the blocks' total size exceeds this.
    pub retention_bytes: Option<u64>,
    /// Threads for bulk scans.
    pub scan_threads: usize,
    /// Bytes of names the service and operation lists hold at most.
    pub max_catalog_bytes: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            fsync: FsyncPolicy::Always,
            head_max_spans: 200_000,
            head_max_age: Duration::from_secs(60),
            max_pending_heads: 2,
            compact_max_spans: 2_000_000,
            compact_min_blocks: 4,
            retention_age: None,
            retention_bytes: None,
            scan_threads: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(2),
            max_catalog_bytes: 16 << 20,
        }
    }
}

/// A snapshot of the store's size.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StoreStats {
    /// Blocks on disk.
    pub blocks: usize,
    /// Their total size in bytes.
    pub block_bytes: u64,
    /// Spans in them.
    pub block_spans: u64,
    /// Spans in memory (head and heads being written).
    pub head_spans: u64,
    /// Spans appended since the store opened.
    pub appended_spans: u64,
    /// Root spans (no parent, and no carrier of log records or parents) appended since the
    /// store opened: the traces collected.
    pub appended_roots: u64,
    /// Appends refused because block writing was behind.
    pub busy_rejections: u64,
    /// Spans whose service or operation the service and operation lists had no room for.
    pub catalog_refused: u64,
}

struct Frozen {
    head: Head,
    wal_through: u64,
}

struct Shared {
    blocks_dir: PathBuf,
    wal_dir: PathBuf,
    opts: StoreOptions,
    wal: Mutex<Wal>,
    head: RwLock<Head>,
    frozen: RwLock<Vec<Arc<Frozen>>>,
    blocks: RwLock<Vec<Arc<Block>>>,
    synced: Mutex<u64>,
    catalog: RwLock<Catalog>,
    next_block: AtomicU64,
    appended: AtomicU64,
    appended_roots: AtomicU64,
    busy: AtomicU64,
    /// Held while writing, merging or dropping blocks, so the worker and an explicit
    /// flush or compaction never work on the same inputs.
    maintenance: Mutex<()>,
    stop: AtomicBool,
    wake: Wake,
    _lock: File,
}

/// Batches of at most this many spans may still be appended while `max_pending_heads`
/// heads wait, until one more does (OpenTelemetry SDKs export 512 spans a batch).
pub const SMALL_BATCH_SPANS: usize = 1024;

/// The embedded store. Dropping it stops the background worker; appended spans stay in
/// the WAL and come back on the next open.
pub struct Store {
    shared: Arc<Shared>,
    worker: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}
fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    m.write().unwrap_or_else(|p| p.into_inner())
}

impl Store {
    /// Opens (creating if needed) the store in `dir`, recovering what an earlier run left:
    /// blocks are loaded, a compaction interrupted before its inputs were deleted is
    /// finished, and WAL segments not covered by a block are replayed into the head.
    pub fn open(dir: impl AsRef<Path>, opts: StoreOptions) -> Result<Store, StoreError> {
        let dir = dir.as_ref();
        let blocks_dir = dir.join("blocks");
        let wal_dir = dir.join("wal");
        for d in [dir, &blocks_dir, &wal_dir] {
            std::fs::create_dir_all(d).map_err(StoreError::io("create directory", d))?;
        }
        let lock_path = dir.join("LOCK");
        let lock_file = File::create(&lock_path).map_err(StoreError::io("create", &lock_path))?;
        if lock_file.try_lock().is_err() {
            return Err(StoreError::Locked(dir.to_path_buf()));
        }

        let mut blocks = Vec::new();
        let entries =
            std::fs::read_dir(&blocks_dir).map_err(StoreError::io("read", &blocks_dir))?;
        for entry in entries {
            let path = entry.map_err(StoreError::io("read", &blocks_dir))?.path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if name.ends_with(".parquet.tmp") {
                // A block whose write was interrupted: its spans are still in the WAL.
                std::fs::remove_file(&path).map_err(StoreError::io("remove", &path))?;
            } else if name.ends_with(".parquet") {
                blocks.push(Block::open(path)?);
            }
        }
        let replaced: BTreeSet<String> = blocks
            .iter()
            .flat_map(|b| b.replaces.iter().cloned())
            .collect();
        let (stale, live): (Vec<Block>, Vec<Block>) =
            blocks.into_iter().partition(|b| replaced.contains(&b.name));
        for b in stale {
            std::fs::remove_file(&b.path).map_err(StoreError::io("remove", &b.path))?;
        }
        let mut blocks = live;
        blocks.sort_by(|a, b| a.name.cmp(&b.name));
        let covered = blocks.iter().map(|b| b.wal_through).max().unwrap_or(0);
        let next_block = blocks
            .iter()
            .filter_map(|b| u64::from_str_radix(&b.name, 16).ok())
            .max()
            .map_or(1, |n| n + 1);

        let mut head = Head::default();
        let mut last_seq = covered;
        for seg in wal::segments(&wal_dir)? {
            last_seq = last_seq.max(seg.seq);
            if seg.seq <= covered {
                std::fs::remove_file(&seg.path).map_err(StoreError::io("remove", &seg.path))?;
                continue;
            }
            let bytes = std::fs::read(&seg.path).map_err(StoreError::io("read", &seg.path))?;
            let decoded = native::decode_stream(&bytes);
            for p in &decoded.problems {
                tracing::warn!(segment = %seg.path.display(), problem = %p, "WAL damage skipped during recovery");
            }
            head.insert(decoded.spans);
        }
        tracing::info!(
            blocks = blocks.len(),
            replayed_spans = head.spans(),
            "store opened"
        );
        let wal = Wal::create(&wal_dir, last_seq)?;

        let mut catalog = Catalog::new(opts.max_catalog_bytes);
        for b in &blocks {
            for (s, o) in b.index.operations() {
                catalog.add(s, o);
            }
        }
        for s in head.iter_spans() {
            catalog.add(&s.service, &s.name);
        }

        let shared = Arc::new(Shared {
            blocks_dir,
            wal_dir,
            opts,
            wal: Mutex::new(wal),
            head: RwLock::new(head),
            frozen: RwLock::new(Vec::new()),
            blocks: RwLock::new(blocks.into_iter().map(Arc::new).collect()),
            synced: Mutex::new(0),
            catalog: RwLock::new(catalog),
            next_block: AtomicU64::new(next_block),
            appended: AtomicU64::new(0),
            appended_roots: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            maintenance: Mutex::new(()),
            stop: AtomicBool::new(false),
            wake: Wake::default(),
            _lock: lock_file,
        });
        let worker_shared = shared.clone();
        let worker = std::thread::Builder::new()
            .name("causeway-store".into())
            .spawn(move || worker_shared.run())
            .map_err(StoreError::io("start store worker", dir))?;
        Ok(Store {
            shared,
            worker: Some(worker),
        })
    }

    /// Appends spans whose native records the caller already holds (a native batch as
    /// received), saving a re-encoding. `records` must encode exactly `spans`.
    pub fn append_records(&self, records: &[u8], spans: Vec<Span>) -> Result<(), StoreError> {
        self.shared.append(records, spans)
    }

    /// Writes the head to a block now (tests, benchmarks, shutdown).
    pub fn flush(&self) -> Result<(), StoreError> {
        self.shared.cut()?;
        while self.shared.write_one_frozen()? {}
        Ok(())
    }

    /// Merges small blocks now, as the worker would when enough have gathered.
    pub fn compact(&self) -> Result<bool, StoreError> {
        self.shared.compact(2)
    }

    /// Applies retention now.
    pub fn apply_retention(&self) -> Result<usize, StoreError> {
        self.shared.retain()
    }

    /// Sizes and counters.
    pub fn stats(&self) -> StoreStats {
        let s = &self.shared;
        let blocks = read(&s.blocks);
        let frozen: usize = read(&s.frozen).iter().map(|f| f.head.spans()).sum();
        StoreStats {
            blocks: blocks.len(),
            block_bytes: blocks.iter().map(|b| b.bytes).sum(),
            block_spans: blocks.iter().map(|b| b.index.spans).sum(),
            head_spans: (read(&s.head).spans() + frozen) as u64,
            appended_spans: s.appended.load(Ordering::Relaxed),
            appended_roots: s.appended_roots.load(Ordering::Relaxed),
            busy_rejections: s.busy.load(Ordering::Relaxed),
            catalog_refused: read(&s.catalog).refused,
        }
    }

    /// What SQL reads, to be taken on the query's own thread.
    pub(crate) fn sql_source(&self) -> SqlSource {
        SqlSource(self.shared.clone())
    }
}

/// The store as a SQL query's thread reads it.
pub(crate) struct SqlSource(Arc<Shared>);

impl SqlSource {
    /// The block files, and the in-memory spans as batches of at most `chunk` spans, made
    /// while each head is read (no copy of its spans). `take` is given each batch as it
    /// is made, and may refuse it (its memory), which ends the snapshot with its error.
    pub(crate) fn snapshot<E: From<arrow::error::ArrowError>>(
        &self,
        chunk: usize,
        take: &mut dyn FnMut(&arrow::array::RecordBatch) -> Result<(), E>,
    ) -> Result<(Vec<PathBuf>, Vec<arrow::array::RecordBatch>), E> {
        let s = &self.0;
        let mut batches = Vec::new();
        let mut add = |head: &Head| -> Result<(), E> {
            let spans: Vec<&Span> = head.iter_spans().collect();
            for part in spans.chunks(chunk.max(1)) {
                let batch = crate::block::to_batch(part)?;
                take(&batch)?;
                batches.push(batch);
            }
            Ok(())
        };
        add(&read(&s.head))?;
        let frozen: Vec<Arc<Frozen>> = read(&s.frozen).clone();
        for f in &frozen {
            add(&f.head)?;
        }
        let blocks = read(&s.blocks).iter().map(|b| b.path.clone()).collect();
        Ok((blocks, batches))
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake_worker();
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

impl Shared {
    fn append(&self, records: &[u8], spans: Vec<Span>) -> Result<(), StoreError> {
        if spans.is_empty() {
            return Ok(());
        }
        // Small batches may fill one head more than large ones: under a flood of large
        // batches that block writing cannot keep up with, the large ones are refused
        // first, and a client sending as most do is still stored.
        let reserve = usize::from(spans.len() <= SMALL_BATCH_SPANS);
        if read(&self.frozen).len() >= self.opts.max_pending_heads + reserve {
            self.busy.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::Busy);
        }
        self.note_names(&spans);
        let n = spans.len() as u64;
        let roots = causeway_model::parent_links::roots_added(&spans);
        let (pos, full) = {
            let mut wal = lock(&self.wal);
            let pos = wal.append(records)?;
            let mut head = write(&self.head);
            head.insert(spans);
            (pos, head.spans() >= self.opts.head_max_spans)
        };
        self.appended.fetch_add(n, Ordering::Relaxed);
        // A parent link makes a root stored before no root: the count goes down.
        let _ = self
            .appended_roots
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
                Some(r.saturating_add_signed(roots))
            });
        if full {
            // Freeze the full head now rather than when the worker next looks: while it
            // writes a block, appends would otherwise grow the head without bound.
            self.cut()?;
            self.wake_worker();
        }
        if self.opts.fsync == FsyncPolicy::Always {
            self.sync_to(pos)?;
        }
        Ok(())
    }

    fn note_names(&self, spans: &[Span]) {
        let known = {
            let catalog = read(&self.catalog);
            spans.iter().all(|s| catalog.knows(&s.service, &s.name))
        };
        if !known {
            let mut catalog = write(&self.catalog);
            for s in spans {
                catalog.add(&s.service, &s.name);
            }
        }
    }

    fn sync_to(&self, pos: u64) -> Result<(), StoreError> {
        wal::sync_to(&self.wal, &self.synced, pos)
    }

    fn wake_worker(&self) {
        self.wake.notify();
    }

    fn run(&self) {
        let mut last_sync = Instant::now();
        let mut last_retention = Instant::now();
        while !self.stop.load(Ordering::Acquire) {
            self.wake.wait(Duration::from_millis(200));
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            if let Err(e) = self.tick(&mut last_sync, &mut last_retention) {
                tracing::error!(error = %e, "store background work failed; will retry");
            }
        }
    }

    fn tick(
        &self,
        last_sync: &mut Instant,
        last_retention: &mut Instant,
    ) -> Result<(), StoreError> {
        if let FsyncPolicy::Interval(every) = self.opts.fsync {
            if last_sync.elapsed() >= every {
                let written = lock(&self.wal).written();
                self.sync_to(written)?;
                *last_sync = Instant::now();
            }
        }
        let (spans, age) = {
            let head = read(&self.head);
            (head.spans(), head.age())
        };
        if spans >= self.opts.head_max_spans
            || (spans > 0 && age.is_some_and(|a| a >= self.opts.head_max_age))
        {
            self.cut()?;
        }
        while self.write_one_frozen()? {}
        self.compact(self.opts.compact_min_blocks)?;
        if last_retention.elapsed() >= Duration::from_secs(10) {
            self.retain()?;
            *last_retention = Instant::now();
        }
        Ok(())
    }

    /// Seals the WAL segment and freezes the head: both become one future block.
    fn cut(&self) -> Result<(), StoreError> {
        let mut wal = lock(&self.wal);
        let mut head = write(&self.head);
        if head.spans() == 0 {
            return Ok(());
        }
        let sealed = wal.rotate(self.opts.fsync != FsyncPolicy::Never)?;
        let frozen = Frozen {
            head: std::mem::take(&mut *head),
            wal_through: sealed,
        };
        write(&self.frozen).push(Arc::new(frozen));
        Ok(())
    }

    fn block_name(&self) -> String {
        format!("{:016x}", self.next_block.fetch_add(1, Ordering::Relaxed))
    }

    /// Writes the oldest frozen head as a block; false when none waits.
    fn write_one_frozen(&self) -> Result<bool, StoreError> {
        let _maintenance = lock(&self.maintenance);
        let Some(frozen) = read(&self.frozen).first().cloned() else {
            return Ok(false);
        };
        let mut spans: Vec<&Span> = frozen.head.iter_spans().collect();
        spans.sort_by(|a, b| row_order(a, b));
        spans.dedup_by(|a, b| a.trace_id == b.trace_id && a.span_id == b.span_id && a == b);
        let mut writer = BlockWriter::new(
            &self.blocks_dir,
            self.block_name(),
            frozen.wal_through,
            Vec::new(),
        )?;
        writer.write(&spans)?;
        if let Some(block) = writer.finish()? {
            tracing::debug!(block = %block.name, spans = block.index.spans, bytes = block.bytes, "block written");
            write(&self.blocks).push(Arc::new(block));
        }
        write(&self.frozen).retain(|f| !Arc::ptr_eq(f, &frozen));
        for seg in wal::segments(&self.wal_dir)? {
            if seg.seq <= frozen.wal_through {
                std::fs::remove_file(&seg.path).map_err(StoreError::io("remove", &seg.path))?;
            }
        }
        Ok(true)
    }

    /// Merges the oldest small blocks into one when at least `min_blocks` of them fit
    /// under the size limit. Streams by trace-id range, so memory stays at one range.
    fn compact(&self, min_blocks: usize) -> Result<bool, StoreError> {
        let _maintenance = lock(&self.maintenance);
        let inputs: Vec<Arc<Block>> = {
            let blocks = read(&self.blocks);
            let mut total = 0u64;
            blocks
                .iter()
                .filter(|b| b.index.spans < self.opts.compact_max_spans / 2)
                .take_while(|b| {
                    total += b.index.spans;
                    total <= self.opts.compact_max_spans
                })
                .cloned()
                .collect()
        };
        if inputs.len() < min_blocks.max(2) {
            return Ok(false);
        }
        let names: Vec<String> = inputs.iter().map(|b| b.name.clone()).collect();
        let wal_through = inputs.iter().map(|b| b.wal_through).max().unwrap_or(0);
        let mut writer = BlockWriter::new(
            &self.blocks_dir,
            self.block_name(),
            wal_through,
            names.clone(),
        )?;
        let everything = inputs.iter().map(|b| {
            (
                b.as_ref(),
                std::iter::once(0..b.index.spans as usize).collect(),
            )
        });
        let mut merged = MergedTraces::new(everything, Vec::new(), &Fields::All)?;
        let mut pending: Vec<Span> = Vec::new();
        while let Some(mut spans) = merged.next_trace()? {
            // A span retried into two blocks is kept once.
            spans.dedup_by(|a, b| a.trace_id == b.trace_id && a.span_id == b.span_id && a == b);
            pending.append(&mut spans);
            if pending.len() >= COMPACT_WRITE_SPANS {
                writer.write(&pending.iter().collect::<Vec<&Span>>())?;
                pending.clear();
            }
        }
        writer.write(&pending.iter().collect::<Vec<&Span>>())?;
        let merged = writer.finish()?;
        {
            let mut blocks = write(&self.blocks);
            blocks.retain(|b| !names.contains(&b.name));
            if let Some(m) = merged {
                tracing::debug!(block = %m.name, inputs = names.len(), spans = m.index.spans, "blocks compacted");
                blocks.push(Arc::new(m));
                blocks.sort_by(|a, b| a.name.cmp(&b.name));
            }
        }
        for b in &inputs {
            std::fs::remove_file(&b.path).map_err(StoreError::io("remove", &b.path))?;
        }
        Ok(true)
    }

    /// Drops blocks past the age limit, then the oldest while over the size limit.
    fn retain(&self) -> Result<usize, StoreError> {
        let _maintenance = lock(&self.maintenance);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mut doomed = Vec::new();
        {
            let mut blocks = write(&self.blocks);
            if let Some(age) = self.opts.retention_age {
                let cutoff = now.saturating_sub(age.as_nanos() as u64);
                blocks.retain(|b| {
                    let keep = b.index.max_end >= cutoff;
                    if !keep {
                        doomed.push(b.clone());
                    }
                    keep
                });
            }
            if let Some(max) = self.opts.retention_bytes {
                blocks.sort_by_key(|b| b.index.max_end);
                let mut total: u64 = blocks.iter().map(|b| b.bytes).sum();
                while total > max && !blocks.is_empty() {
                    let b = blocks.remove(0);
                    total -= b.bytes;
                    doomed.push(b);
                }
                blocks.sort_by(|a, b| a.name.cmp(&b.name));
            }
        }
        for b in &doomed {
            tracing::info!(block = %b.name, bytes = b.bytes, "block dropped by retention");
            std::fs::remove_file(&b.path).map_err(StoreError::io("remove", &b.path))?;
        }
        Ok(doomed.len())
    }

    /// Head, frozen heads, then blocks: the order that never misses a span that moves
    /// between them during the read (it may see one twice; assembly drops the copy).
    fn sources(&self) -> (Vec<Arc<Frozen>>, Vec<Arc<Block>>) {
        (read(&self.frozen).clone(), read(&self.blocks).clone())
    }
}

/// Sorted, distinct trace ids from several sorted lists.
fn trace_ids(lists: impl Iterator<Item = impl Iterator<Item = u128>>) -> Vec<u128> {
    let mut ids: Vec<u128> = lists.flatten().collect();
    ids.sort_unstable();
    ids.dedup();
    ids
}

impl TraceStore for Store {
    fn append(&self, spans: Vec<Span>) -> Result<(), StoreError> {
        let records = native::encode_all(&spans);
        self.shared.append(&records, spans)
    }

    fn trace(&self, id: TraceId) -> Result<Option<Trace>, StoreError> {
        let s = &self.shared;
        let mut spans: Vec<Span> = read(&s.head).trace(id).to_vec();
        let (frozen, blocks) = s.sources();
        for f in &frozen {
            spans.extend_from_slice(f.head.trace(id));
        }
        for b in &blocks {
            if let Some(e) = b.index.find(id.get()) {
                let rows = e.first_row as usize..(e.first_row + e.rows) as usize;
                b.read_spans(&[rows], &Fields::All, &mut spans)?;
            }
        }
        Ok((!spans.is_empty()).then(|| Trace::assemble(id, spans)))
    }

    fn search_until(
        &self,
        query: &SearchQuery,
        stop: &(dyn Fn() -> ControlFlow<()> + Sync),
    ) -> Result<Vec<TraceSummary>, StoreError> {
        let s = &self.shared;
        let mut found: HashMap<TraceId, u64> = HashMap::new();
        read(&s.head).search(query, &mut found);
        let (frozen, blocks) = s.sources();
        for f in &frozen {
            f.head.search(query, &mut found);
        }
        for b in &blocks {
            if stop().is_break() {
                return Ok(Vec::new());
            }
            let window = query.window.unwrap_or(TimeWindow::ALL);
            if !window.overlaps(b.index.min_start, b.index.max_end) {
                continue;
            }
            let candidates = b.index.candidates(query);
            for t in b.filter_tags(candidates, query)? {
                let Some(id) = TraceId::new(t.id) else {
                    continue;
                };
                let e = found.entry(id).or_insert(t.start);
                *e = (*e).min(t.start);
            }
        }
        let mut order: Vec<(u64, TraceId)> = found.into_iter().map(|(id, t)| (t, id)).collect();
        order.sort_unstable_by(|a, b| b.cmp(a));
        let limit = query.effective_limit();
        let mut out = Vec::with_capacity(limit.min(order.len()));
        let mut listed = HashSet::new();
        // The indexes narrow; the spans decide (tags and durations on one span).
        for (_, id) in order {
            if out.len() >= limit || stop().is_break() {
                break;
            }
            if let Some(trace) = self.trace(id)? {
                if trace.spans.iter().any(|sp| query.matches(sp)) {
                    // A request split in two traces is listed once, whole.
                    let request = crate::linked::joined(self, trace)?;
                    if listed.insert(request.trace_id) {
                        out.push(TraceSummary::of(&request));
                    }
                }
            }
        }
        Ok(out)
    }

    fn scan_fields(
        &self,
        window: TimeWindow,
        fields: &Fields,
        visit: &(dyn Fn(Trace) -> ControlFlow<()> + Sync),
    ) -> Result<ScanStats, StoreError> {
        let s = &self.shared;
        let (frozen, blocks) = s.sources();
        let blocks: Vec<Arc<Block>> = blocks
            .into_iter()
            .filter(|b| window.overlaps(b.index.min_start, b.index.max_end))
            .collect();
        let mut ids = trace_ids(blocks.iter().map(|b| {
            b.index
                .traces
                .iter()
                .filter(|t| window.overlaps(t.start, t.end))
                .map(|t| t.id)
        }));
        // Of the traces in memory, only those that may start in the window are read: the
        // ones whose earliest span in memory does, and those the blocks name (their start
        // may be in a block). The rest are never copied, so a scan of a short window
        // costs that window, not the whole head.
        let head_guard = read(&s.head);
        let mut memory_starts: HashMap<TraceId, u64> = HashMap::new();
        for part in std::iter::once(&*head_guard).chain(frozen.iter().map(|f| &f.head)) {
            for (id, spans) in part.iter_traces() {
                let start = spans.iter().map(|sp| sp.start).min().unwrap_or(u64::MAX);
                let e = memory_starts.entry(id).or_insert(start);
                *e = (*e).min(start);
            }
        }
        let in_memory = |id: TraceId| {
            memory_starts
                .get(&id)
                .is_some_and(|&start| window.contains(start))
                || ids.binary_search(&id.get()).is_ok()
        };
        // The head's spans are copied so the scan never holds ingest up; frozen heads no
        // longer change and are read in place (each part's spans are copied as it is
        // merged, so one copy of the in-memory spans is held at a time, not two).
        let head: Vec<Span> = head_guard
            .iter_traces()
            .filter(|(id, _)| in_memory(*id))
            .flat_map(|(_, spans)| spans.iter().cloned())
            .collect();
        drop(head_guard);
        let mut memory: Vec<&Span> = head.iter().collect();
        for f in &frozen {
            memory.extend(
                f.head
                    .iter_traces()
                    .filter(|(id, _)| in_memory(*id))
                    .flat_map(|(_, spans)| spans),
            );
        }
        memory.sort_by(|a, b| row_order(a, b));
        ids.extend(memory.iter().map(|sp| sp.trace_id.get()));
        ids.sort_unstable();
        ids.dedup();
        // Each worker takes a part of the trace ids and reads every block's rows for them
        // front to back; a few parts per thread even out their speeds.
        let threads = s.opts.scan_threads.max(1);
        let parts: Vec<&[u128]> = ids.chunks(ids.len().div_ceil(threads * 4).max(1)).collect();
        let threads = threads.min(parts.len().max(1));
        let next = AtomicUsize::new(0);
        let traces = AtomicU64::new(0);
        let spans_seen = AtomicU64::new(0);
        let failure: Mutex<Option<StoreError>> = Mutex::new(None);
        let stopped = AtomicBool::new(false);
        let scan_part = |part: &[u128]| -> Result<(), StoreError> {
            let (lo, hi) = (part[0], part[part.len() - 1]);
            let a = memory.partition_point(|sp| sp.trace_id.get() < lo);
            let z = memory.partition_point(|sp| sp.trace_id.get() <= hi);
            let sources = blocks.iter().map(|b| {
                // Only the rows of traces in this part (all of them without a window).
                let rows = merge_ranges(
                    b.index
                        .range(lo, hi)
                        .iter()
                        .filter(|e| part.binary_search(&e.id).is_ok())
                        .map(|e| e.first_row as usize..(e.first_row + e.rows) as usize),
                );
                (b.as_ref(), rows)
            });
            let part_spans = memory[a..z].iter().map(|sp| (*sp).clone()).collect();
            let mut merged = MergedTraces::new(sources, part_spans, fields)?;
            while let Some(group) = merged.next_trace()? {
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                let id = group[0].trace_id;
                let start = group.iter().map(|sp| sp.start).min().unwrap_or(0);
                if !window.contains(start) {
                    continue;
                }
                let trace = Trace::assemble(id, group);
                traces.fetch_add(1, Ordering::Relaxed);
                spans_seen.fetch_add(trace.spans.len() as u64, Ordering::Relaxed);
                if visit(trace).is_break() {
                    stopped.store(true, Ordering::Relaxed);
                }
            }
            Ok(())
        };
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(part) = parts.get(i) else { break };
                    if lock(&failure).is_some() || stopped.load(Ordering::Relaxed) {
                        break;
                    }
                    if let Err(e) = scan_part(part) {
                        *lock(&failure) = Some(e);
                        break;
                    }
                });
            }
        });
        if let Some(e) = lock(&failure).take() {
            return Err(e);
        }
        Ok(ScanStats {
            traces: traces.into_inner(),
            spans: spans_seen.into_inner(),
        })
    }

    fn append_records(&self, records: &[u8], spans: Vec<Span>) -> Result<(), StoreError> {
        Store::append_records(self, records, spans)
    }

    fn stats(&self) -> StoreStats {
        Store::stats(self)
    }

    fn services(&self) -> Result<Vec<String>, StoreError> {
        Ok(read(&self.shared.catalog).services())
    }

    fn operations(&self, service: &str) -> Result<Vec<String>, StoreError> {
        Ok(read(&self.shared.catalog).operations(service))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::FsyncPolicy;

    #[test]
    fn fsync_policies_read_as_the_flag_writes_them() {
        assert_eq!("always".parse(), Ok(FsyncPolicy::Always));
        assert_eq!("never".parse(), Ok(FsyncPolicy::Never));
        assert_eq!(
            "100ms".parse(),
            Ok(FsyncPolicy::Interval(Duration::from_millis(100)))
        );
        for policy in ["always", "never", "100ms", "1s 500ms"] {
            let parsed: FsyncPolicy = policy.parse().unwrap();
            assert_eq!(parsed.to_string(), policy);
        }
        let e = "sometimes".parse::<FsyncPolicy>().unwrap_err();
        assert!(
            e.contains("\"sometimes\"") && e.contains("always, never"),
            "{e}"
        );
    }
}
