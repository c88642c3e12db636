//! The native span-log record: compact, versioned binary, one span per record.
//!
//! ```text
//! record  := magic:[0xC5 0x77] len:u32le crc32:u32le payload[len]
//! payload := version:u8 (=1) span-fields
//! ```
//! Integers are LEB128 varints, strings are varint-length-prefixed UTF-8, times after the
//! start are wrapping deltas from it. The checksum (CRC-32, IEEE) covers the payload, so a
//! torn or corrupt record is detected and skipped; the magic lets a reader find the next
//! good record after damage in the middle of a file. Records concatenate: a span-log segment
//! file, a WAL segment and a native batch are all a plain sequence of records.
//!
//! `decode_stream` skips and reports damage by byte offset (a torn tail, corrupt bytes, a
//! record that does not decode) and resynchronises on the magic; its `complete` says how far
//! a tailing reader may advance. A record longer than 16 MiB (`MAX_RECORD_LEN`) is treated
//! as corrupt.

use std::sync::Arc;

use crate::ids::{SpanId, TraceId};
use crate::span::{
    Direction, Event, KeyValue, Link, Message, Source, Span, SpanKind, Status, Value,
};

/// The two bytes that open every record.
pub const MAGIC: [u8; 2] = [0xC5, 0x77];
/// Bytes before the payload: magic, length, checksum.
pub const HEADER_LEN: usize = 10;
/// The payload version this code writes.
pub const VERSION: u8 = 1;
/// Records longer than this are treated as corrupt.
pub const MAX_RECORD_LEN: usize = 16 << 20;
/// Arrays nest at most this deep in a record.
pub const MAX_VALUE_DEPTH: usize = 16;

/// Why a record's payload could not be decoded, naming the field and its byte offset
/// within the payload.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid native record: {reason} in field {field} at payload byte {offset}")]
pub struct DecodeError {
    /// The field being read.
    pub field: &'static str,
    /// Byte offset within the payload.
    pub offset: usize,
    /// What was wrong.
    pub reason: String,
}

/// Damage found while reading a sequence of records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The input ends inside a record (a torn write); the partial record was skipped.
    TornTail {
        /// Where the partial record starts.
        offset: usize,
        /// How many bytes of it are present.
        present: usize,
    },
    /// Bytes that are not a valid record (bad magic, length or checksum) were skipped.
    Corrupt {
        /// Where the damage starts.
        offset: usize,
        /// How many bytes were skipped to the next good record (or the end).
        skipped: usize,
        /// What was wrong.
        reason: String,
    },
    /// A record with a good checksum whose payload could not be decoded was skipped.
    Invalid {
        /// Where the record starts.
        offset: usize,
        /// Why it could not be decoded.
        error: DecodeError,
    },
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::TornTail { offset, present } => write!(
                f,
                "truncated record at byte {offset} ({present} bytes present) skipped"
            ),
            Problem::Corrupt {
                offset,
                skipped,
                reason,
            } => write!(
                f,
                "corrupt data at byte {offset}: {reason}; skipped {skipped} bytes"
            ),
            Problem::Invalid { offset, error } => write!(f, "record at byte {offset}: {error}"),
        }
    }
}

/// What reading a sequence of records produced.
#[derive(Debug, Default)]
pub struct Decoded {
    /// The spans of every good record, in order.
    pub spans: Vec<Span>,
    /// Damage found and skipped.
    pub problems: Vec<Problem>,
    /// Bytes up to the end of the last complete record (or skipped damage). A reader that
    /// tails a growing file resumes here; a torn tail lies beyond it.
    pub complete: usize,
}

/// Appends one record holding `span` to `out`.
pub fn encode(span: &Span, out: &mut Vec<u8>) {
    let at = out.len();
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&[0; 8]);
    let body = out.len();
    encode_payload(span, out);
    let len = (out.len() - body) as u32;
    let crc = crc32fast::hash(&out[body..]);
    out[at + 2..at + 6].copy_from_slice(&len.to_le_bytes());
    out[at + 6..at + 10].copy_from_slice(&crc.to_le_bytes());
}

/// Appends the payload of a record holding `span` (no header: a store that frames its
/// own rows keeps only this), read back with [`decode_payload`].
pub fn encode_payload(span: &Span, out: &mut Vec<u8>) {
    out.push(VERSION);
    write_span(span, out);
}

/// Encodes many spans into one buffer of records.
pub fn encode_all<'a>(spans: impl IntoIterator<Item = &'a Span>) -> Vec<u8> {
    let mut out = Vec::new();
    for s in spans {
        encode(s, &mut out);
    }
    out
}

/// Decodes one payload (the bytes after the header).
pub fn decode_payload(payload: &[u8]) -> Result<Span, DecodeError> {
    decode_payload_with(payload, true)
}

/// Like [`decode_payload`], but the attributes of the span, its events and its links are
/// read past (their framing checked), not kept: several allocations fewer per span for readers that
/// only need a span's structure, events and messages. The few that are structure are kept:
/// those marking log records and where they go ([`crate::logs`]).
pub fn decode_payload_without_attributes(payload: &[u8]) -> Result<Span, DecodeError> {
    decode_payload_with(payload, false)
}

/// Attributes kept even by [`decode_payload_without_attributes`].
const STRUCTURAL_KEYS: [&str; 2] = [crate::logs::EVENT_SOURCE, crate::logs::UNPLACED];

fn decode_payload_with(payload: &[u8], keep_attributes: bool) -> Result<Span, DecodeError> {
    let mut r = Reader {
        buf: payload,
        pos: 0,
        keep_attributes,
    };
    let version = r.u8("version")?;
    if version != VERSION {
        return Err(DecodeError {
            field: "version",
            offset: 0,
            reason: format!("unsupported version {version} (this reader knows {VERSION})"),
        });
    }
    let span = read_span(&mut r)?;
    if r.pos != payload.len() {
        return Err(r.err("end", format!("{} trailing bytes", payload.len() - r.pos)));
    }
    Ok(span)
}

/// Reads every record in `buf`, skipping and reporting damage. Never panics.
pub fn decode_stream(buf: &[u8]) -> Decoded {
    let mut out = Decoded::default();
    let mut pos = 0;
    while pos < buf.len() {
        let rest = &buf[pos..];
        if rest.len() < HEADER_LEN {
            if MAGIC.starts_with(&rest[..rest.len().min(2)]) {
                out.problems.push(Problem::TornTail {
                    offset: pos,
                    present: rest.len(),
                });
                return out;
            }
            let skipped = resync(buf, pos);
            out.problems.push(Problem::Corrupt {
                offset: pos,
                skipped,
                reason: "bytes that do not start a record".into(),
            });
            pos += skipped;
            out.complete = pos;
            continue;
        }
        if rest[..2] != MAGIC {
            let skipped = resync(buf, pos);
            out.problems.push(Problem::Corrupt {
                offset: pos,
                skipped,
                reason: "missing record magic".into(),
            });
            pos += skipped;
            out.complete = pos;
            continue;
        }
        let len = u32::from_le_bytes([rest[2], rest[3], rest[4], rest[5]]) as usize;
        let crc = u32::from_le_bytes([rest[6], rest[7], rest[8], rest[9]]);
        if len == 0 || len > MAX_RECORD_LEN {
            let skipped = resync(buf, pos);
            out.problems.push(Problem::Corrupt {
                offset: pos,
                skipped,
                reason: format!("record length {len} out of range"),
            });
            pos += skipped;
            out.complete = pos;
            continue;
        }
        if rest.len() < HEADER_LEN + len {
            // Either a torn write or a corrupt length; a later good record tells which.
            let skipped = resync(buf, pos);
            if pos + skipped >= buf.len() {
                out.problems.push(Problem::TornTail {
                    offset: pos,
                    present: rest.len(),
                });
                return out;
            }
            out.problems.push(Problem::Corrupt {
                offset: pos,
                skipped,
                reason: format!("record length {len} runs past the data"),
            });
            pos += skipped;
            out.complete = pos;
            continue;
        }
        let payload = &rest[HEADER_LEN..HEADER_LEN + len];
        if crc32fast::hash(payload) != crc {
            let skipped = resync(buf, pos);
            out.problems.push(Problem::Corrupt {
                offset: pos,
                skipped,
                reason: "checksum mismatch".into(),
            });
            pos += skipped;
            out.complete = pos;
            continue;
        }
        match decode_payload(payload) {
            Ok(span) => out.spans.push(span),
            Err(error) => out.problems.push(Problem::Invalid { offset: pos, error }),
        }
        pos += HEADER_LEN + len;
        out.complete = pos;
    }
    out
}

// Bytes from `pos` to the next offset that starts a record with a good checksum (or the end).
fn resync(buf: &[u8], pos: usize) -> usize {
    let mut at = pos + 1;
    while at + HEADER_LEN <= buf.len() {
        if buf[at..at + 2] == MAGIC {
            let len =
                u32::from_le_bytes([buf[at + 2], buf[at + 3], buf[at + 4], buf[at + 5]]) as usize;
            let crc = u32::from_le_bytes([buf[at + 6], buf[at + 7], buf[at + 8], buf[at + 9]]);
            if len > 0
                && len <= MAX_RECORD_LEN
                && at + HEADER_LEN + len <= buf.len()
                && crc32fast::hash(&buf[at + HEADER_LEN..at + HEADER_LEN + len]) == crc
            {
                return at - pos;
            }
        }
        at += 1;
    }
    buf.len() - pos
}

/// Appends `v` as a LEB128 varint.
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// `v` zigzag-encoded, so small negative numbers make short varints.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Bool(b) => {
            out.push(0);
            out.push(*b as u8);
        }
        Value::I64(i) => {
            out.push(1);
            put_varint(out, zigzag(*i));
        }
        Value::F64(f) => {
            out.push(2);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Value::Str(s) => {
            out.push(3);
            put_str(out, s);
        }
        Value::Bytes(b) => {
            out.push(4);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::Array(a) => {
            out.push(5);
            put_varint(out, a.len() as u64);
            for v in a {
                put_value(out, v);
            }
        }
    }
}

fn put_attrs(out: &mut Vec<u8>, attrs: &[KeyValue]) {
    put_varint(out, attrs.len() as u64);
    for kv in attrs {
        put_str(out, &kv.key);
        put_value(out, &kv.value);
    }
}

fn write_span(s: &Span, out: &mut Vec<u8>) {
    out.extend_from_slice(&s.trace_id.to_bytes());
    out.extend_from_slice(&s.span_id.to_bytes());
    out.extend_from_slice(&s.parent_id.map(|p| p.get()).unwrap_or(0).to_be_bytes());
    put_str(out, &s.name);
    out.push(match s.kind {
        SpanKind::Internal => 0,
        SpanKind::Server => 1,
        SpanKind::Client => 2,
        SpanKind::Producer => 3,
        SpanKind::Consumer => 4,
    });
    put_str(out, &s.service);
    put_str(out, &s.host);
    put_varint(out, s.pid as u64);
    put_varint(out, s.execution_unit);
    put_varint(out, s.start);
    put_varint(out, s.end.wrapping_sub(s.start));
    match &s.status {
        Status::Unset => out.push(0),
        Status::Ok => out.push(1),
        Status::Error(m) => {
            out.push(2);
            put_str(out, m);
        }
    }
    put_attrs(out, &s.attributes);
    put_varint(out, s.events.len() as u64);
    for e in &s.events {
        put_varint(out, e.time.wrapping_sub(s.start));
        put_str(out, &e.name);
        put_attrs(out, &e.attributes);
    }
    put_varint(out, s.links.len() as u64);
    for l in &s.links {
        out.extend_from_slice(&l.trace_id.to_bytes());
        out.extend_from_slice(&l.span_id.to_bytes());
        put_attrs(out, &l.attributes);
    }
    put_varint(out, s.messages.len() as u64);
    for m in &s.messages {
        out.push(match m.direction {
            Direction::Send => 0,
            Direction::Recv => 1,
        });
        put_varint(out, m.id);
        put_varint(out, m.time.wrapping_sub(s.start));
        match &m.peer {
            Some(p) => {
                out.push(1);
                put_str(out, p);
            }
            None => out.push(0),
        }
        match m.size {
            Some(z) => {
                out.push(1);
                put_varint(out, z);
            }
            None => out.push(0),
        }
    }
    match s.cpu_time {
        Some(c) => {
            out.push(1);
            put_varint(out, c);
        }
        None => out.push(0),
    }
    out.extend_from_slice(&s.sampling_probability.to_le_bytes());
    put_varint(out, s.dropped_attributes as u64);
    put_varint(out, s.dropped_events as u64);
    put_str(out, &s.trace_state);
    match s.source {
        Source::Instrumented => out.push(0),
        Source::Imported => out.push(1),
        Source::Inferred { confidence } => {
            out.push(2);
            out.extend_from_slice(&confidence.to_le_bytes());
        }
        Source::Logs => out.push(3),
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// False: `attrs` reads past attribute lists and gives them empty.
    keep_attributes: bool,
}

impl<'a> Reader<'a> {
    fn err(&self, field: &'static str, reason: impl Into<String>) -> DecodeError {
        DecodeError {
            field,
            offset: self.pos,
            reason: reason.into(),
        }
    }
    fn take(&mut self, field: &'static str, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() - self.pos < n {
            return Err(self.err(
                field,
                format!("needs {n} bytes, {} left", self.buf.len() - self.pos),
            ));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(field, 1)?[0])
    }
    fn flag(&mut self, field: &'static str) -> Result<bool, DecodeError> {
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            v => {
                self.pos -= 1;
                Err(self.err(field, format!("flag byte {v} is neither 0 nor 1")))
            }
        }
    }
    fn varint(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let start = self.pos;
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8(field)?;
            if shift == 63 && b > 1 {
                self.pos = start;
                return Err(self.err(field, "varint overflows 64 bits"));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        self.pos = start;
        Err(self.err(field, "varint longer than 10 bytes"))
    }
    fn u32v(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let at = self.pos;
        let v = self.varint(field)?;
        u32::try_from(v).map_err(|_| DecodeError {
            field,
            offset: at,
            reason: format!("{v} does not fit 32 bits"),
        })
    }
    fn count(&mut self, field: &'static str) -> Result<usize, DecodeError> {
        let at = self.pos;
        let n = self.varint(field)?;
        // Every element takes at least one byte, so a larger count is corrupt; checking
        // here keeps a bad count from allocating gigabytes.
        if n > (self.buf.len() - self.pos) as u64 {
            return Err(DecodeError {
                field,
                offset: at,
                reason: format!(
                    "count {n} exceeds the {} bytes left",
                    self.buf.len() - self.pos
                ),
            });
        }
        Ok(n as usize)
    }
    fn str(&mut self, field: &'static str) -> Result<String, DecodeError> {
        let n = self.count(field)?;
        let at = self.pos;
        let b = self.take(field, n)?;
        String::from_utf8(b.to_vec()).map_err(|e| DecodeError {
            field,
            offset: at + e.utf8_error().valid_up_to(),
            reason: "invalid UTF-8".into(),
        })
    }
    /// A string as a shared one; the empty string (a block's detail leaves service and
    /// host empty) is one allocation for the whole process.
    fn shared_str(&mut self, field: &'static str) -> Result<Arc<str>, DecodeError> {
        static EMPTY: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
        let s = self.str(field)?;
        if s.is_empty() {
            return Ok(EMPTY.get_or_init(|| Arc::from("")).clone());
        }
        Ok(s.into())
    }
    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let b = self.take(field, N)?;
        let mut a = [0u8; N];
        a.copy_from_slice(b);
        Ok(a)
    }
    fn trace_id(&mut self, field: &'static str) -> Result<TraceId, DecodeError> {
        let at = self.pos;
        let b: [u8; 16] = self.array(field)?;
        TraceId::new(u128::from_be_bytes(b)).ok_or(DecodeError {
            field,
            offset: at,
            reason: "zero trace id".into(),
        })
    }
    fn span_id(&mut self, field: &'static str) -> Result<Option<SpanId>, DecodeError> {
        let b: [u8; 8] = self.array(field)?;
        Ok(SpanId::new(u64::from_be_bytes(b)))
    }
    fn value(&mut self, depth: usize) -> Result<Value, DecodeError> {
        let at = self.pos;
        Ok(match self.u8("attribute.value")? {
            0 => Value::Bool(self.flag("attribute.value.bool")?),
            1 => Value::I64(unzigzag(self.varint("attribute.value.i64")?)),
            2 => Value::F64(f64::from_le_bytes(self.array("attribute.value.f64")?)),
            3 => Value::Str(self.str("attribute.value.str")?),
            4 => {
                let n = self.count("attribute.value.bytes")?;
                Value::Bytes(self.take("attribute.value.bytes", n)?.to_vec())
            }
            5 => {
                if depth >= MAX_VALUE_DEPTH {
                    return Err(self.err("attribute.value.array", "arrays nested too deep"));
                }
                let n = self.count("attribute.value.array")?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.value(depth + 1)?);
                }
                Value::Array(v)
            }
            t => {
                return Err(DecodeError {
                    field: "attribute.value",
                    offset: at,
                    reason: format!("unknown value tag {t}"),
                })
            }
        })
    }
    /// Reads past one value, checking its shape as `value` does.
    fn skip_value(&mut self, depth: usize) -> Result<(), DecodeError> {
        let at = self.pos;
        match self.u8("attribute.value")? {
            0 => self.flag("attribute.value.bool").map(drop),
            1 => self.varint("attribute.value.i64").map(drop),
            2 => self.take("attribute.value.f64", 8).map(drop),
            tag @ (3 | 4) => {
                let field = if tag == 3 {
                    "attribute.value.str"
                } else {
                    "attribute.value.bytes"
                };
                let n = self.count(field)?;
                self.take(field, n).map(drop)
            }
            5 => {
                if depth >= MAX_VALUE_DEPTH {
                    return Err(self.err("attribute.value.array", "arrays nested too deep"));
                }
                for _ in 0..self.count("attribute.value.array")? {
                    self.skip_value(depth + 1)?;
                }
                Ok(())
            }
            t => Err(DecodeError {
                field: "attribute.value",
                offset: at,
                reason: format!("unknown value tag {t}"),
            }),
        }
    }
    fn attrs(&mut self, field: &'static str) -> Result<Vec<KeyValue>, DecodeError> {
        let n = self.count(field)?;
        if !self.keep_attributes {
            // Only the attributes that say what a span or event is (a log record and where
            // it goes) are kept: a trace's structure depends on them.
            let mut kept = Vec::new();
            for _ in 0..n {
                let len = self.count("attribute.key")?;
                let key = self.take("attribute.key", len)?;
                if STRUCTURAL_KEYS.iter().any(|k| k.as_bytes() == key) {
                    let key = String::from_utf8_lossy(key).into_owned();
                    let value = self.value(0)?;
                    kept.push(KeyValue { key, value });
                } else {
                    self.skip_value(0)?;
                }
            }
            return Ok(kept);
        }
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let key = self.str("attribute.key")?;
            let value = self.value(0)?;
            v.push(KeyValue { key, value });
        }
        Ok(v)
    }
}

fn read_span(r: &mut Reader<'_>) -> Result<Span, DecodeError> {
    let trace_id = r.trace_id("trace_id")?;
    let at = r.pos;
    let span_id = r.span_id("span_id")?.ok_or(DecodeError {
        field: "span_id",
        offset: at,
        reason: "zero span id".into(),
    })?;
    let parent_id = r.span_id("parent_id")?;
    let name = r.str("name")?;
    let at = r.pos;
    let kind = match r.u8("kind")? {
        0 => SpanKind::Internal,
        1 => SpanKind::Server,
        2 => SpanKind::Client,
        3 => SpanKind::Producer,
        4 => SpanKind::Consumer,
        k => {
            return Err(DecodeError {
                field: "kind",
                offset: at,
                reason: format!("unknown kind {k}"),
            })
        }
    };
    let service = r.shared_str("service")?;
    let host = r.shared_str("host")?;
    let pid = r.u32v("pid")?;
    let execution_unit = r.varint("execution_unit")?;
    let start = r.varint("start")?;
    let end = start.wrapping_add(r.varint("end")?);
    let at = r.pos;
    let status = match r.u8("status")? {
        0 => Status::Unset,
        1 => Status::Ok,
        2 => Status::Error(r.str("status.message")?),
        s => {
            return Err(DecodeError {
                field: "status",
                offset: at,
                reason: format!("unknown status {s}"),
            })
        }
    };
    let attributes = r.attrs("attributes")?;
    let n = r.count("events")?;
    let mut events = Vec::with_capacity(n);
    for _ in 0..n {
        let time = start.wrapping_add(r.varint("events.time")?);
        let name = r.str("events.name")?;
        let attributes = r.attrs("events.attributes")?;
        events.push(Event {
            time,
            name,
            attributes,
        });
    }
    let n = r.count("links")?;
    let mut links = Vec::with_capacity(n);
    for _ in 0..n {
        let trace_id = r.trace_id("links.trace_id")?;
        let at = r.pos;
        let span_id = r.span_id("links.span_id")?.ok_or(DecodeError {
            field: "links.span_id",
            offset: at,
            reason: "zero span id".into(),
        })?;
        let attributes = r.attrs("links.attributes")?;
        links.push(Link {
            trace_id,
            span_id,
            attributes,
        });
    }
    let n = r.count("messages")?;
    let mut messages = Vec::with_capacity(n);
    for _ in 0..n {
        let at = r.pos;
        let direction = match r.u8("messages.direction")? {
            0 => Direction::Send,
            1 => Direction::Recv,
            d => {
                return Err(DecodeError {
                    field: "messages.direction",
                    offset: at,
                    reason: format!("unknown direction {d}"),
                })
            }
        };
        let id = r.varint("messages.id")?;
        let time = start.wrapping_add(r.varint("messages.time")?);
        let peer = if r.flag("messages.peer")? {
            Some(r.str("messages.peer")?)
        } else {
            None
        };
        let size = if r.flag("messages.size")? {
            Some(r.varint("messages.size")?)
        } else {
            None
        };
        messages.push(Message {
            direction,
            id,
            time,
            peer,
            size,
        });
    }
    let cpu_time = if r.flag("cpu_time")? {
        Some(r.varint("cpu_time")?)
    } else {
        None
    };
    let sampling_probability = f64::from_le_bytes(r.array("sampling_probability")?);
    let dropped_attributes = r.u32v("dropped_attributes")?;
    let dropped_events = r.u32v("dropped_events")?;
    let trace_state = r.str("trace_state")?;
    let at = r.pos;
    let source = match r.u8("source")? {
        0 => Source::Instrumented,
        1 => Source::Imported,
        2 => Source::Inferred {
            confidence: f32::from_le_bytes(r.array("source.confidence")?),
        },
        3 => Source::Logs,
        s => {
            return Err(DecodeError {
                field: "source",
                offset: at,
                reason: format!("unknown source {s}"),
            })
        }
    };
    Ok(Span {
        trace_id,
        span_id,
        parent_id,
        name,
        kind,
        service,
        host,
        pid,
        execution_unit,
        start,
        end,
        status,
        attributes,
        events,
        links,
        messages,
        cpu_time,
        sampling_probability,
        dropped_attributes,
        dropped_events,
        trace_state,
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::strategies;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn every_span_round_trips(spans in proptest::collection::vec(strategies::span(), 1..6)) {
            let buf = encode_all(&spans);
            let d = decode_stream(&buf);
            prop_assert!(d.problems.is_empty(), "{:?}", d.problems);
            prop_assert_eq!(d.complete, buf.len());
            prop_assert_eq!(d.spans, spans);
        }

        #[test]
        fn decoding_without_attributes_gives_the_span_with_only_its_structural_attributes(
            mut span in strategies::span(),
            cut in any::<prop::sample::Index>(),
            log_line in any::<bool>(),
        ) {
            if log_line {
                span.events.push(crate::logs::log_event(span.start, "a line".into(), Some("INFO"), vec![]));
                span.attributes.push(KeyValue::new(crate::logs::UNPLACED, true));
            }
            let mut buf = Vec::new();
            encode(&span, &mut buf);
            let payload = &buf[HEADER_LEN..];
            let mut want = span.clone();
            let structural = |a: &KeyValue| STRUCTURAL_KEYS.contains(&a.key.as_str());
            want.attributes.retain(structural);
            for e in &mut want.events {
                e.attributes.retain(structural);
            }
            for l in &mut want.links {
                l.attributes.retain(structural);
            }
            if log_line {
                prop_assert_eq!(want.attributes.len(), 1);
                prop_assert!(crate::logs::is_log_event(want.events.last().unwrap()));
            }
            prop_assert_eq!(decode_payload_without_attributes(payload), Ok(want));
            // A cut payload fails in both modes, never panics.
            let short = &payload[..cut.index(payload.len())];
            prop_assert!(decode_payload_without_attributes(short).is_err());
            prop_assert!(decode_payload(short).is_err());
        }

        #[test]
        fn a_torn_tail_is_skipped_and_reported_never_misread(
            spans in proptest::collection::vec(strategies::span(), 2..5),
            cut in 1usize..200,
        ) {
            let whole = encode_all(&spans[..spans.len() - 1]);
            let mut buf = whole.clone();
            let mut last = Vec::new();
            encode(&spans[spans.len() - 1], &mut last);
            let keep = last.len() - cut.min(last.len() - 1);
            buf.extend_from_slice(&last[..keep]);
            let d = decode_stream(&buf);
            prop_assert_eq!(&d.spans[..], &spans[..spans.len() - 1]);
            prop_assert_eq!(d.complete, whole.len());
            prop_assert_eq!(d.problems.len(), 1);
            let torn = matches!(d.problems[0], Problem::TornTail { offset, .. } if offset == whole.len());
            prop_assert!(torn, "{:?}", d.problems);
        }

        #[test]
        fn a_flipped_byte_loses_at_most_its_own_record(
            spans in proptest::collection::vec(strategies::span(), 3..6),
            which in any::<prop::sample::Index>(),
            bit in 0u8..8,
        ) {
            let buf = encode_all(&spans);
            let mut bad = buf.clone();
            let i = which.index(bad.len());
            bad[i] ^= 1 << bit;
            let d = decode_stream(&bad);
            // Every decoded span is one that was written, in order, and all but one survive.
            prop_assert!(d.spans.len() + 1 >= spans.len(), "lost {} of {}", spans.len() - d.spans.len(), spans.len());
            let mut it = spans.iter();
            for s in &d.spans {
                prop_assert!(it.any(|w| w == s), "decoded a span that was never written");
            }
            if d.spans.len() < spans.len() {
                prop_assert!(!d.problems.is_empty());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let d = decode_stream(&bytes);
            prop_assert!(d.complete <= bytes.len());
        }
    }

    #[test]
    fn an_unknown_version_is_reported_with_its_field() {
        let s = crate::Span::new(
            crate::TraceId::new(1).unwrap(),
            crate::SpanId::new(2).unwrap(),
            None,
            "x",
            "svc",
            10,
            20,
        );
        let mut buf = Vec::new();
        encode(&s, &mut buf);
        buf[HEADER_LEN] = 9;
        let crc = crc32fast::hash(&buf[HEADER_LEN..]);
        buf[6..10].copy_from_slice(&crc.to_le_bytes());
        let d = decode_stream(&buf);
        assert!(d.spans.is_empty());
        let Problem::Invalid { error, .. } = &d.problems[0] else {
            panic!("{:?}", d.problems)
        };
        assert_eq!(error.field, "version");
        assert!(
            error.to_string().contains("unsupported version 9"),
            "{error}"
        );
    }
}
