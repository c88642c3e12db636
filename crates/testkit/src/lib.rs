//! What Causeway's tests and benchmarks share, so that none copies it: a generator of
//! realistic traces ([`Generator`]), spans and traces built by hand ([`span`],
//! [`recent_span`], [`TraceBuilder`]), temporary directories removed on drop
//! ([`TempDir`]), the wall clock in nanoseconds ([`now_ns`]), and two requests with their
//! service's log without ids ([`plain_logs`]), nginx's configuration as a reverse proxy
//! ([`nginx`]), and capture logs written record by record ([`capture_logs`]).
//!
//! A dev-dependency only (and the benchmark harnesses'): no product crate depends on it.
#![warn(missing_docs)]

mod builder;
pub mod capture_logs;
pub mod generate;
pub mod nginx;
pub mod plain_logs;
mod temp;

pub use builder::{recent_span, span, TraceBuilder};
pub use generate::Generator;
pub use temp::TempDir;

/// Nanoseconds since the Unix epoch, now.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
