//! The demo's sources besides instrumentation, each followed on a thread of its own while
//! the shop runs: its processes' log files, shipped as `causeway agent --logs` ships them;
//! the capture of its uninstrumented edge proxy, inferred and joined to the instrumented
//! traces as `causeway infer --join` joins them, a window at a time; and the plain log of
//! the service that prints no ids, stitched and joined as `causeway logs --join` does.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use causeway_blackbox::infer::{infer, Inputs, Options};
use causeway_blackbox::join::join;
use causeway_logflow::traces::RequestSpans;
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

/// Follows the log files in `dir`, once a second.
pub(crate) fn follow_logs(dir: &Path, ingest: &str, checkpoint: PathBuf) -> Result<Repeating> {
    let mut agent = Agent::new(AgentConfig {
        logs: vec![format!("{}/*.log*", dir.display())],
        collector: ingest.to_string(),
        checkpoint,
        ..AgentConfig::default()
    })?;
    Ok(Repeating::start(Duration::from_secs(1), move |_| {
        if let Err(e) = agent.run_once() {
            tracing::warn!(error = %e, "following the demo's logs");
        }
    }))
}

/// How long after a request began its inferred path is taken while the shop runs: its
/// messages have been captured and its instrumented spans exported by then. The last
/// pass, once the processes have stopped (their captures and spans flushed), takes all.
const SETTLE: Duration = Duration::from_secs(3);

/// The edge's capture joined while the demo runs, and how fresh the joins were.
pub(crate) struct Joiner {
    repeating: Repeating,
    freshness: Arc<Mutex<Vec<u64>>>,
}

/// How long after their requests began the edge's parts were sent, joined.
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
    if let Ok(mut samples) = samples.lock() {
        let room = MAX_SAMPLES.saturating_sub(samples.len());
        samples.extend(starts.map(|s| sent.saturating_sub(*s)).take(room));
    }
}

/// Passes of a plain log kept for the next: a request that began in a pass's window may
/// have lines read by the passes before (10 s at a pass every 2 s).
const CONTEXT_PASSES: usize = 5;

/// Stitches the lines `file` gained every two seconds, with those of the passes before
/// as context, and sends the requests that began in the window since the last pass,
/// joined to the traces the query API at `api` holds, to `ingest`; the first pass that
/// stitched any also sends its stitching report (the Logs page's identifiers and links).
pub(crate) fn join_plain_logs(file: PathBuf, api: String, ingest: String) -> Joiner {
    let client = crate::client::Client::new(&ingest, None);
    let name = file
        .file_name()
        .map_or_else(|| "plain.log".into(), |n| n.to_string_lossy().into_owned());
    let mut read_to = 0u64;
    // Each pass's complete lines, and the number of the first.
    let mut passes: VecDeque<(Vec<u8>, u32)> = VecDeque::new();
    let mut next_line = 1u32;
    let mut from = now_ns();
    let mut pass = 0u64;
    let mut reported = false;
    let freshness = Arc::new(Mutex::new(Vec::new()));
    let samples = freshness.clone();
    let repeating = Repeating::start(Duration::from_secs(2), move |last| {
        pass += 1;
        let settle = if last { Duration::ZERO } else { SETTLE };
        let to = now_ns().saturating_sub(settle.as_nanos() as u64);
        match read_lines(&file, &mut read_to) {
            Ok(lines) => {
                let count = lines.iter().filter(|&&b| b == b'\n').count() as u32;
                passes.push_back((lines, next_line));
                next_line += count;
                while passes.len() > CONTEXT_PASSES {
                    passes.pop_front();
                }
            }
            Err(e) => tracing::warn!(error = %e, "reading {}", file.display()),
        }
        if to <= from {
            return;
        }
        let Some(first_line) = passes.front().map(|p| p.1) else {
            return;
        };
        let bytes: Vec<u8> = passes.iter().flat_map(|p| p.0.iter().copied()).collect();
        let window = causeway_logflow::window::Window {
            files: vec![(name.clone(), bytes)],
            first_lines: vec![first_line],
            new_from: vec![first_line],
            overlap_from: vec![u32::MAX],
            warnings: Vec::new(),
            counts: None,
        };
        let options = causeway_logflow::Options {
            keep_lines: true,
            ..causeway_logflow::Options::default()
        };
        let mut requests = RequestSpans::new(from ^ pass.rotate_left(40));
        let mut windows = std::iter::once(window);
        let stitched = match causeway_logflow::stitch_logs(
            || windows.next(),
            vec![name.clone()],
            &options,
            &mut requests,
        ) {
            Ok(stitched) => stitched,
            Err(never) => match never {},
        };
        let mut starts = std::collections::HashMap::new();
        for s in &requests.spans {
            let start = starts.entry(s.trace_id).or_insert(u64::MAX);
            *start = (*start).min(s.start);
        }
        let window = from..to;
        from = to;
        let began: Vec<_> = requests
            .spans
            .into_iter()
            .filter(|s| window.contains(&starts[&s.trace_id]))
            .collect();
        if began.is_empty() {
            return;
        }
        let traces = match crate::infer::instrumented_spans(&api, None, &began) {
            Ok(spans) => spans,
            Err(e) => {
                tracing::warn!(error = %e, "reading the traces to join the plain log to");
                return;
            }
        };
        let joined = causeway_logflow::join::join(began, &traces);
        if let Err(e) = crate::import::send_spans(
            &client,
            &joined.spans,
            |e| tracing::warn!(error = %e, "sending the plain log's requests"),
        ) {
            tracing::warn!(error = %e, "sending the plain log's requests");
            return;
        }
        record_freshness(&samples, starts.values().filter(|s| window.contains(*s)));
        if !reported {
            let report = crate::logs::stitching_report(from, &stitched);
            reported = client.post_json("/v1/logflow/report", &report).is_ok();
        }
    });
    Joiner {
        repeating,
        freshness,
    }
}

/// The complete lines `file` gained past `read_to`, which moves past them.
fn read_lines(file: &Path, read_to: &mut u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = match std::fs::File::open(file) {
        Ok(f) => f,
        // Not written yet.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    f.seek(SeekFrom::Start(*read_to))?;
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    bytes.truncate(complete);
    *read_to += complete as u64;
    Ok(bytes)
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}
