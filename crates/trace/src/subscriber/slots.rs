//! The exclusive subscriber's span store: fixed slots in pages that are never freed while
//! the subscriber lives, reused through per-thread free lists, each guarded by a one-word
//! spin lock, and `tracing` ids that encode the slot and its generation.
//!
//! Pages hold 1 024 slots (4 096 pages at most: 4 M spans open at once). A thread takes free
//! slots from its own list, which trades batches of 64 with a shared pool.
//!
//! An id is `generation << 32 | (index + 1)`; bit 63 is never set (it tags aliases, the
//! ids of unsampled children, see `super`). A slot's generation is odd while a span lives
//! in it and even while it is free, so an id whose span has closed (or one made up with
//! `Id::from_u64`) finds a different generation and is refused: nothing can reach another
//! span's data through it.
//!
//! Beside the lock, as atomics read without it, a slot keeps whether its trace is sampled,
//! the span's id in the inner subscriber and, for a transparent span, the parent its
//! children see. A span's own operations need no atomic read-modify-write except the lock
//! taken to read or change its record and the one taken when it closes: a new span writes
//! its slot before publishing the generation, and the reference count falls with a plain
//! store when the last handle goes (as it does for almost every span).

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Mutex, OnceLock};

use tracing_core::Metadata;

use crate::record::SpanRecord;

/// Slots per page.
const PAGE: usize = 1024;
/// Pages at most: 4M spans open at once.
const MAX_PAGES: usize = 4096;
/// Free slots handed between a thread's list and the shared pool at once.
const BATCH: usize = 64;
const GENERATION_BITS: u32 = 0x7fff_ffff;

/// What a slot holds while its span lives.
pub(crate) struct Live {
    pub(crate) record: SpanRecord,
    pub(crate) metadata: &'static Metadata<'static>,
    /// The parent's id when this span holds a reference to it (see `super`).
    pub(crate) parent: Option<u64>,
}

#[derive(Default)]
struct Slot {
    generation: AtomicU32,
    refs: AtomicU32,
    locked: AtomicBool,
    /// `UNSAMPLED`, `SAMPLED` or `TRANSPARENT`, readable without the lock: a new span's
    /// parent is looked up under the lock only when it is sampled.
    kind: AtomicU8,
    /// The span's id in the inner subscriber (0: none), see `super::inner`.
    inner: AtomicU64,
    /// For a transparent span: the id its children take as their parent (0: none).
    see_through: AtomicU64,
    live: UnsafeCell<Option<Live>>,
}

// SAFETY: `live` is only read or written by the thread that holds `locked`, or by the
// thread that took the slot from a free list before it publishes the generation (no other
// thread can pass the generation check before that), or by the closer, which holds the
// lock. `Live` itself is `Send`.
unsafe impl Sync for Slot {}

const UNSAMPLED: u8 = 0;
const SAMPLED: u8 = 1;
/// A span Causeway does not record but must give an id (the inner subscriber wants it):
/// its children see through it to its parent.
const TRANSPARENT: u8 = 2;

/// How a new span's slot is marked besides its record.
#[derive(Clone, Copy, Default)]
pub(crate) struct Marks {
    /// The span's id in the inner subscriber, if it has one.
    pub(crate) inner: Option<u64>,
    /// `Some(parent)`: the span is transparent, and its children's parent is `parent`
    /// (0: they are roots).
    pub(crate) see_through: Option<u64>,
}

/// A thread's free slots.
#[derive(Default)]
pub(crate) struct FreeList(Vec<u32>);

pub(crate) struct Slots {
    pages: Box<[OnceLock<Box<[Slot]>>]>,
    pages_made: Mutex<usize>,
    pool: Mutex<Vec<Vec<u32>>>,
}

thread_local! {
    // Whether this thread holds a slot's lock. Nothing here takes two at once, so a second
    // one can only be asked for by a `Debug` impl run under the first (one that records
    // into a span): it is refused instead of spinning forever.
    static HELD: Cell<bool> = const { Cell::new(false) };
}

/// Releases a slot's lock when dropped (also when the closure run under it panics).
struct Held<'a>(&'a Slot);

impl Drop for Held<'_> {
    fn drop(&mut self) {
        HELD.with(|h| h.set(false));
        self.0.locked.store(false, Ordering::Release);
    }
}

impl Slot {
    fn lock(&self) -> Option<Held<'_>> {
        if HELD.with(|h| h.get()) {
            return None;
        }
        let mut spins = 0u32;
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        HELD.with(|h| h.set(true));
        Some(Held(self))
    }

    fn is(&self, generation: u32) -> bool {
        let g = self.generation.load(Ordering::Acquire);
        g & 1 == 1 && g & GENERATION_BITS == generation
    }
}

fn split(id: u64) -> Option<(usize, u32)> {
    let index = (id as u32).checked_sub(1)? as usize;
    Some((index, (id >> 32) as u32 & GENERATION_BITS))
}

impl Slots {
    pub(crate) fn new() -> Slots {
        Slots {
            pages: (0..MAX_PAGES).map(|_| OnceLock::new()).collect(),
            pages_made: Mutex::new(0),
            pool: Mutex::new(Vec::new()),
        }
    }

    fn slot(&self, index: usize) -> Option<&Slot> {
        self.pages.get(index / PAGE)?.get()?.get(index % PAGE)
    }

    fn take_free(&self, free: &mut FreeList) -> Option<u32> {
        if let Some(i) = free.0.pop() {
            return Some(i);
        }
        if let Some(batch) = self.pool.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            free.0 = batch;
            return free.0.pop();
        }
        let mut made = self.pages_made.lock().unwrap_or_else(|e| e.into_inner());
        let page = *made;
        if page >= MAX_PAGES {
            return None;
        }
        let slots: Box<[Slot]> = (0..PAGE).map(|_| Slot::default()).collect();
        let _ = self.pages[page].set(slots);
        *made += 1;
        drop(made);
        let first = (page * PAGE) as u32;
        let mut indices: Vec<u32> = (first..first + PAGE as u32).rev().collect();
        let mine = indices.split_off(PAGE - BATCH);
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        while !indices.is_empty() {
            let at = indices.len().saturating_sub(BATCH);
            pool.push(indices.split_off(at));
        }
        drop(pool);
        free.0 = mine;
        free.0.pop()
    }

    /// Puts the span `make` makes in a free slot (made there, not moved in); its id, or
    /// `None` (and `make` is not called) when every slot is taken.
    pub(crate) fn insert(
        &self,
        free: &mut FreeList,
        marks: Marks,
        make: impl FnOnce() -> Live,
    ) -> Option<u64> {
        let index = self.take_free(free)?;
        let slot = self.slot(index as usize)?;
        let generation = slot.generation.load(Ordering::Relaxed).wrapping_add(1) | 1;
        // SAFETY: the slot came off a free list, so no span lives in it: its generation
        // is even, every other thread that locks it finds no match and leaves `live`
        // alone, and no other thread can take it from this thread's list. The release
        // store below publishes the write to whoever passes the generation check later.
        let live = unsafe { &mut *slot.live.get() };
        let sampled = live.insert(make()).record.is_sampled();
        let kind = match (marks.see_through, sampled) {
            (Some(_), _) => TRANSPARENT,
            (None, true) => SAMPLED,
            (None, false) => UNSAMPLED,
        };
        slot.kind.store(kind, Ordering::Relaxed);
        slot.inner
            .store(marks.inner.unwrap_or(0), Ordering::Relaxed);
        slot.see_through
            .store(marks.see_through.unwrap_or(0), Ordering::Relaxed);
        slot.refs.store(1, Ordering::Relaxed);
        slot.generation.store(generation, Ordering::Release);
        Some(((generation & GENERATION_BITS) as u64) << 32 | (index as u64 + 1))
    }

    /// Runs `f` on the live span `id` under its lock; `None` if the span has closed (or
    /// `f` would re-enter the lock this thread holds).
    pub(crate) fn with<R>(&self, id: u64, f: impl FnOnce(&mut Live) -> R) -> Option<R> {
        let (index, generation) = split(id)?;
        let slot = self.slot(index)?;
        let _held = slot.lock()?;
        if !slot.is(generation) {
            return None;
        }
        // SAFETY: this thread holds the slot's lock and the generation says the span
        // lives: no other thread reads or writes `live` until the lock is released.
        let live = unsafe { &mut *slot.live.get() }.as_mut()?;
        let r = f(live);
        // `f` may have given the span a remote parent, and with it another decision.
        if slot.kind.load(Ordering::Relaxed) != TRANSPARENT {
            let kind = if live.record.is_sampled() {
                SAMPLED
            } else {
                UNSAMPLED
            };
            slot.kind.store(kind, Ordering::Relaxed);
        }
        Some(r)
    }

    /// The slot of live span `id`.
    fn live_slot(&self, id: u64) -> Option<&Slot> {
        let (index, generation) = split(id)?;
        self.slot(index).filter(|slot| slot.is(generation))
    }

    /// Whether live span `id` belongs to an unsampled trace (`false` if it has closed).
    pub(crate) fn is_unsampled(&self, id: u64) -> bool {
        self.live_slot(id)
            .is_some_and(|slot| slot.kind.load(Ordering::Relaxed) == UNSAMPLED)
    }

    /// For a live transparent span, the id its children take as their parent.
    pub(crate) fn see_through(&self, id: u64) -> Option<Option<u64>> {
        let slot = self.live_slot(id)?;
        if slot.kind.load(Ordering::Relaxed) != TRANSPARENT {
            return None;
        }
        let parent = slot.see_through.load(Ordering::Relaxed);
        Some((parent != 0).then_some(parent))
    }

    /// The inner subscriber's id of live span `id`.
    pub(crate) fn inner(&self, id: u64) -> Option<u64> {
        let inner = self.live_slot(id)?.inner.load(Ordering::Relaxed);
        (inner != 0).then_some(inner)
    }

    /// A new handle to span `id`.
    pub(crate) fn clone_ref(&self, id: u64) -> bool {
        let Some(slot) = split(id).and_then(|(i, g)| Some((self.slot(i)?, g))) else {
            return false;
        };
        if !slot.0.is(slot.1) {
            return false;
        }
        slot.0.refs.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Drops a handle to span `id`. When it was the last one, runs `close` on the span
    /// where it lies (nothing is moved out), empties the slot and gives it back to
    /// `free`, and returns what `close` returned.
    pub(crate) fn release<R>(
        &self,
        id: u64,
        free: &mut FreeList,
        close: impl FnOnce(&mut Live) -> R,
    ) -> Option<R> {
        let (index, generation) = split(id)?;
        let slot = self.slot(index)?;
        if !slot.is(generation) {
            return None;
        }
        // The handle being dropped is the only one when the count is 1: nothing can
        // clone it meanwhile, so a plain store does.
        let last = if slot.refs.load(Ordering::Acquire) == 1 {
            slot.refs.store(0, Ordering::Relaxed);
            true
        } else {
            slot.refs.fetch_sub(1, Ordering::AcqRel) == 1
        };
        if !last {
            return None;
        }
        let held = slot.lock()?;
        if !slot.is(generation) {
            return None;
        }
        // SAFETY: this thread holds the lock and the span lives (generation checked).
        let live = unsafe { &mut *slot.live.get() };
        let closed = live.as_mut().map(close);
        *live = None;
        slot.generation.store(
            slot.generation.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Release,
        );
        drop(held);
        free.0.push(index as u32);
        if free.0.len() >= 2 * BATCH {
            let batch = free.0.split_off(free.0.len() - BATCH);
            self.pool
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(batch);
        }
        closed
    }

    /// The metadata of live span `id`.
    pub(crate) fn metadata(&self, id: u64) -> Option<&'static Metadata<'static>> {
        self.with(id, |l| l.metadata)
    }
}
