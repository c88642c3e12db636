//! `causeway-bench join-nginx`: one request, one trace, with a real program nobody
//! instrumented in front. nginx (a master, two workers, keep-alive to its upstream) runs
//! under `causeway capture` before an instrumented replica of the demo's storage that
//! exports to `causeway serve`; requests arrive at a steady average rate (Poisson) from
//! a client nobody captured, and an agent (`causeway agent --captures`, run in this
//! process) sends the capture logs to the server, which joins each request's inferred
//! part while the load runs (with `--infer-here`, the agent infers and joins them, as
//! `causeway agent --captures --join --infer-here`). The replica's entry spans are the requests (the ground truth: nothing
//! propagates context into nginx, so each starts a trace of its own); the store is then
//! read for how many became one trace starting at nginx, how many nginx -> storage-1
//! calls the dependency graph counts, how many inferred parts stayed alone, how fresh
//! the joins were and what a pass of the agent cost.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use causeway_server::agent::{Agent, AgentConfig};
use causeway_store::{Store, StoreOptions, TimeWindow, TraceStore as _};
use clap::Args;
use serde_json::json;

use crate::join_demo::Counts;

#[derive(Args)]
pub struct JoinNginxArgs {
    #[command(flatten)]
    runs: crate::infer_demo::DemoRuns,
    /// The agent infers and joins the captures (`--infer-here`) rather than the server.
    #[arg(long)]
    infer_here: bool,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// The agent's figures of a run, kept in its directory.
const AGENT_FILE: &str = "agent.json";

/// A child process stopped (killed if need be) when dropped.
struct Running(Child, &'static str);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Waits until `port` on loopback accepts, or `what` exited or took too long.
fn wait_listening(port: u16, child: &mut Running) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if let Some(status) = child.0.try_wait()? {
            bail!("{} exited with {status} before listening", child.1);
        }
        if Instant::now() > deadline {
            bail!("{} did not listen on {port} within 20 s", child.1);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// The agent following `captures` on a thread of its own, a pass a second, until told to
/// stop; then a last pass that takes every request.
fn follow(mut agent: Agent, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<serde_json::Value> {
    std::thread::spawn(move || {
        let mut delays = Vec::new();
        let mut passes: Vec<(u64, u64)> = Vec::new();
        let mut failures = 0u64;
        loop {
            let last = stop.load(Ordering::Relaxed);
            let pass = if last {
                agent.finish()
            } else {
                agent.run_once()
            };
            match pass {
                Ok(s) if s.capture_messages > 0 => passes.push((s.capture_us, s.capture_messages)),
                Ok(_) => {}
                Err(e) => {
                    failures += 1;
                    eprintln!("warning: an agent pass failed: {e}");
                }
            }
            delays.extend(agent.take_capture_delays());
            if last {
                break;
            }
            std::thread::sleep(Duration::from_secs(1));
        }
        delays.sort_unstable();
        let at = |v: &[u64], q: f64| {
            let i = ((v.len() as f64 * q) as usize).min(v.len().saturating_sub(1));
            v.get(i).copied().unwrap_or(0)
        };
        let mut us: Vec<u64> = passes.iter().map(|p| p.0).collect();
        us.sort_unstable();
        let mut messages: Vec<u64> = passes.iter().map(|p| p.1).collect();
        messages.sort_unstable();
        json!({
            "paths": delays.len(),
            "freshness_p50_s": at(&delays, 0.5) as f64 / 1e9,
            "freshness_p99_s": at(&delays, 0.99) as f64 / 1e9,
            "infer_pass_p50_ms": at(&us, 0.5) as f64 / 1e3,
            "infer_pass_max_ms": us.last().copied().unwrap_or(0) as f64 / 1e3,
            "infer_pass_messages_p50": at(&messages, 0.5),
            "failed_passes": failures,
        })
    })
}

/// Requests to `front` at `rate` a second on average for `duration`, each on a thread of
/// its own; returns (sent, failed).
fn load(front: u16, rate: f64, duration: Duration) -> (u64, u64) {
    let http = ureq::Agent::new_with_config(
        ureq::config::Config::builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .build(),
    );
    let failed = Arc::new(AtomicU64::new(0));
    let mut in_flight = Vec::new();
    let end = Instant::now() + duration;
    let mut next = Instant::now();
    let mut sent = 0u64;
    while next < end {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let (http, failed) = (http.clone(), failed.clone());
        let url = format!("http://127.0.0.1:{front}/read?block={}", sent % 64);
        in_flight.push(std::thread::spawn(move || {
            if http.get(&url).call().is_err() {
                failed.fetch_add(1, Ordering::Relaxed);
            }
        }));
        sent += 1;
        in_flight.retain(|t| !t.is_finished());
        next += Duration::from_secs_f64(-(1.0 - fastrand::f64()).ln() / rate.max(0.01));
    }
    for t in in_flight {
        let _ = t.join();
    }
    (sent, failed.load(Ordering::Relaxed))
}

/// Runs the system at `rate` for `duration`, its store in `dir/store`, and keeps the
/// agent's figures in `dir`.
fn run_once(dir: &Path, rate: f64, duration: Duration, infer_here: bool) -> Result<()> {
    let exe = crate::harness::causeway_exe()?;
    let (http, ingest, grpc, front, back) = (
        free_port()?,
        free_port()?,
        free_port()?,
        free_port()?,
        free_port()?,
    );
    let nginx_dir = dir.join("nginx");
    let captures = dir.join("captures");
    std::fs::create_dir_all(&nginx_dir)?;
    let mut serve = Running(
        Command::new(&exe)
            .arg("serve")
            .arg("--data")
            .arg(dir.join("store"))
            .args(["--http", &format!("127.0.0.1:{http}")])
            .args(["--ingest", &format!("127.0.0.1:{ingest}")])
            .args(["--grpc", &format!("127.0.0.1:{grpc}")])
            .stdout(Stdio::null())
            .spawn()
            .context("starting causeway serve")?,
        "causeway serve",
    );
    wait_listening(http, &mut serve)?;
    // The replica runs until its stdin ends, and flushes its spans then.
    let mut storage = Running(
        Command::new(&exe)
            .args(["demo-node", "storage-1"])
            .env(
                causeway_demo::TOPOLOGY_VAR,
                format!("storage-1=127.0.0.1:{back}"),
            )
            .env(
                "CAUSEWAY_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{ingest}/v1/traces"),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .context("starting the storage replica")?,
        "the storage replica",
    );
    wait_listening(back, &mut storage)?;
    let conf = causeway_testkit::nginx::reverse_proxy_conf(&nginx_dir, 2, front, back, 16)?;
    let mut nginx = Running(
        Command::new(&exe)
            .arg("capture")
            .arg("--out")
            .arg(&captures)
            .args(["--", "nginx", "-c"])
            .arg(&conf)
            .arg("-p")
            .arg(&nginx_dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("starting nginx under causeway capture (is nginx installed?)")?,
        "nginx under causeway capture",
    );
    wait_listening(front, &mut nginx)?;
    let agent = Agent::new(AgentConfig {
        collector: format!("http://127.0.0.1:{ingest}"),
        checkpoint: dir.join("agent.checkpoint"),
        captures: vec![captures],
        join: Some(format!("http://127.0.0.1:{http}")),
        infer_here,
        ..AgentConfig::default()
    })?;
    let stop = Arc::new(AtomicBool::new(false));
    let follower = follow(agent, stop.clone());
    let (sent, failed) = load(front, rate, duration);
    std::thread::sleep(Duration::from_secs(1));
    drop(storage.0.stdin.take());
    storage.0.wait()?;
    // QUIT: nginx finishes what it holds and its processes exit, their captures flushed.
    let pid = std::fs::read_to_string(nginx_dir.join("nginx.pid"))?;
    Command::new("kill")
        .args(["-QUIT", pid.trim()])
        .status()
        .context("stopping nginx")?;
    nginx.0.wait()?;
    stop.store(true, Ordering::Relaxed);
    let mut figures = follower
        .join()
        .map_err(|_| anyhow::anyhow!("the agent's thread panicked"))?;
    if !infer_here {
        // The server's figures, once its passes have taken what settled; the last
        // requests are taken when it stops.
        std::thread::sleep(causeway_server::captures::SETTLE + Duration::from_secs(2));
        let report = server_report(http)?;
        let f = |key: &str| report[key].as_f64().unwrap_or(0.0);
        figures["paths"] = report["paths"].clone();
        figures["freshness_p50_s"] = (f("freshnessP50Ms") / 1e3).into();
        figures["freshness_p99_s"] = (f("freshnessP99Ms") / 1e3).into();
        figures["infer_pass_p50_ms"] = f("passP50Ms").into();
        figures["infer_pass_max_ms"] = f("passMaxMs").into();
        figures["infer_pass_messages_p50"] = report["passMessagesP50"].clone();
    }
    figures["sent"] = sent.into();
    figures["failed"] = failed.into();
    figures["joined_by"] = if infer_here { "agent" } else { "server" }.into();
    std::fs::write(dir.join(AGENT_FILE), figures.to_string())?;
    Command::new("kill")
        .args(["-TERM", &serve.0.id().to_string()])
        .status()?;
    serve.0.wait()?;
    Ok(())
}

/// The server's `GET /api/captures`.
fn server_report(http: u16) -> Result<serde_json::Value> {
    let body = ureq::get(&format!("http://127.0.0.1:{http}/api/captures"))
        .call()
        .context("asking the server how its capture joins went")?
        .body_mut()
        .read_to_string()?;
    Ok(serde_json::from_str(&body)?)
}

fn measure(dir: &Path, rate: f64, a: &JoinNginxArgs) -> Result<serde_json::Value> {
    if !a.runs.reuse {
        run_once(dir, rate, a.runs.duration.into(), a.infer_here)?;
    }
    let store_dir = dir.join("store");
    let store = Store::open(&store_dir, StoreOptions::default())
        .with_context(|| format!("opening the store in {}", store_dir.display()))?;
    let counts = Counts::new("nginx", "storage-1");
    store.scan(TimeWindow::ALL, &|t| counts.add(&t))?;
    let agent: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join(AGENT_FILE)).context("reading the agent's figures")?,
    )?;
    let mut row = counts.row(rate);
    for (k, v) in agent.as_object().into_iter().flatten() {
        row[k] = v.clone();
    }
    Ok(row)
}

pub fn run(a: JoinNginxArgs) -> Result<()> {
    let (_root, dirs) = a.runs.dirs("join-nginx")?;
    let mut rows = Vec::new();
    for (rate, dir) in dirs {
        if !a.runs.reuse {
            eprintln!(
                "running nginx before storage-1 at {rate}/s for {}",
                a.runs.duration
            );
        }
        rows.push(measure(&dir, rate, &a)?);
    }
    if a.json {
        outln!("{}", serde_json::to_string(&rows)?);
        return Ok(());
    }
    crate::join_demo::print_rows(&rows, "nginx");
    Ok(())
}
