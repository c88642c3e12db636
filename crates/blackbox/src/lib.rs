//! Black-box inference (WAP5): the socket calls captured from unmodified programs, read
//! back per process, reconciled into messages, linked into causal paths, and where those
//! paths spend their time. [`infer::infer`] is the front door: inputs and options in,
//! paths out.
#![warn(missing_docs)]

mod connections;
pub mod delays;
// The capture log format and the ELF check, shared with the preload library.
pub use causeway_capture_format as format;
pub use causeway_capture_format::elf;
pub mod infer;
pub mod link;
pub mod logs;
mod numbers;
mod parallel;
pub mod reconcile;
pub mod roles;
mod rows;
pub mod score;
mod shapes;
mod slots;
pub mod traces;
pub mod truth;
