//! Pip's expectations over Causeway's traces: the language (`lang`), the matcher that checks
//! every path against it, and the reconciler that finds broken paths.
#![warn(missing_docs)]

pub mod check;
pub mod generate;
pub mod lang;
pub mod matcher;
pub mod path;
pub mod program;
pub mod testing;
pub mod units;
