//! Tokens of the expectation language, each with its line and column.

use super::{Pos, SyntaxError};

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A name: keyword, metric, recognizer or thread name.
    Ident(String),
    /// `"..."`, unescaped.
    Str(String),
    /// `m/.../`, the pattern between the slashes.
    Regex(String),
    /// A number, with the unit written after it (`10ms`, `4kb`, `3`).
    Num {
        /// The value as written.
        value: f64,
        /// The unit, empty when none.
        unit: String,
    },
    /// `$NAME`: a parameter or a variable.
    Var(String),
    /// Punctuation and operators.
    Sym(&'static str),
    /// End of input.
    End,
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Ident(s) => format!("`{s}`"),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::Regex(s) => format!("regex m/{s}/"),
            Tok::Num { value, unit } => format!("number {value}{unit}"),
            Tok::Var(s) => format!("`${s}`"),
            Tok::Sym(s) => format!("`{s}`"),
            Tok::End => "end of input".into(),
        }
    }
}

// Longest first, so `**` wins over `*` and `<=` over `<`.
const SYMBOLS: &[&str] = &[
    "**", "<=", ">=", "==", "!=", "&&", "||", "->", "{", "}", "(", ")", ";", ",", ":", "=", "+",
    "-", "*", "/", "<", ">", "!",
];

/// Splits `src` into tokens; the last is [`Tok::End`].
pub fn tokens(src: &str) -> Result<Vec<(Tok, Pos)>, SyntaxError> {
    let mut out = Vec::new();
    let chars: Vec<char> = src.chars().collect();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    // Advances over `n` chars, keeping line and column.
    let step = |i: &mut usize, line: &mut u32, col: &mut u32, n: usize| {
        for _ in 0..n {
            if chars.get(*i) == Some(&'\n') {
                *line += 1;
                *col = 1;
            } else {
                *col += 1;
            }
            *i += 1;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        let pos = Pos { line, col };
        if c.is_whitespace() {
            step(&mut i, &mut line, &mut col, 1);
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                step(&mut i, &mut line, &mut col, 1);
            }
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'*') {
            step(&mut i, &mut line, &mut col, 2);
            loop {
                if i >= chars.len() {
                    return Err(SyntaxError::new(
                        pos,
                        "a comment `/*` that is never closed",
                        "`*/`",
                    ));
                }
                if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    step(&mut i, &mut line, &mut col, 2);
                    break;
                }
                step(&mut i, &mut line, &mut col, 1);
            }
            continue;
        }
        if c == '"' {
            let mut s = String::new();
            step(&mut i, &mut line, &mut col, 1);
            loop {
                match chars.get(i) {
                    None | Some('\n') => {
                        return Err(SyntaxError::new(
                            pos,
                            "a string that is never closed",
                            "`\"`",
                        ))
                    }
                    Some('"') => break,
                    // Pip's escapes: `\n`, `\t`, `\\` and `\"`; any other backslash stays
                    // as written (`"a\d"` is `a\d`).
                    Some('\\') => match chars.get(i + 1) {
                        Some(&e @ ('n' | 't' | '\\' | '"')) => {
                            s.push(match e {
                                'n' => '\n',
                                't' => '\t',
                                other => other,
                            });
                            step(&mut i, &mut line, &mut col, 2);
                        }
                        _ => {
                            s.push('\\');
                            step(&mut i, &mut line, &mut col, 1);
                        }
                    },
                    Some(&ch) => {
                        s.push(ch);
                        step(&mut i, &mut line, &mut col, 1);
                    }
                }
            }
            step(&mut i, &mut line, &mut col, 1);
            out.push((Tok::Str(s), pos));
            continue;
        }
        if c == 'm' && chars.get(i + 1) == Some(&'/') {
            let mut s = String::new();
            step(&mut i, &mut line, &mut col, 2);
            loop {
                match chars.get(i) {
                    None | Some('\n') => {
                        return Err(SyntaxError::new(
                            pos,
                            "a regex `m/` that is never closed",
                            "`/`",
                        ))
                    }
                    Some('/') => break,
                    // Pip's two escapes: `\/` is `/` and `\\` is `\`; any other
                    // backslash reaches the regex as written (`m/\d/` is `\d`).
                    Some('\\') if matches!(chars.get(i + 1), Some('/' | '\\')) => {
                        s.push(chars[i + 1]);
                        step(&mut i, &mut line, &mut col, 2);
                    }
                    Some(&ch) => {
                        s.push(ch);
                        step(&mut i, &mut line, &mut col, 1);
                    }
                }
            }
            step(&mut i, &mut line, &mut col, 1);
            out.push((Tok::Regex(s), pos));
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit()))
        {
            let start = i;
            while chars
                .get(i)
                .is_some_and(|d| d.is_ascii_digit() || *d == '.')
            {
                step(&mut i, &mut line, &mut col, 1);
            }
            let text: String = chars[start..i].iter().collect();
            let value = text.parse().map_err(|_| {
                SyntaxError::new(pos, &format!("a malformed number {text:?}"), "a number")
            })?;
            let ustart = i;
            while chars.get(i).is_some_and(|d| d.is_ascii_alphabetic()) {
                step(&mut i, &mut line, &mut col, 1);
            }
            let unit = chars[ustart..i].iter().collect();
            out.push((Tok::Num { value, unit }, pos));
            continue;
        }
        if c == '$' || c.is_alphabetic() || c == '_' {
            let start = i;
            step(&mut i, &mut line, &mut col, 1);
            while chars.get(i).is_some_and(|d| {
                d.is_alphanumeric()
                    || *d == '_'
                    || *d == '.'
                    || *d == ':' && chars.get(i + 1) == Some(&':')
            }) {
                // `a::b` names (C++-style task names in Pip files) stay one name.
                let n = if chars[i] == ':' { 2 } else { 1 };
                step(&mut i, &mut line, &mut col, n);
            }
            let text: String = chars[start..i].iter().collect();
            if let Some(name) = text.strip_prefix('$') {
                if name.is_empty() {
                    return Err(SyntaxError::new(
                        pos,
                        "`$` without a name",
                        "a name after `$`",
                    ));
                }
                out.push((Tok::Var(name.to_string()), pos));
            } else {
                out.push((Tok::Ident(text), pos));
            }
            continue;
        }
        match SYMBOLS
            .iter()
            .find(|s| s.chars().zip(&chars[i..]).filter(|(a, b)| a == *b).count() == s.len())
        {
            Some(s) => {
                step(&mut i, &mut line, &mut col, s.len());
                out.push((Tok::Sym(s), pos));
            }
            None => {
                return Err(SyntaxError::new(
                    pos,
                    &format!("an unexpected character {c:?}"),
                    "a statement",
                ))
            }
        }
    }
    out.push((Tok::End, Pos { line, col }));
    Ok(out)
}
