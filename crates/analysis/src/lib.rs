//! Analyses of assembled traces: the answers users come to a tracing system for.
//!
//! - [`attributes`]: the attribute keys of a window's spans, and the values of one.
//! - [`skew`]: clock-skew correction: a server span lies inside its client span, so each
//!   host's clock offset is bounded; shift it to fit (raw times kept).
//! - [`critical`]: the critical path of a trace and each span's self time.
//! - [`stats`]: network vs server time of each RPC, per-service and per-operation totals.
//! - [`deps`]: the service dependency graph over many traces.
//! - [`patterns`]: execution patterns: traces grouped by shape, with latency distributions.
//! - [`compare`]: two traces or two patterns side by side.
//! - [`differences`]: what sets a selection of traces apart from the rest of a window.
//! - [`monitor`]: requests, errors and duration quantiles over time, per service and operation.
//! - [`outline`]: a huge trace as rows within a budget, each closed row summing its subtree.
//! - [`scatter`]: a window's traces as points of a duration scatter, the longest all kept.
//! - [`inferred`]: paths inferred from black-box messages as WAP5 draws them.
//! - [`logflows`]: requests stitched from logs, by log-point sequence (lprof's table).
//! - [`grouping`]: B-cubed scores of items grouped (messages into traces, lines into
//!   requests) against ground truth.
//!
//! Per-trace analyses are plain functions of a [`Trace`](causeway_model::Trace); analyses
//! over many traces are accumulators (`add` one trace, `merge` two) that a bulk scan feeds
//! from several threads through [`Sharded`]. The span that stands for the whole request
//! is the main root ([`main_root`]: a true root if any, then the longest); other roots are
//! adopted by it. The server runs the critical path, stats and trace comparison on
//! skew-corrected times, and feeds the windowed analyses spans read with
//! `Fields::Structure` (the columns and a few named attributes, no events).
#![warn(missing_docs)]

pub mod attributes;
pub mod compare;
pub mod critical;
pub mod deps;
pub mod differences;
pub mod grouping;
pub mod histogram;
pub mod inferred;
pub mod logflows;
pub mod monitor;
pub mod outline;
pub mod patterns;
pub mod scatter;
mod sharded;
pub mod skew;
pub mod stats;

pub use sharded::Sharded;

use causeway_model::Trace;

/// The span that stands for the whole request: of the roots, one that names no parent
/// (a true root) if any, then the longest, then the earliest.
pub fn main_root(trace: &Trace) -> Option<usize> {
    trace.roots.iter().copied().max_by(|&a, &b| {
        let (sa, sb) = (&trace.spans[a], &trace.spans[b]);
        (
            sa.parent_id.is_none(),
            sa.duration(),
            std::cmp::Reverse(sa.start),
            std::cmp::Reverse(a),
        )
            .cmp(&(
                sb.parent_id.is_none(),
                sb.duration(),
                std::cmp::Reverse(sb.start),
                std::cmp::Reverse(b),
            ))
    })
}

/// Each span's children, with the other roots (orphans whose parent was never stored, and
/// extra roots) adopted by the main root: they belong to the request, somewhere below it.
pub fn children_adopted(trace: &Trace) -> Vec<Vec<usize>> {
    let mut children = trace.children.clone();
    if let Some(main) = main_root(trace) {
        for &r in &trace.roots {
            if r != main {
                children[main].push(r);
            }
        }
    }
    children
}
