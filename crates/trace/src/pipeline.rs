//! The path from a closed span to the sinks: per-thread lanes (see [`crate::lane`])
//! that never block the application and count what they drop, and one background
//! thread that decodes them into batches for the sinks.
//!
//! Each thread that finishes sampled spans owns a lane of `4 × Config::queue_spans`
//! entries of 56 bytes, at most 32 768 (about 8 000 spans of a few attributes; smaller
//! lanes let a tight loop of spans outrun a descheduled writer). A full lane drops the span
//! and counts it, in per-lane counters only their thread writes. The `causeway-writer`
//! thread wakes when a lane is a quarter full, on a flush, or every `flush_interval`
//! (100 ms); it decodes the entries into model `Span`s (service, host and pid added, times
//! converted by `crate::clock`) in batches of up to 1 024 and writes them to every sink. A
//! flush takes the command first and then drains every lane, so what a thread finished
//! before it asked is written. The `Guard` flushes on drop within `shutdown_timeout` (5 s)
//! and reports the counters.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use causeway_model::Span;
use thread_local::ThreadLocal;

use crate::lane::{self, Counters, Entry, Lane, Outlet};
use crate::record::Process;

/// Where finished spans go.
pub trait SpanSink: Send {
    /// Takes a batch of spans.
    fn write(&mut self, spans: &[Span]);
    /// Hands on anything buffered, without waiting.
    fn flush(&mut self);
    /// Waits (until `deadline` at most) for what was handed on to be delivered.
    fn sync(&mut self, deadline: Instant) {
        let _ = deadline;
    }
}

/// A sink a [`crate::Config`] carries: shared by the configuration's clones, used by the
/// one writer thread of the pipeline it starts (the lock is never contended).
#[derive(Clone)]
pub(crate) struct SharedSink(Arc<Mutex<Box<dyn SpanSink>>>);

impl SharedSink {
    pub(crate) fn new(sink: Box<dyn SpanSink>) -> SharedSink {
        SharedSink(Arc::new(Mutex::new(sink)))
    }

    fn with<R>(&self, f: impl FnOnce(&mut dyn SpanSink) -> R) -> R {
        f(&mut **self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

impl std::fmt::Debug for SharedSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpanSink")
    }
}

impl SpanSink for SharedSink {
    fn write(&mut self, spans: &[Span]) {
        self.with(|s| s.write(spans));
    }
    fn flush(&mut self) {
        self.with(|s| s.flush());
    }
    fn sync(&mut self, deadline: Instant) {
        self.with(|s| s.sync(deadline));
    }
}

/// A snapshot of [`Stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatsSnapshot {
    /// Sampled spans that finished.
    pub recorded: u64,
    /// Spans dropped because the writer queue was full.
    pub dropped: u64,
    /// Spans handed to the sinks.
    pub written: u64,
}

enum Command {
    Flush(SyncSender<()>, Instant),
    Stop(SyncSender<()>, Instant),
}

struct Shared {
    lanes: ThreadLocal<RefCell<Lane>>,
    /// Lanes made since the writer last looked, its ends to take.
    new_outlets: Mutex<Vec<Outlet>>,
    counters: Mutex<Vec<Arc<Counters>>>,
    written: AtomicU64,
    writer: OnceLock<Thread>,
    lane_entries: usize,
}

/// Entries per lane at most: about 8 000 spans of a few attributes (1.75 MiB of address
/// space, resident as far as the thread has written). Smaller, a tight loop of spans
/// outran the writer whenever it was descheduled (2% dropped in the overhead bench at
/// 8192 entries, 0.4% at 32768).
const LANE_ENTRIES_MAX: usize = 32768;
/// Spans handed to the sinks at once at most.
const BATCH: usize = 1024;

/// The running pipeline; cheap to share.
pub(crate) struct Pipeline {
    shared: Arc<Shared>,
    tx: SyncSender<Command>,
    worker: Mutex<Option<JoinHandle<()>>>,
}

impl Pipeline {
    pub(crate) fn start(
        sinks: Vec<Box<dyn SpanSink>>,
        process: Process,
        queue_spans: usize,
        flush_interval: Duration,
    ) -> std::io::Result<Arc<Pipeline>> {
        let (tx, rx) = mpsc::sync_channel(16);
        let shared = Arc::new(Shared {
            lanes: ThreadLocal::new(),
            new_outlets: Mutex::new(Vec::new()),
            counters: Mutex::new(Vec::new()),
            written: AtomicU64::new(0),
            writer: OnceLock::new(),
            // A span of a few attributes takes four entries.
            lane_entries: queue_spans.saturating_mul(4).clamp(64, LANE_ENTRIES_MAX),
        });
        let worker_shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name("causeway-writer".into())
            .spawn(move || run(worker_shared, rx, sinks, process, flush_interval))?;
        let _ = shared.writer.set(handle.thread().clone());
        Ok(Arc::new(Pipeline {
            shared,
            tx,
            worker: Mutex::new(Some(handle)),
        }))
    }

    /// Hands the `n` entries of a finished span to the writer through this thread's
    /// lane. Never blocks; when the lane is full the span is dropped and counted.
    pub(crate) fn submit(&self, n: usize, entries: &mut impl Iterator<Item = Entry>) {
        let lane = self.shared.lanes.get_or(|| {
            let (lane, outlet) = lane::lane(self.shared.lane_entries);
            lock(&self.shared.counters).push(lane.counters.clone());
            lock(&self.shared.new_outlets).push(outlet);
            RefCell::new(lane)
        });
        // A `Debug` impl run while this thread's lane is borrowed cannot finish a span
        // into it; such a span is lost rather than the process.
        let Ok(mut lane) = lane.try_borrow_mut() else {
            return;
        };
        if lane.send(n, entries) {
            if let Some(writer) = self.shared.writer.get() {
                writer.unpark();
            }
        }
    }

    pub(crate) fn stats(&self) -> StatsSnapshot {
        let mut s = StatsSnapshot {
            recorded: 0,
            dropped: 0,
            written: self.shared.written.load(Ordering::Relaxed),
        };
        for c in lock(&self.shared.counters).iter() {
            s.recorded += c.recorded.load(Ordering::Relaxed);
            s.dropped += c.dropped.load(Ordering::Relaxed);
        }
        s
    }

    fn command(
        &self,
        make: impl Fn(SyncSender<()>, Instant) -> Command,
        timeout: Duration,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        let mut cmd = make(reply_tx, deadline);
        loop {
            match self.tx.try_send(cmd) {
                Ok(()) => {
                    if let Some(writer) = self.shared.writer.get() {
                        writer.unpark();
                    }
                    break;
                }
                Err(TrySendError::Full(c)) => {
                    if Instant::now() >= deadline {
                        return false;
                    }
                    cmd = c;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(TrySendError::Disconnected(_)) => return false,
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        reply_rx.recv_timeout(left).is_ok()
    }

    /// Writes out every span finished so far, on every thread; waits at most `timeout`.
    pub(crate) fn flush(&self, timeout: Duration) -> bool {
        self.command(Command::Flush, timeout)
    }

    /// Flushes and stops the writer; waits at most `timeout`. Later spans are dropped.
    pub(crate) fn shutdown(&self, timeout: Duration) -> bool {
        let done = self.command(Command::Stop, timeout);
        if done {
            if let Some(h) = self.worker.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = h.join();
            }
        }
        done
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The writer's loop: drains the lanes whenever a thread wakes it (a lane filling up, a
/// command) or `flush_interval` has passed, and hands the spans to the sinks.
fn run(
    shared: Arc<Shared>,
    rx: Receiver<Command>,
    mut sinks: Vec<Box<dyn SpanSink>>,
    process: Process,
    flush_interval: Duration,
) {
    let mut outlets: Vec<Outlet> = Vec::new();
    let mut batch: Vec<Span> = Vec::with_capacity(BATCH);
    let write = |sinks: &mut Vec<Box<dyn SpanSink>>, batch: &mut Vec<Span>| {
        if batch.is_empty() {
            return;
        }
        for s in sinks.iter_mut() {
            s.write(batch);
        }
        let written = shared.written.load(Ordering::Relaxed) + batch.len() as u64;
        shared.written.store(written, Ordering::Relaxed);
        batch.clear();
    };
    // Decodes what every lane holds, in batches of at most BATCH spans per lane visit.
    let mut drain = |sinks: &mut Vec<Box<dyn SpanSink>>, outlets: &mut Vec<Outlet>| {
        outlets.append(&mut lock(&shared.new_outlets));
        loop {
            let mut any = false;
            for outlet in outlets.iter_mut() {
                if outlet.drain(&process, &mut batch, BATCH) > 0 {
                    any = true;
                }
                if batch.len() >= BATCH {
                    write(sinks, &mut batch);
                }
            }
            if !any {
                break;
            }
        }
        write(sinks, &mut batch);
    };
    let mut last_flush = Instant::now();
    loop {
        std::thread::park_timeout(flush_interval);
        // Commands are taken before the lanes are drained: whatever a thread finished
        // before it asked for a flush is in its lane by then, and is written first.
        let mut commands = Vec::new();
        let mut disconnected = false;
        loop {
            match rx.try_recv() {
                Ok(c) => commands.push(c),
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => {
                    disconnected = true;
                    break;
                }
            }
        }
        drain(&mut sinks, &mut outlets);
        let mut stop = disconnected;
        for command in commands {
            let (Command::Flush(reply, deadline) | Command::Stop(reply, deadline)) = &command;
            for s in sinks.iter_mut() {
                s.flush();
                s.sync(*deadline);
            }
            last_flush = Instant::now();
            let _ = reply.send(());
            stop |= matches!(command, Command::Stop(..));
        }
        if stop {
            for s in sinks.iter_mut() {
                s.flush();
            }
            return;
        }
        if last_flush.elapsed() >= flush_interval {
            for s in sinks.iter_mut() {
                s.flush();
            }
            last_flush = Instant::now();
        }
    }
}
