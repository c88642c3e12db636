//! Requests of one node pair told apart by their size: a server's reads and writes to one
//! back-end (a cache's GET of 141 bytes and PUT of 167 with the value) are one node pair,
//! yet a request makes exactly three of the one and at most three of the other, after
//! different causes. Where a pair's request sizes fall into a few groups far apart, each
//! group is a kind of its own, so that delays, the kinds that cause them and quotas are
//! learned per group. Sizes that vary smoothly (bodies of every length) stay one kind.

use std::collections::BTreeMap;

use foldhash::HashMap;

use crate::connections::Connections;
use crate::slots::KindPair;

use super::graph::Graph;

/// A size this much larger than the one before it (a ratio, plus `GAP_BYTES`) starts a
/// group: a path's digits or a header's value move sizes by a few bytes, a body by more.
const GAP_RATIO: f64 = 1.08;
const GAP_BYTES: f64 = 2.0;

/// A group with fewer than one in `SMALL_SHARE` of its pair's requests, or fewer than
/// `SMALL_COUNT`, joins the group before it: too few to learn a kind from.
const SMALL_SHARE: u64 = 200;
const SMALL_COUNT: u64 = 30;

/// A pair with more groups than this is not split: its sizes vary, they do not tell
/// kinds apart.
const MOST_GROUPS: usize = 4;

/// Per node pair whose requests are split, the sizes where its groups after the first
/// start.
pub(super) struct SizeGroups {
    starts: HashMap<KindPair, Vec<u64>>,
}

impl SizeGroups {
    /// The groups of the requests in `graph` (messages to a server's fixed port), in the
    /// connections mode (WAP5's kinds are node pairs).
    pub(super) fn of(graph: &Graph<'_>, connections: &Connections) -> SizeGroups {
        let mut sizes: HashMap<KindPair, BTreeMap<u64, u64>> = HashMap::default();
        if !graph.by_connections() {
            return SizeGroups {
                starts: HashMap::default(),
            };
        }
        for i in (0..graph.messages.len()).filter(|&i| connections.is_request(i)) {
            *sizes
                .entry(graph.kind_pair(i as u32))
                .or_default()
                .entry(graph.messages[i].bytes)
                .or_default() += 1;
        }
        let starts = sizes
            .into_iter()
            .filter_map(|(pair, counts)| Some((pair, group_starts(&counts)?)))
            .collect();
        SizeGroups { starts }
    }

    /// Message `i`'s group within its node pair (0 for a message that is not a request,
    /// or whose pair is not split).
    pub(super) fn group(&self, graph: &Graph<'_>, connections: &Connections, i: u32) -> u32 {
        if !connections.is_request(i as usize) {
            return 0;
        }
        let bytes = graph.messages[i as usize].bytes;
        self.starts
            .get(&graph.kind_pair(i))
            .map_or(0, |s| s.partition_point(|&start| start <= bytes) as u32)
    }
}

/// Where the groups after the first start, given how many requests had each size; `None`
/// for one group, or more than `MOST_GROUPS`.
fn group_starts(counts: &BTreeMap<u64, u64>) -> Option<Vec<u64>> {
    let total: u64 = counts.values().sum();
    // (first size, last size, requests)
    let mut groups: Vec<(u64, u64, u64)> = Vec::new();
    for (&size, &n) in counts {
        match groups.last_mut() {
            Some(g) if size as f64 <= g.1 as f64 * GAP_RATIO + GAP_BYTES => {
                g.1 = size;
                g.2 += n;
            }
            _ => groups.push((size, size, n)),
        }
    }
    let small = |n: u64| n * SMALL_SHARE < total || n < SMALL_COUNT;
    let mut merged: Vec<(u64, u64, u64)> = Vec::new();
    for g in groups {
        match merged.last_mut() {
            Some(m) if small(g.2) || small(m.2) => {
                m.1 = g.1;
                m.2 += g.2;
            }
            _ => merged.push(g),
        }
    }
    (merged.len() > 1 && merged.len() <= MOST_GROUPS)
        .then(|| merged.iter().skip(1).map(|g| g.0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::graph::Kinds;
    use crate::link::tests::{listening_on, msg};
    use crate::link::Mode;
    use crate::reconcile::Message;

    /// A front end's reads (141 bytes) and writes (200) to a cache, 40 of each, each
    /// answered.
    fn reads_and_writes() -> Vec<Message> {
        let mut messages = Vec::new();
        for k in 0..80i64 {
            let (t, own) = (k * 1_000_000, format!("10.0.0.1:{}", 5000 + k));
            let mut call = msg(
                2 * k + 1,
                "front",
                &own,
                "cache",
                "10.0.0.2:90",
                Some(t),
                Some(t + 50),
            );
            call.bytes = if k % 2 == 0 { 141 } else { 200 };
            messages.push(call);
            messages.push(msg(
                2 * k + 2,
                "cache",
                "10.0.0.2:90",
                "front",
                &own,
                Some(t + 90),
                Some(t + 140),
            ));
        }
        messages
    }

    #[test]
    fn a_pairs_reads_and_writes_are_two_kinds_in_the_connections_mode_only() {
        let messages = reads_and_writes();
        let o = listening_on(&[("cache", 90)]);
        let kinds_of = |mode| {
            let (graph, connections) = Graph::of(&messages, mode, &o);
            let kinds = Kinds::of(&graph, &connections);
            (0..messages.len())
                .map(|i| kinds.of_message(i))
                .collect::<Vec<_>>()
        };
        let kinds = kinds_of(Mode::Connections);
        // Reads, writes and answers: three kinds.
        assert_ne!(kinds[0], kinds[2]);
        assert_eq!(kinds[0], kinds[4]);
        assert_eq!(kinds[2], kinds[6]);
        assert_eq!(kinds[1], kinds[3]);
        assert_ne!(kinds[1], kinds[0]);
        // WAP5's kinds are node pairs.
        let kinds = kinds_of(Mode::Faithful);
        assert_eq!(kinds[0], kinds[2]);
    }

    fn starts(sizes: &[(u64, u64)]) -> Option<Vec<u64>> {
        group_starts(&sizes.iter().copied().collect())
    }

    #[test]
    fn sizes_far_apart_are_groups_and_sizes_a_few_bytes_apart_are_one() {
        // Reads of 141-143 bytes, writes of 165-169 and 214-218.
        let cache = [
            (141, 3839),
            (142, 4602),
            (143, 5077),
            (165, 222),
            (167, 700),
            (169, 1000),
            (214, 85),
            (216, 683),
            (218, 1787),
        ];
        assert_eq!(starts(&cache), Some(vec![165, 214]));
        assert_eq!(starts(&[(139, 822), (140, 3684)]), None);
    }

    #[test]
    fn a_group_too_small_to_learn_from_joins_the_one_before() {
        // Writes that are one in four hundred requests, or twenty: one group with the
        // reads. One in fifty is a group.
        assert_eq!(starts(&[(141, 10_000), (142, 10_000), (218, 50)]), None);
        assert_eq!(starts(&[(141, 3000), (142, 3000), (218, 20)]), None);
        assert_eq!(
            starts(&[(141, 3000), (142, 2000), (218, 100)]),
            Some(vec![218])
        );
        // ... and a rare size between two groups joins the first.
        assert_eq!(
            starts(&[(100, 1000), (130, 10), (200, 1000)]),
            Some(vec![200])
        );
    }

    #[test]
    fn sizes_that_vary_everywhere_are_not_split() {
        // Bodies of every length: groups far apart, but too many to be kinds.
        let bodies: Vec<(u64, u64)> = (0..10).map(|k| (100 * 2u64.pow(k), 500)).collect();
        assert_eq!(starts(&bodies), None);
    }
}
