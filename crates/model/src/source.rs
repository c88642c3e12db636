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
    /// A long line is shown around the column only, and a long `found` is cut, so the
    /// message stays short however large the text.
    pub fn render(&self, file: &str, src: &str) -> String {
        let line = src
            .lines()
            .nth(self.line.saturating_sub(1) as usize)
            .unwrap_or("");
        let col = self.col.saturating_sub(1) as usize;
        let chars = line.chars().count();
        // The characters shown: at most SHOWN, the column among them.
        let from = col
            .saturating_sub(SHOWN / 2)
            .min(chars.saturating_sub(SHOWN));
        let shown: String = line.chars().skip(from).take(SHOWN).collect();
        let before = if from > 0 { "..." } else { "" };
        let after = if from + SHOWN < chars { "..." } else { "" };
        let caret: String = before
            .chars()
            .chain(line.chars().skip(from).take(col.saturating_sub(from)))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        format!(
            "{file}:{}:{}: found {}, expected {}\n  {before}{shown}{after}\n  {caret}^",
            self.line,
            self.col,
            cut_chars(&self.found, SHOWN),
            self.expected
        )
    }
}

/// Characters of a line shown in an error.
const SHOWN: usize = 120;

/// `s`, cut to `max` characters (saying so).
fn cut_chars(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(max) {
        Some((at, _)) => std::borrow::Cow::Owned(format!(
            "{}... ({} more characters)",
            &s[..at],
            s[at..].chars().count()
        )),
        None => std::borrow::Cow::Borrowed(s),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_line_is_shown_around_the_column_with_the_caret_under_it() {
        let src = format!("{}@{}", "a".repeat(1_000_000), "b".repeat(500_000));
        let e = SyntaxError::new(
            Pos {
                line: 1,
                col: 1_000_001,
            },
            &"@".repeat(10_000),
            "an expression",
        );
        let text = e.render("big.pip", &src);
        assert!(text.len() < 600, "{} bytes", text.len());
        assert!(text.starts_with("big.pip:1:1000001: found @@@"), "{text}");
        assert!(text.contains("(9880 more characters)"), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        let at = lines[1].find('@').unwrap();
        assert_eq!(lines[2].find('^'), Some(at), "{text}");
        // A short line is shown whole, as before.
        let e = SyntaxError::new(Pos { line: 2, col: 3 }, "x", "y");
        assert_eq!(
            e.render("f", "one\ntwo\n"),
            "f:2:3: found x, expected y\n  two\n    ^"
        );
    }
}
