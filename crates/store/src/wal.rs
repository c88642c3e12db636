//! The write-ahead log: numbered segment files of native span records. A span is
//! acknowledged once the bytes holding it are synced; segments are deleted once a block
//! covers them (the embedded store) or once shipped (the ClickHouse store's spool).
//!
//! An append writes native records to the open segment and returns a position (bytes
//! written since the log was opened). Under `--fsync always` the appender waits until that
//! position is synced, and concurrent appenders share one `fdatasync` (group commit, `sync_to`);
//! `--fsync <interval>` syncs from the store's background thread; `never` does not sync. A
//! new log never appends to an old segment, whose tail may be torn.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::StoreError;

/// The open segment and the global byte position of everything written.
pub struct Wal {
    dir: PathBuf,
    seq: u64,
    file: Arc<File>,
    /// Bytes written over the log's life (all segments); a position in this count is what
    /// an appender waits to see synced.
    written: u64,
}

/// A segment left by an earlier run.
pub struct Segment {
    /// Its number: segments are written in this order.
    pub seq: u64,
    /// Its file.
    pub path: PathBuf,
}

/// The file of segment `seq`.
pub fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}.wal"))
}

/// The segments in `dir`, oldest first.
pub fn segments(dir: &Path) -> Result<Vec<Segment>, StoreError> {
    let mut out = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(StoreError::io("read WAL directory", dir))?;
    for entry in entries {
        let entry = entry.map_err(StoreError::io("read WAL directory", dir))?;
        let name = entry.file_name();
        let Some(seq) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".wal"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        out.push(Segment {
            seq,
            path: entry.path(),
        });
    }
    out.sort_by_key(|s| s.seq);
    Ok(out)
}

impl Wal {
    /// Starts a new segment after `last_seq` (never appends to an old one, whose tail may be
    /// torn).
    pub fn create(dir: &Path, last_seq: u64) -> Result<Wal, StoreError> {
        let seq = last_seq + 1;
        let file = open_segment(dir, seq)?;
        Ok(Wal {
            dir: dir.to_path_buf(),
            seq,
            file: Arc::new(file),
            written: 0,
        })
    }

    /// Appends records; returns the position the caller must see synced.
    pub fn append(&mut self, records: &[u8]) -> Result<u64, StoreError> {
        (&*self.file).write_all(records).map_err(StoreError::io(
            "write WAL segment",
            segment_path(&self.dir, self.seq),
        ))?;
        self.written += records.len() as u64;
        Ok(self.written)
    }

    /// The open segment and the position up to which syncing it makes everything durable
    /// (older segments were synced when they were sealed).
    pub fn sync_target(&self) -> (Arc<File>, u64, PathBuf) {
        (
            self.file.clone(),
            self.written,
            segment_path(&self.dir, self.seq),
        )
    }

    /// Seals the open segment (synced when `sync`) and opens the next; returns the sealed
    /// segment's number.
    pub fn rotate(&mut self, sync: bool) -> Result<u64, StoreError> {
        if sync {
            self.file.sync_data().map_err(StoreError::io(
                "sync WAL segment",
                segment_path(&self.dir, self.seq),
            ))?;
        }
        let sealed = self.seq;
        self.file = Arc::new(open_segment(&self.dir, sealed + 1)?);
        self.seq = sealed + 1;
        Ok(sealed)
    }

    /// Bytes written over the log's life.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The open segment's number.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

fn open_segment(dir: &Path, seq: u64) -> Result<File, StoreError> {
    let path = segment_path(dir, seq);
    let file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .map_err(StoreError::io("create WAL segment", &path))?;
    sync_dir(dir)?;
    Ok(file)
}

/// Makes a directory's entries (a new or renamed file) durable.
pub fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StoreError::io("sync directory", dir))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Group commit: the first waiter syncs everything written so far; the others find
/// their position already covered. `synced` holds the position synced so far; it is
/// taken before `wal`, so a caller must not hold `wal` when calling.
pub fn sync_to(wal: &Mutex<Wal>, synced: &Mutex<u64>, pos: u64) -> Result<(), StoreError> {
    let mut synced = lock(synced);
    if *synced >= pos {
        return Ok(());
    }
    let (file, target, path) = lock(wal).sync_target();
    file.sync_data()
        .map_err(StoreError::io("sync WAL segment", path))?;
    *synced = (*synced).max(target);
    Ok(())
}

/// Wakes a background thread early: appenders call [`Wake::notify`], the thread sleeps
/// in [`Wake::wait`] between rounds.
#[derive(Default)]
pub struct Wake {
    woken: Mutex<bool>,
    cond: Condvar,
}

impl Wake {
    /// Ends the current or next wait.
    pub fn notify(&self) {
        *lock(&self.woken) = true;
        self.cond.notify_one();
    }

    /// Waits until notified (since the last wait) or `timeout` passes.
    pub fn wait(&self, timeout: Duration) {
        let mut woken = lock(&self.woken);
        if !*woken {
            woken = self
                .cond
                .wait_timeout(woken, timeout)
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
        *woken = false;
    }
}
