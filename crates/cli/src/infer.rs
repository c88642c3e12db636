//! `causeway infer`: capture logs (and reconciled messages) to causal paths.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use causeway_blackbox::delays::Delays;
use causeway_blackbox::infer::{infer, read_node_names, Inputs, Options};
use causeway_blackbox::join::JoinReport;
use causeway_blackbox::link::{LinkOptions, Linked, Mode};
use causeway_blackbox::reconcile::Captured;
use causeway_model::{Source, Span};
use clap::{Args, ValueEnum};
use serde::Serialize;

/// `--mode`: how causes are chosen.
#[derive(Clone, Copy, ValueEnum)]
pub enum ModeArg {
    /// WAP5's message linking.
    Faithful,
    /// Each message's cause is the latest message its sender received before (the
    /// baseline).
    Greedy,
    /// WAP5's linking, told which messages share a connection: a server's answer is
    /// caused by the request on its connection or by what it received while handling it.
    Connections,
}

/// `--sort`: how patterns are ordered.
#[derive(Clone, Copy, ValueEnum)]
pub enum SortArg {
    /// Expected count (the sum of the instances' probabilities).
    Expected,
    /// Expected count over count: the mean probability.
    Confidence,
    /// Expected count over the square root of count.
    Sqrt,
}

/// `causeway infer`: causal paths from captures or reconciled messages (WAP5).
#[derive(Args)]
pub struct InferArgs {
    /// Capture directories (from `causeway capture --out`).
    dirs: Vec<PathBuf>,
    /// A file naming nodes: lines `NAME = TEXT`; a captured process whose command line
    /// contains TEXT is the node NAME (the first line that matches; `#` starts a comment).
    #[arg(long)]
    names: Option<PathBuf>,
    /// Reconciled messages as JSON lines (`{"id", "src", "src_ep", "dst", "dst_ep",
    /// "send_ns", "recv_ns", "bytes"}`), besides or instead of capture directories.
    #[arg(long)]
    messages: Option<PathBuf>,
    /// Leave out the messages to or from this port (traffic that is not the system's
    /// requests, such as span or metric exports to a collector); repeatable.
    #[arg(long = "ignore-port", value_name = "PORT")]
    ignore_ports: Vec<u16>,
    /// Write the reconciled messages (captured and given) to this file, as JSON lines.
    #[arg(long)]
    export_messages: Option<PathBuf>,
    /// Write one line per message: `{"id", "trace", "parent", "cause", "probability"}`
    /// (`parent`: the request it was sent for; `cause`: the message after which it was
    /// sent, WAP5's sense).
    #[arg(long)]
    assignments: Option<PathBuf>,
    /// Send the inferred traces to this collector (the ingest address, as for `causeway
    /// agent --collector`): a request and its reply as one RPC (a client span at the caller,
    /// a server span at the receiver), marked inferred with its path's probability.
    #[arg(long)]
    collector: Option<String>,
    /// Join the inferred paths to the instrumented traces of the same requests, read from
    /// this query API (as `causeway --api`, e.g. http://127.0.0.1:7070) for the captured
    /// window: what instrumented processes reported stands for what the capture saw of
    /// them, the rest is placed in their traces, a proxy in front becomes the parent of
    /// the root. Needs --collector.
    #[arg(long, requires = "collector", value_name = "URL")]
    join: Option<String>,
    /// Access token, if the collector requires one.
    #[arg(long, env = "CAUSEWAY_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// How causes are chosen (the connections mode measured best on every set in
    /// BENCHMARKS.md; faithful is WAP5 as published).
    #[arg(long, value_enum, default_value = "connections")]
    mode: ModeArg,
    /// The window x: a cause is at most this long before its effect.
    #[arg(long, default_value = "2s")]
    window: humantime::Duration,
    /// y: being spontaneous scores as y times the pair's mean delay.
    #[arg(long, default_value_t = LinkOptions::default().spontaneous_factor)]
    spontaneous: f64,
    /// A link within this of probability 0.5 is tried both ways.
    #[arg(long, default_value_t = LinkOptions::default().try_both_band)]
    try_both_band: f64,
    /// Try-both decisions per tree.
    #[arg(long, default_value_t = LinkOptions::default().budget)]
    budget: u32,
    /// A port that talks to this many other endpoints is fixed (a server's); a node
    /// that never uses a fixed port is a client, named CLIENT in patterns. Ports a
    /// captured process listened on are fixed in any case.
    #[arg(long, default_value_t = LinkOptions::default().fixed_port_peers)]
    fixed_port_peers: usize,
    /// In the connections mode, link each message on its own in path instances, without
    /// the kinds of message learned to be caused at most (or exactly) once per cause.
    #[arg(long)]
    no_slots: bool,
    /// Patterns shown.
    #[arg(long, default_value_t = 20)]
    top: usize,
    #[arg(long, value_enum, default_value = "expected")]
    sort: SortArg,
    /// JSON output.
    #[arg(long)]
    json: bool,
    /// Print each phase's time and the memory held after it to stderr.
    #[arg(long, hide = true)]
    phases: bool,
}

/// Prints a phase's time and the process's resident memory (now and at its peak), when
/// asked to.
struct Phases {
    on: bool,
    at: std::time::Instant,
}

impl Phases {
    fn done(&mut self, what: &str) {
        if !self.on {
            return;
        }
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map_or("?", str::trim)
                .to_string()
        };
        let (names, reserved, used) = causeway_blackbox::reconcile::names_interned();
        eprintln!(
            "{what}: {:.2} s, resident {}, peak {}, {names} names in {} of {} MB",
            self.at.elapsed().as_secs_f64(),
            field("VmRSS:"),
            field("VmHWM:"),
            used >> 20,
            reserved >> 20,
        );
        self.at = std::time::Instant::now();
    }
}

/// mimalloc's option `mi_option_purge_delay` (its place in `mi_option_e`, v2 and v3; the
/// crate names no constant for it).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Has memory freed go back to the system at once. mimalloc keeps it a second by default
/// (ten in its arenas) for reuse; inference frees gigabytes between its steps and
/// allocates differently shaped tables in the next, so what it kept added 0.2 GB to the
/// peak at CoDeeN scale (BENCHMARKS.md).
fn return_freed_memory_at_once() {
    // SAFETY: sets one of mimalloc's integer options; mimalloc reads it when it next
    // purges, from any thread, and every value is valid (0: purge at once).
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
}

/// Runs `causeway infer`.
pub fn run(a: InferArgs) -> Result<()> {
    return_freed_memory_at_once();
    if a.dirs.is_empty() && a.messages.is_none() {
        bail!("nothing to infer from: give capture directories, --messages FILE, or both");
    }
    let mut phases = Phases {
        on: a.phases,
        at: std::time::Instant::now(),
    };
    let inputs = Inputs {
        capture_dirs: a.dirs.clone(),
        messages_file: a.messages.clone(),
        node_names: a
            .names
            .as_deref()
            .map(read_node_names)
            .transpose()?
            .unwrap_or_default(),
    };
    let defaults = Options::default();
    let options = Options {
        mode: match a.mode {
            ModeArg::Faithful => Mode::Faithful,
            ModeArg::Greedy => Mode::Greedy,
            ModeArg::Connections => Mode::Connections,
        },
        link: LinkOptions {
            window_ns: i64::try_from(a.window.as_nanos()).unwrap_or(i64::MAX),
            spontaneous_factor: a.spontaneous,
            try_both_band: a.try_both_band,
            budget: a.budget.min(20),
            fixed_port_peers: a.fixed_port_peers,
            learn_slots: !a.no_slots,
            ..defaults.link
        },
        ignore_ports: a.ignore_ports.clone(),
    };
    let found = infer(&inputs, &options, |step| phases.done(step))?;
    for (path, damage) in &found.captured.damage {
        eprintln!(
            "warning: {}: read up to the damage {damage}",
            path.display()
        );
    }
    for line in &found.skipped_lines {
        eprintln!("warning: {line}");
    }
    if found.ignored > 0 {
        eprintln!("left out {} messages on the ignored ports", found.ignored);
    }
    if let Some(path) = &a.export_messages {
        write_lines(path, &found.messages)?;
    }
    if let Some(path) = &a.assignments {
        write_lines(path, &found.assignments())?;
    }
    let mut sent = None;
    if let Some(url) = &a.collector {
        // Ids differ between runs, so inferring twice does not merge two runs' traces.
        let salt = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 | 1);
        let mut spans = found.spans(salt);
        let mut join = None;
        if let Some(api) = &a.join {
            let instrumented = instrumented_spans(api, a.token.clone(), &spans)?;
            let joined = causeway_blackbox::join::join(spans, &instrumented);
            spans = joined.spans;
            join = Some(joined.report);
        }
        let client = crate::client::Client::new(url, a.token.clone());
        let (accepted, rejected) =
            crate::import::send_spans(&client, &spans, |e| eprintln!("collector: {e}"))
                .with_context(|| format!("sending the inferred traces to {url}"))?;
        sent = Some(Sent {
            accepted,
            rejected,
            join,
        });
    }
    let delays = found.delays();
    phases.done("delays");
    report(
        &a,
        &found.captured,
        found.messages.len(),
        found.skipped_lines.len(),
        sent,
        found.linked,
        delays,
    )?;
    phases.done("reported");
    Ok(())
}

/// What was sent to the collector.
struct Sent {
    accepted: usize,
    rejected: usize,
    join: Option<JoinReport>,
}

/// Instrumented spans can start this long before the first captured message of their
/// request (a long request whose capture began midway).
const JOIN_LOOKBACK_NS: u64 = 60_000_000_000;

/// The spans not inferred that the API holds for the window of `inferred`, through its
/// native export.
pub(crate) fn instrumented_spans(
    api: &str,
    token: Option<String>,
    inferred: &[Span],
) -> Result<Vec<Span>> {
    let Some(window) = causeway_server::agent::export_window(inferred, JOIN_LOOKBACK_NS) else {
        return Ok(Vec::new());
    };
    let body = crate::client::Client::new(api, token)
        .get_bytes(&window)
        .with_context(|| format!("reading the instrumented spans from {api}"))?;
    let decoded = causeway_model::codec::native::decode_stream(&body);
    if let Some(problem) = decoded.problems.first() {
        eprintln!("warning: the export from {api} was damaged: {problem}");
    }
    Ok(decoded
        .spans
        .into_iter()
        .filter(|s| !matches!(s.source, Source::Inferred { .. }))
        .collect())
}

/// Writes `items` to `path` as JSON lines.
fn write_lines<T: Serialize>(path: &Path, items: &[T]) -> Result<()> {
    let mut w = std::io::BufWriter::new(
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
    );
    for item in items {
        serde_json::to_writer(&mut w, item)?;
        w.write_all(b"\n")?;
    }
    w.flush()?;
    Ok(())
}

fn report(
    a: &InferArgs,
    captured: &Captured,
    messages: usize,
    skipped: usize,
    sent: Option<Sent>,
    mut linked: Linked,
    delays: Delays,
) -> Result<()> {
    let key = |p: &causeway_blackbox::link::Pattern| match a.sort {
        SortArg::Expected => p.expected,
        SortArg::Confidence => p.expected / p.count.max(1) as f64,
        SortArg::Sqrt => p.expected / (p.count.max(1) as f64).sqrt(),
    };
    linked.patterns.sort_by(|x, y| key(y).total_cmp(&key(x)));
    let traces = linked
        .placements
        .iter()
        .map(|x| x.trace)
        .collect::<std::collections::HashSet<_>>()
        .len();
    if a.json {
        // Written from borrowed fields, not built as a JSON value first: at scale the
        // causal delays alone are tens of megabytes of JSON.
        #[derive(Serialize)]
        struct CausalDelay<'a> {
            src: &'a str,
            dst: &'a str,
            mean_ns: f64,
        }
        #[derive(Serialize)]
        struct Report<'a> {
            processes: &'a [causeway_blackbox::reconcile::Process],
            counts: &'a causeway_blackbox::reconcile::Counts,
            messages: usize,
            skipped_lines: usize,
            spans_sent: Option<usize>,
            spans_rejected: Option<usize>,
            #[serde(skip_serializing_if = "Option::is_none")]
            join: Option<&'a JoinReport>,
            traces: usize,
            patterns: &'a [causeway_blackbox::link::Pattern],
            causal_delays: Vec<CausalDelay<'a>>,
            nodes: &'a [causeway_blackbox::delays::NodeDelay],
            links: &'a [causeway_blackbox::delays::LinkDelay],
            clock_offsets: &'a [causeway_blackbox::delays::ClockOffset],
        }
        let report = Report {
            processes: &captured.processes,
            counts: &captured.counts,
            messages,
            skipped_lines: skipped,
            spans_sent: sent.as_ref().map(|s| s.accepted),
            spans_rejected: sent.as_ref().map(|s| s.rejected),
            join: sent.as_ref().and_then(|s| s.join.as_ref()),
            traces,
            patterns: &linked.patterns[..a.top.min(linked.patterns.len())],
            causal_delays: linked
                .delays
                .iter()
                .map(|(src, dst, mean_ns)| CausalDelay {
                    src,
                    dst,
                    mean_ns: *mean_ns,
                })
                .collect(),
            nodes: &delays.nodes,
            links: &delays.links,
            clock_offsets: &delays.clock_offsets,
        };
        outln!("{}", serde_json::to_string(&report)?);
        return Ok(());
    }
    outln!(
        "{} processes, {} messages, {} inferred traces, {} patterns",
        captured.processes.len(),
        messages,
        traces,
        linked.patterns.len()
    );
    if let Some(sent) = &sent {
        outln!(
            "sent {} spans to the collector ({} rejected)",
            sent.accepted,
            sent.rejected
        );
        if let Some(j) = &sent.join {
            outln!(
                "joined {} of {} inferred traces to instrumented ones ({} split, {} of them one request's two traces, linked), {} spans placed ({} under the instrumented call that sent them), {} anchored, {} roots given a caller",
                j.joined,
                j.inferred_traces,
                j.split,
                j.continued,
                j.placed_spans,
                j.callers,
                j.anchored_spans,
                j.parent_links
            );
        }
    }
    outln!(
        "{:>10} {:>7} {:>8} {:>9}  pattern",
        "expected",
        "count",
        "exp/cnt",
        "exp/√cnt"
    );
    for p in linked.patterns.iter().take(a.top) {
        outln!(
            "{:>10.2} {:>7} {:>8.3} {:>9.3}  {}",
            p.expected,
            p.count,
            p.expected / p.count.max(1) as f64,
            p.expected / (p.count.max(1) as f64).sqrt(),
            p.shape
        );
    }
    if !delays.nodes.is_empty() {
        outln!(
            "\n{:>8} {:>12}  node delay (a message's receipt to the send it caused)",
            "count",
            "mean"
        );
        for n in &delays.nodes {
            outln!("{:>8} {:>12}  {}", n.count, signed(n.mean_ns), n.node);
        }
    }
    for o in &delays.clock_offsets {
        outln!(
            "clock of {} minus {}: {} (from mean delays), {} (from minimum delays), {}+{} messages",
            o.b,
            o.a,
            signed(o.offset_ns),
            signed(o.offset_min_ns),
            o.a_to_b,
            o.b_to_a
        );
    }
    Ok(())
}

/// A signed duration: `-1.50ms`.
fn signed(ns: f64) -> String {
    let text = crate::print::duration(ns.abs() as u64);
    if ns < 0.0 {
        format!("-{text}")
    } else {
        text
    }
}
