//! Time, ids and thread identity for the hot path.

use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use causeway_model::{SpanId, TraceId};

fn system_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Wall-clock time from the CPU's time-stamp counter (via `quanta`, about 10 ns a read
/// here against 36 ns for `SystemTime::now`), anchored to the system clock and
/// re-anchored every second so it never drifts from it by more than the counter's
/// error over one second. The anchor is a seqlock: readers never block.
struct WallClock {
    clock: quanta::Clock,
    // Even: the anchor is stable; odd: being replaced.
    generation: AtomicU64,
    anchor_raw: AtomicU64,
    anchor_unix: AtomicU64,
}

const REANCHOR_NS: u64 = 1_000_000_000;

impl WallClock {
    fn new() -> WallClock {
        let clock = quanta::Clock::new();
        let raw = clock.raw();
        WallClock {
            clock,
            generation: AtomicU64::new(0),
            anchor_raw: AtomicU64::new(raw),
            anchor_unix: AtomicU64::new(system_ns()),
        }
    }

    /// The anchor (a raw reading and its Unix time), replaced first when it is older
    /// than [`REANCHOR_NS`].
    #[inline]
    fn anchor(&self) -> (u64, u64) {
        loop {
            let g = self.generation.load(Ordering::Acquire);
            if g & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let raw0 = self.anchor_raw.load(Ordering::Acquire);
            let unix0 = self.anchor_unix.load(Ordering::Acquire);
            if self.generation.load(Ordering::Acquire) != g {
                continue;
            }
            let elapsed = self.clock.delta_as_nanos(raw0, self.clock.raw());
            if elapsed >= REANCHOR_NS
                && self
                    .generation
                    .compare_exchange(g, g + 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            {
                let raw = self.clock.raw();
                let unix = system_ns();
                self.anchor_raw.store(raw, Ordering::Release);
                self.anchor_unix.store(unix, Ordering::Release);
                self.generation.store(g + 2, Ordering::Release);
                return (raw, unix);
            }
            return (raw0, unix0);
        }
    }

    /// The Unix time of raw reading `raw`.
    fn to_unix(&self, raw: u64) -> u64 {
        let (raw0, unix0) = self.anchor();
        if raw >= raw0 {
            unix0 + self.clock.delta_as_nanos(raw0, raw)
        } else {
            unix0.saturating_sub(self.clock.delta_as_nanos(raw, raw0))
        }
    }

    #[inline]
    fn now(&self) -> u64 {
        self.to_unix(self.clock.raw())
    }
}

static WALL_CLOCK: OnceLock<WallClock> = OnceLock::new();

#[inline]
fn wall_clock() -> &'static WallClock {
    WALL_CLOCK.get_or_init(WallClock::new)
}

/// Unix nanoseconds now.
#[inline]
pub(crate) fn now_ns() -> u64 {
    wall_clock().now()
}

/// The counter's reading now: what the hot path stores, converted to Unix time off it
/// (by [`raw_to_unix`] on the writer's thread).
#[inline]
pub(crate) fn now_raw() -> u64 {
    wall_clock().clock.raw()
}

/// The Unix nanoseconds of a reading of [`now_raw`].
pub(crate) fn raw_to_unix(raw: u64) -> u64 {
    wall_clock().to_unix(raw)
}

/// Nanoseconds from reading `from` to the later reading `to` (0 if `to` is earlier).
pub(crate) fn raw_delta_ns(from: u64, to: u64) -> u64 {
    wall_clock().clock.delta_as_nanos(from, to)
}

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    static THREAD_NO: u64 = NEXT_THREAD.fetch_add(1, Ordering::Relaxed);
    static RNG: Cell<u64> = Cell::new(seed());
}

fn seed() -> u64 {
    // RandomState is seeded from the OS once per process and varies per thread.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(now_ns());
    h.finish() | 1
}

/// A small number that identifies the current OS thread within this process.
#[inline]
pub(crate) fn thread_no() -> u64 {
    THREAD_NO.with(|t| *t)
}

#[inline]
fn next_u64() -> u64 {
    // wyrand: fast, good enough for ids (not for secrets).
    RNG.with(|s| {
        let x = s.get().wrapping_add(0xa076_1d64_78bd_642f);
        s.set(x);
        let t = (x as u128).wrapping_mul((x ^ 0xe703_7ed1_a0b4_28db) as u128);
        ((t >> 64) ^ t) as u64
    })
}

/// A fresh random span id.
#[inline]
pub(crate) fn new_span_id() -> SpanId {
    loop {
        if let Some(id) = SpanId::new(next_u64()) {
            return id;
        }
    }
}

/// A fresh random trace id.
#[inline]
pub(crate) fn new_trace_id() -> TraceId {
    loop {
        let v = ((next_u64() as u128) << 64) | next_u64() as u128;
        if let Some(id) = TraceId::new(v) {
            return id;
        }
    }
}

/// CPU time used by the calling thread, in nanoseconds.
pub(crate) fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call, and
    // CLOCK_THREAD_CPUTIME_ID is a clock every Linux and macOS kernel provides; there is
    // no safe std API for per-thread CPU time.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_clock_agrees_with_the_system_clock() {
        for _ in 0..5 {
            let before = system_ns();
            let t = now_ns();
            let after = system_ns();
            // Within a millisecond of the system clock (the counter's error over at most
            // a second since the last anchor is far smaller).
            assert!(
                t + 1_000_000 >= before && t <= after + 1_000_000,
                "{before} {t} {after}"
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }

    #[test]
    fn ids_differ_across_calls_and_threads() {
        let a: Vec<u64> = (0..1000).map(|_| new_span_id().get()).collect();
        let b: Vec<u64> = std::thread::spawn(|| (0..1000).map(|_| new_span_id().get()).collect())
            .join()
            .unwrap();
        let mut all: Vec<u64> = a.into_iter().chain(b).collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 2000);
    }

    #[test]
    fn thread_cpu_time_grows_with_work() {
        let before = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(thread_cpu_ns() > before);
    }
}
