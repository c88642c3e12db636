//! What weighing found: every message's candidate causes with their probabilities, and
//! how often each kind of message caused each kind (the connections mode's prior).

use foldhash::HashMap;

use crate::rows::{Indices, Rows};

use super::graph::Kind;

/// Every message's candidate causes: (cause's index, probability) by message, and its
/// probability of being spontaneous. Probabilities are kept in single precision: millions
/// of messages have several candidates each.
pub(super) struct CauseTable {
    parents: Rows<(u32, f32)>,
    spontaneous: Vec<f32>,
}

impl CauseTable {
    pub(super) fn with_capacity(n: usize) -> CauseTable {
        CauseTable {
            parents: Rows::with_capacity(n),
            spontaneous: Vec::with_capacity(n),
        }
    }

    pub(super) fn push(&mut self, parents: &[(u32, f32)], spontaneous: f32) {
        self.parents.push_row(parents.iter().copied());
        self.spontaneous.push(spontaneous);
    }

    /// Gives back the room the causes' table grew beyond its rows.
    pub(super) fn shrink_to_fit(&mut self) {
        self.parents.shrink_to_fit();
    }

    /// Appends `other`'s messages after these.
    pub(super) fn append(&mut self, other: CauseTable) {
        self.parents.append(other.parents);
        self.spontaneous.extend(other.spontaneous);
    }

    pub(super) fn parents(&self, i: u32) -> &[(u32, f32)] {
        self.parents.row(i as usize)
    }

    /// Whether message `j` is among message `i`'s candidate causes.
    pub(super) fn has(&self, i: u32, j: u32) -> bool {
        self.parents(i).iter().any(|&(k, _)| k == j)
    }

    /// Exchanges the probabilities of candidates `a` and `b` in message `i`'s row; where
    /// only one of them is there, it becomes the other.
    pub(super) fn exchange(&mut self, i: u32, a: u32, b: u32) {
        let row = self.parents.row_mut(i as usize);
        let at = |x: u32| row.iter().position(|&(k, _)| k == x);
        match (at(a), at(b)) {
            (Some(x), Some(y)) => {
                let (p, q) = (row[x].1, row[y].1);
                row[x].1 = q;
                row[y].1 = p;
            }
            (Some(x), None) => row[x].0 = b,
            (None, Some(y)) => row[y].0 = a,
            (None, None) => {}
        }
    }

    /// The messages each message may have caused.
    pub(super) fn children(&self) -> Rows<u32> {
        let n = self.parents.len();
        Rows::grouped(n, || {
            (0..n as u32).flat_map(|c| self.parents(c).iter().map(move |&(p, _)| (p as usize, c)))
        })
    }

    pub(super) fn spontaneous(&self, i: u32) -> f64 {
        self.spontaneous
            .get(i as usize)
            .copied()
            .map_or(1.0, f64::from)
    }

    pub(super) fn most_likely(&self, i: u32) -> Option<u32> {
        self.best(i).map(|(j, _)| j)
    }

    /// Message `i`'s most likely cause and its probability, if likelier than being
    /// spontaneous.
    fn best(&self, i: u32) -> Option<(u32, f32)> {
        let spontaneous = self.spontaneous.get(i as usize).copied().unwrap_or(1.0);
        self.parents(i)
            .iter()
            .filter(|(_, p)| *p > spontaneous)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .copied()
    }

    /// Each message's most likely cause where its probability is at least `p`.
    pub(super) fn likely_all(&self, p: f32) -> Indices {
        (0..self.parents.len() as u32)
            .map(|i| self.best(i).filter(|(_, q)| *q >= p).map(|(j, _)| j))
            .collect()
    }

    /// Each message's most likely cause.
    pub(super) fn most_likely_all(&self) -> Indices {
        (0..self.parents.len() as u32)
            .map(|i| self.most_likely(i))
            .collect()
    }
}

/// How often each kind of message caused each kind.
pub(super) struct Follows {
    /// (cause's kind, effect's kind) → times.
    pairs: HashMap<u64, f64>,
    /// Per effect's kind, the times it had a cause.
    effects: Vec<f64>,
}

impl Follows {
    pub(super) fn of(kinds: usize, links: impl Iterator<Item = (Kind, Kind)>) -> Follows {
        let mut f = Follows {
            pairs: HashMap::default(),
            effects: vec![0.0; kinds],
        };
        for (cause, effect) in links {
            *f.pairs.entry(Self::key(cause, effect)).or_default() += 1.0;
            f.effects[effect as usize] += 1.0;
        }
        f
    }

    fn key(cause: Kind, effect: Kind) -> u64 {
        (u64::from(cause) << 32) | u64::from(effect)
    }

    /// The log of the share of `effect`'s causes that were of kind `cause` (smoothed: a
    /// kind never seen is unlikely, not impossible).
    pub(super) fn prior(&self, cause: Kind, effect: Kind) -> f64 {
        let seen = self
            .pairs
            .get(&Self::key(cause, effect))
            .copied()
            .unwrap_or(0.0);
        let all = self.effects.get(effect as usize).copied().unwrap_or(0.0);
        ((seen + 0.5) / (all + 1.0)).ln()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_most_likely_cause_must_be_likelier_than_being_spontaneous() {
        let mut table = CauseTable::with_capacity(3);
        table.push(&[], 1.0);
        table.push(&[(0, 0.7), (2, 0.2)], 0.1);
        table.push(&[(0, 0.3)], 0.7);
        assert_eq!(table.most_likely(0), None);
        assert_eq!(table.most_likely(1), Some(0));
        assert_eq!(table.most_likely(2), None);
        assert_eq!(table.spontaneous(2), f64::from(0.7f32));
        // Past the table: spontaneous.
        assert_eq!(table.spontaneous(9), 1.0);
        let mut more = CauseTable::with_capacity(1);
        more.push(&[(1, 0.9)], 0.1);
        table.append(more);
        assert_eq!(table.parents(3), &[(1, 0.9)]);
        assert_eq!(table.most_likely_all().get(3), Some(1));
    }

    #[test]
    fn follows_gives_the_share_of_an_effects_causes_by_kind_smoothed() {
        let follows = Follows::of(3, [(0, 1), (0, 1), (0, 1), (2, 1)].into_iter());
        assert!((follows.prior(0, 1) - (3.5f64 / 5.0).ln()).abs() < 1e-12);
        assert!((follows.prior(2, 1) - (1.5f64 / 5.0).ln()).abs() < 1e-12);
        // Never seen: unlikely, not impossible.
        assert!(follows.prior(1, 1).is_finite());
        assert!(follows.prior(1, 1) < follows.prior(2, 1));
        assert!((follows.prior(0, 2) - 0.5f64.ln()).abs() < 1e-12);
    }
}
