//! Numbers for pairs of small numbers (two variables, two log points, a key and a
//! source), given in the order the pairs are first seen, so that what is kept per pair
//! lives in vectors. The passes over time look a pair up per line or per match: in a
//! table when it is small (an index, not a hash), else in a map. The table has at most
//! 1 Mi cells. Learning links keeps each pair's matches (32 bytes, in the first-level
//! cache) apart from its chances, and finds a lag's window from its bit length: the
//! windows are more than twice apart, so each power of two holds at most one window's
//! end.

use std::collections::hash_map::Entry;

use foldhash::HashMap;

/// Pairs are numbered in a table when it has at most this many cells (4 MiB), else by
/// hash.
pub(crate) const TABLE_CELLS: usize = 1 << 20;

pub(crate) struct PairIndex {
    /// By `first * seconds + second`: the pair's number, `u32::MAX` for none yet.
    table: Vec<u32>,
    seconds: usize,
    /// Pairs the table has no cell for (all of them when it would be too large).
    by_hash: HashMap<u64, u32>,
    count: u32,
}

impl PairIndex {
    /// For pairs of numbers below `firsts` and `seconds`, in a table if it would have at
    /// most `table_limit` cells.
    pub(crate) fn new(firsts: usize, seconds: usize, table_limit: usize) -> PairIndex {
        let cells = firsts.saturating_mul(seconds);
        PairIndex {
            table: vec![u32::MAX; if cells <= table_limit { cells } else { 0 }],
            seconds,
            by_hash: HashMap::default(),
            count: 0,
        }
    }

    /// The pair's cell in the table, if it has one.
    #[inline(always)]
    fn cell(&self, first: u32, second: u32) -> Option<usize> {
        // Callers keep `second` below `seconds`; a cell past the table (a product
        // wrapped or not) is none: the table is empty whenever it would be that large.
        let cell = (first as usize).wrapping_mul(self.seconds) + second as usize;
        (cell < self.table.len()).then_some(cell)
    }

    /// The number of the pair (`first`, `second`), if it has one.
    #[inline(always)]
    pub(crate) fn find(&self, first: u32, second: u32) -> Option<usize> {
        let number = match self.cell(first, second) {
            Some(cell) => self.table[cell],
            None => *self.by_hash.get(&pair_key(first, second))?,
        };
        (number != u32::MAX).then_some(number as usize)
    }

    /// The number of the pair (`first`, `second`), and whether it is new.
    #[inline(always)]
    pub(crate) fn number(&mut self, first: u32, second: u32) -> (usize, bool) {
        let next = self.count;
        match self.cell(first, second) {
            Some(cell) => {
                let cell = &mut self.table[cell];
                if *cell != u32::MAX {
                    return (*cell as usize, false);
                }
                *cell = next;
            }
            None => match self.by_hash.entry(pair_key(first, second)) {
                Entry::Occupied(known) => return (*known.get() as usize, false),
                Entry::Vacant(cell) => {
                    cell.insert(next);
                }
            },
        }
        self.count += 1;
        (next as usize, true)
    }
}

/// A pair as one number, the key of a map by pair.
pub(crate) fn pair_key(first: u32, second: u32) -> u64 {
    (u64::from(first) << 32) | u64::from(second)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_numbered_in_the_order_first_seen_by_table_or_by_hash() {
        for limit in [usize::MAX, 0] {
            let mut index = PairIndex::new(5, 5, limit);
            let seen = [(1, 2), (2, 1), (1, 2), (4, 4), (0, 0), (2, 1)];
            let numbers: Vec<(usize, bool)> =
                seen.iter().map(|&(a, b)| index.number(a, b)).collect();
            assert_eq!(
                numbers,
                [
                    (0, true),
                    (1, true),
                    (0, false),
                    (2, true),
                    (3, true),
                    (1, false)
                ],
                "table limit {limit}"
            );
        }
    }

    #[test]
    fn a_rectangle_finds_what_it_numbered_by_table_or_by_hash() {
        for limit in [usize::MAX, 0] {
            let mut index = PairIndex::new(3, 2, limit);
            assert_eq!(index.find(2, 1), None);
            let seen = [(2, 1), (1, 0), (0, 1), (1, 0), (0, 1)];
            let numbers: Vec<(usize, bool)> =
                seen.iter().map(|&(a, b)| index.number(a, b)).collect();
            assert_eq!(
                numbers,
                [(0, true), (1, true), (2, true), (1, false), (2, false)],
                "table limit {limit}"
            );
            assert_eq!(
                [
                    index.find(2, 1),
                    index.find(1, 0),
                    index.find(0, 1),
                    index.find(0, 0)
                ],
                [Some(0), Some(1), Some(2), None],
                "table limit {limit}"
            );
        }
    }
}
