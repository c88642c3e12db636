//! Time, ids and thread identity for the hot path.
//!
//! The hot path stores raw time-stamp-counter readings (`quanta`); the writer converts them
//! to Unix time by a continuous, increasing chain of segments of at least a second, each
//! starting where the last ended, running at the counter's measured rate and slewed (at
//! most 500 ppm) to close the gap to the system clock. So spans converted in any order keep
//! the order they were taken in: anchoring each second afresh would open a gap of the
//! counter's drift (16 µs a second here), enough to put a child's end after its parent's.
//! `WallClock` has the details.

use std::cell::Cell;
use std::collections::VecDeque;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use causeway_model::{SpanId, TraceId};

fn system_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Wall-clock time from the CPU's time-stamp counter (via `quanta`, about 10 ns a read
/// here against 36 ns for `SystemTime::now`), as a continuous, increasing function of the
/// counter: a chain of segments, a new one begun by the first conversion a second or more
/// after the last began. Each starts where the last one ended and runs at the counter's
/// rate as measured against the system clock so far (`quanta` calibrates the counter's
/// frequency in a few milliseconds at start; on a loaded machine that was seen 0.3% off,
/// 3 ms a second), plus a slew of at most [`MAX_SLEW_PPB`] that closes the gap to the
/// system clock and then stops, as NTP slews a clock. A slew that stops is what lets a
/// segment run for however long the process is quiet: one that kept slewing would
/// overshoot. Only a gap over [`MAX_GAP_NS`] (the system clock was set, the machine
/// slept) is a jump.
///
/// Continuity is what keeps a trace's order: times are converted on the writer's thread,
/// in any order, so a parent and its child may be converted by different segments. Were
/// each segment anchored afresh to the system clock, the counter's error (16 µs a second
/// on this machine) would open a gap at each anchor, and a child that ended microseconds
/// before its parent could be converted as ending after it. A reading converts by the
/// segment it was taken in, whenever it is converted, for as long as that segment is
/// among the last [`SEGMENTS_KEPT`].
struct WallClock {
    clock: quanta::Clock,
    /// The system clock, Unix nanoseconds (a stand-in in tests).
    system: fn() -> u64,
    /// The newest segment, readable without a lock. Even: stable; odd: being replaced.
    generation: AtomicU64,
    newest_raw: AtomicU64,
    newest_unix: AtomicU64,
    newest_rate_ppb: AtomicI64,
    newest_slew_ns: AtomicI64,
    newest_slew_over_ns: AtomicU64,
    /// The newest segments, oldest first; the last one is the newest.
    history: Mutex<VecDeque<Segment>>,
}

const SEGMENT_NS: u64 = 1_000_000_000;
/// Longest gap to the system clock that is slewed rather than jumped.
const MAX_GAP_NS: i64 = 10_000_000;
/// Largest rate at which a gap is slewed, in parts per billion (NTP slews at most 500 ppm).
const MAX_SLEW_PPB: i64 = 500_000;
/// Largest correction of the counter's rate taken as measured, in parts per billion (a
/// calibration further off than 1% is a clock that was set, not a counter's error).
const MAX_RATE_PPB: i64 = 10_000_000;
const SEGMENTS_KEPT: usize = 64;

/// From a counter reading on, Unix time runs at the counter's nominal rate corrected by
/// `rate_ppb` parts per billion, and gains `slew_ns` evenly over the first `slew_over_ns`.
#[derive(Clone, Copy, Debug)]
struct Segment {
    raw: u64,
    unix: u64,
    rate_ppb: i64,
    slew_ns: i64,
    slew_over_ns: u64,
}

impl Segment {
    fn unix_at(self, clock: &quanta::Clock, raw: u64) -> u64 {
        let corrected = |ns: u64| {
            let ns = ns as i128;
            (ns + ns * self.rate_ppb as i128 / 1_000_000_000).max(0) as u64
        };
        if raw >= self.raw {
            let ns = clock.delta_as_nanos(self.raw, raw);
            let at = (self.unix + corrected(ns)) as i64;
            (at + self.slewed(ns)).max(0) as u64
        } else {
            // Before the oldest segment kept: at its rate, unslewed.
            self.unix
                .saturating_sub(corrected(clock.delta_as_nanos(raw, self.raw)))
        }
    }

    /// The part of the slew made `ns` into the segment.
    fn slewed(self, ns: u64) -> i64 {
        let over = self.slew_over_ns.max(1);
        (self.slew_ns as i128 * ns.min(over) as i128 / over as i128) as i64
    }
}

impl WallClock {
    fn new(clock: quanta::Clock, system: fn() -> u64) -> WallClock {
        let first = Segment {
            raw: clock.raw(),
            unix: system(),
            rate_ppb: 0,
            slew_ns: 0,
            slew_over_ns: SEGMENT_NS,
        };
        WallClock {
            clock,
            system,
            generation: AtomicU64::new(0),
            newest_raw: AtomicU64::new(first.raw),
            newest_unix: AtomicU64::new(first.unix),
            newest_rate_ppb: AtomicI64::new(first.rate_ppb),
            newest_slew_ns: AtomicI64::new(first.slew_ns),
            newest_slew_over_ns: AtomicU64::new(first.slew_over_ns),
            history: Mutex::new(VecDeque::from([first])),
        }
    }

    #[inline]
    fn newest(&self) -> Segment {
        loop {
            let g = self.generation.load(Ordering::Acquire);
            if g & 1 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let segment = Segment {
                raw: self.newest_raw.load(Ordering::Acquire),
                unix: self.newest_unix.load(Ordering::Acquire),
                rate_ppb: self.newest_rate_ppb.load(Ordering::Acquire),
                slew_ns: self.newest_slew_ns.load(Ordering::Acquire),
                slew_over_ns: self.newest_slew_over_ns.load(Ordering::Acquire),
            };
            if self.generation.load(Ordering::Acquire) == g {
                return segment;
            }
        }
    }

    /// The Unix time of raw reading `raw`.
    fn to_unix(&self, raw: u64) -> u64 {
        let newest = self.newest();
        if raw < newest.raw {
            return self.by_history(raw);
        }
        if self.clock.delta_as_nanos(newest.raw, raw) >= SEGMENT_NS {
            self.begin_segment();
            // The new segment begins at a reading taken after `raw`, and the one `raw`
            // belongs to is the one it was in.
            return self.by_history(raw);
        }
        newest.unix_at(&self.clock, raw)
    }

    fn by_history(&self, raw: u64) -> u64 {
        let history = self.history.lock().unwrap_or_else(|e| e.into_inner());
        let segment = history
            .iter()
            .rev()
            .find(|s| s.raw <= raw)
            .or(history.front())
            .copied();
        drop(history);
        match segment {
            Some(s) => s.unix_at(&self.clock, raw),
            None => (self.system)(),
        }
    }

    /// Ends the newest segment now and begins the next (unless another thread is).
    fn begin_segment(&self) {
        let Ok(mut history) = self.history.try_lock() else {
            return;
        };
        let Some(&last) = history.back() else {
            return;
        };
        let raw = self.clock.raw();
        let elapsed = self.clock.delta_as_nanos(last.raw, raw);
        if elapsed < SEGMENT_NS {
            return;
        }
        let system = (self.system)();
        let ours = last.unix_at(&self.clock, raw);
        let gap = system as i64 - ours as i64;
        let next = if gap.abs() > MAX_GAP_NS {
            Segment {
                raw,
                unix: system,
                rate_ppb: last.rate_ppb,
                slew_ns: 0,
                slew_over_ns: SEGMENT_NS,
            }
        } else {
            // What the last segment's slew had yet to make is in the gap; the rest is
            // the counter's rate, not yet followed.
            let unmade = last.slew_ns - last.slewed(elapsed);
            let rate =
                last.rate_ppb as i128 + (gap - unmade) as i128 * 1_000_000_000 / elapsed as i128;
            Segment {
                raw,
                unix: ours,
                rate_ppb: rate.clamp(-MAX_RATE_PPB as i128, MAX_RATE_PPB as i128) as i64,
                slew_ns: gap,
                slew_over_ns: SEGMENT_NS.max(
                    (gap.unsigned_abs() as u128 * 1_000_000_000 / MAX_SLEW_PPB as u128) as u64,
                ),
            }
        };
        if history.len() == SEGMENTS_KEPT {
            history.pop_front();
        }
        history.push_back(next);
        let g = self.generation.load(Ordering::Relaxed);
        self.generation.store(g + 1, Ordering::Release);
        self.newest_raw.store(next.raw, Ordering::Release);
        self.newest_unix.store(next.unix, Ordering::Release);
        self.newest_rate_ppb.store(next.rate_ppb, Ordering::Release);
        self.newest_slew_ns.store(next.slew_ns, Ordering::Release);
        self.newest_slew_over_ns
            .store(next.slew_over_ns, Ordering::Release);
        self.generation.store(g + 2, Ordering::Release);
    }

    #[inline]
    fn now(&self) -> u64 {
        self.to_unix(self.clock.raw())
    }
}

static WALL_CLOCK: OnceLock<WallClock> = OnceLock::new();

#[inline]
fn wall_clock() -> &'static WallClock {
    WALL_CLOCK.get_or_init(|| WallClock::new(quanta::Clock::new(), system_ns))
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

/// A random number (ids, instance numbers; not for secrets).
pub(crate) fn random_u64() -> u64 {
    next_u64()
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
            // Within the gap the clock slews rather than jumps: a gap up to MAX_GAP_NS
            // is closed gradually, by design, so a loaded machine whose counter and
            // system clock part by over a millisecond (seen in CI: 1.27 ms) still
            // passes, while a clock that lost its anchor does not.
            let gap = MAX_GAP_NS as u64;
            assert!(
                t + gap >= before && t <= after + gap,
                "{before} {t} {after}"
            );
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    }

    thread_local! {
        static FAKE_SYSTEM_NS: Cell<u64> = const { Cell::new(1_700_000_000_000_000_000) };
    }

    fn fake_system_ns() -> u64 {
        FAKE_SYSTEM_NS.with(Cell::get)
    }

    /// A counter `ppm` parts per million fast against the system clock, read every
    /// `step_ns` of system time for `seconds`: the readings and the system times.
    fn run(
        clock: &WallClock,
        mock: &quanta::Mock,
        seconds: u64,
        step_ns: u64,
        ppm: i64,
    ) -> Vec<(u64, u64)> {
        let mut readings = Vec::new();
        for _ in 0..seconds * 1_000_000_000 / step_ns {
            mock.increment((step_ns as i64 + step_ns as i64 * ppm / 1_000_000) as u64);
            FAKE_SYSTEM_NS.with(|t| t.set(t.get() + step_ns));
            let raw = clock.clock.raw();
            // Converting as it goes begins the segments, as the writer does.
            clock.to_unix(raw);
            readings.push((raw, fake_system_ns()));
        }
        readings
    }

    #[test]
    fn readings_convert_in_order_whenever_they_are_converted() {
        let (counter, mock) = quanta::Clock::mock();
        let clock = WallClock::new(counter, fake_system_ns);
        let readings = run(&clock, &mock, 20, 3_000_000, 16);
        let mut converted: Vec<u64> = readings
            .iter()
            .map(|&(raw, _)| clock.to_unix(raw))
            .collect();
        // Converted late and in reverse order (the writer drains lanes in any order), the
        // same readings give the same, increasing times.
        let mut late: Vec<u64> = readings
            .iter()
            .rev()
            .map(|&(raw, _)| clock.to_unix(raw))
            .collect();
        late.reverse();
        assert_eq!(converted, late);
        let before = converted.clone();
        converted.sort_unstable();
        converted.dedup();
        assert_eq!(converted, before, "times are strictly increasing");
        // No step at a segment's start is larger than the counter's own 3 ms, give or
        // take the largest slew.
        for w in before.windows(2) {
            let step = w[1] - w[0];
            assert!(
                step.abs_diff(3_000_000) <= 3_000_000 * MAX_SLEW_PPB as u64 / 1_000_000_000 + 100,
                "{step}"
            );
        }
    }

    #[test]
    fn the_gap_to_a_drifting_counter_closes() {
        for ppm in [-200, -16, 0, 16, 200] {
            let (counter, mock) = quanta::Clock::mock();
            let clock = WallClock::new(counter, fake_system_ns);
            let readings = run(&clock, &mock, 30, 10_000_000, ppm);
            // Uncorrected, the gap would grow to 30 s × ppm; after a few segments it is
            // gone to within a microsecond.
            for &(raw, system) in &readings[readings.len() - 500..] {
                let ours = clock.to_unix(raw);
                assert!(
                    ours.abs_diff(system) < 1_000,
                    "{ppm} ppm: {ours} vs {system}"
                );
            }
        }
    }

    #[test]
    fn a_counter_calibrated_far_off_is_followed_without_jumps() {
        // `quanta` was seen calibrating a counter 0.3% off on a loaded machine: beyond
        // any slew, so only following the counter's measured rate closes the gap.
        for ppm in [-3_000, 3_000] {
            let (counter, mock) = quanta::Clock::mock();
            let clock = WallClock::new(counter, fake_system_ns);
            let readings = run(&clock, &mock, 30, 10_000_000, ppm);
            let converted: Vec<u64> = readings
                .iter()
                .map(|&(raw, _)| clock.to_unix(raw))
                .collect();
            for (w, r) in converted.windows(2).zip(&readings) {
                // Before the rate is measured, a step is the counter's own (30 µs long
                // each 10 ms); after, it is 10 ms give or take the slew. Never a jump.
                assert!(w[1] - w[0] <= 10_000_000 + 31_000, "{ppm} ppm at {}", r.1);
                assert!(w[1] > w[0]);
            }
            for (&(_, system), ours) in readings.iter().zip(&converted).skip(readings.len() - 500) {
                assert!(
                    ours.abs_diff(system) < 1_000,
                    "{ppm} ppm: {ours} vs {system}"
                );
            }
        }
    }

    #[test]
    fn a_quiet_process_converting_seconds_apart_keeps_time() {
        // A process that records a span every few seconds begins a segment each time:
        // each must keep time for however long it lasts, not slew past the system clock.
        for ppm in [-3_000, -200, 200, 3_000] {
            let (counter, mock) = quanta::Clock::mock();
            let clock = WallClock::new(counter, fake_system_ns);
            let readings = run(&clock, &mock, 60, 2_500_000_000, ppm);
            for &(raw, system) in &readings[readings.len() / 2..] {
                let ours = clock.to_unix(raw);
                assert!(
                    ours.abs_diff(system) < 10_000,
                    "{ppm} ppm: {ours} vs {system}"
                );
            }
        }
    }

    #[test]
    fn a_system_clock_set_far_away_is_followed_at_once() {
        let (counter, mock) = quanta::Clock::mock();
        let clock = WallClock::new(counter, fake_system_ns);
        run(&clock, &mock, 3, 10_000_000, 0);
        FAKE_SYSTEM_NS.with(|t| t.set(t.get() + 3_600_000_000_000));
        let readings = run(&clock, &mock, 2, 10_000_000, 0);
        let &(raw, system) = readings.last().unwrap();
        assert!(clock.to_unix(raw).abs_diff(system) < 1_000);
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
