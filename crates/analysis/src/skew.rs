//! Clock-skew correction. Hosts' clocks disagree, so a server span can seem to start
//! before the client span that called it. A server span lies within its client span, and a
//! consumer starts after its producer, so each edge into another host bounds that host's
//! clock offset; each host's spans in the trace are shifted by one offset that fits.
//!
//! Offsets are relative to the host of the trace's main root, and found host by host going
//! down the tree: a host's offset satisfies every edge into it from hosts already fixed.
//! When no shift is needed (the bounds allow 0) none is applied; otherwise the server is
//! centred in its client (equal network time each way, as Zipkin and Jaeger assume), or,
//! with only lower bounds (messaging), moved just far enough.

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
    low: i128,
    high: Option<i128>,
    edges: u32,
}

impl Bounds {
    fn offset(&self) -> i128 {
        match self.high {
            Some(high) if self.low <= 0 && 0 <= high => 0,
            // Inverted bounds (a server longer than its client) also land in the middle,
            // which splits the violation evenly.
            Some(high) => self.low + (high - self.low) / 2,
            None => self.low.max(0),
        }
    }
}

/// Corrects the trace's clock skew.
pub fn correct(trace: &Trace) -> Adjusted {
    let mut fixed: HashMap<&str, i128> = HashMap::new();
    let mut bound_by: HashMap<&str, u32> = HashMap::new();
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
            let high = (cs.kind == SpanKind::Server && ps.kind != SpanKind::Producer)
                .then(|| ps.end as i128 + base - cs.end as i128);
            match bounds.get_mut(dc) {
                Some(b) => {
                    b.low = b.low.max(low);
                    b.high = match (b.high, high) {
                        (Some(x), Some(y)) => Some(x.min(y)),
                        (x, y) => x.or(y),
                    };
                    b.edges += 1;
                }
                None => {
                    bounds.insert(
                        dc,
                        Bounds {
                            low,
                            high,
                            edges: 1,
                        },
                    );
                }
            }
        }
        // Sorted, so that hosts are queued in the same order every time.
        let mut bounds: Vec<(&str, Bounds)> = bounds.into_iter().collect();
        bounds.sort_by(|a, b| a.0.cmp(b.0));
        for (dc, b) in bounds {
            fixed.insert(dc, b.offset());
            bound_by.insert(dc, b.edges);
            queue.push_back(dc);
        }
    }
    let mut offsets: Vec<ClockOffset> = bound_by
        .iter()
        .map(|(host, &edges)| ClockOffset {
            host: host.to_string(),
            offset_ns: fixed
                .get(host)
                .copied()
                .unwrap_or(0)
                .clamp(i64::MIN as i128, i64::MAX as i128) as i64,
            edges,
        })
        .collect();
    offsets.sort_by(|a, b| a.host.cmp(&b.host));
    let spans = trace.spans.iter().map(|s| {
        let shift = fixed.get(clock_domain(s)).copied().unwrap_or(0);
        shifted(s, shift)
    });
    Adjusted {
        trace: Trace::assemble(trace.trace_id, spans.collect::<Vec<_>>()),
        offsets,
    }
}

fn shift_time(t: u64, by: i128) -> u64 {
    (t as i128 + by).clamp(0, u64::MAX as i128) as u64
}

fn shifted(s: &Span, by: i128) -> Span {
    let mut s = s.clone();
    if by == 0 {
        return s;
    }
    s.start = shift_time(s.start, by);
    s.end = shift_time(s.end, by);
    for e in &mut s.events {
        e.time = shift_time(e.time, by);
    }
    for m in &mut s.messages {
        m.time = shift_time(m.time, by);
    }
    s
}
