//! `causeway-bench echo-node`: a loopback echo pair in two processes, the program the capture
//! is measured and tested on. The process binds a socket, forks, and the child is the
//! client: it sends `--size` bytes and waits for them back, `--rounds` times, timing each
//! round trip, then prints a JSON summary. The parent echoes until the client is done.
//!
//! `--inline` runs both ends in one thread of one process (a TCP connection to itself):
//! each round is four socket calls and no wake-up, so what the capture adds to a call
//! stands out from the scheduler's noise. `--transport file` writes to `/dev/null`, one
//! call per round, for the cost on a descriptor that is not a socket. `--http2` frames a
//! TCP pair's rounds as HTTP/2 does (no HPACK: the bytes are frames, their contents
//! filler): after the preface and SETTINGS, each round the client sends two requests on
//! two streams in one write, and the server answers the second first, each answer (a
//! HEADERS and a DATA ending the stream) in a write of its own.

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
    /// Frame the rounds as HTTP/2 (TCP only): two multiplexed calls a round.
    #[arg(long)]
    pub http2: bool,
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
    if a.http2 && (a.inline || !matches!(a.transport, Transport::Tcp)) {
        bail!("--http2 runs a TCP pair (not --inline)");
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
        Server::Tcp(l) if a.http2 => http2::serve(a, l.accept()?.0),
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
            if a.http2 {
                http2::calls(a, &mut s, &mut times)?;
            } else {
                round_trips(&mut s, a.rounds, &message, &mut back, &mut times)?;
            }
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

/// `--http2`: rounds framed as HTTP/2 calls, two multiplexed a round.
mod http2 {
    use std::io::{Read as _, Write as _};
    use std::net::TcpStream;
    use std::time::Instant;

    use anyhow::{Context, Result};

    const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    const DATA: u8 = 0;
    const HEADERS: u8 = 1;
    const SETTINGS: u8 = 4;
    const END_STREAM: u8 = 0x1;
    const END_HEADERS: u8 = 0x4;
    /// An answer's HEADERS payload.
    const ANSWER_HEADERS: usize = 8;

    fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: usize) {
        out.extend_from_slice(&(payload as u32).to_be_bytes()[1..]);
        out.extend_from_slice(&[kind, flags]);
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend((0..payload).map(|i| (i % 251) as u8));
    }

    /// The two streams of `round`.
    fn streams(round: u64) -> (u32, u32) {
        let first = (4 * round + 1) as u32;
        (first, first + 2)
    }

    /// One stream's answer: HEADERS, then DATA ending the stream.
    fn answer(stream: u32, size: usize) -> Vec<u8> {
        let mut out = Vec::new();
        frame(&mut out, HEADERS, END_HEADERS, stream, ANSWER_HEADERS);
        frame(&mut out, DATA, END_STREAM, stream, size);
        out
    }

    pub(super) fn calls(
        a: &super::EchoArgs,
        s: &mut TcpStream,
        times: &mut Vec<u64>,
    ) -> Result<()> {
        let mut start = PREFACE.to_vec();
        frame(&mut start, SETTINGS, 0, 0, 0);
        s.write_all(&start)?;
        let mut settings = [0u8; 9];
        s.read_exact(&mut settings)
            .context("the server's SETTINGS")?;
        let mut back = vec![0u8; 2 * (9 + ANSWER_HEADERS + 9 + a.size)];
        for round in 0..a.rounds {
            let t = Instant::now();
            let (first, second) = streams(round);
            let mut both = Vec::new();
            frame(&mut both, HEADERS, END_HEADERS | END_STREAM, first, a.size);
            frame(&mut both, HEADERS, END_HEADERS | END_STREAM, second, a.size);
            s.write_all(&both)?;
            s.read_exact(&mut back)
                .with_context(|| format!("round {round}"))?;
            times.push(t.elapsed().as_nanos() as u64);
        }
        Ok(())
    }

    pub(super) fn serve(a: &super::EchoArgs, mut s: TcpStream) -> Result<()> {
        s.set_nodelay(true)?;
        let mut settings = Vec::new();
        frame(&mut settings, SETTINGS, 0, 0, 0);
        s.write_all(&settings)?;
        let mut start = [0u8; 24 + 9];
        s.read_exact(&mut start).context("the preface")?;
        let mut requests = vec![0u8; 2 * (9 + a.size)];
        for round in 0..a.rounds {
            s.read_exact(&mut requests)
                .with_context(|| format!("round {round}"))?;
            let (first, second) = streams(round);
            s.write_all(&answer(second, a.size))?;
            s.write_all(&answer(first, a.size))?;
        }
        Ok(())
    }
}
