//! Request flows from logs (lprof, Zhao et al., OSDI 2014), from the text alone: lprof read
//! Java bytecode to find log points, request identifiers and their order; here the same
//! facts are learned from the logs themselves. Why, and what that gives up:
//! `docs/decisions/008-lprof-from-text.md`.
//!
//! [`stitch_logs`] is the front door: windows of logs (from [`input::open`]) and
//! [`Options`] in, requests out, told to a [`Sink`] as they close.
//!
//! - `pipeline`: the front door, each window through the steps below.
//! - `input`: log files read whole or as streams of windows, gzip decompressed, binary
//!   files skipped.
//! - `context`: lines that name their trace (a `traceparent`, `trace_id=` fields), as
//!   log records of their spans.
//! - `learned`: what a window taught (templates, identifiers, links), as JSON.
//! - `corpus`: files read into lines, each with its template, log point and parameter
//!   values.
//! - `points`: log points: templates told apart by their URLs' query keys, each query
//!   value a parameter of its own.
//! - `ids`: (log point, parameter) variables ranked by the evidence that they identify
//!   requests.
//! - `links`: which log points' values link the lines of one request (a request id over
//!   seconds, an entity id such as a user within milliseconds), learned against chance.
//! - `stitch`: lines joined into requests by links, learned start log points and the
//!   log points each one follows (lprof's order between log points).
//! - `flows`: requests gathered across windows, each line with what its window knew of
//!   it, until no later window can add to them.
//! - `sequences`: requests counted by their log-point sequence, with their latency
//!   (lprof's table).
//! - `traces`: stitched requests as traces (a span per node or thread segment, an event
//!   per line).
//! - `join`: stitched requests joined to the traces of the same requests, each node's
//!   lines placed on the span of that node that held them and shares their values.
//! - `tail`: a growing log file stitched a window at a time, the lines of the passes
//!   before as context (the agent's and the demo's plain logs).
//! - `window`: logs read as time windows of bounded size, each reading the end of the
//!   one before again, so that memory does not grow with the logs.
//! - `score`: B-cubed precision, recall and F1 of lines grouped into requests.
//! - `header`: a line's timestamp, level, thread and logger, told from its message.
//! - `format`: a prefix described by a pattern, for formats the detection does not know.
//! - `source`: log points read from Rust sources' `tracing` and `log` macro calls.
//! - `tokens`: a message split into words and punctuation, values typed (numbers, hex,
//!   UUIDs, IP addresses, paths).
//! - `drain`: log points as templates, mined with a Drain-style fixed-depth tree, each
//!   line's parameter values kept.
//!
//! `causeway logs` (`crates/cli/src/logs.rs`) drives it, and `causeway demo --logs DIR`
//! writes logs to try it on (`demo/src/logs.rs`); `causeway-bench logs-demo` scores the
//! stitching against the demo's trace ids at several loads, and `causeway-bench templates`
//! the mined log points against the macro calls that wrote each line. The fuzz targets
//! `log_lines` (any bytes through reading, mining, ranking, learning links and
//! stitching), `log_windows` (any bytes cut into small windows and stitched across them)
//! and `rust_sources` (any bytes to the source scanner) cover what reads untrusted text.
#![warn(missing_docs)]

pub mod context;
pub mod corpus;
pub mod drain;
pub mod flows;
pub mod format;
pub mod header;
pub mod ids;
pub mod input;
pub mod join;
mod latest_prints;
pub mod learned;
pub mod links;
mod pair_index;
pub mod pipeline;
pub mod points;
pub mod score;
pub mod sequences;
pub mod source;
pub mod stitch;
pub mod structured;
pub mod tail;
pub mod tokens;
pub mod traces;
pub mod window;

pub use pipeline::{stitch_logs, Options, Sink, Stitched};
