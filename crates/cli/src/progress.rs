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
