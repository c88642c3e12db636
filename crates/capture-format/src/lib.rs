//! The capture log: what the preload library writes for each process and what `causeway
//! infer` reads back.
//!
//! A log is [`MAGIC`], then records. A record is its length (`u16`, little-endian, the
//! bytes after it), a tag byte and the tag's fields, little-endian; strings and
//! endpoints carry their own lengths. A log cut short (a killed process, a full disk)
//! ends in a partial record, which [`Reader`] reports with its offset after yielding
//! everything before it.
//!
//! The records: the process (pid, parent pid, start or fork, host, executable, command
//! line), socket, bind and listen (the address the kernel gave), connection, data,
//! close and shutdown, dup, fork, exec, the HTTP/2 frames a data call moved (the headers
//! that delimit each stream's messages, on connections framed as HTTP/2), and the
//! library's warnings. Every record but the
//! first carries the thread id and `CLOCK_MONOTONIC` and `CLOCK_REALTIME` at the call's
//! return. Files are named `HOST-PID-MONO.sockcap` (see [`LOG_SUFFIX`]). The
//! `capture_logs` fuzz target checks that whatever decodes re-encodes to the same bytes.
//!
//! Encoding writes into a caller's fixed buffer and never allocates: the preload library
//! encodes inside intercepted calls.
//!
//! The preload library (`causeway-sockcap`) and the inference crate (`causeway-blackbox`)
//! both depend on this crate, which depends on nothing: the library links only libc.
#![warn(missing_docs)]

use std::fmt;

mod crc;
mod decode;
pub mod elf;
mod encode;

pub use crc::{crc32c, crc32c_update};
pub use decode::{Damage, Reader};

/// The environment variable naming the directory captured processes write logs to.
pub const DIR_VAR: &str = "CAUSEWAY_CAPTURE_DIR";

/// The file name ending of a capture log.
pub const LOG_SUFFIX: &str = ".sockcap";

/// The first bytes of every capture log (the digits are the format's version).
pub const MAGIC: &[u8; 8] = b"CWSOCK01";

/// The longest record body the format allows (its length is a `u16`).
pub const MAX_RECORD: usize = u16::MAX as usize;

/// When and on which thread a call returned.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stamp {
    /// The kernel's thread id.
    pub tid: u32,
    /// `CLOCK_MONOTONIC`, nanoseconds.
    pub mono_ns: u64,
    /// `CLOCK_REALTIME`, nanoseconds since the Unix epoch.
    pub wall_ns: u64,
}

/// A socket address as the capture saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint<'a> {
    /// Unknown or not applicable (an unbound socket, a connected datagram's send).
    #[default]
    None,
    /// IPv4 address and port.
    V4([u8; 4], u16),
    /// IPv6 address and port.
    V6([u8; 16], u16),
    /// A Unix socket's path (an abstract name starts with a NUL byte; unnamed is empty).
    Unix(&'a [u8]),
}

impl fmt::Display for Endpoint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Endpoint::None => f.write_str("-"),
            Endpoint::V4(a, p) => write!(f, "{}:{p}", std::net::Ipv4Addr::from(*a)),
            Endpoint::V6(a, p) => write!(f, "[{}]:{p}", std::net::Ipv6Addr::from(*a)),
            Endpoint::Unix(path) => match path.split_first() {
                None => f.write_str("unix:(unnamed)"),
                Some((0, name)) => write!(f, "unix:@{}", String::from_utf8_lossy(name)),
                Some(_) => write!(f, "unix:{}", String::from_utf8_lossy(path)),
            },
        }
    }
}

/// The libc function a record comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Call {
    /// `socket(2)`: a new socket.
    Socket = 1,
    /// `socketpair(2)`: two connected sockets.
    Socketpair,
    /// `connect(2)`: a connection opened (or, for a datagram socket, a default peer set).
    Connect,
    /// `accept(2)`: a connection taken from a listening socket.
    Accept,
    /// `accept4(2)`: `accept` with flags.
    Accept4,
    /// `bind(2)`: a local address given to a socket.
    Bind,
    /// `listen(2)`: a socket made to accept connections.
    Listen,
    /// `send(2)`.
    Send,
    /// `sendto(2)`: a send that may name its destination.
    Sendto,
    /// `sendmsg(2)`.
    Sendmsg,
    /// `sendmmsg(2)`: several messages in one call (a record each).
    Sendmmsg,
    /// `recv(2)`.
    Recv,
    /// `recvfrom(2)`: a receive that may return the sender's address.
    Recvfrom,
    /// `recvmsg(2)`.
    Recvmsg,
    /// `recvmmsg(2)`: several messages in one call (a record each).
    Recvmmsg,
    /// `read(2)` on a socket.
    Read,
    /// `write(2)` on a socket.
    Write,
    /// `readv(2)` on a socket.
    Readv,
    /// `writev(2)` on a socket.
    Writev,
    /// `pread(2)` (or `pread64`) on a socket.
    Pread,
    /// `pwrite(2)` (or `pwrite64`) on a socket.
    Pwrite,
    /// `sendfile(2)`: a send to a socket from a file.
    Sendfile,
    /// `splice(2)`: bytes moved between a pipe and a socket.
    Splice,
    /// `close(2)`.
    Close,
    /// `shutdown(2)`: one or both directions ended.
    Shutdown,
    /// `dup(2)`.
    Dup,
    /// `dup2(2)`.
    Dup2,
    /// `dup3(2)`.
    Dup3,
    /// `fcntl(2)` with `F_DUPFD` or `F_DUPFD_CLOEXEC`: a descriptor duplicated.
    Fcntl,
    /// `fork(2)`.
    Fork,
    /// `vfork(2)` (which the library runs as a fork).
    Vfork,
    /// `clone(2)` without a shared address space: a new process.
    Clone,
    /// A socket first seen in a data call (inherited, passed over a Unix socket, or made
    /// by a call the library does not see).
    Discovered,
    /// `close_range(2)` or `closefrom(3)`: each socket in the range closed.
    CloseRange,
    /// The process ended (`exit`, `_exit`); in the format, written by no library yet.
    Exit,
    /// `execve(2)` or another exec function: the program replaced.
    Execve,
}

const CALLS: [Call; 36] = [
    Call::Socket,
    Call::Socketpair,
    Call::Connect,
    Call::Accept,
    Call::Accept4,
    Call::Bind,
    Call::Listen,
    Call::Send,
    Call::Sendto,
    Call::Sendmsg,
    Call::Sendmmsg,
    Call::Recv,
    Call::Recvfrom,
    Call::Recvmsg,
    Call::Recvmmsg,
    Call::Read,
    Call::Write,
    Call::Readv,
    Call::Writev,
    Call::Pread,
    Call::Pwrite,
    Call::Sendfile,
    Call::Splice,
    Call::Close,
    Call::Shutdown,
    Call::Dup,
    Call::Dup2,
    Call::Dup3,
    Call::Fcntl,
    Call::Fork,
    Call::Vfork,
    Call::Clone,
    Call::Discovered,
    Call::CloseRange,
    Call::Exit,
    Call::Execve,
];

impl Call {
    fn from_u8(b: u8) -> Option<Call> {
        CALLS.get(usize::from(b).checked_sub(1)?).copied()
    }

    /// The function's name, as in libc.
    pub fn name(self) -> &'static str {
        match self {
            Call::Socket => "socket",
            Call::Socketpair => "socketpair",
            Call::Connect => "connect",
            Call::Accept => "accept",
            Call::Accept4 => "accept4",
            Call::Bind => "bind",
            Call::Listen => "listen",
            Call::Send => "send",
            Call::Sendto => "sendto",
            Call::Sendmsg => "sendmsg",
            Call::Sendmmsg => "sendmmsg",
            Call::Recv => "recv",
            Call::Recvfrom => "recvfrom",
            Call::Recvmsg => "recvmsg",
            Call::Recvmmsg => "recvmmsg",
            Call::Read => "read",
            Call::Write => "write",
            Call::Readv => "readv",
            Call::Writev => "writev",
            Call::Pread => "pread",
            Call::Pwrite => "pwrite",
            Call::Sendfile => "sendfile",
            Call::Splice => "splice",
            Call::Close => "close",
            Call::Shutdown => "shutdown",
            Call::Dup => "dup",
            Call::Dup2 => "dup2",
            Call::Dup3 => "dup3",
            Call::Fcntl => "fcntl",
            Call::Fork => "fork",
            Call::Vfork => "vfork",
            Call::Clone => "clone",
            Call::Discovered => "discovered",
            Call::CloseRange => "close_range",
            Call::Exit => "exit",
            Call::Execve => "execve",
        }
    }
}

/// Which way data moved, seen from the process that logged it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Sent: out of this process.
    Send,
    /// Received: into this process.
    Recv,
}

/// How a process came to write this log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The library was loaded at the program's start (a command started, or an exec).
    Start,
    /// A fork (or vfork, or clone without a shared address space) of a captured process.
    Fork,
}

/// Socket types as the records keep them.
pub mod sock {
    /// `SOCK_STREAM`: TCP, or a Unix stream socket.
    pub const STREAM: u16 = 1;
    /// `SOCK_DGRAM`: UDP, or a Unix datagram socket.
    pub const DGRAM: u16 = 2;
    /// `SOCK_SEQPACKET`.
    pub const SEQPACKET: u16 = 5;
}

/// Warning codes: what the capture could not see.
pub mod warning {
    /// Per-thread buffers were full or busy: `count` records were dropped.
    pub const DROPPED: u16 = 1;
    /// The process uses io_uring: its socket I/O through it is invisible.
    pub const IO_URING: u16 = 2;
    /// An exec of a program the library cannot enter (statically linked): `detail` is its path.
    pub const STATIC_EXEC: u16 = 3;
    /// A descriptor or connection table was full: sockets past it are not tracked.
    pub const TABLE_FULL: u16 = 4;
}

/// One capture log record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// The process writing the log; the first record of every log.
    Process {
        /// This process's id.
        pid: u32,
        /// Its parent's process id.
        ppid: u32,
        /// How the process came to write this log.
        origin: Origin,
        /// When the log was opened.
        at: Stamp,
        /// The host's name (`uname`'s nodename).
        host: &'a [u8],
        /// The executable's path (`/proc/self/exe`).
        exe: &'a [u8],
        /// The command line, arguments separated by NUL bytes (its first KiB).
        args: &'a [u8],
    },
    /// A socket was made (`socket`, or each end of `socketpair`).
    Socket {
        /// When the call returned.
        at: Stamp,
        /// [`Call::Socket`] or [`Call::Socketpair`].
        call: Call,
        /// The new socket's descriptor.
        fd: i32,
        /// The address family (`AF_INET`, `AF_INET6`, `AF_UNIX`, ...), as the call was given it.
        domain: u16,
        /// The socket type, as [`sock`] numbers them (the call's flags masked off).
        kind: u16,
        /// The call's `errno` when it failed, else 0.
        errno: u16,
    },
    /// `bind` or `listen` (the local address as the kernel assigned it).
    Bind {
        /// When the call returned.
        at: Stamp,
        /// [`Call::Bind`] or [`Call::Listen`].
        call: Call,
        /// The socket's descriptor.
        fd: i32,
        /// The socket's local address after the call.
        local: Endpoint<'a>,
        /// The call's `errno` when it failed, else 0.
        errno: u16,
    },
    /// A connection (or a connected datagram socket) is known: `connect`, `accept`, or a
    /// socket [`Call::Discovered`] in a data call.
    Connection {
        /// When the call returned ([`Call::Discovered`]: the stamp of the data call that found it).
        at: Stamp,
        /// [`Call::Connect`], [`Call::Accept`], [`Call::Accept4`] or [`Call::Discovered`].
        call: Call,
        /// The connection's descriptor.
        fd: i32,
        /// This process's number for the connection, unique in its log.
        conn: u64,
        /// The socket type, as [`sock`] numbers them.
        kind: u16,
        /// This end's address.
        local: Endpoint<'a>,
        /// The other end's address ([`Endpoint::None`] when unknown).
        peer: Endpoint<'a>,
        /// A Unix socket's peer process (0 when unknown).
        peer_pid: u32,
        /// The call's `errno` when it failed (`EINPROGRESS`: a non-blocking connect), else 0.
        errno: u16,
        /// Bytes may have moved before the capture saw the socket: offsets count from here.
        mid_stream: bool,
    },
    /// Data moved (or a call that would have moved it failed). `at` is when a send was
    /// called (its receiver may finish reading before the call returns) and when a
    /// receive returned.
    Data {
        /// When a send was called or a receive returned (see above).
        at: Stamp,
        /// The send or receive function called.
        call: Call,
        /// The descriptor the call was given.
        fd: i32,
        /// The connection's number in this process's log (as in its [`Record::Connection`]).
        conn: u64,
        /// Whether this call sent or received.
        direction: Direction,
        /// Bytes moved; 0 with `errno` set for a failed call.
        bytes: u64,
        /// The call's `errno` when it failed, else 0.
        errno: u16,
        /// The connection's stream offset in this direction before this call.
        offset: u64,
        /// A datagram's other end, when the call named or returned it.
        peer: Endpoint<'a>,
        /// A datagram's payload checksum (CRC-32C of what moved; 0 for streams).
        checksum: u32,
        /// `MSG_PEEK`: the bytes stay queued and the offset did not advance.
        peek: bool,
    },
    /// `close`, `shutdown` (`how` as in `shutdown(2)`), or `close_range` of a socket.
    Close {
        /// When the call returned.
        at: Stamp,
        /// [`Call::Close`], [`Call::Shutdown`] or [`Call::CloseRange`].
        call: Call,
        /// The socket's descriptor.
        fd: i32,
        /// The connection's number in this process's log (0 for a socket never connected).
        conn: u64,
        /// `shutdown`'s `how` (`SHUT_RD`, `SHUT_WR` or `SHUT_RDWR`); 0 for a close.
        how: u8,
        /// The call's `errno` when it failed, else 0.
        errno: u16,
    },
    /// A socket descriptor was duplicated.
    Dup {
        /// When the call returned.
        at: Stamp,
        /// [`Call::Dup`], [`Call::Dup2`], [`Call::Dup3`] or [`Call::Fcntl`].
        call: Call,
        /// The socket's descriptor that was duplicated.
        old: i32,
        /// The new descriptor, now the same socket.
        new: i32,
    },
    /// This process forked (`child` is the new process, or -1 with `errno`).
    Fork {
        /// When the call returned in the parent.
        at: Stamp,
        /// [`Call::Fork`], [`Call::Vfork`] or [`Call::Clone`].
        call: Call,
        /// The child's process id, or -1 when the call failed.
        child: i32,
        /// The call's `errno` when it failed, else 0.
        errno: u16,
    },
    /// This process is about to exec `path` (the new program writes a log of its own).
    Exec {
        /// When the exec was about to be called.
        at: Stamp,
        /// The program's path, as the exec was given it.
        path: &'a [u8],
    },
    /// HTTP/2 frames whose header a data call on a stream moved (after the
    /// [`Record::Data`] of the same call: same stamp, connection, direction and offset).
    /// Only the frames that delimit a stream's messages are recorded: `HEADERS`, `DATA`
    /// ending a stream, `RST_STREAM`; a call with more than [`MAX_FRAMES`] of them writes
    /// several records.
    Frames {
        /// The data call's stamp.
        at: Stamp,
        /// The connection's number in this process's log.
        conn: u64,
        /// Whether the call sent or received.
        direction: Direction,
        /// The connection's stream offset in this direction before the call.
        offset: u64,
        /// The frames, [`Frame::LEN`] bytes each (see [`Frame::read_all`]).
        frames: &'a [u8],
    },
    /// Something the capture could not see; see [`warning`].
    Warning {
        /// When the capture noticed.
        at: Stamp,
        /// What went unseen: one of [`warning`]'s codes.
        code: u16,
        /// How many (records dropped, for [`warning::DROPPED`]; otherwise 1).
        count: u64,
        /// What it concerns, as text (for [`warning::STATIC_EXEC`], the program's path).
        detail: &'a [u8],
    },
}

/// Most frames one [`Record::Frames`] holds.
pub const MAX_FRAMES: usize = 64;

/// One HTTP/2 frame a data call moved the header of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frame {
    /// Where its 9-byte header starts in the connection's stream (this direction).
    pub start: u64,
    /// Its payload's length.
    pub length: u32,
    /// Its stream.
    pub stream: u32,
    /// Its type (`0` DATA, `1` HEADERS, `3` RST_STREAM, ...).
    pub kind: u8,
    /// Its flags (`0x1` END_STREAM on DATA and HEADERS).
    pub flags: u8,
}

impl Frame {
    /// Bytes a frame takes in a [`Record::Frames`].
    pub const LEN: usize = 18;
    /// `DATA`.
    pub const DATA: u8 = 0;
    /// `HEADERS`.
    pub const HEADERS: u8 = 1;
    /// `RST_STREAM`.
    pub const RST_STREAM: u8 = 3;
    /// The `END_STREAM` flag.
    pub const END_STREAM: u8 = 0x1;

    /// Writes the frame as a [`Record::Frames`] holds it.
    pub fn write(&self, out: &mut [u8; Frame::LEN]) {
        out[0..8].copy_from_slice(&self.start.to_le_bytes());
        out[8..12].copy_from_slice(&self.length.to_le_bytes());
        out[12..16].copy_from_slice(&self.stream.to_le_bytes());
        out[16] = self.kind;
        out[17] = self.flags;
    }

    /// The frames of a [`Record::Frames`]' `frames` bytes (whole ones: the decoder
    /// accepts no others).
    pub fn read_all(frames: &[u8]) -> impl Iterator<Item = Frame> + '_ {
        frames.chunks_exact(Frame::LEN).map(|f| {
            let u32_at = |i: usize| u32::from_le_bytes([f[i], f[i + 1], f[i + 2], f[i + 3]]);
            let mut start = [0u8; 8];
            start.copy_from_slice(&f[0..8]);
            Frame {
                start: u64::from_le_bytes(start),
                length: u32_at(8),
                stream: u32_at(12),
                kind: f[16],
                flags: f[17],
            }
        })
    }

    /// Whether it ends its stream in its direction.
    pub fn ends_stream(&self) -> bool {
        self.kind == Frame::RST_STREAM
            || (matches!(self.kind, Frame::DATA | Frame::HEADERS)
                && self.flags & Frame::END_STREAM != 0)
    }
}

/// The records' tags.
mod tag {
    pub(crate) const PROCESS: u8 = 1;
    pub(crate) const SOCKET: u8 = 2;
    pub(crate) const BIND: u8 = 3;
    pub(crate) const CONNECTION: u8 = 4;
    pub(crate) const DATA: u8 = 5;
    pub(crate) const CLOSE: u8 = 6;
    pub(crate) const DUP: u8 = 7;
    pub(crate) const FORK: u8 = 8;
    pub(crate) const EXEC: u8 = 9;
    pub(crate) const WARNING: u8 = 10;
    pub(crate) const FRAMES: u8 = 11;
}

impl Record<'_> {
    /// When and on which thread the record's call happened (a process record: when the
    /// log was opened).
    pub fn at(&self) -> Stamp {
        match self {
            Record::Process { at, .. }
            | Record::Socket { at, .. }
            | Record::Bind { at, .. }
            | Record::Connection { at, .. }
            | Record::Data { at, .. }
            | Record::Close { at, .. }
            | Record::Dup { at, .. }
            | Record::Fork { at, .. }
            | Record::Exec { at, .. }
            | Record::Frames { at, .. }
            | Record::Warning { at, .. } => *at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stamp() -> impl Strategy<Value = Stamp> {
        (any::<u32>(), any::<u64>(), any::<u64>()).prop_map(|(tid, mono_ns, wall_ns)| Stamp {
            tid,
            mono_ns,
            wall_ns,
        })
    }

    fn call() -> impl Strategy<Value = Call> {
        (0..CALLS.len()).prop_map(|i| CALLS[i])
    }

    fn endpoint(unix: &[u8]) -> impl Strategy<Value = Endpoint<'_>> {
        prop_oneof![
            Just(Endpoint::None),
            (any::<[u8; 4]>(), any::<u16>()).prop_map(|(a, p)| Endpoint::V4(a, p)),
            (any::<[u8; 16]>(), any::<u16>()).prop_map(|(a, p)| Endpoint::V6(a, p)),
            (0..=unix.len().min(255)).prop_map(move |n| Endpoint::Unix(&unix[..n])),
        ]
    }

    static TEXT: [u8; 300] = [b'x'; 300];

    fn record() -> impl Strategy<Value = Record<'static>> {
        prop_oneof![
            (
                any::<u32>(),
                any::<u32>(),
                any::<bool>(),
                stamp(),
                0..255usize,
                0..300usize
            )
                .prop_map(|(pid, ppid, fork, at, h, e)| Record::Process {
                    pid,
                    ppid,
                    origin: if fork { Origin::Fork } else { Origin::Start },
                    at,
                    host: &TEXT[..h],
                    exe: &TEXT[..e],
                    args: &TEXT[..e / 2],
                }),
            (
                stamp(),
                call(),
                any::<i32>(),
                any::<u16>(),
                any::<u16>(),
                any::<u16>()
            )
                .prop_map(|(at, call, fd, domain, kind, errno)| Record::Socket {
                    at,
                    call,
                    fd,
                    domain,
                    kind,
                    errno
                }),
            (stamp(), call(), any::<i32>(), endpoint(&TEXT), any::<u16>()).prop_map(
                |(at, call, fd, local, errno)| Record::Bind {
                    at,
                    call,
                    fd,
                    local,
                    errno
                }
            ),
            (
                stamp(),
                call(),
                any::<i32>(),
                any::<u64>(),
                endpoint(&TEXT),
                endpoint(&TEXT),
                any::<(u32, u16, bool, u16)>()
            )
                .prop_map(
                    |(at, call, fd, conn, local, peer, (peer_pid, errno, mid_stream, kind))| {
                        Record::Connection {
                            at,
                            call,
                            fd,
                            conn,
                            kind,
                            local,
                            peer,
                            peer_pid,
                            errno,
                            mid_stream,
                        }
                    }
                ),
            (
                stamp(),
                call(),
                any::<(i32, u64, bool, bool)>(),
                any::<(u64, u16, u64, u32)>(),
                endpoint(&TEXT)
            )
                .prop_map(
                    |(at, call, (fd, conn, recv, peek), (bytes, errno, offset, checksum), peer)| {
                        Record::Data {
                            at,
                            call,
                            fd,
                            conn,
                            direction: if recv {
                                Direction::Recv
                            } else {
                                Direction::Send
                            },
                            bytes,
                            errno,
                            offset,
                            peer,
                            checksum,
                            peek,
                        }
                    }
                ),
            (stamp(), call(), any::<(i32, u64, u8, u16)>()).prop_map(
                |(at, call, (fd, conn, how, errno))| Record::Close {
                    at,
                    call,
                    fd,
                    conn,
                    how,
                    errno
                }
            ),
            (stamp(), call(), any::<(i32, i32)>()).prop_map(|(at, call, (old, new))| Record::Dup {
                at,
                call,
                old,
                new
            }),
            (stamp(), call(), any::<(i32, u16)>()).prop_map(|(at, call, (child, errno))| {
                Record::Fork {
                    at,
                    call,
                    child,
                    errno,
                }
            }),
            (stamp(), 0..300usize).prop_map(|(at, n)| Record::Exec {
                at,
                path: &TEXT[..n]
            }),
            (stamp(), any::<(u64, bool, u64)>(), 0..16usize).prop_map(
                |(at, (conn, recv, offset), n)| Record::Frames {
                    at,
                    conn,
                    direction: if recv {
                        Direction::Recv
                    } else {
                        Direction::Send
                    },
                    offset,
                    frames: &TEXT[..n * Frame::LEN],
                }
            ),
            (stamp(), any::<(u16, u64)>(), 0..300usize).prop_map(|(at, (code, count), n)| {
                Record::Warning {
                    at,
                    code,
                    count,
                    detail: &TEXT[..n],
                }
            }),
        ]
    }

    fn log_of(records: &[Record<'_>]) -> Vec<u8> {
        let mut log = MAGIC.to_vec();
        let mut buf = [0u8; 8192];
        for r in records {
            let n = r.encode(&mut buf).expect("a record fits 8 KiB");
            log.extend_from_slice(&buf[..n]);
        }
        log
    }

    proptest! {
        #[test]
        fn records_round_trip(records in proptest::collection::vec(record(), 0..40)) {
            let log = log_of(&records);
            let mut reader = Reader::new(&log);
            let back: Vec<Record<'_>> = reader.by_ref().collect();
            prop_assert_eq!(back, records);
            prop_assert_eq!(reader.damage(), None);
        }

        /// A log cut anywhere yields exactly the records before the cut, then damage at
        /// the cut record's start.
        #[test]
        fn a_cut_log_is_read_up_to_the_damage(
            records in proptest::collection::vec(record(), 1..20),
            cut in any::<proptest::sample::Index>(),
        ) {
            let log = log_of(&records);
            let cut = MAGIC.len() + cut.index(log.len() - MAGIC.len());
            let mut reader = Reader::new(&log[..cut]);
            let back: Vec<Record<'_>> = reader.by_ref().collect();
            prop_assert!(back.len() <= records.len());
            prop_assert_eq!(&back[..], &records[..back.len()]);
            let whole = log_of(&back).len();
            if whole == cut {
                prop_assert_eq!(reader.damage(), None);
            } else {
                let damage = reader.damage().expect("a cut inside a record is damage");
                prop_assert_eq!(damage.offset, whole as u64);
            }
        }

        /// Arbitrary bytes after the header never panic and stop at damage or the end.
        #[test]
        fn garbage_is_damage_not_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..2000)) {
            let mut log = MAGIC.to_vec();
            log.extend_from_slice(&bytes);
            let mut reader = Reader::new(&log);
            let n = reader.by_ref().count();
            prop_assert!(n <= bytes.len() / 3);
            if let Some(d) = reader.damage() {
                prop_assert!(d.offset as usize <= log.len());
            }
        }
    }

    proptest! {
        #[test]
        fn frames_round_trip(
            frames in proptest::collection::vec(any::<(u64, u32, u32, u8, u8)>(), 0..MAX_FRAMES)
        ) {
            let frames: Vec<Frame> = frames
                .into_iter()
                .map(|(start, length, stream, kind, flags)| Frame { start, length, stream, kind, flags })
                .collect();
            let mut bytes = Vec::new();
            for f in &frames {
                let mut one = [0u8; Frame::LEN];
                f.write(&mut one);
                bytes.extend_from_slice(&one);
            }
            prop_assert_eq!(Frame::read_all(&bytes).collect::<Vec<_>>(), frames);
        }
    }

    #[test]
    fn a_stream_ends_with_end_stream_on_data_or_headers_or_a_reset() {
        let f = |kind, flags| Frame {
            kind,
            flags,
            ..Frame::default()
        };
        assert!(f(Frame::DATA, Frame::END_STREAM).ends_stream());
        assert!(f(Frame::HEADERS, Frame::END_STREAM | 0x4).ends_stream());
        assert!(f(Frame::RST_STREAM, 0).ends_stream());
        assert!(!f(Frame::HEADERS, 0x4).ends_stream());
        // SETTINGS' ACK is the same bit: no stream ends.
        assert!(!f(4, 0x1).ends_stream());
    }

    #[test]
    fn the_fixed_data_layout_is_the_general_one() {
        let data = |peer| Record::Data {
            at: Stamp {
                tid: 7,
                mono_ns: 1 << 40,
                wall_ns: 3,
            },
            call: Call::Recv,
            fd: 9,
            conn: 11,
            direction: Direction::Recv,
            bytes: 1234,
            errno: 104,
            offset: 1 << 33,
            peer,
            checksum: 0xdead_beef,
            peek: true,
        };
        let r = data(Endpoint::None);
        let mut fast = [0u8; 128];
        let n = r.encode(&mut fast).expect("fits");
        // The general path, through a record differing only in its peer, then patched.
        let mut general = [0u8; 128];
        let with_peer = data(Endpoint::V4([0; 4], 0));
        let m = with_peer.encode(&mut general).expect("fits");
        assert_eq!(m, n + 6);
        assert_eq!(fast[2..55], general[2..55]);
        assert_eq!(fast[56..n], general[62..m]);
        assert_eq!(
            Reader::new(&[&MAGIC[..], &fast[..n]].concat()).next(),
            Some(r)
        );
    }

    #[test]
    fn a_file_that_is_not_a_log_is_damaged_at_zero() {
        let mut reader = Reader::new(b"GET / HTTP/1.1\r\n");
        assert_eq!(reader.next(), None);
        assert_eq!(reader.damage().map(|d| d.offset), Some(0));
    }

    #[test]
    fn a_record_that_does_not_fit_is_refused() {
        let r = Record::Exec {
            at: Stamp::default(),
            path: &TEXT,
        };
        let mut small = [0u8; 40];
        assert_eq!(r.encode(&mut small), None);
        let mut big = [0u8; 400];
        assert_eq!(r.encode(&mut big), Some(2 + 1 + 20 + 2 + 300));
    }

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // The check value of CRC-32C for "123456789" (RFC 3720, appendix B.4).
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn endpoints_print_as_addresses() {
        assert_eq!(
            Endpoint::V4([127, 0, 0, 1], 8080).to_string(),
            "127.0.0.1:8080"
        );
        assert_eq!(Endpoint::V6([0; 16], 443).to_string(), "[::]:443");
        assert_eq!(Endpoint::Unix(b"\0bus").to_string(), "unix:@bus");
        assert_eq!(
            Endpoint::Unix(b"/run/x.sock").to_string(),
            "unix:/run/x.sock"
        );
    }
}
