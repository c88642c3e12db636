//! Head sampling: the decision made once at a trace's root and carried in the trace flags.
//!
//! The decision is made at a span with no local or remote parent: `always`, `never`,
//! `probability:P` (the trace id's low 64 bits against P, so every process agrees) or
//! `adaptive:N` (a probability recomputed each second to aim at N sampled roots a second).
//! Children and downstream processes follow the `sampled` flag. A probability below 1
//! travels in `tracestate` as `cw=p:<P>` and is recorded on every span of the trace, so a
//! reader can weigh what it counts.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use causeway_model::TraceId;

/// How root spans decide whether their trace is recorded.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Sampler {
    /// Record every trace.
    #[default]
    Always,
    /// Record no trace (context still propagates).
    Never,
    /// Record each trace with this probability, decided from the trace id so every
    /// process that samples by probability agrees.
    Probability(f64),
    /// Aim at this many sampled traces per second in this process: the probability
    /// follows the rate of new traces, recomputed every second.
    Adaptive {
        /// Sampled root traces per second to aim at.
        per_second: f64,
    },
}

impl Sampler {
    /// Reads `always`, `never`, `probability:P` (or a bare number `P`) and `adaptive:N`.
    pub fn parse(s: &str) -> Result<Sampler, String> {
        let s = s.trim();
        let bad = || {
            format!("invalid sampler {s:?}: expected always, never, probability:P (0 to 1) or adaptive:N (traces per second)")
        };
        match s {
            "always" | "always_on" => return Ok(Sampler::Always),
            "never" | "always_off" => return Ok(Sampler::Never),
            _ => {}
        }
        if let Some(n) = s.strip_prefix("adaptive:") {
            let per_second: f64 = n.parse().map_err(|_| bad())?;
            if !(per_second.is_finite() && per_second > 0.0) {
                return Err(bad());
            }
            return Ok(Sampler::Adaptive { per_second });
        }
        let p: f64 = s
            .strip_prefix("probability:")
            .or_else(|| s.strip_prefix("traceidratio:"))
            .unwrap_or(s)
            .parse()
            .map_err(|_| bad())?;
        if !(0.0..=1.0).contains(&p) {
            return Err(bad());
        }
        Ok(Sampler::Probability(p))
    }
}

/// The sampler as it runs: its configuration plus the adaptive rate's state.
#[derive(Debug)]
pub(crate) struct SamplerState {
    sampler: Sampler,
    // Adaptive: the current probability (f64 bits), the window start (ns) and the roots
    // seen in it.
    probability: AtomicU64,
    window_start: AtomicU64,
    roots_in_window: AtomicU64,
}

const WINDOW_NS: u64 = 1_000_000_000;

/// The probability that a uniformly random trace id passes `p`.
fn passes(trace_id: TraceId, p: f64) -> bool {
    if p >= 1.0 {
        return true;
    }
    if p <= 0.0 {
        return false;
    }
    // The low 64 bits of a random trace id are uniform (W3C asks the right-most 7 bytes
    // to be random).
    let threshold = (p * (u64::MAX as f64)) as u64;
    (trace_id.get() as u64) < threshold
}

impl SamplerState {
    pub(crate) fn new(sampler: Sampler) -> Arc<SamplerState> {
        let initial = match &sampler {
            Sampler::Always => 1.0,
            Sampler::Never => 0.0,
            Sampler::Probability(p) => *p,
            Sampler::Adaptive { .. } => 1.0,
        };
        Arc::new(SamplerState {
            sampler,
            probability: AtomicU64::new(f64::to_bits(initial)),
            window_start: AtomicU64::new(0),
            roots_in_window: AtomicU64::new(0),
        })
    }

    /// Decides for a new root: (sampled, probability in force).
    pub(crate) fn decide(&self, trace_id: TraceId) -> (bool, f64) {
        match self.sampler {
            // Only the adaptive sampler needs the time.
            Sampler::Adaptive { .. } => self.decide_at(trace_id, crate::clock::now_ns()),
            _ => self.decide_at(trace_id, 0),
        }
    }

    /// Decides for a new root at time `now` (Unix ns).
    pub(crate) fn decide_at(&self, trace_id: TraceId, now: u64) -> (bool, f64) {
        match &self.sampler {
            Sampler::Always => (true, 1.0),
            Sampler::Never => (false, 0.0),
            Sampler::Probability(p) => (passes(trace_id, *p), *p),
            Sampler::Adaptive { per_second } => {
                let start = self.window_start.load(Ordering::Relaxed);
                if now.saturating_sub(start) >= WINDOW_NS
                    && self
                        .window_start
                        .compare_exchange(start, now, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    // One thread rolls the window: the new probability aims the next
                    // second's sampled roots at the target given last second's rate.
                    let seen = self.roots_in_window.swap(0, Ordering::Relaxed) as f64;
                    let elapsed = if start == 0 {
                        1.0
                    } else {
                        (now - start) as f64 / WINDOW_NS as f64
                    };
                    let rate = seen / elapsed.max(1e-9);
                    let p = if rate <= *per_second {
                        1.0
                    } else {
                        per_second / rate
                    };
                    self.probability.store(p.to_bits(), Ordering::Relaxed);
                }
                self.roots_in_window.fetch_add(1, Ordering::Relaxed);
                let p = f64::from_bits(self.probability.load(Ordering::Relaxed));
                (passes(trace_id, p), p)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(n: u64) -> impl Iterator<Item = TraceId> {
        // spread ids over the whole range, as random ids would be
        (1..=n).map(|i| {
            TraceId::new((i.wrapping_mul(0x9E37_79B9_7F4A_7C15)) as u128 | 1 << 100).unwrap()
        })
    }

    #[test]
    fn parses_every_mode_and_rejects_nonsense() {
        assert_eq!(Sampler::parse("always"), Ok(Sampler::Always));
        assert_eq!(Sampler::parse("never"), Ok(Sampler::Never));
        assert_eq!(
            Sampler::parse("probability:0.25"),
            Ok(Sampler::Probability(0.25))
        );
        assert_eq!(Sampler::parse("0.5"), Ok(Sampler::Probability(0.5)));
        assert_eq!(
            Sampler::parse("adaptive:10"),
            Ok(Sampler::Adaptive { per_second: 10.0 })
        );
        for bad in [
            "1.5",
            "probability:-1",
            "adaptive:0",
            "adaptive:x",
            "sometimes",
        ] {
            let e = Sampler::parse(bad).unwrap_err();
            assert!(e.contains(bad), "{e}");
        }
    }

    #[test]
    fn probability_keeps_about_that_share_and_is_deterministic_per_trace() {
        let s = SamplerState::new(Sampler::Probability(0.1));
        let kept = ids(100_000).filter(|&t| s.decide_at(t, 0).0).count();
        assert!((9_000..11_000).contains(&kept), "kept {kept}");
        for t in ids(100) {
            assert_eq!(s.decide_at(t, 0), s.decide_at(t, 5));
            assert_eq!(s.decide_at(t, 0).1, 0.1);
        }
    }

    #[test]
    fn always_and_never_record_their_probability() {
        let t = TraceId::new(5).unwrap();
        assert_eq!(
            SamplerState::new(Sampler::Always).decide_at(t, 0),
            (true, 1.0)
        );
        assert_eq!(
            SamplerState::new(Sampler::Never).decide_at(t, 0),
            (false, 0.0)
        );
    }

    #[test]
    fn adaptive_converges_on_the_target_rate() {
        let s = SamplerState::new(Sampler::Adaptive { per_second: 100.0 });
        let mut sampled_per_second = Vec::new();
        let mut ids = ids(10_000_000);
        // 10 simulated seconds of 10,000 new traces per second.
        for sec in 0..10u64 {
            let mut kept = 0;
            for i in 0..10_000u64 {
                let now = 1_000_000_000_000 + sec * WINDOW_NS + i * (WINDOW_NS / 10_000);
                if s.decide_at(ids.next().unwrap(), now).0 {
                    kept += 1;
                }
            }
            sampled_per_second.push(kept);
        }
        // The first second samples everything (no rate known yet); later seconds settle
        // near the target.
        assert_eq!(sampled_per_second[0], 10_000);
        for &k in &sampled_per_second[2..] {
            assert!((60..=140).contains(&k), "{sampled_per_second:?}");
        }
        let p = f64::from_bits(s.probability.load(Ordering::Relaxed));
        assert!((0.008..0.012).contains(&p), "{p}");
    }
}
