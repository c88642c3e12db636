//! Tokens of the query language, each with its line and column.

use causeway_model::source::{Pos, SyntaxError};

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A name, possibly dotted (`DN.DataTransferProtocol`, `incr.delta`) or a keyword;
    /// keywords are told apart by the parser, case-insensitively.
    Name(String),
    /// `"..."` or `'...'`, unescaped.
    Str(String),
    /// An integer.
    Int(i64),
    /// A number with a fraction or exponent.
    Float(f64),
    /// Punctuation and operators.
    Sym(&'static str),
    /// End of input.
    End,
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Name(s) => format!("`{s}`"),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::Int(v) => format!("number {v}"),
            Tok::Float(v) => format!("number {v}"),
            Tok::Sym(s) => format!("`{s}`"),
            Tok::End => "end of input".into(),
        }
    }
}

// Longest first, so `->` wins over `-` and `<=` over `<`.
const SYMBOLS: &[&str] = &[
    "->", "<=", ">=", "==", "!=", "<>", "&&", "||", "(", ")", ",", ";", ":", "=", "+", "-", "*",
    "/", "%", "<", ">", "!", "|", "~",
];

/// Splits `src` into tokens; the last is [`Tok::End`]. `--` and `//` start comments that
/// run to the end of the line.
pub fn tokens(src: &str) -> Result<Vec<(Tok, Pos)>, SyntaxError> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut at = Cursor {
        chars: &chars,
        i: 0,
        pos: Pos { line: 1, col: 1 },
    };
    while let Some(c) = at.peek(0) {
        let pos = at.pos;
        if c.is_whitespace() {
            at.step(1);
        } else if (c == '-' && at.peek(1) == Some('-')) || (c == '/' && at.peek(1) == Some('/')) {
            while at.peek(0).is_some_and(|c| c != '\n') {
                at.step(1);
            }
        } else if c == '"' || c == '\'' {
            out.push((Tok::Str(at.string(c)?), pos));
        } else if c.is_ascii_digit() {
            out.push((at.number()?, pos));
        } else if c.is_alphabetic() || c == '_' {
            let start = at.i;
            // A dot joins names (`x.host`) but not a name and a number.
            while at.peek(0).is_some_and(|d| {
                d.is_alphanumeric()
                    || d == '_'
                    || d == '.' && at.peek(1).is_some_and(|e| e.is_alphabetic() || e == '_')
            }) {
                at.step(1);
            }
            out.push((Tok::Name(chars[start..at.i].iter().collect()), pos));
        } else if let Some(s) = SYMBOLS
            .iter()
            .find(|s| s.chars().enumerate().all(|(k, sc)| at.peek(k) == Some(sc)))
        {
            at.step(s.chars().count());
            out.push((Tok::Sym(s), pos));
        } else {
            return Err(SyntaxError::new(
                pos,
                &format!("an unexpected character {c:?}"),
                "a query or a tracepoint definition",
            ));
        }
    }
    out.push((Tok::End, at.pos));
    Ok(out)
}

struct Cursor<'a> {
    chars: &'a [char],
    i: usize,
    pos: Pos,
}

impl Cursor<'_> {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.i + ahead).copied()
    }

    fn step(&mut self, n: usize) {
        for _ in 0..n {
            if self.peek(0) == Some('\n') {
                self.pos.line += 1;
                self.pos.col = 1;
            } else {
                self.pos.col += 1;
            }
            self.i += 1;
        }
    }

    /// A string closed by `quote`, with the escapes `\n`, `\t`, `\\` and the quote.
    fn string(&mut self, quote: char) -> Result<String, SyntaxError> {
        let start = self.pos;
        self.step(1);
        let mut s = String::new();
        loop {
            match self.peek(0) {
                None | Some('\n') => {
                    return Err(SyntaxError::new(
                        start,
                        "a string that is never closed",
                        &format!("`{quote}`"),
                    ))
                }
                Some(c) if c == quote => {
                    self.step(1);
                    return Ok(s);
                }
                Some('\\') => {
                    match self.peek(1) {
                        Some('n') => s.push('\n'),
                        Some('t') => s.push('\t'),
                        Some(e @ ('\\' | '"' | '\'')) => s.push(e),
                        _ => {
                            let mut at = self.pos;
                            at.col += 1;
                            return Err(SyntaxError::new(
                                at,
                                "an unknown escape",
                                "one of \\n \\t \\\\ \\\" \\'",
                            ));
                        }
                    }
                    self.step(2);
                }
                Some(c) => {
                    s.push(c);
                    self.step(1);
                }
            }
        }
    }

    fn number(&mut self) -> Result<Tok, SyntaxError> {
        let pos = self.pos;
        let start = self.i;
        let mut float = false;
        while let Some(c) = self.peek(0) {
            let exponent_sign = (c == '+' || c == '-')
                && matches!(self.chars.get(self.i.wrapping_sub(1)), Some('e' | 'E'))
                && float;
            if c.is_ascii_digit() || exponent_sign {
                self.step(1);
            } else if (c == '.' && self.peek(1).is_some_and(|d| d.is_ascii_digit()))
                || ((c == 'e' || c == 'E')
                    && self
                        .peek(1)
                        .is_some_and(|d| d.is_ascii_digit() || d == '+' || d == '-'))
            {
                float = true;
                self.step(1);
            } else {
                break;
            }
        }
        let text: String = self.chars[start..self.i].iter().collect();
        if self.peek(0).is_some_and(|c| c.is_alphabetic() || c == '_') {
            return Err(SyntaxError::new(
                self.pos,
                &format!("a letter right after the number {text}"),
                "a space or an operator",
            ));
        }
        let bad = || SyntaxError::new(pos, &format!("a malformed number {text:?}"), "a number");
        if float {
            text.parse().map(Tok::Float).map_err(|_| bad())
        } else {
            text.parse().map(Tok::Int).map_err(|_| {
                SyntaxError::new(
                    pos,
                    &format!("the number {text}, too large"),
                    "an integer that fits 64 bits",
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        tokens(src).unwrap().into_iter().map(|(t, _)| t).collect()
    }

    #[test]
    fn dotted_names_numbers_strings_and_symbols() {
        assert_eq!(
            toks("Join st In FirstN(3, Q) On st -> x.y -- note\n Where a != 'b\\'c' && 1.5e3 >= 2"),
            vec![
                Tok::Name("Join".into()),
                Tok::Name("st".into()),
                Tok::Name("In".into()),
                Tok::Name("FirstN".into()),
                Tok::Sym("("),
                Tok::Int(3),
                Tok::Sym(","),
                Tok::Name("Q".into()),
                Tok::Sym(")"),
                Tok::Name("On".into()),
                Tok::Name("st".into()),
                Tok::Sym("->"),
                Tok::Name("x.y".into()),
                Tok::Name("Where".into()),
                Tok::Name("a".into()),
                Tok::Sym("!="),
                Tok::Str("b'c".into()),
                Tok::Sym("&&"),
                Tok::Float(1500.0),
                Tok::Sym(">="),
                Tok::Int(2),
                Tok::End,
            ]
        );
    }

    #[test]
    fn errors_name_line_and_column() {
        let e = tokens("From x\n  In \"open").unwrap_err();
        assert_eq!((e.line, e.col), (2, 6));
        let e = tokens("Select 12abc").unwrap_err();
        assert_eq!((e.line, e.col), (1, 10));
        let e = tokens("Select #").unwrap_err();
        assert_eq!((e.line, e.col), (1, 8));
        let e = tokens("Select 99999999999999999999").unwrap_err();
        assert!(e.found.contains("too large"), "{e}");
    }
}
