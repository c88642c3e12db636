//! How well items were grouped (messages into traces, log lines into requests) against
//! the true grouping: B-cubed precision, recall and F1 (per item, the overlap of its
//! group with its true group, over each), the share of items whose group is exactly
//! their true group, and the share of true groups found exactly.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// A grouping's scores.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Grouping {
    /// Items scored.
    pub items: usize,
    /// B-cubed precision: per item, the share of its group that is in its true group.
    pub precision: f64,
    /// B-cubed recall: per item, the share of its true group that is in its group.
    pub recall: f64,
    /// The harmonic mean of the two.
    pub f1: f64,
    /// Items whose group is exactly their true group.
    pub exact_items: f64,
    /// True groups found exactly.
    pub exact_groups: f64,
}

/// Scores item `i`'s group `found[i]` against its true group `truth[i]` (labels of any
/// kind; the two slices are read up to the shorter).
pub fn bcubed<T: Hash + Eq, F: Hash + Eq>(truth: &[T], found: &[F]) -> Grouping {
    let n = truth.len().min(found.len());
    if n == 0 {
        return Grouping::default();
    }
    let mut true_groups: HashMap<&T, Vec<usize>> = HashMap::new();
    let mut found_groups: HashMap<&F, Vec<usize>> = HashMap::new();
    for i in 0..n {
        true_groups.entry(&truth[i]).or_default().push(i);
        found_groups.entry(&found[i]).or_default().push(i);
    }
    // Each group's items are in index order, so equal groups are equal vectors.
    let found_sets: HashSet<&[usize]> = found_groups.values().map(Vec::as_slice).collect();
    let (mut p, mut r, mut exact_items) = (0.0, 0.0, 0usize);
    for i in 0..n {
        let mine = &true_groups[&truth[i]];
        let theirs = &found_groups[&found[i]];
        let in_theirs: HashSet<usize> = theirs.iter().copied().collect();
        let both = mine.iter().filter(|k| in_theirs.contains(k)).count() as f64;
        p += both / theirs.len() as f64;
        r += both / mine.len() as f64;
        exact_items += usize::from(mine == theirs);
    }
    let exact_groups = true_groups
        .values()
        .filter(|g| found_sets.contains(g.as_slice()))
        .count();
    let (precision, recall) = (p / n as f64, r / n as f64);
    Grouping {
        items: n,
        precision,
        recall,
        f1: if precision + recall > 0.0 {
            2.0 * precision * recall / (precision + recall)
        } else {
            0.0
        },
        exact_items: exact_items as f64 / n as f64,
        exact_groups: exact_groups as f64 / true_groups.len() as f64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bcubed_counts_each_item_against_its_group_and_its_true_one() {
        // True: {a, b, c}, {d}; found: {a, b}, {c, d}.
        let s = bcubed(&[1, 1, 1, 2], &[7, 7, 8, 8]);
        // Precision: a, b 2/2; c, d 1/2. Recall: a, b 2/3; c 1/3; d 1/1.
        assert!((s.precision - 0.75).abs() < 1e-12);
        assert!((s.recall - (2.0 / 3.0 * 2.0 + 1.0 / 3.0 + 1.0) / 4.0).abs() < 1e-12);
        assert_eq!((s.exact_items, s.exact_groups), (0.0, 0.0));
        let right = bcubed(&[1, 1, 1, 2], &["x", "x", "x", "y"]);
        assert_eq!(
            (right.f1, right.exact_items, right.exact_groups),
            (1.0, 1.0, 1.0)
        );
        // {d} alone is found; {a, b, c} is split.
        let split = bcubed(&[1, 1, 1, 2], &[1, 1, 3, 2]);
        assert_eq!(split.exact_groups, 0.5);
        assert_eq!(split.exact_items, 0.25);
        assert_eq!(bcubed::<u8, u8>(&[], &[]), Grouping::default());
    }
}
