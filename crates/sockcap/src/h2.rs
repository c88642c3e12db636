//! HTTP/2 frames on a stream socket, for inference to tell apart the calls multiplexed on
//! one connection (WAP5 sees a connection's bytes as runs in each direction; on HTTP/2 a
//! run carries frames of several calls).
//!
//! Each direction of a connection is judged by its first bytes: the client's connection
//! preface, or a SETTINGS frame on stream 0 (the first frame a server sends, and the first
//! a client receives); anything else, or a first call not at offset 0, turns the direction
//! off. On a direction found to be HTTP/2 every call's bytes are walked frame header to
//! frame header (a header split across calls is held, 8 bytes at most); the headers of
//! the frames that delimit a stream's messages (HEADERS, DATA ending a stream,
//! RST_STREAM) are handed on with their stream offsets. A header of an unknown type means
//! the walk lost its place (bytes moved by a call the library cannot read, two threads
//! writing at once): the direction is turned off. No payload is kept or parsed, TLS is
//! not seen through (its bytes are no frames), and the state is two words of atomics per
//! direction, in the connection table: nothing is allocated.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use causeway_capture_format::Frame;

/// What a client sends first (RFC 9113 §3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Frame types past this are not HTTP/2's (RFC 9113 §6, with ORIGIN and PRIORITY_UPDATE).
const LAST_KIND: u8 = 0x10;

const SETTINGS: u8 = 4;

/// One direction's framing: its mode, the header bytes held and the payload bytes left
/// to skip (`state`), and the held header bytes themselves (`head`).
pub(crate) struct Framing {
    state: AtomicU64,
    head: AtomicU64,
}

/// Not judged yet (no byte moved).
const UNKNOWN: u64 = 0;
const FRAMED: u64 = 1;
const OFF: u64 = 2;

/// The state word: mode in bits 0-1, header bytes held in bits 2-5, bytes to skip from
/// bit 8 (a frame's payload is at most 2^24 - 1 bytes; the preface 24).
struct State {
    mode: u64,
    held: usize,
    skip: u64,
    head: [u8; 9],
}

impl Framing {
    pub(crate) const fn new() -> Framing {
        Framing {
            state: AtomicU64::new(UNKNOWN),
            head: AtomicU64::new(0),
        }
    }

    /// A new stream on this slot.
    // The connection table calls it; the unit tests build without the table.
    #[cfg_attr(test, allow(dead_code))]
    pub(crate) fn reset(&self) {
        self.state.store(UNKNOWN, Relaxed);
        self.head.store(0, Relaxed);
    }

    fn load(&self) -> State {
        let word = self.state.load(Relaxed);
        let mut head = [0u8; 9];
        head[..8].copy_from_slice(&self.head.load(Relaxed).to_le_bytes());
        State {
            mode: word & 3,
            held: ((word >> 2) & 0xf) as usize,
            skip: word >> 8,
            head,
        }
    }

    fn store(&self, s: &State) {
        let mut head = [0u8; 8];
        head.copy_from_slice(&s.head[..8]);
        self.head.store(u64::from_le_bytes(head), Relaxed);
        self.state
            .store(s.mode | ((s.held as u64) << 2) | (s.skip << 8), Relaxed);
    }

    /// Whether this direction is known not to be HTTP/2 (the common case: one load).
    #[inline(always)]
    pub(crate) fn off(&self) -> bool {
        self.state.load(Relaxed) & 3 == OFF
    }

    /// Turns the direction off (bytes moved that the library could not read).
    pub(crate) fn lose(&self) {
        self.state.store(OFF, Relaxed);
    }

    /// Walks the bytes one call moved (`pieces` hands them over in order), starting at
    /// stream offset `offset`, and hands `found` each delimiting frame whose header ends
    /// in them.
    pub(crate) fn walk(
        &self,
        offset: u64,
        pieces: impl FnOnce(&mut dyn FnMut(&[u8])),
        found: &mut dyn FnMut(Frame),
    ) {
        let mut s = self.load();
        if s.mode == OFF {
            return;
        }
        if s.mode == UNKNOWN && offset != 0 {
            // Its start was not seen: where frames begin is not known.
            self.lose();
            return;
        }
        let mut at = offset;
        // The first bytes, to judge the direction by: judged once 24 are seen, or once
        // the call's bytes end.
        let mut first = [0u8; 24];
        let mut first_len = 0;
        pieces(&mut |bytes: &[u8]| {
            let mut bytes = bytes;
            if s.mode == UNKNOWN {
                let take = bytes.len().min(first.len() - first_len);
                first[first_len..first_len + take].copy_from_slice(&bytes[..take]);
                first_len += take;
                if first_len < first.len() {
                    return;
                }
                begin(&mut s, &mut at, &first, found);
                bytes = &bytes[take..];
            }
            if s.mode == FRAMED {
                step(&mut s, &mut at, bytes, found);
            }
        });
        if s.mode == UNKNOWN && first_len > 0 {
            begin(&mut s, &mut at, &first[..first_len], found);
        }
        self.store(&s);
    }
}

/// Judges a direction by its `first` bytes (the stream's start) and walks them.
fn begin(s: &mut State, at: &mut u64, first: &[u8], found: &mut dyn FnMut(Frame)) {
    s.mode = judge(first);
    if s.mode == FRAMED && PREFACE.starts_with(&first[..first.len().min(PREFACE.len())]) {
        s.skip = PREFACE.len() as u64;
    }
    *at = 0;
    if s.mode == FRAMED {
        step(s, at, first, found);
    }
}

/// A direction's first bytes: the preface (or its start), or a SETTINGS frame on stream 0.
fn judge(first: &[u8]) -> u64 {
    if !first.is_empty() && (first.starts_with(PREFACE) || PREFACE.starts_with(first)) {
        return FRAMED;
    }
    match first {
        [l0, l1, l2, SETTINGS, flags, s0, s1, s2, s3, ..] => {
            let length = u32::from_be_bytes([0, *l0, *l1, *l2]);
            let stream = u32::from_be_bytes([*s0, *s1, *s2, *s3]) & 0x7fff_ffff;
            let settings =
                stream == 0 && *flags <= 1 && length.is_multiple_of(6) && length <= 6 * 16;
            if settings {
                FRAMED
            } else {
                OFF
            }
        }
        _ => OFF,
    }
}

/// Walks `bytes`, which start at stream offset `*at`, header to header.
fn step(s: &mut State, at: &mut u64, bytes: &[u8], found: &mut dyn FnMut(Frame)) {
    let mut pos = 0;
    while pos < bytes.len() && s.mode == FRAMED {
        if s.skip > 0 {
            let take = s.skip.min((bytes.len() - pos) as u64);
            s.skip -= take;
            pos += take as usize;
            continue;
        }
        let take = (9 - s.held).min(bytes.len() - pos);
        s.head[s.held..s.held + take].copy_from_slice(&bytes[pos..pos + take]);
        s.held += take;
        pos += take;
        if s.held < 9 {
            break;
        }
        let h = s.head;
        let frame = Frame {
            start: *at + pos as u64 - 9,
            length: u32::from_be_bytes([0, h[0], h[1], h[2]]),
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
        };
        s.held = 0;
        if frame.kind > LAST_KIND {
            s.mode = OFF;
            break;
        }
        s.skip = u64::from(frame.length);
        let delimits = frame.kind == Frame::HEADERS || frame.ends_stream();
        if frame.stream != 0 && delimits {
            found(frame);
        }
    }
    *at += bytes.len() as u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: usize) -> Vec<u8> {
        let len = (payload as u32).to_be_bytes();
        let mut f = vec![len[1], len[2], len[3], kind, flags];
        f.extend_from_slice(&stream.to_be_bytes());
        f.extend(std::iter::repeat_n(0xab, payload));
        f
    }

    /// A client's side of two calls multiplexed on one connection.
    fn client_bytes() -> Vec<u8> {
        [
            PREFACE.to_vec(),
            frame(SETTINGS, 0, 0, 12),
            frame(Frame::HEADERS, 0x4, 1, 30),
            frame(Frame::HEADERS, 0x4, 3, 30),
            frame(Frame::DATA, 0, 1, 100),
            frame(8, 0, 0, 4), // WINDOW_UPDATE
            frame(Frame::DATA, Frame::END_STREAM, 3, 50),
            frame(Frame::DATA, Frame::END_STREAM, 1, 7),
        ]
        .concat()
    }

    fn walk_in(bytes: &[u8], cuts: &[usize]) -> Vec<Frame> {
        let framing = Framing::new();
        let mut found = Vec::new();
        let mut from = 0;
        for &to in cuts.iter().chain(std::iter::once(&bytes.len())) {
            let piece = &bytes[from..to];
            // Each call's bytes in two vectors, as writev hands them.
            let (a, b) = piece.split_at(piece.len() / 2);
            framing.walk(
                from as u64,
                |each| {
                    each(a);
                    each(b);
                },
                &mut |f| found.push(f),
            );
            from = to;
        }
        found
    }

    #[test]
    fn each_calls_headers_and_end_are_found_however_the_bytes_are_cut() {
        let bytes = client_bytes();
        let whole = walk_in(&bytes, &[]);
        let kinds: Vec<(u32, u8, bool)> = whole
            .iter()
            .map(|f| (f.stream, f.kind, f.ends_stream()))
            .collect();
        assert_eq!(
            kinds,
            [
                (1, Frame::HEADERS, false),
                (3, Frame::HEADERS, false),
                (3, Frame::DATA, true),
                (1, Frame::DATA, true)
            ]
        );
        // Offsets are the headers' own.
        for f in &whole {
            assert_eq!(&bytes[f.start as usize + 3], &f.kind, "{f:?}");
        }
        for cut in 1..bytes.len() {
            assert_eq!(walk_in(&bytes, &[cut]), whole, "cut at {cut}");
        }
        assert_eq!(walk_in(&bytes, &[5, 10, 23, 24, 40, 41, 60]), whole);
    }

    #[test]
    fn a_server_is_known_by_its_first_settings_and_other_bytes_are_not_framed() {
        let server = [
            frame(SETTINGS, 0, 0, 18),
            frame(Frame::HEADERS, 0x4, 1, 20),
            frame(Frame::HEADERS, 0x5, 1, 10),
        ]
        .concat();
        assert_eq!(walk_in(&server, &[]).len(), 2);
        assert!(walk_in(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", &[]).is_empty());
        // A connection seen first past its start is never framed.
        let framing = Framing::new();
        framing.walk(100, |each| each(&server), &mut |_| panic!("framed"));
        assert!(framing.off());
    }

    #[test]
    fn a_walk_that_lost_its_place_stops() {
        let mut bytes = client_bytes();
        // A header of no HTTP/2 type where one is due.
        let at = PREFACE.len() + 9 + 12 + 3;
        bytes[at] = 0xee;
        assert!(walk_in(&bytes, &[]).is_empty());
    }
}
