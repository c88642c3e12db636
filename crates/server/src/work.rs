//! Where request work runs. The async workers only move bytes: parsing, decoding, checking
//! and analysing run on the blocking pool, so a heavy request never stalls the others.
//! Bulk scans (searches, analyses, checks and exports) run on threads of their own, behind
//! ingest in priority, and are bounded in number and in time:
//! at most `max_scans` run at once, and a request that cannot finish within
//! `query_timeout` of its arrival is answered 503 (no scan slot came free) or 408 (its scan
//! ran out of time), never left waiting.
//!
//! Where each kind of work runs:
//! - Ingest: the body is read on the workers (size-limited); gunzip, decoding, screening
//!   and the append (native encoding, WAL write, fsync, head insert) run on the blocking
//!   pool (`blocking`).
//! - Block writing, compaction, retention and interval syncs run on the store's own
//!   thread, `causeway-store`; an append that fills the head only freezes it.
//! - Trace by id and the catalog's lists of services and operations run on the blocking
//!   pool. A request that reads across the store (searches, indexed or sorted; analyses,
//!   expectation checks and generation, export; Jaeger's searches, operations with their
//!   span kinds and dependencies) runs through `Scans::run` on a `causeway-scan` thread: at
//!   most `--max-scans` (2) at once, within `--query-timeout` (60 s) of its arrival, waiting
//!   for a slot included. No slot in time is 503; a scan past the limit is stopped (the
//!   store's scan visitor, or `search_until`'s stop check between traces read, answers
//!   `Break`, and every scan thread stops) and answered 408. A bulk scan spawns its own
//!   scoped threads (`scan_threads`, one per core), each feeding a per-thread accumulator
//!   (`causeway_analysis::Sharded`) merged at the end.
//! - Per-trace analyses (skew correction, critical path, stats, comparison profiles),
//!   parsing and compiling expectations (nesting bounded at 100 levels, so no input can
//!   exhaust a stack), checking and generating run on the blocking pool too.
//! - SQL runs on a thread of its own per query (`causeway-sql`, 256 MiB of stack reserved,
//!   4 at once; see `causeway_store::sql`).
//!
//! A search's `limit` is at most `--max-search-limit` (Jaeger's is cut to it), and a Jaeger
//! search answers whole traces up to `--max-answer-spans` spans.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

use crate::ApiError;

/// Runs CPU-heavy request work on the blocking pool.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::Internal(format!("request task failed: {e}")))?
}

/// Runs a store read on the blocking pool.
pub(crate) async fn store_blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, causeway_store::StoreError> + Send + 'static,
) -> Result<T, ApiError> {
    blocking(move || f().map_err(ApiError::from)).await
}

/// The scan slots and the time limit every bulk scan runs under.
pub(crate) struct Scans {
    slots: Semaphore,
    max: usize,
    timeout: Duration,
}

impl Scans {
    pub(crate) fn new(max: usize, timeout: Duration) -> Scans {
        Scans {
            slots: Semaphore::new(max.max(1)),
            max: max.max(1),
            timeout,
        }
    }

    /// Runs `job` on the blocking pool once a scan slot is free, with a deadline
    /// `query_timeout` after now. The job stops its scan when [`Deadline::check`] breaks.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        job: impl FnOnce(&Deadline) -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let deadline = Deadline::after(self.timeout);
        let permit = match tokio::time::timeout(self.timeout, self.slots.acquire()).await {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => return Err(ApiError::Unavailable("the server is stopping".into())),
            Err(_) => {
                return Err(ApiError::Unavailable(format!(
                    "{} scans over a window are already running and none finished within {}; \
                     retry later or narrow the window",
                    self.max,
                    humantime::format_duration(self.timeout)
                )))
            }
        };
        let timeout = self.timeout;
        // A thread of its own, behind ingest in priority (the scan's threads inherit
        // it), rather than the blocking pool that ingest shares.
        let (answer, answered) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("causeway-scan".into())
            .spawn(move || {
                causeway_store::priority::run_behind_ingest();
                let out = job(&deadline);
                let out = if deadline.passed() {
                    Err(ApiError::Timeout(format!(
                        "the scan was stopped at the query time limit ({}); narrow the window \
                         (start, end, lookback) or raise --query-timeout",
                        humantime::format_duration(timeout)
                    )))
                } else {
                    out
                };
                let _ = answer.send(out);
            })
            .map_err(|e| ApiError::Internal(format!("cannot start a scan's thread: {e}")))?;
        let out = answered.await.unwrap_or_else(|_| {
            Err(ApiError::Internal(
                "the scan's thread ended without an answer".into(),
            ))
        });
        drop(permit);
        out
    }
}

/// When a scan must stop; shared by every scan thread of one request.
pub(crate) struct Deadline {
    at: Instant,
    passed: AtomicBool,
}

impl Deadline {
    fn after(d: Duration) -> Deadline {
        Deadline {
            at: Instant::now() + d,
            passed: AtomicBool::new(false),
        }
    }

    /// Time left until the deadline.
    pub(crate) fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Whether a check found the deadline passed.
    pub(crate) fn passed(&self) -> bool {
        self.passed.load(Ordering::Relaxed)
    }

    /// `Break` once the deadline has passed: the answer to give a store's scan visitor.
    pub(crate) fn check(&self) -> ControlFlow<()> {
        if self.passed.load(Ordering::Relaxed) || Instant::now() >= self.at {
            self.passed.store(true, Ordering::Relaxed);
            return ControlFlow::Break(());
        }
        ControlFlow::Continue(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn a_scan_that_finds_no_free_slot_in_time_is_answered_503() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let scans = Arc::new(Scans::new(1, Duration::from_millis(200)));
            let (started, running) = tokio::sync::oneshot::channel();
            let busy = {
                let scans = scans.clone();
                tokio::spawn(async move {
                    scans
                        .run(move |_| {
                            let _ = started.send(());
                            // Holds the only slot well past the other's time limit.
                            std::thread::sleep(Duration::from_millis(1500));
                            Ok(())
                        })
                        .await
                })
            };
            running.await.unwrap();
            let refused = scans.run(|_| Ok(())).await.unwrap_err();
            assert!(matches!(refused, ApiError::Unavailable(_)), "{refused}");
            assert!(refused.to_string().contains("already running"), "{refused}");
            // A job that finishes without being stopped keeps its whole answer.
            busy.await.unwrap().unwrap();
        });
    }
}
