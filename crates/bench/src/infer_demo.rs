//! `causeway-bench infer-demo`: black-box inference held to the demo's own traces. The
//! demo runs under `causeway capture` with its instrumentation on; each server span
//! names the connection its request came on, which matches every captured message to
//! its true trace (`causeway_blackbox::truth`). Clock offsets are injected into the
//! captured times afterwards (every process shares this machine's clock), and the
//! inferred ones compared with them.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use causeway_blackbox::delays::delays;
use causeway_blackbox::link::{link, patterns_of, Assignment, LinkOptions, Mode, Pattern};
use causeway_blackbox::logs::log_files;
use causeway_blackbox::reconcile::{leave_out_ports, Captured, Message, MessageId};
use causeway_blackbox::score::score;
use causeway_blackbox::truth::{truth, ServerCall};
use causeway_demo::Role;
use causeway_model::{Span, SpanId, SpanKind, Value};
use causeway_store::{Store, StoreOptions, TimeWindow, TraceStore as _};
use clap::Args;
use serde_json::json;

/// Runs of the demo at several loads, for the benchmarks held to its own traces.
#[derive(Args)]
pub struct DemoRuns {
    /// Request rates (per second) to run the demo at, one run each.
    #[arg(long, value_delimiter = ',', default_values_t = [10.0, 40.0, 120.0])]
    pub(crate) rates: Vec<f64>,
    /// How long each run lasts (at 10/s, a minute is 600 requests: 1% of them, the
    /// pattern threshold, is then six, not two odd ones).
    #[arg(long, default_value = "60s")]
    pub(crate) duration: humantime::Duration,
    /// Keep each run's data under this directory (default: a temporary directory
    /// removed at the end).
    #[arg(long)]
    pub(crate) keep: Option<PathBuf>,
    /// Analyse the runs kept under `--keep` again instead of running the demo (to try
    /// parameters on the same data).
    #[arg(long, requires = "keep")]
    pub(crate) reuse: bool,
}

impl DemoRuns {
    /// Each rate with its run's directory under the root (returned: removed at the end
    /// unless kept), cleared unless reused.
    pub(crate) fn dirs(&self, tag: &str) -> Result<(crate::harness::TempDir, Vec<(f64, PathBuf)>)> {
        let root = crate::harness::TempDir::new(self.keep.clone(), tag);
        let mut dirs = Vec::new();
        for &rate in &self.rates {
            let dir = root.0.join(format!("rate-{rate}"));
            if dir.exists() && !self.reuse {
                std::fs::remove_dir_all(&dir)
                    .with_context(|| format!("clearing {}", dir.display()))?;
            }
            dirs.push((rate, dir));
        }
        Ok((root, dirs))
    }
}

#[derive(Args)]
pub struct InferDemoArgs {
    #[command(flatten)]
    runs: DemoRuns,
    /// The modes scored: the connections mode alone scores a kept capture in seconds,
    /// the faithful and greedy ones take minutes.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [LinkMode::Greedy, LinkMode::Faithful, LinkMode::Connections])]
    modes: Vec<LinkMode>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// A mode of linking, as `--modes` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LinkMode {
    Greedy,
    Faithful,
    Connections,
}

/// The clock offset injected into each role's captured times (ns): a few processes
/// ahead, a few behind, the rest on time.
fn injected_offset(node: &str) -> i64 {
    match node {
        "frontend" => 1_500_000,
        "catalog" => -700_000,
        "orders" => 2_300_000,
        "storage-2" => -1_100_000,
        "cache" => 400_000,
        _ => 0,
    }
}

/// Names each demo process by its role, and the demo's own process (the load generator
/// and the collector) `demo`.
pub(crate) fn node_names() -> Vec<(String, String)> {
    let mut rules: Vec<(String, String)> = Role::ALL
        .iter()
        .map(|r| {
            (
                r.service().to_string(),
                format!("demo-node {}", r.service()),
            )
        })
        .collect();
    rules.push(("demo".into(), "demo".into()));
    rules
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The arguments that run `causeway demo` at `rate` for `duration` with its store in
/// `store`, its collector on free loopback ports (returned: gRPC, ingest, HTTP). Without
/// `edge`, every process is instrumented (`--no-edge`): its traces are the ground truth.
pub(crate) fn demo_args(
    store: &Path,
    rate: f64,
    duration: humantime::Duration,
    edge: bool,
) -> Result<(Vec<std::ffi::OsString>, [u16; 3])> {
    let (grpc, ingest, http) = (free_port()?, free_port()?, free_port()?);
    let args = [
        "demo".into(),
        "--data".into(),
        store.as_os_str().to_owned(),
        "--rate".into(),
        rate.to_string().into(),
        "--duration".into(),
        duration.to_string().into(),
        "--grpc".into(),
        format!("127.0.0.1:{grpc}").into(),
        "--ingest".into(),
        format!("127.0.0.1:{ingest}").into(),
        "--http".into(),
        format!("127.0.0.1:{http}").into(),
    ];
    let mut args = args.to_vec();
    if !edge {
        args.push("--no-edge".into());
    }
    Ok((args, [grpc, ingest, http]))
}

/// Runs the demo at `rate` under capture, into `dir/capture` and `dir/store`; returns
/// the collector's ports.
fn run_demo(dir: &Path, rate: f64, duration: humantime::Duration) -> Result<[u16; 3]> {
    let exe = crate::harness::causeway_exe()?;
    let (args, ports) = demo_args(&dir.join("store"), rate, duration, false)?;
    let status = Command::new(&exe)
        .arg("capture")
        .arg("--out")
        .arg(dir.join("capture"))
        .arg("--")
        .arg(&exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .context("running the demo under capture")?;
    if !status.success() {
        bail!("the demo under capture ended with {status}");
    }
    Ok(ports)
}

/// The server calls the demo stored: trace, client endpoint, time.
fn server_calls(store_dir: &Path) -> Result<(Vec<ServerCall>, usize)> {
    let store = Store::open(store_dir, StoreOptions::default())
        .with_context(|| format!("opening the store in {}", store_dir.display()))?;
    let calls = Mutex::new(Vec::new());
    let traces = std::sync::atomic::AtomicUsize::new(0);
    store.scan(TimeWindow::ALL, &|trace| {
        traces.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let by_id: HashMap<SpanId, &Span> = trace.spans.iter().map(|s| (s.span_id, s)).collect();
        let number = |id: SpanId| u64::from_be_bytes(id.to_bytes());
        // The nearest server span above `s`: the call whose handling made it.
        let caller = |s: &Span| {
            let mut at = s.parent_id;
            for _ in 0..trace.spans.len() {
                let p = by_id.get(&at?)?;
                if p.kind == SpanKind::Server {
                    return Some(number(p.span_id));
                }
                at = p.parent_id;
            }
            None
        };
        let mut found = Vec::new();
        for s in &trace.spans {
            if s.kind != SpanKind::Server {
                continue;
            }
            let (Some(Value::Str(ip)), Some(Value::I64(port))) = (
                s.attribute("network.peer.address"),
                s.attribute("network.peer.port"),
            ) else {
                continue;
            };
            found.push(ServerCall {
                trace: trace.trace_id.to_string(),
                id: number(s.span_id),
                caller: caller(s),
                peer: format!("{ip}:{port}"),
                start_ns: s.start as i64,
                end_ns: s.end as i64,
            });
        }
        if let Ok(mut calls) = calls.lock() {
            calls.extend(found);
        }
    })?;
    let calls = calls.into_inner().unwrap_or_default();
    Ok((calls, traces.into_inner()))
}

/// Shifts each node's times by its injected offset: sends on the sender's clock,
/// receipts on the receiver's.
fn inject_offsets(messages: &mut [Message]) {
    for m in messages {
        m.send_ns = m.send_ns.get().map(|s| s + injected_offset(&m.src)).into();
        m.recv_ns = m.recv_ns.get().map(|r| r + injected_offset(&m.dst)).into();
    }
}

/// The shapes of the patterns holding at least 1% of the traces.
fn common(patterns: &[Pattern]) -> HashSet<&str> {
    crate::infer::common(patterns)
        .into_iter()
        .map(|p| p.shape.as_str())
        .collect()
}

/// The mean relative error of the per-node mean delays, over nodes with at least 20
/// true delays.
fn node_delay_error(
    messages: &[Message],
    truth: &[Assignment],
    inferred: &[Assignment],
) -> Option<f64> {
    let real = delays(messages, truth).nodes;
    let got: HashMap<String, f64> = delays(messages, inferred)
        .nodes
        .into_iter()
        .map(|n| (n.node, n.mean_ns))
        .collect();
    let errors: Vec<f64> = real
        .iter()
        .filter(|n| n.count >= 20 && n.mean_ns > 0.0)
        .map(|n| (got.get(&n.node).copied().unwrap_or(0.0) - n.mean_ns).abs() / n.mean_ns)
        .collect();
    (!errors.is_empty()).then(|| errors.iter().sum::<f64>() / errors.len() as f64)
}

/// The largest error of the recovered clock offsets, from mean and from minimum
/// delays (ns), over node pairs with messages both ways.
fn offset_errors(messages: &[Message], assignments: &[Assignment]) -> (f64, f64, usize) {
    let (mut mean_err, mut min_err, mut pairs) = (0.0f64, 0.0f64, 0);
    for o in delays(messages, assignments).clock_offsets {
        let real = (injected_offset(&o.b) - injected_offset(&o.a)) as f64;
        mean_err = mean_err.max((o.offset_ns - real).abs());
        min_err = min_err.max((o.offset_min_ns - real).abs());
        pairs += 1;
    }
    (mean_err, min_err, pairs)
}

pub(crate) fn write_lines<T: serde::Serialize>(path: &Path, items: &[T]) -> Result<()> {
    use std::io::Write as _;
    let mut w = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    for x in items {
        serde_json::to_writer(&mut w, x)?;
        w.write_all(b"\n")?;
    }
    Ok(w.flush()?)
}

/// Runs the demo at `rate` under capture into `dir` (or, with `--reuse`, reads the run
/// kept there); returns the collector's ports.
pub(crate) fn run_or_reuse(dir: &Path, rate: f64, runs: &DemoRuns) -> Result<[u16; 3]> {
    let ports_file = dir.join("collector-ports.json");
    if runs.reuse {
        let text = std::fs::read_to_string(&ports_file)
            .with_context(|| format!("reading {}", ports_file.display()))?;
        return serde_json::from_str(&text)
            .with_context(|| format!("reading {}", ports_file.display()));
    }
    eprintln!(
        "running the demo under capture at {rate}/s for {}",
        runs.duration
    );
    let ports = run_demo(dir, rate, runs.duration)?;
    std::fs::write(&ports_file, serde_json::to_string(&ports)?)?;
    Ok(ports)
}

fn measure(dir: &Path, rate: f64, a: &InferDemoArgs) -> Result<Vec<serde_json::Value>> {
    let collector_ports = run_or_reuse(dir, rate, &a.runs)?;
    let (calls, stored_traces) = server_calls(&dir.join("store"))?;
    let mut captured = Captured::read(&log_files(&dir.join("capture"))?)?;
    captured.name_nodes(&node_names());
    let mut messages = captured.messages();
    // The span exports are not the shop's requests: left out, as `causeway infer
    // --ignore-port` would.
    leave_out_ports(&mut messages, &collector_ports);
    // Spans are matched on the true times, before the clocks are put out.
    let truth = truth(&messages, &calls);
    inject_offsets(&mut messages);
    // The set in the form `bench infer --set` and the fixtures' score.py read.
    write_lines(&dir.join("messages.jsonl"), &messages)?;
    write_lines(&dir.join("truth.jsonl"), &truth)?;
    let truth_assigned = causeway_blackbox::truth::assignments(&truth);
    let options = LinkOptions {
        listening: captured.listening.clone(),
        ..LinkOptions::default()
    };
    let true_patterns = patterns_of(&messages, &truth_assigned, &options);
    let true_common = common(&true_patterns);
    let truth_ids: HashSet<&MessageId> = truth.iter().map(|t| &t.id).collect();
    // Requests in flight on average: the traces' spans over the run.
    let mut spans: HashMap<&str, (i64, i64)> = HashMap::new();
    for c in &calls {
        let e = spans.entry(&c.trace).or_insert((i64::MAX, i64::MIN));
        e.0 = e.0.min(c.start_ns);
        e.1 = e.1.max(c.end_ns);
    }
    let busy: i64 = spans.values().map(|(s, e)| e - s).sum();
    let (first, last) = spans.values().fold((i64::MAX, i64::MIN), |(f, l), (s, e)| {
        (f.min(*s), l.max(*e))
    });
    let concurrency = busy as f64 / (last - first).max(1) as f64;
    let (offset_mean_err, offset_min_err, offset_pairs) = offset_errors(&messages, &truth_assigned);
    let mut rows = Vec::new();
    let modes = [
        (LinkMode::Greedy, "greedy", Mode::Greedy),
        (LinkMode::Faithful, "faithful", Mode::Faithful),
        (LinkMode::Connections, "connections", Mode::Connections),
    ];
    for (_, name, mode) in modes.into_iter().filter(|(m, _, _)| a.modes.contains(m)) {
        let start = Instant::now();
        let linked = link(&messages, mode, &options);
        let link_ms = start.elapsed().as_secs_f64() * 1e3;
        let assignments = linked.assignments(&messages);
        let s = score(&truth, &assignments);
        write_lines(&dir.join(format!("assignments-{name}.jsonl")), &assignments)?;
        // Inferred traces holding a message of a real request (not span exports).
        let request_traces: HashSet<u64> = assignments
            .iter()
            .filter(|x| truth_ids.contains(&x.id))
            .map(|x| x.trace)
            .collect();
        let request_assigned: Vec<Assignment> = assignments
            .iter()
            .filter(|x| request_traces.contains(&x.trace))
            .cloned()
            .collect();
        let inferred_patterns = patterns_of(&messages, &request_assigned, &options);
        let inferred_all: HashSet<&str> =
            inferred_patterns.iter().map(|p| p.shape.as_str()).collect();
        let inferred_common = common(&inferred_patterns);
        let pattern_recall = true_common.intersection(&inferred_all).count() as f64
            / true_common.len().max(1) as f64;
        let pattern_precision = inferred_common
            .iter()
            .filter(|p| true_patterns.iter().any(|t| t.shape == **p))
            .count() as f64
            / inferred_common.len().max(1) as f64;
        rows.push(json!({
            "rate": rate,
            "concurrency": concurrency,
            "mode": name,
            "messages": messages.len(),
            "matched": truth.len(),
            "traces": stored_traces,
            "precision": s.precision,
            "recall": s.recall,
            "f1": s.f1,
            "exact_traces": s.exact_traces,
            "right_parents": s.right_parents,
            "right_causes": s.right_causes,
            "pattern_recall": pattern_recall,
            "pattern_precision": pattern_precision,
            "common_patterns": true_common.len(),
            "node_delay_error": node_delay_error(&messages, &truth_assigned, &assignments),
            "offset_error_mean_ns": offset_mean_err,
            "offset_error_min_ns": offset_min_err,
            "offset_pairs": offset_pairs,
            "link_ms": link_ms,
        }));
    }
    Ok(rows)
}

pub fn run(a: InferDemoArgs) -> Result<()> {
    let (_root, dirs) = a.runs.dirs("infer-demo")?;
    let mut rows = Vec::new();
    for (rate, dir) in dirs {
        rows.extend(measure(&dir, rate, &a)?);
    }
    if a.json {
        outln!("{}", serde_json::to_string(&rows)?);
        return Ok(());
    }
    outln!(
        "{:>6} {:>6} {:<11} {:>8} {:>6} {:>6} {:>6} {:>6} {:>7} {:>6} {:>7} {:>7} {:>7} {:>9} {:>9}",
        "rate/s",
        "conc",
        "mode",
        "matched",
        "prec",
        "recall",
        "F1",
        "exact",
        "parents",
        "causes",
        "pat.rec",
        "pat.pre",
        "delay±",
        "off.mean",
        "off.min"
    );
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        outln!(
            "{:>6} {:>6.1} {:<11} {:>8} {:>6.3} {:>6.3} {:>6.3} {:>6.3} {:>7.3} {:>6.3} {:>7.2} {:>7.2} {:>6.1}% {:>7.3}ms {:>7.3}ms",
            f("rate"),
            f("concurrency"),
            r["mode"].as_str().unwrap_or_default(),
            r["matched"],
            f("precision"),
            f("recall"),
            f("f1"),
            f("exact_traces"),
            f("right_parents"),
            f("right_causes"),
            f("pattern_recall"),
            f("pattern_precision"),
            f("node_delay_error") * 100.0,
            f("offset_error_mean_ns") / 1e6,
            f("offset_error_min_ns") / 1e6,
        );
    }
    Ok(())
}
