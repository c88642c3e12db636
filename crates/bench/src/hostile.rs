//! `causeway-bench hostile`: a well-behaved client's ingest, alone and then beside
//! hostile ones, against `causeway serve` run as a child process (so its memory is its
//! own): slow senders, an ingest flood, idle connections, greedy SQL, large exports and
//! searches with huge limits, all at once. Reports the well-behaved client's acknowledged
//! rate and latency in both phases, what the hostile clients were answered, and the
//! server's peak resident memory against a bound; ends by checking that every span the
//! well-behaved client was acknowledged for is stored.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use causeway_model::codec::otlp;
use causeway_model::{Span, SpanId, TraceId};
use clap::Args;

use crate::harness::{now_ns, percentiles, TempDir};
use causeway_cli::serve_limits::Size;

#[derive(Args)]
pub(crate) struct HostileArgs {
    /// Seconds of each phase: the well-behaved client alone, then beside the others.
    #[arg(long, default_value_t = 20)]
    seconds: u64,
    /// Spans per second the well-behaved client sends (in batches of 100, 10 traces).
    #[arg(long, default_value_t = 2000)]
    rate: u64,
    /// The server's resident memory may peak at this; past it the run fails.
    #[arg(long, default_value_t = Size(1 << 30))]
    rss_bound: Size,
    /// The `causeway` binary whose `serve` is measured (default: this one), to set
    /// another build beside this one.
    #[arg(long)]
    server_binary: Option<PathBuf>,
    /// Flags passed to `causeway serve` (its limits), as one string.
    #[arg(long, default_value = "", allow_hyphen_values = true)]
    serve_flags: String,
    /// Which hostile clients run: slow, flood, idle, sql, export, search (default: all).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "slow,flood,idle,sql,export,search"
    )]
    clients: Vec<String>,
    /// The store's directory (default: a temporary one).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// Spans per batch of the well-behaved client, and traces per batch.
const BATCH_SPANS: u64 = 100;
const BATCH_TRACES: u64 = 10;
/// Slow senders, each trickling one byte every two seconds.
const SLOW_SENDERS: usize = 64;
/// Threads of the ingest flood, each sending 4 MiB bodies back to back.
const FLOOD_THREADS: usize = 4;
/// Idle connections held to the query API.
const IDLE_CONNECTIONS: usize = 1000;

/// `causeway serve` as a child on free loopback ports.
struct Server {
    child: Child,
    ingest: String,
    api: String,
}

impl Server {
    fn start(
        binary: Option<&std::path::Path>,
        data: &std::path::Path,
        flags: &str,
    ) -> Result<Server> {
        let exe = match binary {
            Some(b) => b.to_path_buf(),
            None => crate::harness::causeway_exe()?,
        };
        let mut child = Command::new(exe)
            .args(["serve", "--grpc", "127.0.0.1:0", "--ingest", "127.0.0.1:0"])
            .args(["--http", "127.0.0.1:0", "--data"])
            .arg(data)
            .args(flags.split_whitespace())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting causeway serve")?;
        let out = BufReader::new(child.stdout.take().context("the server's output")?);
        let (mut ingest, mut api) = (None, None);
        for line in out.lines() {
            let line = line?;
            let last = line.split_whitespace().last().unwrap_or("").to_string();
            if line.contains("OTLP/HTTP") {
                ingest = Some(last.trim_end_matches("/v1/traces").to_string());
            } else if line.contains("query API") {
                api = Some(last);
            } else if line.contains("Ctrl-C") {
                break;
            }
        }
        match (ingest, api) {
            (Some(ingest), Some(api)) => Ok(Server { child, ingest, api }),
            _ => bail!("causeway serve did not start (flags: {flags:?})"),
        }
    }

    /// A memory figure of the server from /proc, in MiB.
    fn memory_mib(&self, field: &str) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb / 1024.0)
    }

    fn addr(url: &str) -> String {
        url.trim_start_matches("http://").to_string()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn agent() -> ureq::Agent {
    ureq::Agent::new_with_config(
        ureq::config::Config::builder()
            .timeout_global(Some(Duration::from_secs(60)))
            .http_status_as_error(false)
            .build(),
    )
}

/// Answers counted by status (0: no answer).
#[derive(Default)]
struct Statuses(Mutex<std::collections::BTreeMap<u16, u64>>);

impl Statuses {
    fn count(&self, status: u16) {
        *self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(status)
            .or_default() += 1;
    }

    fn json(&self) -> serde_json::Value {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.iter()
            .map(|(s, n)| (s.to_string(), serde_json::json!(n)))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }
}

/// How long the well-behaved client retries a batch the server turned away (the
/// Collector's exporters retry for minutes; a phase lasts seconds).
const RETRY_FOR: Duration = Duration::from_secs(20);

/// One request of the well-behaved client.
struct Sent {
    at: Instant,
    latency: Duration,
    /// The last answer's status (0: none).
    status: u16,
    retries: u32,
}

impl Sent {
    fn acknowledged(&self) -> bool {
        self.status == 200
    }
}

/// The well-behaved client: a batch every `1 / (rate / 100)` s for `seconds`, each
/// retried after 429 and 503 as OpenTelemetry's exporters do: with a backoff that
/// doubles from 200 ms up to 3 s, for up to [`RETRY_FOR`]. Returns what was sent and the
/// trace ids acknowledged.
fn steady(ingest: &str, rate: u64, seconds: u64, first_trace: u128) -> (Vec<Sent>, Vec<TraceId>) {
    let http = agent();
    let interval = Duration::from_secs_f64(BATCH_SPANS as f64 / rate.max(1) as f64);
    let started = Instant::now();
    let mut sent = Vec::new();
    let mut acknowledged = Vec::new();
    let mut next = started;
    let mut trace = first_trace;
    while started.elapsed() < Duration::from_secs(seconds) {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += interval;
        let now = now_ns();
        let ids: Vec<TraceId> = (0..BATCH_TRACES)
            .filter_map(|i| TraceId::new(trace + u128::from(i)))
            .collect();
        trace += u128::from(BATCH_TRACES);
        let spans: Vec<Span> = ids
            .iter()
            .flat_map(|&id| {
                (1..=BATCH_SPANS / BATCH_TRACES).filter_map(move |i| {
                    let parent = (i > 1).then(|| SpanId::new(1)).flatten();
                    let start = now - 5_000_000 + i * 1000;
                    let name = format!("step-{i}");
                    let mut s = Span::new(
                        id,
                        SpanId::new(i)?,
                        parent,
                        name,
                        "steady",
                        start,
                        start + 500_000,
                    );
                    s.attributes
                        .push(causeway_model::KeyValue::new("batch", "steady"));
                    Some(s)
                })
            })
            .collect();
        let body = otlp::encode_protobuf(&spans);
        let at = Instant::now();
        let mut retries = 0;
        let status = loop {
            let status = http
                .post(&format!("{ingest}/v1/traces"))
                .header("content-type", "application/x-protobuf")
                .send(&body[..])
                .map(|r| r.status().as_u16())
                .unwrap_or(0);
            match status {
                429 | 503 if at.elapsed() < RETRY_FOR => {
                    std::thread::sleep(
                        Duration::from_millis(200 << retries.min(4)).min(Duration::from_secs(3)),
                    );
                    retries += 1;
                }
                other => break other,
            }
        };
        if status == 200 {
            acknowledged.extend(ids);
        }
        sent.push(Sent {
            at,
            latency: at.elapsed(),
            status,
            retries,
        });
    }
    (sent, acknowledged)
}

/// A phase's figures for the well-behaved client.
fn phase_report(sent: &[Sent], seconds: u64) -> serde_json::Value {
    let acked: Vec<&Sent> = sent.iter().filter(|s| s.acknowledged()).collect();
    let failed = Statuses::default();
    for s in sent.iter().filter(|s| !s.acknowledged()) {
        failed.count(s.status);
    }
    let mut gaps = acked.windows(2).map(|w| w[1].at - w[0].at).max();
    if acked.is_empty() {
        gaps = Some(Duration::from_secs(seconds));
    }
    serde_json::json!({
        "requests": sent.len(),
        "acknowledged_spans_per_second": (acked.len() as u64 * BATCH_SPANS) as f64 / seconds as f64,
        "failed": sent.len() - acked.len(),
        "failed_by_last_status": failed.json(),
        "retried": sent.iter().map(|s| u64::from(s.retries)).sum::<u64>(),
        "latency": percentiles(acked.iter().map(|s| s.latency).collect()),
        "longest_without_an_acknowledgement_ms": gaps.map(|g| g.as_millis()),
    })
}

/// Runs `body` on a thread until `stop`, again and again.
fn repeat_until(
    stop: &Arc<AtomicBool>,
    body: impl Fn() + Send + 'static,
) -> std::thread::JoinHandle<()> {
    let stop = stop.clone();
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            body();
        }
    })
}

/// The hostile clients, running until `stop`; what they were answered, by kind.
struct Hostile {
    slow: Arc<Statuses>,
    flood: Arc<Statuses>,
    idle_refused: Arc<AtomicU64>,
    idle_held: Arc<AtomicU64>,
    sql: Arc<Statuses>,
    export: Arc<Statuses>,
    export_bytes: Arc<AtomicU64>,
    /// Searches with a limit past every cap (to be refused), and with large ones.
    search_past_cap: Arc<Statuses>,
    search: Arc<Statuses>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hostile {
    fn start(server: &Server, stop: &Arc<AtomicBool>, clients: &[String]) -> Hostile {
        let on = |name: &str| clients.iter().any(|c| c == name);
        let mut h = Hostile {
            slow: Arc::default(),
            flood: Arc::default(),
            idle_refused: Arc::default(),
            idle_held: Arc::default(),
            sql: Arc::default(),
            export: Arc::default(),
            export_bytes: Arc::default(),
            search_past_cap: Arc::default(),
            search: Arc::default(),
            threads: Vec::new(),
        };
        let ingest_addr = Server::addr(&server.ingest);
        let api_addr = Server::addr(&server.api);
        // Slow senders: a body announced at 1 MiB, sent a byte every 2 s; reconnect
        // when answered.
        for _ in 0..if on("slow") { SLOW_SENDERS } else { 0 } {
            let (addr, slow) = (ingest_addr.clone(), h.slow.clone());
            let stop = stop.clone();
            h.threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(mut c) = TcpStream::connect(&addr) else {
                        std::thread::sleep(Duration::from_millis(100));
                        continue;
                    };
                    let _ = c.write_all(b"POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-protobuf\r\ncontent-length: 1048576\r\n\r\n");
                    let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                    loop {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let mut buf = [0u8; 64];
                        match c.read(&mut buf) {
                            Ok(n) if n >= 12 => {
                                slow.count(String::from_utf8_lossy(&buf[9..12]).parse().unwrap_or(0));
                                break;
                            }
                            Ok(_) => {
                                slow.count(0);
                                break;
                            }
                            Err(_) => {
                                if c.write_all(&[0x0a]).is_err() {
                                    slow.count(0);
                                    break;
                                }
                            }
                        }
                    }
                }
            }));
        }
        // The flood: 4 MiB bodies back to back.
        let flood_body = {
            let spans: Vec<Span> = (0..4000u64)
                .filter_map(|i| {
                    let t = now_ns() - 10_000_000;
                    let mut s = Span::new(
                        TraceId::new(0x000f_100d_0000_0000 + u128::from(i / 20))?,
                        SpanId::new(i + 1)?,
                        None,
                        format!("flood-{}", i % 50),
                        "flood",
                        t,
                        t + 1000,
                    );
                    s.attributes
                        .push(causeway_model::KeyValue::new("pad", "f".repeat(1000)));
                    Some(s)
                })
                .collect();
            Arc::new(otlp::encode_protobuf(&spans))
        };
        for _ in 0..if on("flood") { FLOOD_THREADS } else { 0 } {
            let (url, flood, body) = (
                format!("{}/v1/traces", server.ingest),
                h.flood.clone(),
                flood_body.clone(),
            );
            let http = agent();
            h.threads.push(repeat_until(stop, move || {
                let status = http
                    .post(&url)
                    .header("content-type", "application/x-protobuf")
                    .send(&body[..])
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0);
                flood.count(status);
            }));
        }
        // Idle connections to the query API, held and renewed when closed.
        if on("idle") {
            let (addr, refused, held) = (
                api_addr.clone(),
                h.idle_refused.clone(),
                h.idle_held.clone(),
            );
            let stop = stop.clone();
            h.threads.push(std::thread::spawn(move || {
                let mut open: Vec<TcpStream> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    // Drop the ones the server closed or refused (a 503 then a close).
                    open.retain(|c| {
                        let mut b = [0u8; 64];
                        match (&*c).read(&mut b) {
                            Ok(0) => false,
                            Ok(n) => {
                                if n >= 12 && &b[9..12] == b"503" {
                                    refused.fetch_add(1, Ordering::Relaxed);
                                }
                                false
                            }
                            Err(e) => e.kind() == std::io::ErrorKind::WouldBlock,
                        }
                    });
                    while open.len() < IDLE_CONNECTIONS && !stop.load(Ordering::Relaxed) {
                        let Ok(c) = TcpStream::connect(&addr) else {
                            break;
                        };
                        let _ = c.set_nonblocking(true);
                        open.push(c);
                    }
                    held.fetch_max(open.len() as u64, Ordering::Relaxed);
                    std::thread::sleep(Duration::from_millis(200));
                }
            }));
        }
        // Greedy SQL: a cross join grouped (runs to the SQL time limit), a billion-byte
        // value, a string aggregate over a join.
        let queries = [
            "SELECT a.operation, b.operation, count(*) FROM spans a, spans b, spans c GROUP BY a.operation, b.operation, c.span_id",
            "SELECT length(repeat('x', 1000000000))",
            "SELECT length(string_agg(a.operation || b.operation, ',')) FROM spans a, spans b",
        ];
        for q in queries.into_iter().filter(|_| on("sql")) {
            let (url, sql) = (format!("{}/api/sql", server.api), h.sql.clone());
            let http = agent();
            let body = serde_json::json!({ "query": q }).to_string();
            h.threads.push(repeat_until(stop, move || {
                let status = http
                    .post(&url)
                    .header("content-type", "application/json")
                    .send(body.as_bytes())
                    .map(|r| r.status().as_u16())
                    .unwrap_or(0);
                sql.count(status);
                std::thread::sleep(Duration::from_millis(100));
            }));
        }
        // Large exports, read whole.
        if on("export") {
            let (url, export, bytes) = (
                format!("{}/api/export?format=jaeger", server.api),
                h.export.clone(),
                h.export_bytes.clone(),
            );
            let http = agent();
            h.threads.push(repeat_until(stop, move || {
                let status = match http.get(&url).call() {
                    Ok(mut r) => {
                        let mut reader = r.body_mut().with_config().limit(u64::MAX).reader();
                        let mut buf = vec![0u8; 1 << 16];
                        while let Ok(n) = reader.read(&mut buf) {
                            if n == 0 {
                                break;
                            }
                            bytes.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        r.status().as_u16()
                    }
                    Err(_) => 0,
                };
                export.count(status);
            }));
        }
        // Searches with huge limits.
        for path in [
            "/api/search?limit=18446744073709551615",
            "/api/search?limit=1500",
            "/jaeger/api/traces?service=flood&limit=100000",
        ]
        .into_iter()
        .filter(|_| on("search"))
        {
            let search = if path.contains("limit=18446744073709551615") {
                h.search_past_cap.clone()
            } else {
                h.search.clone()
            };
            let url = format!("{}{path}", server.api);
            let http = agent();
            h.threads.push(repeat_until(stop, move || {
                let status = http
                    .get(&url)
                    .call()
                    .map(|mut r| {
                        let _ = r.body_mut().with_config().limit(u64::MAX).read_to_vec();
                        r.status().as_u16()
                    })
                    .unwrap_or(0);
                search.count(status);
            }));
        }
        h
    }

    fn finish(self) -> serde_json::Value {
        for t in self.threads {
            let _ = t.join();
        }
        serde_json::json!({
            "slow_senders": {"clients": SLOW_SENDERS, "answered": self.slow.json()},
            "ingest_flood": {"threads": FLOOD_THREADS, "body_bytes": "4 MiB", "answered": self.flood.json()},
            "idle_connections": {
                "wanted": IDLE_CONNECTIONS,
                "held_at_most": self.idle_held.load(Ordering::Relaxed),
                "refused_503": self.idle_refused.load(Ordering::Relaxed),
            },
            "greedy_sql": self.sql.json(),
            "large_exports": {"answered": self.export.json(), "bytes_read": self.export_bytes.load(Ordering::Relaxed)},
            "huge_searches": self.search.json(),
            "search_limit_past_cap": self.search_past_cap.json(),
        })
    }
}

/// Preloads the store with some traces, so exports, searches and SQL have work.
fn preload(ingest: &str) -> Result<()> {
    let http = agent();
    for batch in 0..20u64 {
        let spans: Vec<Span> = (0..1000u64)
            .filter_map(|i| {
                let n = batch * 1000 + i;
                let t = now_ns() - 60_000_000_000 + n * 1000;
                Span::new(
                    TraceId::new(0x9_0000 + u128::from(n / 10))?,
                    SpanId::new(n + 1)?,
                    None,
                    format!("pre-{}", n % 20),
                    "preload",
                    t,
                    t + 1000,
                )
                .into()
            })
            .collect();
        let status = http
            .post(&format!("{ingest}/v1/traces"))
            .header("content-type", "application/x-protobuf")
            .send(&otlp::encode_protobuf(&spans)[..])?
            .status()
            .as_u16();
        if status != 200 {
            bail!("preloading the store: {status}");
        }
    }
    Ok(())
}

/// Whether every acknowledged trace is stored whole (10 spans each).
fn all_stored(api: &str, ids: &[TraceId]) -> (usize, usize) {
    let http = agent();
    let mut stored = 0;
    for id in ids {
        let spans = http
            .get(&format!("{api}/api/traces/{id}"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_json::<serde_json::Value>().ok())
            .and_then(|v| v["spans"].as_array().map(Vec::len))
            .unwrap_or(0);
        if spans as u64 == BATCH_SPANS / BATCH_TRACES {
            stored += 1;
        }
    }
    (stored, ids.len())
}

pub(crate) fn run(a: HostileArgs) -> Result<()> {
    let dir = TempDir::new(a.data.clone(), "hostile");
    let server = Server::start(a.server_binary.as_deref(), &dir.0, &a.serve_flags)?;
    preload(&server.ingest)?;
    let peak = Arc::new(Mutex::new(0f64));
    let sampling = Arc::new(AtomicBool::new(false));

    let (alone, mut acknowledged) = steady(&server.ingest, a.rate, a.seconds, 1 << 64);
    let rss_after_alone = server.memory_mib("VmRSS:");

    let stop = Arc::new(AtomicBool::new(false));
    let hostile = Hostile::start(&server, &stop, &a.clients);
    // Samples the server's memory while the hostile clients run.
    let sampler = {
        let (pid, peak, sampling) = (server.child.id(), peak.clone(), sampling.clone());
        std::thread::spawn(move || {
            while !sampling.load(Ordering::Relaxed) {
                if let Some(rss) = std::fs::read_to_string(format!("/proc/{pid}/status"))
                    .ok()
                    .and_then(|s| {
                        s.lines()
                            .find(|l| l.starts_with("VmRSS:"))
                            .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
                    })
                {
                    let mut p = peak.lock().unwrap_or_else(|p| p.into_inner());
                    *p = p.max(rss / 1024.0);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    let (beside, acked_beside) = steady(&server.ingest, a.rate, a.seconds, 2 << 64);
    acknowledged.extend(acked_beside);
    stop.store(true, Ordering::Relaxed);
    let hostile = hostile.finish();
    sampling.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    let peak_rss = server.memory_mib("VmHWM:");
    let (stored, acked) = all_stored(&server.api, &acknowledged);
    let bound_mib = a.rss_bound.0 as f64 / (1 << 20) as f64;
    let result = serde_json::json!({
        "seconds_per_phase": a.seconds,
        "offered_spans_per_second": a.rate,
        "server_binary": a.server_binary.as_ref().map(|p| p.display().to_string()),
        "serve_flags": a.serve_flags,
        "hostile_clients_run": a.clients,
        "alone": phase_report(&alone, a.seconds),
        "beside_hostile_clients": phase_report(&beside, a.seconds),
        "hostile_clients": hostile,
        "server_rss_mib": {
            "after_alone": rss_after_alone.map(|m| m.round()),
            "sampled_peak_beside_hostile": (*peak.lock().unwrap_or_else(|p| p.into_inner())).round(),
            "peak": peak_rss.map(|m| m.round()),
            "bound": bound_mib,
        },
        "acknowledged_traces_stored": {"stored": stored, "acknowledged": acked},
    });
    crate::harness::report(&result, a.json)?;
    if peak_rss.is_some_and(|p| p > bound_mib) {
        bail!("the server's peak resident memory passed the bound of {bound_mib} MiB");
    }
    if stored < acked {
        bail!(
            "{} acknowledged traces are not stored whole",
            acked - stored
        );
    }
    Ok(())
}
