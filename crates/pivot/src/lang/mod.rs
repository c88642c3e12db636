//! The query language: Pivot Tracing's LINQ-like queries and Causeway's tracepoint
//! definitions, with tokens, syntax tree, parser and printer.
//!
//! ```text
//! From x In TP
//!   {Join y In [First | MostRecent | FirstN(n, ..) | MostRecentN(n, ..)](TP) On y -> z}
//!   {Where e | Let v = e}
//!   [GroupBy keys]
//!   Select items
//! Tracepoint NAME = event(...) | span.close(...) Export a, b = explode(f, ",")
//! ```
//!
//! Braces mark what may repeat and brackets what may be left out. The aggregates are
//! COUNT, SUM, MIN, MAX and AVERAGE. A query may be named (`Q = ...` or `Q : ...`) and
//! used as a source by others (`crate::splice`). A tracepoint definition matches callsite
//! metadata exactly or by glob (`crate::matching`). Keywords are case-insensitive and
//! clauses run across lines; errors carry line:column and a caret
//! (`causeway_model::source::SyntaxError`, shared with the expectation language).
//! Expression trees are bounded at 64 levels (`MAX_NESTING`: parser recursion and tree
//! height, so a chain `a + b + ...` is bounded too). The paper's Q1-Q7 are in
//! `demo/tracepoints/paper-queries.pivot`.

pub mod ast;
mod lex;
mod parse;
mod print;

pub use parse::{parse, parse_query};
pub use print::{print_expr, print_query, print_script, print_select_item};

/// How deep expressions may nest. The parser and everything that walks an expression
/// recurse over it; the bound keeps that recursion far from any thread's stack limit
/// whatever the input.
pub const MAX_NESTING: usize = 64;
