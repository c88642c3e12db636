//! The in-memory index of one block: where each trace's rows are, and posting lists that
//! narrow a search to a few traces before any Parquet page is read.
//!
//! It is in memory only, rebuilt from the columns when a block is opened: per trace its
//! rows, start, end, error flag and duration range; posting lists, with duration ranges, by
//! (service, operation), by service, and by host; a Bloom filter of `key=value` attribute
//! pairs (the span's, its events' and its links') per 8 192 rows; and the block's time range
//! and span count.

use std::collections::HashMap;
use std::sync::Arc;

use crate::query::{SearchQuery, TimeWindow};

/// One trace's rows in a block (rows are sorted by trace id, so they are contiguous).
#[derive(Debug, Clone, Copy)]
pub(crate) struct TraceEntry {
    pub id: u128,
    pub first_row: u32,
    pub rows: u32,
    pub start: u64,
    pub end: u64,
    pub error: bool,
    pub min_duration: u64,
    pub max_duration: u64,
}

/// A trace that has spans of some service (and operation), with the range of their
/// durations, so duration filters are answered from memory.
#[derive(Debug, Clone, Copy)]
struct Posting {
    trace: u32,
    min_duration: u64,
    max_duration: u64,
}

#[derive(Default)]
pub(crate) struct BlockIndex {
    pub traces: Vec<TraceEntry>,
    names: Vec<Arc<str>>,
    name_ids: HashMap<Arc<str>, u32>,
    by_op: HashMap<(u32, u32), Vec<Posting>>,
    by_service: HashMap<u32, Vec<Posting>>,
    by_host: HashMap<u32, Vec<u32>>,
    pub min_start: u64,
    pub max_end: u64,
    pub spans: u64,
    /// A Bloom filter of the attribute pairs in each run of [`ATTR_GROUP_ROWS`] rows, so an
    /// attribute search reads only the pages that may hold the pair.
    attr_groups: Vec<Bloom>,
}

/// Rows per attribute Bloom filter.
pub(crate) const ATTR_GROUP_ROWS: usize = 8192;

/// The hash of one `key=value` pair, as stored in the Bloom filters.
pub(crate) fn pair_hash(key: &str, value: &str) -> u64 {
    // FNV-1a, then a finaliser: fast on short strings and well spread.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in key.bytes().chain([0xff]).chain(value.bytes()) {
        h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^ (h >> 33)
}

/// A Bloom filter with three probes from one 64-bit hash, about 1% false positives at
/// ten bits per entry.
#[derive(Default)]
struct Bloom {
    bits: Vec<u64>,
}

impl Bloom {
    fn with_entries(hashes: &mut Vec<u64>) -> Bloom {
        hashes.sort_unstable();
        hashes.dedup();
        let words = (hashes.len() * 10).div_ceil(64).next_power_of_two().max(8);
        let mut bloom = Bloom {
            bits: vec![0; words],
        };
        for &h in hashes.iter() {
            for bit in bloom.probes(h) {
                bloom.bits[bit / 64] |= 1 << (bit % 64);
            }
        }
        bloom
    }

    fn probes(&self, h: u64) -> [usize; 3] {
        let mask = self.bits.len() * 64 - 1;
        let (a, b) = (h as usize, (h >> 32) as usize | 1);
        [
            a & mask,
            a.wrapping_add(b) & mask,
            a.wrapping_add(b.wrapping_mul(2)) & mask,
        ]
    }

    fn may_contain(&self, h: u64) -> bool {
        self.probes(h)
            .iter()
            .all(|&bit| self.bits[bit / 64] & (1 << (bit % 64)) != 0)
    }
}

/// One span's indexed fields.
pub(crate) struct IndexRow<'a> {
    pub trace: u128,
    pub service: &'a str,
    pub operation: &'a str,
    pub host: &'a str,
    pub start: u64,
    pub duration: u64,
    pub error: bool,
}

/// Builds a [`BlockIndex`] from rows in trace-id order.
#[derive(Default)]
pub(crate) struct IndexBuilder {
    index: BlockIndex,
    current: Option<TraceEntry>,
    ops: HashMap<(u32, u32), (u64, u64)>,
    services: HashMap<u32, (u64, u64)>,
    hosts: Vec<u32>,
    row: u32,
    group_pairs: Vec<u64>,
}

fn widen(r: &mut (u64, u64), d: u64) {
    r.0 = r.0.min(d);
    r.1 = r.1.max(d);
}

impl IndexBuilder {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.index.name_ids.get(s) {
            return id;
        }
        let id = self.index.names.len() as u32;
        let s: Arc<str> = Arc::from(s);
        self.index.names.push(s.clone());
        self.index.name_ids.insert(s, id);
        id
    }

    /// Notes an attribute of the row pushed last.
    pub fn attribute(&mut self, key: &str, value: &str) {
        self.group_pairs.push(pair_hash(key, value));
    }

    fn seal_group(&mut self) {
        let bloom = Bloom::with_entries(&mut self.group_pairs);
        self.index.attr_groups.push(bloom);
        self.group_pairs.clear();
    }

    pub fn push(&mut self, row: IndexRow<'_>) {
        if self.row > 0 && (self.row as usize).is_multiple_of(ATTR_GROUP_ROWS) {
            self.seal_group();
        }
        if self.current.is_some_and(|c| c.id != row.trace) {
            self.close_trace();
        }
        let end = row.start.saturating_add(row.duration);
        let entry = self.current.get_or_insert(TraceEntry {
            id: row.trace,
            first_row: self.row,
            rows: 0,
            start: row.start,
            end,
            error: false,
            min_duration: row.duration,
            max_duration: row.duration,
        });
        entry.rows += 1;
        entry.start = entry.start.min(row.start);
        entry.end = entry.end.max(end);
        entry.error |= row.error;
        entry.min_duration = entry.min_duration.min(row.duration);
        entry.max_duration = entry.max_duration.max(row.duration);
        let service = self.intern(row.service);
        let op = self.intern(row.operation);
        let host = self.intern(row.host);
        let d = row.duration;
        widen(self.ops.entry((service, op)).or_insert((d, d)), d);
        widen(self.services.entry(service).or_insert((d, d)), d);
        if !self.hosts.contains(&host) {
            self.hosts.push(host);
        }
        self.row += 1;
    }

    fn close_trace(&mut self) {
        let Some(entry) = self.current.take() else {
            return;
        };
        let trace = self.index.traces.len() as u32;
        let posting = |(min_duration, max_duration): (u64, u64)| Posting {
            trace,
            min_duration,
            max_duration,
        };
        for (key, range) in self.ops.drain() {
            self.index
                .by_op
                .entry(key)
                .or_default()
                .push(posting(range));
        }
        for (key, range) in self.services.drain() {
            self.index
                .by_service
                .entry(key)
                .or_default()
                .push(posting(range));
        }
        for host in self.hosts.drain(..) {
            self.index.by_host.entry(host).or_default().push(trace);
        }
        self.index.traces.push(entry);
    }

    pub fn finish(mut self) -> BlockIndex {
        self.close_trace();
        if self.row > 0 {
            self.seal_group();
        }
        let mut index = self.index;
        index.spans = self.row as u64;
        index.min_start = index.traces.iter().map(|t| t.start).min().unwrap_or(0);
        index.max_end = index.traces.iter().map(|t| t.end).max().unwrap_or(0);
        index
    }
}

impl BlockIndex {
    /// The entry of one trace.
    pub fn find(&self, id: u128) -> Option<&TraceEntry> {
        self.traces
            .binary_search_by_key(&id, |t| t.id)
            .ok()
            .map(|i| &self.traces[i])
    }

    /// The entries with ids in `[lo, hi]`: a contiguous run.
    pub fn range(&self, lo: u128, hi: u128) -> &[TraceEntry] {
        let a = self.traces.partition_point(|t| t.id < lo);
        let b = self.traces.partition_point(|t| t.id <= hi);
        &self.traces[a..b.max(a)]
    }

    /// Every (service, operation) pair indexed.
    pub fn operations(&self) -> impl Iterator<Item = (&str, &str)> {
        self.by_op
            .keys()
            .map(|&(s, o)| (&*self.names[s as usize], &*self.names[o as usize]))
    }

    /// True when rows `[start, end)` may hold a span with every given attribute pair
    /// (hashes from [`pair_hash`]).
    pub fn may_have_pairs(&self, start: usize, end: usize, pairs: &[u64]) -> bool {
        if pairs.is_empty() {
            return true;
        }
        let first = start / ATTR_GROUP_ROWS;
        let last = end.saturating_sub(1) / ATTR_GROUP_ROWS;
        (first..=last).any(|g| {
            self.attr_groups
                .get(g)
                .is_none_or(|b| pairs.iter().all(|&h| b.may_contain(h)))
        })
    }

    /// Traces that may hold a span matching the query's indexed conditions (service,
    /// operation, host, durations, window, error); tags are checked later.
    pub fn candidates(&self, q: &SearchQuery) -> Vec<&TraceEntry> {
        let id = |name: &Option<String>| name.as_deref().map(|n| self.name_ids.get(n).copied());
        let (service, op, host) = (id(&q.service), id(&q.operation), id(&q.host));
        if matches!(service, Some(None)) || matches!(op, Some(None)) || matches!(host, Some(None)) {
            return Vec::new();
        }
        let durations_fit = |lo: u64, hi: u64| {
            q.max_duration.is_none_or(|m| lo <= m) && q.min_duration.is_none_or(|m| hi >= m)
        };
        let window = q.window.unwrap_or(TimeWindow::ALL);
        let keep = |t: &TraceEntry| window.overlaps(t.start, t.end) && (!q.error || t.error);
        let mut out: Vec<&TraceEntry> = match (service.flatten(), op.flatten()) {
            (Some(s), Some(o)) => self.postings(self.by_op.get(&(s, o)), durations_fit),
            (Some(s), None) => self.postings(self.by_service.get(&s), durations_fit),
            (None, Some(o)) => self
                .by_op
                .iter()
                .filter(|((_, op), _)| *op == o)
                .flat_map(|(_, p)| self.postings(Some(p), durations_fit))
                .collect(),
            (None, None) => self
                .traces
                .iter()
                .filter(|t| durations_fit(t.min_duration, t.max_duration))
                .collect(),
        };
        out.retain(|t| keep(t));
        if let Some(Some(h)) = host {
            let with_host: std::collections::HashSet<u128> = self
                .by_host
                .get(&h)
                .into_iter()
                .flatten()
                .map(|&i| self.traces[i as usize].id)
                .collect();
            out.retain(|t| with_host.contains(&t.id));
        }
        out.sort_by_key(|t| t.first_row);
        out.dedup_by_key(|t| t.first_row);
        out
    }

    fn postings(
        &self,
        list: Option<&Vec<Posting>>,
        fits: impl Fn(u64, u64) -> bool,
    ) -> Vec<&TraceEntry> {
        list.map(|l| {
            l.iter()
                .filter(|p| fits(p.min_duration, p.max_duration))
                .map(|p| &self.traces[p.trace as usize])
                .collect()
        })
        .unwrap_or_default()
    }
}
