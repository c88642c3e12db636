//! The learned order of log points (lprof's): the log points a line most often comes
//! right after, with a steady lag, and the recent lines of each such predecessor that
//! no line of its followers has followed yet.
//!
//! A log point's predecessors are the log points its lines come right after (on any
//! node, up to 4 lines back, each counted once) at least `predecessor_share` (20%) of the
//! time, each with the lag that holds 90% of those (100 µs to 30 ms). The walk keeps
//! recent lines only of log points that are predecessors; on equal times the later
//! request is followed, so that the hash maps' seeds never change the result.

use std::collections::VecDeque;

use crate::corpus::Corpus;
use crate::pair_index::{PairIndex, TABLE_CELLS};

use super::StitchOptions;

/// A line at a log point, while a line that follows it may still come: its request,
/// its time, and the log points whose lines have followed it already.
struct Printed {
    request: u32,
    at: i64,
    followed_by: Followers,
}

/// The followers of a log point (each numbered among its followers, see [`Before`])
/// whose lines have followed one of its lines: the first 64 as bits, so that marking
/// one allocates nothing.
#[derive(Default)]
struct Followers {
    bits: u64,
    more: Vec<u32>,
}

impl Followers {
    fn contains(&self, follower: u32) -> bool {
        match 1u64.checked_shl(follower) {
            Some(bit) => self.bits & bit != 0,
            None => self.more.contains(&follower),
        }
    }

    fn insert(&mut self, follower: u32) {
        match 1u64.checked_shl(follower) {
            Some(bit) => self.bits |= bit,
            None => self.more.push(follower),
        }
    }
}

/// A learned predecessor of a log point, as the walk reads it: where its recent lines
/// are in [`Recent`], the lag within which it is followed, and the log point's number
/// among its followers.
#[derive(Clone, Copy, Debug)]
pub(super) struct Before {
    lines: u32,
    window: i64,
    follower: u32,
}

/// A log point's predecessors as the walk reads them, and its own number in [`Recent`]
/// if it is a predecessor.
pub(super) type OrderFacts = (Vec<Before>, Option<u32>);

/// The recent lines of each log point that is a predecessor, latest last, by its
/// number ([`Before::lines`]).
pub(super) struct Recent(Vec<VecDeque<Printed>>);

impl Recent {
    /// The longest lag a predecessor is learned with.
    const KEPT_NS: i64 = 30_000_000;
    const KEPT_LINES: usize = 64;

    /// Numbers the predecessors and their followers: for each log point (by node point,
    /// as `predecessors` is), its predecessors as the walk reads them, and its own
    /// number if it is a predecessor.
    pub(super) fn numbered(predecessors: &[Vec<(u32, i64)>]) -> (Recent, Vec<OrderFacts>) {
        let mut own: Vec<Option<u32>> = vec![None; predecessors.len()];
        let mut followers = vec![0u32; predecessors.len()];
        let mut kept = 0u32;
        let mut numbered: Vec<OrderFacts> = predecessors
            .iter()
            .map(|before| {
                let before = before
                    .iter()
                    .filter_map(|&(a, window)| {
                        let lines = *own.get_mut(a as usize)?.get_or_insert_with(|| {
                            kept += 1;
                            kept - 1
                        });
                        let follower = followers.get_mut(a as usize)?;
                        *follower += 1;
                        Some(Before {
                            lines,
                            window,
                            follower: *follower - 1,
                        })
                    })
                    .collect();
                (before, None)
            })
            .collect();
        for (facts, own) in numbered.iter_mut().zip(own) {
            facts.1 = own;
        }
        let recent = Recent((0..kept).map(|_| VecDeque::new()).collect());
        (recent, numbered)
    }

    pub(super) fn add(&mut self, lines: u32, request: u32, at: i64) {
        let Some(lines) = self.0.get_mut(lines as usize) else {
            return;
        };
        while lines
            .front()
            .is_some_and(|p| at - p.at > Self::KEPT_NS || lines.len() == Self::KEPT_LINES)
        {
            lines.pop_front();
        }
        lines.push_back(Printed {
            request,
            at,
            followed_by: Followers::default(),
        });
    }

    /// The request of the latest line at one of a log point's predecessors, within the
    /// predecessor's lag, that no line of the log point has followed yet (each line at
    /// a log point is followed once by the next in its request: lprof's order).
    pub(super) fn followed(&self, predecessors: &[Before], t: i64) -> Option<u32> {
        let mut latest: Option<(i64, u32)> = None;
        for b in predecessors {
            let Some(lines) = self.0.get(b.lines as usize) else {
                continue;
            };
            // Latest first: past the first line outside the lag, all are. By index, as
            // in `follow`.
            for k in (0..lines.len()).rev() {
                let p = &lines[k];
                if t - p.at > b.window {
                    break;
                }
                if !p.followed_by.contains(b.follower) {
                    // The later request on a tie, whatever the order of the
                    // predecessors (they come from a hash map).
                    latest = latest.max(Some((p.at, p.request)));
                    break;
                }
            }
        }
        latest.map(|(_, request)| request)
    }

    /// Marks the latest line of `request` at each of a log point's predecessors, within
    /// the predecessor's lag of `t`, as followed. (A line past the lag is never again
    /// one that `followed` gives the log point: marking it would change nothing, and
    /// looking for it meant reading every recent line of a busy predecessor.)
    pub(super) fn follow(&mut self, predecessors: &[Before], request: u32, t: i64) {
        for b in predecessors {
            let Some(lines) = self.0.get_mut(b.lines as usize) else {
                continue;
            };
            // Latest first; by index, which compiles to a tighter loop than the
            // deque's iterator with `take_while`.
            for k in (0..lines.len()).rev() {
                let p = &mut lines[k];
                if t - p.at > b.window {
                    break;
                }
                if p.request == request && !p.followed_by.contains(b.follower) {
                    p.followed_by.insert(b.follower);
                    break;
                }
            }
        }
    }
}

/// For each (file, log point), by number ([`crate::corpus::Moment::node_point`]), the
/// ones its lines often come right after (on any node), soon: each with the lag within
/// which it does.
pub(super) fn predecessors(corpus: &Corpus, o: &StitchOptions) -> Vec<Vec<(u32, i64)>> {
    const WINDOWS_NS: [i64; 6] = [
        100_000, 300_000, 1_000_000, 3_000_000, 10_000_000, 30_000_000,
    ];
    let timeline = corpus.timeline();
    let mut seen = vec![0usize; corpus.node_point_count()];
    // The (later, earlier) node points seen one right after the other, and how often
    // within each window, by the pair's number.
    let mut pairs = PairIndex::new(
        corpus.node_point_count(),
        corpus.node_point_count(),
        TABLE_CELLS,
    );
    let mut ends: Vec<(u32, u32)> = Vec::new();
    let mut after: Vec<[u32; WINDOWS_NS.len() + 1]> = Vec::new();
    // Each line against the few lines before it (a fan-out's calls interleave), each
    // earlier log point once, at its latest.
    const LOOK_BACK: usize = 4;
    let mut counted: Vec<u32> = Vec::with_capacity(LOOK_BACK);
    for (k, b) in timeline.iter().enumerate() {
        if let Some(n) = seen.get_mut(b.node_point as usize) {
            *n += 1;
        }
        counted.clear();
        for a in timeline[k.saturating_sub(LOOK_BACK)..k].iter().rev() {
            if a.node_point == b.node_point || counted.contains(&a.node_point) {
                continue;
            }
            counted.push(a.node_point);
            let lag = b.time - a.time;
            let bucket = WINDOWS_NS
                .iter()
                .position(|&x| lag <= x)
                .unwrap_or(WINDOWS_NS.len());
            let (pair, new) = pairs.number(b.node_point, a.node_point);
            if new {
                ends.push((a.node_point, b.node_point));
                after.push([0; WINDOWS_NS.len() + 1]);
            }
            after[pair][bucket] += 1;
        }
    }
    let mut found: Vec<Vec<(u32, i64)>> = vec![Vec::new(); seen.len()];
    for (&(pa, pb), lags) in ends.iter().zip(&after) {
        let n = seen.get(pb as usize).copied().unwrap_or(0);
        // The smallest window holding 90% of the pair's lags.
        let total: usize = lags.iter().map(|&l| l as usize).sum();
        let mut within = 0;
        let Some(window) = WINDOWS_NS.iter().enumerate().find_map(|(i, &w)| {
            within += lags[i] as usize;
            (within * 10 >= total * 9).then_some(w)
        }) else {
            continue;
        };
        if n >= o.start_evidence && within as f64 >= o.predecessor_share * n as f64 {
            if let Some(found) = found.get_mut(pb as usize) {
                found.push((pa, window));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tie_between_predecessors_goes_the_same_way_in_any_order() {
        // Lines at two predecessors of one log point, at one instant, in two requests:
        // the predecessors' order comes from a hash map, the choice must not.
        let mut recent = Recent((0..2).map(|_| VecDeque::new()).collect());
        recent.add(0, 7, 1_000);
        recent.add(1, 3, 1_000);
        let before = |lines| Before {
            lines,
            window: 1_000_000,
            follower: 0,
        };
        let one = recent.followed(&[before(0), before(1)], 1_500);
        let other = recent.followed(&[before(1), before(0)], 1_500);
        assert_eq!(one, Some(7));
        assert_eq!(other, Some(7));
    }
}
