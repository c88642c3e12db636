//! The query language: Pivot Tracing's LINQ-like queries and Causeway's tracepoint
//! definitions, with tokens, syntax tree, parser and printer.

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
