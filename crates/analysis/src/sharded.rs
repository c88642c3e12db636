//! Accumulators fed from several scan threads at once.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// A small number per thread, so each scan thread usually finds its own shard free.
    static SLOT: usize = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
}

/// One accumulator per shard, so threads rarely wait on each other; [`Sharded::finish`]
/// merges them.
pub struct Sharded<A> {
    shards: Vec<Mutex<A>>,
}

impl<A> Sharded<A> {
    /// `shards` accumulators made by `make` (at least one).
    pub fn new(shards: usize, make: impl Fn() -> A) -> Sharded<A> {
        Sharded {
            shards: (0..shards.max(1)).map(|_| Mutex::new(make())).collect(),
        }
    }

    /// Runs `f` on this thread's shard.
    pub fn with<R>(&self, f: impl FnOnce(&mut A) -> R) -> R {
        let i = SLOT.with(|s| *s) % self.shards.len();
        let mut guard = self.shards[i].lock().unwrap_or_else(|e| e.into_inner());
        f(&mut guard)
    }

    /// Merges every shard into one.
    pub fn finish(self, merge: impl Fn(&mut A, A)) -> A {
        let mut shards = self
            .shards
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(|e| e.into_inner()));
        let mut first = shards.next().expect("at least one shard");
        for s in shards {
            merge(&mut first, s);
        }
        first
    }
}
