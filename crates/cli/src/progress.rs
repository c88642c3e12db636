//! Progress bars of long work (reading logs, loading stores, runs of a benchmark).

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar over `len` items of `what`.
pub fn bar(len: u64, what: &str) -> ProgressBar {
    ProgressBar::new(len).with_style(
        ProgressStyle::with_template(&format!("{{bar:40}} {{pos}}/{{len}} {what} {{msg}}"))
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
}

/// A progress bar over `len` bytes.
pub fn bytes_bar(len: u64, what: &str) -> ProgressBar {
    ProgressBar::new(len).with_style(
        ProgressStyle::with_template(&format!(
            "{{bar:40}} {{bytes}}/{{total_bytes}} {what} {{msg}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
}

/// A bar over the logs `causeway logs` reads: files read whole, or bytes of streams.
#[derive(Default)]
pub struct Reading(std::sync::OnceLock<ProgressBar>);

impl causeway_logflow::input::Progress for Reading {
    fn begin(&self, total: u64, bytes: bool) {
        let _ = self.0.set(if bytes {
            bytes_bar(total, "read")
        } else {
            bar(total, "files read")
        });
    }

    fn advance(&self, n: u64) {
        if let Some(b) = self.0.get() {
            b.inc(n);
        }
    }

    fn end(&self) {
        if let Some(b) = self.0.get() {
            b.finish_and_clear();
        }
    }
}
