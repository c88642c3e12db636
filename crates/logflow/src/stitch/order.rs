//! The learned order of log points (lprof's): the log points a line most often comes
//! right after, with a steady lag, and the recent lines of each such predecessor that
//! no line of its followers has followed yet.
//!
//! A log point's predecessors are the log points its lines come right after (on any
//! node, up to 4 lines back, each counted once) at least `predecessor_share` (20%) of the
//! time, or that two in three of their own lines come right before, within 1 ms (a log
//! point reached by several paths, a reply after a lookup or after a store), each with
//! the lag that holds 90% of those (100 µs to 30 ms). A predecessor is steady when at
//! least two in three of its own lines are followed by the log point, 90% of the lags
//! fall in a tenfold band, and the log point is not in turn a steady predecessor of it
//! (directly or through others): a step of one handler, such as a token issued 150 ms
//! after a password is checked. Steady predecessors are learned with lags up to 300
//! ms; ordinary ones only up to 30 ms, as past that the last line of a request looks
//! like the predecessor of the next one's first. The walk keeps recent lines only of
//! log points that are predecessors; on equal times the later request is followed, so
//! that the hash maps' seeds never change the result.

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

/// A log point's learned predecessor: its node point, the lag within which its lines
/// are followed, and whether it is ordinary, steady (see the module's doc), or both.
#[derive(Clone, Copy, Debug)]
pub(super) struct Predecessor {
    pub(super) point: u32,
    pub(super) window: i64,
    /// Followed within 30 ms: rule 3's predecessor (any longer, and the end of one
    /// request comes to look like the beginning of the next's predecessor).
    pub(super) ordinary: bool,
    pub(super) steady: bool,
    /// Fewer than one in three of its lines are followed by the log point.
    pub(super) rare: bool,
}

/// A learned predecessor of a log point, as the walk reads it: where its recent lines
/// are in [`Recent`], the lag within which it is followed, whether it is steady, and the
/// log point's number among its followers.
#[derive(Clone, Copy, Debug)]
pub(super) struct Before {
    lines: u32,
    window: i64,
    ordinary: bool,
    steady: bool,
    /// Whether the predecessor is of the log point's own node.
    same_node: bool,
    follower: u32,
}

/// A log point's predecessors as the walk reads them, and its own number in [`Recent`]
/// if it is a predecessor.
pub(super) type OrderFacts = (Vec<Before>, Option<u32>);

/// The recent lines of each log point that is a predecessor, latest last, by its
/// number ([`Before::lines`]).
pub(super) struct Recent(Vec<VecDeque<Printed>>);

impl Recent {
    /// The longest lag a (steady) predecessor is learned with.
    const KEPT_NS: i64 = 300_000_000;
    const KEPT_LINES: usize = 64;

    /// Numbers the predecessors and their followers: for each log point (by node point,
    /// as `predecessors` is), its predecessors as the walk reads them, and its own
    /// number if it is a predecessor.
    pub(super) fn numbered(
        predecessors: &[Vec<Predecessor>],
        files: &[u32],
    ) -> (Recent, Vec<OrderFacts>) {
        let mut own: Vec<Option<u32>> = vec![None; predecessors.len()];
        let mut followers = vec![0u32; predecessors.len()];
        let mut kept = 0u32;
        let mut numbered: Vec<OrderFacts> = predecessors
            .iter()
            .enumerate()
            .map(|(b, before)| {
                let own_file = files.get(b).copied();
                let before = before
                    .iter()
                    .filter_map(|p| {
                        let a = p.point;
                        let lines = *own.get_mut(a as usize)?.get_or_insert_with(|| {
                            kept += 1;
                            kept - 1
                        });
                        let follower = followers.get_mut(a as usize)?;
                        *follower += 1;
                        Some(Before {
                            lines,
                            window: p.window,
                            ordinary: p.ordinary,
                            steady: p.steady,
                            same_node: own_file.is_some()
                                && files.get(a as usize).copied() == own_file,
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
    /// a log point is followed once by the next in its request: lprof's order). A line
    /// of the log point's own node comes first: the step before in the same handler,
    /// where another node's line, as recent, may be another request's call on its way
    /// (a cache's lookup and its reply, while a store's read for another request ends).
    pub(super) fn followed(&self, predecessors: &[Before], t: i64) -> Option<u32> {
        self.followed_of(predecessors.iter().filter(|b| b.ordinary), t)
    }

    /// As [`Recent::followed`], of the steady predecessors alone.
    pub(super) fn followed_steadily(&self, predecessors: &[Before], t: i64) -> Option<u32> {
        self.followed_of(predecessors.iter().filter(|b| b.steady), t)
    }

    fn followed_of<'b>(
        &self,
        predecessors: impl Iterator<Item = &'b Before>,
        t: i64,
    ) -> Option<u32> {
        // The latest line of a predecessor on the line's own node, else of one on
        // another's.
        let mut latest: [Option<(i64, u32)>; 2] = [None, None];
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
                    let latest = &mut latest[usize::from(!b.same_node)];
                    *latest = (*latest).max(Some((p.at, p.request)));
                    break;
                }
            }
        }
        latest[0].or(latest[1]).map(|(_, request)| request)
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
/// which it does, and whether it is ordinary, steady or both.
pub(super) fn predecessors(corpus: &Corpus, o: &StitchOptions) -> Vec<Vec<Predecessor>> {
    const ORDINARY_NS: i64 = 30_000_000;
    const NEXT_STEP_NS: i64 = 1_000_000;
    const WINDOWS_NS: [i64; 8] = [
        100_000,
        300_000,
        1_000_000,
        3_000_000,
        10_000_000,
        30_000_000,
        100_000_000,
        300_000_000,
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
    let mut found: Vec<Vec<Predecessor>> = vec![Vec::new(); seen.len()];
    for (&(pa, pb), lags) in ends.iter().zip(&after) {
        let n = seen.get(pb as usize).copied().unwrap_or(0);
        // The smallest window holding 90% of the pair's lags.
        let total: usize = lags.iter().map(|&l| l as usize).sum();
        let mut within = 0;
        let Some((bucket, window)) = WINDOWS_NS.iter().enumerate().find_map(|(i, &w)| {
            within += lags[i] as usize;
            (within * 10 >= total * 9).then_some((i, w))
        }) else {
            continue;
        };
        // A steady lag: 90% of the lags within a tenfold band (the window's bucket and
        // the one below), as a handler's next step comes, not as the next request does.
        let band = lags[bucket] as usize + bucket.checked_sub(1).map_or(0, |b| lags[b] as usize);
        let before = seen.get(pa as usize).copied().unwrap_or(0);
        // Often enough for the log point's lines, or, within a millisecond, for the
        // predecessor's: a log point reached by several paths (a reply after a lookup,
        // or, less often, after a store) follows each path's last step.
        let often = within as f64 >= o.predecessor_share * n as f64
            || (window <= NEXT_STEP_NS && within * 3 >= before * 2);
        if n >= o.start_evidence && often {
            let ordinary = window <= ORDINARY_NS;
            let steady = total * 3 >= before * 2 && band * 10 >= total * 9;
            if let Some(found) = found.get_mut(pb as usize).filter(|_| ordinary || steady) {
                found.push(Predecessor {
                    point: pa,
                    window,
                    ordinary,
                    steady,
                    rare: total * 3 < before,
                });
            }
        }
    }
    // A steady predecessor the log point itself steadily comes before is the last line
    // of one request and the first of the next, at a steady pace (requests sent at a
    // fixed rate), not a sequence within one.
    let cyclic: Vec<(usize, usize)> = found
        .iter()
        .enumerate()
        .flat_map(|(b, ps)| {
            ps.iter()
                .enumerate()
                .filter(|(_, p)| p.steady)
                .map(move |(k, _)| (b, k))
        })
        .filter(|&(b, k)| comes_before(&found, b as u32, found[b][k].point))
        .collect();
    for (b, k) in cyclic {
        found[b][k].steady = false;
    }
    found
}

/// The file of each log point, by number.
pub(super) fn files(corpus: &Corpus) -> Vec<u32> {
    let mut file = vec![u32::MAX; corpus.node_point_count()];
    for m in corpus.timeline() {
        if let Some(f) = file.get_mut(m.node_point as usize) {
            *f = m.file;
        }
    }
    file
}

/// Whether each log point, by number, comes only after log points of other nodes, each
/// of which it follows in fewer than one in three of their lines: the first line of a
/// request a client sends once another has ended (the client's next call, one of
/// many), not a step that a handler, or the caller whose call it answers, always takes.
pub(super) fn after_others_rarely(predecessors: &[Vec<Predecessor>], file: &[u32]) -> Vec<bool> {
    predecessors
        .iter()
        .zip(file)
        .map(|(ps, own)| {
            !ps.is_empty()
                && ps
                    .iter()
                    .all(|p| p.rare && file.get(p.point as usize).is_some_and(|f| f != own))
        })
        .collect()
}

/// Whether log point `a` is among `b`'s steady predecessors, theirs, and so on. The search
/// reads at most `LIMIT` log points; past that, it answers yes (a steady predecessor
/// is then not trusted).
fn comes_before(predecessors: &[Vec<Predecessor>], a: u32, b: u32) -> bool {
    const LIMIT: usize = 4096;
    let mut seen: foldhash::HashSet<u32> = foldhash::HashSet::default();
    let mut stack = vec![b];
    while let Some(p) = stack.pop() {
        if p == a {
            return true;
        }
        if !seen.insert(p) {
            continue;
        }
        if seen.len() > LIMIT {
            return true;
        }
        if let Some(ps) = predecessors.get(p as usize) {
            stack.extend(ps.iter().filter(|q| q.steady).map(|q| q.point));
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stitch::tests::{at_ms, at_us};

    /// One node logging "hashing password" and, 150 ms later, "token issued" (a lag
    /// longer than ordinary predecessors are learned with), the next request `pace(k)`
    /// ms after the last one's token: the predecessors learned of each log point.
    fn hashing_and_token(pace: impl Fn(u64) -> u64) -> (Vec<Predecessor>, Vec<Predecessor>) {
        let mut text = String::new();
        let mut t = 0u64;
        for k in 0..40u64 {
            text += &format!("{} hashing password\n", at_ms(t));
            text += &format!("{} token issued\n", at_ms(t + 150));
            t += 150 + pace(k);
        }
        let corpus = Corpus::read(
            &[("auth.log".into(), text.into_bytes())],
            crate::drain::Options::default(),
        );
        let mut found = predecessors(&corpus, &StitchOptions::default());
        let mut of = |number: u32| {
            corpus
                .timeline()
                .iter()
                .find(|m| corpus.lines[m.line].number == number)
                .and_then(|m| found.get_mut(m.node_point as usize))
                .map(std::mem::take)
                .unwrap_or_default()
        };
        (of(1), of(2))
    }

    #[test]
    fn a_step_after_a_steady_lag_is_a_steady_predecessor_and_the_pace_of_requests_is_not() {
        // Requests 0.4 to 2.5 s apart.
        let (hashing, token) = hashing_and_token(|k| 400 + (k * 7919) % 2100);
        assert_eq!(token.len(), 1, "{token:?}");
        assert!(token[0].steady && !token[0].ordinary);
        assert_eq!(token[0].window, 300_000_000);
        assert!(hashing.is_empty(), "{hashing:?}");
    }

    #[test]
    fn a_step_whose_next_request_comes_as_steadily_is_not_trusted_either_way() {
        // Requests 20 to 290 ms apart: the pace falls in a tenfold band too, and each
        // log point would be the other's steady predecessor.
        let (hashing, token) = hashing_and_token(|k| 20 + (k * 7919) % 270);
        assert!(!token.is_empty() && !hashing.is_empty());
        assert!(token.iter().chain(&hashing).all(|p| !p.steady));
    }

    #[test]
    fn the_last_step_of_a_rarer_path_is_a_predecessor_of_the_line_it_always_precedes() {
        // A cache answers 100 calls, 50 ms apart: a lookup and its reply, or one call in
        // seven a store and its reply, each 0.2 ms after the call's first line; a worker
        // logs four lines between calls. Fewer than one reply in five comes after a
        // store, but every store is followed by one.
        let (mut text, mut worker) = (String::new(), String::new());
        for k in 0..100u64 {
            let t = k * 50_000;
            let (call, step) = if k % 7 == 0 {
                ("put", format!("entry stored key={k}"))
            } else {
                ("get", format!("lookup key={k} hit=false"))
            };
            text += &format!("{} started {call} request\n", at_us(t));
            text += &format!("{} {step}\n", at_us(t + 200));
            text += &format!("{} finished request\n", at_us(t + 400));
            for tick in 0..4 {
                worker += &format!("{} worker tick\n", at_us(t + 20_000 + tick * 1_000));
            }
        }
        let corpus = Corpus::read(
            &[
                ("cache.log".into(), text.into_bytes()),
                ("worker.log".into(), worker.into_bytes()),
            ],
            crate::drain::Options::default(),
        );
        let found = predecessors(&corpus, &StitchOptions::default());
        let point_of = |number: u32| {
            corpus
                .timeline()
                .iter()
                .find(|m| corpus.lines[m.line].number == number)
                .map(|m| m.node_point)
        };
        // Call 0 is a store: lines 1 to 3; call 1 a lookup.
        let (stored, finished) = (point_of(2), point_of(3));
        let reply = finished
            .and_then(|f| found.get(f as usize))
            .cloned()
            .unwrap_or_default();
        assert!(
            reply
                .iter()
                .any(|p| Some(p.point) == stored && p.window <= 1_000_000),
            "{reply:?}"
        );
        // The lookup, most replies' step, is one as before.
        assert!(
            reply.iter().any(|p| Some(p.point) == point_of(5)),
            "{reply:?}"
        );
    }

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
            ordinary: true,
            steady: false,
            same_node: false,
            follower: 0,
        };
        let one = recent.followed(&[before(0), before(1)], 1_500);
        let other = recent.followed(&[before(1), before(0)], 1_500);
        assert_eq!(one, Some(7));
        assert_eq!(other, Some(7));
    }

    #[test]
    fn a_predecessor_on_the_lines_own_node_comes_before_a_later_one_on_another() {
        // A lookup of request 4 on the line's own node, then a read of request 9 on
        // another node that the log point also follows; neither followed yet.
        let lines = || {
            let mut recent = Recent((0..2).map(|_| VecDeque::new()).collect());
            recent.add(0, 4, 1_000);
            recent.add(1, 9, 1_200);
            recent
        };
        let before = |lines, same_node| Before {
            lines,
            window: 1_000_000,
            ordinary: true,
            steady: true,
            same_node,
            follower: 0,
        };
        let both = [before(0, true), before(1, false)];
        let mut recent = lines();
        assert_eq!(recent.followed(&both, 1_500), Some(4));
        assert_eq!(recent.followed_steadily(&both, 1_500), Some(4));
        // Once the lookup is followed, the other node's line is taken.
        recent.follow(&both, 4, 1_500);
        assert_eq!(recent.followed(&both, 1_600), Some(9));
        // Without a line of its own node, the latest of any.
        let others = [before(0, false), before(1, false)];
        assert_eq!(lines().followed(&others, 1_500), Some(9));
    }
}
