//! Stitching scored against ground truth: B-cubed precision, recall and F1 of lines
//! grouped into requests (per line, the overlap of its request with its true request,
//! over each), and the share of lines whose request is exactly their true request.

use std::hash::Hash;

use foldhash::{HashMap, HashSet};

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score {
    pub lines: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    pub exact: f64,
}

/// Scores `found` (each line's request) against `truth` (each line's true request),
/// lines matched by key; a line `found` leaves out is a request of its own.
pub fn bcubed<K: Hash + Eq + Clone, T: Hash + Eq, F: Hash + Eq>(
    truth: &[(K, T)],
    found: &HashMap<K, F>,
) -> Score {
    let mut true_groups: HashMap<&T, HashSet<usize>> = HashMap::default();
    let mut found_groups: HashMap<Option<&F>, HashSet<usize>> = HashMap::default();
    let mut alone = Vec::new();
    for (i, (key, t)) in truth.iter().enumerate() {
        true_groups.entry(t).or_default().insert(i);
        match found.get(key) {
            Some(f) => {
                found_groups.entry(Some(f)).or_default().insert(i);
            }
            None => alone.push(i),
        }
    }
    let (mut p, mut r, mut exact) = (0.0, 0.0, 0usize);
    for (i, (key, t)) in truth.iter().enumerate() {
        let mine = &true_groups[t];
        let single: HashSet<usize> = std::iter::once(i).collect();
        let theirs = found.get(key).map_or(&single, |f| &found_groups[&Some(f)]);
        let both = mine.intersection(theirs).count() as f64;
        p += both / theirs.len() as f64;
        r += both / mine.len() as f64;
        exact += usize::from(mine == theirs);
    }
    let n = truth.len().max(1) as f64;
    let (precision, recall) = (p / n, r / n);
    let f1 = if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    };
    Score {
        lines: truth.len(),
        precision,
        recall,
        f1,
        exact: exact as f64 / n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bcubed_counts_each_line_against_its_request_and_its_true_one() {
        // True: {a, b, c}, {d}; found: {a, b}, {c, d}.
        let truth = [("a", 1), ("b", 1), ("c", 1), ("d", 2)];
        let found: HashMap<&str, u32> = [("a", 7), ("b", 7), ("c", 8), ("d", 8)]
            .into_iter()
            .collect();
        let s = bcubed(&truth, &found);
        // Precision: a, b 2/2; c, d 1/2. Recall: a, b 2/3; c 1/3; d 1/1.
        assert!((s.precision - 0.75).abs() < 1e-12);
        assert!((s.recall - (2.0 / 3.0 * 2.0 + 1.0 / 3.0 + 1.0) / 4.0).abs() < 1e-12);
        assert_eq!(s.exact, 0.0);
        // All right; and a line left out is alone.
        let right: HashMap<&str, u32> = [("a", 1), ("b", 1), ("c", 1), ("d", 2)]
            .into_iter()
            .collect();
        assert_eq!(bcubed(&truth, &right).f1, 1.0);
        assert_eq!(bcubed(&truth, &right).exact, 1.0);
        let partial: HashMap<&str, u32> = [("a", 1), ("b", 1), ("c", 1)].into_iter().collect();
        assert_eq!(bcubed(&truth, &partial).exact, 1.0);
        let none: HashMap<&str, u32> = HashMap::default();
        let s = bcubed(&truth, &none);
        assert_eq!(s.precision, 1.0);
        assert!((s.recall - (1.0 / 3.0 * 3.0 + 1.0) / 4.0).abs() < 1e-12);
    }
}
