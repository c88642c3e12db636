//! The interposed functions' real implementations, found with `dlsym(RTLD_NEXT)`.
//!
//! Each is looked up on first use and kept; the library's constructor (in `.init_array`)
//! looks them all up before the program's threads exist, so a hook rarely calls `dlsym`
//! (which may allocate). `fcntl` and `clone` are C-variadic; their optional arguments are
//! declared as fixed ones, which are passed alike on x86_64 and aarch64 Linux.

use std::sync::atomic::{AtomicUsize, Ordering};

use libc::{
    c_char, c_int, c_uint, c_void, iovec, mmsghdr, msghdr, off_t, pid_t, size_t, sockaddr,
    socklen_t, ssize_t,
};

/// One real function's address (0 until looked up; `usize::MAX` when libc lacks it).
pub struct Real {
    name: &'static str,
    addr: AtomicUsize,
}

impl Real {
    const fn new(name: &'static str) -> Real {
        Real {
            name,
            addr: AtomicUsize::new(0),
        }
    }

    /// The address, or `None` when no later object defines the symbol.
    #[inline]
    fn get(&self) -> Option<usize> {
        match self.addr.load(Ordering::Relaxed) {
            0 => self.resolve(),
            usize::MAX => None,
            a => Some(a),
        }
    }

    #[cold]
    fn resolve(&self) -> Option<usize> {
        // SAFETY: `name` is a NUL-terminated literal (the macro below appends the NUL).
        let a = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr().cast()) } as usize;
        self.addr
            .store(if a == 0 { usize::MAX } else { a }, Ordering::Relaxed);
        (a != 0).then_some(a)
    }
}

/// Declares `pub unsafe fn NAME(args) -> ret` calling the real libc symbol, and
/// `resolve_all` to look every one up at load time.
macro_rules! reals {
    ($( $fname:ident = $sym:literal ($($arg:ident : $ty:ty),*) -> $ret:ty; )*) => {
        mod slot {
            $( #[allow(non_upper_case_globals)]
               pub static $fname: super::Real = super::Real::new(concat!($sym, "\0")); )*
        }
        $(
            /// The real function (fails with `ENOSYS` when libc has none).
            ///
            /// # Safety
            /// As the libc function's own contract.
            #[inline]
            pub unsafe fn $fname($($arg: $ty),*) -> $ret {
                let Some(addr) = slot::$fname.get() else {
                    super::set_errno(libc::ENOSYS);
                    return -1 as $ret;
                };
                // SAFETY: `addr` is what dlsym returned for this libc symbol, whose C
                // signature is the one declared here.
                let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(addr) };
                // SAFETY: the caller keeps the function's contract.
                unsafe { f($($arg),*) }
            }
        )*
        /// Looks every real function up now.
        pub fn resolve_all() {
            $( let _ = slot::$fname.get(); )*
        }
    };
}

reals! {
    socket = "socket"(domain: c_int, kind: c_int, protocol: c_int) -> c_int;
    socketpair = "socketpair"(domain: c_int, kind: c_int, protocol: c_int, sv: *mut c_int) -> c_int;
    connect = "connect"(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    accept = "accept"(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int;
    accept4 = "accept4"(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int;
    bind = "bind"(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int;
    listen = "listen"(fd: c_int, backlog: c_int) -> c_int;
    send = "send"(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t;
    sendto = "sendto"(fd: c_int, buf: *const c_void, n: size_t, flags: c_int, addr: *const sockaddr, len: socklen_t) -> ssize_t;
    sendmsg = "sendmsg"(fd: c_int, msg: *const msghdr, flags: c_int) -> ssize_t;
    sendmmsg = "sendmmsg"(fd: c_int, msgs: *mut mmsghdr, n: c_uint, flags: c_int) -> c_int;
    recv = "recv"(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t;
    recvfrom = "recvfrom"(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t;
    recvmsg = "recvmsg"(fd: c_int, msg: *mut msghdr, flags: c_int) -> ssize_t;
    recvmmsg = "recvmmsg"(fd: c_int, msgs: *mut mmsghdr, n: c_uint, flags: c_int, timeout: *mut libc::timespec) -> c_int;
    read = "read"(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t;
    write = "write"(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t;
    readv = "readv"(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
    writev = "writev"(fd: c_int, iov: *const iovec, n: c_int) -> ssize_t;
    pread = "pread"(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t;
    pwrite = "pwrite"(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t;
    pread64 = "pread64"(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t;
    pwrite64 = "pwrite64"(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t;
    sendfile = "sendfile"(out_fd: c_int, in_fd: c_int, off: *mut off_t, n: size_t) -> ssize_t;
    sendfile64 = "sendfile64"(out_fd: c_int, in_fd: c_int, off: *mut off_t, n: size_t) -> ssize_t;
    splice = "splice"(fd_in: c_int, off_in: *mut libc::loff_t, fd_out: c_int, off_out: *mut libc::loff_t, n: size_t, flags: c_uint) -> ssize_t;
    read_chk = "__read_chk"(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t) -> ssize_t;
    recv_chk = "__recv_chk"(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t, flags: c_int) -> ssize_t;
    recvfrom_chk = "__recvfrom_chk"(fd: c_int, buf: *mut c_void, n: size_t, buflen: size_t, flags: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> ssize_t;
    pread_chk = "__pread_chk"(fd: c_int, buf: *mut c_void, n: size_t, off: off_t, buflen: size_t) -> ssize_t;
    pread64_chk = "__pread64_chk"(fd: c_int, buf: *mut c_void, n: size_t, off: off_t, buflen: size_t) -> ssize_t;
    close = "close"(fd: c_int) -> c_int;
    shutdown = "shutdown"(fd: c_int, how: c_int) -> c_int;
    close_range = "close_range"(first: c_uint, last: c_uint, flags: c_int) -> c_int;
    dup = "dup"(fd: c_int) -> c_int;
    dup2 = "dup2"(old: c_int, new: c_int) -> c_int;
    dup3 = "dup3"(old: c_int, new: c_int, flags: c_int) -> c_int;
    fcntl = "fcntl"(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int;
    fcntl64 = "fcntl64"(fd: c_int, cmd: c_int, arg: libc::c_ulong) -> c_int;
    fork = "fork"() -> pid_t;
    clone = "clone"(f: Option<extern "C" fn(*mut c_void) -> c_int>, stack: *mut c_void, flags: c_int, arg: *mut c_void, ptid: *mut pid_t, tls: *mut c_void, ctid: *mut pid_t) -> c_int;
    sigaction = "sigaction"(sig: c_int, act: *const libc::sigaction, old: *mut libc::sigaction) -> c_int;
    execve = "execve"(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    execv = "execv"(path: *const c_char, argv: *const *const c_char) -> c_int;
    execvp = "execvp"(file: *const c_char, argv: *const *const c_char) -> c_int;
    execveat = "execveat"(dirfd: c_int, path: *const c_char, argv: *const *const c_char, envp: *const *const c_char, flags: c_int) -> c_int;
    fexecve = "fexecve"(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    execvpe = "execvpe"(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
}

static EXECL: Real = Real::new("execl\0");
static EXECLP: Real = Real::new("execlp\0");
static EXECLE: Real = Real::new("execle\0");
static EXIT: Real = Real::new("_exit\0");
static UPPER: Real = Real::new("_Exit\0");
static SIGNAL: Real = Real::new("signal\0");
static CLOSEFROM: Real = Real::new("closefrom\0");

/// Looks up, at load, the real functions outside the table (dlsym may lock and allocate,
/// which `_exit` in a signal handler or a fork's child must not).
pub fn resolve_rest() {
    let _ = (EXIT.get(), UPPER.get(), SIGNAL.get(), CLOSEFROM.get());
    let _ = (EXECL.get(), EXECLP.get(), EXECLE.get());
}

/// `_exit` and `_Exit` never return, so they are not in the table above.
pub unsafe fn exit_now(name: &'static str, status: c_int) -> ! {
    let real = if name == "_Exit" { &UPPER } else { &EXIT };
    if let Some(addr) = real.get() {
        // SAFETY: dlsym's address for `_exit`/`_Exit`, both `void (int)` and noreturn.
        let f: unsafe extern "C" fn(c_int) -> ! = unsafe { std::mem::transmute(addr) };
        // SAFETY: ending the process is always allowed.
        unsafe { f(status) }
    }
    // SAFETY: the exit_group system call takes a status and does not return.
    unsafe { libc::syscall(libc::SYS_exit_group, status) };
    std::process::abort()
}

/// The real `signal` (it returns a handler, so it is not in the table above).
pub unsafe fn signal(sig: c_int, handler: libc::sighandler_t) -> libc::sighandler_t {
    let Some(addr) = SIGNAL.get() else {
        return libc::SIG_ERR;
    };
    // SAFETY: dlsym's address for `signal`, `sighandler_t (int, sighandler_t)`.
    let f: unsafe extern "C" fn(c_int, libc::sighandler_t) -> libc::sighandler_t =
        unsafe { std::mem::transmute(addr) };
    // SAFETY: the caller keeps signal's contract.
    unsafe { f(sig, handler) }
}

/// The real `closefrom` (it returns nothing, so it is not in the table above); without
/// one (glibc before 2.34), the descriptors are closed one by one up to the limit.
pub unsafe fn closefrom(low: c_int) {
    if let Some(addr) = CLOSEFROM.get() {
        // SAFETY: dlsym's address for `closefrom`, `void (int)`.
        let f: unsafe extern "C" fn(c_int) = unsafe { std::mem::transmute(addr) };
        // SAFETY: the caller keeps closefrom's contract.
        unsafe { f(low) };
        return;
    }
    // SAFETY: close_range with no flags only closes descriptors.
    if unsafe { close_range(low.max(0) as libc::c_uint, libc::c_uint::MAX, 0) } != 0 {
        // SAFETY: getdtablesize cannot fail.
        let limit = unsafe { libc::getdtablesize() };
        for fd in low.max(0)..limit {
            // SAFETY: closing descriptors the caller asked to close.
            unsafe { close(fd) };
        }
    }
}

/// The address of the real `execl`, `execlp` or `execle` (by name), for the hooks'
/// trampolines to jump to; without one, a function failing with `ENOSYS`.
pub fn execl_family(name: &str) -> usize {
    let real = match name {
        "execlp" => &EXECLP,
        "execle" => &EXECLE,
        _ => &EXECL,
    };
    real.get().unwrap_or(no_execl as *const () as usize)
}

/// What an `execl` that libc lacks does.
extern "C" fn no_execl() -> c_int {
    super::set_errno(libc::ENOSYS);
    -1
}
