//! Property: whatever a program does with spans (create them under the current span,
//! under an explicit parent or as roots; enter, exit, clone and drop them in any order;
//! hand them to another thread), the exclusive subscriber records the same spans, with
//! the same parents, events and ends-after-children order, as the Layer on the Registry.

use std::collections::BTreeSet;

use causeway::model::Span;
use causeway::testing::Recorder;
use causeway::{Config, Mode};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    /// A new span under the current one.
    New,
    /// A new span with handle `k` as its explicit parent.
    NewChildOf(usize),
    /// A new root span (`parent: None`).
    NewRoot,
    Enter(usize),
    Exit,
    Drop(usize),
    Clone(usize),
    Event,
    /// A child of handle `k`, made, entered and closed on another thread.
    ChildOnAnotherThread(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::New),
        1 => (0..8usize).prop_map(Op::NewChildOf),
        1 => Just(Op::NewRoot),
        3 => (0..8usize).prop_map(Op::Enter),
        3 => Just(Op::Exit),
        2 => (0..8usize).prop_map(Op::Drop),
        1 => (0..8usize).prop_map(Op::Clone),
        2 => Just(Op::Event),
        1 => (0..8usize).prop_map(Op::ChildOnAnotherThread),
    ]
}

/// Runs `ops` (span names and event names numbered in order, so both runs name alike).
fn run(ops: &[Op], recorder: &Recorder) {
    recorder.in_scope(|| {
        let mut handles: Vec<tracing::Span> = Vec::new();
        let mut entered: Vec<tracing::span::EnteredSpan> = Vec::new();
        let mut n = 0;
        let mut name = || {
            n += 1;
            n
        };
        for op in ops {
            match op {
                Op::New => {
                    let id = name();
                    handles.push(tracing::info_span!("span", n = id));
                }
                Op::NewChildOf(k) if !handles.is_empty() => {
                    let id = name();
                    let parent = handles[k % handles.len()].clone();
                    handles.push(tracing::info_span!(parent: &parent, "span", n = id));
                }
                Op::NewRoot => {
                    let id = name();
                    handles.push(tracing::info_span!(parent: None, "span", n = id));
                }
                Op::Enter(k) if !handles.is_empty() => {
                    entered.push(handles[k % handles.len()].clone().entered());
                }
                Op::Exit => {
                    entered.pop();
                }
                Op::Drop(k) if !handles.is_empty() => {
                    let at = k % handles.len();
                    handles.remove(at);
                }
                Op::Clone(k) if !handles.is_empty() => {
                    let clone = handles[k % handles.len()].clone();
                    handles.push(clone);
                }
                Op::Event => {
                    let id = name();
                    tracing::info!(n = id, "event");
                }
                Op::ChildOnAnotherThread(k) if !handles.is_empty() => {
                    let id = name();
                    let parent = handles[k % handles.len()].clone();
                    let dispatch = recorder.dispatch();
                    std::thread::spawn(move || {
                        tracing::dispatcher::with_default(&dispatch, || {
                            parent.in_scope(|| {
                                let _c = tracing::info_span!("span", n = id).entered();
                                tracing::info!(n = id, "event");
                            });
                        });
                    })
                    .join()
                    .unwrap();
                }
                _ => {}
            }
        }
        while entered.pop().is_some() {}
        handles.clear();
    });
}

/// A span as the property compares it: its number, its parent's, its events' numbers.
type Shape = (i64, Option<i64>, Vec<i64>);

fn number(span: &Span) -> i64 {
    match span.attribute("n") {
        Some(causeway::model::Value::I64(n)) => *n,
        other => panic!("span without its number: {other:?}"),
    }
}

fn shapes(spans: &[Span]) -> BTreeSet<Shape> {
    let by_id: std::collections::HashMap<_, _> =
        spans.iter().map(|s| (s.span_id, number(s))).collect();
    spans
        .iter()
        .map(|s| {
            let events = s
                .events
                .iter()
                .map(|e| match e.attributes.iter().find(|a| a.key == "n") {
                    Some(a) => match &a.value {
                        causeway::model::Value::I64(n) => *n,
                        other => panic!("event number {other:?}"),
                    },
                    None => panic!("event without its number: {e:?}"),
                })
                .collect();
            let parent = s.parent_id.map(|p| by_id.get(&p).copied().unwrap_or(-1));
            (number(s), parent, events)
        })
        .collect()
}

/// Every parent ends no earlier than its children (both modes keep a parent open while
/// a child holds it).
fn parents_end_last(spans: &[Span]) -> bool {
    let ends: std::collections::HashMap<_, _> = spans.iter().map(|s| (s.span_id, s.end)).collect();
    spans.iter().all(|s| {
        s.parent_id
            .and_then(|p| ends.get(&p))
            .is_none_or(|&parent_end| parent_end >= s.end)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn the_exclusive_subscriber_records_the_tree_the_layer_records(
        ops in proptest::collection::vec(op(), 0..60)
    ) {
        let exclusive = Recorder::with_config(Config::new("prop").with_mode(Mode::Exclusive)).unwrap();
        let layer = Recorder::with_config(Config::new("prop").with_mode(Mode::Layer)).unwrap();
        run(&ops, &exclusive);
        run(&ops, &layer);
        let (a, b) = (exclusive.spans(), layer.spans());
        prop_assert_eq!(shapes(&a), shapes(&b));
        prop_assert!(parents_end_last(&a));
        prop_assert!(parents_end_last(&b));
    }
}
