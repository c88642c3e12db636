//! What several of these tests share: a log output to read back, a sink that keeps the
//! spans, a field value that counts how often it is formatted, and Pivot Tracing results
//! as strings.

// Each test binary uses part of this module.
#![allow(dead_code)]

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use causeway::model::Span;
use causeway::SpanSink;

/// A writer for `fmt::layer().with_writer(...)` whose output the test reads back.
#[derive(Clone, Default)]
pub struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// A sink that keeps every span it is handed.
pub struct Collect(pub Arc<Mutex<Vec<Span>>>);

impl SpanSink for Collect {
    fn write(&mut self, spans: &[Span]) {
        self.0.lock().unwrap().extend_from_slice(spans);
    }
    fn flush(&mut self) {}
}

static FORMATTED: AtomicUsize = AtomicUsize::new(0);

/// A field value that counts how often it is formatted (see [`formatted`]).
pub struct Counted;

impl fmt::Debug for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        FORMATTED.fetch_add(1, Ordering::Relaxed);
        f.write_str("counted")
    }
}

/// How often a [`Counted`] was formatted in this test binary.
pub fn formatted() -> usize {
    FORMATTED.load(Ordering::Relaxed)
}

/// Each query's result rows (key values, then aggregates) as strings.
pub fn rows_of(
    results: impl IntoIterator<Item = (u32, causeway_pivot::aggregate::Aggregator)>,
) -> Vec<(u32, Vec<Vec<String>>)> {
    results
        .into_iter()
        .map(|(id, a)| {
            let rows = a
                .rows()
                .iter()
                .map(|r| r.iter().map(ToString::to_string).collect())
                .collect();
            (id, rows)
        })
        .collect()
}

/// Installs `query` as query `id`, over the tracepoint definitions in `tracepoints`.
pub fn install(pivot: &causeway::Pivot, id: u32, tracepoints: &str, query: &str) {
    let text = format!("{tracepoints}\n{query}");
    let prepared = causeway_pivot::install::prepare(&text, &Default::default())
        .unwrap_or_else(|e| panic!("{}", e.render("query", &text)));
    pivot.install(id, &prepared.script).unwrap();
}
