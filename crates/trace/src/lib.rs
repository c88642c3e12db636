//! `causeway`: the library applications link to be traced by Causeway.
//!
//! Applications keep writing [`tracing`] (`#[instrument]`, `info_span!`, `info!`):
//! `tracing` spans become Causeway spans (their fields become attributes, events inside
//! them become span events), sampled at the root and propagated across threads, async
//! tasks and processes (W3C Trace Context and Baggage). Finished spans go, from a
//! background thread that never blocks the application, to span-log segment files
//! (shipped by `causeway agent`), to any OTLP/HTTP collector, or to memory in tests.
//!
//! ```no_run
//! let config = causeway::Config::from_env()?.with_span_log_dir("/var/log/causeway");
//! let _guard = causeway::init(config)?;
//! let _span = tracing::info_span!("request", user = "alice").entered();
//! tracing::info!(items = 3, "priced the basket");
//! # Ok::<(), causeway::InitError>(())
//! ```
//! `_guard` flushes when dropped and never waits longer than
//! [`Config::shutdown_timeout`], on any runtime.
//!
//! Two modes ([`Mode`]): by default [`init`] installs [`CausewaySubscriber`], Causeway's
//! own subscriber, the cheapest; [`layer`] gives a [`CausewayLayer`] for a
//! `tracing_subscriber::Registry` that other layers (such as `fmt`) share:
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//!
//! let (layer, _guard) = causeway::layer(causeway::Config::from_env()?)?;
//! tracing_subscriber::registry().with(layer).with(tracing_subscriber::fmt::layer()).init();
//! # Ok::<(), causeway::InitError>(())
//! ```
//!
//! # Features
//! - `otlp` (default): the OTLP/HTTP protobuf exporter.
//! - `pivot` (default): Pivot Tracing: queries installed at run time over `tracing`
//!   callsites ([`Guard::pivot`], `Config::pivot_hub`), their bags carried in W3C
//!   baggage. Without it no query can run, and nothing of it is compiled in.
//!
//! With `default-features = false` neither is compiled, nor an HTTP client.
//! - `tower`: [`middleware::tower::TraceLayer`], a server layer for axum, hyper and tonic
//!   servers that extracts the W3C context and opens a server span.
//! - `reqwest`: [`middleware::reqwest`], client spans with context injection.
//! - `tonic`: [`middleware::tonic`], an interceptor that injects context into gRPC calls.
//! - `axum`, `tonic-server`: server spans record both ends of their connection
//!   ([`middleware::endpoints`]).
#![warn(missing_docs)]

mod clock;
mod config;
mod context;
mod lane;
mod layer;
pub mod message;
pub mod middleware;
mod pipeline;
#[cfg(feature = "pivot")]
mod pivot;
// Without the feature, the same names doing nothing: no callsite has advice.
#[cfg(not(feature = "pivot"))]
#[path = "pivot_off.rs"]
mod pivot;
pub mod propagation;
mod record;
mod sampling;
pub mod sinks;
mod subscriber;
pub mod testing;

use std::sync::Arc;

pub use config::{Config, InitError, Mode};
pub use context::{current_context, extract, in_current_span, inject, inject_span, SpanExt};
pub use layer::CausewayLayer;
pub use pipeline::{SpanSink, StatsSnapshot};
#[cfg(feature = "pivot")]
pub use pivot::carry::{merge_response_baggage, response_baggage};
#[cfg(feature = "pivot")]
pub use pivot::Pivot;
pub use propagation::{Baggage, Extracted, SpanContext, TraceState};
pub use record::with_remote_parent;
pub use sampling::Sampler;
pub use subscriber::{CausewaySubscriber, TracepointId, Tracepoints};

pub use causeway_model as model;

// The README's examples compile and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;

use pipeline::Pipeline;
use record::{Process, Recording};
use sampling::SamplerState;

/// Flushes recorded spans when dropped (waiting at most the configured shutdown timeout),
/// and sends the hub the last Pivot Tracing results.
#[must_use = "dropping the guard stops the span writer"]
pub struct Guard {
    pipeline: Arc<Pipeline>,
    #[cfg(feature = "pivot")]
    pivot: Arc<pivot::Runtime>,
    #[cfg(feature = "pivot")]
    agent: Option<pivot::agent::Agent>,
    timeout: std::time::Duration,
}

impl Guard {
    /// The Pivot Tracing queries this process runs.
    #[cfg(feature = "pivot")]
    pub fn pivot(&self) -> Pivot {
        Pivot(self.pivot.clone())
    }

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
        #[cfg(feature = "pivot")]
        if let Some(agent) = self.agent.take() {
            agent.shutdown(self.timeout);
        }
        self.pipeline.shutdown(self.timeout);
    }
}

/// Starts the writer with `sinks`; what every span of one subscriber is recorded with.
pub(crate) fn start_recording(
    config: &Config,
    sinks: Vec<Box<dyn SpanSink>>,
) -> Result<Arc<Recording>, InitError> {
    let process = Process {
        service: Arc::from(config.service.as_str()),
        host: Arc::from(config.host.as_str()),
        pid: config.pid,
    };
    let pipeline = Pipeline::start(sinks, process, config.queue_spans, config.flush_interval)
        .map_err(InitError::Thread)?;
    let recording = Arc::new(Recording {
        pivot: Arc::new(pivot::Runtime::for_process(config, clock::random_u64())),
        sampler: SamplerState::new(config.sampler.clone()),
        pipeline: pipeline.clone(),
        // Counts travel as u16 in a lane (see `lane::Counts`).
        max_annotations: config.max_annotations.min(u16::MAX as usize),
        cpu_time: config.cpu_time,
    });
    Ok(recording)
}

/// The dispatcher `config.mode` asks for, recording into `sinks`.
pub(crate) fn build_dispatch(
    config: &Config,
    sinks: Vec<Box<dyn SpanSink>>,
) -> Result<(tracing::Dispatch, Arc<Recording>), InitError> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::Layer as _;
    let recording = start_recording(config, sinks)?;
    let layer = || CausewayLayer {
        shared: recording.clone(),
    };
    let dispatch = match (config.mode, &config.targets) {
        (Mode::Exclusive, targets) => {
            tracing::Dispatch::new(CausewaySubscriber::new(recording.clone(), targets.clone()))
        }
        (Mode::Layer, None) => tracing::Dispatch::new(tracing_subscriber::registry().with(layer())),
        (Mode::Layer, Some(t)) => {
            // Callsites outside the targets still reach the layer when a query needs them.
            let filter = layer::TargetsOrQueried {
                targets: t.clone(),
                pivot: recording.pivot.clone(),
            };
            tracing::Dispatch::new(tracing_subscriber::registry().with(layer().with_filter(filter)))
        }
    };
    Ok((dispatch, recording))
}

/// The sinks a configuration asks for: span logs, OTLP, then the application's own.
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
    sinks.extend(
        config
            .sinks
            .iter()
            .map(|s| Box::new(s.clone()) as Box<dyn SpanSink>),
    );
    Ok(sinks)
}

fn guard(recording: &Recording, config: &Config) -> Result<Guard, InitError> {
    Ok(Guard {
        pipeline: recording.pipeline.clone(),
        #[cfg(feature = "pivot")]
        pivot: recording.pivot.clone(),
        #[cfg(feature = "pivot")]
        agent: pivot_agent(recording, config)?,
        timeout: config.shutdown_timeout,
    })
}

/// The agent that takes Pivot Tracing queries from `config.pivot_hub`, if one is named.
#[cfg(feature = "pivot")]
fn pivot_agent(
    recording: &Recording,
    config: &Config,
) -> Result<Option<pivot::agent::Agent>, InitError> {
    let Some(hub) = &config.pivot_hub else {
        return Ok(None);
    };
    let process = causeway_pivot::protocol::ProcessInfo {
        instance: clock::random_u64(),
        service: config.service.clone(),
        host: config.host.clone(),
        proc_name: config.proc_name().to_owned(),
        pid: config.pid,
    };
    pivot::agent::Agent::start(
        recording.pivot.clone(),
        hub,
        config.hub_token.clone(),
        config.pivot_interval,
        process,
    )
    .map(Some)
    .map_err(InitError::Thread)
}

/// Builds the Layer and its guard, to compose with other layers yourself
/// (`config.targets` is not applied: add the filter you want to the Layer).
pub fn layer(config: Config) -> Result<(CausewayLayer, Guard), InitError> {
    let recording = start_recording(&config, sinks_for(&config)?)?;
    let guard = guard(&recording, &config)?;
    Ok((CausewayLayer { shared: recording }, guard))
}

/// Builds the exclusive subscriber and its guard (whatever `config.mode` says). To keep
/// a log output beside it, give it an inner subscriber:
///
/// ```no_run
/// use tracing_subscriber::layer::SubscriberExt;
///
/// let (subscriber, _guard) = causeway::subscriber(causeway::Config::from_env()?)?;
/// let logs = tracing_subscriber::registry().with(tracing_subscriber::fmt::layer());
/// tracing::subscriber::set_global_default(subscriber.with_inner(logs))?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn subscriber(config: Config) -> Result<(CausewaySubscriber, Guard), InitError> {
    let recording = start_recording(&config, sinks_for(&config)?)?;
    let guard = guard(&recording, &config)?;
    let subscriber = CausewaySubscriber::new(recording, config.targets.clone());
    Ok((subscriber, guard))
}

/// The dispatcher `config.mode` asks for and its guard, not installed: to install for a
/// thread or a scope (`tracing::dispatcher::with_default`), as tests do.
pub fn dispatch(config: Config) -> Result<(tracing::Dispatch, Guard), InitError> {
    let (dispatch, recording) = build_dispatch(&config, sinks_for(&config)?)?;
    Ok((dispatch, guard(&recording, &config)?))
}

/// Installs Causeway as the global subscriber, in the mode `config.mode` names (by
/// default the exclusive [`CausewaySubscriber`]): the one way to install it. To keep a
/// log output, build it with [`subscriber`] and give it an inner subscriber; to build
/// your own Registry stack, use [`layer`].
pub fn init(config: Config) -> Result<Guard, InitError> {
    let (dispatch, guard) = dispatch(config)?;
    tracing::dispatcher::set_global_default(dispatch)
        .map_err(|e| InitError::AlreadyInstalled(e.to_string()))?;
    Ok(guard)
}
