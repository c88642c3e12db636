//! How many messages of a kind a message of another kind causes, where that is nearly
//! always the same (WAP5 links each message on its own, so a path instance may take two
//! of a server's calls to one service, or none, where every request makes one).
//!
//! With `LinkOptions::learn_slots`, the slots are learned from the most likely causes:
//! the (cause kind, effect kind) pairs where a cause has at most one effect of that kind,
//! and those where nearly every cause has one. A path instance then takes at most one such
//! effect per member, and a member that left one to another path takes the next it may
//! have caused, so that a request's alternative instances differ in which call they hold
//! rather than in how many, and their expected count stays on one shape.

use foldhash::{HashMap, HashSet};

use crate::rows::Indices;

/// A kind of message by its sender and receiver (numbered nodes).
type Kind = u32;

/// A kind of message by its nodes (clients as one).
pub(crate) type KindPair = (u32, u32);

/// How many messages of a kind a message of another kind causes, where that is nearly
/// always the same: a server that received its search service's answer sends one call to
/// reservation. Learned from the most likely causes.
#[derive(Default)]
pub(crate) struct Slots {
    /// (cause kind, effect kind) pairs where a cause has at most one such effect.
    pub(crate) at_most_one: HashSet<(KindPair, KindPair)>,
    /// ... and nearly every cause of its kind has one.
    pub(crate) exactly_one: HashSet<(KindPair, KindPair)>,
}

impl Slots {
    /// Learned from each message's most likely cause (`best_cause`) and its kind
    /// (`kinds`, numbers into `kind_pairs`; `of_pair` gives each kind's first of its node
    /// pair, as slots are by node pair): a pair of kinds is a slot when few causes of the
    /// first kind have several effects of the second, and it is filled nearly always when
    /// few causes of the first kind have none.
    pub(crate) fn learn(
        best_cause: &Indices,
        kinds: &[Kind],
        of_pair: &[Kind],
        kind_pairs: &[(u32, u32)],
    ) -> Slots {
        let kind = |i: usize| of_pair[kinds[i] as usize];
        let mut effects: Vec<(u32, Kind)> = (0..kinds.len())
            .filter_map(|i| Some((best_cause.get(i)?, kind(i))))
            .collect();
        effects.sort_unstable();
        // (cause kind, effect kind) -> causes with one such effect, with several.
        let mut tally: HashMap<(Kind, Kind), (u64, u64)> = HashMap::default();
        for run in effects.chunk_by(|a, b| a == b) {
            let (j, k) = run[0];
            let t = tally.entry((kind(j as usize), k)).or_default();
            if run.len() == 1 {
                t.0 += 1;
            } else {
                t.1 += 1;
            }
        }
        let mut of_kind = vec![0u64; kind_pairs.len()];
        for i in 0..kinds.len() {
            of_kind[kind(i) as usize] += 1;
        }
        let mut slots = Slots::default();
        for (&(ck, ek), &(one, several)) in &tally {
            let with = one + several;
            if several * SLOT_EXCEPTIONS > with || with < SLOT_EVIDENCE {
                continue;
            }
            let pair = (kind_pairs[ck as usize], kind_pairs[ek as usize]);
            slots.at_most_one.insert(pair);
            if with * SLOT_EXCEPTIONS >= of_kind[ck as usize] * (SLOT_EXCEPTIONS - 1) {
                slots.exactly_one.insert(pair);
            }
        }
        slots
    }
}

/// How many messages of a kind a message of another kind causes at most, nearly always
/// (a catalog request causes three cache reads), and which effects each message had by
/// the causes found: a cause that already had its quota of a kind before a message was
/// sent is not that message's cause (a cache write after a storage answer is not a
/// fourth read of the request that came a moment before; the reads of a request that
/// slept before making them are not a second set of another's). Learned, per round of
/// weighing, from the most likely causes. Kept in sorted vectors: at CoDeeN's scale
/// there are a million pairs of kinds, and a table per pair took 200 MB.
pub(crate) struct Quotas<'a> {
    /// Each message's kind.
    kinds: &'a [Kind],
    /// (cause kind, effect kind) as one key -> the most effects of that kind nearly
    /// every cause has, and whether nearly every message of the cause's kind has
    /// exactly that many; sorted by key.
    quota: Vec<(u64, u32, bool)>,
    /// (cause, effect) of the effects whose kinds have a quota, by cause, effect kind and
    /// send time.
    effects: Vec<(u32, u32)>,
}

fn pair_key(cause: Kind, effect: Kind) -> u64 {
    (u64::from(cause) << 32) | u64::from(effect)
}

impl<'a> Quotas<'a> {
    /// From each message's most likely cause (`best_cause`), its kind (`kinds`) and send
    /// time (`sent`).
    pub(crate) fn learn(
        best_cause: &Indices,
        kinds: &'a [Kind],
        sent: impl Fn(usize) -> Option<i64>,
    ) -> Quotas<'a> {
        let time = |i: u32| sent(i as usize).unwrap_or(i64::MIN);
        let kind = |i: u32| kinds[i as usize];
        let mut effects: Vec<(u32, u32)> = (0..kinds.len())
            .filter_map(|i| Some((best_cause.get(i)?, i as u32)))
            .collect();
        effects.sort_unstable_by_key(|&(j, i)| (j, kind(i), time(i)));
        // Each cause's run of effects of one kind: (pair of kinds, effects), by pair and
        // length.
        let mut runs: Vec<(u64, u32)> = effects
            .chunk_by(|a, b| (a.0, kind(a.1)) == (b.0, kind(b.1)))
            .map(|run| (pair_key(kind(run[0].0), kind(run[0].1)), run.len() as u32))
            .collect();
        runs.sort_unstable();
        let mut of_kind: Vec<u64> = Vec::new();
        for &k in kinds {
            if of_kind.len() <= k as usize {
                of_kind.resize(k as usize + 1, 0);
            }
            of_kind[k as usize] += 1;
        }
        let mut quota = Vec::new();
        for pair in runs.chunk_by(|a, b| a.0 == b.0) {
            let causes = pair.len() as u64;
            if causes < SLOT_EVIDENCE {
                continue;
            }
            // The smallest count that at most one cause in SLOT_EXCEPTIONS exceeds.
            let within = pair.partition_point(|r| {
                let above = causes - pair.partition_point(|q| q.1 <= r.1) as u64;
                above * SLOT_EXCEPTIONS > causes
            });
            if let Some(&(key, n)) = pair.get(within) {
                let exactly = pair.iter().filter(|r| r.1 == n).count() as u64;
                let cause_kind = (key >> 32) as usize;
                let messages = of_kind.get(cause_kind).copied().unwrap_or(0);
                let exact = exactly * SLOT_EXCEPTIONS >= messages * (SLOT_EXCEPTIONS - 1);
                quota.push((key, n, exact));
            }
        }
        drop(runs);
        let has_quota = |key: u64| quota.binary_search_by_key(&key, |q| q.0).is_ok();
        effects.retain(|&(j, i)| has_quota(pair_key(kind(j), kind(i))));
        effects.shrink_to_fit();
        Quotas {
            kinds,
            quota,
            effects,
        }
    }

    /// The quota of effects of kind `effect` a cause of kind `cause` has, and whether
    /// nearly every such cause makes exactly that many.
    pub(crate) fn quota(&self, cause: Kind, effect: Kind) -> Option<(u32, bool)> {
        let key = pair_key(cause, effect);
        let at = self.quota.binary_search_by_key(&key, |q| q.0).ok()?;
        let (_, n, exact) = self.quota[at];
        Some((n, exact))
    }

    /// The quotas alone: `made` counts nothing after.
    pub(crate) fn without_counts(mut self) -> Self {
        self.effects = Vec::new();
        self
    }

    /// The kinds of effects nearly every cause of kind `cause` makes exactly so many of:
    /// (effect kind, how many).
    pub(crate) fn exact(&self, cause: Kind) -> impl Iterator<Item = (Kind, u32)> + '_ {
        let from = self.quota.partition_point(|q| q.0 < pair_key(cause, 0));
        self.quota[from..]
            .iter()
            .take_while(move |q| (q.0 >> 32) as Kind == cause)
            .filter(|q| q.2)
            .map(|q| (q.0 as Kind, q.1))
    }

    /// How many messages of kind `effect_kind` message `j` had caused before `at`, by the
    /// causes it was learned from (`sent` as there), against its quota; `None` for a pair
    /// of kinds with no quota.
    pub(crate) fn made(
        &self,
        j: u32,
        effect_kind: Kind,
        at: i64,
        sent: impl Fn(usize) -> Option<i64>,
    ) -> Option<Made> {
        let (quota, exact) = self.quota(self.kinds[j as usize], effect_kind)?;
        let time = |i: u32| sent(i as usize).unwrap_or(i64::MIN);
        let kind = |i: u32| self.kinds[i as usize];
        let from = self
            .effects
            .partition_point(|&(c, i)| (c, kind(i)) < (j, effect_kind));
        let before = self.effects[from..]
            .partition_point(|&(c, i)| (c, kind(i)) == (j, effect_kind) && time(i) < at);
        Some(Made {
            made: before,
            quota: quota as usize,
            exact,
        })
    }
}

/// What a cause had made of a kind by some time, against its quota.
pub(crate) struct Made {
    made: usize,
    quota: usize,
    /// Nearly every cause of its kind makes exactly `quota`.
    exact: bool,
}

impl Made {
    /// It had made its quota.
    pub(crate) fn full(&self) -> bool {
        self.made >= self.quota
    }

    /// It had made fewer than nearly every cause of its kind makes, exactly.
    pub(crate) fn owes(&self) -> bool {
        self.exact && self.made < self.quota
    }
}

/// A kind pair is a slot when at most one cause in this many has several effects.
const SLOT_EXCEPTIONS: u64 = 20;
/// ... and it was seen at least this often.
const SLOT_EVIDENCE: u64 = 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_are_the_most_effects_nearly_every_cause_has_and_fill_in_time() {
        // Messages 0..40 are requests (kind 0), each causing three reads (kind 1) 1, 2 and
        // 3 µs after time 1000 * its number; the first also causes a fourth (4 µs), one
        // answer (kind 2) in 40 having several is within the exceptions. Kind 3 has
        // too few causes to tell.
        let mut kinds: Vec<Kind> = vec![0; 40];
        let mut causes: Vec<Option<u32>> = vec![None; 40];
        let mut sent: Vec<i64> = (0..40).map(|r| r * 1000).collect();
        for r in 0..40u32 {
            let reads = if r == 0 { 4 } else { 3 };
            for k in 1..=reads {
                kinds.push(1);
                causes.push(Some(r));
                sent.push(i64::from(r) * 1000 + k);
            }
        }
        kinds.push(3);
        causes.push(Some(5));
        sent.push(5_010);
        let best_cause: Indices = causes.into_iter().collect();
        let at = |i: usize| sent.get(i).copied();
        let quotas = Quotas::learn(&best_cause, &kinds, at);
        assert_eq!(quotas.quota(0, 1), Some((3, true)));
        assert_eq!(quotas.quota(0, 3), None);
        // Request 5 had its three reads by 5 003 µs, not before: it owes them until then.
        let made = |at_us| quotas.made(5, 1, at_us, at).expect("a quota");
        assert!(!made(5_003).full() && made(5_003).owes());
        assert!(made(5_004).full() && !made(5_004).owes());
        // A kind with no quota is counted against none.
        assert!(quotas.made(5, 3, 9_000, at).is_none());
    }

    /// `requests` requests (kind 0, messages 0..requests), then the effects of each:
    /// their kinds as `made` gives them. Each message's kind and cause.
    fn requests_making(requests: u32, made: impl Fn(u32) -> Vec<Kind>) -> (Vec<Kind>, Indices) {
        let mut kinds: Vec<Kind> = vec![0; requests as usize];
        let mut causes: Vec<Option<u32>> = vec![None; requests as usize];
        for r in 0..requests {
            for kind in made(r) {
                kinds.push(kind);
                causes.push(Some(r));
            }
        }
        (kinds, causes.into_iter().collect())
    }

    #[test]
    fn slots_are_kinds_of_effects_a_cause_has_once() {
        // Messages 0..40 are requests (kind 0); each causes one call (kind 1), and every
        // other request also two log writes (kind 2) and one cache read (kind 4); the last
        // 4 requests also cause an answer (kind 3), once each.
        let (kinds, best_cause) = requests_making(40, |r| {
            let mut made = vec![1];
            if r % 2 == 0 {
                made.extend([2, 2, 4]);
            }
            if r >= 36 {
                made.push(3);
            }
            made
        });
        let pairs = [(0, 1), (1, 2), (1, 3), (1, 4), (1, 5)];
        let slots = Slots::learn(&best_cause, &kinds, &[0, 1, 2, 3, 4], &pairs);
        let call = (pairs[0], pairs[1]);
        assert!(slots.at_most_one.contains(&call));
        assert!(slots.exactly_one.contains(&call));
        // Two writes from half the requests: not a slot.
        assert!(!slots.at_most_one.contains(&(pairs[0], pairs[2])));
        // One answer from 4 requests: too little seen to tell.
        assert!(!slots.at_most_one.contains(&(pairs[0], pairs[3])));
        // A cache read from half the requests: once at most, not always.
        let read = (pairs[0], pairs[4]);
        assert!(slots.at_most_one.contains(&read));
        assert!(!slots.exactly_one.contains(&read));
        assert_eq!(slots.at_most_one.len(), 2);
        assert_eq!(slots.exactly_one.len(), 1);
    }

    #[test]
    fn slots_are_by_node_pair_whatever_size_groups_a_pair_has() {
        // Each of 40 requests (kind 0) makes one read (kind 1) and one write (kind 2) to
        // one back-end: two kinds of one node pair, so two effects of that pair.
        let (kinds, best_cause) = requests_making(40, |_| vec![1, 2]);
        let pairs = [(0, 1), (1, 2), (1, 2)];
        let slots = Slots::learn(&best_cause, &kinds, &[0, 1, 1], &pairs);
        assert!(slots.at_most_one.is_empty());
        // Kinds of their own, each is one per request.
        let slots = Slots::learn(&best_cause, &kinds, &[0, 1, 2], &pairs);
        assert!(slots.at_most_one.contains(&(pairs[0], pairs[1])));
    }
}
