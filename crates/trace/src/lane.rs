//! Lanes: how finished spans travel from an application thread to the writer. Each
//! thread that finishes sampled spans owns one lane, a single-producer single-consumer
//! ring of fixed-size entries (`rtrb`): a span is copied into it as a few entries (its
//! ids and times, its name and trace state, its counts, then its text, attributes and
//! events) and committed at once with one release store, so the application's thread
//! takes no lock, does no atomic read-modify-write and allocates nothing; the span's
//! own buffers stay on that thread for the next span. The writer decodes the entries
//! into model spans. A span becomes these entries: its ids and raw times; its name, trace
//! state and counts; its text in 48-byte chunks (`TEXT_CHUNK`); a boxed rest for the rare
//! parts (a name or error of its own, links, messages, dropped counts); its attributes;
//! its events with theirs. A lane that is full drops the span and counts it, in counters
//! only the lane's own thread writes (so counting costs no atomic read-modify-write
//! either).

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use causeway_model::{
    Event, KeyValue, Link, Message, Source, Span, SpanId, SpanKind, Status, TraceId, Value,
};

use crate::clock::raw_to_unix;
use crate::propagation::TraceState;
use crate::record::Process;

/// Bytes of text per entry.
pub(crate) const TEXT_CHUNK: usize = 48;

/// A value as the hot path records it: text lives in the span's text (a byte range).
#[derive(Clone, Copy, Debug)]
pub(crate) enum RawValue {
    I64(i64),
    F64(f64),
    Bool(bool),
    Text(u32, u32),
}

/// A span event's name: the callsite's, or text of the span.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RawName {
    Static(&'static str),
    Text(u32, u32),
}

/// What a span is copied into: one span is `Head`, `Meta`, its text chunks,
/// its `Extra` if it has one, its attributes, then each event followed by its
/// attributes.
pub(crate) enum Entry {
    Head {
        // The trace id in halves: a u128 would align every entry to 16 bytes.
        trace_hi: u64,
        trace_lo: u64,
        span_id: SpanId,
        parent_id: Option<SpanId>,
        /// Raw counter readings (see `clock::now_raw`).
        start: u64,
        end: u64,
        execution_unit: u32,
        text_len: u32,
    },
    Meta {
        name: &'static str,
        trace_state: TraceState,
        probability: f64,
        counts: Counts,
    },
    Text([u8; TEXT_CHUNK]),
    Extra(Box<Extra>),
    Attr(&'static str, RawValue),
    Event {
        time: u64,
        name: RawName,
        attributes: u32,
    },
}

/// A span's counts and flags (attributes and events are capped below 65 536 by
/// `Config::max_annotations`).
#[derive(Clone, Copy)]
pub(crate) struct Counts {
    /// `u64::MAX`: not measured.
    pub(crate) cpu_time: u64,
    pub(crate) attributes: u16,
    pub(crate) events: u16,
    pub(crate) kind: SpanKind,
    pub(crate) ok: bool,
    pub(crate) extra: bool,
}

/// The rare parts of a span, boxed so that common spans stay small.
#[derive(Default)]
pub(crate) struct Extra {
    pub(crate) name: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) dropped_attributes: u32,
    pub(crate) dropped_events: u32,
    pub(crate) links: Vec<Link>,
    pub(crate) messages: Vec<Message>,
}

/// A lane's counters: written by its thread only (load and store, no read-modify-write),
/// summed by whoever asks for the statistics.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) recorded: AtomicU64,
    pub(crate) dropped: AtomicU64,
}

impl Counters {
    fn bump(counter: &AtomicU64, by: u64) {
        counter.store(counter.load(Ordering::Relaxed) + by, Ordering::Relaxed);
    }
}

/// The application thread's end of a lane.
pub(crate) struct Lane {
    producer: rtrb::Producer<Entry>,
    pub(crate) counters: Arc<Counters>,
    /// Entries written since the writer was last woken.
    unwoken: Cell<usize>,
}

impl Default for Entry {
    fn default() -> Entry {
        Entry::Text([0; TEXT_CHUNK])
    }
}

/// The writer's end of a lane.
pub(crate) struct Outlet {
    pub(crate) consumer: rtrb::Consumer<Entry>,
}

/// A new lane of `capacity` entries.
pub(crate) fn lane(capacity: usize) -> (Lane, Outlet) {
    let (producer, consumer) = rtrb::RingBuffer::new(capacity);
    (
        Lane {
            producer,
            counters: Arc::default(),
            unwoken: Cell::new(0),
        },
        Outlet { consumer },
    )
}

impl Lane {
    /// Commits the `n` entries of one span, or counts the span
    /// dropped when the lane has no room. True when the writer should be woken (a quarter
    /// of the lane has filled since it last was).
    pub(crate) fn send(&mut self, n: usize, entries: &mut impl Iterator<Item = Entry>) -> bool {
        Counters::bump(&self.counters.recorded, 1);
        match self.producer.write_chunk_uninit(n) {
            Ok(chunk) => {
                // Written in place (a store per entry, no read of the slot's old content).
                chunk.fill_from_iter(entries);
            }
            Err(_) => {
                Counters::bump(&self.counters.dropped, 1);
                return true;
            }
        }
        let unwoken = self.unwoken.get() + n;
        if unwoken >= self.producer.buffer().capacity() / 4 {
            self.unwoken.set(0);
            true
        } else {
            self.unwoken.set(unwoken);
            false
        }
    }
}

fn text_of(text: &str, from: u32, to: u32) -> String {
    text.get(from as usize..to as usize)
        .unwrap_or_default()
        .to_owned()
}

fn value_of(text: &str, v: RawValue) -> Value {
    match v {
        RawValue::I64(i) => Value::I64(i),
        RawValue::F64(f) => Value::F64(f),
        RawValue::Bool(b) => Value::Bool(b),
        RawValue::Text(a, b) => Value::Str(text_of(text, a, b)),
    }
}

impl Outlet {
    /// Decodes spans committed so far into `out`, `limit` at most; the number decoded.
    pub(crate) fn drain(&mut self, process: &Process, out: &mut Vec<Span>, limit: usize) -> usize {
        let n = self.consumer.slots();
        let Ok(chunk) = self.consumer.read_chunk(n) else {
            return 0;
        };
        // Entries not taken stay in the lane (they are whole spans).
        let mut entries = chunk.into_iter();
        let mut decoded = 0;
        while decoded < limit {
            match decode(&mut entries, process) {
                Some(span) => {
                    out.push(span);
                    decoded += 1;
                }
                None => {
                    // At the end, or an entry out of place (never written so): what is
                    // left is dropped rather than read as the start of a span later.
                    entries.for_each(drop);
                    break;
                }
            }
        }
        decoded
    }
}

/// The next span of `entries` (which hold whole spans only); `None` at their end.
fn decode(entries: &mut impl Iterator<Item = Entry>, process: &Process) -> Option<Span> {
    let Entry::Head {
        trace_hi,
        trace_lo,
        span_id,
        parent_id,
        start,
        end,
        execution_unit,
        text_len,
    } = entries.next()?
    else {
        return None;
    };
    let Entry::Meta {
        name,
        trace_state,
        probability,
        counts,
    } = entries.next()?
    else {
        return None;
    };
    let trace_id = TraceId::new((trace_hi as u128) << 64 | trace_lo as u128)?;
    let mut bytes = Vec::with_capacity(text_len as usize);
    while bytes.len() < text_len as usize {
        let Entry::Text(chunk) = entries.next()? else {
            return None;
        };
        let take = (text_len as usize - bytes.len()).min(TEXT_CHUNK);
        bytes.extend_from_slice(&chunk[..take]);
    }
    // The text was a `String` on the application's thread, cut into chunks here.
    let text = String::from_utf8(bytes)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
    let mut extra = if counts.extra {
        match entries.next()? {
            Entry::Extra(e) => *e,
            _ => return None,
        }
    } else {
        Extra::default()
    };
    let mut attributes = Vec::with_capacity(counts.attributes as usize);
    for _ in 0..counts.attributes {
        let Entry::Attr(key, value) = entries.next()? else {
            return None;
        };
        attributes.push(KeyValue {
            key: key.to_owned(),
            value: value_of(&text, value),
        });
    }
    let mut events = Vec::with_capacity(counts.events as usize);
    for _ in 0..counts.events {
        let Entry::Event {
            time,
            name,
            attributes: n,
        } = entries.next()?
        else {
            return None;
        };
        let mut attributes = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let Entry::Attr(key, value) = entries.next()? else {
                return None;
            };
            attributes.push(KeyValue {
                key: key.to_owned(),
                value: value_of(&text, value),
            });
        }
        events.push(Event {
            // Each reading converts by the clock segment it was taken in, so times of spans
            // converted in any order keep the order they were taken in.
            time: raw_to_unix(time),
            name: match name {
                RawName::Static(n) => n.to_owned(),
                RawName::Text(a, b) => text_of(&text, a, b),
            },
            attributes,
        });
    }
    let status = match (extra.error.take(), counts.ok) {
        (Some(m), _) => Status::Error(m),
        (None, true) => Status::Ok,
        (None, false) => Status::Unset,
    };
    Some(Span {
        trace_id,
        span_id,
        parent_id,
        name: extra.name.take().unwrap_or_else(|| name.to_owned()),
        kind: counts.kind,
        service: process.service.clone(),
        host: process.host.clone(),
        pid: process.pid,
        execution_unit: execution_unit as u64,
        start: raw_to_unix(start),
        end: raw_to_unix(end),
        status,
        attributes,
        events,
        links: extra.links,
        messages: extra.messages,
        cpu_time: (counts.cpu_time != u64::MAX).then_some(counts.cpu_time),
        sampling_probability: probability,
        dropped_attributes: extra.dropped_attributes,
        dropped_events: extra.dropped_events,
        trace_state: if trace_state.is_empty() {
            String::new()
        } else {
            trace_state.header()
        },
        source: Source::Instrumented,
    })
}
