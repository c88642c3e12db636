//! Pip's expectation language: tokens, syntax tree, parser and printer.
//!
//! The grammar is the whole of the original `expect.yy`: negated patterns, assignments of
//! values, expressions as counts and limit bounds, every aggregate form, `level`. Pip's
//! precedences and meanings hold (`x in {a, b}` is an inclusive range). Errors carry
//! `file:line:column`, nesting is bounded at 100 levels (`MAX_NESTING`, so no input can
//! exhaust the stack), and the printer's output parses back to the same tree.

pub mod ast;
mod lex;
mod parse;
mod print;

pub use parse::parse;

/// How deep statements, expressions and recognizer sets may nest, and how deep fragments
/// may call fragments. Everything that reads a file recurses over it; the bound keeps
/// that recursion far from any thread's stack limit whatever the input.
pub const MAX_NESTING: usize = 100;

pub use causeway_model::source::{Pos, SyntaxError};
