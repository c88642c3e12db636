//! A log-linear latency histogram: eight buckets per power of two, so any quantile is
//! within 6.25% of the true value, in a few hundred counters whatever the range, and two
//! histograms merge by adding counters.

use serde::Serialize;

/// Buckets per power of two (as a shift: 2^3 = 8).
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;

/// Latencies in nanoseconds, bucketed.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Histogram {
    counts: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

/// The bucket index of a value.
pub fn bucket_of(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let exp = 63 - v.leading_zeros(); // >= SUB_BITS
    let mantissa = (v >> (exp - SUB_BITS)) & (SUB - 1);
    ((exp - SUB_BITS + 1) as u64 * SUB + mantissa) as usize
}

/// The values `[low, high)` of a bucket.
pub fn bucket_bounds(index: usize) -> (u64, u64) {
    let i = index as u64;
    if i < SUB {
        return (i, i + 1);
    }
    let exp = (i / SUB) as u32 + SUB_BITS - 1;
    let mantissa = i % SUB;
    let width = 1u64 << (exp - SUB_BITS);
    let low = (SUB + mantissa) << (exp - SUB_BITS);
    (low, low.saturating_add(width))
}

/// Summary figures of a histogram, in nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Percentiles {
    /// Values recorded.
    pub count: u64,
    /// Mean.
    pub mean: u64,
    /// Smallest value.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest value.
    pub max: u64,
}

impl Histogram {
    /// Records one value.
    pub fn record(&mut self, v: u64) {
        let b = bucket_of(v);
        if b >= self.counts.len() {
            self.counts.resize(b + 1, 0);
        }
        self.counts[b] += 1;
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.count += 1;
        self.sum += v as u128;
    }

    /// Adds another histogram's values.
    pub fn merge(&mut self, other: &Histogram) {
        if other.count == 0 {
            return;
        }
        if other.counts.len() > self.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.min = if self.count == 0 {
            other.min
        } else {
            self.min.min(other.min)
        };
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.sum += other.sum;
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Sum of the values recorded.
    pub fn sum(&self) -> u128 {
        self.sum
    }

    /// The value at quantile `q` (0 to 1): the middle of its bucket, kept within the
    /// recorded minimum and maximum. 0 when empty.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (lo, hi) = bucket_bounds(i);
                let mid = lo + (hi - lo) / 2;
                return mid.clamp(self.min, self.max);
            }
        }
        self.max
    }

    /// Count, mean, min, median, p90, p99 and max.
    pub fn percentiles(&self) -> Percentiles {
        Percentiles {
            count: self.count,
            mean: if self.count == 0 {
                0
            } else {
                (self.sum / self.count as u128) as u64
            },
            min: self.min,
            p50: self.quantile(0.5),
            p90: self.quantile(0.9),
            p99: self.quantile(0.99),
            max: self.max,
        }
    }

    /// Non-empty buckets as `(index, count)`, in increasing value order.
    pub fn buckets(&self) -> impl Iterator<Item = (usize, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &c)| c > 0)
            .map(|(i, &c)| (i, c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn buckets_tile_the_number_line() {
        let mut expected_low = 0;
        for i in 0..400 {
            let (lo, hi) = bucket_bounds(i);
            assert_eq!(lo, expected_low, "bucket {i}");
            assert!(hi > lo);
            assert_eq!(bucket_of(lo), i);
            assert_eq!(bucket_of(hi - 1), i);
            expected_low = hi;
        }
    }

    #[test]
    fn quantiles_of_a_uniform_spread() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000);
        }
        let p = h.percentiles();
        assert_eq!(p.count, 1000);
        assert_eq!(p.min, 1000);
        assert_eq!(p.max, 1_000_000);
        assert_eq!(p.mean, 500_500);
        for (got, want) in [(p.p50, 500_000.0), (p.p90, 900_000.0), (p.p99, 990_000.0)] {
            assert!((got as f64 - want).abs() / want < 0.0625, "{got} vs {want}");
        }
    }

    #[test]
    fn empty_histograms_answer_zero() {
        let h = Histogram::default();
        assert_eq!(h.percentiles(), Percentiles::default());
    }

    proptest! {
        #[test]
        fn merging_equals_recording_everything(a in proptest::collection::vec(0u64..u64::MAX / 2, 0..50),
                                               b in proptest::collection::vec(0u64..10_000_000, 0..50)) {
            let (mut ha, mut hb, mut all) = (Histogram::default(), Histogram::default(), Histogram::default());
            for &v in &a { ha.record(v); all.record(v); }
            for &v in &b { hb.record(v); all.record(v); }
            ha.merge(&hb);
            prop_assert_eq!(ha, all);
        }

        #[test]
        fn a_quantile_lies_within_its_bucket_of_the_true_value(mut vs in proptest::collection::vec(1u64..1u64 << 50, 1..200), q in 0.0f64..1.0) {
            let mut h = Histogram::default();
            for &v in &vs { h.record(v); }
            vs.sort_unstable();
            let rank = ((q * vs.len() as f64).ceil() as usize).max(1);
            let truth = vs[rank - 1];
            let got = h.quantile(q);
            let (lo, hi) = bucket_bounds(bucket_of(truth));
            prop_assert!(got >= lo && got < hi, "{} not in [{}, {}) of {}", got, lo, hi, truth);
        }
    }
}
