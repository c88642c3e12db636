//! The interposed libc functions. Each calls the real one, then records what it did.

use std::sync::atomic::Ordering;

use libc::{
    c_char, c_int, c_uint, c_void, iovec, mmsghdr, msghdr, off_t, pid_t, size_t, sockaddr,
    socklen_t, ssize_t,
};

use super::fds::{self, Fd};
use super::{
    capturing, copy_addr, data, endpoint, enter, errno, log, name_of, real, record_connection,
    set_errno, socket_kind, socket_of, started, Payload, PeerArg,
};
use crate::format::{warning, Call, Direction, Endpoint, Record, Stamp};

// ---- sockets made, named, connected ----------------------------------------------

/// A socket was made: it is tracked from now on.
fn made(call: Call, fd: c_int, domain: c_int, kind: c_int) {
    let Some(_guard) = enter() else { return };
    let saved = errno();
    let kind = (kind & 0xf) as u16;
    if fds::new_socket(fd, kind).is_none() {
        super::warn_once(warning::TABLE_FULL, b"socket table full");
    }
    let at = log::stamp();
    log::emit(
        &Record::Socket {
            at,
            call,
            fd,
            domain: domain as u16,
            kind,
            errno: 0,
        },
        at.mono_ns,
    );
    set_errno(saved);
}

#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, kind: c_int, protocol: c_int) -> c_int {
    // SAFETY: the program's call, passed on.
    let fd = unsafe { real::socket(domain, kind, protocol) };
    if fd >= 0 && capturing() {
        made(Call::Socket, fd, domain, kind);
    }
    fd
}

#[no_mangle]
pub unsafe extern "C" fn socketpair(
    domain: c_int,
    kind: c_int,
    protocol: c_int,
    sv: *mut c_int,
) -> c_int {
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::socketpair(domain, kind, protocol, sv) };
    if ret == 0 && capturing() && !sv.is_null() {
        // SAFETY: on success the kernel wrote two descriptors to `sv`.
        let (a, b) = unsafe { (*sv, *sv.add(1)) };
        made(Call::Socketpair, a, domain, kind);
        made(Call::Socketpair, b, domain, kind);
    }
    ret
}

/// `connect` returned `ret` for `fd`, with `peer` the address it was given.
fn connected(fd: c_int, ret: c_int, peer: Endpoint<'_>) {
    let saved = errno();
    if ret < 0 && saved != libc::EINPROGRESS {
        return;
    }
    let Some(_guard) = enter() else { return };
    if let Some((conn, _)) = socket_of(fd) {
        let at = log::stamp();
        let errno = if ret < 0 { saved as u16 } else { 0 };
        record_connection(at, Call::Connect, fd, conn, errno, false, Some(peer));
    }
    set_errno(saved);
}

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::connect(fd, addr, len) };
    // Only when the kernel accepted the address, so it is readable.
    if capturing() && (ret == 0 || errno() == libc::EINPROGRESS) {
        let (peer, peer_len) = copy_addr(addr, len);
        connected(fd, ret, endpoint(&peer, peer_len));
    }
    ret
}

/// `accept` returned the connection `fd`.
fn accepted(call: Call, listener: c_int, fd: c_int) {
    let Some(_guard) = enter() else { return };
    let saved = errno();
    let kind = match fds::lookup(listener) {
        Fd::Socket(conn) => conn.kind.load(Ordering::Relaxed),
        _ => socket_kind(fd),
    };
    if let Some(conn) = fds::new_socket(fd, kind) {
        let at = log::stamp();
        record_connection(at, call, fd, conn, 0, false, None);
    }
    set_errno(saved);
}

#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: the program's call, passed on.
    let new = unsafe { real::accept(fd, addr, len) };
    if new >= 0 && capturing() {
        accepted(Call::Accept, fd, new);
    }
    new
}

#[no_mangle]
pub unsafe extern "C" fn accept4(
    fd: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    flags: c_int,
) -> c_int {
    // SAFETY: the program's call, passed on.
    let new = unsafe { real::accept4(fd, addr, len, flags) };
    if new >= 0 && capturing() {
        accepted(Call::Accept4, fd, new);
    }
    new
}

/// `bind` or `listen` returned: the local address the kernel gave.
fn named(call: Call, fd: c_int, ret: c_int) {
    let Some(_guard) = enter() else { return };
    let saved = errno();
    if socket_of(fd).is_some() {
        let (local, local_len) = name_of(fd, false);
        let at = log::stamp();
        log::emit(
            &Record::Bind {
                at,
                call,
                fd,
                local: endpoint(&local, local_len),
                errno: if ret < 0 { saved as u16 } else { 0 },
            },
            at.mono_ns,
        );
    }
    set_errno(saved);
}

#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::bind(fd, addr, len) };
    if capturing() {
        named(Call::Bind, fd, ret);
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::listen(fd, backlog) };
    if capturing() {
        named(Call::Listen, fd, ret);
    }
    ret
}

// ---- data ------------------------------------------------------------------------
//
// The hooks pass where the peer address and the payload are; they are read only after
// the call succeeded (see `PeerArg` and `Payload`). A capacity the kernel overwrites
// (`recvfrom`'s length, `recvmsg`'s `msg_namelen`) is read before the call, as the
// kernel itself does.

#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    let started = started(fd);
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::send(fd, buf, n, flags) };
    if capturing() {
        data(
            Call::Send,
            fd,
            Direction::Send,
            ret,
            flags,
            PeerArg::None,
            Payload::Bytes(buf.cast(), n),
            started,
        );
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    let started = started(fd);
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::sendto(fd, buf, n, flags, addr, len) };
    if capturing() {
        data(
            Call::Sendto,
            fd,
            Direction::Send,
            ret,
            flags,
            PeerArg::Given(addr, len),
            Payload::Bytes(buf.cast(), n),
            started,
        );
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t {
    let started = started(fd);
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::sendmsg(fd, msg, flags) };
    if capturing() {
        data(
            Call::Sendmsg,
            fd,
            Direction::Send,
            ret,
            flags,
            PeerArg::Msg(msg, socklen_t::MAX),
            Payload::Msg(msg),
            started,
        );
    }
    ret
}

/// Name capacities of a batch's first headers, read before a receiving call.
const BATCH_NAMES: usize = 64;

/// A batch call moved `done` messages: one record each. `capacities` holds the name
/// capacities of the first headers (receives; `None` for sends, whose names are given).
///
/// # Safety
/// `msgs` is the array the call was given.
#[allow(clippy::too_many_arguments)]
unsafe fn batch(
    call: Call,
    fd: c_int,
    direction: Direction,
    msgs: *mut mmsghdr,
    done: c_int,
    flags: c_int,
    capacities: Option<&[socklen_t; BATCH_NAMES]>,
    started: Option<Stamp>,
) {
    if done <= 0 || msgs.is_null() {
        data(
            call,
            fd,
            direction,
            done as isize,
            flags,
            PeerArg::None,
            Payload::None,
            started,
        );
        return;
    }
    for i in 0..done as usize {
        // SAFETY: the call succeeded and filled (or sent) the first `done` headers.
        let m = unsafe { msgs.add(i) };
        // SAFETY: as above: this header is readable.
        let (hdr, moved) = unsafe { (&raw const (*m).msg_hdr, (*m).msg_len) };
        let peer = match capacities {
            None => PeerArg::Msg(hdr, socklen_t::MAX),
            Some(c) => c
                .get(i)
                .map_or(PeerArg::None, |cap| PeerArg::Msg(hdr, *cap)),
        };
        data(
            call,
            fd,
            direction,
            moved as isize,
            flags,
            peer,
            Payload::Msg(hdr),
            started,
        );
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendmmsg(fd: c_int, msgs: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int {
    let started = started(fd);
    // SAFETY: the program's call, passed on.
    let done = unsafe { real::sendmmsg(fd, msgs, n, flags) };
    if capturing() {
        // SAFETY: the array the call was given.
        unsafe {
            batch(
                Call::Sendmmsg,
                fd,
                Direction::Send,
                msgs,
                done,
                flags,
                None,
                started,
            )
        };
    }
    done
}

#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::recv(fd, buf, n, flags) };
    if capturing() {
        data(
            Call::Recv,
            fd,
            Direction::Recv,
            ret,
            flags,
            PeerArg::None,
            Payload::Bytes(buf.cast(), n),
            None,
        );
    }
    ret
}

/// What `recvfrom`'s address capacity is before the call (0 when it asks for none).
///
/// # Safety
/// `len`, when not null, points at the program's capacity, as the call requires.
unsafe fn capacity(addr: *mut sockaddr, len: *const socklen_t) -> socklen_t {
    if addr.is_null() || len.is_null() {
        0
    } else {
        // SAFETY: per the contract above.
        unsafe { *len }
    }
}

#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    // SAFETY: the program's arguments, as recvfrom reads them.
    let cap = if capturing() {
        unsafe { capacity(addr, len) }
    } else {
        0
    };
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::recvfrom(fd, buf, n, flags, addr, len) };
    if capturing() {
        let peer = PeerArg::Returned(addr.cast_const(), cap, len.cast_const());
        data(
            Call::Recvfrom,
            fd,
            Direction::Recv,
            ret,
            flags,
            peer,
            Payload::Bytes(buf.cast(), n),
            None,
        );
    }
    ret
}

/// `msg_namelen` before a receiving call (0 without a header or a name).
///
/// # Safety
/// `msg`, when not null, is the program's header, as recvmsg requires.
unsafe fn name_capacity(msg: *const msghdr) -> socklen_t {
    if msg.is_null() {
        return 0;
    }
    // SAFETY: per the contract above.
    let m = unsafe { &*msg };
    if m.msg_name.is_null() {
        0
    } else {
        m.msg_namelen
    }
}

#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t {
    // SAFETY: the program's header, as recvmsg reads it.
    let cap = if capturing() {
        unsafe { name_capacity(msg) }
    } else {
        0
    };
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::recvmsg(fd, msg, flags) };
    if capturing() {
        data(
            Call::Recvmsg,
            fd,
            Direction::Recv,
            ret,
            flags,
            PeerArg::Msg(msg, cap),
            Payload::Msg(msg),
            None,
        );
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    msgs: *mut mmsghdr,
    n: c_uint,
    flags: c_int,
    timeout: *mut libc::timespec,
) -> c_int {
    let mut caps = [0 as socklen_t; BATCH_NAMES];
    if capturing() && !msgs.is_null() {
        for (i, cap) in caps.iter_mut().enumerate().take(n as usize) {
            // SAFETY: the program's array of `n` headers, as recvmmsg reads it.
            *cap = unsafe { name_capacity(&raw const (*msgs.add(i)).msg_hdr) };
        }
    }
    // SAFETY: the program's call, passed on.
    let done = unsafe { real::recvmmsg(fd, msgs, n, flags, timeout) };
    if capturing() {
        // SAFETY: the array the call was given.
        unsafe {
            batch(
                Call::Recvmmsg,
                fd,
                Direction::Recv,
                msgs,
                done,
                flags,
                Some(&caps),
                None,
            )
        };
    }
    done
}

/// Declares a hook for a plain buffer call: `fd`, a buffer of `n` bytes, and more
/// arguments passed through unchanged.
macro_rules! buffer_hook {
    ($name:ident, $real:ident, $call:expr, $direction:expr, $buf_ty:ty, ($($arg:ident: $ty:ty),*)) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(fd: c_int, buf: $buf_ty, n: size_t $(, $arg: $ty)*) -> ssize_t {
            let started = if matches!($direction, Direction::Send) { started(fd) } else { None };
            // SAFETY: the program's call, passed on.
            let ret = unsafe { real::$real(fd, buf, n $(, $arg)*) };
            if capturing() {
                data($call, fd, $direction, ret, 0, PeerArg::None, Payload::Bytes(buf as *const u8, n), started);
            }
            ret
        }
    };
}

buffer_hook!(read, read, Call::Read, Direction::Recv, *mut c_void, ());
buffer_hook!(
    write,
    write,
    Call::Write,
    Direction::Send,
    *const c_void,
    ()
);
buffer_hook!(pread, pread, Call::Pread, Direction::Recv, *mut c_void, (off: off_t));
buffer_hook!(pwrite, pwrite, Call::Pwrite, Direction::Send, *const c_void, (off: off_t));
buffer_hook!(pread64, pread64, Call::Pread, Direction::Recv, *mut c_void, (off: off_t));
buffer_hook!(pwrite64, pwrite64, Call::Pwrite, Direction::Send, *const c_void, (off: off_t));
buffer_hook!(__read_chk, read_chk, Call::Read, Direction::Recv, *mut c_void, (buflen: size_t));
buffer_hook!(__pread_chk, pread_chk, Call::Pread, Direction::Recv, *mut c_void, (off: off_t, buflen: size_t));
buffer_hook!(__pread64_chk, pread64_chk, Call::Pread, Direction::Recv, *mut c_void, (off: off_t, buflen: size_t));

#[no_mangle]
pub unsafe extern "C" fn __recv_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
) -> ssize_t {
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::recv_chk(fd, buf, n, buflen, flags) };
    if capturing() {
        data(
            Call::Recv,
            fd,
            Direction::Recv,
            ret,
            flags,
            PeerArg::None,
            Payload::Bytes(buf.cast(), n),
            None,
        );
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    buflen: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    // SAFETY: the program's arguments, as recvfrom reads them.
    let cap = if capturing() {
        unsafe { capacity(addr, len) }
    } else {
        0
    };
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::recvfrom_chk(fd, buf, n, buflen, flags, addr, len) };
    if capturing() {
        let peer = PeerArg::Returned(addr.cast_const(), cap, len.cast_const());
        data(
            Call::Recvfrom,
            fd,
            Direction::Recv,
            ret,
            flags,
            peer,
            Payload::Bytes(buf.cast(), n),
            None,
        );
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::readv(fd, iov, n) };
    if capturing() {
        data(
            Call::Readv,
            fd,
            Direction::Recv,
            ret,
            0,
            PeerArg::None,
            Payload::Iov(iov, n.max(0) as usize),
            None,
        );
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t {
    let started = started(fd);
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::writev(fd, iov, n) };
    if capturing() {
        data(
            Call::Writev,
            fd,
            Direction::Send,
            ret,
            0,
            PeerArg::None,
            Payload::Iov(iov, n.max(0) as usize),
            started,
        );
    }
    ret
}

/// Declares `sendfile` and `sendfile64`: a send on `out_fd` from a file, with no user
/// buffer to checksum.
macro_rules! sendfile_hook {
    ($name:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            out_fd: c_int,
            in_fd: c_int,
            off: *mut off_t,
            n: size_t,
        ) -> ssize_t {
            let started = started(out_fd);
            // SAFETY: the program's call, passed on.
            let ret = unsafe { real::$name(out_fd, in_fd, off, n) };
            if capturing() {
                data(
                    Call::Sendfile,
                    out_fd,
                    Direction::Send,
                    ret,
                    0,
                    PeerArg::None,
                    Payload::None,
                    started,
                );
            }
            ret
        }
    };
}

sendfile_hook!(sendfile);
sendfile_hook!(sendfile64);

#[no_mangle]
pub unsafe extern "C" fn splice(
    fd_in: c_int,
    off_in: *mut libc::loff_t,
    fd_out: c_int,
    off_out: *mut libc::loff_t,
    n: size_t,
    flags: c_uint,
) -> ssize_t {
    let started = started(fd_out);
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::splice(fd_in, off_in, fd_out, off_out, n, flags) };
    if capturing() {
        // Either end may be a socket (a pipe is the other): each records if it is.
        data(
            Call::Splice,
            fd_in,
            Direction::Recv,
            ret,
            0,
            PeerArg::None,
            Payload::None,
            None,
        );
        data(
            Call::Splice,
            fd_out,
            Direction::Send,
            ret,
            0,
            PeerArg::None,
            Payload::None,
            started,
        );
    }
    ret
}

// ---- descriptors closed and duplicated --------------------------------------------

/// `fd` was closed (or shut down, `how`): a socket's last record.
fn closed(call: Call, fd: c_int, how: u8, ret: c_int) {
    let Some(_guard) = enter() else {
        if call != Call::Shutdown {
            fds::forget(fd);
        }
        return;
    };
    let saved = errno();
    let conn = match call {
        Call::Shutdown => match fds::lookup(fd) {
            Fd::Socket(conn) => Some(conn),
            _ => None,
        },
        _ => fds::forget(fd),
    };
    if let Some(conn) = conn {
        let at = log::stamp();
        log::emit(
            &Record::Close {
                at,
                call,
                fd,
                conn: conn.id.load(Ordering::Relaxed),
                how,
                errno: if ret < 0 { saved as u16 } else { 0 },
            },
            at.mono_ns,
        );
    }
    set_errno(saved);
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if fd >= 0 && fd == log::LOG_FD.load(Ordering::Relaxed) {
        // The program closes descriptors it does not know (a daemon's close loop): the
        // log stays open.
        return 0;
    }
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::close(fd) };
    if capturing() {
        closed(Call::Close, fd, 0, ret);
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::shutdown(fd, how) };
    if capturing() {
        closed(Call::Shutdown, fd, how as u8, ret);
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn close_range(first: c_uint, last: c_uint, flags: c_int) -> c_int {
    let log_fd = log::LOG_FD.load(Ordering::Relaxed);
    let protect = log_fd >= 0
        && (first..=last).contains(&(log_fd as c_uint))
        && flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0;
    // SAFETY: the program's call, passed on, split around the log's descriptor.
    let ret = unsafe {
        if protect {
            let below = if log_fd as c_uint > first {
                real::close_range(first, log_fd as c_uint - 1, flags)
            } else {
                0
            };
            let above = if (log_fd as c_uint) < last {
                real::close_range(log_fd as c_uint + 1, last, flags)
            } else {
                0
            };
            if below < 0 {
                below
            } else {
                above
            }
        } else {
            real::close_range(first, last, flags)
        }
    };
    if capturing() && ret == 0 && flags & libc::CLOSE_RANGE_CLOEXEC as c_int == 0 {
        forget_range(first as usize, last as usize);
    }
    ret
}

/// Descriptors `first..=last` were closed together: each socket's last record.
fn forget_range(first: usize, last: usize) {
    let log_fd = log::LOG_FD.load(Ordering::Relaxed);
    for fd in first..=last.min(fds::MAX_FDS - 1) {
        if fd as c_int != log_fd && !matches!(fds::lookup(fd as c_int), Fd::Unknown) {
            closed(Call::CloseRange, fd as c_int, 0, 0);
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn closefrom(low: c_int) {
    let log_fd = log::LOG_FD.load(Ordering::Relaxed);
    if log_fd >= 0 && low <= log_fd {
        // Around the log's descriptor: one by one below it (it sits at 1000 or above, so
        // a few hundred calls at most), then everything above it.
        for fd in low.max(0)..log_fd {
            // SAFETY: closing descriptors the program asked to close.
            unsafe { real::close(fd) };
        }
        // SAFETY: the program's call, passed on for the descriptors above the log's.
        unsafe { real::closefrom(log_fd + 1) };
    } else {
        // SAFETY: the program's call, passed on.
        unsafe { real::closefrom(low) };
    }
    if capturing() {
        forget_range(low.max(0) as usize, usize::MAX);
    }
}

/// `new` is now a copy of `old`.
fn duplicated(call: Call, old: c_int, new: c_int) {
    // dup2 and dup3 over an open socket close it first.
    if matches!(fds::lookup(new), Fd::Socket(_)) {
        closed(Call::Close, new, 0, 0);
    }
    let Some(_guard) = enter() else {
        fds::duplicate(old, new);
        return;
    };
    let saved = errno();
    // A socket not seen yet is classified first, so that both descriptors share its slot
    // (one stream, one pair of offsets).
    let socket = socket_of(old).is_some();
    fds::duplicate(old, new);
    if socket {
        let at = log::stamp();
        log::emit(&Record::Dup { at, call, old, new }, at.mono_ns);
    }
    set_errno(saved);
}

/// Before the program takes `new` with dup2/dup3: if that is the log's descriptor,
/// the log moves to another.
fn keep_log_clear_of(new: c_int) {
    let log_fd = log::LOG_FD.load(Ordering::Relaxed);
    if new >= 0 && new == log_fd {
        // SAFETY: fcntl on our own descriptor.
        let moved =
            unsafe { libc::syscall(libc::SYS_fcntl, log_fd, libc::F_DUPFD_CLOEXEC, new + 1) }
                as c_int;
        // Failing that (no descriptor left), capture stops rather than write into the
        // file the program is about to put there. Either way, no other thread's write
        // still holds the old number when the program's dup2 replaces it.
        log::move_log(if moved >= 0 { moved } else { -1 });
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup(old: c_int) -> c_int {
    // SAFETY: the program's call, passed on.
    let new = unsafe { real::dup(old) };
    if new >= 0 && capturing() {
        duplicated(Call::Dup, old, new);
    }
    new
}

#[no_mangle]
pub unsafe extern "C" fn dup2(old: c_int, new: c_int) -> c_int {
    keep_log_clear_of(new);
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::dup2(old, new) };
    if ret >= 0 && old != new && capturing() {
        duplicated(Call::Dup2, old, ret);
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn dup3(old: c_int, new: c_int, flags: c_int) -> c_int {
    keep_log_clear_of(new);
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::dup3(old, new, flags) };
    if ret >= 0 && capturing() {
        duplicated(Call::Dup3, old, ret);
    }
    ret
}

/// `fcntl`'s duplicating commands make a descriptor; the rest pass through.
fn after_fcntl(fd: c_int, cmd: c_int, ret: c_int) {
    if ret >= 0 && (cmd == libc::F_DUPFD || cmd == libc::F_DUPFD_CLOEXEC) && capturing() {
        duplicated(Call::Fcntl, fd, ret);
    }
}

// fcntl is variadic in C; its one optional argument is passed like a fixed one on the
// supported targets (x86_64 and aarch64 Linux), so it is declared as one.
#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int {
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::fcntl(fd, cmd, arg) };
    after_fcntl(fd, cmd, ret);
    ret
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int {
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::fcntl64(fd, cmd, arg) };
    after_fcntl(fd, cmd, ret);
    ret
}

// ---- processes ---------------------------------------------------------------------

/// Forks; the child gets a log of its own.
fn fork_as(call: Call) -> pid_t {
    if !capturing() {
        // SAFETY: the program's call, passed on.
        return unsafe { real::fork() };
    }
    // The atfork handlers registered at load write the parent's buffer out before the
    // fork and give the child a log of its own.
    // SAFETY: the program's call, passed on.
    let pid = unsafe { real::fork() };
    if pid == 0 {
        return 0;
    }
    let saved = errno();
    if let Some(_guard) = enter() {
        let at = log::stamp();
        log::emit(
            &Record::Fork {
                at,
                call,
                child: pid,
                errno: if pid < 0 { saved as u16 } else { 0 },
            },
            at.mono_ns,
        );
    }
    set_errno(saved);
    pid
}

#[no_mangle]
pub unsafe extern "C" fn fork() -> pid_t {
    fork_as(Call::Fork)
}

/// `vfork` is run as `fork`: a vfork child shares the parent's memory, where the
/// library's buffers are, until it execs; a forked child satisfies every correct vfork
/// caller.
#[no_mangle]
pub unsafe extern "C" fn vfork() -> pid_t {
    fork_as(Call::Vfork)
}

/// What a `clone` child without a shared address space runs first.
struct CloneStart {
    f: extern "C" fn(*mut c_void) -> c_int,
    arg: *mut c_void,
    /// The child shares the parent's descriptors (`CLONE_FILES`): the log descriptor is
    /// the parent's, so the child does not capture.
    shared_files: bool,
}

extern "C" fn clone_child(start: *mut c_void) -> c_int {
    // SAFETY: `start` is the CloneStart on the parent's stack, which this child has a
    // copy of (no CLONE_VM), read before anything else runs.
    let (f, arg, shared_files) = unsafe {
        let s = &*(start as *const CloneStart);
        (s.f, s.arg, s.shared_files)
    };
    if shared_files {
        log::LOG_FD.store(-1, Ordering::Release);
    } else {
        super::after_fork_child();
    }
    f(arg)
}

// clone is variadic in C; its optional arguments are passed like fixed ones on the
// supported targets, so all are declared.
#[no_mangle]
pub unsafe extern "C" fn clone(
    f: Option<extern "C" fn(*mut c_void) -> c_int>,
    stack: *mut c_void,
    flags: c_int,
    arg: *mut c_void,
    ptid: *mut pid_t,
    tls: *mut c_void,
    ctid: *mut pid_t,
) -> c_int {
    let Some(start_fn) = f.filter(|_| capturing() && flags & libc::CLONE_VM == 0) else {
        // A thread, a vfork-like child that execs, or a call glibc refuses (no function):
        // nothing of ours to set up.
        // SAFETY: the program's call, passed on.
        return unsafe { real::clone(f, stack, flags, arg, ptid, tls, ctid) };
    };
    log::flush_mine();
    let mut start = CloneStart {
        f: start_fn,
        arg,
        shared_files: flags & libc::CLONE_FILES != 0,
    };
    // SAFETY: the program's call, with the child starting in `clone_child`, which reads
    // `start` from its copy of this stack frame.
    let pid = unsafe {
        real::clone(
            Some(clone_child),
            stack,
            flags,
            (&mut start as *mut CloneStart).cast(),
            ptid,
            tls,
            ctid,
        )
    };
    if pid > 0 {
        let saved = errno();
        if let Some(_guard) = enter() {
            let at = log::stamp();
            log::emit(
                &Record::Fork {
                    at,
                    call: Call::Clone,
                    child: pid,
                    errno: 0,
                },
                at.mono_ns,
            );
        }
        set_errno(saved);
    }
    pid
}

/// Before an exec replaces the program: the exec recorded, a static target warned
/// about, every buffer written (the exec ends the other threads).
fn before_exec(path: *const c_char, check_static: bool) {
    let Some(_guard) = enter() else { return };
    let saved = errno();
    if !path.is_null() {
        // SAFETY: the program passes a NUL-terminated path.
        let path = unsafe { std::ffi::CStr::from_ptr(path) }.to_bytes();
        let at = log::stamp();
        log::emit(&Record::Exec { at, path }, at.mono_ns);
        if check_static && path.contains(&b'/') {
            let mut cpath = [0u8; 1024];
            let mut head = [0u8; crate::elf::HEAD];
            if let Some(dst) = cpath.get_mut(..path.len()).filter(|_| path.len() < 1024) {
                dst.copy_from_slice(path);
                let n = super::read_small(&cpath[..=path.len()], &mut head);
                if crate::elf::is_static(&head[..n]) == Some(true) {
                    super::warn_once(warning::STATIC_EXEC, path);
                }
            }
        }
    }
    log::flush_all();
    set_errno(saved);
}

#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    before_exec(path, true);
    // SAFETY: the program's call, passed on.
    unsafe { real::execve(path, argv, envp) }
}

#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    before_exec(path, true);
    // SAFETY: the program's call, passed on.
    unsafe { real::execv(path, argv) }
}

#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    before_exec(file, true);
    // SAFETY: the program's call, passed on.
    unsafe { real::execvp(file, argv) }
}

#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    before_exec(file, true);
    // SAFETY: the program's call, passed on.
    unsafe { real::execvpe(file, argv, envp) }
}

#[no_mangle]
pub unsafe extern "C" fn execveat(
    dirfd: c_int,
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
    flags: c_int,
) -> c_int {
    // A path relative to `dirfd` is not checked for a static program.
    before_exec(path, dirfd == libc::AT_FDCWD);
    // SAFETY: the program's call, passed on.
    unsafe { real::execveat(dirfd, path, argv, envp, flags) }
}

#[no_mangle]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    before_exec(c"(fexecve)".as_ptr(), false);
    // SAFETY: the program's call, passed on.
    unsafe { real::fexecve(fd, argv, envp) }
}

// The `execl` family takes its arguments as C varargs, which a Rust function cannot
// receive or pass on (glibc builds the argument vector itself and calls its own execve,
// past the hook above). Each is a trampoline instead: it saves the argument registers,
// records the exec and writes every buffer out (`before_execl`, which returns the real
// function), restores them, and jumps to the real function with the stack as the
// program left it, so the arguments reach it untouched.
#[cfg(target_arch = "x86_64")]
macro_rules! execl_trampoline {
    ($name:ident, $before:ident) => {
        extern "C" fn $before(file: *const c_char) -> usize {
            before_exec(file, true);
            real::execl_family(stringify!($name))
        }

        #[unsafe(naked)]
        #[no_mangle]
        pub unsafe extern "C" fn $name() {
            // SAFETY: at entry the stack is 8 bytes off 16-byte alignment (the return
            // address); seven pushes align it for the call. The pushed registers are the
            // six integer argument registers and `rax` (a varargs call's count of vector
            // registers), restored before the jump; `r11` is scratch in the ABI. The
            // jump leaves the return address in place, so the real function returns to
            // the program (exec returns only on failure).
            core::arch::naked_asm!(
                "push rdi",
                "push rsi",
                "push rdx",
                "push rcx",
                "push r8",
                "push r9",
                "push rax",
                "call {before}",
                "mov r11, rax",
                "pop rax",
                "pop r9",
                "pop r8",
                "pop rcx",
                "pop rdx",
                "pop rsi",
                "pop rdi",
                "jmp r11",
                before = sym $before,
            )
        }
    };
}

#[cfg(target_arch = "x86_64")]
execl_trampoline!(execl, before_execl);
#[cfg(target_arch = "x86_64")]
execl_trampoline!(execlp, before_execlp);
#[cfg(target_arch = "x86_64")]
execl_trampoline!(execle, before_execle);

#[no_mangle]
pub unsafe extern "C" fn _exit(status: c_int) -> ! {
    super::finish();
    // SAFETY: ending the process as the program asked.
    unsafe { real::exit_now("_exit", status) }
}

#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    super::finish();
    // SAFETY: ending the process as the program asked.
    unsafe { real::exit_now("_Exit", status) }
}
