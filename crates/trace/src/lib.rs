//! `causeway`: the library applications link to be traced by Causeway.
//!
//! It is a [`tracing`] Layer: `tracing` spans become Causeway spans (their fields
//! become attributes, events inside them become span events), sampled at the root and
//! propagated across threads, async tasks and processes (W3C Trace Context and Baggage).
//! Finished spans go, from a background thread that never blocks the application, to
//! span-log segment files (shipped by `causeway agent`), to any OTLP/HTTP collector, or
//! to memory in tests.
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! let config = causeway::Config::from_env()?.with_span_log_dir("/var/log/causeway");
//! let (layer, _guard) = causeway::layer(config)?;
//! tracing_subscriber::registry().with(layer).init(); // add a fmt layer as you like
//! let _span = tracing::info_span!("request", user = "alice").entered();
//! tracing::info!(items = 3, "priced the basket");
//! # Ok::<(), causeway::InitError>(())
//! ```
//! `_guard` flushes when dropped and never waits longer than
//! [`Config::shutdown_timeout`], on any runtime.
//!
//! # Features
//! - `otlp` (default): the OTLP/HTTP protobuf exporter.
//! - `tower`: [`middleware::tower::TraceLayer`], a server layer for axum, hyper and tonic
//!   servers that extracts the W3C context and opens a server span.
//! - `reqwest`: [`middleware::reqwest`], client spans with context injection.
//! - `tonic`: [`middleware::tonic`], an interceptor that injects context into gRPC calls.
#![warn(missing_docs)]

mod clock;
mod config;
mod context;
mod layer;
pub mod message;
pub mod middleware;
mod pipeline;
pub mod propagation;
mod sampling;
pub mod sinks;
pub mod testing;

use std::sync::Arc;

pub use config::{Config, InitError};
pub use context::{current_context, extract, in_current_span, inject, inject_span, SpanExt};
pub use layer::{with_remote_parent, CausewayLayer};
pub use pipeline::{SpanSink, StatsSnapshot};
pub use propagation::{Baggage, Extracted, SpanContext, TraceState};
pub use sampling::Sampler;

pub use causeway_model as model;

use layer::{LayerShared, Process};
use pipeline::Pipeline;
use sampling::SamplerState;

/// Flushes recorded spans when dropped (waiting at most the configured shutdown timeout).
#[must_use = "dropping the guard stops the span writer"]
pub struct Guard {
    pipeline: Arc<Pipeline>,
    timeout: std::time::Duration,
}

impl Guard {
    /// Writes out every span finished so far; false if that took longer than the timeout.
    pub fn flush(&self) -> bool {
        self.pipeline.flush(self.timeout)
    }

    /// Counters: spans recorded, dropped (queue full) and written.
    pub fn stats(&self) -> StatsSnapshot {
        self.pipeline.stats()
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.pipeline.shutdown(self.timeout);
    }
}

pub(crate) fn build_layer(
    config: &Config,
    sinks: Vec<Box<dyn SpanSink>>,
) -> Result<(CausewayLayer, Arc<Pipeline>), InitError> {
    let process = Process {
        service: Arc::from(config.service.as_str()),
        host: Arc::from(config.host.as_str()),
        pid: config.pid,
    };
    let pipeline = Pipeline::start(sinks, process, config.queue_spans, config.flush_interval)
        .map_err(InitError::Thread)?;
    let layer = CausewayLayer {
        shared: Arc::new(LayerShared {
            sampler: SamplerState::new(config.sampler.clone()),
            pipeline: pipeline.clone(),
            max_annotations: config.max_annotations,
            cpu_time: config.cpu_time,
        }),
    };
    Ok((layer, pipeline))
}

/// The sinks a configuration asks for.
fn sinks_for(config: &Config) -> Result<Vec<Box<dyn SpanSink>>, InitError> {
    let mut sinks: Vec<Box<dyn SpanSink>> = Vec::new();
    if let Some(dir) = &config.span_log_dir {
        let w = sinks::segment::SegmentWriter::open(
            dir,
            &config.service,
            config.pid,
            config.segment_bytes,
        )
        .map_err(|source| InitError::SpanLog {
            path: dir.clone(),
            source,
        })?;
        sinks.push(Box::new(w));
    }
    #[cfg(feature = "otlp")]
    if let Some(url) = &config.otlp_endpoint {
        let s = sinks::otlp::OtlpSink::start(url.clone(), config.shutdown_timeout)
            .map_err(InitError::Thread)?;
        sinks.push(Box::new(s));
    }
    Ok(sinks)
}

/// Builds the Layer and its guard, to compose with other layers yourself.
pub fn layer(config: Config) -> Result<(CausewayLayer, Guard), InitError> {
    layer_with_sinks(config, Vec::new())
}

/// Like [`layer`], with sinks of your own added to those the configuration asks for.
pub fn layer_with_sinks(
    config: Config,
    extra: Vec<Box<dyn SpanSink>>,
) -> Result<(CausewayLayer, Guard), InitError> {
    let mut sinks = sinks_for(&config)?;
    sinks.extend(extra);
    let (layer, pipeline) = build_layer(&config, sinks)?;
    Ok((
        layer,
        Guard {
            pipeline,
            timeout: config.shutdown_timeout,
        },
    ))
}

/// Installs Causeway as the global subscriber (a `tracing_subscriber::Registry` with the
/// Causeway layer). To add other layers, such as `fmt`, use [`layer`] instead.
pub fn init(config: Config) -> Result<Guard, InitError> {
    use tracing_subscriber::layer::SubscriberExt;
    let (layer, guard) = self::layer(config)?;
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
        .map_err(|e| InitError::AlreadyInstalled(e.to_string()))?;
    Ok(guard)
}
