//! What a process sends the hub (`POST /api/pivot/agent`) and what the hub answers come
//! from the network: any bytes parse or are refused, and what parses merges into a
//! query's totals (or compiles, for the hub's orders) without a panic. Partial results of
//! the wrong shape are refused by the aggregator, never mixed in.
#![no_main]

use causeway_pivot::aggregate::Aggregator;
use causeway_pivot::install::load;
use causeway_pivot::lang::ast::AggFn;
use causeway_pivot::protocol::{Group, Report, Reply};
use libfuzzer_sys::fuzz_target;

/// Aggregate lists partial results are merged into, as queries have them.
const SHAPES: &[&[AggFn]] = &[
    &[],
    &[AggFn::Count],
    &[AggFn::Sum, AggFn::Average],
    &[AggFn::Min, AggFn::Max, AggFn::Count, AggFn::Sum, AggFn::Average],
];

fn merge(groups: &[Group]) {
    for funcs in SHAPES {
        let mut totals = Aggregator::new(funcs);
        for g in groups {
            let merged = totals.merge_group(&g.key, &g.states);
            assert!(!merged || g.states.len() == funcs.len());
        }
        let again = totals.clone();
        totals.merge(&again);
        let _ = totals.rows();
    }
}

fuzz_target!(|data: &[u8]| {
    if let Ok(report) = serde_json::from_slice::<Report>(data) {
        for batch in &report.batches {
            for partial in &batch.partials {
                merge(&partial.groups);
            }
        }
    }
    // The element types on their own, so the fuzzer reaches values and states directly.
    if let Ok(groups) = serde_json::from_slice::<Vec<Group>>(data) {
        merge(&groups);
    }
    if let Ok(reply) = serde_json::from_slice::<Reply>(data) {
        for order in &reply.queries {
            let _ = load(&order.script, order.id, &order.bags);
        }
    }
});
