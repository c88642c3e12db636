//! Pivot Tracing for Causeway: dynamic causal queries over `tracing` callsites.
//!
//! - [`lang`]: the query language (the paper's `From ... Join ... On a -> b ... Select`)
//!   and tracepoint definitions, parsed with line:column errors.
//! - [`compile`]: queries checked against the tracepoints and compiled to advice per
//!   tracepoint (OBSERVE, UNPACK, LET, FILTER, PACK or EMIT), printed by [`compile::explain`].
#![warn(missing_docs)]

pub mod compile;
pub mod lang;
