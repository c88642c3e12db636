//! The serve process's side of the ClickHouse store: spans are acknowledged once durable
//! in a local WAL, and a shipper thread sends them on to ClickHouse in large batches,
//! retrying with backoff, and records how far it got. A batch shipped but not recorded
//! (a crash in between) is shipped again after restart; the table's key and the reads'
//! dropping of identical spans make that harmless. Reads go to ClickHouse, so a span is
//! visible once shipped.
//!
//! `ShippingStore` is what `serve --store` runs. An append goes to the embedded store's WAL
//! (`causeway_store::wal`, in `<data>/clickhouse-spool/`, `LOCK`ed) and is acknowledged
//! under the server's fsync policy (group commit); segments are sealed at 64 MiB. The
//! shipper reads from its checkpoint (`shipped`: a segment and an offset, written to a
//! temporary file, synced and renamed) up to 16 MiB of whole records, inserts them, then
//! advances the checkpoint and deletes the segments wholly before it; a torn tail in a
//! sealed segment is skipped. It wakes every 200 ms or when a batch's worth is waiting; a
//! failed insert is retried with backoff from 100 ms to 5 s. Past `--spool-max-bytes`
//! unshipped, appends are refused (`StoreError::Busy`, a 503 with `Retry-After`). The same
//! thread applies retention every minute (`crate::store`'s `drop_days_before`).

use std::fs::File;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use causeway_model::codec::native;
use causeway_model::{Span, Trace, TraceId};
use causeway_store::wal::{self, Wake, Wal};
use causeway_store::{
    Fields, FsyncPolicy, ScanStats, SearchQuery, StoreError, StoreStats, TimeWindow, TraceStore,
    TraceSummary,
};

use crate::store::ClickHouseStore;

/// How the spool behaves.
#[derive(Debug, Clone)]
pub struct SpoolOptions {
    /// When appended spans are synced to the local disk.
    pub fsync: FsyncPolicy,
    /// Refuse appends ([`StoreError::Busy`], a 503 to the sender) while this many bytes
    /// wait to be shipped: ClickHouse has been unreachable or slow for a while.
    pub max_unshipped_bytes: u64,
    /// Most bytes of records shipped in one insert.
    pub batch_bytes: usize,
    /// A WAL segment is sealed and a new one started past this size.
    pub segment_bytes: u64,
    /// Longest a span waits in the WAL before the shipper looks (it is also woken when a
    /// batch's worth has gathered).
    pub ship_interval: Duration,
    /// Drop the days of spans older than this from ClickHouse (checked every
    /// [`RETENTION_EVERY`]); none keeps everything.
    pub retention: Option<Duration>,
}

/// How often a spool with a retention drops old days.
pub const RETENTION_EVERY: Duration = Duration::from_secs(60);

impl Default for SpoolOptions {
    fn default() -> Self {
        SpoolOptions {
            fsync: FsyncPolicy::Always,
            max_unshipped_bytes: 1 << 30,
            batch_bytes: 16 << 20,
            segment_bytes: 64 << 20,
            ship_interval: Duration::from_millis(200),
            retention: None,
        }
    }
}

/// Where the shipper is: everything before `offset` in segment `seq` is in ClickHouse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position {
    seq: u64,
    offset: u64,
}

struct Shared {
    store: ClickHouseStore,
    dir: PathBuf,
    opts: SpoolOptions,
    wal: Mutex<Wal>,
    /// Bytes of the open segment when it was opened (`Wal::written` then).
    segment_start: AtomicU64,
    synced: Mutex<u64>,
    unshipped: AtomicU64,
    appended: AtomicU64,
    appended_roots: AtomicU64,
    busy: AtomicU64,
    stop: AtomicBool,
    wake: Wake,
    _lock: File,
}

/// The ClickHouse store behind a local WAL: what `causeway serve --store clickhouse://`
/// runs. Dropping it stops the shipper; what it had not shipped is shipped after the
/// next open.
pub struct ShippingStore {
    shared: Arc<Shared>,
    shipper: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

const CHECKPOINT: &str = "shipped";

impl ShippingStore {
    /// Opens the spool in `dir` (creating it), and starts shipping to `store` whatever
    /// an earlier run left unshipped.
    pub fn open(
        dir: impl AsRef<Path>,
        store: ClickHouseStore,
        opts: SpoolOptions,
    ) -> Result<ShippingStore, StoreError> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(StoreError::io("create spool directory", &dir))?;
        let lock_path = dir.join("LOCK");
        let lock_file =
            File::create(&lock_path).map_err(StoreError::io("create lock", &lock_path))?;
        if lock_file.try_lock().is_err() {
            return Err(StoreError::Locked(dir));
        }
        let from = read_checkpoint(&dir)?;
        let segments = wal::segments(&dir)?;
        let mut unshipped = 0;
        for seg in &segments {
            let len = std::fs::metadata(&seg.path)
                .map_err(StoreError::io("read spool segment", &seg.path))?
                .len();
            match from {
                Some(p) if seg.seq < p.seq => {}
                Some(p) if seg.seq == p.seq => unshipped += len.saturating_sub(p.offset),
                _ => unshipped += len,
            }
        }
        let last = segments.last().map_or(0, |s| s.seq);
        let wal = Wal::create(&dir, last)?;
        let shared = Arc::new(Shared {
            store,
            dir,
            opts,
            wal: Mutex::new(wal),
            segment_start: AtomicU64::new(0),
            synced: Mutex::new(0),
            unshipped: AtomicU64::new(unshipped),
            appended: AtomicU64::new(0),
            appended_roots: AtomicU64::new(0),
            busy: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            wake: Wake::default(),
            _lock: lock_file,
        });
        let start = from.unwrap_or(Position {
            seq: segments.first().map_or(last + 1, |s| s.seq),
            offset: 0,
        });
        let worker = shared.clone();
        let shipper = std::thread::Builder::new()
            .name("causeway-ch-shipper".into())
            .spawn(move || worker.ship_loop(start))
            .map_err(StoreError::io("start the shipper thread", "(thread)"))?;
        Ok(ShippingStore {
            shared,
            shipper: Some(shipper),
        })
    }

    /// The ClickHouse store the spans go to.
    pub fn clickhouse(&self) -> &ClickHouseStore {
        &self.shared.store
    }

    /// Bytes appended and not yet in ClickHouse.
    pub fn unshipped_bytes(&self) -> u64 {
        self.shared.unshipped.load(Ordering::Relaxed)
    }

    /// Waits until everything appended so far is in ClickHouse, or `timeout` passes;
    /// true when it all is.
    pub fn wait_shipped(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.unshipped_bytes() > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            self.shared.wake_shipper();
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    /// Appends spans whose native records the caller already holds.
    pub fn append_records(&self, records: &[u8], spans: Vec<Span>) -> Result<(), StoreError> {
        self.shared.append(records, &spans)
    }
}

impl Drop for ShippingStore {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake_shipper();
        if let Some(t) = self.shipper.take() {
            let _ = t.join();
        }
    }
}

fn read_checkpoint(dir: &Path) -> Result<Option<Position>, StoreError> {
    let path = dir.join(CHECKPOINT);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("read shipping checkpoint", &path)(e)),
    };
    let mut words = text.split_whitespace().map(str::parse::<u64>);
    match (words.next(), words.next()) {
        (Some(Ok(seq)), Some(Ok(offset))) => Ok(Some(Position { seq, offset })),
        _ => Err(StoreError::io("read shipping checkpoint", &path)(
            std::io::Error::other(format!("{text:?} is not \"SEGMENT OFFSET\"")),
        )),
    }
}

fn write_checkpoint(dir: &Path, p: Position) -> Result<(), StoreError> {
    let path = dir.join(CHECKPOINT);
    let tmp = dir.join("shipped.tmp");
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        std::io::Write::write_all(&mut f, format!("{} {}\n", p.seq, p.offset).as_bytes())?;
        f.sync_data()?;
        std::fs::rename(&tmp, &path)
    };
    write().map_err(StoreError::io("write shipping checkpoint", &path))?;
    wal::sync_dir(dir)
}

impl Shared {
    fn append(&self, records: &[u8], spans: &[Span]) -> Result<(), StoreError> {
        if spans.is_empty() {
            return Ok(());
        }
        if self.unshipped.load(Ordering::Relaxed) >= self.opts.max_unshipped_bytes {
            self.busy.fetch_add(1, Ordering::Relaxed);
            return Err(StoreError::Busy);
        }
        let (pos, sealed) = {
            let mut wal = lock(&self.wal);
            let pos = wal.append(records)?;
            let full = pos - self.segment_start.load(Ordering::Relaxed) >= self.opts.segment_bytes;
            if full {
                wal.rotate(self.opts.fsync != FsyncPolicy::Never)?;
                self.segment_start.store(pos, Ordering::Relaxed);
            }
            (pos, full)
        };
        if sealed {
            // Sealing synced everything up to here (taken after the WAL's lock is let go:
            // `sync_to` takes the two the other way round).
            let mut synced = lock(&self.synced);
            *synced = (*synced).max(pos);
        }
        let before = self
            .unshipped
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        self.appended
            .fetch_add(spans.len() as u64, Ordering::Relaxed);
        let roots = causeway_model::parent_links::roots_added(spans);
        // A parent link makes a root stored before no root: the count goes down.
        let _ = self
            .appended_roots
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
                Some(r.saturating_add_signed(roots))
            });
        if self.opts.fsync == FsyncPolicy::Always {
            self.sync_to(pos)?;
        }
        if before + records.len() as u64 >= self.opts.batch_bytes as u64 {
            self.wake_shipper();
        }
        Ok(())
    }

    fn sync_to(&self, pos: u64) -> Result<(), StoreError> {
        wal::sync_to(&self.wal, &self.synced, pos)
    }

    fn wake_shipper(&self) {
        self.wake.notify();
    }

    fn sleep(&self, wait: Duration) {
        self.wake.wait(wait);
    }

    fn ship_loop(&self, mut at: Position) {
        let mut backoff = Duration::ZERO;
        let mut last_sync = Instant::now();
        let mut last_retention: Option<Instant> = None;
        while !self.stop.load(Ordering::Acquire) {
            if let Some(keep) = self.opts.retention {
                if last_retention.is_none_or(|t| t.elapsed() >= RETENTION_EVERY) {
                    last_retention = Some(Instant::now());
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_nanos() as u64);
                    let cutoff = now.saturating_sub(keep.as_nanos() as u64);
                    match self.store.drop_days_before(cutoff) {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(partitions = n, "dropped days past the retention"),
                        Err(e) => {
                            tracing::warn!(error = %e, "dropping old days failed; will retry")
                        }
                    }
                }
            }
            if let FsyncPolicy::Interval(every) = self.opts.fsync {
                if last_sync.elapsed() >= every {
                    let pos = lock(&self.wal).written();
                    if let Err(e) = self.sync_to(pos) {
                        tracing::error!(error = %e, "spool sync failed");
                    }
                    last_sync = Instant::now();
                }
            }
            match self.ship_some(at) {
                Ok(Some(next)) => {
                    at = next;
                    backoff = Duration::ZERO;
                    continue;
                }
                Ok(None) => self.sleep(self.opts.ship_interval),
                Err(e) => {
                    backoff =
                        (backoff * 2).clamp(Duration::from_millis(100), Duration::from_secs(5));
                    tracing::warn!(error = %e, retry_in = ?backoff, "shipping spans to ClickHouse failed");
                    self.sleep(backoff);
                }
            }
        }
    }

    /// Ships the next batch after `at`; the new position, or `None` when there was
    /// nothing to ship.
    fn ship_some(&self, at: Position) -> Result<Option<Position>, StoreError> {
        let open = lock(&self.wal).seq();
        let path = wal::segment_path(&self.dir, at.seq);
        let next_segment = Position {
            seq: at.seq + 1,
            offset: 0,
        };
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            // Gone (shipped before a crash) or never written: on to the next.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && at.seq < open => {
                return self.advance(at, next_segment, 0).map(Some);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StoreError::io("read spool segment", &path)(e)),
        };
        let start = (at.offset as usize).min(bytes.len());
        let rest = &bytes[start..];
        let mut decoded = native::decode_stream(&rest[..rest.len().min(self.opts.batch_bytes)]);
        if decoded.complete == 0 && rest.len() > self.opts.batch_bytes {
            // A record longer than a batch: shipped alone.
            decoded = native::decode_stream(rest);
        }
        for p in &decoded.problems {
            if !matches!(p, native::Problem::TornTail { .. }) {
                tracing::warn!(segment = %path.display(), problem = %p, "damaged spool record skipped");
            }
        }
        if decoded.complete == 0 {
            if at.seq < open {
                // A sealed segment shipped to its end, or a torn tail a crash left.
                return self.advance(at, next_segment, rest.len() as u64).map(Some);
            }
            return Ok(None);
        }
        self.store.append(decoded.spans)?;
        let to = Position {
            seq: at.seq,
            offset: (start + decoded.complete) as u64,
        };
        self.advance(at, to, decoded.complete as u64).map(Some)
    }

    /// Records `to` as shipped, drops the segments wholly before it, and counts `bytes`
    /// as shipped.
    fn advance(&self, from: Position, to: Position, bytes: u64) -> Result<Position, StoreError> {
        write_checkpoint(&self.dir, to)?;
        for seq in from.seq..to.seq {
            let path = wal::segment_path(&self.dir, seq);
            match std::fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove shipped spool segment", &path)(e)),
            }
        }
        self.unshipped.fetch_sub(
            bytes.min(self.unshipped.load(Ordering::Relaxed)),
            Ordering::Relaxed,
        );
        Ok(to)
    }
}

impl TraceStore for ShippingStore {
    fn append(&self, spans: Vec<Span>) -> Result<(), StoreError> {
        let records = native::encode_all(&spans);
        self.shared.append(&records, &spans)
    }

    fn append_records(&self, records: &[u8], spans: Vec<Span>) -> Result<(), StoreError> {
        self.shared.append(records, &spans)
    }

    fn trace(&self, id: TraceId) -> Result<Option<Trace>, StoreError> {
        self.shared.store.trace(id)
    }

    fn search_until(
        &self,
        query: &SearchQuery,
        stop: &(dyn Fn() -> ControlFlow<()> + Sync),
    ) -> Result<Vec<TraceSummary>, StoreError> {
        self.shared.store.search_until(query, stop)
    }

    fn scan_fields(
        &self,
        window: TimeWindow,
        fields: &Fields,
        visit: &(dyn Fn(Trace) -> ControlFlow<()> + Sync),
    ) -> Result<ScanStats, StoreError> {
        self.shared.store.scan_fields(window, fields, visit)
    }

    fn services(&self) -> Result<Vec<String>, StoreError> {
        self.shared.store.services()
    }

    fn operations(&self, service: &str) -> Result<Vec<String>, StoreError> {
        self.shared.store.operations(service)
    }

    fn stats(&self) -> StoreStats {
        let s = &self.shared;
        StoreStats {
            appended_spans: s.appended.load(Ordering::Relaxed),
            appended_roots: s.appended_roots.load(Ordering::Relaxed),
            busy_rejections: s.busy.load(Ordering::Relaxed),
            ..StoreStats::default()
        }
    }
}
