//! The `LD_PRELOAD` library: set-up at load, what every hook shares, and the end of a
//! process's log.
//!
//! A hook calls the real function first, then (when this process captures, the
//! descriptor is a socket and no hook of this thread is already running) records what
//! happened, keeping the program's `errno`. Hooks never allocate, lock or unwind. The
//! per-thread re-entry flag lets the library's own calls, and a signal handler's, pass
//! straight through.
//!
//! What the hooks (`hooks`) record:
//! - A descriptor not known to be a non-socket is recorded; one known to be a file or a
//!   pipe costs one table load and the indirect call (`fds`).
//! - `connect` and `accept` number the connection, restart its stream offsets and record
//!   both names (`getsockname`/`getpeername`; a non-blocking connect's peer is the address
//!   it was given) and, for Unix sockets, the peer's pid (`SO_PEERCRED`). A socket first seen
//!   mid-stream (inherited, passed in, a fork's copy) is recorded as `discovered` with
//!   `mid_stream`.
//! - Data records carry the stream offset before the call (not advanced by `MSG_PEEK`), the
//!   byte count, the `errno` of a failure (`EAGAIN`, an event loop polling, is not recorded)
//!   and, for datagrams, the peer and a CRC-32C of the payload. Never the payload itself.
//! - `close` on the log's descriptor is refused (it returns 0); `dup2`/`dup3` onto it move
//!   the log first, and wait, bounded, for writes under way with the old number (a writer
//!   counts itself under the descriptor's generation before reading it, so it either sees
//!   the move or is waited for); `close_range` is split around it.
//! - `fork`, `vfork` (run as fork) and `clone` without `CLONE_VM` give the child a log of its
//!   own: the parent's buffered records are the parent's, and inherited sockets are numbered
//!   again in the child's log.
//! - The `exec` family records the exec, warns when the target is a static ELF, and writes
//!   every buffer out first. `execl`, `execlp` and `execle` take C varargs, which Rust can
//!   neither receive nor pass on (and glibc calls its own execve for them, past that hook):
//!   on x86-64 each is a naked trampoline that saves the argument registers, calls the same
//!   bookkeeping, restores them and jumps to the real function.
//! - `_exit` and `_Exit` write everything out.
//!
//! At exit, an io_uring descriptor in `/proc/self/fd` is reported: socket I/O submitted
//! through it is invisible to the library.

mod fds;
mod hooks;
mod log;
mod real;
mod signals;

use std::cell::Cell;
use std::sync::atomic::Ordering;

use libc::{c_int, msghdr, sockaddr, sockaddr_storage, socklen_t};

use crate::format::{
    sock, warning, Call, Direction, Endpoint, Frame, Origin, Record, Stamp, MAGIC, MAX_FRAMES,
};
use fds::{Conn, Fd};

thread_local! {
    /// Set while a hook of this thread records: calls made meanwhile (a signal
    /// handler's, or the library's own) pass straight through.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
}

/// Held while a hook records.
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        IN_HOOK.with(|g| g.set(false));
    }
}

/// Whether this process captures, at the cost of one load.
#[inline]
fn capturing() -> bool {
    log::LOG_FD.load(Ordering::Relaxed) >= 0
}

/// A guard, unless this process does not capture or this thread is already recording.
fn enter() -> Option<Guard> {
    if !capturing() {
        return None;
    }
    IN_HOOK.with(|g| {
        if g.get() {
            None
        } else {
            g.set(true);
            Some(Guard)
        }
    })
}

fn errno() -> c_int {
    // SAFETY: errno's location is always valid for the calling thread.
    unsafe { *libc::__errno_location() }
}

fn set_errno(e: c_int) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = e };
}

/// A socket address the kernel filled in, as an endpoint borrowing its path.
fn endpoint(addr: &sockaddr_storage, len: socklen_t) -> Endpoint<'_> {
    let len = (len as usize).min(std::mem::size_of::<sockaddr_storage>());
    match c_int::from(addr.ss_family) {
        libc::AF_INET if len >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, and it is large
            // and aligned enough for one.
            let a = unsafe { &*(addr as *const sockaddr_storage).cast::<libc::sockaddr_in>() };
            Endpoint::V4(a.sin_addr.s_addr.to_ne_bytes(), u16::from_be(a.sin_port))
        }
        libc::AF_INET6 if len >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let a = unsafe { &*(addr as *const sockaddr_storage).cast::<libc::sockaddr_in6>() };
            Endpoint::V6(a.sin6_addr.s6_addr, u16::from_be(a.sin6_port))
        }
        libc::AF_UNIX => {
            // SAFETY: as above, for sockaddr_un.
            let a = unsafe { &*(addr as *const sockaddr_storage).cast::<libc::sockaddr_un>() };
            let offset = std::mem::size_of::<libc::sa_family_t>();
            let n = len.saturating_sub(offset).min(a.sun_path.len());
            // SAFETY: sun_path holds `n` initialised bytes (the kernel's length).
            let path = unsafe { std::slice::from_raw_parts(a.sun_path.as_ptr().cast::<u8>(), n) };
            // A pathname ends at its NUL; an abstract name starts with one and is whole.
            let path = match path.split_first() {
                Some((0, _)) => path,
                _ => path.split(|b| *b == 0).next().unwrap_or_default(),
            };
            Endpoint::Unix(path)
        }
        _ => Endpoint::None,
    }
}

/// A copy of the address a caller passed in (`connect`, `sendto`, `bind`).
fn copy_addr(addr: *const sockaddr, len: socklen_t) -> (sockaddr_storage, socklen_t) {
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut storage: sockaddr_storage = unsafe { std::mem::zeroed() };
    let n = (len as usize).min(std::mem::size_of::<sockaddr_storage>());
    if !addr.is_null() && n > 0 {
        // SAFETY: the caller gave `addr` with `len` readable bytes; we copy at most the
        // storage's size, into storage we own.
        unsafe {
            std::ptr::copy_nonoverlapping(
                addr.cast::<u8>(),
                (&mut storage as *mut sockaddr_storage).cast::<u8>(),
                n,
            )
        };
    }
    (storage, n as socklen_t)
}

/// `getsockname` or `getpeername` of `fd`.
fn name_of(fd: c_int, peer: bool) -> (sockaddr_storage, socklen_t) {
    // SAFETY: all-zero bytes are a valid sockaddr_storage.
    let mut storage: sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<sockaddr_storage>() as socklen_t;
    let p = (&mut storage as *mut sockaddr_storage).cast::<sockaddr>();
    // SAFETY: `p` and `len` describe our storage; neither call is interposed.
    let ok = unsafe {
        if peer {
            libc::getpeername(fd, p, &mut len)
        } else {
            libc::getsockname(fd, p, &mut len)
        }
    } == 0;
    if !ok {
        len = 0;
        storage.ss_family = 0;
    }
    (storage, len)
}

/// A Unix socket's peer process (0 when not known).
fn peer_pid(fd: c_int, local: &Endpoint<'_>) -> u32 {
    if !matches!(local, Endpoint::Unix(_)) {
        return 0;
    }
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as socklen_t;
    // SAFETY: `cred` and `len` describe a ucred we own.
    let ok = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    } == 0;
    if ok {
        cred.pid as u32
    } else {
        0
    }
}

/// The socket's type (`SO_TYPE`), or 0.
fn socket_kind(fd: c_int) -> u16 {
    let mut kind: c_int = 0;
    let mut len = std::mem::size_of::<c_int>() as socklen_t;
    // SAFETY: `kind` and `len` describe an int we own.
    let ok = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut kind as *mut c_int).cast(),
            &mut len,
        )
    } == 0;
    if ok {
        kind as u16
    } else {
        0
    }
}

/// Whether `fd` is a socket (one `fstat`); `None` when it is not open.
fn is_socket(fd: c_int) -> Option<bool> {
    // SAFETY: all-zero bytes are a valid stat.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `st` is ours to write; fstat is not interposed.
    (unsafe { libc::fstat(fd, &mut st) } == 0)
        .then_some((st.st_mode & libc::S_IFMT) == libc::S_IFSOCK)
}

/// The table's socket for `fd`, classifying a descriptor seen for the first time.
/// `None` for a descriptor that is not a socket or cannot be tracked.
/// The flag says it was classified just now (a socket the library had not seen).
fn socket_of(fd: c_int) -> Option<(&'static Conn, bool)> {
    match fds::lookup(fd) {
        Fd::NotSocket => None,
        Fd::Untracked => {
            if fd >= 0 && is_socket(fd) == Some(true) {
                warn_once(
                    warning::TABLE_FULL,
                    b"a socket past the descriptor table is not tracked",
                );
            }
            None
        }
        Fd::Socket(conn) => Some((conn, false)),
        Fd::Unknown => {
            match is_socket(fd) {
                Some(true) => {}
                Some(false) => {
                    fds::mark_not_socket(fd);
                    return None;
                }
                // Not open (EBADF): nothing to remember about the number.
                None => return None,
            }
            match fds::new_socket(fd, socket_kind(fd)) {
                Some(conn) => Some((conn, true)),
                None => {
                    warn_once(warning::TABLE_FULL, b"socket table full");
                    None
                }
            }
        }
    }
}

/// Records that `conn` (on `fd`) is connected, giving it its log number.
/// Offsets restart at zero unless the socket is `mid_stream` (seen after bytes moved).
/// `peer` is the address `connect` was given (a non-blocking connect has no peer name yet).
fn record_connection(
    at: Stamp,
    call: Call,
    fd: c_int,
    conn: &Conn,
    errno: u16,
    mid_stream: bool,
    peer: Option<Endpoint<'_>>,
) -> u64 {
    let id = fds::number(conn, !mid_stream);
    let (local, local_len) = name_of(fd, false);
    let (peer_name, peer_len) = name_of(fd, true);
    let local = endpoint(&local, local_len);
    let peer = match endpoint(&peer_name, peer_len) {
        Endpoint::None => peer.unwrap_or_default(),
        named => named,
    };
    let kind = conn.kind.load(Ordering::Relaxed);
    log::emit(
        &Record::Connection {
            at,
            call,
            fd,
            conn: id,
            kind,
            local,
            peer,
            peer_pid: peer_pid(fd, &local),
            errno,
            mid_stream,
        },
        at.mono_ns,
    );
    id
}

/// Where a datagram call's peer address is. Read only after the call succeeded (a
/// pointer the kernel refused must not be followed), and only for datagram sockets.
#[derive(Clone, Copy)]
enum PeerArg {
    None,
    /// An address the program passed in (`sendto`).
    Given(*const sockaddr, socklen_t),
    /// An address the kernel wrote back (`recvfrom`): the buffer, the capacity the program
    /// gave before the call, and where the kernel wrote the address's length.
    Returned(*const sockaddr, socklen_t, *const socklen_t),
    /// A message header's name (`sendmsg`, `recvmsg`), at most `capacity` bytes of it.
    Msg(*const msghdr, socklen_t),
}

impl PeerArg {
    /// The address, copied.
    ///
    /// # Safety
    /// The call these pointers were passed to succeeded.
    unsafe fn read(self) -> (sockaddr_storage, socklen_t) {
        match self {
            PeerArg::None => copy_addr(std::ptr::null(), 0),
            PeerArg::Given(addr, len) => copy_addr(addr, len),
            PeerArg::Returned(addr, capacity, len) if !len.is_null() => {
                // SAFETY: the call succeeded, so it wrote the length here.
                let written = unsafe { *len };
                copy_addr(addr, written.min(capacity))
            }
            PeerArg::Returned(..) => copy_addr(std::ptr::null(), 0),
            PeerArg::Msg(msg, capacity) if !msg.is_null() => {
                // SAFETY: the call succeeded with this header, so it is readable.
                let m = unsafe { &*msg };
                copy_addr(m.msg_name.cast(), m.msg_namelen.min(capacity))
            }
            PeerArg::Msg(..) => copy_addr(std::ptr::null(), 0),
        }
    }
}

/// What a data call moved through, for a datagram's checksum. Read only after the call
/// succeeded, and at most the bytes it moved.
#[derive(Clone, Copy)]
enum Payload {
    None,
    /// A buffer and its capacity (a truncated datagram's length can exceed it).
    Bytes(*const u8, usize),
    /// `n` vectors.
    Iov(*const libc::iovec, usize),
    /// A message header's vectors.
    Msg(*const msghdr),
}

/// At most this many vectors are read (the kernel's `UIO_MAXIOV`).
const MAX_IOV: usize = 1024;

/// Hands the first `moved` bytes of a payload to `f`, a piece at a time, in order; false
/// when some of them could not be read (no buffer, a null one, too many vectors).
///
/// # Safety
/// The call the payload's pointers were passed to succeeded and moved `moved` bytes.
unsafe fn each_piece(payload: Payload, moved: usize, f: &mut dyn FnMut(&[u8])) -> bool {
    let (iov, n) = match payload {
        Payload::None => return false,
        Payload::Bytes(p, capacity) => {
            if p.is_null() {
                return false;
            }
            // SAFETY: the call moved bytes through this buffer of `capacity` bytes.
            f(unsafe { std::slice::from_raw_parts(p, moved.min(capacity)) });
            return moved <= capacity;
        }
        Payload::Iov(iov, n) => (iov, n),
        Payload::Msg(msg) if !msg.is_null() => {
            // SAFETY: the call succeeded with this header.
            let m = unsafe { &*msg };
            (m.msg_iov.cast_const(), m.msg_iovlen)
        }
        Payload::Msg(_) => return false,
    };
    if iov.is_null() {
        return false;
    }
    let mut left = moved;
    for i in 0..n.min(MAX_IOV) {
        if left == 0 {
            break;
        }
        // SAFETY: the call succeeded with `n` vectors here, and `i < n`.
        let v = unsafe { &*iov.add(i) };
        let take = v.iov_len.min(left);
        if v.iov_base.is_null() {
            return false;
        }
        // SAFETY: the call moved bytes through these vectors in order, so the first
        // `take` bytes of this one were written or read by it.
        f(unsafe { std::slice::from_raw_parts(v.iov_base.cast::<u8>(), take) });
        left -= take;
    }
    left == 0
}

/// The CRC-32C of the first `moved` bytes of a payload.
///
/// # Safety
/// The call the payload's pointers were passed to succeeded and moved `moved` bytes.
unsafe fn checksum(payload: Payload, moved: usize) -> u32 {
    let mut state = !0u32;
    // SAFETY: the caller's promise, passed on.
    unsafe {
        each_piece(payload, moved, &mut |bytes| {
            state = crate::format::crc32c_update(state, bytes);
        })
    };
    state ^ !0
}

/// Records the HTTP/2 frames a stream's call moved, when its direction is framed
/// (`crate::h2`): after the call's data record, with its stamp and offset.
///
/// # Safety
/// The call the payload's pointers were passed to succeeded and moved `moved` bytes.
unsafe fn record_frames(
    framing: &crate::h2::Framing,
    payload: Payload,
    moved: usize,
    (at, conn, direction, offset): (Stamp, u64, Direction, u64),
) {
    let mut buf = [0u8; MAX_FRAMES * Frame::LEN];
    let mut n = 0;
    let emit = |frames: &[u8]| {
        log::emit(
            &Record::Frames {
                at,
                conn,
                direction,
                offset,
                frames,
            },
            at.mono_ns,
        )
    };
    let mut whole = true;
    framing.walk(
        offset,
        |each| {
            // SAFETY: the caller's promise, passed on.
            whole = unsafe { each_piece(payload, moved, each) };
        },
        &mut |frame| {
            let mut one = [0u8; Frame::LEN];
            frame.write(&mut one);
            buf[n * Frame::LEN..(n + 1) * Frame::LEN].copy_from_slice(&one);
            n += 1;
            if n == MAX_FRAMES {
                emit(&buf);
                n = 0;
            }
        },
    );
    if n > 0 {
        emit(&buf[..n * Frame::LEN]);
    }
    if !whole {
        // Bytes went by unread: where the next frame starts is not known.
        framing.lose();
    }
}

/// One data call on `fd` returned `ret`: records it when `fd` is a socket. A file, a
/// pipe or a terminal costs one table load here.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn data(
    call: Call,
    fd: c_int,
    direction: Direction,
    ret: isize,
    flags: c_int,
    peer: PeerArg,
    payload: Payload,
    started: Option<Stamp>,
) {
    if !matches!(fds::lookup(fd), Fd::NotSocket) {
        data_on_socket(call, fd, direction, ret, flags, peer, payload, started);
    }
}

/// When a send to a known socket starts: its record's time (the receiver may finish
/// reading before the sender's call returns). `None` for anything else.
#[inline(always)]
fn started(fd: c_int) -> Option<Stamp> {
    (capturing() && matches!(fds::lookup(fd), Fd::Socket(_))).then(log::stamp)
}

#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn data_on_socket(
    call: Call,
    fd: c_int,
    direction: Direction,
    ret: isize,
    flags: c_int,
    peer: PeerArg,
    payload: Payload,
    started: Option<Stamp>,
) {
    let saved = errno();
    if ret < 0 && (saved == libc::EAGAIN || saved == libc::EWOULDBLOCK) {
        // A non-blocking socket with nothing to move: an event loop's polling, not data.
        return;
    }
    let Some(_guard) = enter() else { return };
    let Some((conn, classified)) = socket_of(fd) else {
        set_errno(saved);
        return;
    };
    let at = started.unwrap_or_else(log::stamp);
    let kind = conn.kind.load(Ordering::Relaxed);
    let mut id = conn.id.load(Ordering::Relaxed);
    if id == 0 {
        // A stream socket found in use (inherited across exec, passed in, made by a call
        // the library does not see) may have moved bytes before: its offsets are not
        // stream positions. One the library made or a fork inherited counts from its start.
        id = record_connection(
            at,
            Call::Discovered,
            fd,
            conn,
            0,
            classified && kind == sock::STREAM,
            None,
        );
    }
    let bytes = ret.max(0) as u64;
    // Neither a peek nor the error queue consumes stream bytes.
    let peek = flags & (libc::MSG_PEEK | libc::MSG_ERRQUEUE) != 0;
    let counter = match direction {
        Direction::Send => &conn.sent,
        Direction::Recv => &conn.received,
    };
    let offset = if peek {
        counter.load(Ordering::Relaxed)
    } else {
        counter.fetch_add(bytes, Ordering::Relaxed)
    };
    let datagram = kind != sock::STREAM;
    // A stream's records carry no peer (its connection record names it), and its path
    // does not even clear an address buffer.
    let peer_storage;
    let peer = if datagram && ret >= 0 {
        // SAFETY: the call succeeded.
        peer_storage = unsafe { peer.read() };
        endpoint(&peer_storage.0, peer_storage.1)
    } else {
        Endpoint::None
    };
    let checksum = if datagram && bytes > 0 {
        // SAFETY: the call succeeded and moved `bytes` bytes.
        unsafe { checksum(payload, bytes as usize) }
    } else {
        0
    };
    log::emit(
        &Record::Data {
            at,
            call,
            fd,
            conn: id,
            direction,
            bytes,
            errno: if ret < 0 { saved as u16 } else { 0 },
            offset,
            peer,
            checksum,
            peek,
        },
        at.mono_ns,
    );
    let framing = &conn.h2[usize::from(direction == Direction::Recv)];
    if !datagram && bytes > 0 && !peek && !framing.off() {
        // SAFETY: the call succeeded and moved `bytes` bytes.
        unsafe {
            record_frames(
                framing,
                payload,
                bytes as usize,
                (at, id, direction, offset),
            )
        };
    }
    set_errno(saved);
}

/// Records a warning once per process.
fn warn_once(code: u16, detail: &[u8]) {
    static WARNED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let bit = 1u32 << (code % 32);
    if WARNED.fetch_or(bit, Ordering::Relaxed) & bit == 0 {
        let at = log::stamp();
        log::emit(
            &Record::Warning {
                at,
                code,
                count: 1,
                detail,
            },
            at.mono_ns,
        );
    }
}

/// Reads a small file whole into `buf` (system calls only); the bytes read.
fn read_small(path: &[u8], buf: &mut [u8]) -> usize {
    let mut cpath = [0u8; 256];
    let Some(dst) = cpath.get_mut(..path.len()) else {
        return 0;
    };
    dst.copy_from_slice(path);
    // SAFETY: `cpath` is NUL-terminated (zeroed past the copy).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            cpath.as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    } as c_int;
    if fd < 0 {
        return 0;
    }
    let mut n = 0;
    while n < buf.len() {
        // SAFETY: the rest of `buf` is writable for its length.
        let r =
            unsafe { libc::syscall(libc::SYS_read, fd, buf.as_mut_ptr().add(n), buf.len() - n) };
        if r <= 0 {
            break;
        }
        n += r as usize;
    }
    // SAFETY: closing the descriptor we opened.
    unsafe { libc::syscall(libc::SYS_close, fd) };
    n
}

/// A small formatter into a stack buffer.
struct Text<const N: usize> {
    buf: [u8; N],
    len: usize,
    /// Something did not fit.
    cut: bool,
}

impl<const N: usize> Text<N> {
    fn new() -> Self {
        Text {
            buf: [0; N],
            len: 0,
            cut: false,
        }
    }
    fn push(&mut self, bytes: &[u8]) -> &mut Self {
        let n = bytes.len().min(N.saturating_sub(self.len + 1));
        self.cut |= n < bytes.len();
        self.buf[self.len..self.len + n].copy_from_slice(&bytes[..n]);
        self.len += n;
        self
    }
    fn number(&mut self, mut v: u64) -> &mut Self {
        let mut digits = [0u8; 20];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.push(&digits[i..])
    }
}

/// Opens this process's log in the capture directory and writes its header.
fn open_log(origin: Origin) {
    let dir = DIR.get();
    if dir.is_empty() {
        return;
    }
    // SAFETY: all-zero bytes are a valid utsname.
    let mut uts: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `uts` is ours to fill.
    unsafe { libc::uname(&mut uts) };
    // SAFETY: the kernel NUL-terminates nodename.
    let host = unsafe { std::ffi::CStr::from_ptr(uts.nodename.as_ptr()) }.to_bytes();
    // SAFETY: getpid and getppid cannot fail.
    let (pid, ppid) = unsafe { (libc::getpid() as u32, libc::getppid() as u32) };
    let at = log::stamp();
    let mut path = Text::<4096>::new();
    path.push(dir)
        .push(b"/")
        .push(host)
        .push(b"-")
        .number(u64::from(pid))
        .push(b"-")
        .number(at.mono_ns)
        .push(crate::format::LOG_SUFFIX.as_bytes());
    if path.cut {
        return;
    }
    // SAFETY: `path` is NUL-terminated (its buffer is zeroed past its length).
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            path.buf.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_APPEND | libc::O_CLOEXEC,
            0o644,
        )
    } as c_int;
    if fd < 0 {
        return;
    }
    // Out of the way of programs that expect their low descriptors (and `dup2` onto them).
    // SAFETY: fcntl on our own descriptor.
    let high = unsafe { libc::syscall(libc::SYS_fcntl, fd, libc::F_DUPFD_CLOEXEC, 1000) } as c_int;
    let fd = if high >= 0 {
        // SAFETY: closing our own low copy.
        unsafe { libc::syscall(libc::SYS_close, fd) };
        high
    } else {
        fd
    };
    let mut exe = [0u8; 1024];
    // SAFETY: `exe` is writable for its length; readlink does not NUL-terminate, so the
    // length it returns is used.
    let n = unsafe {
        libc::readlink(
            c"/proc/self/exe".as_ptr(),
            exe.as_mut_ptr().cast(),
            exe.len(),
        )
    };
    let exe = exe.get(..n.max(0) as usize).unwrap_or_default();
    let mut args = [0u8; 1024];
    let n = read_small(b"/proc/self/cmdline", &mut args);
    let args = args.get(..n).unwrap_or_default();
    let args = args.strip_suffix(b"\0").unwrap_or(args);
    let mut header = [0u8; 8 + 3 * 1024 + 4096];
    header[..MAGIC.len()].copy_from_slice(MAGIC);
    let record = Record::Process {
        pid,
        ppid,
        origin,
        at,
        host,
        exe,
        args,
    };
    if let Some(n) = record.encode(&mut header[MAGIC.len()..]) {
        log::write_all(fd, &header[..MAGIC.len() + n]);
    }
    LOG_PID.store(pid, Ordering::Relaxed);
    log::LOG_FD.store(fd, Ordering::Release);
}

/// The process the open log belongs to.
static LOG_PID: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The capture directory, read from the environment once, at load.
struct CaptureDir {
    path: std::cell::UnsafeCell<[u8; 4096]>,
    len: std::sync::atomic::AtomicUsize,
}

// SAFETY: `path` is written only by `set`, at load, before the program's threads exist;
// afterwards it is only read.
unsafe impl Sync for CaptureDir {}

static DIR: CaptureDir = CaptureDir {
    path: std::cell::UnsafeCell::new([0; 4096]),
    len: std::sync::atomic::AtomicUsize::new(0),
};

impl CaptureDir {
    /// Takes the directory from the environment (at load only).
    fn set(&self) {
        // SAFETY: getenv with a NUL-terminated name, at load.
        let dir = unsafe { libc::getenv(c"CAUSEWAY_CAPTURE_DIR".as_ptr()) };
        if dir.is_null() {
            return;
        }
        // SAFETY: getenv returned a NUL-terminated string.
        let dir = unsafe { std::ffi::CStr::from_ptr(dir) }.to_bytes();
        // SAFETY: at load nothing else reads or writes `path` (see the Sync impl).
        let path = unsafe { &mut *self.path.get() };
        if let Some(dst) = path.get_mut(..dir.len()) {
            dst.copy_from_slice(dir);
            self.len.store(dir.len(), Ordering::Release);
        }
    }

    fn get(&self) -> &[u8] {
        let len = self.len.load(Ordering::Acquire);
        // SAFETY: `path` is no longer written once `len` is set (see the Sync impl).
        unsafe { &(&*self.path.get())[..len] }
    }
}

/// Runs when the library is loaded (program start, and each exec of a captured program).
extern "C" fn init() {
    real::resolve_all();
    real::resolve_rest();
    DIR.set();
    log::init_key();
    open_log(Origin::Start);
    if capturing() {
        signals::install();
        // Forks the hooks do not see (glibc's own: `daemon`, `_Fork` callers) still give
        // the child a log of its own.
        // SAFETY: registering handlers that take no lock and allocate nothing.
        unsafe { libc::pthread_atfork(Some(fork_prepare), None, Some(fork_child)) };
    }
}

/// Runs at `exit` (not at `_exit`, which its hook handles, nor at a kill).
extern "C" fn fini() {
    finish();
}

/// The end of a process's log: what it could not see, then every buffer written out.
fn finish() {
    let Some(_guard) = enter() else { return };
    if io_uring_in_use() {
        warn_once(
            warning::IO_URING,
            b"io_uring in use: socket I/O submitted through it is not captured",
        );
    }
    let dropped = log::DROPPED.swap(0, Ordering::Relaxed);
    if dropped > 0 {
        let at = log::stamp();
        log::emit(
            &Record::Warning {
                at,
                code: warning::DROPPED,
                count: dropped,
                detail: b"records dropped",
            },
            at.mono_ns,
        );
    }
    log::flush_all();
}

/// Whether any descriptor of this process is an io_uring instance.
fn io_uring_in_use() -> bool {
    // SAFETY: opening a directory by a NUL-terminated literal path.
    let dir = unsafe {
        libc::syscall(
            libc::SYS_openat,
            libc::AT_FDCWD,
            c"/proc/self/fd".as_ptr(),
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    } as c_int;
    if dir < 0 {
        return false;
    }
    let mut found = false;
    let mut entries = [0u8; 4096];
    'read: loop {
        // SAFETY: `entries` is writable for its length.
        let n = unsafe {
            libc::syscall(
                libc::SYS_getdents64,
                dir,
                entries.as_mut_ptr(),
                entries.len(),
            )
        };
        if n <= 0 {
            break;
        }
        let mut at = 0usize;
        while at + 19 < n as usize {
            // linux_dirent64: inode (8), offset (8), record length (2), type (1), name.
            let reclen = usize::from(u16::from_ne_bytes([entries[at + 16], entries[at + 17]]));
            if reclen < 20 {
                break;
            }
            let name = entries
                .get(at + 19..(at + reclen).min(n as usize))
                .unwrap_or_default();
            let name = name.split(|b| *b == 0).next().unwrap_or_default();
            let mut target = [0u8; 64];
            let mut cname = [0u8; 32];
            if let Some(dst) = cname.get_mut(..name.len()) {
                dst.copy_from_slice(name);
                // SAFETY: `cname` is NUL-terminated; `target` is writable for its length.
                let len = unsafe {
                    libc::readlinkat(
                        dir,
                        cname.as_ptr().cast(),
                        target.as_mut_ptr().cast(),
                        target.len(),
                    )
                };
                if len > 0 && target[..len as usize].starts_with(b"anon_inode:[io_uring]") {
                    found = true;
                    break 'read;
                }
            }
            at += reclen;
        }
    }
    // SAFETY: closing the directory we opened.
    unsafe { libc::syscall(libc::SYS_close, dir) };
    found
}

/// In a new child (fork, vfork, or clone without a shared address space): a log of its own.
extern "C" fn fork_prepare() {
    log::flush_mine();
}

extern "C" fn fork_child() {
    after_fork_child();
}

/// Runs in each new process: from the atfork handler (fork, vfork, glibc's own forks) or
/// the clone trampoline; a second call in one process does nothing.
fn after_fork_child() {
    // SAFETY: getpid cannot fail.
    if unsafe { libc::getpid() } as u32 == LOG_PID.load(Ordering::Relaxed) {
        return;
    }
    let old = log::LOG_FD.swap(-1, Ordering::AcqRel);
    if old < 0 {
        return;
    }
    log::reset_after_fork();
    // Inherited sockets are numbered again in the child's own log when next used.
    fds::forget_numbers();
    // SAFETY: the child's copy of the parent's log descriptor is ours to close.
    unsafe { libc::syscall(libc::SYS_close, old) };
    open_log(Origin::Fork);
}

// The loader runs these at load and at exit.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

#[used]
#[link_section = ".fini_array"]
static FINI: extern "C" fn() = fini;
