//! Buffered records written out when a signal ends the process.
//!
//! Stopping a captured system usually means Ctrl-C or `kill`, whose default action ends
//! a process without `exit`, so neither the exit hooks nor the thread destructors run.
//! At load the library gives the signals below that are still at their default action a
//! handler that writes every buffer out and re-raises the signal with its default
//! action. The program never sees the handler: `sigaction` and `signal` report the
//! default in its place, and a handler the program installs replaces it. The signals are
//! SIGINT, SIGTERM, SIGHUP, SIGPIPE and SIGQUIT; the handler is one-shot. A SIGKILL loses
//! what was buffered.

use std::sync::atomic::{AtomicU64, Ordering};

use libc::{c_int, sighandler_t};

use super::{log, real};

/// Signals whose default action ends the process and that commonly stop a program.
const SIGNALS: [c_int; 5] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGPIPE,
    libc::SIGQUIT,
];

/// Bit `n` set: signal `n` has the library's handler, and the program believes it has
/// the default action.
static OURS: AtomicU64 = AtomicU64::new(0);

fn bit(sig: c_int) -> u64 {
    if (0..64).contains(&sig) {
        1 << sig
    } else {
        0
    }
}

/// Installs the handler on every signal of [`SIGNALS`] left at its default action.
pub fn install() {
    // PID 1 (a container's init) never gets a signal whose action is the default: with a
    // handler it would, and the re-raise would be dropped. It keeps the defaults.
    // SAFETY: getpid cannot fail.
    if unsafe { libc::getpid() } == 1 {
        return;
    }
    for sig in SIGNALS {
        // SAFETY: an all-zero sigaction is valid (SIG_DFL, no flags, empty mask).
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: querying the current action into `old`.
        if unsafe { real::sigaction(sig, std::ptr::null(), &mut old) } != 0
            || old.sa_sigaction != libc::SIG_DFL
        {
            continue;
        }
        // SAFETY: as above.
        let mut ours: libc::sigaction = unsafe { std::mem::zeroed() };
        ours.sa_sigaction = handler_address();
        // One-shot: the action is back to the default when the handler runs.
        ours.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
        // SAFETY: installing a handler that only makes async-signal-safe calls.
        if unsafe { real::sigaction(sig, &ours, std::ptr::null_mut()) } == 0 {
            OURS.fetch_or(bit(sig), Ordering::Relaxed);
        }
    }
}

fn handler_address() -> sighandler_t {
    on_signal as extern "C" fn(c_int) as sighandler_t
}

extern "C" fn on_signal(sig: c_int) {
    let saved = super::errno();
    OURS.fetch_and(!bit(sig), Ordering::Relaxed);
    // Only raw system calls and atomics: buffers in use by the interrupted code are
    // skipped rather than waited for.
    log::flush_all();
    // SAFETY: the action is the default again (SA_RESETHAND); the signal is delivered
    // when this handler returns, and does what it would have done.
    unsafe { libc::raise(sig) };
    super::set_errno(saved);
}

/// Whether the library's handler stands in for the default action of `sig`; clears
/// that when `replacing` (the program sets an action of its own).
fn stands_in(sig: c_int, replacing: bool) -> bool {
    let b = bit(sig);
    if replacing {
        OURS.fetch_and(!b, Ordering::Relaxed) & b != 0
    } else {
        OURS.load(Ordering::Relaxed) & b != 0
    }
}

#[no_mangle]
pub unsafe extern "C" fn sigaction(
    sig: c_int,
    act: *const libc::sigaction,
    old: *mut libc::sigaction,
) -> c_int {
    let ours = stands_in(sig, !act.is_null());
    // SAFETY: the program's call, passed on.
    let ret = unsafe { real::sigaction(sig, act, old) };
    // Only the library's own handler is shown as the default: one set by a call the
    // hooks do not see (`sysv_signal`, raw rt_sigaction) is reported as it is.
    // SAFETY: the call filled `old` when it succeeded.
    if ours && ret == 0 && !old.is_null() && unsafe { (*old).sa_sigaction } == handler_address() {
        // SAFETY: as above; the program is shown the default it expects.
        unsafe {
            (*old).sa_sigaction = libc::SIG_DFL;
            (*old).sa_flags = 0;
            libc::sigemptyset(&mut (*old).sa_mask);
        }
    }
    ret
}

#[no_mangle]
pub unsafe extern "C" fn signal(sig: c_int, handler: sighandler_t) -> sighandler_t {
    let ours = stands_in(sig, true);
    // SAFETY: the program's call, passed on.
    let previous = unsafe { real::signal(sig, handler) };
    if ours && previous == handler_address() {
        libc::SIG_DFL
    } else {
        previous
    }
}
