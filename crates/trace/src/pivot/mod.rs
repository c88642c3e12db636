//! Pivot Tracing in the process: the queries it runs ([`Pivot`]), the advice at
//! tracepoint hits, the request's bags on its spans and in its headers, and the agent
//! that reports results to the hub in `causeway serve`. Why the runtime lives in the
//! application's subscriber: `docs/decisions/006-pivot-runtime-inside-the-application.md`.
//!
//! Bags live on span records: a child starts with its parent's bag (shared until a PACK
//! changes it, then copied) and merges it back into its parent when it closes; merging
//! never counts a tuple twice. A bag that arrived from another process stays encoded in
//! the record's W3C baggage until advice runs on the span (see `carry`). In an unsampled
//! trace, a span with no record of its own (see `subscriber`) uses its nearest recorded
//! ancestor's bag; a span at a tracepoint always gets a record (a slot, in the exclusive
//! subscriber) and holds its ancestors open. Span records carry the request's bags
//! (`SpanRecord::bag`) and, at a tracepoint, its advice and captured fields
//! (`SpanRecord::tracepoint`).
//!
//! A callsite a query needs counts as recorded. While a query is installed the exclusive
//! subscriber's level hint is `TRACE`, so a query reaches callsites below its targets (a
//! library's `trace!`); a callsite nothing needs still gets `Interest::never`. In Layer
//! mode with targets, the layer's per-layer filter is `layer::TargetsOrQueried`: `always`
//! for a callsite the targets or an installed query want, `never` otherwise, with a level
//! hint of `TRACE` only while a query is installed. An event enabled only for a query's
//! advice runs it and stays out of the trace.

pub(crate) mod agent;
pub(crate) mod carry;
mod fields;
pub(crate) mod runtime;

use std::sync::Arc;

use causeway_model::source::SyntaxError;
use causeway_model::TraceId;
use causeway_pivot::aggregate::Aggregator;
use causeway_pivot::protocol::{CallsiteInfo, Counters};
use tracing::span::Record;

use crate::propagation::Baggage;

/// A request's Pivot Tracing bags.
pub(crate) use causeway_pivot::bag::Bags;
/// When advice runs: at an event, or at a span's creation, entry, exit or close.
pub(crate) use causeway_pivot::lang::ast::ProbeKind;
/// The member of W3C baggage a request's bags travel in.
pub(crate) use causeway_pivot::wire::BAGGAGE_MEMBER;

pub(crate) use fields::Capture;
pub(crate) use runtime::{Fields, Hooks, ProcessExports, Runtime};

impl Runtime {
    /// The runtime of a process configured by `config`, its exports (host, service,
    /// process name, pid) taken from it.
    pub(crate) fn for_process(config: &crate::Config, seed: u64) -> Runtime {
        Runtime::new(
            ProcessExports {
                host: config.host.as_str().into(),
                service: config.service.as_str().into(),
                proc_name: config.proc_name().into(),
                pid: i64::from(config.pid).into(),
            },
            seed,
        )
    }
}

/// A span at a tracepoint callsite: its advice, the fields it reads (as last recorded),
/// and when it started.
pub(crate) struct TracepointSpan {
    hooks: Arc<Hooks>,
    fields: Fields,
    start: u64,
}

impl TracepointSpan {
    pub(crate) fn new(hooks: Arc<Hooks>, fields: Fields, start: u64) -> TracepointSpan {
        TracepointSpan {
            hooks,
            fields,
            start,
        }
    }

    /// When the span started (raw clock).
    pub(crate) fn start(&self) -> u64 {
        self.start
    }

    pub(crate) fn record(&mut self, values: &Record<'_>) {
        values.record(&mut Capture {
            wanted: &self.hooks.fields,
            values: &mut self.fields,
        });
    }

    /// Runs the advice of moment `kind` with the span's bag (a member of its W3C
    /// baggage that arrived encoded is decoded into it first).
    pub(crate) fn fire(
        &self,
        runtime: &Runtime,
        kind: ProbeKind,
        duration_ns: Option<u64>,
        (w3c, bag): (&mut Option<Arc<Baggage>>, &mut Option<Arc<Bags>>),
        example: Option<TraceId>,
    ) {
        if self.hooks.fires(kind) {
            carry::take_from_baggage(runtime, w3c, bag);
            runtime.fire(&self.hooks, kind, &self.fields, duration_ns, bag, example);
        }
    }
}

/// Merges a closing span's bag into its parent's.
pub(crate) fn merge_bag(into: &mut Option<Arc<Bags>>, from: Option<Arc<Bags>>) {
    let Some(from) = from else { return };
    match into {
        Some(mine) if Arc::ptr_eq(mine, &from) => {}
        Some(mine) => Arc::make_mut(mine).merge(&from),
        None => *into = Some(from),
    }
}

/// The Pivot Tracing queries this process runs: installed by the agent from the hub, or
/// by hand (tests, embedded use). Get it with [`crate::Guard::pivot`].
#[derive(Clone)]
pub struct Pivot(pub(crate) Arc<Runtime>);

impl Pivot {
    /// Compiles `script` (tracepoint definitions and one query, as
    /// `causeway_pivot::install::prepare` makes it) and runs it as query `id` from now on.
    pub fn install(&self, id: u32, script: &str) -> Result<(), SyntaxError> {
        self.0.install(id, script, &[])
    }

    /// Stops running query `id`; false if it was not installed.
    pub fn uninstall(&self, id: u32) -> bool {
        self.0.uninstall(id)
    }

    /// The ids of the queries installed.
    pub fn installed(&self) -> Vec<u32> {
        self.0.installed()
    }

    /// Each query's results since the last call (per group), leaving them empty.
    pub fn take_results(&self) -> Vec<(u32, Aggregator)> {
        self.0.take_results()
    }

    /// The `tracing` callsites this process has registered.
    pub fn callsites(&self) -> Vec<CallsiteInfo> {
        self.0.callsites_from(0).0
    }

    /// What was dropped: malformed or cut bags, joins past the fan-out cap.
    pub fn counters(&self) -> Counters {
        self.0.counters()
    }
}
