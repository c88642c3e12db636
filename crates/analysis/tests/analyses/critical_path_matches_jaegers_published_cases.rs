//! The critical path agrees with Jaeger's UI on every test case Jaeger publishes for it
//! (jaegertracing/jaeger-ui, `packages/jaeger-ui/src/components/TracePage/CriticalPath/
//! testCases/test1.js` to `test9.js`, Apache-2.0; the traces transcribed here, times as
//! given), and leaves out the children Jaeger calls non-blocking.

use crate::common;

use causeway_analysis::critical::critical_path;
use causeway_model::span::{FOLLOWS_FROM, REF_TYPE};
use causeway_model::{KeyValue, Link, SpanId, SpanKind, Trace, TraceId};
use common::{id_of, op, span, trace};

/// The path as (span id, start, end), by start.
fn path(t: &Trace) -> Vec<(u64, u64, u64)> {
    critical_path(t)
        .iter()
        .map(|s| (id_of(t, s.span), s.start, s.end))
        .collect()
}

/// Jaeger's `startTime` and `duration` as a span's start and end.
fn at(id: u64, parent: Option<u64>, start: u64, duration: u64) -> causeway_model::Span {
    op(id, parent, start, start + duration)
}

const A: u64 = 0xa;
const B: u64 = 0xb;
const C: u64 = 0xc;
const D: u64 = 0xd;
const E: u64 = 0xe;
const X: u64 = 0xf;

#[test]
fn jaeger_test1_sequential_children() {
    let t = trace(vec![
        at(E, Some(C), 50, 10),
        at(C, None, 1, 100),
        at(D, Some(C), 20, 20),
    ]);
    assert_eq!(
        path(&t),
        vec![
            (C, 1, 20),
            (D, 20, 40),
            (C, 40, 50),
            (E, 50, 60),
            (C, 60, 101)
        ]
    );
}

#[test]
fn jaeger_test2_an_overlapped_child_still_running_is_left_out() {
    let t = trace(vec![
        at(X, None, 1, 100),
        at(A, Some(X), 10, 40),
        at(C, Some(X), 20, 40),
    ]);
    assert_eq!(path(&t), vec![(X, 1, 20), (C, 20, 60), (X, 60, 101)]);
}

#[test]
fn jaeger_test3_a_child_starting_after_its_parent_ended_is_dropped() {
    let mut root = span(1, None, "service-one", "send", SpanKind::Producer, 100, 140);
    root.attributes.push(KeyValue::new("span.kind", "producer"));
    let child = span(
        2,
        Some(1),
        "service-two",
        "async task 1",
        SpanKind::Client,
        200,
        500,
    );
    let t = trace(vec![root, child]);
    assert_eq!(path(&t), vec![(1, 100, 140)]);
}

#[test]
fn jaeger_test4_the_children_of_a_dropped_child_are_dropped() {
    let t = trace(vec![
        at(A, None, 1, 30),
        at(B, Some(A), 40, 40),
        at(C, Some(B), 50, 10),
    ]);
    assert_eq!(path(&t), vec![(A, 1, 31)]);
}

fn follows_from(mut s: causeway_model::Span) -> causeway_model::Span {
    let parent = s.parent_id.expect("a child");
    s.links.push(Link {
        trace_id: TraceId::new(common::TRACE).unwrap(),
        span_id: parent,
        attributes: vec![KeyValue::new(REF_TYPE, FOLLOWS_FROM)],
    });
    s
}

#[test]
fn jaeger_test5_follows_from_children_and_their_subtrees_are_left_out() {
    let t = trace(vec![
        at(A, None, 1, 30),
        follows_from(at(B, Some(A), 10, 10)),
        at(C, Some(B), 12, 2),
    ]);
    assert!(t.spans[t.index_of(SpanId::new(B).unwrap()).unwrap()].follows_from_parent());
    assert_eq!(path(&t), vec![(A, 1, 31)]);
}

#[test]
fn jaeger_test6_children_are_clipped_to_their_clipped_parent() {
    let t = trace(vec![
        at(A, None, 1, 29),
        at(B, Some(A), 15, 20),
        at(C, Some(B), 10, 15),
    ]);
    assert_eq!(path(&t), vec![(A, 1, 15), (C, 15, 25), (B, 25, 30)]);
}

#[test]
fn jaeger_test7_a_grandchild_overflowing_a_truncated_child() {
    let t = trace(vec![
        at(A, None, 1, 29),
        at(B, Some(A), 15, 20),
        at(C, Some(B), 20, 20),
    ]);
    assert_eq!(path(&t), vec![(A, 1, 15), (B, 15, 20), (C, 20, 30)]);
}

#[test]
fn jaeger_test8_a_child_overflowing_both_ends_covers_its_parent() {
    let t = trace(vec![at(A, None, 10, 20), at(B, Some(A), 5, 30)]);
    assert_eq!(path(&t), vec![(B, 10, 30)]);
}

#[test]
fn jaeger_test9_a_child_wholly_before_its_parent_is_dropped() {
    let t = trace(vec![at(A, None, 10, 20), at(B, Some(A), 1, 4)]);
    assert_eq!(path(&t), vec![(A, 10, 30)]);
}

#[test]
fn a_consumer_under_a_producer_does_not_block_it() {
    // The producer's span waits for the send, not for the consumer's work.
    let t = trace(vec![
        span(1, None, "api", "checkout", SpanKind::Server, 0, 100),
        span(2, Some(1), "api", "publish", SpanKind::Producer, 10, 30),
        span(3, Some(2), "worker", "consume", SpanKind::Consumer, 20, 90),
        span(4, Some(3), "worker", "write", SpanKind::Client, 40, 80),
    ]);
    assert_eq!(path(&t), vec![(1, 0, 10), (2, 10, 30), (1, 30, 100)]);
    // A consumer under anything else still blocks it.
    let t = trace(vec![
        span(1, None, "api", "checkout", SpanKind::Server, 0, 100),
        span(3, Some(1), "worker", "consume", SpanKind::Consumer, 20, 90),
    ]);
    assert_eq!(path(&t), vec![(1, 0, 20), (3, 20, 90), (1, 90, 100)]);
}
