//! Descriptors closed and duplicated: what is tracked follows them.

use std::sync::atomic::Ordering;

use libc::{c_int, c_uint};

use crate::format::{Call, Record};
use crate::preload::fds::{self, Fd};
use crate::preload::{capturing, enter, errno, log, real, set_errno, socket_of};

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
