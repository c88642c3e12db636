//! Data sent and received, on sockets and on the descriptors they were duplicated to.

use libc::{
    c_int, c_uint, c_void, iovec, mmsghdr, msghdr, off_t, size_t, sockaddr, socklen_t, ssize_t,
};

use crate::format::{Call, Direction, Stamp};
use crate::preload::{capturing, data, real, started, Payload, PeerArg};

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
