//! Pivot Tracing for Causeway: dynamic causal queries over `tracing` callsites.
//!
//! - [`lang`]: the query language (the paper's `From ... Join ... On a -> b ... Select`)
//!   and tracepoint definitions, parsed with line:column errors.
#![warn(missing_docs)]

pub mod lang;
