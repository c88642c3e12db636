//! Capture logs written record by record, as the capture library writes them, for tests
//! of what reads them: every stamp's two clocks read the same time, every connection is
//! on loopback with descriptor `3 + conn`.

use causeway_capture_format::{sock, Call, Direction, Endpoint, Origin, Record, Stamp, MAGIC};

/// A stamp of thread 7 at `ns` on both clocks.
pub fn stamp(ns: u64) -> Stamp {
    Stamp {
        tid: 7,
        mono_ns: ns,
        wall_ns: ns,
    }
}

/// `records` encoded one after another (no header: a log's later bytes).
pub fn records(records: &[Record<'_>]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    for r in records {
        let n = r.encode(&mut buf).expect("a test record fits 4 KiB");
        out.extend_from_slice(&buf[..n]);
    }
    out
}

/// A whole log: the header, then `records`.
pub fn log(list: &[Record<'_>]) -> Vec<u8> {
    [&MAGIC[..], &records(list)].concat()
}

/// Port `port` on 127.0.0.1.
pub fn loopback(port: u16) -> Endpoint<'static> {
    Endpoint::V4([127, 0, 0, 1], port)
}

/// The process record of `exe` (its command line too), started at `ns` on host `h`.
pub fn process(pid: u32, exe: &'static [u8], ns: u64) -> Record<'static> {
    Record::Process {
        pid,
        ppid: 0,
        origin: Origin::Start,
        at: stamp(ns),
        host: b"h",
        exe,
        args: exe,
    }
}

/// A listen on `port`.
pub fn listen(ns: u64, port: u16) -> Record<'static> {
    Record::Bind {
        at: stamp(ns),
        call: Call::Listen,
        fd: 3,
        local: loopback(port),
        errno: 0,
    }
}

/// TCP connection `conn` from port `local` to port `peer`, made by `call` (connect or
/// accept).
pub fn tcp_connection(ns: u64, conn: u64, call: Call, local: u16, peer: u16) -> Record<'static> {
    Record::Connection {
        at: stamp(ns),
        call,
        fd: 3 + conn as i32,
        conn,
        kind: sock::STREAM,
        local: loopback(local),
        peer: loopback(peer),
        peer_pid: 0,
        errno: 0,
        mid_stream: false,
    }
}

/// `bytes` moved on stream `conn` at stream `offset` (a write, or a read).
pub fn stream_data(
    ns: u64,
    conn: u64,
    direction: Direction,
    offset: u64,
    bytes: u64,
) -> Record<'static> {
    Record::Data {
        at: stamp(ns),
        call: match direction {
            Direction::Send => Call::Write,
            Direction::Recv => Call::Read,
        },
        fd: 3 + conn as i32,
        conn,
        direction,
        bytes,
        errno: 0,
        offset,
        peer: Endpoint::None,
        checksum: 0,
        peek: false,
    }
}
