//! The path from a closed span to the sinks: a per-thread buffer (an uncontended lock on
//! the application's thread), a bounded queue of batches that never blocks the
//! application and counts what it drops, and one background thread that coalesces
//! batches into the sinks.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use causeway_model::Span;
use thread_local::ThreadLocal;

use crate::record::{Collected, FinishedSpan, Process};

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

/// Counters of the pipeline, for the application's own metrics.
#[derive(Debug, Default)]
pub struct Stats {
    recorded: AtomicU64,
    dropped: AtomicU64,
    written: AtomicU64,
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

impl Stats {
    /// Reads the counters.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            recorded: self.recorded.load(Ordering::Relaxed),
            dropped: self.dropped.load(Ordering::Relaxed),
            written: self.written.load(Ordering::Relaxed),
        }
    }
}

enum Command {
    Spans(Vec<FinishedSpan>),
    Flush(SyncSender<()>, Instant),
    Stop(SyncSender<()>, Instant),
}

struct Shared {
    buffers: ThreadLocal<Mutex<Vec<FinishedSpan>>>,
    stats: Stats,
    // Emptied span data the writer hands back, so that a sampled span allocates nothing
    // on the application's thread and nothing allocated there is freed on the writer's
    // (cross-thread frees are what made the default allocator slow here).
    // The boxes themselves are what is reused (a span's data moves as one pointer from
    // the application's thread to the writer and back), so a Vec of boxes it is.
    #[allow(clippy::vec_box)]
    spare: Mutex<Vec<Box<Collected>>>,
    #[allow(clippy::vec_box)]
    local_spare: ThreadLocal<std::cell::RefCell<Vec<Box<Collected>>>>,
}

const SPARE_MAX: usize = 16 * 1024;
const SPARE_GRAB: usize = 64;

/// The running pipeline; cheap to share.
pub(crate) struct Pipeline {
    shared: Arc<Shared>,
    tx: SyncSender<Command>,
    batch: usize,
    worker: Mutex<Option<JoinHandle<()>>>,
}

const BATCH: usize = 256;

impl Pipeline {
    pub(crate) fn start(
        sinks: Vec<Box<dyn SpanSink>>,
        process: Process,
        queue_spans: usize,
        flush_interval: Duration,
    ) -> std::io::Result<Arc<Pipeline>> {
        let batch = BATCH.min(queue_spans).max(1);
        let (tx, rx) = mpsc::sync_channel((queue_spans / batch).max(1));
        let shared = Arc::new(Shared {
            buffers: ThreadLocal::new(),
            stats: Stats::default(),
            spare: Mutex::new(Vec::new()),
            local_spare: ThreadLocal::new(),
        });
        let worker_shared = shared.clone();
        let handle = std::thread::Builder::new()
            .name("causeway-writer".into())
            .spawn(move || run(worker_shared, rx, sinks, process, flush_interval))?;
        Ok(Arc::new(Pipeline {
            shared,
            tx,
            batch,
            worker: Mutex::new(Some(handle)),
        }))
    }

    /// Hands a finished span to the writer. Never blocks on I/O; when the queue is full
    /// the batch is dropped and counted.
    pub(crate) fn submit(&self, span: FinishedSpan) {
        self.shared.stats.recorded.fetch_add(1, Ordering::Relaxed);
        let buf = self
            .shared
            .buffers
            .get_or(|| Mutex::new(Vec::with_capacity(self.batch)));
        let full = {
            let mut b = buf.lock().unwrap_or_else(|e| e.into_inner());
            b.push(span);
            if b.len() < self.batch {
                return;
            }
            std::mem::replace(&mut *b, Vec::with_capacity(self.batch))
        };
        if let Err(
            TrySendError::Full(Command::Spans(v)) | TrySendError::Disconnected(Command::Spans(v)),
        ) = self.tx.try_send(Command::Spans(full))
        {
            self.shared
                .stats
                .dropped
                .fetch_add(v.len() as u64, Ordering::Relaxed);
        }
    }

    /// An emptied data box to reuse, if the writer has returned some.
    pub(crate) fn reuse(&self) -> Option<Box<Collected>> {
        let local = self.shared.local_spare.get_or(Default::default);
        let mut local = local.borrow_mut();
        if local.is_empty() {
            let mut spare = self.shared.spare.lock().unwrap_or_else(|e| e.into_inner());
            let n = spare.len().min(SPARE_GRAB);
            let at = spare.len() - n;
            local.extend(spare.drain(at..));
        }
        local.pop()
    }

    pub(crate) fn stats(&self) -> StatsSnapshot {
        self.shared.stats.snapshot()
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
                Ok(()) => break,
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

fn run(
    shared: Arc<Shared>,
    rx: Receiver<Command>,
    mut sinks: Vec<Box<dyn SpanSink>>,
    process: Process,
    flush_interval: Duration,
) {
    // Turning recorded spans into model spans happens here, off the application's threads.
    let write = |sinks: &mut Vec<Box<dyn SpanSink>>, finished: Vec<FinishedSpan>| {
        if finished.is_empty() {
            return;
        }
        let mut returned = Vec::with_capacity(finished.len());
        let spans: Vec<Span> = finished
            .into_iter()
            .map(|f| {
                let (span, empty) = f.into_span(&process);
                if empty.worth_reusing() {
                    returned.push(empty);
                }
                span
            })
            .collect();
        {
            let mut spare = shared.spare.lock().unwrap_or_else(|e| e.into_inner());
            let room = SPARE_MAX.saturating_sub(spare.len());
            returned.truncate(room);
            spare.append(&mut returned);
        }
        for s in sinks.iter_mut() {
            s.write(&spans);
        }
        shared
            .stats
            .written
            .fetch_add(spans.len() as u64, Ordering::Relaxed);
    };
    // Spans waiting in threads' buffers (idle threads, partial batches) are collected here.
    let sweep = |sinks: &mut Vec<Box<dyn SpanSink>>| {
        for buf in shared.buffers.iter() {
            let spans = std::mem::take(&mut *buf.lock().unwrap_or_else(|e| e.into_inner()));
            write(sinks, spans);
        }
        for s in sinks.iter_mut() {
            s.flush();
        }
    };
    let mut last_sweep = Instant::now();
    loop {
        match rx.recv_timeout(flush_interval) {
            Ok(Command::Spans(v)) => write(&mut sinks, v),
            Ok(Command::Flush(reply, deadline)) => {
                sweep(&mut sinks);
                for s in sinks.iter_mut() {
                    s.sync(deadline);
                }
                last_sweep = Instant::now();
                let _ = reply.send(());
            }
            Ok(Command::Stop(reply, deadline)) => {
                sweep(&mut sinks);
                for s in sinks.iter_mut() {
                    s.sync(deadline);
                }
                let _ = reply.send(());
                return;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                sweep(&mut sinks);
                return;
            }
        }
        if last_sweep.elapsed() >= flush_interval {
            sweep(&mut sinks);
            last_sweep = Instant::now();
        }
    }
}
