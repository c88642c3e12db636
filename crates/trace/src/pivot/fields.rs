//! A tracepoint's field values at a hit: only the fields its advice reads, as the
//! values tuples hold, and exploded fields split into one value per element.

use causeway_pivot::value::Value;

use crate::propagation::split_byte;
use tracing::field::{Field, Visit};

/// Captures the fields named in `wanted` into `values` (same positions).
pub(crate) struct Capture<'a> {
    pub(crate) wanted: &'a [&'static str],
    pub(crate) values: &'a mut [Value],
}

impl Capture<'_> {
    fn put(&mut self, field: &Field, make: impl FnOnce() -> Value) {
        if let Some(i) = self.wanted.iter().position(|w| *w == field.name()) {
            if let Some(slot) = self.values.get_mut(i) {
                *slot = make();
            }
        }
    }
}

impl Visit for Capture<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, || Value::Int(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, || {
            i64::try_from(value).map_or(Value::Float(value as f64), Value::Int)
        });
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.put(field, || Value::Float(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, || Value::Bool(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, || Value::from(value));
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, || Value::Str(smol_str::format_smolstr!("{value}")));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        // Formatted in place when short: no allocation.
        self.put(field, || Value::Str(smol_str::format_smolstr!("{value:?}")));
    }
}

/// One value per element of `value`: split on `separator`, or with none, a
/// Debug-printed list (`["A", "B"]`, `[1, 2]`). Elements are trimmed; quoted ones lose
/// their quotes; numbers stay strings unless the list held bare integers.
pub(crate) fn explode(value: &Value, separator: Option<&str>) -> Vec<Value> {
    let Value::Str(text) = value else {
        return match value {
            Value::Null => Vec::new(),
            v => vec![v.clone()],
        };
    };
    let element = |p: &str| match p.strip_prefix('"').and_then(|p| p.strip_suffix('"')) {
        Some(quoted) => Value::from(quoted),
        None if separator.is_none() => p.parse::<i64>().map_or_else(|_| Value::from(p), Value::Int),
        None => Value::from(p),
    };
    // Sized once when split on one byte: a list of dozens would otherwise grow the
    // vector five times.
    let one_byte = match separator {
        Some(s) if s.len() == 1 => Some(s.as_bytes()[0]),
        Some(_) => None,
        None => Some(b','),
    };
    let pieces = one_byte.map_or(0, |b| 1 + memchr::memchr_iter(b, text.as_bytes()).count());
    let mut out = Vec::with_capacity(pieces);
    let mut push = |p: &str| {
        // Most pieces have no space around them: `trim` only where one might.
        let spaced = |b: Option<&u8>| b.is_some_and(u8::is_ascii_whitespace) || b >= Some(&0x80);
        let p = if spaced(p.as_bytes().first()) || spaced(p.as_bytes().last()) {
            p.trim()
        } else {
            p
        };
        if !p.is_empty() {
            out.push(element(p));
        }
    };
    match separator {
        // A one-byte separator (the usual `,`) is found by `memchr`'s iterator, which
        // costs a few instructions a piece; `str::split`'s searcher starts over for each.
        Some(sep) if sep.len() == 1 => split_byte(text, sep.as_bytes()[0]).for_each(push),
        Some(sep) if !sep.is_empty() => text.split(sep).for_each(&mut push),
        Some(_) => push(text),
        None => {
            let inner = text.trim();
            let inner = inner
                .strip_prefix('[')
                .and_then(|t| t.strip_suffix(']'))
                .unwrap_or(inner);
            split_byte(inner, b',').for_each(push);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(v: &[Value]) -> Vec<String> {
        v.iter().map(Value::to_string).collect()
    }

    #[test]
    fn splits_on_a_separator_or_a_debug_list() {
        assert_eq!(
            strs(&explode(&Value::from("A, B,C"), Some(","))),
            ["A", "B", "C"]
        );
        assert_eq!(
            strs(&explode(&Value::from(r#"["A", "B"]"#), None)),
            ["A", "B"]
        );
        assert_eq!(
            explode(&Value::from("[1, 2]"), None),
            [Value::Int(1), Value::Int(2)]
        );
        assert!(explode(&Value::from("[]"), None).is_empty());
        assert!(explode(&Value::Null, None).is_empty());
        assert_eq!(explode(&Value::Int(4), Some(",")), [Value::Int(4)]);
        // Separators of one multi-byte character and of several characters.
        assert_eq!(
            strs(&explode(&Value::from("a→b→ c"), Some("→"))),
            ["a", "b", "c"]
        );
        assert_eq!(
            strs(&explode(&Value::from("a::b:c"), Some("::"))),
            ["a", "b:c"]
        );
        assert_eq!(strs(&explode(&Value::from(" a,b "), Some(""))), ["a,b"]);
    }
}
