//! What sets a selection of traces apart from the rest of a window (Honeycomb's BubbleUp,
//! Tempo's `compare()`): every service, span name and attribute value a trace holds is
//! counted once per trace, in the selection and in the rest, and they are ranked by how
//! much larger their share of the selection is than their share of the rest.
//!
//! Memory is bounded whatever the window: an attribute key with more than
//! [`MAX_VALUES_PER_KEY`] distinct values is an identifier (a user, a request id), which
//! sets nothing apart, and is dropped with its values (named in `crowded_keys`); at most
//! [`MAX_FEATURES`] values are counted, later ones are counted as untracked.
//!
//! A feature is known by a 64-bit hash of what it names, taken from the span's own text:
//! its strings are made only the first time it is seen, not once per span (a window of
//! 10 M spans sees each feature millions of times). Two features whose hashes collide
//! would be counted as one; at 50 000 features the odds are about one in 10^10.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};

use causeway_model::{KeyValue, Span, Trace, Value};
use foldhash::fast::FixedState;
use foldhash::HashMap;
use serde::Serialize;

use crate::patterns::{PatternId, TraceShape};

/// Distinct values of one attribute key counted before the key is taken for an identifier.
pub const MAX_VALUES_PER_KEY: usize = 100;
/// Distinct (kind, key, value) counted at most.
pub const MAX_FEATURES: usize = 50_000;
/// Attribute values longer than this are not counted (bodies, statements, stack traces).
const LONGEST_VALUE: usize = 200;

/// Which traces are the selection: all the bounds given hold. On the trace's start (its
/// earliest span), its duration (latest end less earliest start) and its errors.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Selection {
    /// Start at or after, Unix ns.
    pub start_from: Option<u64>,
    /// Start before, Unix ns.
    pub start_to: Option<u64>,
    /// Duration at least, ns.
    pub min_duration: Option<u64>,
    /// Duration at most, ns.
    pub max_duration: Option<u64>,
    /// Only traces with a span in error.
    pub errors: bool,
    /// Only traces of this pattern (their shape, as [`crate::patterns`] groups them).
    pub pattern: Option<PatternId>,
}

impl Selection {
    /// Whether `trace` is in the selection.
    pub fn holds(&self, trace: &Trace) -> bool {
        let start = trace.spans.iter().map(|s| s.start).min().unwrap_or(0);
        let end = trace.spans.iter().map(|s| s.end).max().unwrap_or(0);
        let duration = end.saturating_sub(start);
        self.start_from.is_none_or(|t| start >= t)
            && self.start_to.is_none_or(|t| start < t)
            && self.min_duration.is_none_or(|d| duration >= d)
            && self.max_duration.is_none_or(|d| duration <= d)
            && (!self.errors || trace.spans.iter().any(Span::is_error))
            && self
                .pattern
                .is_none_or(|p| TraceShape::of(trace).is_some_and(|s| s.id == p))
    }

    /// Whether nothing is asked (every trace selected, none left to compare with).
    pub fn is_everything(&self) -> bool {
        *self == Selection::default()
    }
}

/// What a trace can hold that sets it apart.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum Feature {
    /// A span of this service.
    Service {
        /// The service.
        service: String,
    },
    /// A span of this service and name.
    Span {
        /// The span's service.
        service: String,
        /// The span's name.
        name: String,
    },
    /// A span attribute with this value.
    Attribute {
        /// The attribute's key.
        key: String,
        /// Its value, as text.
        value: String,
    },
    /// A span that ended in error, of this service.
    Error {
        /// The service.
        service: String,
    },
}

/// The counts of a window: per feature, traces holding it in the selection and in the rest.
#[derive(Debug, Default)]
pub struct Differences {
    selected: u64,
    rest: u64,
    /// By the feature's hash: the feature and its counts (selected, rest).
    counts: HashMap<u64, (Feature, [u64; 2])>,
    /// Distinct values counted per attribute key.
    values: HashMap<String, usize>,
    crowded: HashSet<String>,
    untracked: u64,
    /// The features of the trace being added (each counts once a trace).
    seen: foldhash::HashSet<u64>,
}

/// The hasher every shard uses: the same feature has the same hash in all of them.
const HASHER: FixedState = FixedState::with_seed(0x5eed_d1ff);

/// A hash of a feature: its kind and its parts, each ended by a byte no text holds.
fn feature_hash(kind: u8, parts: &[&str]) -> u64 {
    let mut h = HASHER.build_hasher();
    h.write_u8(kind);
    for p in parts {
        h.write(p.as_bytes());
        h.write_u8(0xff);
    }
    h.finish()
}

/// Feeds what a value displays as to a hasher, counting its bytes.
struct HashWriter<'a> {
    hasher: &'a mut foldhash::fast::FoldHasher,
    len: usize,
}

impl std::fmt::Write for HashWriter<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.hasher.write(s.as_bytes());
        self.len += s.len();
        Ok(())
    }
}

/// An attribute's hash and its value's length as text, without making the text.
fn attribute_hash(kv: &KeyValue) -> (u64, usize) {
    let mut h = HASHER.build_hasher();
    h.write_u8(ATTRIBUTE);
    h.write(kv.key.as_bytes());
    h.write_u8(0xff);
    let len = match &kv.value {
        Value::Str(s) => {
            h.write(s.as_bytes());
            s.len()
        }
        other => {
            let mut w = HashWriter {
                hasher: &mut h,
                len: 0,
            };
            let _ = write!(w, "{other}");
            w.len
        }
    };
    h.write_u8(0xff);
    (h.finish(), len)
}

const SERVICE: u8 = 0;
const SPAN: u8 = 1;
const ATTRIBUTE: u8 = 2;
const ERROR: u8 = 3;

/// One feature's shares, as the answer lists them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Difference {
    /// What the traces hold.
    #[serde(flatten)]
    pub feature: Feature,
    /// Selected traces holding it.
    pub selected: u64,
    /// Other traces holding it.
    pub rest: u64,
    /// `selected` / selected traces.
    pub selected_share: f64,
    /// `rest` / other traces.
    pub rest_share: f64,
}

/// The comparison's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// Traces in the selection.
    pub selected: u64,
    /// Traces in the rest of the window.
    pub rest: u64,
    /// The features most over-represented in the selection, largest difference first.
    pub differences: Vec<Difference>,
    /// Attribute keys dropped for having too many values (identifiers).
    pub crowded_keys: Vec<String>,
    /// Feature sightings not counted once [`MAX_FEATURES`] were held.
    pub untracked: u64,
}

impl Differences {
    /// Counts one trace's features, in the selection or in the rest.
    pub fn add(&mut self, trace: &Trace, selected: bool) {
        let side = usize::from(!selected);
        if selected {
            self.selected += 1;
        } else {
            self.rest += 1;
        }
        let mut seen = std::mem::take(&mut self.seen);
        seen.clear();
        for s in &trace.spans {
            let service = &*s.service;
            let h = feature_hash(SERVICE, &[service]);
            if seen.insert(h) {
                self.count_by_hash(h, side, 1, || Feature::Service {
                    service: service.to_string(),
                });
            }
            let h = feature_hash(SPAN, &[service, &s.name]);
            if seen.insert(h) {
                self.count_by_hash(h, side, 1, || Feature::Span {
                    service: service.to_string(),
                    name: s.name.clone(),
                });
            }
            if s.is_error() {
                let h = feature_hash(ERROR, &[service]);
                if seen.insert(h) {
                    self.count_by_hash(h, side, 1, || Feature::Error {
                        service: service.to_string(),
                    });
                }
            }
            self.add_attributes(s, side, &mut seen);
        }
        self.seen = seen;
    }

    fn add_attributes(&mut self, s: &Span, side: usize, seen: &mut foldhash::HashSet<u64>) {
        for kv in &s.attributes {
            let (h, len) = attribute_hash(kv);
            if len > LONGEST_VALUE || !seen.insert(h) || self.crowded.contains(&kv.key) {
                continue;
            }
            self.count_by_hash(h, side, 1, || Feature::Attribute {
                key: kv.key.clone(),
                value: kv.value.to_string(),
            });
        }
    }

    /// Adds `n` sightings on `side` (0 selected, 1 rest) of the feature hashed `h`, made
    /// by `make` if it is new, within the bounds.
    fn count_by_hash(&mut self, h: u64, side: usize, n: u64, make: impl FnOnce() -> Feature) {
        if let Some((_, c)) = self.counts.get_mut(&h) {
            c[side] += n;
            return;
        }
        let f = make();
        if let Feature::Attribute { key, .. } = &f {
            if self.crowded.contains(key) {
                return;
            }
            let values = self.values.entry(key.clone()).or_default();
            if *values >= MAX_VALUES_PER_KEY {
                let key = key.clone();
                self.crowd(key);
                return;
            }
            *values += 1;
        }
        if self.counts.len() < MAX_FEATURES {
            let mut c = [0, 0];
            c[side] = n;
            self.counts.insert(h, (f, c));
        } else {
            self.untracked += n;
        }
    }

    /// Takes `key` for an identifier: its values are dropped and no longer counted.
    fn crowd(&mut self, key: String) {
        self.values.remove(&key);
        self.counts
            .retain(|_, (g, _)| !matches!(g, Feature::Attribute { key: k, .. } if *k == key));
        self.crowded.insert(key);
    }

    /// Folds another shard's counts into these.
    pub fn merge(&mut self, other: Differences) {
        self.selected += other.selected;
        self.rest += other.rest;
        self.untracked += other.untracked;
        for key in other.crowded {
            if !self.crowded.contains(&key) {
                self.crowd(key);
            }
        }
        for (h, (f, [a, b])) in other.counts {
            if a > 0 {
                self.count_by_hash(h, 0, a, || f.clone());
            }
            if b > 0 {
                self.count_by_hash(h, 1, b, || f);
            }
        }
    }

    /// The `limit` features whose share of the selection exceeds their share of the rest
    /// the most (ties: the more selected traces, then the feature's order).
    pub fn report(self, limit: usize) -> Report {
        let share = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
        let mut differences: Vec<Difference> = self
            .counts
            .into_values()
            .map(|(feature, [selected, rest])| Difference {
                feature,
                selected,
                rest,
                selected_share: share(selected, self.selected),
                rest_share: share(rest, self.rest),
            })
            .filter(|d| d.selected > 0 && d.selected_share > d.rest_share)
            .collect();
        differences.sort_by(|a, b| {
            (b.selected_share - b.rest_share)
                .total_cmp(&(a.selected_share - a.rest_share))
                .then(b.selected.cmp(&a.selected))
                .then(a.feature.cmp(&b.feature))
        });
        differences.truncate(limit);
        let mut crowded_keys: Vec<String> = self.crowded.into_iter().collect();
        crowded_keys.sort();
        Report {
            selected: self.selected,
            rest: self.rest,
            differences,
            crowded_keys,
            untracked: self.untracked,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::{KeyValue, SpanId, Status, TraceId};

    const MS: u64 = 1_000_000;

    /// A request to `web` taking `ms`, calling `db` when `db`, with `region` and a user id.
    fn request(n: u128, ms: u64, db: bool, region: &str) -> Trace {
        let t = TraceId::new(n).unwrap();
        let mut root = Span::new(t, SpanId::new(1).unwrap(), None, "GET /", "web", 0, ms * MS);
        root.attributes = vec![
            KeyValue::new("region", region),
            KeyValue::new("user.id", format!("u{n}")),
        ];
        let mut spans = vec![root];
        if db {
            let mut q = Span::new(
                t,
                SpanId::new(2).unwrap(),
                SpanId::new(1),
                "SELECT",
                "db",
                MS,
                2 * MS,
            );
            q.status = Status::Error("timeout".into());
            spans.push(q);
        }
        Trace::assemble(t, spans)
    }

    fn slow() -> Selection {
        Selection {
            min_duration: Some(100 * MS),
            ..Selection::default()
        }
    }

    #[test]
    fn a_pattern_is_a_selection() {
        let with_db = request(1, 10, true, "eu");
        let without = request(2, 10, false, "eu");
        let sel = Selection {
            pattern: TraceShape::of(&with_db).map(|s| s.id),
            ..Selection::default()
        };
        assert!(!sel.is_everything());
        assert!(sel.holds(&with_db));
        assert!(
            sel.holds(&request(3, 500, true, "us")),
            "the same shape, whatever else"
        );
        assert!(!sel.holds(&without));
    }

    #[test]
    fn what_only_the_slow_traces_hold_is_ranked_first() {
        let mut d = Differences::default();
        let sel = slow();
        // 10 slow traces: all in eu, 8 call db. 110 fast: a tenth in eu, 11 call db.
        for n in 1..=120u128 {
            let is_slow = n <= 10;
            let t = request(
                n,
                if is_slow { 200 } else { 10 },
                if is_slow { n <= 8 } else { n % 10 == 0 },
                if is_slow || n % 10 == 1 { "eu" } else { "us" },
            );
            assert_eq!(sel.holds(&t), is_slow);
            d.add(&t, sel.holds(&t));
        }
        let r = d.report(10);
        assert_eq!((r.selected, r.rest), (10, 110));
        let first = &r.differences[0];
        assert_eq!(
            first.feature,
            Feature::Attribute {
                key: "region".into(),
                value: "eu".into()
            }
        );
        assert_eq!((first.selected, first.rest), (10, 11));
        assert!((first.selected_share - 1.0).abs() < 1e-9 && (first.rest_share - 0.1).abs() < 1e-9);
        let names: Vec<&Feature> = r.differences.iter().map(|d| &d.feature).collect();
        assert!(names.contains(&&Feature::Span {
            service: "db".into(),
            name: "SELECT".into()
        }));
        assert!(names.contains(&&Feature::Error {
            service: "db".into()
        }));
        // What every trace holds sets nothing apart; "us" is rarer among the slow.
        assert!(!names.contains(&&Feature::Service {
            service: "web".into()
        }));
        assert!(!names.contains(&&Feature::Attribute {
            key: "region".into(),
            value: "us".into()
        }));
        // A user id has a value per trace: an identifier, dropped.
        assert_eq!(r.crowded_keys, ["user.id"]);
        assert!(!names
            .iter()
            .any(|f| matches!(f, Feature::Attribute { key, .. } if key == "user.id")));
    }

    #[test]
    fn shards_merged_count_as_one() {
        let sel = slow();
        let traces: Vec<Trace> = (1..=300u128)
            .map(|n| {
                request(
                    n,
                    if n % 7 == 0 { 150 } else { 5 },
                    n % 3 == 0,
                    if n % 7 == 0 { "eu" } else { "us" },
                )
            })
            .collect();
        let mut one = Differences::default();
        for t in &traces {
            one.add(t, sel.holds(t));
        }
        let mut parts = [
            Differences::default(),
            Differences::default(),
            Differences::default(),
        ];
        for (i, t) in traces.iter().enumerate() {
            parts[i % 3].add(t, sel.holds(t));
        }
        let [mut a, b, c] = parts;
        a.merge(b);
        a.merge(c);
        assert_eq!(a.report(50), one.report(50));
    }

    #[test]
    fn the_counts_stay_bounded() {
        let mut d = Differences::default();
        let t = TraceId::new(1).unwrap();
        for k in 0..(MAX_FEATURES as u64 / 50 + 10) {
            let mut s = Span::new(t, SpanId::new(1).unwrap(), None, "op", "svc", 0, 1);
            s.attributes = (0..60)
                .map(|v| KeyValue::new(format!("k{k}"), format!("v{v}")))
                .collect();
            d.add(&Trace::assemble(t, vec![s]), k % 2 == 0);
        }
        assert!(d.counts.len() <= MAX_FEATURES);
        assert!(d.untracked > 0);
    }
}
