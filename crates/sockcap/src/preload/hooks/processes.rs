//! Processes forked, cloned, exec'd and exited: each child writes a log of its own.

use std::sync::atomic::Ordering;

use libc::{c_char, c_int, c_void, pid_t};

use crate::format::{warning, Call, Record};
use crate::preload::{capturing, enter, errno, log, real, set_errno};

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
        crate::preload::after_fork_child();
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
                let n = crate::preload::read_small(&cpath[..=path.len()], &mut head);
                if crate::elf::is_static(&head[..n]) == Some(true) {
                    crate::preload::warn_once(warning::STATIC_EXEC, path);
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
    crate::preload::finish();
    // SAFETY: ending the process as the program asked.
    unsafe { real::exit_now("_exit", status) }
}

#[no_mangle]
pub unsafe extern "C" fn _Exit(status: c_int) -> ! {
    crate::preload::finish();
    // SAFETY: ending the process as the program asked.
    unsafe { real::exit_now("_Exit", status) }
}
