//! `causeway-bench infer-scale`: the time and memory of `causeway infer` on capture logs
//! shaped like WAP5's CoDeeN trace (115 proxies captured for an hour, 4.7M messages).
//!
//! Uncaptured clients send requests to a proxy; a proxy answers from its cache, or asks a
//! second proxy, which fetches from an uncaptured origin server, as CoDeeN's two-hop
//! misses did. Every request has a connection of its own. The logs are written in the
//! capture format, then `causeway infer` runs on them as a child process: its wall time
//! and peak memory (the child's maximum resident set) are what is reported.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use causeway_blackbox::format::{sock, Call, Direction, Endpoint, Origin, Record, Stamp, MAGIC};
use clap::Args;
use serde_json::json;

#[derive(Args)]
pub struct InferScaleArgs {
    /// Messages in the synthetic trace (the paper's CoDeeN trace: 4.7M).
    #[arg(long, default_value_t = 4_700_000)]
    messages: u64,
    /// Captured proxies.
    #[arg(long, default_value_t = 115)]
    nodes: u32,
    /// The trace's length.
    #[arg(long, default_value = "1h")]
    duration: humantime::Duration,
    /// The linking mode `causeway infer` runs in.
    #[arg(long, default_value = "connections")]
    mode: String,
    /// Where the logs are written (default: a temporary directory removed at the end);
    /// logs already there are reused.
    #[arg(long)]
    keep: Option<PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// Share of requests a proxy answers from its cache (2 messages); the rest go through a
/// second proxy to an origin server (6 messages).
const HIT_RATE: f64 = 0.6;
const PROXY_PORT: u16 = 3128;
const ORIGIN_PORT: u16 = 80;
const CLIENTS: u32 = 20_000;
const ORIGINS: u32 = 2_000;

/// One proxy's log under construction.
struct Proxy {
    ip: [u8; 4],
    log: Vec<u8>,
    next_conn: u64,
    next_port: u16,
    next_fd: i32,
    /// This proxy's monotonic clock minus the wall clock.
    mono_offset: u64,
}

impl Proxy {
    fn stamp(&self, wall_ns: u64, tid: u32) -> Stamp {
        Stamp {
            tid,
            mono_ns: wall_ns - self.mono_offset,
            wall_ns,
        }
    }

    fn write(&mut self, r: &Record<'_>) -> Result<()> {
        let mut buf = [0u8; 512];
        let n = r.encode(&mut buf).context("encoding a record")?;
        self.log.extend_from_slice(&buf[..n]);
        Ok(())
    }

    fn port(&mut self) -> u16 {
        self.next_port = if self.next_port >= 60_999 {
            32_768
        } else {
            self.next_port + 1
        };
        self.next_port
    }

    /// A connection accepted from or made to `peer`; its number and fd.
    fn connect(
        &mut self,
        at: Stamp,
        call: Call,
        local: Endpoint<'_>,
        peer: Endpoint<'_>,
    ) -> Result<(u64, i32)> {
        self.next_conn += 1;
        self.next_fd = if self.next_fd >= 60_000 {
            10
        } else {
            self.next_fd + 1
        };
        let (conn, fd) = (self.next_conn, self.next_fd);
        self.write(&Record::Connection {
            at,
            call,
            fd,
            conn,
            kind: sock::STREAM,
            local,
            peer,
            peer_pid: 0,
            errno: 0,
            mid_stream: false,
        })?;
        Ok((conn, fd))
    }

    fn data(
        &mut self,
        at: Stamp,
        fd: i32,
        conn: u64,
        direction: Direction,
        bytes: u64,
    ) -> Result<()> {
        self.write(&Record::Data {
            at,
            call: if direction == Direction::Send {
                Call::Send
            } else {
                Call::Recv
            },
            fd,
            conn,
            direction,
            bytes,
            errno: 0,
            offset: 0,
            peer: Endpoint::None,
            checksum: 0,
            peek: false,
        })
    }

    fn close(&mut self, at: Stamp, fd: i32, conn: u64) -> Result<()> {
        self.write(&Record::Close {
            at,
            call: Call::Close,
            fd,
            conn,
            how: 0,
            errno: 0,
        })
    }
}

/// Milliseconds as nanoseconds, drawn from an exponential distribution of mean `mean_ms`.
fn exp_ms(mean_ms: f64) -> u64 {
    let u = fastrand::f64().max(1e-12);
    (-u.ln() * mean_ms * 1e6) as u64
}

/// Writes the synthetic logs into `dir`; returns the messages made.
fn generate(dir: &Path, a: &InferScaleArgs) -> Result<u64> {
    fastrand::seed(5);
    let t0: u64 = 1_700_000_000_000_000_000;
    let mut proxies: Vec<Proxy> = (0..a.nodes)
        .map(|i| Proxy {
            ip: [10, 1, (i / 250) as u8, (i % 250 + 1) as u8],
            log: Vec::new(),
            next_conn: 0,
            next_port: 32_768,
            next_fd: 10,
            mono_offset: t0 - 1_000_000_000 * u64::from(i + 1),
        })
        .collect();
    for (i, p) in proxies.iter_mut().enumerate() {
        p.log.extend_from_slice(MAGIC);
        let host = format!("proxy{i}");
        let at = p.stamp(t0, 1);
        p.write(&Record::Process {
            pid: 1000 + i as u32,
            ppid: 1,
            origin: Origin::Start,
            at,
            host: host.as_bytes(),
            exe: b"/usr/sbin/codeen",
            args: b"codeen\x00--port\x003128",
        })?;
        let local = Endpoint::V4(p.ip, PROXY_PORT);
        p.write(&Record::Bind {
            at,
            call: Call::Listen,
            fd: 3,
            local,
            errno: 0,
        })?;
    }
    // Two messages per hit, six per miss.
    let per_request = 2.0 * HIT_RATE + 6.0 * (1.0 - HIT_RATE);
    let requests = (a.messages as f64 / per_request) as u64;
    let length = a.duration.as_nanos() as u64;
    let mut client_ports = vec![1024u16; CLIENTS as usize];
    let mut made = 0;
    let progress = indicatif::ProgressBar::new(requests).with_message("writing capture logs");
    for k in 0..requests {
        if k % 65_536 == 0 {
            progress.set_position(k);
        }
        let t = t0 + k * length / requests.max(1) + fastrand::u64(..1_000_000);
        let tid = 2 + fastrand::u32(..16);
        let client = fastrand::u32(..CLIENTS);
        let port = &mut client_ports[client as usize];
        *port = if *port >= 65_000 { 1024 } else { *port + 1 };
        let client_ep = Endpoint::V4(
            [
                100,
                64 + (client >> 16) as u8,
                (client >> 8) as u8,
                client as u8,
            ],
            *port,
        );
        let first = fastrand::usize(..proxies.len());
        let a_ip = proxies[first].ip;
        let arrive = t + exp_ms(20.0);
        let at = proxies[first].stamp(arrive, tid);
        let (conn, fd) =
            proxies[first].connect(at, Call::Accept4, Endpoint::V4(a_ip, PROXY_PORT), client_ep)?;
        proxies[first].data(at, fd, conn, Direction::Recv, 300 + fastrand::u64(..400))?;
        let answered = if fastrand::f64() < HIT_RATE {
            made += 2;
            arrive + exp_ms(2.0)
        } else {
            made += 6;
            let mut second = fastrand::usize(..proxies.len() - 1);
            if second >= first {
                second += 1;
            }
            let b_ip = proxies[second].ip;
            let asked = arrive + exp_ms(1.0);
            let local_port = proxies[first].port();
            let at = proxies[first].stamp(asked, tid);
            let (a_conn, a_fd) = proxies[first].connect(
                at,
                Call::Connect,
                Endpoint::V4(a_ip, local_port),
                Endpoint::V4(b_ip, PROXY_PORT),
            )?;
            proxies[first].data(at, a_fd, a_conn, Direction::Send, 400)?;
            let b_tid = 2 + fastrand::u32(..16);
            let reached = asked + exp_ms(5.0);
            let at = proxies[second].stamp(reached, b_tid);
            let (b_conn, b_fd) = proxies[second].connect(
                at,
                Call::Accept4,
                Endpoint::V4(b_ip, PROXY_PORT),
                Endpoint::V4(a_ip, local_port),
            )?;
            proxies[second].data(at, b_fd, b_conn, Direction::Recv, 400)?;
            let origin = fastrand::u32(..ORIGINS);
            let origin_ep = Endpoint::V4([203, 0, (origin >> 8) as u8, origin as u8], ORIGIN_PORT);
            let fetch = reached + exp_ms(1.0);
            let o_port = proxies[second].port();
            let at = proxies[second].stamp(fetch, b_tid);
            let (o_conn, o_fd) = proxies[second].connect(
                at,
                Call::Connect,
                Endpoint::V4(b_ip, o_port),
                origin_ep,
            )?;
            proxies[second].data(at, o_fd, o_conn, Direction::Send, 350)?;
            let fetched = fetch + exp_ms(80.0);
            let at = proxies[second].stamp(fetched, b_tid);
            proxies[second].data(
                at,
                o_fd,
                o_conn,
                Direction::Recv,
                2_000 + fastrand::u64(..30_000),
            )?;
            proxies[second].close(at, o_fd, o_conn)?;
            let returned = fetched + exp_ms(1.0);
            let at = proxies[second].stamp(returned, b_tid);
            proxies[second].data(at, b_fd, b_conn, Direction::Send, 5_000)?;
            proxies[second].close(at, b_fd, b_conn)?;
            let back = returned + exp_ms(5.0);
            let at = proxies[first].stamp(back, tid);
            proxies[first].data(at, a_fd, a_conn, Direction::Recv, 5_000)?;
            proxies[first].close(at, a_fd, a_conn)?;
            back + exp_ms(1.0)
        };
        let at = proxies[first].stamp(answered, tid);
        proxies[first].data(at, fd, conn, Direction::Send, 5_000)?;
        proxies[first].close(at, fd, conn)?;
    }
    progress.finish_and_clear();
    for (i, p) in proxies.iter().enumerate() {
        let path = dir.join(format!("proxy{i}-{}-0.sockcap", 1000 + i));
        let mut f =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        f.write_all(&p.log)?;
    }
    Ok(made)
}

/// The peak resident set of the children waited for so far, in bytes.
fn children_peak_rss() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u
    };
    usage.ru_maxrss as u64 * 1024
}

pub fn run(a: InferScaleArgs) -> Result<()> {
    let dir = crate::harness::TempDir::new(a.keep.clone(), "infer-scale");
    std::fs::create_dir_all(&dir.0).with_context(|| format!("creating {}", dir.0.display()))?;
    let existing = causeway_blackbox::logs::log_files(&dir.0)?;
    let made = if existing.is_empty() {
        eprintln!(
            "writing {} messages' capture logs for {} proxies",
            a.messages, a.nodes
        );
        Some(generate(&dir.0, &a)?)
    } else {
        None
    };
    let log_bytes: u64 = causeway_blackbox::logs::log_files(&dir.0)?
        .iter()
        .filter_map(|f| std::fs::metadata(f).ok())
        .map(|m| m.len())
        .sum();
    let exe = crate::harness::causeway_exe()?;
    let start = Instant::now();
    let out = Command::new(exe)
        .arg("infer")
        .arg(&dir.0)
        .args(["--mode", &a.mode, "--json", "--top", "5"])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("running causeway infer")?;
    let wall = start.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("causeway infer failed: {}", out.status);
    }
    let peak = children_peak_rss();
    let summary: serde_json::Value =
        serde_json::from_slice(&out.stdout).context("reading causeway infer's JSON")?;
    let row = json!({
        "nodes": a.nodes,
        "messages_made": made,
        "messages": summary["messages"],
        "traces": summary["traces"],
        "log_bytes": log_bytes,
        "mode": a.mode,
        "wall_s": wall,
        "peak_rss_bytes": peak,
    });
    if a.json {
        outln!("{row}");
    } else {
        outln!(
            "{} proxies, {} messages ({:.0} MB of logs), mode {}: {:.1} s wall, {:.0} MB peak memory, {} traces",
            a.nodes,
            summary["messages"],
            log_bytes as f64 / 1e6,
            a.mode,
            wall,
            peak as f64 / 1e6,
            summary["traces"]
        );
    }
    Ok(())
}
