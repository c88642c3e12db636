//! Numbers for pairs of small numbers (two variables, two log points), given in the
//! order the pairs are first seen, so that what is counted per pair lives in vectors.
//! The passes over time look a pair up per line or per match: in a square table when
//! it is small (an index, not a hash), else in a map.

use std::collections::hash_map::Entry;

use foldhash::HashMap;

/// Pairs are numbered in a square table when it has at most this many cells (4 MiB),
/// else by hash.
pub(crate) const TABLE_CELLS: usize = 1 << 20;

pub(crate) struct PairIndex {
    /// By `first * side + second`: the pair's number, `u32::MAX` for none yet.
    table: Vec<u32>,
    side: usize,
    by_hash: HashMap<u64, u32>,
    count: u32,
}

impl PairIndex {
    /// For pairs of numbers below `side`, in a table if it would have at most
    /// `table_limit` cells.
    pub(crate) fn new(side: usize, table_limit: usize) -> PairIndex {
        let cells = side.saturating_mul(side);
        PairIndex {
            table: vec![u32::MAX; if cells <= table_limit { cells } else { 0 }],
            side,
            by_hash: HashMap::default(),
            count: 0,
        }
    }

    /// The number of the pair (`first`, `second`), and whether it is new.
    #[inline(always)]
    pub(crate) fn number(&mut self, first: u32, second: u32) -> (usize, bool) {
        let next = self.count;
        if self.table.is_empty() {
            match self
                .by_hash
                .entry((u64::from(first) << 32) | u64::from(second))
            {
                Entry::Occupied(known) => return (*known.get() as usize, false),
                Entry::Vacant(cell) => {
                    cell.insert(next);
                }
            }
        } else {
            let cell = &mut self.table[first as usize * self.side + second as usize];
            if *cell != u32::MAX {
                return (*cell as usize, false);
            }
            *cell = next;
        }
        self.count += 1;
        (next as usize, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_numbered_in_the_order_first_seen_by_table_or_by_hash() {
        for limit in [usize::MAX, 0] {
            let mut index = PairIndex::new(5, limit);
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
}
