//! Pivot Tracing for Causeway: dynamic causal queries over `tracing` callsites.
//!
//! - [`lang`]: the query language (the paper's `From ... Join ... On a -> b ... Select`)
//!   and tracepoint definitions, parsed with line:column errors.
//! - [`value`], [`program`], [`bag`], [`aggregate`]: running advice at a hit, the
//!   request's baggage with its merge rules, and the per-process aggregation of results.
//! - [`wire`]: baggage as bytes and base64url text for headers, size-limited, strictly
//!   decoded.
//! - [`compile`]: queries checked against the tracepoints and compiled to advice per
//!   tracepoint (OBSERVE, UNPACK, LET, FILTER, PACK or EMIT), printed by [`compile::explain`].
//! - [`splice`]: named queries used as sources, spliced into the query's join tree.
//! - [`install`]: a query checked and made self-contained for the hub to send, and
//!   compiled again in each process.
//! - [`share`]: one bag for identical packs of several queries.
//! - [`matching`]: which callsites a tracepoint's probes stand for.
//! - [`protocol`]: the reports processes send the hub and its answers.
//!
//! The runtime inside each process is the `causeway` crate's `pivot` module
//! (`crates/trace/src/pivot/`); the hub is in the server (`crates/server/src/pivot/`). The
//! benchmarks: advice, the bag codec and the hub's merge (`crates/pivot/benches/advice.rs`),
//! the disabled and enabled tracepoint on the span hot path
//! (`crates/trace/benches/overhead.rs`), and `causeway-bench pivot`, end to end on the
//! replicas demo and from install to first result (`crates/bench/src/pivot/`; with
//! `--instructions` it counts instructions per read on every process's main thread under
//! callgrind). The end-to-end overhead with a 60-tuple bag and with Q3-Q7 installed is in
//! BENCHMARKS.md.
#![warn(missing_docs)]

pub mod aggregate;
pub mod bag;
mod catalog;
pub mod compile;
pub mod install;
pub mod lang;
pub mod matching;
pub mod program;
pub mod protocol;
pub mod share;
mod small_map;
pub mod splice;
mod tuple_bytes;
pub mod value;
pub mod wire;
