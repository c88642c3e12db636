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
    /// (`kinds`, numbers into `kind_pairs`): a pair of kinds is a slot when few causes
    /// of the first kind have several effects of the second, and it is filled nearly
    /// always when few causes of the first kind have none.
    pub(crate) fn learn(best_cause: &Indices, kinds: &[Kind], kind_pairs: &[(u32, u32)]) -> Slots {
        let mut effects: Vec<(u32, Kind)> = (0..kinds.len())
            .filter_map(|i| Some((best_cause.get(i)?, kinds[i])))
            .collect();
        effects.sort_unstable();
        // (cause kind, effect kind) -> causes with one such effect, with several.
        let mut tally: HashMap<(Kind, Kind), (u64, u64)> = HashMap::default();
        for run in effects.chunk_by(|a, b| a == b) {
            let (j, k) = run[0];
            let t = tally.entry((kinds[j as usize], k)).or_default();
            if run.len() == 1 {
                t.0 += 1;
            } else {
                t.1 += 1;
            }
        }
        let mut of_kind = vec![0u64; kind_pairs.len()];
        for &k in kinds {
            of_kind[k as usize] += 1;
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

/// A kind pair is a slot when at most one cause in this many has several effects.
const SLOT_EXCEPTIONS: u64 = 20;
/// ... and it was seen at least this often.
const SLOT_EVIDENCE: u64 = 20;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_kinds_of_effects_a_cause_has_once() {
        // Messages 0..40 are requests (kind 0); each causes one call (kind 1), and every
        // other request also two log writes (kind 2) and one cache read (kind 4); the last
        // 4 requests also cause an answer (kind 3), once each.
        let requests = 40u32;
        let mut kinds: Vec<Kind> = vec![0; requests as usize];
        let mut causes: Vec<Option<u32>> = vec![None; requests as usize];
        for r in 0..requests {
            kinds.push(1);
            causes.push(Some(r));
            if r % 2 == 0 {
                kinds.extend([2, 2, 4]);
                causes.extend([Some(r), Some(r), Some(r)]);
            }
        }
        for r in requests - 4..requests {
            kinds.push(3);
            causes.push(Some(r));
        }
        let best_cause: Indices = causes.into_iter().collect();
        let pairs = [(0, 1), (1, 2), (1, 3), (1, 4), (1, 5)];
        let slots = Slots::learn(&best_cause, &kinds, &pairs);
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
}
