//! Execution patterns: traces grouped by shape, as in Dapper's UI workflow and WAP5's path
//! patterns.
//!
//! A trace's shape is its tree of (service, span name, kind) with timing ignored: children
//! are put in a canonical order (by the hash of their own shape), and identical siblings
//! collapse into one node with a count (a fan-out to 3 replicas and one to 2 are different
//! shapes). Orphans count as children of the main root. The pattern id is a 64-bit hash of
//! the shape, computed with fixed constants, so it is the same in every run and version;
//! it is written `p` and 16 hex digits.
//!
//! A pattern keeps its trace count, error count, a latency histogram (the main root's
//! duration) with up to three example traces per bucket (the smallest trace ids, so the
//! choice does not depend on scan order), and per node the mean duration, self time,
//! start offset from its parent and, for RPCs, network time.
//!
//! Memory is bounded: at most `max_nodes` shape nodes (1 M by default) are held over all
//! patterns (each about 200 bytes with its totals, plus about 2.5 KB of histogram per
//! pattern); traces of shapes first seen beyond that are counted as untracked, with their
//! latency.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use causeway_model::{Span, SpanKind, Trace, TraceId};
use serde::{Serialize, Serializer};

use crate::critical::self_times;
use crate::histogram::{bucket_bounds, bucket_of, Histogram, Percentiles};
use crate::{children_adopted, main_root};

/// A pattern's id: `p` and 16 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PatternId(pub u64);

impl fmt::Display for PatternId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "p{:016x}", self.0)
    }
}

impl FromStr for PatternId {
    type Err = String;
    fn from_str(s: &str) -> Result<PatternId, String> {
        let hex = s
            .strip_prefix('p')
            .filter(|h| h.len() == 16)
            .ok_or_else(|| format!("{s:?} is not a pattern id (p and 16 hex digits)"))?;
        u64::from_str_radix(hex, 16)
            .map(PatternId)
            .map_err(|_| format!("{s:?} is not a pattern id (p and 16 hex digits)"))
    }
}

impl Serialize for PatternId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ b as u64).wrapping_mul(FNV_PRIME);
    }
    h
}

fn mix(h: u64, v: u64) -> u64 {
    fnv(h, &v.to_le_bytes())
}

fn label_hash(s: &Span) -> u64 {
    let h = fnv(FNV_OFFSET, s.service.as_bytes());
    let h = fnv(h ^ 0xff, s.name.as_bytes());
    mix(h, s.kind as u64 + 1)
}

/// One trace's shape: the subtree hash of every span and the canonical child order.
pub struct TraceShape {
    /// The pattern the trace belongs to.
    pub id: PatternId,
    root: usize,
    hash: Vec<u64>,
    /// Children (orphans adopted by the main root), sorted by subtree hash.
    children: Vec<Vec<usize>>,
    /// Parents, with the adoption.
    parent: Vec<Option<usize>>,
}

impl TraceShape {
    /// The shape of a trace; `None` for an empty trace.
    pub fn of(trace: &Trace) -> Option<TraceShape> {
        let root = main_root(trace)?;
        let mut children = children_adopted(trace);
        let mut parent = trace.parent.clone();
        for &r in &trace.roots {
            if r != root {
                parent[r] = Some(root);
            }
        }
        let mut order = Vec::with_capacity(trace.spans.len());
        let mut stack = vec![root];
        while let Some(i) = stack.pop() {
            order.push(i);
            stack.extend_from_slice(&children[i]);
        }
        let mut hash = vec![0u64; trace.spans.len()];
        for &i in order.iter().rev() {
            let kids = &mut children[i];
            kids.sort_unstable_by_key(|&c| (hash[c], trace.spans[c].start, c));
            let mut h = label_hash(&trace.spans[i]);
            for group in kids.chunk_by(|&a, &b| hash[a] == hash[b]) {
                h = mix(mix(h, hash[group[0]]), group.len() as u64);
            }
            hash[i] = h;
        }
        Some(TraceShape {
            id: PatternId(hash[root]),
            root,
            hash,
            children,
            parent,
        })
    }

    /// Visits the shape's nodes breadth first in canonical order, each with its index,
    /// its parent node's index and the spans it stands for.
    fn walk(&self, mut visit: impl FnMut(usize, Option<usize>, &[usize])) {
        let mut queue: VecDeque<(Option<usize>, Vec<usize>)> = VecDeque::new();
        queue.push_back((None, vec![self.root]));
        let mut next = 0;
        let mut cursor: Vec<usize> = Vec::new();
        while let Some((parent, members)) = queue.pop_front() {
            let node = next;
            next += 1;
            visit(node, parent, &members);
            // Every member has the same sequence of child groups; walk them in step.
            cursor.clear();
            cursor.resize(members.len(), 0);
            let first = &self.children[members[0]];
            for group in first.chunk_by(|&a, &b| self.hash[a] == self.hash[b]) {
                let h = self.hash[group[0]];
                let mut spans = Vec::with_capacity(group.len() * members.len());
                for (m, pos) in members.iter().zip(cursor.iter_mut()) {
                    let kids = &self.children[*m];
                    while *pos < kids.len() && self.hash[kids[*pos]] == h {
                        spans.push(kids[*pos]);
                        *pos += 1;
                    }
                }
                queue.push_back((Some(node), spans));
            }
        }
    }
}

/// A node of a pattern's shape.
#[derive(Debug, Clone)]
struct ShapeNode {
    service: Arc<str>,
    operation: Arc<str>,
    kind: SpanKind,
    parent: Option<usize>,
    /// Spans per instance of the parent.
    count: u32,
}

#[derive(Debug, Clone, Default)]
struct NodeTotals {
    instances: u64,
    duration: u128,
    self_time: u128,
    offset: i128,
    network: u128,
    network_count: u64,
}

#[derive(Debug, Clone)]
struct PatternTotals {
    shape: Vec<ShapeNode>,
    nodes: Vec<NodeTotals>,
    latency: Histogram,
    errors: u64,
    /// By display bucket (two per power of two), the smallest trace ids seen.
    examples: BTreeMap<usize, Vec<TraceId>>,
}

const EXAMPLES_PER_BUCKET: usize = 3;

/// How to order patterns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortBy {
    /// Most traces first.
    #[default]
    Count,
    /// Most total time (traces x mean latency) first.
    Total,
    /// Slowest 99th percentile first.
    Tail,
}

impl FromStr for SortBy {
    type Err = String;
    fn from_str(s: &str) -> Result<SortBy, String> {
        match s {
            "count" => Ok(SortBy::Count),
            "total" => Ok(SortBy::Total),
            "tail" | "p99" => Ok(SortBy::Tail),
            _ => Err(format!("{s:?} is not one of count, total, tail")),
        }
    }
}

/// An accumulator of execution patterns.
#[derive(Debug, Clone)]
pub struct Patterns {
    service: Option<String>,
    only: Option<PatternId>,
    max_nodes: usize,
    nodes_held: usize,
    patterns: HashMap<PatternId, PatternTotals>,
    untracked: Histogram,
    traces: u64,
}

/// The default bound on shape nodes held.
pub const DEFAULT_MAX_NODES: usize = 1_000_000;

/// A pattern in a list.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PatternSummary {
    /// Stable id.
    pub id: PatternId,
    /// The main root's service.
    pub root_service: String,
    /// The main root's span name.
    pub root_operation: String,
    /// Services it passes through, sorted.
    pub services: Vec<String>,
    /// Spans per trace.
    pub spans: u64,
    /// Traces.
    pub count: u64,
    /// Traces with at least one error span.
    pub errors: u64,
    /// Sum of the traces' latencies, ns.
    pub total_ns: u128,
    /// Latency (the main root's duration), ns.
    pub latency: Percentiles,
    /// What tells it apart from the most common pattern of the same root, when the list
    /// holds others of that root: spans it has that the usual one lacks (`+`), spans it
    /// lacks (`−`), spans it has a different number of (`×n`); at most three. Empty for
    /// the usual pattern itself, and in a pattern's detail.
    pub distinct: Vec<String>,
}

/// A node of a pattern's graph.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PatternNode {
    /// Index in the pattern's node list.
    pub index: usize,
    /// The parent node's index.
    pub parent: Option<usize>,
    /// Service.
    pub service: String,
    /// Span name.
    pub operation: String,
    /// Span kind.
    pub kind: SpanKind,
    /// Spans of this node per instance of its parent (identical siblings collapsed).
    pub count: u32,
    /// Spans seen for this node over all traces.
    pub instances: u64,
    /// Mean span duration, ns.
    pub mean_duration_ns: u64,
    /// Mean self time, ns.
    pub mean_self_ns: u64,
    /// Mean delay from the parent's start to this span's start (the edge), ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_start_offset_ns: Option<i64>,
    /// Mean network time of the RPC edge (client less server duration), ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_network_ns: Option<u64>,
}

/// A latency bucket with example traces.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LatencyBucket {
    /// Lowest latency in the bucket, ns.
    pub low_ns: u64,
    /// First latency past the bucket, ns.
    pub high_ns: u64,
    /// Traces in it.
    pub count: u64,
    /// Up to three of them.
    pub examples: Vec<TraceId>,
}

/// A pattern with its graph and histogram.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PatternDetail {
    /// The summary figures.
    #[serde(flatten)]
    pub summary: PatternSummary,
    /// Nodes breadth first; node 0 is the root.
    pub nodes: Vec<PatternNode>,
    /// Latency histogram, two buckets per power of two.
    pub histogram: Vec<LatencyBucket>,
}

impl Default for Patterns {
    fn default() -> Self {
        Patterns::new(None, None, DEFAULT_MAX_NODES)
    }
}

impl Patterns {
    /// An accumulator of the patterns of traces that pass through `service` (all when
    /// `None`), only pattern `only` when given, holding at most `max_nodes` shape nodes.
    pub fn new(service: Option<String>, only: Option<PatternId>, max_nodes: usize) -> Patterns {
        Patterns {
            service,
            only,
            max_nodes,
            nodes_held: 0,
            patterns: HashMap::new(),
            untracked: Histogram::default(),
            traces: 0,
        }
    }

    /// Adds one trace.
    pub fn add(&mut self, trace: &Trace) {
        if let Some(service) = &self.service {
            if !trace.spans.iter().any(|s| &*s.service == service) {
                return;
            }
        }
        let Some(shape) = TraceShape::of(trace) else {
            return;
        };
        if self.only.is_some_and(|id| id != shape.id) {
            return;
        }
        self.traces += 1;
        let latency = trace.spans[shape.root].duration();
        if !self.patterns.contains_key(&shape.id) {
            let mut nodes = Vec::new();
            let mut sizes = Vec::new();
            shape.walk(|_, parent, members| {
                let s = &trace.spans[members[0]];
                let per_parent = parent.map_or(1, |p: usize| sizes[p]);
                sizes.push(members.len());
                nodes.push(ShapeNode {
                    service: s.service.clone(),
                    operation: Arc::from(s.name.as_str()),
                    kind: s.kind,
                    parent,
                    count: (members.len() / per_parent.max(1)) as u32,
                });
            });
            if self.nodes_held + nodes.len() > self.max_nodes {
                self.untracked.record(latency);
                return;
            }
            self.nodes_held += nodes.len();
            self.patterns.insert(
                shape.id,
                PatternTotals {
                    nodes: vec![NodeTotals::default(); nodes.len()],
                    shape: nodes,
                    latency: Histogram::default(),
                    errors: 0,
                    examples: BTreeMap::new(),
                },
            );
        }
        let Some(p) = self.patterns.get_mut(&shape.id) else {
            return;
        };
        p.latency.record(latency);
        p.errors += u64::from(trace.spans.iter().any(Span::is_error));
        let examples = p.examples.entry(bucket_of(latency) / 4).or_default();
        let at = examples.partition_point(|&t| t < trace.trace_id);
        if at < EXAMPLES_PER_BUCKET && examples.get(at) != Some(&trace.trace_id) {
            examples.insert(at, trace.trace_id);
            examples.truncate(EXAMPLES_PER_BUCKET);
        }
        let own = self_times(trace);
        let totals = &mut p.nodes;
        shape.walk(|node, _, members| {
            let Some(t) = totals.get_mut(node) else {
                return;
            };
            for &m in members {
                let s = &trace.spans[m];
                t.instances += 1;
                t.duration += s.duration() as u128;
                t.self_time += own[m] as u128;
                if let Some(parent) = shape.parent[m].map(|p| &trace.spans[p]) {
                    t.offset += s.start as i128 - parent.start as i128;
                    if parent.kind == SpanKind::Client && s.kind == SpanKind::Server {
                        t.network += parent.duration().saturating_sub(s.duration()) as u128;
                        t.network_count += 1;
                    }
                }
            }
        });
    }

    /// Adds another accumulator's traces (made with the same settings).
    pub fn merge(&mut self, other: Patterns) {
        self.traces += other.traces;
        self.untracked.merge(&other.untracked);
        for (id, o) in other.patterns {
            if let Some(p) = self.patterns.get_mut(&id) {
                p.latency.merge(&o.latency);
                p.errors += o.errors;
                for (a, b) in p.nodes.iter_mut().zip(&o.nodes) {
                    a.instances += b.instances;
                    a.duration += b.duration;
                    a.self_time += b.self_time;
                    a.offset += b.offset;
                    a.network += b.network;
                    a.network_count += b.network_count;
                }
                for (bucket, ids) in o.examples {
                    let mine = p.examples.entry(bucket).or_default();
                    mine.extend(ids);
                    mine.sort_unstable();
                    mine.dedup();
                    mine.truncate(EXAMPLES_PER_BUCKET);
                }
            } else if self.nodes_held + o.shape.len() <= self.max_nodes {
                self.nodes_held += o.shape.len();
                self.patterns.insert(id, o);
            } else {
                self.untracked.merge(&o.latency);
            }
        }
    }

    /// Traces added (those passing the service filter).
    pub fn traces(&self) -> u64 {
        self.traces
    }

    /// Traces not held because the node bound was reached.
    pub fn untracked(&self) -> u64 {
        self.untracked.count()
    }

    /// The patterns, sorted.
    pub fn summaries(&self, sort: SortBy) -> Vec<PatternSummary> {
        let mut out: Vec<PatternSummary> = self
            .patterns
            .iter()
            .map(|(id, p)| summary(*id, p))
            .collect();
        self.tell_apart(&mut out);
        out.sort_by(|a, b| {
            let key = |s: &PatternSummary| match sort {
                SortBy::Count => s.count as u128,
                SortBy::Total => s.total_ns,
                SortBy::Tail => s.latency.p99 as u128,
            };
            key(b).cmp(&key(a)).then(a.id.cmp(&b.id))
        });
        out
    }

    /// Names what sets each pattern apart from the most common one of its root (see
    /// [`PatternSummary::distinct`]): twenty patterns all named "frontend GET /home" do
    /// not tell a reader which is which.
    fn tell_apart(&self, list: &mut [PatternSummary]) {
        let mut usual: HashMap<(&str, &str), (u64, PatternId)> = HashMap::new();
        let mut roots: HashMap<(&str, &str), usize> = HashMap::new();
        for s in list.iter() {
            let root = (s.root_service.as_str(), s.root_operation.as_str());
            *roots.entry(root).or_default() += 1;
            let best = usual.entry(root).or_insert((s.count, s.id));
            if (s.count, std::cmp::Reverse(s.id)) > (best.0, std::cmp::Reverse(best.1)) {
                *best = (s.count, s.id);
            }
        }
        let usual: HashMap<(String, String), PatternId> = usual
            .into_iter()
            .filter(|(root, _)| roots[root] > 1)
            .map(|((svc, op), (_, id))| ((svc.to_string(), op.to_string()), id))
            .collect();
        for s in list.iter_mut() {
            let Some(&u) = usual.get(&(s.root_service.clone(), s.root_operation.clone())) else {
                continue;
            };
            if u == s.id {
                continue;
            }
            let (Some(mine), Some(theirs)) = (self.patterns.get(&s.id), self.patterns.get(&u))
            else {
                continue;
            };
            s.distinct = distinctions(&span_counts(&mine.shape), &span_counts(&theirs.shape));
        }
    }

    /// One pattern with its graph and histogram.
    pub fn detail(&self, id: PatternId) -> Option<PatternDetail> {
        let p = self.patterns.get(&id)?;
        let mean = |sum: u128, n: u64| if n == 0 { 0 } else { (sum / n as u128) as u64 };
        let nodes = p
            .shape
            .iter()
            .zip(&p.nodes)
            .enumerate()
            .map(|(index, (s, t))| PatternNode {
                index,
                parent: s.parent,
                service: s.service.to_string(),
                operation: s.operation.to_string(),
                kind: s.kind,
                count: s.count,
                instances: t.instances,
                mean_duration_ns: mean(t.duration, t.instances),
                mean_self_ns: mean(t.self_time, t.instances),
                mean_start_offset_ns: (s.parent.is_some() && t.instances > 0)
                    .then(|| (t.offset / t.instances as i128) as i64),
                mean_network_ns: (t.network_count > 0).then(|| mean(t.network, t.network_count)),
            })
            .collect();
        let mut histogram: Vec<LatencyBucket> = Vec::new();
        for (fine, count) in p.latency.buckets() {
            let display = fine / 4;
            let (low, _) = bucket_bounds(display * 4);
            let (_, high) = bucket_bounds(display * 4 + 3);
            match histogram.last_mut() {
                Some(b) if b.low_ns == low => b.count += count,
                _ => histogram.push(LatencyBucket {
                    low_ns: low,
                    high_ns: high,
                    count,
                    examples: p.examples.get(&display).cloned().unwrap_or_default(),
                }),
            }
        }
        Some(PatternDetail {
            summary: summary(id, p),
            nodes,
            histogram,
        })
    }
}

/// Distinctions named per pattern at most.
const MOST_DISTINCTIONS: usize = 3;

/// Spans per trace of each "service span-name" of a shape.
fn span_counts(shape: &[ShapeNode]) -> BTreeMap<String, u64> {
    let mut per_trace = vec![1u64; shape.len()];
    let mut out = BTreeMap::new();
    for (i, n) in shape.iter().enumerate() {
        // The walk is breadth first: a parent's count is known before its children's.
        let above = n.parent.filter(|&p| p < i).map_or(1, |p| per_trace[p]);
        per_trace[i] = above.saturating_mul(u64::from(n.count));
        *out.entry(format!("{} {}", n.service, n.operation))
            .or_insert(0) += per_trace[i];
    }
    out
}

/// What `mine` has that `usual` lacks, what it lacks, and what it has more or fewer of.
fn distinctions(mine: &BTreeMap<String, u64>, usual: &BTreeMap<String, u64>) -> Vec<String> {
    let times = |n: u64| {
        if n > 1 {
            format!(" ×{n}")
        } else {
            String::new()
        }
    };
    let mut out: Vec<String> = mine
        .iter()
        .filter(|(l, _)| !usual.contains_key(*l))
        .map(|(l, &n)| format!("+{l}{}", times(n)))
        .collect();
    out.extend(
        usual
            .keys()
            .filter(|l| !mine.contains_key(*l))
            .map(|l| format!("−{l}")),
    );
    out.extend(mine.iter().filter_map(|(l, &n)| {
        let u = *usual.get(l)?;
        (u != n).then(|| format!("{l} ×{n} (usual ×{u})"))
    }));
    if out.is_empty() {
        out.push("the same spans, nested differently".to_string());
    }
    out.truncate(MOST_DISTINCTIONS);
    out
}

fn summary(id: PatternId, p: &PatternTotals) -> PatternSummary {
    let mut services: Vec<String> = p.shape.iter().map(|n| n.service.to_string()).collect();
    services.sort();
    services.dedup();
    let traces = p.latency.count().max(1);
    PatternSummary {
        id,
        root_service: p.shape[0].service.to_string(),
        root_operation: p.shape[0].operation.to_string(),
        services,
        spans: p.nodes.iter().map(|n| n.instances).sum::<u64>() / traces,
        count: p.latency.count(),
        errors: p.errors,
        total_ns: p.latency.sum(),
        latency: p.latency.percentiles(),
        distinct: Vec::new(),
    }
}
