//! `causeway capture` on an unmodified two-process echo (`causeway-bench echo-node`, started
//! through `sh`): every process writes its own log, both ends of each connection name
//! each other, byte offsets run without a gap, datagram checksums pair up, a Unix
//! socket names its peer process, a process stopped by a signal keeps its buffered
//! records, a process that runs another through `execl` keeps them too, and a log cut
//! short is read up to the damage; on a connection framed as HTTP/2, each call's frame
//! headers are recorded, and reconciliation makes a message of each stream.

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use causeway_blackbox::format::{Call, Direction, Endpoint, Frame, Origin, Reader, Record};
use common::{temp, BIN};

/// One process's log, owned.
struct Log {
    path: PathBuf,
    pid: u32,
    ppid: u32,
    origin: Origin,
    exe: String,
    bytes: Vec<u8>,
}

impl Log {
    fn records(&self) -> Vec<Record<'_>> {
        let mut r = Reader::new(&self.bytes);
        let records: Vec<Record<'_>> = r.by_ref().collect();
        assert_eq!(r.damage(), None, "{}", self.path.display());
        records
    }
}

fn logs(dir: &Path) -> Vec<Log> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("the capture directory") {
        let path = entry.expect("an entry").path();
        let bytes = std::fs::read(&path).expect("a log");
        let header = Reader::new(&bytes).next().expect("a header record");
        let Record::Process {
            pid,
            ppid,
            origin,
            exe,
            ..
        } = header
        else {
            panic!("{}: the first record is not the process", path.display());
        };
        let exe = String::from_utf8_lossy(exe).into_owned();
        out.push(Log {
            path,
            pid,
            ppid,
            origin,
            exe,
            bytes,
        });
    }
    out
}

/// Runs `causeway capture` on `sh -c 'causeway-bench echo-node ARGS'`; the logs and the
/// command's JSON summary.
fn capture(name: &str, echo_args: &str) -> (common::TempDir, Vec<Log>, serde_json::Value) {
    let (dir, summary) = common::capture_echo(name, echo_args);
    let logs = logs(&dir);
    (dir, logs, summary)
}

/// The echo server (the program sh ran) and its forked client.
fn echo_pair(logs: &[Log]) -> (&Log, &Log) {
    let client = logs
        .iter()
        .find(|l| l.origin == Origin::Fork && l.exe.ends_with(common::ECHO_PROGRAM))
        .expect("the client's log (a fork of the echo server)");
    let server = logs
        .iter()
        .find(|l| l.pid == client.ppid && l.exe.ends_with(common::ECHO_PROGRAM))
        .expect("the server's log (the client's parent)");
    assert_eq!(
        server.origin,
        Origin::Start,
        "the server was started by exec"
    );
    (server, client)
}

/// Per connection and direction: the bytes moved, after checking that each call's
/// offset is the sum of the bytes before it.
fn streams(records: &[Record<'_>]) -> BTreeMap<(u64, bool), u64> {
    let mut moved = BTreeMap::new();
    for r in records {
        if let Record::Data {
            conn,
            direction,
            bytes,
            offset,
            peek: false,
            ..
        } = r
        {
            let total = moved
                .entry((*conn, *direction == Direction::Send))
                .or_insert(0u64);
            assert_eq!(
                *offset, *total,
                "conn {conn} {direction:?}: offsets run without a gap"
            );
            *total += bytes;
        }
    }
    moved
}

fn connection<'a>(records: &'a [Record<'a>], calls: &[Call]) -> (Endpoint<'a>, Endpoint<'a>, u32) {
    records
        .iter()
        .find_map(|r| match r {
            Record::Connection {
                call,
                local,
                peer,
                peer_pid,
                ..
            } if calls.contains(call) => Some((*local, *peer, *peer_pid)),
            _ => None,
        })
        .expect("a connection record")
}

#[test]
fn tcp_both_ends_name_each_other_and_their_offsets_are_whole() {
    let (dir, logs, summary) = capture("capture-tcp", "--rounds 200 --size 1000 --transport tcp");
    assert!(
        summary["processes"].as_array().map_or(0, Vec::len) >= 2,
        "{summary}"
    );
    let (server, client) = echo_pair(&logs);
    let (server_records, client_records) = (server.records(), client.records());
    let (c_local, c_peer, _) = connection(&client_records, &[Call::Connect]);
    let (s_local, s_peer, _) = connection(&server_records, &[Call::Accept, Call::Accept4]);
    assert!(
        matches!(c_local, Endpoint::V4([127, 0, 0, 1], _)),
        "{c_local}"
    );
    assert_eq!(
        (c_local, c_peer),
        (s_peer, s_local),
        "each end names the other"
    );
    let client_streams = streams(&client_records);
    let server_streams = streams(&server_records);
    let sent = |m: &BTreeMap<(u64, bool), u64>, send: bool| -> u64 {
        m.iter()
            .filter(|((_, s), _)| *s == send)
            .map(|(_, b)| b)
            .sum()
    };
    assert_eq!(sent(&client_streams, true), 200 * 1000);
    assert_eq!(sent(&server_streams, false), 200 * 1000);
    assert_eq!(sent(&server_streams, true), 200 * 1000);
    assert_eq!(sent(&client_streams, false), 200 * 1000);
    // The shell forked, and its child wrote a log of its own up to its exec of the server.
    let before_exec = logs
        .iter()
        .find(|l| l.pid == server.pid && l.origin == Origin::Fork)
        .expect("the shell's forked child, before it became the server");
    assert!(
        before_exec
            .records()
            .iter()
            .any(|r| matches!(r, Record::Exec { path, .. } if path.ends_with(common::ECHO_PROGRAM.as_bytes()))),
        "the exec is recorded"
    );
    assert!(
        logs.iter().any(|l| l.pid == before_exec.ppid),
        "the shell's own log"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn udp_datagrams_pair_up_by_checksum() {
    let (dir, logs, _) = capture("capture-udp", "--rounds 50 --size 200 --transport udp");
    let (server, client) = echo_pair(&logs);
    let checksums = |records: &[Record<'_>], want: Direction| -> Vec<u32> {
        let mut v: Vec<u32> = records
            .iter()
            .filter_map(|r| match r {
                Record::Data {
                    direction,
                    checksum,
                    bytes: 200,
                    ..
                } if *direction == want => Some(*checksum),
                _ => None,
            })
            .collect();
        v.sort_unstable();
        v
    };
    let (s, c) = (server.records(), client.records());
    let sent = checksums(&c, Direction::Send);
    assert_eq!(sent.len(), 50);
    // Every datagram differs (its first byte is its round), so do the checksums.
    assert_eq!(
        sent.iter().collect::<std::collections::BTreeSet<_>>().len(),
        50
    );
    assert_eq!(
        sent,
        checksums(&s, Direction::Recv),
        "client sends = server receives"
    );
    assert_eq!(
        checksums(&s, Direction::Send),
        checksums(&c, Direction::Recv)
    );
    // The server's receives name the client's address.
    let client_addr = c.iter().find_map(|r| match r {
        Record::Connection { local, .. } => Some(*local),
        _ => None,
    });
    let server_peer = s.iter().find_map(|r| match r {
        Record::Data {
            direction: Direction::Recv,
            peer,
            ..
        } => Some(*peer),
        _ => None,
    });
    assert_eq!(client_addr, server_peer);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_unix_socket_names_its_peer_process() {
    let (dir, logs, _) = capture("capture-unix", "--rounds 20 --size 10 --transport unix");
    let (server, client) = echo_pair(&logs);
    let (s, c) = (server.records(), client.records());
    let (_, c_peer, c_peer_pid) = connection(&c, &[Call::Connect]);
    let (s_local, _, s_peer_pid) = connection(&s, &[Call::Accept, Call::Accept4]);
    assert_eq!(c_peer_pid, server.pid);
    assert_eq!(s_peer_pid, client.pid);
    assert!(
        matches!(c_peer, Endpoint::Unix(p) if p.ends_with(b".sock")),
        "{c_peer}"
    );
    assert_eq!(c_peer, s_local);
    let _ = std::fs::remove_dir_all(dir);
}

/// Starts `causeway capture --out DIR -- PROGRAM...` and reads the first line the
/// program prints.
fn capture_until_first_line(
    dir: &Path,
    program: &[&std::ffi::OsStr],
) -> (std::process::Child, String) {
    let mut child = Command::new(BIN)
        .args(["capture", "--out"])
        .arg(dir)
        .arg("--")
        .args(program)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("running causeway capture");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the program's first line");
    (child, line)
}

#[test]
fn a_process_stopped_by_sigterm_keeps_its_buffered_records() {
    let dir = temp("capture-sigterm");
    // 100 rounds fill well under a buffer, so nothing is written before the kill.
    let echo = common::echo_bin();
    let args = [
        "echo-node",
        "--rounds",
        "100",
        "--size",
        "10",
        "--linger-ms",
        "20000",
    ];
    let mut program = vec![echo.as_os_str()];
    program.extend(args.iter().map(std::ffi::OsStr::new));
    let (mut child, line) = capture_until_first_line(&dir, &program);
    let summary: serde_json::Value = serde_json::from_str(&line).expect("JSON");
    let client_pid = summary["client_pid"].as_i64().expect("client_pid") as i32;
    // SAFETY: signalling the lingering echo client, a child process of this test's.
    assert_eq!(unsafe { libc::kill(client_pid, libc::SIGTERM) }, 0);
    let status = child.wait().expect("capture ends");
    assert!(
        !status.success(),
        "the echo fails when its client is killed"
    );
    let logs = logs(&dir);
    let client = logs
        .iter()
        .find(|l| l.pid == client_pid as u32)
        .expect("the killed client's log");
    let records = client.records();
    let data = records
        .iter()
        .filter(|r| matches!(r, Record::Data { .. }))
        .count();
    assert_eq!(data, 200, "every send and receive of the killed client");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_log_cut_short_is_read_up_to_the_damage() {
    let (dir, logs, _) = capture("capture-cut", "--rounds 10 --size 10 --transport tcp");
    let (server, _) = echo_pair(&logs);
    let whole = server.records().len();
    let cut = server.bytes.len() - 3;
    std::fs::write(&server.path, &server.bytes[..cut]).expect("cutting the log");
    let out = Command::new(BIN)
        .args(["capture-log", "--json"])
        .arg(&server.path)
        .output()
        .expect("causeway capture-log");
    assert!(out.status.success());
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(summary["records"], (whole - 1) as u64);
    let damage = summary["damage"].as_str().expect("the damage is reported");
    assert!(damage.contains("cut short"), "{damage}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A Python program whose threads send on socket pairs while its main thread, again and
/// again, finds the capture log's descriptor and puts a fresh file of its own there with
/// dup2; it prints the files that got bytes it never wrote.
const DUP2_ONTO_THE_LOG: &str = r#"
import os, resource, socket, sys, threading
capture = sys.argv[1]
# Each move puts the log above the file left in its place.
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
def log_fd():
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith(capture):
                return int(fd)
        except OSError:
            pass
stop = False
def chatter():
    a, b = socket.socketpair()
    while not stop:
        a.send(b"x" * 64)
        b.recv(64)
threads = [threading.Thread(target=chatter, daemon=True) for _ in range(3)]
for t in threads:
    t.start()
victims = []
try:
    for k in range(100):
        fd = log_fd()
        if fd is None:
            sys.exit(f"pass {k}: the capture log is gone")
        path = os.path.join(sys.argv[2], f"victim-{k}")
        mine = os.open(path, os.O_WRONLY | os.O_CREAT)
        os.dup2(mine, fd)
        os.close(mine)
        victims.append((path, fd))
finally:
    stop = True
    for t in threads:
        t.join()
for path, fd in victims:
    os.close(fd)
print(" ".join(p for p, _ in victims if os.path.getsize(p) > 0))
"#;

#[test]
fn a_program_that_puts_its_files_over_the_log_never_gets_records_in_them() {
    let (dir, victims) = (temp("capture-dup2"), temp("capture-dup2-victims"));
    std::fs::create_dir_all(&dir).expect("a directory");
    std::fs::create_dir_all(&victims).expect("a directory");
    // As /proc names the log's file.
    let dir = dir.canonicalize().expect("the capture directory");
    let dup2_command = [
        "python3".as_ref(),
        "-c".as_ref(),
        DUP2_ONTO_THE_LOG.as_ref(),
        dir.as_os_str(),
        victims.as_os_str(),
    ];
    let out = common::capture_into(&dir, false, &dup2_command);
    let written = String::from_utf8_lossy(&out.stdout);
    assert_eq!(written.trim(), "", "files that got capture records");
    // The log moved each time and is whole, with the threads' sends in it.
    let logs = logs(&dir);
    let python = logs
        .iter()
        .find(|l| l.exe.contains("python"))
        .expect("python's log");
    let sends = python
        .records()
        .iter()
        .filter(|r| {
            matches!(
                r,
                Record::Data {
                    direction: Direction::Send,
                    ..
                }
            )
        })
        .count();
    assert!(sends > 0, "the threads' sends were captured");
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(victims);
}

/// A C program that sends on a socket pair, then runs `true` through `execl`, `execlp`
/// or `execle` (its first argument): glibc builds those calls' argument vectors itself and
/// calls its own execve, past the library's execve hook.
const EXECL_PROBE: &str = r#"
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int sv[2];
    char buf[4];
    char *env[] = {0};
    if (argc < 2 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return 2;
    if (write(sv[0], "ping", 4) != 4 || read(sv[1], buf, 4) != 4) return 3;
    if (strcmp(argv[1], "execlp") == 0) execlp("true", "true", (char *)0);
    else if (strcmp(argv[1], "execle") == 0) execle("/bin/true", "true", (char *)0, env);
    else execl("/bin/true", "true", (char *)0);
    return 4;
}
"#;

// The execl trampolines are written for x86-64.
#[cfg(target_arch = "x86_64")]
#[test]
fn a_program_that_runs_another_through_execl_keeps_its_records() {
    let dir = temp("capture-execl");
    std::fs::create_dir_all(&dir).expect("a directory");
    let (source, probe) = (dir.join("execl-probe.c"), dir.join("execl-probe"));
    std::fs::write(&source, EXECL_PROBE).expect("the probe's source");
    let cc = Command::new("cc")
        .arg("-o")
        .arg(&probe)
        .arg(&source)
        .output()
        .expect("cc (the C compiler the Rust toolchain links with)");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    for call in ["execl", "execlp", "execle"] {
        let out_dir = dir.join(call);
        // `true` ran: the exec went through with its arguments.
        let probe_command = [probe.as_os_str(), std::ffi::OsStr::new(call)];
        common::capture_into(&out_dir, false, &probe_command);
        let logs = logs(&out_dir);
        let log = logs
            .iter()
            .find(|l| l.exe.contains("execl-probe"))
            .unwrap_or_else(|| panic!("{call}: the probe's log"));
        let records = log.records();
        // What was buffered before the exec was written out, and the exec recorded.
        let sent = records.iter().any(|r| {
            matches!(
                r,
                Record::Data {
                    direction: Direction::Send,
                    bytes: 4,
                    ..
                }
            )
        });
        assert!(sent, "{call}: the send before the exec");
        let exec = records
            .iter()
            .any(|r| matches!(r, Record::Exec { path, .. } if path.ends_with(b"true")));
        assert!(exec, "{call}: the exec");
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// A thread sends one datagram and goes quiet; the main thread keeps sending, then says
/// it is ready and sleeps. Nothing ends the process, so only another thread can write the
/// quiet thread's buffer out.
const QUIET_THREAD: &str = "
import os, socket, threading, time
def quiet():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'qq', ('127.0.0.1', 9))
    time.sleep(60)
threading.Thread(target=quiet, daemon=True).start()
busy = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(20):
    time.sleep(0.05)
    busy.sendto(b'b', ('127.0.0.1', 9))
print(os.getpid(), flush=True)
time.sleep(60)
";

#[test]
fn a_quiet_threads_records_reach_the_log_while_the_program_runs() {
    let dir = temp("capture-quiet-thread");
    let program = ["python3", "-c", QUIET_THREAD].map(std::ffi::OsStr::new);
    let (mut child, line) = capture_until_first_line(&dir, &program);
    let pid: i32 = line.trim().parse().expect("a pid");
    // Read while the program still runs: its buffers are not written out at exit.
    let logs = logs(&dir);
    // SAFETY: killing the captured program, a process this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    let _ = child.wait();
    // Each exec starts a log of its own (a `python3` on PATH may be a launcher script).
    let mine: Vec<&Log> = logs.iter().filter(|l| l.pid == pid as u32).collect();
    assert!(!mine.is_empty(), "the program's logs");
    let sent = |n: u64| {
        mine.iter()
            .flat_map(|l| l.records())
            .filter(|r| {
                matches!(r, Record::Data { direction: Direction::Send, bytes, .. } if *bytes == n)
            })
            .count()
    };
    assert!(sent(1) >= 15, "the busy thread's sends: {}", sent(1));
    assert_eq!(sent(2), 1, "the quiet thread's send");
    let _ = std::fs::remove_dir_all(dir);
}

/// The HTTP/2 frames `records` hold in `direction`: (stream, type, ends the stream).
fn frames(records: &[Record<'_>], direction: Direction) -> Vec<(u32, u8, bool)> {
    records
        .iter()
        .filter_map(|r| match r {
            Record::Frames {
                direction: d,
                frames,
                ..
            } if *d == direction => Some(Frame::read_all(frames)),
            _ => None,
        })
        .flatten()
        .map(|f| (f.stream, f.kind, f.ends_stream()))
        .collect()
}

#[test]
fn calls_multiplexed_on_http2_are_told_apart_by_their_streams() {
    let rounds = 6u32;
    let (dir, logs, _) = capture(
        "capture-h2",
        &format!("--rounds {rounds} --size 300 --http2"),
    );
    let (server, client) = echo_pair(&logs);
    let (server_records, client_records) = (server.records(), client.records());
    // Two requests a round, in one write: each one's HEADERS, ending its stream.
    let requests: Vec<(u32, u8, bool)> = (0..rounds)
        .flat_map(|r| [4 * r + 1, 4 * r + 3])
        .map(|s| (s, Frame::HEADERS, true))
        .collect();
    assert_eq!(frames(&client_records, Direction::Send), requests);
    assert_eq!(frames(&server_records, Direction::Recv), requests);
    // The answers, the second stream's first: HEADERS, then DATA ending the stream.
    let answers: Vec<(u32, u8, bool)> = (0..rounds)
        .flat_map(|r| [4 * r + 3, 4 * r + 1])
        .flat_map(|s| [(s, Frame::HEADERS, false), (s, Frame::DATA, true)])
        .collect();
    assert_eq!(frames(&server_records, Direction::Send), answers);
    assert_eq!(frames(&client_records, Direction::Recv), answers);
    // A message per stream and direction, between that stream's endpoints.
    let files: Vec<PathBuf> = [&server.path, &client.path]
        .map(|p| p.to_path_buf())
        .to_vec();
    let mut captured = causeway_blackbox::reconcile::Captured::read(&files).expect("logs");
    let messages = captured.messages();
    let on_streams: Vec<&causeway_blackbox::reconcile::Message> =
        messages.iter().filter(|m| m.src_ep.contains('#')).collect();
    assert_eq!(on_streams.len(), 4 * rounds as usize, "{messages:#?}");
    for m in &on_streams {
        assert!(
            m.send_ns.get().is_some() && m.recv_ns.get().is_some(),
            "{m:?}"
        );
        let stream = |ep: &str| ep.split_once('#').map(|(_, s)| s.to_string());
        assert_eq!(stream(&m.src_ep), stream(&m.dst_ep), "{m:?}");
    }
    drop(dir);
}
