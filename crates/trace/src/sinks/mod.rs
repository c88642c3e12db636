//! Where recorded spans go: span-log segment files, an OTLP/HTTP collector, memory.

#[cfg(feature = "otlp")]
pub mod otlp;
pub mod segment;
