//! Request flows from logs (lprof, Zhao et al., OSDI 2014), from the text alone: lprof read
//! Java bytecode to find log points, request identifiers and their order; here the same
//! facts are learned from the logs themselves.
//!
//! - `header`: a line's timestamp, level, thread and logger, told from its message.
//! - `tokens`: a message split into words and punctuation, values typed (numbers, hex,
//!   UUIDs, IP addresses, paths).
//! - `drain`: log points as templates, mined with a Drain-style fixed-depth tree, each
//!   line's parameter values kept.

pub mod drain;
pub mod header;
pub mod tokens;
