//! Where recorded spans go: span-log segment files, an OTLP/HTTP collector, memory
//! (`crate::testing::Recorder`, which returns assembled `Trace`s), or a sink of one's own
//! added with `Config::with_sink`.

#[cfg(feature = "otlp")]
pub mod otlp;
pub mod segment;
