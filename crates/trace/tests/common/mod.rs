//! What several of these tests share: a log output to read back, a sink that keeps the
//! spans, and a field value that counts how often it is formatted.

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
