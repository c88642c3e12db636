//! Stitching scored against ground truth: B-cubed precision, recall and F1 of lines
//! grouped into requests (per line, the overlap of its request with its true request,
//! over each), and the share of lines whose request is exactly their true request.

use std::hash::Hash;

use foldhash::HashMap;

pub use causeway_analysis::grouping::Grouping as Score;

/// Scores `found` (each line's request) against `truth` (each line's true request),
/// lines matched by key; a line `found` leaves out is a request of its own.
pub fn bcubed<K: Hash + Eq, T: Hash + Eq, F: Hash + Eq>(
    truth: &[(K, T)],
    found: &HashMap<K, F>,
) -> Score {
    let true_groups: Vec<&T> = truth.iter().map(|(_, t)| t).collect();
    // A line left out is alone: its own index is its group.
    let found_groups: Vec<Result<&F, usize>> = truth
        .iter()
        .enumerate()
        .map(|(i, (key, _))| found.get(key).ok_or(i))
        .collect();
    causeway_analysis::grouping::bcubed(&true_groups, &found_groups)
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
        assert_eq!(s.exact_items, 0.0);
        // All right; and a line left out is alone.
        let right: HashMap<&str, u32> = [("a", 1), ("b", 1), ("c", 1), ("d", 2)]
            .into_iter()
            .collect();
        assert_eq!(bcubed(&truth, &right).f1, 1.0);
        assert_eq!(bcubed(&truth, &right).exact_items, 1.0);
        let partial: HashMap<&str, u32> = [("a", 1), ("b", 1), ("c", 1)].into_iter().collect();
        assert_eq!(bcubed(&truth, &partial).exact_items, 1.0);
        let none: HashMap<&str, u32> = HashMap::default();
        let s = bcubed(&truth, &none);
        assert_eq!(s.precision, 1.0);
        assert!((s.recall - (1.0 / 3.0 * 3.0 + 1.0) / 4.0).abs() < 1e-12);
    }
}
