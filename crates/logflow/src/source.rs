//! Log points read from Rust sources, as lprof read them from bytecode: each `tracing` or
//! `log` macro call (`info!`, `warn!`, `error!`, `debug!`, `trace!`, `event!`) gives its
//! message's format string and its fields, and so the text it prints: `tracing`'s fmt
//! output is the message, then each field as ` name=value`. A line that ends with such
//! a text is that log point's, its values what the format's `{}` and the fields printed.
//!
//! The scanner is hand-written and bounded: it reads string literals (raw ones too),
//! character literals and comments, so that a parenthesis or a comma inside them is not
//! taken for the call's; a call it cannot read is skipped.
//!
//! A line whose message ends with a log point's text (found through an index by a word of
//! the log point's longest text) gets a first token naming the log point's place
//! (`services/orders.rs:30`), so that Drain mines it with that log point's lines only.

use std::path::{Path, PathBuf};

use foldhash::HashMap;

/// The macros read, by their last path segment.
const MACROS: [&str; 6] = ["info", "warn", "error", "debug", "trace", "event"];

/// Longest call read, in bytes.
const MAX_CALL: usize = 16 * 1024;

/// A piece of a log point's printed text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// A value: a `{}` of the format, or a field's.
    Value,
}

/// A log point found in the sources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourcePoint {
    /// The file, relative to the directory read, and the 1-based line of the call.
    pub file: String,
    /// The 1-based line of the call in that file.
    pub line: u32,
    /// What it prints, in order (never two values in a row: see [`pieces`]).
    pub pieces: Vec<Piece>,
}

impl SourcePoint {
    /// The log point as text, values as `<*>`.
    pub fn text(&self) -> String {
        self.pieces
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.as_str(),
                Piece::Value => "<*>",
            })
            .collect()
    }
}

/// Source files that could not be read, and why.
pub type Unread = Vec<(PathBuf, std::io::Error)>;

/// The log points of every `.rs` file under `dir` (`target` and hidden directories
/// left out), and the files that could not be read.
pub fn read_dir(dir: &Path) -> std::io::Result<(Vec<SourcePoint>, Unread)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d)? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if entry.file_type()?.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut points = Vec::new();
    let mut failed = Vec::new();
    for path in files {
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let shown = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                points.extend(log_points(&shown, &text));
            }
            Err(e) => failed.push((path, e)),
        }
    }
    Ok((points, failed))
}

/// The log points of one source file's text.
pub fn log_points(file: &str, text: &str) -> Vec<SourcePoint> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => i = skip_line(b, i),
            b'/' if b.get(i + 1) == Some(&b'*') => i = skip_block_comment(b, i),
            b'"' | b'r' | b'\'' if literal_end(b, i).is_some() => {
                i = literal_end(b, i).unwrap_or(i + 1);
            }
            c if c.is_ascii_alphabetic() && (i == 0 || !is_ident(b[i - 1])) => {
                let start = i;
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
                let word = &text[start..i];
                if MACROS.contains(&word) && b.get(i) == Some(&b'!') {
                    let mut j = i + 1;
                    while j < b.len() && b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if b.get(j) == Some(&b'(') {
                        if let Some((args, end)) = call_args(text, j) {
                            let line =
                                text[..start].bytes().filter(|&c| c == b'\n').count() as u32 + 1;
                            if let Some(pieces) = printed(&args, word == "event") {
                                out.push(SourcePoint {
                                    file: file.to_string(),
                                    line,
                                    pieces,
                                });
                            }
                            i = end;
                        }
                    }
                }
            }
            _ => i += 1,
        }
    }
    out
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn skip_line(b: &[u8], i: usize) -> usize {
    b[i..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(b.len(), |p| i + p + 1)
}

fn skip_block_comment(b: &[u8], mut i: usize) -> usize {
    // Rust's block comments nest.
    let mut depth = 0usize;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            depth += 1;
            i += 2;
        } else if b[i..].starts_with(b"*/") {
            depth -= 1;
            i += 2;
            if depth == 0 {
                return i;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// The end (exclusive) of the string, raw string or character literal at `i`.
fn literal_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => {
            let mut j = i + 1;
            while j < b.len() {
                match b[j] {
                    b'\\' => j += 2,
                    b'"' => return Some(j + 1),
                    _ => j += 1,
                }
            }
            None
        }
        b'r' if i == 0 || !is_ident(b[i - 1]) => {
            let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
            if b.get(i + 1 + hashes) != Some(&b'"') {
                return None;
            }
            let close: Vec<u8> = std::iter::once(b'"')
                .chain(std::iter::repeat_n(b'#', hashes))
                .collect();
            let from = i + 2 + hashes;
            b.get(from..)?
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map(|p| from + p + close.len())
        }
        b'\'' => {
            // 'c', '\n', '\u{..}'; a lifetime ('a) has no closing quote soon after.
            let j = i + 1;
            let end = match b.get(j)? {
                b'\\' => b[j..]
                    .iter()
                    .take(12)
                    .position(|&c| c == b'\'')
                    .map(|p| j + p),
                &lead => {
                    // The character's length, from its first byte.
                    let len = match lead {
                        0..0x80 => 1,
                        0xC0..0xE0 => 2,
                        0xE0..0xF0 => 3,
                        _ => 4,
                    };
                    (b.get(j + len) == Some(&b'\'')).then_some(j + len)
                }
            };
            end.map(|e| e + 1)
        }
        _ => None,
    }
}

/// The top-level arguments of the call whose `(` is at `open`, and the end of the call.
fn call_args(text: &str, open: usize) -> Option<(Vec<&str>, usize)> {
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut args = Vec::new();
    let mut arg_start = open + 1;
    let mut i = open;
    let limit = b.len().min(open + MAX_CALL);
    while i < limit {
        match b[i] {
            b'(' | b'[' | b'{' => {
                depth += 1;
                i += 1;
            }
            b')' | b']' | b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    let last = text[arg_start..i].trim();
                    if !last.is_empty() {
                        args.push(last);
                    }
                    return Some((args, i + 1));
                }
                i += 1;
            }
            b',' if depth == 1 => {
                args.push(text[arg_start..i].trim());
                arg_start = i + 1;
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => i = skip_line(b, i),
            b'/' if b.get(i + 1) == Some(&b'*') => i = skip_block_comment(b, i),
            b'"' | b'r' | b'\'' => i = literal_end(b, i).unwrap_or(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// What a call with these arguments prints: its message's pieces, then its fields'.
fn printed(args: &[&str], is_event: bool) -> Option<Vec<Piece>> {
    // event!(Level::INFO, ...) names its level first.
    let args = if is_event { args.get(1..)? } else { args };
    let mut fields = Vec::new();
    let mut message = None;
    for arg in args {
        if ["target:", "parent:", "name:"]
            .iter()
            .any(|p| arg.starts_with(p))
        {
            continue;
        }
        if message.is_some() {
            // The format's arguments.
            continue;
        }
        if let Some(lit) = string_literal(arg) {
            message = Some(lit);
        } else if let Some(name) = field_name(arg) {
            fields.push(name);
        } else {
            return None;
        }
    }
    let mut pieces = match &message {
        Some(format) => format_pieces(format)?,
        None => Vec::new(),
    };
    for name in fields {
        let sep = if pieces.is_empty() { "" } else { " " };
        push_text(&mut pieces, &format!("{sep}{name}="));
        pieces.push(Piece::Value);
    }
    (!pieces.is_empty()
        && pieces
            .iter()
            .any(|p| matches!(p, Piece::Text(t) if !t.trim().is_empty())))
    .then_some(pieces)
}

fn push_text(pieces: &mut Vec<Piece>, text: &str) {
    match pieces.last_mut() {
        Some(Piece::Text(t)) => t.push_str(text),
        _ => pieces.push(Piece::Text(text.to_string())),
    }
}

/// The value of a plain or raw string literal that is the whole argument.
fn string_literal(arg: &str) -> Option<String> {
    let b = arg.as_bytes();
    if literal_end(b, 0) != Some(b.len()) || b.first() == Some(&b'\'') {
        return None;
    }
    if b[0] == b'r' {
        let hashes = arg[1..].bytes().take_while(|&c| c == b'#').count();
        return Some(arg[2 + hashes..arg.len() - 1 - hashes].to_string());
    }
    let inner = &arg[1..arg.len() - 1];
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('\n') => {
                // A line continuation: the next line's leading whitespace goes too.
                let rest: String = chars.clone().collect();
                let skipped = rest.len() - rest.trim_start().len();
                for _ in 0..rest[..skipped].chars().count() {
                    chars.next();
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Some(out)
}

/// A field argument's name: `name = value`, `a.b = value`, `%name`, `?name`, `name`.
fn field_name(arg: &str) -> Option<String> {
    let head = match arg.split_once('=') {
        Some((head, _)) if !head.ends_with(['=', '!', '<', '>']) => head.trim(),
        _ => arg.trim_start_matches(['%', '?']).trim(),
    };
    let head = head.trim_matches('"');
    let valid = !head.is_empty()
        && head.split('.').all(|seg| {
            seg.bytes()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
                && seg.bytes().all(is_ident)
        });
    valid.then(|| head.to_string())
}

/// A format string's pieces: its text, and a value per `{...}`; `{{` and `}}` are braces.
fn format_pieces(format: &str) -> Option<Vec<Piece>> {
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                text.push('}');
            }
            '{' => {
                for c in chars.by_ref() {
                    if c == '}' {
                        break;
                    }
                }
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                // Two values in a row cannot be told apart: they are one.
                if pieces.last() != Some(&Piece::Value) {
                    pieces.push(Piece::Value);
                }
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        pieces.push(Piece::Text(text));
    }
    Some(pieces)
}

/// Log points indexed for matching lines: by a word of their longest text.
pub struct SourceIndex {
    points: Vec<SourcePoint>,
    by_word: HashMap<String, Vec<usize>>,
}

impl SourceIndex {
    /// An index of `points` by a word of each one's longest text.
    pub fn new(points: Vec<SourcePoint>) -> SourceIndex {
        let mut by_word: HashMap<String, Vec<usize>> = HashMap::default();
        for (i, p) in points.iter().enumerate() {
            let longest = p
                .pieces
                .iter()
                .filter_map(|piece| match piece {
                    Piece::Text(t) => Some(t.as_str()),
                    Piece::Value => None,
                })
                .max_by_key(|t| t.len())
                .unwrap_or("");
            if let Some(word) = words(longest).max_by_key(|w| w.len()) {
                by_word.entry(word.to_string()).or_default().push(i);
            }
        }
        SourceIndex { points, by_word }
    }

    /// The log points indexed.
    pub fn points(&self) -> &[SourcePoint] {
        &self.points
    }

    /// The log point whose text `message` ends with (the most specific: the longest
    /// text), and the values it printed.
    pub fn find<'a>(&self, message: &'a str) -> Option<(usize, Vec<&'a str>)> {
        let mut best: Option<(usize, usize, Vec<&'a str>)> = None;
        let mut tried: Vec<usize> = Vec::new();
        for word in words(message) {
            for &i in self.by_word.get(word).map_or(&[][..], Vec::as_slice) {
                if tried.contains(&i) {
                    continue;
                }
                tried.push(i);
                let p = &self.points[i];
                if let Some(values) = match_suffix(&p.pieces, message) {
                    let weight: usize = p
                        .pieces
                        .iter()
                        .map(|piece| match piece {
                            Piece::Text(t) => t.len(),
                            Piece::Value => 0,
                        })
                        .sum();
                    if best.as_ref().is_none_or(|b| weight > b.1) {
                        best = Some((i, weight, values));
                    }
                }
            }
        }
        best.map(|(i, _, values)| (i, values))
    }
}

/// The runs of letters, digits and `_` in `text`: what a log point and a line share
/// whatever punctuation surrounds a value.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
}

/// The values if `message` ends with `pieces`' text (what comes before is the line's
/// context: a span scope, a target), each value up to the next text.
fn match_suffix<'a>(pieces: &[Piece], message: &'a str) -> Option<Vec<&'a str>> {
    let first = pieces.iter().find_map(|p| match p {
        Piece::Text(t) => Some(t.as_str()),
        Piece::Value => None,
    })?;
    let starts_with_value = pieces.first() == Some(&Piece::Value);
    // Each place the first text occurs, leftmost first.
    let mut from = 0;
    while let Some(at) = message.get(from..)?.find(first) {
        let at = from + at;
        let start = if starts_with_value {
            // A leading value runs back to the last space before the text.
            message[..at].rfind(' ').map_or(0, |s| s + 1)
        } else {
            at
        };
        if let Some(values) = match_at(pieces, &message[start..]) {
            return Some(values);
        }
        from = at + first.len().max(1);
    }
    None
}

/// The values if `text` is exactly `pieces` (each value the shortest run before the next
/// text; the last value takes the rest).
fn match_at<'a>(pieces: &[Piece], text: &'a str) -> Option<Vec<&'a str>> {
    let mut rest = text;
    let mut values = Vec::new();
    let mut k = 0;
    while k < pieces.len() {
        match &pieces[k] {
            Piece::Text(t) => rest = rest.strip_prefix(t.as_str())?,
            Piece::Value => match pieces.get(k + 1) {
                Some(Piece::Text(next)) => {
                    let end = rest.find(next.as_str())?;
                    values.push(&rest[..end]);
                    rest = &rest[end..];
                }
                _ => {
                    values.push(rest);
                    rest = "";
                }
            },
        }
        k += 1;
    }
    rest.is_empty().then_some(values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SOURCE: &str = r##"
// info!("not a call: a comment");
fn place(u: User, order: u64) {
    tracing::info!(user = u.user, order, "order accepted");
    info!("paid {} for {order:016x} (via {})", amount, "card, \"visa\"");
    warn!(target: "audit", "refund {}",
          id);
    let s = r#"error!("in a raw string")"#;
    tracing::event!(Level::DEBUG, ?state, "state changed");
    debug!(%peer);
    error!(x = f(a, (b, c)), "nested {} calls", g(1, 2));
    trace!('a' == c, "not a field");
}
"##;

    #[test]
    fn macro_calls_give_their_printed_text() {
        let points = log_points("src/orders.rs", SOURCE);
        let texts: Vec<(u32, String)> = points.iter().map(|p| (p.line, p.text())).collect();
        assert_eq!(
            texts,
            [
                (4, "order accepted user=<*> order=<*>".to_string()),
                (5, "paid <*> for <*> (via <*>)".to_string()),
                (6, "refund <*>".to_string()),
                (9, "state changed state=<*>".to_string()),
                (10, "peer=<*>".to_string()),
                (11, "nested <*> calls x=<*>".to_string()),
            ]
        );
    }

    #[test]
    fn a_line_is_matched_to_its_log_point_with_its_values() {
        let index = SourceIndex::new(log_points("src/orders.rs", SOURCE));
        let (i, values) = index
            .find("read block{block=2}: shop::orders: order accepted user=27 order=19")
            .unwrap();
        assert_eq!(index.points()[i].line, 4);
        assert_eq!(values, ["27", "19"]);
        let (i, values) = index
            .find("paid 3.50 for 00000000000000ff (via card)")
            .unwrap();
        assert_eq!(index.points()[i].line, 5);
        assert_eq!(values, ["3.50", "00000000000000ff", "card"]);
        assert_eq!(index.find("order accepted by nobody"), None);
    }

    #[test]
    fn empty_arguments_and_a_call_cut_short_are_skipped() {
        assert_eq!(log_points("x.rs", "info!(,)"), []);
        assert_eq!(log_points("x.rs", "info!("), []);
        assert_eq!(log_points("x.rs", "warn!(\"a\", , x)").len(), 1);
        // What the fuzzer found first: a call of an empty argument among binary bytes.
        let found = [
            0x5f, 0x72, 0x72, 0x5f, 0x5f, 0x66, 0xfe, 0x08, 0x69, 0x6e, 0x66, 0x6f, 0x21, 0x0a,
            0x09, 0x00, 0x00, 0x5a, 0x72, 0x62, 0x5f, 0x72, 0x72, 0x5f, 0x72, 0x5f, 0x5a, 0x72,
            0xeb, 0xeb, 0x6e, 0x66, 0x6f, 0x21, 0x0a, 0x00, 0x00, 0x00, 0x00, 0x01, 0x21, 0x66,
        ];
        let _ = log_points("x.rs", &String::from_utf8_lossy(&found));
    }

    proptest! {
        #[test]
        fn any_source_is_scanned_without_panic(text in "\\PC{0,300}") {
            for p in log_points("x.rs", &text) {
                prop_assert!(!p.pieces.is_empty());
                prop_assert!(p.pieces.windows(2).all(|w| !(w[0] == Piece::Value && w[1] == Piece::Value)));
            }
        }

        #[test]
        fn a_call_with_any_literal_text_reads_back(words in "[a-z ,()\\[\\]{}]{1,40}") {
            let escaped = words.replace('{', "{{").replace('}', "}}");
            let source = format!("fn f() {{ info!(k = v, \"{escaped} {{}}\", x); }}");
            let points = log_points("x.rs", &source);
            prop_assert_eq!(points.len(), 1);
            prop_assert_eq!(points[0].text(), format!("{words} <*> k=<*>"));
        }
    }
}
