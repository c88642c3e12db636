//! An in-memory recorder for tests: spans recorded under it come back as model spans and
//! assembled traces, without files or a collector.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use causeway_model::{Span, Trace};

use crate::config::{Config, InitError, Mode};
use crate::pipeline::{Pipeline, SpanSink, StatsSnapshot};

/// A test's configuration for `service`: [`Config::new`], in the subscriber mode the
/// `CAUSEWAY_MODE` variable names (`exclusive` or `layer`), so that one test suite runs
/// in either mode without a rebuild.
///
/// # Panics
/// If `CAUSEWAY_MODE` holds anything else: a typo would silently test the other mode.
pub fn config(service: &str) -> Config {
    let config = Config::new(service);
    match std::env::var("CAUSEWAY_MODE") {
        Ok(mode) => config.with_mode(
            Mode::parse(&mode).unwrap_or_else(|e| panic!("CAUSEWAY_MODE={mode:?}: {e}")),
        ),
        Err(_) => config,
    }
}

struct MemorySink(Arc<Mutex<Vec<Span>>>);

impl SpanSink for MemorySink {
    fn write(&mut self, spans: &[Span]) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(spans);
    }
    fn flush(&mut self) {}
}

/// Records spans in memory.
///
/// ```
/// let recorder = causeway::testing::Recorder::new();
/// recorder.in_scope(|| {
///     let _root = tracing::info_span!("checkout").entered();
///     tracing::info!(items = 3, "priced");
/// });
/// let traces = recorder.traces();
/// assert_eq!(traces.len(), 1);
/// assert_eq!(traces[0].spans[0].events[0].name, "priced");
/// ```
pub struct Recorder {
    spans: Arc<Mutex<Vec<Span>>>,
    pipeline: Arc<Pipeline>,
    #[cfg(feature = "pivot")]
    pivot: crate::Pivot,
    dispatch: tracing::Dispatch,
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// A recorder for service `test` that samples everything, in the mode
    /// `CAUSEWAY_MODE` names ([`config`]).
    pub fn new() -> Recorder {
        // Starting a thread only fails when the OS is out of resources; a test cannot go
        // on then anyway.
        Recorder::with_config(config("test")).expect("starting the recorder's writer thread")
    }

    /// A recorder with this configuration (its sinks are replaced by memory), in the
    /// subscriber mode it names.
    pub fn with_config(config: Config) -> Result<Recorder, InitError> {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let (dispatch, recording) =
            crate::build_dispatch(&config, vec![Box::new(MemorySink(spans.clone()))])?;
        Ok(Recorder {
            spans,
            pipeline: recording.pipeline.clone(),
            #[cfg(feature = "pivot")]
            pivot: crate::Pivot(recording.pivot.clone()),
            dispatch,
        })
    }

    /// The dispatcher to install (per thread, per test, or globally).
    pub fn dispatch(&self) -> tracing::Dispatch {
        self.dispatch.clone()
    }

    /// Runs `f` with this recorder as the thread's dispatcher.
    pub fn in_scope<R>(&self, f: impl FnOnce() -> R) -> R {
        tracing::dispatcher::with_default(&self.dispatch, f)
    }

    /// Makes this recorder the thread's dispatcher until the guard drops.
    pub fn set_default(&self) -> tracing::dispatcher::DefaultGuard {
        tracing::dispatcher::set_default(&self.dispatch)
    }

    /// Every span finished so far, on every thread.
    pub fn spans(&self) -> Vec<Span> {
        self.pipeline.flush(Duration::from_secs(5));
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Every span finished so far, assembled into traces (ordered by trace id).
    pub fn traces(&self) -> Vec<Trace> {
        Trace::assemble_all(self.spans())
    }

    /// Forgets the spans recorded so far.
    pub fn clear(&self) {
        self.pipeline.flush(Duration::from_secs(5));
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// The Pivot Tracing queries the recorder runs.
    #[cfg(feature = "pivot")]
    pub fn pivot(&self) -> crate::Pivot {
        self.pivot.clone()
    }

    /// The pipeline's counters.
    pub fn stats(&self) -> StatsSnapshot {
        self.pipeline.stats()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        self.pipeline.shutdown(Duration::from_secs(1));
    }
}
