//! Human-readable output: the trace tree, search results, SQL tables.

use causeway_model::{Span, Trace};

/// `1.5ms`, `230us`, `2.01s`.
pub fn duration(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns}ns"),
        1_000..1_000_000 => format!("{:.1}us", ns as f64 / 1e3),
        1_000_000..1_000_000_000 => format!("{:.2}ms", ns as f64 / 1e6),
        _ => format!("{:.3}s", ns as f64 / 1e9),
    }
}

/// RFC 3339 with microseconds.
pub fn time(ns: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_nanos(ns);
    humantime::format_rfc3339_micros(t).to_string()
}

fn label(s: &Span) -> String {
    let mut l = format!("{} {}", s.service, s.name);
    if s.is_error() {
        l.push_str("  !error");
    }
    l
}

/// The trace as an indented tree: offset from the trace start, duration, service, name.
pub fn trace_tree(t: &Trace) -> String {
    let (start, end) = t.bounds();
    let services: std::collections::BTreeSet<&str> = t.spans.iter().map(|s| &*s.service).collect();
    let mut out = format!(
        "trace {}  {} spans  {} services  {}  started {}\n",
        t.trace_id,
        t.spans.len(),
        services.len(),
        duration(end.saturating_sub(start)),
        time(start)
    );
    for (i, depth) in t.depth_first() {
        let s = &t.spans[i];
        let orphan = if t.orphans.contains(&i) {
            "  (parent missing)"
        } else {
            ""
        };
        out.push_str(&format!(
            "{:>10} {:>10}  {}{}{}\n",
            format!("+{}", duration(s.start.saturating_sub(start))),
            duration(s.duration()),
            "  ".repeat(depth),
            label(s),
            orphan
        ));
    }
    out
}

/// Pads columns to their widest cell.
pub fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut l = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            l.push_str(c);
            if i + 1 < cells.len() {
                l.push_str(&" ".repeat(w - c.chars().count()));
            }
        }
        l.push('\n');
        l
    };
    let mut out = line(header);
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

/// A JSON value as a table cell.
pub fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => "NULL".into(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}
