//! The demo's sources besides instrumentation, each followed on a thread of its own while
//! the shop runs: its processes' log files, shipped as `causeway agent --logs` ships them;
//! the capture of its uninstrumented edge proxy, inferred and joined to the instrumented
//! traces as `causeway infer --join` joins them, a window at a time; the lines of the
//! service that prints no ids are stitched and joined by the same agent (`--join`).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use causeway_blackbox::infer::{infer, Inputs, Options};
use causeway_blackbox::join::join;
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

/// Follows the log files in `dir`, once a second, as `causeway agent --logs` does; with
/// `join` (the query API), as `--join` does: the lines of files that name no trace are
/// stitched and joined to the traces of their requests (the last pass, after the
/// processes stop, takes every request).
pub(crate) fn follow_logs(
    dir: &Path,
    ingest: &str,
    checkpoint: PathBuf,
    join: Option<String>,
) -> Result<Joiner> {
    let mut agent = Agent::new(AgentConfig {
        logs: vec![format!("{}/*.log*", dir.display())],
        collector: ingest.to_string(),
        checkpoint,
        join,
        ..AgentConfig::default()
    })?;
    let freshness = Arc::new(Mutex::new(Vec::new()));
    let samples = freshness.clone();
    let repeating = Repeating::start(Duration::from_secs(1), move |last| {
        let pass = if last {
            agent.finish()
        } else {
            agent.run_once()
        };
        if let Err(e) = pass {
            tracing::warn!(error = %e, "following the demo's logs");
        }
        keep_samples(&samples, agent.take_join_delays());
    });
    Ok(Joiner {
        repeating,
        freshness,
    })
}

/// How long after a request began its inferred path is taken while the shop runs: its
/// messages have been captured and its instrumented spans exported by then. The last
/// pass, once the processes have stopped (their captures and spans flushed), takes all.
const SETTLE: Duration = Duration::from_secs(3);

/// A source joined while the demo runs (the edge's capture, the logs), and how fresh the
/// joins were.
pub(crate) struct Joiner {
    repeating: Repeating,
    freshness: Arc<Mutex<Vec<u64>>>,
}

/// How long after their requests began a source's parts were sent, joined.
pub(crate) struct Freshness {
    pub(crate) requests: usize,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
}

/// Freshness samples kept (the first ones, on a long run).
const MAX_SAMPLES: usize = 1 << 20;

impl Joiner {
    /// Stops after one more pass, which takes every request left.
    pub(crate) fn stop(self) -> Freshness {
        self.repeating.stop();
        let mut samples = self.freshness.lock().map(|s| s.clone()).unwrap_or_default();
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

/// Infers the paths of the capture in `captures` every two seconds, and sends those that
/// began in the window since the last pass, joined to the instrumented traces the query
/// API at `api` holds, to `ingest`. The edge's node is `edge` on host `edge_host`.
pub(crate) fn join_captures(
    captures: PathBuf,
    api: String,
    ingest: String,
    edge_host: &'static str,
) -> Joiner {
    let client = crate::client::Client::new(&ingest, None);
    let mut from = now_ns();
    let mut pass = 0u64;
    let freshness = Arc::new(Mutex::new(Vec::new()));
    let samples = freshness.clone();
    let repeating = Repeating::start(Duration::from_secs(2), move |last| {
        pass += 1;
        let settle = if last { Duration::ZERO } else { SETTLE };
        let to = now_ns().saturating_sub(settle.as_nanos() as u64);
        if to <= from {
            return;
        }
        let inputs = Inputs {
            capture_dirs: vec![captures.clone()],
            node_names: vec![("edge".into(), "demo-node edge".into())],
            ..Inputs::default()
        };
        let inferred = match infer(&inputs, &Options::default(), |_| {}) {
            Ok(found) => found,
            Err(e) => {
                tracing::warn!(error = %e, "inferring the edge's paths");
                return;
            }
        };
        // Each pass numbers its paths afresh: its own salt keeps their ids apart.
        let spans = inferred.spans(from ^ pass.rotate_left(48));
        let mut starts = std::collections::HashMap::new();
        for s in &spans {
            let start = starts.entry(s.trace_id).or_insert(u64::MAX);
            *start = (*start).min(s.start);
        }
        let window = from..to;
        from = to;
        let began: Vec<_> = spans
            .into_iter()
            .filter(|s| window.contains(&starts[&s.trace_id]))
            .collect();
        if began.is_empty() {
            return;
        }
        let instrumented = match crate::infer::instrumented_spans(&api, None, &began) {
            Ok(spans) => spans,
            Err(e) => {
                tracing::warn!(error = %e, "reading the instrumented spans to join");
                return;
            }
        };
        let mut joined = join(began, &instrumented).spans;
        for s in &mut joined {
            if &*s.service == "edge" {
                s.host = edge_host.into();
            }
        }
        if let Err(e) = crate::import::send_spans(
            &client,
            &joined,
            |e| tracing::warn!(error = %e, "sending the edge's paths"),
        ) {
            tracing::warn!(error = %e, "sending the edge's paths");
            return;
        }
        record_freshness(&samples, starts.values().filter(|s| window.contains(*s)));
    });
    Joiner {
        repeating,
        freshness,
    }
}

/// Records how long after `starts` their requests' parts were sent, joined: now.
fn record_freshness<'a>(samples: &Mutex<Vec<u64>>, starts: impl Iterator<Item = &'a u64>) {
    let sent = now_ns();
    keep_samples(samples, starts.map(|s| sent.saturating_sub(*s)));
}

/// Keeps `delays` (ns) among the samples, up to [`MAX_SAMPLES`].
fn keep_samples(samples: &Mutex<Vec<u64>>, delays: impl IntoIterator<Item = u64>) {
    if let Ok(mut samples) = samples.lock() {
        let room = MAX_SAMPLES.saturating_sub(samples.len());
        samples.extend(delays.into_iter().take(room));
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
