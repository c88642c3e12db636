//! Requests, errors and duration over time, per service and per operation (Jaeger's
//! Monitor tab, span metrics), computed from stored traces at query time: nothing to set
//! up. A request is an entry span: one without a parent in its trace, or whose parent is
//! in another service (a server span, a consumer, a root); its operation is its name.
//! Each time bucket keeps a count, the errors and a log-linear histogram of durations
//! (quantiles within 6.25%).
//!
//! Memory is bounded: at most [`MAX_SERIES`] (service, operation) series are kept, later
//! ones counted as untracked requests; a bucket's histogram holds a few hundred counters.

use std::collections::HashMap;

use causeway_model::{Span, Trace};
use serde::Serialize;

use crate::histogram::Histogram;

/// (service, operation) series kept at most.
pub const MAX_SERIES: usize = 500;
/// Buckets a window is cut into at most.
pub const MAX_BUCKETS: usize = 1_000;

#[derive(Debug, Clone, Default)]
struct Cell {
    requests: u64,
    errors: u64,
    durations: Histogram,
}

impl Cell {
    fn merge(&mut self, other: &Cell) {
        self.requests += other.requests;
        self.errors += other.errors;
        self.durations.merge(&other.durations);
    }
}

/// The accumulator over a window cut into buckets of `step` ns from `start`.
#[derive(Debug)]
pub struct Monitor {
    start: u64,
    step: u64,
    buckets: usize,
    series: HashMap<(String, String), Vec<Cell>>,
    untracked: u64,
}

/// One series over the window: per bucket, requests, errors, and duration quantiles (ns;
/// 0 where a bucket has no request).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Series {
    /// The service.
    pub service: String,
    /// The operation, or `None` for the service's whole.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Requests in the window.
    pub total: u64,
    /// Errors in the window.
    pub total_errors: u64,
    /// Requests per bucket.
    pub requests: Vec<u64>,
    /// Errors per bucket.
    pub errors: Vec<u64>,
    /// Median duration per bucket.
    pub p50: Vec<u64>,
    /// 90th percentile per bucket.
    pub p90: Vec<u64>,
    /// 99th percentile per bucket.
    pub p99: Vec<u64>,
}

impl Monitor {
    /// A window from `start` to `end` (ns) in buckets of `step` (at least 1 ns; the window
    /// is cut into at most [`MAX_BUCKETS`], the step widened when it would be more).
    pub fn new(start: u64, end: u64, step: u64) -> Monitor {
        let span = end.saturating_sub(start).max(1);
        let step = step.max(1).max(span.div_ceil(MAX_BUCKETS as u64));
        Monitor {
            start,
            step,
            buckets: span.div_ceil(step) as usize,
            series: HashMap::new(),
            untracked: 0,
        }
    }

    /// The step taken, ns.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The buckets' starts, ns.
    pub fn starts(&self) -> Vec<u64> {
        (0..self.buckets as u64)
            .map(|i| self.start + i * self.step)
            .collect()
    }

    /// Counts the requests (entry spans) of a trace that start in the window.
    pub fn add(&mut self, trace: &Trace) {
        let mut parent = vec![usize::MAX; trace.spans.len()];
        for (p, kids) in trace.children.iter().enumerate() {
            for &c in kids {
                parent[c] = p;
            }
        }
        for (i, s) in trace.spans.iter().enumerate() {
            let entry = parent[i] == usize::MAX || trace.spans[parent[i]].service != s.service;
            if entry && s.start >= self.start {
                self.record(s);
            }
        }
    }

    fn record(&mut self, s: &Span) {
        let b = ((s.start - self.start) / self.step) as usize;
        if b >= self.buckets {
            return;
        }
        let key = (s.service.to_string(), s.name.clone());
        let held = self.series.len();
        let buckets = self.buckets;
        let cells = match self.series.get_mut(&key) {
            Some(c) => c,
            None if held < MAX_SERIES => self
                .series
                .entry(key)
                .or_insert_with(|| vec![Cell::default(); buckets]),
            None => {
                self.untracked += 1;
                return;
            }
        };
        let cell = &mut cells[b];
        cell.requests += 1;
        if s.is_error() {
            cell.errors += 1;
        }
        cell.durations.record(s.duration());
    }

    /// Folds another shard's counts into these (made with the same window and step).
    pub fn merge(&mut self, other: Monitor) {
        self.untracked += other.untracked;
        for (key, cells) in other.series {
            let held = self.series.len();
            match self.series.get_mut(&key) {
                Some(mine) => mine.iter_mut().zip(&cells).for_each(|(a, b)| a.merge(b)),
                None if held < MAX_SERIES => {
                    self.series.insert(key, cells);
                }
                None => self.untracked += cells.iter().map(|c| c.requests).sum::<u64>(),
            }
        }
    }

    /// Requests not counted for want of room for their series.
    pub fn untracked(&self) -> u64 {
        self.untracked
    }

    /// Each service's whole, busiest first; with `service`, that service's whole and then
    /// each of its operations, busiest first. At most `limit` series.
    pub fn report(&self, service: Option<&str>, limit: usize) -> Vec<Series> {
        let mut wholes: HashMap<&str, Vec<Cell>> = HashMap::new();
        let mut ops: Vec<Series> = Vec::new();
        for ((svc, op), cells) in &self.series {
            if service.is_some_and(|s| s != svc) {
                continue;
            }
            let whole = wholes
                .entry(svc.as_str())
                .or_insert_with(|| vec![Cell::default(); self.buckets]);
            whole.iter_mut().zip(cells).for_each(|(a, b)| a.merge(b));
            if service.is_some() {
                ops.push(series(svc, Some(op), cells));
            }
        }
        let mut out: Vec<Series> = wholes
            .iter()
            .map(|(svc, cells)| series(svc, None, cells))
            .collect();
        let busiest = |a: &Series, b: &Series| {
            b.total
                .cmp(&a.total)
                .then_with(|| a.service.cmp(&b.service))
                .then_with(|| a.operation.cmp(&b.operation))
        };
        out.sort_by(busiest);
        ops.sort_by(busiest);
        out.extend(ops);
        out.truncate(limit);
        out
    }
}

fn series(service: &str, operation: Option<&str>, cells: &[Cell]) -> Series {
    let q = |f: f64| cells.iter().map(|c| c.durations.quantile(f)).collect();
    Series {
        service: service.to_string(),
        operation: operation.map(str::to_string),
        total: cells.iter().map(|c| c.requests).sum(),
        total_errors: cells.iter().map(|c| c.errors).sum(),
        requests: cells.iter().map(|c| c.requests).collect(),
        errors: cells.iter().map(|c| c.errors).collect(),
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::{SpanKind, Status, TraceId};
    use causeway_testkit::{span, TraceBuilder};

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000 * MS;

    /// web GET /home calling api GET /items (an entry of api) and api's own internal span.
    fn request(n: u128, at: u64, ms: u64, failed: bool) -> Trace {
        let mut b = TraceBuilder::new(n);
        let root = b.root("web", "web-1", "GET /home", at, at + ms * MS);
        let api = b.rpc(
            root,
            ("web", "web-1"),
            ("api", "api-1"),
            "GET /items",
            at + MS,
            at + 2 * MS,
            0,
        );
        if failed {
            b.get(api).status = Status::Error("boom".into());
        }
        b.span(
            Some(api),
            "api",
            "api-1",
            SpanKind::Internal,
            "query",
            at + MS,
            at + 2 * MS,
        );
        b.trace()
    }

    #[test]
    fn entry_spans_are_counted_per_bucket_with_errors_and_quantiles() {
        let mut m = Monitor::new(0, 10 * S, S);
        assert_eq!(m.starts().len(), 10);
        // Second 2: 10 requests of 10 ms, one failing; second 7: 4 of 100 ms.
        for n in 0..10u128 {
            m.add(&request(n + 1, 2 * S + n as u64 * MS, 10, n == 0));
        }
        for n in 0..4u128 {
            m.add(&request(n + 100, 7 * S, 100, false));
        }
        let r = m.report(None, 10);
        assert_eq!(r.len(), 2, "web and api wholes: {r:?}");
        let web = r.iter().find(|s| s.service == "web").unwrap();
        assert_eq!(web.total, 14);
        assert_eq!(web.requests[2], 10);
        assert_eq!(web.requests[7], 4);
        assert_eq!(web.requests.iter().sum::<u64>(), 14);
        let within = |v: u64, want: u64| v.abs_diff(want) * 16 <= want;
        assert!(within(web.p50[2], 10 * MS), "{}", web.p50[2]);
        assert!(within(web.p99[7], 100 * MS), "{}", web.p99[7]);
        assert_eq!(web.p50[0], 0, "no request, no duration");
        // api's entry is its server span; its internal query is not a request.
        let api = r.iter().find(|s| s.service == "api").unwrap();
        assert_eq!((api.total, api.total_errors), (14, 1));
        assert_eq!(api.errors[2], 1);
        // One service: its whole, then its operations.
        let only = m.report(Some("api"), 10);
        assert_eq!(only.len(), 2);
        assert_eq!(only[0].operation, None);
        assert_eq!(only[1].operation.as_deref(), Some("GET /items"));
    }

    #[test]
    fn merged_shards_equal_one_scan_and_series_stay_bounded() {
        let traces: Vec<Trace> = (1..=200u128)
            .map(|n| request(n, (n as u64 % 10) * S, n as u64 % 50 + 1, n % 13 == 0))
            .collect();
        let mut one = Monitor::new(0, 10 * S, S);
        let mut a = Monitor::new(0, 10 * S, S);
        let mut b = Monitor::new(0, 10 * S, S);
        for (i, t) in traces.iter().enumerate() {
            one.add(t);
            if i % 2 == 0 {
                a.add(t)
            } else {
                b.add(t)
            }
        }
        a.merge(b);
        assert_eq!(a.report(None, 10), one.report(None, 10));
        assert_eq!(a.report(Some("web"), 10), one.report(Some("web"), 10));

        let mut m = Monitor::new(0, S, S);
        let t = TraceId::new(1).unwrap();
        for k in 0..(MAX_SERIES as u64 + 20) {
            let s = span(1, k + 1, None, &format!("op {k}"), "svc", 0, 1);
            m.add(&Trace::assemble(t, vec![s]));
        }
        assert_eq!(m.series.len(), MAX_SERIES);
        assert_eq!(m.untracked(), 20);
    }

    #[test]
    fn a_window_is_cut_into_at_most_the_bounded_buckets() {
        let m = Monitor::new(0, 10 * 3_600 * S, S);
        assert!(m.starts().len() <= MAX_BUCKETS);
        assert!(m.step() >= 36 * S);
    }
}
