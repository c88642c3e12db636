//! Pip's expectation language: tokens, syntax tree, parser and printer.

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
