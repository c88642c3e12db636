//! The critical path and self times of hand-built traces with known answers.

use crate::common;

use causeway_analysis::critical::{critical_path, self_times};
use causeway_model::Trace;
use common::{id_of, op, trace};
use proptest::prelude::*;

/// The path as (span id, start, end).
fn path(t: &Trace) -> Vec<(u64, u64, u64)> {
    critical_path(t)
        .iter()
        .map(|s| (id_of(t, s.span), s.start, s.end))
        .collect()
}

#[test]
fn sequential_children_each_take_their_turn() {
    let t = trace(vec![
        op(1, None, 0, 100),
        op(2, Some(1), 10, 40),
        op(3, Some(1), 50, 90),
    ]);
    assert_eq!(
        path(&t),
        vec![
            (1, 0, 10),
            (2, 10, 40),
            (1, 40, 50),
            (3, 50, 90),
            (1, 90, 100)
        ]
    );
}

#[test]
fn of_concurrent_children_the_last_to_finish_is_on_the_path() {
    let t = trace(vec![
        op(1, None, 0, 100),
        op(2, Some(1), 10, 80),
        op(3, Some(1), 20, 60),
    ]);
    assert_eq!(path(&t), vec![(1, 0, 10), (2, 10, 80), (1, 80, 100)]);
}

#[test]
fn a_sibling_still_running_at_the_cursor_is_not_on_the_path() {
    // When 3 started, 2 was still running: the request did not wait for 2 there.
    let t = trace(vec![
        op(1, None, 0, 100),
        op(2, Some(1), 10, 50),
        op(3, Some(1), 30, 90),
    ]);
    assert_eq!(path(&t), vec![(1, 0, 30), (3, 30, 90), (1, 90, 100)]);
}

#[test]
fn back_to_back_children_are_both_on_the_path() {
    let t = trace(vec![
        op(1, None, 0, 40),
        op(2, Some(1), 10, 20),
        op(3, Some(1), 20, 30),
    ]);
    assert_eq!(
        path(&t),
        vec![(1, 0, 10), (2, 10, 20), (3, 20, 30), (1, 30, 40)]
    );
}

#[test]
fn a_child_that_ends_after_its_parent_counts_only_inside_it() {
    let t = trace(vec![op(1, None, 0, 100), op(2, Some(1), 50, 150)]);
    assert_eq!(path(&t), vec![(1, 0, 50), (2, 50, 100)]);
}

#[test]
fn a_child_that_starts_before_its_parent_counts_only_inside_it() {
    let t = trace(vec![
        op(1, None, 0, 100),
        op(2, Some(1), 10, 50),
        op(3, Some(2), 5, 30),
    ]);
    assert_eq!(
        path(&t),
        vec![(1, 0, 10), (3, 10, 30), (2, 30, 50), (1, 50, 100)]
    );
}

#[test]
fn orphans_are_adopted_by_the_main_root() {
    // Span 5's parent (4) was never stored.
    let t = trace(vec![
        op(1, None, 0, 100),
        op(5, Some(4), 40, 70),
        op(6, Some(5), 50, 60),
    ]);
    assert_eq!(
        path(&t),
        vec![
            (1, 0, 40),
            (5, 40, 50),
            (6, 50, 60),
            (5, 60, 70),
            (1, 70, 100)
        ]
    );
}

#[test]
fn equal_timestamps_resolve_the_same_way_every_time() {
    let spans = vec![
        op(1, None, 0, 100),
        op(2, Some(1), 0, 100),
        op(3, Some(1), 0, 100),
        op(4, Some(1), 50, 50),
    ];
    let t = trace(spans.clone());
    assert_eq!(path(&t), vec![(2, 0, 100)]);
    let mut reversed = spans;
    reversed.reverse();
    assert_eq!(path(&trace(reversed)), vec![(2, 0, 100)]);
    assert_eq!(self_times(&t), vec![0, 100, 100, 0]);
}

#[test]
fn a_root_without_duration_has_an_empty_path() {
    let t = trace(vec![op(1, None, 7, 7)]);
    assert!(critical_path(&t).is_empty());
    assert!(critical_path(&trace(vec![])).is_empty());
}

#[test]
fn self_time_is_duration_less_the_union_of_children() {
    let t = trace(vec![
        op(1, None, 0, 100),
        op(2, Some(1), 10, 40),
        op(3, Some(1), 30, 60),
        op(4, Some(1), 90, 130),
    ]);
    // Children cover 10..60 and 90..100 of the root.
    assert_eq!(self_times(&t), vec![40, 30, 30, 40]);
}

#[test]
fn a_ten_thousand_deep_chain_does_not_exhaust_the_stack() {
    let n = 10_000u64;
    let spans = (1..=n)
        .map(|i| op(i, (i > 1).then(|| i - 1), i, 4 * n - i))
        .collect();
    let t = trace(spans);
    let p = critical_path(&t);
    // Every span but the innermost has a section on each side of its child.
    assert_eq!(p.len(), 2 * n as usize - 1);
    assert_eq!(p.iter().map(|s| s.end - s.start).sum::<u64>(), 4 * n - 2);
}

#[test]
fn a_ten_thousand_span_fan_out_takes_the_last_finisher_of_each_stretch() {
    // Children i = 0..10_000 start at 10 * i and last 15: each overlaps the next.
    let mut spans = vec![op(1, None, 0, 100_020)];
    for i in 0..10_000u64 {
        spans.push(op(2 + i, Some(1), 10 * i, 10 * i + 15));
    }
    let t = trace(spans);
    let p = critical_path(&t);
    assert_eq!(p.first().map(|s| (s.start, s.end)), Some((0, 10)));
    let last = p.last().unwrap();
    assert_eq!(
        (id_of(&t, last.span), last.start, last.end),
        (1, 100_005, 100_020)
    );
    assert_eq!(p.len(), 10_001);
}

fn arb_tree() -> impl Strategy<Value = Vec<(Option<usize>, u64, u64)>> {
    // (parent index among earlier spans, start, length); children may overflow parents.
    proptest::collection::vec(
        (any::<prop::sample::Index>(), 0u64..1_000, 0u64..500),
        1..60,
    )
    .prop_map(|raw| {
        raw.into_iter()
            .enumerate()
            .map(|(i, (p, start, len))| ((i > 0).then(|| p.index(i)), start, start + len))
            .collect()
    })
}

proptest! {
    #[test]
    fn sections_never_overlap_and_sum_to_the_root_duration(tree in arb_tree(), orphan in any::<bool>()) {
        let mut spans: Vec<_> = tree
            .iter()
            .enumerate()
            .map(|(i, &(p, s, e))| op(i as u64 + 1, p.map(|p| p as u64 + 1), s, e))
            .collect();
        if orphan {
            spans.push(op(999, Some(998), 100, 300));
        }
        let t = trace(spans);
        let root = causeway_analysis::main_root(&t).unwrap();
        let r = &t.spans[root];
        let p = critical_path(&t);
        let mut at = r.start;
        for s in &p {
            prop_assert!(s.start < s.end);
            prop_assert_eq!(s.start, at, "sections are contiguous from the root's start");
            let span = &t.spans[s.span];
            prop_assert!(s.start >= span.start && s.end <= span.end, "a section lies in its span");
            at = s.end;
        }
        if r.end > r.start {
            prop_assert_eq!(at, r.end);
        }
        prop_assert_eq!(p.iter().map(|s| s.end - s.start).sum::<u64>(), r.duration());
        let own = self_times(&t);
        for (i, s) in t.spans.iter().enumerate() {
            prop_assert!(own[i] <= s.duration());
            let on_path: u64 = p.iter().filter(|x| x.span == i).map(|x| x.end - x.start).sum();
            prop_assert!(on_path <= s.duration());
        }
    }
}
