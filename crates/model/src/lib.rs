//! Causeway's trace model: the one set of types every source produces and every analysis
//! reads.
//!
//! - [`TraceId`] and [`SpanId`]: W3C ids, never zero, lower-case hex out, either case in.
//! - [`Span`]: one unit of work with its kind, service, host, process, execution unit,
//!   typed attributes, events, links, Pip messages, status, CPU time, sampling probability
//!   and source.
//! - [`Trace`]: the spans of one trace assembled into a tree, orphans kept as extra roots.
//! - [`logs`]: log records carried to the spans they belong to, placed when a trace is
//!   assembled; [`parent_links`]: parents found after the fact, given to spans recorded
//!   without one.
//! - [`PathView`]: Pip's view of a trace as per-thread event sequences.
//! - [`attributes`]: the attribute names inferred and log-stitched spans carry.
//! - [`source`]: line and column in the text of a query or expectation, and the syntax error
//!   both languages report.
//! - [`codec`]: the native span-log record, OTLP protobuf and JSON, Zipkin v2 JSON, Jaeger's
//!   JSON.
//!
//! No I/O and no async: this crate is pure data and conversions.
#![warn(missing_docs)]

pub mod attributes;
pub mod codec;
pub mod ids;
pub mod logs;
pub mod parent_links;
pub mod path;
pub mod source;
pub mod span;
pub mod trace;

pub use ids::{IdError, SpanId, TraceId};
pub use path::{for_each_thread, PathEvent, PathThread, PathView, ThreadKey};
pub use span::{Direction, Event, KeyValue, Link, Message, Source, Span, SpanKind, Status, Value};
pub use trace::Trace;
