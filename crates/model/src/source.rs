//! Places in the text of Causeway's languages (Pip's expectations, Pivot Tracing's
//! queries) and the syntax error both report: line, column, the line and a caret.

/// A place in the source, 1-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
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
    /// An error at `pos`: `found` was there, `expected` would have been accepted.
    pub fn new(pos: Pos, found: &str, expected: &str) -> SyntaxError {
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

/// `s` with `"`, `\`, newline and tab escaped as both languages' string literals read them.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out
}
