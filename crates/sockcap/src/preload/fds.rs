//! What the library knows of each file descriptor: not a socket, or which connection
//! slot (shared by `dup`ed descriptors) holds the socket's stream offsets.
//!
//! Both tables are static arrays of atomics in `.bss`: no allocation, and pages the
//! program never touches cost nothing. Per descriptor (65 536): unknown, not a socket, or a
//! socket's slot. Per slot (65 536): a reference count (`dup`ed descriptors share a slot),
//! the socket type, the log's number for the connection, and the bytes sent and received so
//! far (the stream offsets). A descriptor first seen in a data call is classified with one
//! `fstat` and remembered; `close` forgets it. A descriptor past the table is classified on
//! every call and never tracked (counted, and warned about once).

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicUsize, Ordering::Relaxed};

/// Descriptors tracked (0..MAX_FDS).
pub const MAX_FDS: usize = 1 << 16;
/// Sockets tracked at once.
const MAX_CONNS: usize = 1 << 16;

const UNKNOWN: u32 = 0;
const NOT_SOCKET: u32 = 1;
/// A socket: the slot index is in the bits above the kind.
const SOCKET: u32 = 2;

static FDS: [AtomicU32; MAX_FDS] = [const { AtomicU32::new(UNKNOWN) }; MAX_FDS];

/// One socket's state, shared by every descriptor that refers to it.
pub struct Conn {
    refs: AtomicU32,
    /// `SOCK_STREAM`, `SOCK_DGRAM`, ... (0 until known).
    pub kind: AtomicU16,
    /// The log's number for the connection (0 until connected, accepted or discovered).
    pub id: AtomicU64,
    pub sent: AtomicU64,
    pub received: AtomicU64,
    /// HTTP/2 framing, sent and received (`crate::h2`).
    pub h2: [crate::h2::Framing; 2],
}

static CONNS: [Conn; MAX_CONNS] = [const {
    Conn {
        refs: AtomicU32::new(0),
        kind: AtomicU16::new(0),
        id: AtomicU64::new(0),
        sent: AtomicU64::new(0),
        received: AtomicU64::new(0),
        h2: [const { crate::h2::Framing::new() }; 2],
    }
}; MAX_CONNS];

/// Where the next free-slot search starts.
static CURSOR: AtomicUsize = AtomicUsize::new(0);
/// Numbers connections in this process's log.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// What a descriptor is, as far as the table knows.
pub enum Fd {
    Unknown,
    NotSocket,
    Socket(&'static Conn),
    /// Past the table, or the connection table was full.
    Untracked,
}

fn entry(fd: i32) -> Option<&'static AtomicU32> {
    FDS.get(usize::try_from(fd).ok()?)
}

/// What `fd` is.
#[inline]
pub fn lookup(fd: i32) -> Fd {
    let Some(e) = entry(fd) else {
        return Fd::Untracked;
    };
    let v = e.load(Relaxed);
    match v & 0xff {
        UNKNOWN => Fd::Unknown,
        NOT_SOCKET => Fd::NotSocket,
        _ => CONNS
            .get((v >> 8) as usize)
            .map_or(Fd::Untracked, Fd::Socket),
    }
}

/// Remembers that `fd` is not a socket.
pub fn mark_not_socket(fd: i32) {
    if let Some(e) = entry(fd) {
        e.store(NOT_SOCKET, Relaxed);
    }
}

/// Forgets `fd` (closed): the next file with its number is classified afresh.
pub fn forget(fd: i32) -> Option<&'static Conn> {
    let e = entry(fd)?;
    let v = e.swap(UNKNOWN, Relaxed);
    if v & 0xff != SOCKET {
        return None;
    }
    let conn = CONNS.get((v >> 8) as usize)?;
    conn.refs.fetch_sub(1, Relaxed);
    Some(conn)
}

/// Tracks `fd` as a new socket of `kind`: a fresh slot, offsets at zero. `None` when
/// the table is full or `fd` is past it.
pub fn new_socket(fd: i32, kind: u16) -> Option<&'static Conn> {
    let e = entry(fd)?;
    let start = CURSOR.fetch_add(1, Relaxed);
    for i in 0..MAX_CONNS {
        let index = (start + i) % MAX_CONNS;
        let conn = &CONNS[index];
        if conn.refs.compare_exchange(0, 1, Relaxed, Relaxed).is_ok() {
            conn.kind.store(kind, Relaxed);
            conn.id.store(0, Relaxed);
            conn.sent.store(0, Relaxed);
            conn.received.store(0, Relaxed);
            conn.h2.iter().for_each(crate::h2::Framing::reset);
            // A socket the program closed in a way the library did not see, if any.
            forget(fd);
            e.store(SOCKET | ((index as u32) << 8), Relaxed);
            return Some(conn);
        }
    }
    None
}

/// `new` now refers to what `old` does (dup, dup2, dup3, fcntl(F_DUPFD)).
pub fn duplicate(old: i32, new: i32) {
    let Some(to) = entry(new) else {
        return;
    };
    forget(new);
    let Some(from) = entry(old) else {
        return;
    };
    let v = from.load(Relaxed);
    if v & 0xff == SOCKET {
        if let Some(conn) = CONNS.get((v >> 8) as usize) {
            conn.refs.fetch_add(1, Relaxed);
        }
    }
    to.store(v, Relaxed);
}

/// Gives the connection its log number; `restart` sets its offsets to zero (connect,
/// accept: the stream starts here).
pub fn number(conn: &Conn, restart: bool) -> u64 {
    let id = NEXT_ID.fetch_add(1, Relaxed);
    if restart {
        conn.sent.store(0, Relaxed);
        conn.received.store(0, Relaxed);
        conn.h2.iter().for_each(crate::h2::Framing::reset);
    }
    conn.id.store(id, Relaxed);
    id
}

/// In a fork's child: its log has not numbered any connection yet.
pub fn forget_numbers() {
    for conn in &CONNS {
        if conn.refs.load(Relaxed) > 0 {
            conn.id.store(0, Relaxed);
        }
    }
    NEXT_ID.store(1, Relaxed);
}
