//! Sockets made, named and connected: each becomes tracked, with its addresses.

use std::sync::atomic::Ordering;

use libc::{c_int, sockaddr, socklen_t};

use crate::format::{warning, Call, Endpoint, Record};
use crate::preload::fds::{self, Fd};
use crate::preload::{
    capturing, copy_addr, endpoint, enter, errno, log, name_of, real, record_connection, set_errno,
    socket_kind, socket_of,
};

/// A socket was made: it is tracked from now on.
fn made(call: Call, fd: c_int, domain: c_int, kind: c_int) {
    let Some(_guard) = enter() else { return };
    let saved = errno();
    let kind = (kind & 0xf) as u16;
    if fds::new_socket(fd, kind).is_none() {
        crate::preload::warn_once(warning::TABLE_FULL, b"socket table full");
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
