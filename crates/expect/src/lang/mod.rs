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

/// A place in the source, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// Line.
    pub line: u32,
    /// Column, in characters.
    pub col: u32,
}

/// Why a file does not parse: where, what was found and what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{line}:{col}: found {found}, expected {expected}")]
pub struct SyntaxError {
    /// Line, 1-based.
    pub line: u32,
    /// Column, 1-based.
    pub col: u32,
    /// What was there.
    pub found: String,
    /// What would have been accepted.
    pub expected: String,
}

impl SyntaxError {
    pub(crate) fn new(pos: Pos, found: &str, expected: &str) -> SyntaxError {
        SyntaxError {
            line: pos.line,
            col: pos.col,
            found: found.to_string(),
            expected: expected.to_string(),
        }
    }

    /// The error as `file:line:col: ...`, then the line and a caret under the column.
    pub fn render(&self, file: &str, src: &str) -> String {
        let text = src
            .lines()
            .nth(self.line.saturating_sub(1) as usize)
            .unwrap_or("");
        let caret: String = text
            .chars()
            .take(self.col.saturating_sub(1) as usize)
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!(
            "{file}:{}:{}: found {}, expected {}\n  {text}\n  {caret}^",
            self.line, self.col, self.found, self.expected
        )
    }
}
