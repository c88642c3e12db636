//! The text of the SQL Causeway sends ClickHouse (string literals, lists of trace ids,
//! days), and the error an answer that does not decode becomes.

use causeway_model::TraceId;
use causeway_store::StoreError;

pub(crate) const NS_PER_DAY: u64 = 86_400_000_000_000;

/// A ClickHouse string literal.
pub(crate) fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

/// Trace ids as lists of SQL literals, each short enough for one query: ClickHouse
/// parses at most 256 KiB of query text by default, and 2 000 ids take about 86 KiB.
pub(crate) fn id_lists(ids: &[TraceId]) -> impl Iterator<Item = String> + '_ {
    ids.chunks(2_000).map(|chunk| {
        chunk
            .iter()
            .map(|id| format!("unhex('{id}')"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

/// An answer that does not decode: the node's, whichever it was.
pub(crate) fn answer_error(e: std::io::Error) -> StoreError {
    StoreError::Remote {
        node: "(answer)".into(),
        reason: e.to_string(),
    }
}
