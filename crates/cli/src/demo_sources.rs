//! The demo's sources besides instrumentation, followed by one agent on a thread of its
//! own while the shop runs, as `causeway agent --logs DIR/*.log* --captures CAPTURES
//! --join API` follows them: its processes' log files, their lines with ids shipped to
//! their spans and the lines of the service that prints none stitched and joined; the
//! capture logs of its uninstrumented edge proxy, sent to the server, which infers and
//! joins them to the instrumented traces a window at a time (`causeway_server::captures`).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::Result;
use causeway_server::agent::{Agent, AgentConfig};

/// A task run every `every` on a thread of its own until stopped, then once more.
pub(crate) struct Repeating {
    stop: Sender<()>,
    thread: JoinHandle<()>,
}

impl Repeating {
    /// `pass` is told whether it is the last.
    fn start(every: Duration, mut pass: impl FnMut(bool) + Send + 'static) -> Repeating {
        let (stop, stopped) = channel();
        let thread = std::thread::spawn(move || loop {
            let last = !matches!(stopped.recv_timeout(every), Err(RecvTimeoutError::Timeout));
            pass(last);
            if last {
                return;
            }
        });
        Repeating { stop, thread }
    }

    /// Stops after one more pass (so the lines and requests of the last moments go too).
    pub(crate) fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

/// What the demo's agent follows besides its logs: the edge's capture.
pub(crate) struct EdgeCapture {
    /// The capture directory.
    pub(crate) dir: PathBuf,
    /// Its node's name, and text of its command line.
    pub(crate) node: (String, String),
    /// The host its spans carry (as the shop's processes name theirs).
    pub(crate) host: String,
}

/// Follows the log files in `dir`, once a second, as `causeway agent --logs` does; with
/// `join` (the query API), as `--join` does: the lines of files that name no trace are
/// stitched and joined to the traces of their requests; with `edge`, its capture too, as
/// `--captures` does, its logs sent to the server. The last pass, after the processes
/// stop, takes every request and sends every byte.
pub(crate) fn follow_sources(
    dir: &Path,
    ingest: &str,
    checkpoint: PathBuf,
    join: Option<String>,
    edge: Option<EdgeCapture>,
) -> Result<Joiner> {
    let (captures, node_names, host) = match edge {
        Some(e) => (vec![e.dir], vec![e.node], Some(e.host)),
        None => (Vec::new(), Vec::new(), None),
    };
    let mut agent = Agent::new(AgentConfig {
        logs: vec![format!("{}/*.log*", dir.display())],
        collector: ingest.to_string(),
        checkpoint,
        join,
        captures,
        node_names,
        host,
        ..AgentConfig::default()
    })?;
    let plain = Arc::new(Mutex::new(Vec::new()));
    let plain_samples = plain.clone();
    let repeating = Repeating::start(Duration::from_secs(1), move |last| {
        let pass = if last {
            agent.finish()
        } else {
            agent.run_once()
        };
        if let Err(e) = pass {
            tracing::warn!(error = %e, "following the demo's logs and capture");
        }
        keep_samples(&plain_samples, agent.take_join_delays());
    });
    Ok(Joiner { repeating, plain })
}

/// The demo's sources followed while it runs (its logs, the edge's capture), and how
/// fresh the plain log's joins were.
pub(crate) struct Joiner {
    repeating: Repeating,
    plain: Arc<Mutex<Vec<u64>>>,
}

/// How long after their requests began a source's parts were sent, joined.
pub(crate) struct Freshness {
    pub(crate) requests: usize,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
}

impl Freshness {
    fn of(samples: &Mutex<Vec<u64>>) -> Freshness {
        let mut samples = samples.lock().map(|s| s.clone()).unwrap_or_default();
        samples.sort_unstable();
        let at = |q: f64| {
            let i = ((samples.len() as f64 * q) as usize).min(samples.len().saturating_sub(1));
            Duration::from_nanos(samples.get(i).copied().unwrap_or(0))
        };
        Freshness {
            requests: samples.len(),
            p50: at(0.5),
            p99: at(0.99),
        }
    }
}

/// Freshness samples kept (the first ones, on a long run).
const MAX_SAMPLES: usize = 1 << 20;

impl Joiner {
    /// Stops after one more pass, which takes every request left and sends every capture
    /// byte; how fresh the plain log's joined requests were.
    pub(crate) fn stop(self) -> Freshness {
        self.repeating.stop();
        Freshness::of(&self.plain)
    }
}

/// Keeps `delays` (ns) among the samples, up to [`MAX_SAMPLES`].
fn keep_samples(samples: &Mutex<Vec<u64>>, delays: impl IntoIterator<Item = u64>) {
    if let Ok(mut samples) = samples.lock() {
        let room = MAX_SAMPLES.saturating_sub(samples.len());
        samples.extend(delays.into_iter().take(room));
    }
}
