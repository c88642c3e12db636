//! The points of a duration scatter (start time against duration, one per trace, as
//! Jaeger's search page draws): every trace of a window when they are few; when they are
//! many, an even sample of them and the longest, whatever their number. The slow ones are
//! what the chart is looked at for, and a sample would lose most of them.
//!
//! The sample keeps the traces whose ids hash lowest (a bottom-k sketch): the same traces
//! whatever the order of the scan, and shards merge by keeping the lowest of both.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use causeway_model::{Span, Trace, TraceId};
use serde::Serialize;

/// One trace as a dot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Point {
    /// The trace.
    pub trace_id: TraceId,
    /// Its earliest span's start, Unix ns.
    pub start: u64,
    /// Latest end less earliest start, ns.
    pub duration: u64,
    /// Whether a span of it ended in error.
    pub error: bool,
}

impl Point {
    /// The trace's dot; `None` for a trace without spans.
    pub fn of(trace: &Trace) -> Option<Point> {
        let start = trace.spans.iter().map(|s| s.start).min()?;
        let end = trace.spans.iter().map(|s| s.end).max()?;
        Some(Point {
            trace_id: trace.trace_id,
            start,
            duration: end.saturating_sub(start),
            error: trace.spans.iter().any(Span::is_error),
        })
    }

    /// The id's place in the even sample: a mix of its bits, so sequential ids spread.
    fn rank(&self) -> u64 {
        let v = self.trace_id.get();
        let mut x = (v as u64) ^ ((v >> 64) as u64);
        // splitmix64's finalizer.
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        x ^ (x >> 31)
    }
}

/// The points kept from a window: `sampled` even ones and the `longest` longest.
#[derive(Debug)]
pub struct Scatter {
    even: usize,
    most_longest: usize,
    total: u64,
    /// Largest rank on top, so the one to drop is at hand; ties by trace id.
    sample: BinaryHeap<(u64, Point)>,
    /// Shortest on top; ties by trace id.
    longest: BinaryHeap<Reverse<(u64, Point)>>,
}

impl Scatter {
    /// Keeps at most `even` sampled points and `longest` longest ones.
    pub fn new(even: usize, longest: usize) -> Scatter {
        Scatter {
            even,
            most_longest: longest,
            total: 0,
            sample: BinaryHeap::new(),
            longest: BinaryHeap::new(),
        }
    }

    /// Counts a trace, keeping its point if it is in the sample or among the longest.
    pub fn add(&mut self, p: Point) {
        self.total += 1;
        self.offer(p);
    }

    fn offer(&mut self, p: Point) {
        self.sample.push((p.rank(), p));
        if self.sample.len() > self.even {
            self.sample.pop();
        }
        self.longest.push(Reverse((p.duration, p)));
        if self.longest.len() > self.most_longest {
            self.longest.pop();
        }
    }

    /// Folds another shard's points into these.
    pub fn merge(&mut self, other: Scatter) {
        self.total += other.total;
        // A point both sampled and among the longest is offered once, as in one scan.
        let mut offered = std::collections::HashSet::new();
        for p in other.kept() {
            if offered.insert(p.trace_id) {
                self.offer(p);
            }
        }
    }

    /// The sampled points, then the longest (a point may be both).
    fn kept(self) -> impl Iterator<Item = Point> {
        let longest = self.longest.into_iter().map(|Reverse((_, p))| p);
        self.sample.into_iter().map(|(_, p)| p).chain(longest)
    }

    /// Traces counted.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The points kept, each once, by start.
    pub fn points(self) -> Vec<Point> {
        let mut out: Vec<Point> = self.kept().collect();
        out.sort_by_key(|p| (p.start, p.trace_id));
        out.dedup_by_key(|p| p.trace_id);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(n: u128, duration: u64) -> Point {
        Point {
            trace_id: TraceId::new(n).unwrap(),
            start: n as u64 * 1000,
            duration,
            error: n.is_multiple_of(5),
        }
    }

    #[test]
    fn few_traces_are_all_kept() {
        let mut s = Scatter::new(100, 10);
        for n in 1..=50 {
            s.add(point(n, n as u64));
        }
        assert_eq!(s.total(), 50);
        let pts = s.points();
        assert_eq!(pts.len(), 50);
        assert!(pts.windows(2).all(|w| w[0].start < w[1].start));
    }

    #[test]
    fn many_traces_keep_a_sample_and_every_long_one() {
        let mut s = Scatter::new(200, 20);
        // Every 500th of 10 000 traces is slow: 20 slow ones.
        for n in 1..=10_000u128 {
            s.add(point(
                n,
                if n % 500 == 0 {
                    1_000_000
                } else {
                    n as u64 % 97
                },
            ));
        }
        assert_eq!(s.total(), 10_000);
        let pts = s.points();
        assert!(pts.len() <= 220 && pts.len() >= 200, "{}", pts.len());
        assert_eq!(pts.iter().filter(|p| p.duration == 1_000_000).count(), 20);
        // The sample spreads over the window: each tenth of it has some.
        for tenth in 0..10u64 {
            let lo = tenth * 1_000_000;
            assert!(
                pts.iter()
                    .any(|p| p.start >= lo && p.start < lo + 1_000_000),
                "nothing in tenth {tenth}"
            );
        }
    }

    #[test]
    fn shards_merged_keep_what_one_scan_keeps() {
        let mut one = Scatter::new(50, 5);
        let mut parts = [Scatter::new(50, 5), Scatter::new(50, 5)];
        for n in 1..=2_000u128 {
            let p = point(n, (n as u64 * 7919) % 10_007);
            one.add(p);
            parts[n as usize % 2].add(p);
        }
        let [mut a, b] = parts;
        a.merge(b);
        assert_eq!(a.total(), one.total());
        assert_eq!(a.points(), one.points());
    }
}
