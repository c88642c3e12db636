//! Clock-skew correction. Hosts' clocks disagree, so a server span can seem to start
//! before the client span that called it. Spans of one host share its clock; each edge into
//! another host bounds that host's clock offset, and each host's spans in the trace are
//! shifted by one offset that fits, or by none when its times already fit.
//!
//! What an edge says: a server received its request after its client sent it and before
//! the client had its answer, so the server's start lies within the client span. That is
//! all: a server may go on after it answered (a write finished in the background), so its
//! end bounds nothing, and async work that outlives its client is never read as skew. A
//! consumer starts after its producer (a bound from below only).
//!
//! Offsets are relative to the host of the trace's main root, and found host by host going
//! down the tree: a host's offset satisfies every edge into it from hosts already fixed.
//! When the bounds allow 0, no shift is applied. Otherwise the server is centred in its
//! client when it fits in it (equal network time each way, as Zipkin and Jaeger assume),
//! else its start is put midway in the client; with only lower bounds (messaging) it moves
//! just far enough. Each offset applied carries the reason, in words.

use std::collections::{HashMap, VecDeque};

use causeway_model::{Span, SpanKind, Trace};
use serde::{Deserialize, Serialize};

use crate::main_root;

/// The shift applied to one host's spans.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClockOffset {
    /// The host (or the service, for spans without a host): one clock.
    pub host: String,
    /// Nanoseconds added to the host's times.
    pub offset_ns: i64,
    /// How many parent-child edges into this host bounded the offset.
    pub edges: u32,
    /// Why an offset other than 0 was applied: the edge that ruled 0 out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A trace with skew-corrected times, and the offsets applied.
#[derive(Debug, Clone)]
pub struct Adjusted {
    /// The trace with every span (and its events and messages) shifted by its host's offset.
    pub trace: Trace,
    /// One entry per host whose offset was bounded by an edge, sorted by host; hosts
    /// without one keep their times.
    pub offsets: Vec<ClockOffset>,
}

impl Adjusted {
    /// The offset applied to a span of this trace (0 for hosts not shifted).
    pub fn offset_of(&self, span: &Span) -> i64 {
        let domain = clock_domain(span);
        self.offsets
            .iter()
            .find(|o| o.host == domain)
            .map_or(0, |o| o.offset_ns)
    }

    /// True when some host's times were shifted.
    pub fn shifted(&self) -> bool {
        self.offsets.iter().any(|o| o.offset_ns != 0)
    }
}

/// The clock a span's times come from: its host, or its service when no host is recorded.
pub fn clock_domain(span: &Span) -> &str {
    if span.host.is_empty() {
        &span.service
    } else {
        &span.host
    }
}

/// The allowed offsets for one host, narrowed edge by edge.
struct Bounds {
    /// Its spans start no earlier than their parents (server: client; consumer: producer).
    low: i128,
    /// A server starts before its client ends.
    high: Option<i128>,
    /// A server that fits in its client ends before the client does; `None` once a server
    /// longer than its client was seen (it may have outlived it).
    fit: Option<i128>,
    edges: u32,
    /// The edges (parent, child) that set `low` and `high`: put in words only for the
    /// reason given, since a host may have a million edges.
    low_edge: (usize, usize),
    high_edge: (usize, usize),
}

impl Bounds {
    fn offset(&self) -> i128 {
        match self.high {
            Some(high) if self.low <= 0 && 0 <= high => 0,
            // Inverted bounds (servers that disagree) land in the middle, which splits the
            // violation evenly.
            Some(high) if self.low > high => self.low + (high - self.low) / 2,
            Some(high) => match self.fit {
                // Centred in the client: equal network time each way.
                Some(fit) if fit >= self.low => self.low + (fit - self.low) / 2,
                _ => self.low + (high - self.low) / 2,
            },
            None => self.low.max(0),
        }
    }

    /// Why the offset is not 0, in words of `trace`'s spans.
    fn reason(&self, offset: i128, trace: &Trace) -> Option<String> {
        if offset == 0 {
            return None;
        }
        Some(match self.high {
            Some(high) if high < 0 => high_edge(trace, self.high_edge, high),
            _ if self.low > 0 => low_edge(trace, self.low_edge, self.low),
            Some(high) => high_edge(trace, self.high_edge, high),
            None => low_edge(trace, self.low_edge, self.low),
        })
    }
}

/// A child that started before its parent, by `low`.
fn low_edge(trace: &Trace, (p, c): (usize, usize), low: i128) -> String {
    let (ps, cs) = (&trace.spans[p], &trace.spans[c]);
    format!(
        "{} {:?} on {} started {} before its parent {:?} on {} began",
        cs.kind.as_str(),
        cs.name,
        clock_domain(cs),
        ms(low),
        ps.name,
        clock_domain(ps)
    )
}

/// A server that started after its client had its answer, by `-high`.
fn high_edge(trace: &Trace, (p, c): (usize, usize), high: i128) -> String {
    let (ps, cs) = (&trace.spans[p], &trace.spans[c]);
    format!(
        "server {:?} on {} started {} after its client {:?} on {} had its answer",
        cs.name,
        clock_domain(cs),
        ms(-high),
        ps.name,
        clock_domain(ps)
    )
}

fn ms(ns: i128) -> String {
    format!("{:.3} ms", ns as f64 / 1e6)
}

/// Corrects the trace's clock skew.
pub fn correct(trace: &Trace) -> Adjusted {
    correct_owned(trace.clone())
}

/// [`correct`], taking the trace: when every clock agrees, it is given back as it is,
/// with no copy and no reassembly (a million spans take a second to reassemble).
pub fn correct_owned(trace: Trace) -> Adjusted {
    let (shifts, offsets) = estimate(&trace);
    if shifts.iter().all(|&by| by == 0) {
        return Adjusted { trace, offsets };
    }
    let id = trace.trace_id;
    let spans = trace.spans.into_iter().zip(shifts).map(|(mut s, by)| {
        shift(&mut s, by);
        s
    });
    Adjusted {
        trace: Trace::assemble(id, spans.collect::<Vec<_>>()),
        offsets,
    }
}

/// Each span's shift, and the offsets of the hosts bounded by an edge.
fn estimate(trace: &Trace) -> (Vec<i128>, Vec<ClockOffset>) {
    let mut fixed: HashMap<&str, i128> = HashMap::new();
    let mut bound_by: HashMap<&str, (u32, Option<String>)> = HashMap::new();
    let mut queue = VecDeque::new();
    if let Some(r) = main_root(trace) {
        let d = clock_domain(&trace.spans[r]);
        fixed.insert(d, 0);
        queue.push_back(d);
    }
    // Edges that cross clocks, by the parent's clock.
    let mut crossing: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for (c, p) in trace.parent.iter().enumerate() {
        if let Some(p) = *p {
            let (dp, dc) = (clock_domain(&trace.spans[p]), clock_domain(&trace.spans[c]));
            if dp != dc {
                crossing.entry(dp).or_default().push((p, c));
            }
        }
    }
    while let Some(d) = queue.pop_front() {
        let base = fixed.get(d).copied().unwrap_or(0);
        let mut bounds: HashMap<&str, Bounds> = HashMap::new();
        for &(p, c) in crossing.get(d).map(Vec::as_slice).unwrap_or(&[]) {
            let (ps, cs) = (&trace.spans[p], &trace.spans[c]);
            let dc = clock_domain(cs);
            if fixed.contains_key(dc) {
                continue;
            }
            let low = ps.start as i128 + base - cs.start as i128;
            let server = cs.kind == SpanKind::Server && ps.kind != SpanKind::Producer;
            let high = server.then(|| ps.end as i128 + base - cs.start as i128);
            let fit = (server && cs.duration() <= ps.duration())
                .then(|| ps.end as i128 + base - cs.end as i128);
            let b = bounds.entry(dc).or_insert_with(|| Bounds {
                low: i128::MIN,
                high: None,
                fit: None,
                edges: 0,
                low_edge: (p, c),
                high_edge: (p, c),
            });
            if low > b.low {
                b.low = low;
                b.low_edge = (p, c);
            }
            if let Some(h) = high {
                if b.high.is_none_or(|x| h < x) {
                    b.high = Some(h);
                    b.high_edge = (p, c);
                }
            }
            b.fit = match (b.edges, b.fit, fit) {
                (0, _, f) => f,
                (_, Some(x), Some(y)) => Some(x.min(y)),
                _ => None,
            };
            b.edges += 1;
        }
        // Sorted, so that hosts are queued in the same order every time.
        let mut bounds: Vec<(&str, Bounds)> = bounds.into_iter().collect();
        bounds.sort_by(|a, b| a.0.cmp(b.0));
        for (dc, b) in bounds {
            let offset = b.offset();
            fixed.insert(dc, offset);
            bound_by.insert(dc, (b.edges, b.reason(offset, trace)));
            queue.push_back(dc);
        }
    }
    let mut offsets: Vec<ClockOffset> = bound_by
        .iter()
        .map(|(host, (edges, reason))| ClockOffset {
            host: host.to_string(),
            offset_ns: fixed
                .get(host)
                .copied()
                .unwrap_or(0)
                .clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            edges: *edges,
            reason: reason.clone(),
        })
        .collect();
    offsets.sort_by(|a, b| a.host.cmp(&b.host));
    let shifts = trace
        .spans
        .iter()
        .map(|s| fixed.get(clock_domain(s)).copied().unwrap_or(0))
        .collect();
    (shifts, offsets)
}

fn shift_time(t: u64, by: i128) -> u64 {
    (t as i128 + by).clamp(0, u64::MAX as i128) as u64
}

fn shift(s: &mut Span, by: i128) {
    if by == 0 {
        return;
    }
    s.start = shift_time(s.start, by);
    s.end = shift_time(s.end, by);
    for e in &mut s.events {
        e.time = shift_time(e.time, by);
    }
    for m in &mut s.messages {
        m.time = shift_time(m.time, by);
    }
}
