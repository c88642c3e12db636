//! `causeway-bench echo-node`: a loopback echo pair in two processes, the program the capture
//! is measured and tested on. The process binds a socket, forks, and the child is the
//! client: it sends `--size` bytes and waits for them back, `--rounds` times, timing each
//! round trip, then prints a JSON summary. The parent echoes until the client is done.
//!
//! `--inline` runs both ends in one thread of one process (a TCP connection to itself):
//! each round is four socket calls and no wake-up, so what the capture adds to a call
//! stands out from the scheduler's noise. `--transport file` writes to `/dev/null`, one
//! call per round, for the cost on a descriptor that is not a socket.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Transport {
    Tcp,
    Udp,
    Unix,
    /// Writes to /dev/null (no socket).
    File,
}

#[derive(Args, Clone)]
pub struct EchoArgs {
    /// Round trips.
    #[arg(long, default_value_t = 1000)]
    pub rounds: u64,
    /// Bytes per message.
    #[arg(long, default_value_t = 64)]
    pub size: usize,
    #[arg(long, value_enum, default_value = "tcp")]
    pub transport: Transport,
    /// Both ends in one thread of one process.
    #[arg(long)]
    pub inline: bool,
    /// The client waits this long after printing its summary before it closes (a test
    /// stops it meanwhile, with its last records still buffered).
    #[arg(long, default_value_t = 0)]
    pub linger_ms: u64,
}

/// What the client prints: its round trips' latency.
#[derive(Debug, Serialize, Deserialize)]
pub struct EchoSummary {
    pub client_pid: u32,
    pub server_pid: u32,
    pub rounds: u64,
    pub size: usize,
    pub median_ns: u64,
    pub p99_ns: u64,
    pub total_ns: u64,
}

enum Server {
    Tcp(TcpListener),
    Udp(UdpSocket),
    Unix(UnixListener, std::path::PathBuf),
}

pub fn run(a: EchoArgs) -> Result<()> {
    if a.size == 0 || a.size > 60_000 {
        bail!("--size {}: between 1 and 60000 bytes", a.size);
    }
    if a.inline || matches!(a.transport, Transport::File) {
        return inline(&a);
    }
    let server = match a.transport {
        Transport::Tcp | Transport::File => Server::Tcp(TcpListener::bind("127.0.0.1:0")?),
        Transport::Udp => Server::Udp(UdpSocket::bind("127.0.0.1:0")?),
        Transport::Unix => {
            let path =
                std::env::temp_dir().join(format!("causeway-echo-{}.sock", std::process::id()));
            let _ = std::fs::remove_file(&path);
            Server::Unix(UnixListener::bind(&path)?, path)
        }
    };
    let server_pid = std::process::id();
    // SAFETY: this process has one thread here (the command runs no runtime before
    // this), so the child may run anything.
    let child = unsafe { libc::fork() };
    if child < 0 {
        bail!("fork: {}", std::io::Error::last_os_error());
    }
    if child == 0 {
        let code = match client(&a, &server, server_pid) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("echo client: {e:#}");
                1
            }
        };
        let _ = std::io::stdout().flush();
        std::process::exit(code);
    }
    let served = serve(&a, &server);
    let mut status = 0;
    // SAFETY: waiting for the child forked above.
    unsafe { libc::waitpid(child, &mut status, 0) };
    if let Server::Unix(_, path) = &server {
        let _ = std::fs::remove_file(path);
    }
    served?;
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        bail!("the echo client failed (status {status})");
    }
    Ok(())
}

fn serve(a: &EchoArgs, server: &Server) -> Result<()> {
    let mut buf = vec![0u8; a.size];
    match server {
        Server::Tcp(l) => echo_stream(l.accept()?.0, &mut buf),
        Server::Unix(l, _) => echo_stream(l.accept()?.0, &mut buf),
        Server::Udp(s) => {
            for _ in 0..a.rounds {
                let (n, from) = s.recv_from(&mut buf)?;
                s.send_to(&buf[..n], from)?;
            }
            Ok(())
        }
    }
}

/// Echoes what arrives until the peer closes.
fn echo_stream<S: std::io::Read + std::io::Write>(mut s: S, buf: &mut [u8]) -> Result<()> {
    loop {
        let n = s.read(buf)?;
        if n == 0 {
            return Ok(());
        }
        s.write_all(&buf[..n])?;
    }
}

fn client(a: &EchoArgs, server: &Server, server_pid: u32) -> Result<()> {
    let message: Vec<u8> = (0..a.size).map(|i| (i % 251) as u8).collect();
    let mut back = vec![0u8; a.size];
    let mut times = Vec::with_capacity(a.rounds as usize);
    let start = Instant::now();
    match server {
        Server::Tcp(l) => {
            let mut s = TcpStream::connect(l.local_addr()?)?;
            s.set_nodelay(true)?;
            round_trips(&mut s, a.rounds, &message, &mut back, &mut times)?;
        }
        Server::Unix(_, path) => {
            let mut s = UnixStream::connect(path)?;
            round_trips(&mut s, a.rounds, &message, &mut back, &mut times)?;
        }
        Server::Udp(l) => {
            let s = UdpSocket::bind("127.0.0.1:0")?;
            let to = l.local_addr()?;
            for round in 0..a.rounds {
                let t = Instant::now();
                // Each datagram differs, so checksums pair sends with receives.
                let mut m = message.clone();
                m[0] = round as u8;
                s.send_to(&m, to)?;
                let (n, _) = s.recv_from(&mut back)?;
                if back[..n] != m[..] {
                    bail!("round {round}: the echo differs");
                }
                times.push(t.elapsed().as_nanos() as u64);
            }
        }
    }
    let total_ns = start.elapsed().as_nanos() as u64;
    print_summary(a, std::process::id(), server_pid, times, total_ns)?;
    std::io::stdout().flush()?;
    std::thread::sleep(std::time::Duration::from_millis(a.linger_ms));
    Ok(())
}

/// Rounds in one thread: through a loopback TCP connection to itself, or to /dev/null.
fn inline(a: &EchoArgs) -> Result<()> {
    let message = vec![7u8; a.size];
    let mut back = vec![0u8; a.size];
    let mut times = Vec::with_capacity(a.rounds as usize);
    let start = Instant::now();
    if let Transport::File = a.transport {
        let mut null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
        for _ in 0..a.rounds {
            let t = Instant::now();
            null.write_all(&message)?;
            times.push(t.elapsed().as_nanos() as u64);
        }
    } else {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let mut client = TcpStream::connect(listener.local_addr()?)?;
        client.set_nodelay(true)?;
        let (mut server, _) = listener.accept()?;
        server.set_nodelay(true)?;
        for round in 0..a.rounds {
            let t = Instant::now();
            client.write_all(&message)?;
            server
                .read_exact(&mut back)
                .with_context(|| format!("round {round}"))?;
            server.write_all(&back)?;
            client
                .read_exact(&mut back)
                .with_context(|| format!("round {round}"))?;
            times.push(t.elapsed().as_nanos() as u64);
        }
    }
    let pid = std::process::id();
    print_summary(a, pid, pid, times, start.elapsed().as_nanos() as u64)
}

fn print_summary(
    a: &EchoArgs,
    client_pid: u32,
    server_pid: u32,
    mut times: Vec<u64>,
    total_ns: u64,
) -> Result<()> {
    times.sort_unstable();
    let at = |q: f64| {
        times
            .get(((times.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(0)
    };
    let summary = EchoSummary {
        client_pid,
        server_pid,
        rounds: a.rounds,
        size: a.size,
        median_ns: at(0.5),
        p99_ns: at(0.99),
        total_ns,
    };
    println!("{}", serde_json::to_string(&summary).context("summary")?);
    Ok(())
}

fn round_trips<S: std::io::Read + std::io::Write>(
    s: &mut S,
    rounds: u64,
    message: &[u8],
    back: &mut [u8],
    times: &mut Vec<u64>,
) -> Result<()> {
    for round in 0..rounds {
        let t = Instant::now();
        s.write_all(message)?;
        s.read_exact(back)
            .with_context(|| format!("round {round}"))?;
        times.push(t.elapsed().as_nanos() as u64);
    }
    Ok(())
}
