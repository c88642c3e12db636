//! A log line's prefix described by a pattern, for formats the automatic detection does
//! not know: `{time} [{thread}] {level} {logger} - {message}`. Each field takes the
//! text up to the literal text that follows it in the pattern; `{message}` takes the
//! rest of the line and comes last; `{skip}` takes a field that is read and dropped
//! (a host, a pid). `{{` and `}}` are literal braces. A line the pattern does not match
//! is read by the automatic detection instead. A bad pattern is refused with
//! the column of its fault.

use std::fmt;

use crate::header::{self, Header, Level};

/// A field of the pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Time,
    Level,
    Thread,
    Logger,
    Skip,
    Message,
}

impl Field {
    const NAMES: [(&'static str, Field); 6] = [
        ("time", Field::Time),
        ("level", Field::Level),
        ("thread", Field::Thread),
        ("logger", Field::Logger),
        ("skip", Field::Skip),
        ("message", Field::Message),
    ];
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Literal(String),
    Field(Field),
}

/// A parsed pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    parts: Vec<Part>,
}

/// Why a pattern is not one, and where (1-based column, in characters).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    /// Where in the pattern, the first character being 1.
    pub column: usize,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "column {}: {}", self.column, self.message)
    }
}

impl std::error::Error for FormatError {}

impl Format {
    /// Parses a pattern such as `{time} [{thread}] {level} {logger} - {message}`.
    pub fn parse(pattern: &str) -> Result<Format, FormatError> {
        let mut parts: Vec<Part> = Vec::new();
        let mut literal = String::new();
        let mut chars = pattern.char_indices().peekable();
        let column = |byte: usize| pattern[..byte].chars().count() + 1;
        while let Some((at, c)) = chars.next() {
            match c {
                '{' if chars.peek().map(|p| p.1) == Some('{') => {
                    chars.next();
                    literal.push('{');
                }
                '}' if chars.peek().map(|p| p.1) == Some('}') => {
                    chars.next();
                    literal.push('}');
                }
                '{' => {
                    let rest = &pattern[at + 1..];
                    let Some(end) = rest.find('}') else {
                        return Err(FormatError {
                            column: column(at),
                            message: "a `{` with no `}` after it (write `{{` for a brace)".into(),
                        });
                    };
                    let name = &rest[..end];
                    let Some(&(_, field)) = Field::NAMES.iter().find(|(n, _)| *n == name) else {
                        return Err(FormatError {
                            column: column(at),
                            message: format!(
                                "unknown field `{{{name}}}`: the fields are {}",
                                Field::NAMES
                                    .iter()
                                    .map(|(n, _)| format!("{{{n}}}"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                        });
                    };
                    if parts.last().is_some_and(|p| matches!(p, Part::Field(_)))
                        && literal.is_empty()
                    {
                        return Err(FormatError {
                            column: column(at),
                            message: "two fields with no text between them cannot be told apart"
                                .into(),
                        });
                    }
                    if parts.contains(&Part::Field(Field::Message)) {
                        return Err(FormatError {
                            column: column(at),
                            message: "`{message}` takes the rest of the line: it must come last"
                                .into(),
                        });
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Field(field));
                    // Skip the name and its closing brace.
                    for _ in 0..=name.chars().count() {
                        chars.next();
                    }
                }
                '}' => {
                    return Err(FormatError {
                        column: column(at),
                        message: "a `}` with no `{` before it (write `}}` for a brace)".into(),
                    });
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            if parts.contains(&Part::Field(Field::Message)) {
                return Err(FormatError {
                    column: pattern.chars().count() - literal.chars().count() + 1,
                    message: "`{message}` takes the rest of the line: it must come last".into(),
                });
            }
            parts.push(Part::Literal(literal));
        }
        if !parts.contains(&Part::Field(Field::Message)) {
            return Err(FormatError {
                column: pattern.chars().count() + 1,
                message: "the pattern needs a `{message}` field, last".into(),
            });
        }
        Ok(Format { parts })
    }

    /// `line`'s prefix and message by the pattern; `None` when it does not match.
    pub fn apply<'a>(&self, line: &'a str) -> Option<Header<'a>> {
        let mut h = Header {
            message: "",
            ..Header::default()
        };
        let mut rest = line;
        let mut parts = self.parts.iter().peekable();
        while let Some(part) = parts.next() {
            match part {
                Part::Literal(text) => rest = rest.strip_prefix(text.as_str())?,
                Part::Field(Field::Message) => {
                    h.message = rest;
                    return Some(h);
                }
                Part::Field(field) => {
                    // Up to the next literal (a field is always followed by one, or
                    // by the message, which follows a literal).
                    let Some(Part::Literal(next)) = parts.peek() else {
                        return None;
                    };
                    let end = rest.find(next.as_str())?;
                    let value = rest[..end].trim();
                    rest = &rest[end..];
                    match field {
                        Field::Time => {
                            let (ns, of_day) = header::timestamp(value)?;
                            if of_day {
                                h.time_of_day_ns = Some(ns);
                            } else {
                                h.time_ns = Some(ns);
                            }
                        }
                        Field::Level => h.level = Some(Level::parse(value)?),
                        Field::Thread => h.thread = Some(value),
                        Field::Logger => h.logger = Some(value),
                        Field::Skip | Field::Message => {}
                    }
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_pattern_reads_its_fields_and_leaves_the_message() {
        let f = Format::parse("{time} [{thread}] {level} {logger} - {message}").unwrap();
        let h = f
            .apply("2023-01-29 08:42:09,939 [http-nio-8080-exec-1] ERROR c.x.OrderService - order 7 failed")
            .unwrap();
        assert_eq!(h.time_ns, Some(1_674_981_729_939_000_000));
        assert_eq!(h.thread, Some("http-nio-8080-exec-1"));
        assert_eq!(h.level, Some(Level::Error));
        assert_eq!(h.logger, Some("c.x.OrderService"));
        assert_eq!(h.message, "order 7 failed");
        // Not this format: left to the automatic detection.
        assert_eq!(f.apply("order 7 failed"), None);
        let f = Format::parse("{skip}|{time}|{{{level}}}|{message}").unwrap();
        let h = f.apply("host-3|12:00:01.5|{WARN}|disk slow").unwrap();
        assert_eq!(h.time_of_day_ns, Some(43_201_500_000_000));
        assert_eq!((h.level, h.message), (Some(Level::Warn), "disk slow"));
    }

    #[test]
    fn a_bad_pattern_says_what_and_where() {
        let err = |p: &str| Format::parse(p).unwrap_err().to_string();
        assert_eq!(
            err("{time} {lvl} {message}"),
            "column 8: unknown field `{lvl}`: the fields are {time}, {level}, {thread}, {logger}, {skip}, {message}"
        );
        assert_eq!(
            err("{time}{level} {message}"),
            "column 7: two fields with no text between them cannot be told apart"
        );
        assert_eq!(
            err("{message} ["),
            "column 10: `{message}` takes the rest of the line: it must come last"
        );
        assert_eq!(
            err("{time} x"),
            "column 9: the pattern needs a `{message}` field, last"
        );
        assert_eq!(
            err("é {time"),
            "column 3: a `{` with no `}` after it (write `{{` for a brace)"
        );
        assert_eq!(
            err("a } {message}"),
            "column 3: a `}` with no `{` before it (write `}}` for a brace)"
        );
    }

    proptest! {
        #[test]
        fn any_pattern_parses_or_says_where_and_any_line_applies_without_panic(
            pattern in "[{}a-z \\[\\]|-]{0,40}",
            line in "\\PC{0,80}",
        ) {
            match Format::parse(&pattern) {
                Ok(f) => {
                    if let Some(h) = f.apply(&line) {
                        prop_assert!(line.ends_with(h.message));
                    }
                }
                Err(e) => prop_assert!(e.column >= 1 && e.column <= pattern.chars().count() + 1),
            }
        }

        #[test]
        fn a_line_written_by_a_pattern_reads_back(
            thread in "[a-z0-9-]{1,12}",
            logger in "[a-z][a-z.]{0,20}",
            message in "[ -~]{0,60}",
            secs in 0i64..4_000_000_000,
        ) {
            let f = Format::parse("{time} [{thread}] {logger}: {message}").unwrap();
            let t = header::format_iso(secs * 1_000_000_000);
            let line = format!("{t} [{thread}] {logger}: {message}");
            let h = f.apply(&line).unwrap();
            prop_assert_eq!(h.time_ns, Some(secs * 1_000_000_000));
            prop_assert_eq!(h.thread, Some(thread.as_str()));
            prop_assert_eq!(h.logger, Some(logger.as_str()));
            prop_assert_eq!(h.message, message.as_str());
        }
    }
}
