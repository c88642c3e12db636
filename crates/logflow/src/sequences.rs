//! lprof's table: requests counted by their log-point sequence, with their latency. A
//! request's sequence is the log points of each of its segments (a node's, or a
//! thread's, lines in time order), the segments in a canonical order: like lprof's log
//! sequence id it keeps the order within a thread and the number of threads, not the
//! timing between them. Requests are counted as they close (`SequenceTable`).

use foldhash::HashMap;

use crate::corpus::Corpus;
use crate::flows::{Flows, Request};

/// Requests with one log-point sequence.
#[derive(Clone, Debug, PartialEq)]
pub struct Sequence {
    /// Each segment's log points, in time order.
    pub segments: Vec<Vec<u32>>,
    /// Requests with this sequence.
    pub count: u64,
    /// Latency (first line to last), sorted, in nanoseconds: one per request.
    pub latencies_ns: Vec<i64>,
}

impl Sequence {
    /// The latency at quantile `q` (0..=1).
    pub fn latency_ns(&self, q: f64) -> i64 {
        if self.latencies_ns.is_empty() {
            return 0;
        }
        let at = ((self.latencies_ns.len() - 1) as f64 * q.clamp(0.0, 1.0)).round() as usize;
        self.latencies_ns[at]
    }
}

/// The sequences of one corpus's requests (`requests` gives each line's), the commonest
/// first; log points numbered as the corpus numbers them.
pub fn sequences(corpus: &Corpus, requests: &[u32]) -> Vec<Sequence> {
    let (_, closed) = Flows::whole(corpus, &[], requests, false);
    let mut table = SequenceTable::default();
    for r in &closed {
        table.add(r);
    }
    table.finish()
}

/// Requests counted by their sequence as they come.
#[derive(Default)]
pub struct SequenceTable {
    by_shape: HashMap<Vec<Vec<u32>>, (u64, Vec<i64>)>,
}

impl SequenceTable {
    /// Counts `request` (its log points as [`Flows`] numbers them).
    pub fn add(&mut self, request: &Request) {
        // The request's lines: (file, thread), time, log point.
        type Key = (u32, Option<u32>);
        let mut lines: Vec<(Key, i64, u32)> = request
            .lines
            .iter()
            .map(|l| ((l.file, l.thread), l.time_ns.unwrap_or(0), l.point))
            .collect();
        lines.sort_by_key(|&(key, t, _)| (key, t));
        let mut segments: Vec<Vec<u32>> = Vec::new();
        let mut last: Option<Key> = None;
        for &(key, _, point) in &lines {
            if last != Some(key) {
                segments.push(Vec::new());
                last = Some(key);
            }
            if let Some(s) = segments.last_mut() {
                s.push(point);
            }
        }
        segments.sort();
        let first = lines.iter().map(|l| l.1).min().unwrap_or(0);
        let end = lines.iter().map(|l| l.1).max().unwrap_or(0);
        let e = self.by_shape.entry(segments).or_default();
        e.0 += 1;
        e.1.push(end - first);
    }

    /// The sequences, the commonest first.
    pub fn finish(self) -> Vec<Sequence> {
        let mut out: Vec<Sequence> = self
            .by_shape
            .into_iter()
            .map(|(segments, (count, mut latencies_ns))| {
                latencies_ns.sort_unstable();
                Sequence {
                    segments,
                    count,
                    latencies_ns,
                }
            })
            .collect();
        out.sort_by(|a, b| b.count.cmp(&a.count).then(a.segments.cmp(&b.segments)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::Options;

    #[test]
    fn requests_of_one_shape_count_together_whatever_their_nodes_interleaving() {
        let web = "1970-01-01T00:00:00.000Z begin\n1970-01-01T00:00:00.040Z end\n\
                   1970-01-01T00:00:01.000Z begin\n1970-01-01T00:00:01.090Z end\n\
                   1970-01-01T00:00:02.000Z begin\n";
        let db = "1970-01-01T00:00:00.020Z query\n1970-01-01T00:00:00.995Z query\n";
        let corpus = Corpus::read(
            &[
                ("web.log".into(), web.as_bytes().to_vec()),
                ("db.log".into(), db.as_bytes().to_vec()),
            ],
            Options::default(),
        );
        // Request 1's query came before its begin: still the same shape.
        let requests = [0, 0, 1, 1, 2, 0, 1];
        let found = sequences(&corpus, &requests);
        let t = |line: usize| corpus.lines[line].point;
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].count, 2);
        let mut shape = vec![vec![t(0), t(1)], vec![t(5)]];
        shape.sort();
        assert_eq!(found[0].segments, shape);
        assert_eq!(found[0].latencies_ns, vec![40_000_000, 95_000_000]);
        assert_eq!(found[0].latency_ns(1.0), 95_000_000);
        assert_eq!(found[1].segments, vec![vec![t(4)]]);
        assert_eq!(found[1].latency_ns(0.5), 0);
    }
}
