//! Callsites enabled and disabled at run time, beside the configured targets: the hook
//! for dynamic tracepoints. Changing the set rebuilds `tracing`'s interest cache, so a
//! callsite nothing wants stays `Interest::never` (free) and one just enabled is
//! recorded from its next use, with no restart.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use tracing_core::Metadata;

type Matcher = Arc<dyn Fn(&Metadata<'_>) -> bool + Send + Sync>;

#[derive(Default)]
struct Set {
    matchers: RwLock<Vec<(u64, Matcher)>>,
    /// `matchers.len()`, readable without the lock: an empty set costs one load.
    len: AtomicUsize,
    next: AtomicU64,
}

/// A handle on the callsites a [`crate::CausewaySubscriber`] records beyond its targets;
/// get it with [`crate::CausewaySubscriber::tracepoints`]. Clones share the set.
#[derive(Clone, Default)]
pub struct Tracepoints(Arc<Set>);

/// Names one [`Tracepoints::enable`] call, to undo it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TracepointId(u64);

impl Tracepoints {
    /// Records, from now on, every callsite `matches` accepts (its spans and events).
    pub fn enable(
        &self,
        matches: impl Fn(&Metadata<'_>) -> bool + Send + Sync + 'static,
    ) -> TracepointId {
        let id = self.0.next.fetch_add(1, Ordering::Relaxed);
        {
            let mut m = self.0.matchers.write().unwrap_or_else(|e| e.into_inner());
            m.push((id, Arc::new(matches)));
            self.0.len.store(m.len(), Ordering::Release);
        }
        tracing_core::callsite::rebuild_interest_cache();
        TracepointId(id)
    }

    /// Undoes an [`enable`](Tracepoints::enable); false if it was undone already.
    pub fn disable(&self, id: TracepointId) -> bool {
        let removed = {
            let mut m = self.0.matchers.write().unwrap_or_else(|e| e.into_inner());
            let before = m.len();
            m.retain(|(i, _)| *i != id.0);
            self.0.len.store(m.len(), Ordering::Release);
            m.len() != before
        };
        if removed {
            tracing_core::callsite::rebuild_interest_cache();
        }
        removed
    }

    /// Whether any tracepoint is enabled.
    pub(crate) fn any(&self) -> bool {
        self.0.len.load(Ordering::Acquire) > 0
    }

    /// Whether an enabled set accepts this callsite.
    pub(crate) fn matches(&self, metadata: &Metadata<'_>) -> bool {
        if !self.any() {
            return false;
        }
        self.0
            .matchers
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .any(|(_, m)| m(metadata))
    }
}
