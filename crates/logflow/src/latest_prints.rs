//! The walk's latest print of each value's key by each variable that links carry values
//! out of (a source): the request and time of the print, and the order of the pair's
//! first print, which puts a key's ties in order. A print older than the longest link's
//! window ties nothing; a pair printed again after one starts over in that order.
//!
//! By (key, source) in a table when there are few enough of both (an index per lookup,
//! not a hash), else in a map that lets go of the prints older than the longest link's
//! window whenever it has doubled, so that it holds about the prints of the last
//! seconds, whatever the log's length. The table is used up to 1 Mi cells (4 MiB: the
//! demo's and Nezha's logs); the two give the same requests. See `crate::stitch` for the
//! walk.

use foldhash::HashMap;

use crate::pair_index::{pair_key, PairIndex, TABLE_CELLS};

/// A print: its request, its time, and the order of its pair's first print.
pub(crate) type Print = (u32, i64, u32);

pub(crate) struct LatestPrints {
    by: By,
    longest_link_ns: i64,
    first_prints: u32,
}

enum By {
    /// Prints by the (key, source) pair's number in a table.
    Table {
        index: PairIndex,
        prints: Vec<Print>,
    },
    Map {
        prints: HashMap<u64, Print>,
        pruned_at: usize,
    },
}

impl LatestPrints {
    /// For keys numbered below `keys` and sources below `sources`.
    pub(crate) fn new(keys: usize, sources: usize, longest_link_ns: i64) -> LatestPrints {
        LatestPrints::with_table_limit(keys, sources, longest_link_ns, TABLE_CELLS)
    }

    /// [`LatestPrints::new`], in a table of at most `table_limit` cells, else a map.
    fn with_table_limit(
        keys: usize,
        sources: usize,
        longest_link_ns: i64,
        table_limit: usize,
    ) -> LatestPrints {
        let by = if keys.saturating_mul(sources) <= table_limit {
            By::Table {
                index: PairIndex::new(keys, sources, table_limit),
                prints: Vec::new(),
            }
        } else {
            By::Map {
                prints: HashMap::default(),
                pruned_at: 0,
            }
        };
        LatestPrints {
            by,
            longest_link_ns,
            first_prints: 0,
        }
    }

    /// The latest print of `key` by `source`, if one is kept (one older than the
    /// longest link's window may be).
    #[inline]
    pub(crate) fn get(&self, key: u32, source: u32) -> Option<Print> {
        match &self.by {
            By::Table { index, prints } => prints.get(index.find(key, source)?).copied(),
            By::Map { prints, .. } => prints.get(&pair_key(key, source)).copied(),
        }
    }

    /// `source` printed `key` at `t` in `request`.
    #[inline]
    pub(crate) fn record(&mut self, key: u32, source: u32, request: u32, t: i64) {
        let longest = self.longest_link_ns;
        let first_prints = &mut self.first_prints;
        let mut next_first = || {
            *first_prints = first_prints.wrapping_add(1);
            *first_prints
        };
        let latest = match &mut self.by {
            By::Table { index, prints } => match index.number(key, source) {
                // Numbered in first-seen order: a new pair's print goes at the end.
                (_, true) => {
                    prints.push((request, t, next_first()));
                    return;
                }
                (pair, false) => &mut prints[pair],
            },
            By::Map { prints, .. } => match prints.entry(pair_key(key, source)) {
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert((request, t, next_first()));
                    return;
                }
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            },
        };
        if t - latest.1 > longest {
            latest.2 = next_first();
        }
        (latest.0, latest.1) = (request, t);
    }

    /// Lets go of prints that tie nothing any more at `t`, when the map has doubled.
    pub(crate) fn let_go(&mut self, t: i64) {
        let longest = self.longest_link_ns;
        if let By::Map { prints, pruned_at } = &mut self.by {
            if prints.len() >= 2 * (*pruned_at).max(2048) {
                prints.retain(|_, print| t - print.1 <= longest);
                *pruned_at = prints.len();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: u32 = 1_500;
    const SOURCES: u32 = 3;

    /// The prints that may still tie at `t`, of every (key, source).
    fn tying(prints: &LatestPrints, t: i64, longest: i64) -> Vec<Option<Print>> {
        (0..KEYS)
            .flat_map(|key| (0..SOURCES).map(move |source| (key, source)))
            .map(|(key, source)| prints.get(key, source).filter(|p| t - p.1 <= longest))
            .collect()
    }

    #[test]
    fn a_table_and_a_map_keep_the_same_prints_that_may_tie() {
        let longest = 1_000;
        let (keys, sources) = (KEYS as usize, SOURCES as usize);
        let mut table = LatestPrints::with_table_limit(keys, sources, longest, usize::MAX);
        let mut map = LatestPrints::with_table_limit(keys, sources, longest, 0);
        assert!(matches!(table.by, By::Table { .. }) && matches!(map.by, By::Map { .. }));
        // Keys recur at random, more pairs than the map holds before it lets old prints
        // go; now and then the log falls quiet past the window.
        let mut t = 0i64;
        let mut state = 12_345u64;
        for request in 0..20_000u32 {
            state = state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1);
            let r = (state >> 33) as u32;
            t += if r.is_multiple_of(1_999) {
                5_000
            } else {
                i64::from(r % 3)
            };
            let (key, source) = (r % KEYS, (r / KEYS) % SOURCES);
            table.record(key, source, request, t);
            map.record(key, source, request, t);
            let pruned_before = pruned(&map);
            table.let_go(t);
            map.let_go(t);
            assert_eq!(table.get(key, source), map.get(key, source), "at {t}");
            if request.is_multiple_of(50) || pruned(&map) != pruned_before {
                assert_eq!(tying(&table, t, longest), tying(&map, t, longest), "at {t}");
            }
        }
        assert!(pruned(&map) > 0, "the map never let a print go");
    }

    /// How many prints the map kept when it last let old ones go.
    fn pruned(prints: &LatestPrints) -> usize {
        match prints.by {
            By::Map { pruned_at, .. } => pruned_at,
            By::Table { .. } => 0,
        }
    }

    #[test]
    fn a_pair_printed_again_after_the_window_starts_over_in_order() {
        let mut prints = LatestPrints::new(4, 2, 100);
        prints.record(0, 0, 7, 0);
        prints.record(1, 1, 8, 10);
        prints.record(0, 0, 9, 50);
        assert_eq!(prints.get(0, 0), Some((9, 50, 1)));
        prints.record(0, 0, 9, 500);
        assert_eq!(prints.get(0, 0), Some((9, 500, 3)));
        assert_eq!(prints.get(1, 1), Some((8, 10, 2)));
        assert_eq!(prints.get(1, 0), None);
    }
}
