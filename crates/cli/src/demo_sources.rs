//! The demo's sources besides instrumentation, followed by one agent on a thread of its
//! own while the shop runs, as `causeway agent --logs DIR/*.log* --captures CAPTURES
//! --join API` follows them: its processes' log files, their lines with ids shipped to
//! their spans and the lines of the service that prints none stitched and joined; the
//! capture of its uninstrumented edge proxy, inferred and joined to the instrumented
//! traces a window at a time.

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
/// `--captures` does, its paths joined. The last pass, after the processes stop, takes
/// every request.
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
    let captured = Arc::new(Mutex::new(Vec::new()));
    let (plain_samples, captured_samples) = (plain.clone(), captured.clone());
    let passes = Arc::new(Mutex::new(Vec::new()));
    let inference = passes.clone();
    let repeating = Repeating::start(Duration::from_secs(1), move |last| {
        let pass = if last {
            agent.finish()
        } else {
            agent.run_once()
        };
        match pass {
            Ok(stats) if stats.capture_messages > 0 => {
                if let Ok(mut passes) = inference.lock() {
                    if passes.len() < MAX_SAMPLES {
                        passes.push((stats.capture_us, stats.capture_messages));
                    }
                }
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "following the demo's logs and capture"),
        }
        keep_samples(&plain_samples, agent.take_join_delays());
        keep_samples(&captured_samples, agent.take_capture_delays());
    });
    Ok(Joiner {
        repeating,
        plain,
        captured,
        passes,
    })
}

/// The demo's sources followed while it runs (its logs, the edge's capture), and how
/// fresh the joins were.
pub(crate) struct Joiner {
    repeating: Repeating,
    plain: Arc<Mutex<Vec<u64>>>,
    captured: Arc<Mutex<Vec<u64>>>,
    /// Each pass that inferred the capture: microseconds reading and inferring, and the
    /// messages linked.
    passes: Arc<Mutex<Vec<(u64, u64)>>>,
}

/// What inferring the capture cost a pass.
pub(crate) struct InferenceCost {
    /// Passes that inferred.
    pub(crate) passes: usize,
    /// The median pass.
    pub(crate) p50: Duration,
    /// The slowest pass.
    pub(crate) max: Duration,
    /// The median of the passes' messages linked.
    pub(crate) messages_p50: u64,
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
    /// Stops after one more pass, which takes every request left; how fresh the plain
    /// log's joined requests and the edge's inferred paths were.
    pub(crate) fn stop(self) -> (Freshness, Freshness, InferenceCost) {
        self.repeating.stop();
        let passes = self.passes.lock().map(|p| p.clone()).unwrap_or_default();
        let median = |mut v: Vec<u64>| {
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or(0)
        };
        let cost = InferenceCost {
            passes: passes.len(),
            p50: Duration::from_micros(median(passes.iter().map(|p| p.0).collect())),
            max: Duration::from_micros(passes.iter().map(|p| p.0).max().unwrap_or(0)),
            messages_p50: median(passes.iter().map(|p| p.1).collect()),
        };
        (
            Freshness::of(&self.plain),
            Freshness::of(&self.captured),
            cost,
        )
    }
}

/// Keeps `delays` (ns) among the samples, up to [`MAX_SAMPLES`].
fn keep_samples(samples: &Mutex<Vec<u64>>, delays: impl IntoIterator<Item = u64>) {
    if let Ok(mut samples) = samples.lock() {
        let room = MAX_SAMPLES.saturating_sub(samples.len());
        samples.extend(delays.into_iter().take(room));
    }
}
