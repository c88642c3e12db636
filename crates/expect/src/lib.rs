//! Pip's expectations over Causeway's traces: the language (`lang`), the matcher that checks
//! every path against it, and the reconciler that finds broken paths.
//!
//! - `lang`: Pip's whole grammar, with Pip's precedences and meanings.
//! - `program`: recognizers compiled to matcher programs.
//! - `path`: `Path::of(trace)`, the checked form of a trace, built from the model's path view
//!   (`causeway_model::PathView`, threads that are lanes of a process); building it
//!   reconciles the path.
//! - `matcher`: one thread pattern run over one thread.
//! - `check`: which recognizers a path matches, whether it is expected, and the aggregate
//!   assertions over many paths.
//! - `generate`: recognizers written from observed paths.
//! - `testing`: `Expectations`, which checks recorded traces inside a Rust test.
#![warn(missing_docs)]

pub mod check;
pub mod generate;
pub mod lang;
pub mod matcher;
pub mod path;
pub mod program;
pub mod testing;
pub mod units;
