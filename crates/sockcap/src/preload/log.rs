//! The log file and the per-thread buffers records wait in.
//!
//! Records are encoded by `causeway-capture-format`, without allocating. A thread claims one
//! of [`SLOTS`] (256) static 64 KiB buffers on its first record and keeps it until it exits
//! (a pthread key's destructor flushes and frees it). A buffer is written to the log in one
//! `write` of whole records when it is three-quarters full, when its oldest record is
//! [`FLUSH_AFTER_NS`] (200 ms) old, at fork, at exec and at exit. A thread only sees its
//! own buffer's age when it records, so a thread that went quiet (a worker parked while
//! another serves) would hold its records until it woke: at most every 200 ms, a thread
//! that records also writes out the other threads' buffers that are that old, so a capture
//! read while the program runs lags it by about that much; the log is opened
//! `O_APPEND|O_CLOEXEC` (so threads' flushes never interleave inside a record) and moved to
//! a descriptor at or above 1000.
//!
//! Nothing here allocates or takes a lock: a buffer in use, or no free buffer, drops the
//! record and counts it (a `dropped` warning at exit) rather than wait, so a hook is safe in
//! a signal handler and after fork.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use crate::format::{Record, Stamp};

/// Threads with a buffer at once; later threads' records are dropped and counted.
const SLOTS: usize = 256;
/// Bytes per thread buffer.
const BUFFER: usize = 64 * 1024;
/// A buffer is written out once its oldest record is this old.
const FLUSH_AFTER_NS: u64 = 200_000_000;

/// The log's descriptor, or -1 when this process is not capturing.
pub static LOG_FD: AtomicI32 = AtomicI32::new(-1);
/// Records dropped (no free buffer, buffer busy, or a write that failed).
pub static DROPPED: AtomicU64 = AtomicU64::new(0);
/// Writes to the log under way, counted per generation of its descriptor (two at a
/// time): moving the log waits for the writes of the generation it ends, which may hold
/// the old descriptor, before the program puts a file of its own there.
static WRITING: [AtomicU32; 2] = [AtomicU32::new(0), AtomicU32::new(0)];
/// The descriptor's generation: moves so far.
static GENERATION: AtomicU32 = AtomicU32::new(0);
/// How long moving the log waits for writes (yields): bounded, since a signal handler
/// that moves it may have interrupted its own thread's write.
const MOVE_WAIT_YIELDS: u32 = 100_000;

struct Slot {
    /// The owning thread's id, 0 when free.
    owner: AtomicU32,
    /// Held while the buffer is written to or flushed.
    busy: AtomicBool,
    /// Set while another thread writes this buffer out because it went stale: its owner
    /// then waits for it (briefly) instead of dropping its record.
    swept: AtomicBool,
    len: UnsafeCell<usize>,
    /// When the oldest record in the buffer was written (monotonic ns).
    oldest: UnsafeCell<u64>,
    buf: UnsafeCell<[u8; BUFFER]>,
}

// SAFETY: `len`, `oldest` and `buf` are only touched by whoever set `busy`.
unsafe impl Sync for Slot {}

static BUFFERS: [Slot; SLOTS] = [const {
    Slot {
        owner: AtomicU32::new(0),
        busy: AtomicBool::new(false),
        swept: AtomicBool::new(false),
        len: UnsafeCell::new(0),
        oldest: UnsafeCell::new(0),
        buf: UnsafeCell::new([0; BUFFER]),
    }
}; SLOTS];

thread_local! {
    /// This thread's buffer, plus one (0: none yet).
    static MINE: Cell<usize> = const { Cell::new(0) };
    /// This thread's kernel id (0: not asked yet).
    static TID: Cell<u32> = const { Cell::new(0) };
}

/// The pthread key whose destructor frees a thread's buffer.
static KEY: AtomicU32 = AtomicU32::new(u32::MAX);

/// Now, on this thread.
pub fn stamp() -> Stamp {
    Stamp {
        tid: tid(),
        mono_ns: clock(libc::CLOCK_MONOTONIC),
        wall_ns: clock(libc::CLOCK_REALTIME),
    }
}

pub fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; clock_gettime is async-signal-safe.
    unsafe { libc::clock_gettime(id, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

fn tid() -> u32 {
    TID.with(|t| match t.get() {
        0 => {
            // SAFETY: gettid takes nothing and cannot fail.
            let id = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
            t.set(id);
            id
        }
        id => id,
    })
}

/// Creates the pthread key (at load, before the program's threads).
pub fn init_key() {
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is valid to write; the destructor has the signature pthread wants.
    if unsafe { libc::pthread_key_create(&mut key, Some(thread_exit)) } == 0 {
        KEY.store(key, Ordering::Relaxed);
    }
}

/// A thread with a buffer is exiting: its records go out and the buffer is freed.
extern "C" fn thread_exit(value: *mut libc::c_void) {
    let index = (value as usize).wrapping_sub(1);
    // Only a buffer this thread owns (a value left from before a fork may name another's).
    if let Some(slot) = BUFFERS
        .get(index)
        .filter(|s| s.owner.load(Ordering::Acquire) == tid())
    {
        if !slot.busy.swap(true, Ordering::Acquire) {
            flush(slot);
            slot.owner.store(0, Ordering::Release);
            slot.busy.store(false, Ordering::Release);
        }
    }
    let _ = MINE.try_with(|m| m.set(0));
}

fn claim() -> Option<&'static Slot> {
    let me = tid();
    for (index, slot) in BUFFERS.iter().enumerate() {
        if slot
            .owner
            .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            MINE.with(|m| m.set(index + 1));
            let key = KEY.load(Ordering::Relaxed);
            if key != u32::MAX {
                // SAFETY: a key pthread_key_create gave; the value is an integer tag.
                unsafe { libc::pthread_setspecific(key, (index + 1) as *const libc::c_void) };
            }
            return Some(slot);
        }
    }
    None
}

/// Appends a record to this thread's buffer.
pub fn emit(record: &Record<'_>, now_ns: u64) {
    let slot = match MINE.with(Cell::get) {
        0 => claim(),
        n => BUFFERS.get(n - 1),
    };
    let Some(slot) = slot else {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    };
    if slot.busy.swap(true, Ordering::Acquire) && !wait_for_sweep(slot) {
        DROPPED.fetch_add(1, Ordering::Relaxed);
        return;
    }
    // SAFETY: `busy` is ours, so nothing else touches these cells until we release it.
    let (len, oldest, buf) = unsafe {
        (
            &mut *slot.len.get(),
            &mut *slot.oldest.get(),
            &mut *slot.buf.get(),
        )
    };
    let mut written = record.encode(buf.get_mut(*len..).unwrap_or_default());
    if written.is_none() && *len > 0 {
        write_out(len, buf);
        written = record.encode(&mut buf[..]);
    }
    match written {
        Some(n) => {
            if *len == 0 {
                *oldest = now_ns;
            }
            *len += n;
        }
        None => {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
    if *len > BUFFER * 3 / 4 || now_ns.saturating_sub(*oldest) > FLUSH_AFTER_NS {
        write_out(len, buf);
    }
    slot.busy.store(false, Ordering::Release);
    let last = LAST_SWEEP.load(Ordering::Relaxed);
    if now_ns.saturating_sub(last) > FLUSH_AFTER_NS
        && LAST_SWEEP
            .compare_exchange(last, now_ns, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        sweep(slot, now_ns);
    }
}

/// When a thread last wrote out the buffers other threads left to go stale (monotonic ns).
static LAST_SWEEP: AtomicU64 = AtomicU64::new(0);

/// How long an owner waits (yields) for another thread writing its stale buffer out.
const SWEEP_WAIT_YIELDS: u32 = 10_000;

/// Writes out the buffers other than `mine` whose oldest record is [`FLUSH_AFTER_NS`] old.
fn sweep(mine: &Slot, now_ns: u64) {
    for slot in &BUFFERS {
        if std::ptr::eq(slot, mine) || slot.owner.load(Ordering::Acquire) == 0 {
            continue;
        }
        // Announced before taking the buffer, so an owner that finds it taken waits.
        slot.swept.store(true, Ordering::SeqCst);
        if !slot.busy.swap(true, Ordering::Acquire) {
            // SAFETY: `busy` is ours.
            let stale = unsafe {
                *slot.len.get() > 0 && now_ns.saturating_sub(*slot.oldest.get()) > FLUSH_AFTER_NS
            };
            if stale {
                flush(slot);
            }
            slot.busy.store(false, Ordering::Release);
        }
        slot.swept.store(false, Ordering::SeqCst);
    }
}

/// Takes `slot`'s `busy` once a sweeping thread lets it go; false if nobody is sweeping it
/// (its owner holds it: a signal handler interrupted the owner's own record) or the wait
/// ran out.
fn wait_for_sweep(slot: &Slot) -> bool {
    for _ in 0..SWEEP_WAIT_YIELDS {
        if !slot.swept.load(Ordering::SeqCst) {
            // The sweeper may have let go between our swap and this check.
            return !slot.busy.swap(true, Ordering::Acquire);
        }
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
        if !slot.busy.swap(true, Ordering::Acquire) {
            return true;
        }
    }
    false
}

/// Writes a buffer's records to the log. The caller holds `busy`.
fn flush(slot: &Slot) {
    // SAFETY: the caller holds `busy`.
    let (len, buf) = unsafe { (&mut *slot.len.get(), &*slot.buf.get()) };
    write_out(len, buf);
}

/// Writes the first `len` bytes of a buffer to the log and empties it.
fn write_out(len: &mut usize, buf: &[u8]) {
    if *len > 0 {
        // Counted under the generation before the descriptor is read, the generation
        // checked again after (all sequentially consistent, as in `move_log`): a move
        // is either seen here or waits for this write.
        let writing = loop {
            let g = GENERATION.load(Ordering::SeqCst);
            let count = &WRITING[g as usize & 1];
            count.fetch_add(1, Ordering::SeqCst);
            if GENERATION.load(Ordering::SeqCst) == g {
                break count;
            }
            count.fetch_sub(1, Ordering::SeqCst);
        };
        let written = write_all(LOG_FD.load(Ordering::SeqCst), &buf[..*len]);
        writing.fetch_sub(1, Ordering::SeqCst);
        if !written {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
    *len = 0;
}

/// Makes `fd` (or -1: none) the log's descriptor, and returns once no write can still be
/// using the old one.
/// (Waiting is bounded: past `MOVE_WAIT_YIELDS` it returns anyway.)
pub fn move_log(fd: i32) {
    LOG_FD.store(fd, Ordering::SeqCst);
    let ended = &WRITING[GENERATION.fetch_add(1, Ordering::SeqCst) as usize & 1];
    for _ in 0..MOVE_WAIT_YIELDS {
        if ended.load(Ordering::SeqCst) == 0 {
            return;
        }
        // SAFETY: sched_yield has no preconditions.
        unsafe { libc::sched_yield() };
    }
}

/// Writes `bytes` with the write system call itself (not the hooked libc function).
pub fn write_all(fd: i32, mut bytes: &[u8]) -> bool {
    if fd < 0 {
        return false;
    }
    while !bytes.is_empty() {
        // SAFETY: `bytes` is valid for its length; write does not keep the pointer.
        let n = unsafe { libc::syscall(libc::SYS_write, fd, bytes.as_ptr(), bytes.len()) };
        if n < 0 {
            if super::errno() == libc::EINTR {
                continue;
            }
            return false;
        }
        bytes = bytes.get(n as usize..).unwrap_or_default();
    }
    true
}

/// Writes out this thread's buffer now (before fork or exec).
pub fn flush_mine() {
    if let Some(slot) = MINE
        .with(Cell::get)
        .checked_sub(1)
        .and_then(|i| BUFFERS.get(i))
    {
        if !slot.busy.swap(true, Ordering::Acquire) {
            flush(slot);
            slot.busy.store(false, Ordering::Release);
        }
    }
}

/// Writes out every buffer not in use (at exit: other threads may still run).
pub fn flush_all() {
    for slot in &BUFFERS {
        if slot.owner.load(Ordering::Acquire) != 0 && !slot.busy.swap(true, Ordering::Acquire) {
            flush(slot);
            slot.busy.store(false, Ordering::Release);
        }
    }
}

/// In a fork's child: the parent's buffered records are the parent's to write, and
/// the one thread left has a new id.
pub fn reset_after_fork() {
    for slot in BUFFERS
        .iter()
        .filter(|s| s.owner.load(Ordering::Relaxed) != 0)
    {
        // SAFETY: the child has one thread, so no other user of the cells exists.
        unsafe { *slot.len.get() = 0 };
        slot.busy.store(false, Ordering::Relaxed);
        slot.swept.store(false, Ordering::Relaxed);
        slot.owner.store(0, Ordering::Relaxed);
    }
    MINE.with(|m| m.set(0));
    TID.with(|t| t.set(0));
    DROPPED.store(0, Ordering::Relaxed);
    // Writes other threads had under way are not the child's.
    for count in &WRITING {
        count.store(0, Ordering::Relaxed);
    }
    let key = KEY.load(Ordering::Relaxed);
    if key != u32::MAX {
        // SAFETY: a key pthread_key_create gave; clearing this thread's value.
        unsafe { libc::pthread_setspecific(key, std::ptr::null()) };
    }
}
