//! Requests stitched from logs (`causeway logs`), grouped as lprof's table groups them:
//! by log-point sequence, with each sequence's count and latency histogram.
//!
//! A stitched trace has a span per node (or thread) segment, from its first line to its
//! last, and an event per line whose `log.point` attribute is the line's log point (its
//! template). A request's sequence is its first segment, then the others by node (calls
//! made in parallel start in any order), each as its node and its log points in time
//! order (a log point repeated back to back counted once).
//! A trace the lines were joined to (`causeway logs --join`) counts by the spans that hold
//! them, each a segment; traces without stitched lines are left out.

use std::collections::HashMap;

use causeway_model::attributes::LOG_POINT;
use causeway_model::{Event, Span, Trace, TraceId, Value};
use serde::Serialize;

use crate::histogram::{bucket_bounds, Histogram, Percentiles};

/// Examples kept per histogram bucket.
const EXAMPLES: usize = 3;

/// One node's part of a sequence.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Segment {
    /// The node (the span's service: the log file's name).
    pub node: String,
    /// Its log points in order, a repeat back to back counted once.
    pub points: Vec<String>,
}

#[derive(Clone, Debug, Default)]
struct SequenceTotals {
    /// The first request's line at each log point, by segment: what the point printed.
    example_lines: Vec<Vec<String>>,
    latency: Histogram,
    /// Example traces by display bucket (a quarter of a power of two).
    examples: HashMap<usize, Vec<TraceId>>,
    lines: u64,
}

/// A stitched line: its time, its log point and its text.
type HeldLine<'a> = (u64, String, &'a str);

/// The accumulator over a window's traces.
#[derive(Clone, Debug, Default)]
pub struct LogFlows {
    sequences: HashMap<Vec<Segment>, SequenceTotals>,
    traces: u64,
}

/// A latency bucket with example traces.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlowBucket {
    /// Lowest latency in the bucket, ns.
    pub low_ns: u64,
    /// First latency past the bucket, ns.
    pub high_ns: u64,
    /// Requests in it.
    pub count: u64,
    /// Up to three of them.
    pub examples: Vec<TraceId>,
}

/// One log-point sequence.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sequence {
    /// Its segments, in start order.
    pub segments: Vec<Segment>,
    /// A line of one of its requests at each log point, by segment (values filled in).
    pub example_lines: Vec<Vec<String>>,
    /// Requests that followed it.
    pub count: u64,
    /// Mean lines per request.
    pub mean_lines: f64,
    /// Latency (first line to last) figures, ns.
    pub latency: Percentiles,
    /// Latency histogram, four buckets per power of two.
    pub histogram: Vec<FlowBucket>,
}

/// The sequences of a window's stitched requests, most frequent first.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogFlowsSummary {
    /// Stitched requests seen.
    pub traces: u64,
    /// Distinct sequences among them.
    pub sequence_count: usize,
    /// The most frequent sequences.
    pub sequences: Vec<Sequence>,
}

impl LogFlows {
    /// Adds one trace's stitched lines (a trace with none is ignored).
    pub fn add(&mut self, trace: &Trace) {
        let point_of = |e: &Event| {
            e.attributes
                .iter()
                .find(|kv| &*kv.key == LOG_POINT)
                .map(|kv| match &kv.value {
                    Value::Str(s) => s.to_string(),
                    other => other.to_string(),
                })
        };
        // A segment per span holding stitched lines: a stitched trace's own spans, or the
        // spans of a trace the lines were joined to (`causeway_logflow::join`).
        let mut held: Vec<(&Span, Vec<HeldLine<'_>>)> = trace
            .spans
            .iter()
            .filter_map(|span| {
                let lines: Vec<HeldLine<'_>> = span
                    .events
                    .iter()
                    .filter_map(|e| Some((e.time, point_of(e)?, &*e.name)))
                    .collect();
                (!lines.is_empty()).then_some((span, lines))
            })
            .collect();
        if held.is_empty() {
            return;
        }
        self.traces += 1;
        held.sort_by_key(|(span, lines)| (lines[0].0, &span.service));
        let (mut start, mut end, mut lines) = (u64::MAX, 0, 0u64);
        let mut segments: Vec<(Segment, Vec<&str>)> = held
            .into_iter()
            .map(|(span, held)| {
                let mut points: Vec<String> = Vec::new();
                let mut examples: Vec<&str> = Vec::new();
                for (time, point, line) in held {
                    lines += 1;
                    start = start.min(time);
                    end = end.max(time);
                    if points.last() != Some(&point) {
                        points.push(point);
                        examples.push(line);
                    }
                }
                let node = span.service.to_string();
                (Segment { node, points }, examples)
            })
            .collect();
        // Calls made in parallel start in any order: after the first segment, by node.
        if let Some(rest) = segments.get_mut(1..) {
            rest.sort();
        }
        let (segments, examples): (Vec<Segment>, Vec<Vec<&str>>) = segments.into_iter().unzip();
        let latency = end.saturating_sub(start);
        let totals = self.sequences.entry(segments).or_default();
        if totals.example_lines.is_empty() {
            totals.example_lines = examples
                .into_iter()
                .map(|lines| lines.into_iter().map(str::to_string).collect())
                .collect();
        }
        totals.latency.record(latency);
        totals.lines += lines;
        let examples = totals
            .examples
            .entry(crate::histogram::bucket_of(latency) / 2)
            .or_default();
        if examples.len() < EXAMPLES {
            examples.push(trace.trace_id);
        }
    }

    /// Adds another accumulator's traces.
    pub fn merge(&mut self, other: LogFlows) {
        self.traces += other.traces;
        for (key, o) in other.sequences {
            let mine = self.sequences.entry(key).or_default();
            if mine.example_lines.is_empty() {
                mine.example_lines = o.example_lines;
            }
            mine.latency.merge(&o.latency);
            mine.lines += o.lines;
            for (bucket, examples) in o.examples {
                let kept = mine.examples.entry(bucket).or_default();
                let room = EXAMPLES.saturating_sub(kept.len());
                kept.extend(examples.into_iter().take(room));
            }
        }
    }

    /// The `top` most frequent sequences.
    pub fn summary(self, top: usize) -> LogFlowsSummary {
        let sequence_count = self.sequences.len();
        let mut sequences: Vec<Sequence> = self
            .sequences
            .into_iter()
            .map(|(segments, t)| {
                let count = t.latency.count();
                let mut histogram: Vec<FlowBucket> = Vec::new();
                for (fine, n) in t.latency.buckets() {
                    let display = fine / 2;
                    let (low, _) = bucket_bounds(display * 2);
                    let (_, high) = bucket_bounds(display * 2 + 1);
                    match histogram.last_mut() {
                        Some(b) if b.low_ns == low => b.count += n,
                        _ => histogram.push(FlowBucket {
                            low_ns: low,
                            high_ns: high,
                            count: n,
                            examples: t.examples.get(&display).cloned().unwrap_or_default(),
                        }),
                    }
                }
                Sequence {
                    segments,
                    example_lines: t.example_lines,
                    count,
                    mean_lines: t.lines as f64 / count.max(1) as f64,
                    latency: t.latency.percentiles(),
                    histogram,
                }
            })
            .collect();
        sequences.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| a.latency.p50.cmp(&b.latency.p50))
                .then_with(|| format!("{:?}", a.segments).cmp(&format!("{:?}", b.segments)))
        });
        sequences.truncate(top);
        LogFlowsSummary {
            traces: self.traces,
            sequence_count,
            sequences,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::{KeyValue, Source, SpanId};

    /// A stitched request: a span per (node, start ms, end ms, log points).
    fn request(id: u128, segments: &[(&str, u64, u64, &[&str])]) -> Trace {
        let trace_id = TraceId::new(id).expect("an id");
        let ms = 1_000_000;
        let spans: Vec<Span> = segments
            .iter()
            .enumerate()
            .map(|(n, (node, start, end, points))| {
                let span_id = SpanId::new(n as u64 + 1).expect("an id");
                let parent = (n > 0).then(|| SpanId::new(1).expect("an id"));
                let mut s = Span::new(trace_id, span_id, parent, "x", node, start * ms, end * ms);
                s.source = Source::Logs;
                s.events = points
                    .iter()
                    .enumerate()
                    .map(|(k, p)| Event {
                        // Spread over the segment: first line at its start, last at its end.
                        time: start * ms
                            + (end - start) * ms * k as u64 / (points.len() as u64 - 1).max(1),
                        name: format!("{p} with values"),
                        attributes: vec![KeyValue::new(LOG_POINT, *p)],
                    })
                    .collect();
                s
            })
            .collect();
        Trace::assemble(trace_id, spans)
    }

    #[test]
    fn requests_group_by_their_log_point_sequence_with_latency() {
        let mut a = LogFlows::default();
        let mut b = LogFlows::default();
        let home: &[(&str, u64, u64, &[&str])] = &[
            (
                "web",
                0,
                30,
                &["started", "rendered", "rendered", "finished"],
            ),
            ("db", 5, 9, &["query"]),
        ];
        a.add(&request(1, home));
        a.add(&request(
            2,
            &[
                ("web", 0, 50, &["started", "rendered", "finished"]),
                ("db", 5, 9, &["query"]),
            ],
        ));
        b.add(&request(3, &[("web", 0, 10, &["started", "failed"])]));
        // Lines joined to an instrumented trace count by the span holding them; a trace
        // without stitched lines is no request from logs.
        let mut joined = request(4, home);
        joined.spans[1].source = Source::Instrumented;
        b.add(&joined);
        let mut plain = request(5, &[("web", 0, 10, &["x"])]);
        plain.spans[0].events.clear();
        b.add(&plain);
        a.merge(b);
        let s = a.summary(10);
        assert_eq!((s.traces, s.sequence_count), (4, 2));
        let first = &s.sequences[0];
        assert_eq!(first.count, 3);
        assert_eq!(
            first.segments,
            [
                Segment {
                    node: "web".into(),
                    points: vec!["started".into(), "rendered".into(), "finished".into()]
                },
                Segment {
                    node: "db".into(),
                    points: vec!["query".into()]
                },
            ]
        );
        // Each log point with a line it printed, values filled in.
        assert_eq!(
            first.example_lines,
            [
                vec![
                    "started with values",
                    "rendered with values",
                    "finished with values"
                ],
                vec!["query with values"],
            ]
        );
        assert_eq!(first.mean_lines, 14.0 / 3.0);
        assert_eq!(first.latency.max, 50_000_000);
        assert_eq!(first.histogram.iter().map(|b| b.count).sum::<u64>(), 3);
        let examples: Vec<TraceId> = first
            .histogram
            .iter()
            .flat_map(|b| b.examples.clone())
            .collect();
        assert_eq!(examples.len(), 3);
        assert_eq!(s.sequences[1].count, 1);
    }
}
