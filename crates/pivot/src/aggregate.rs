//! A process's partial results of one query: the emitted tuples aggregated per group, as
//! the paper's agents do before reporting each interval, and merged again at the hub.
//!
//! Sums of integers are exact (`i128`); AVERAGE is kept as a sum and a count. Each group
//! keeps an example trace: the first sampled trace whose hit fed it. At most 10 000 groups
//! are kept per interval (`MAX_GROUPS`), the rest counted. Groups are a `hashbrown` table
//! with foldhash, keyed by a hash of the values' bytes only and looked up by borrowed keys
//! (`add_borrowed`), so an emit clones a key only into a new group.

use std::cmp::Ordering;
use std::hash::{Hash, Hasher};

use causeway_model::TraceId;

use crate::lang::ast::AggFn;
use crate::value::{hash_values, Value};

/// Groups kept per query and interval before the rest are counted as overflow.
pub const MAX_GROUPS: usize = 10_000;

/// One aggregate's running state. Integer sums are exact (`i128`); a float makes the sum
/// a float. AVERAGE is a sum and a count until it is read.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AggState {
    /// COUNT.
    Count(u64),
    /// SUM of integers.
    SumInt(i128),
    /// SUM once a float was added.
    SumFloat(f64),
    /// MIN.
    Min(Option<Value>),
    /// MAX.
    Max(Option<Value>),
    /// AVERAGE.
    Average {
        /// The weighted sum.
        sum: f64,
        /// The weight.
        count: u64,
    },
}

impl AggState {
    /// The state before any tuple.
    pub fn new(func: AggFn) -> AggState {
        match func {
            AggFn::Count => AggState::Count(0),
            AggFn::Sum => AggState::SumInt(0),
            AggFn::Min => AggState::Min(None),
            AggFn::Max => AggState::Max(None),
            AggFn::Average => AggState::Average { sum: 0.0, count: 0 },
        }
    }

    /// Takes in `value` seen `weight` times (`Null` for COUNT's missing argument).
    #[inline]
    pub fn add(&mut self, value: &Value, weight: u64) {
        match self {
            AggState::Count(c) => *c = c.saturating_add(weight),
            AggState::SumInt(s) => match value {
                Value::Int(i) => *s += *i as i128 * weight as i128,
                Value::Float(f) => *self = AggState::SumFloat(*s as f64 + f * weight as f64),
                _ => {}
            },
            AggState::SumFloat(s) => {
                if let Some(f) = value.as_f64() {
                    *s += f * weight as f64;
                }
            }
            AggState::Min(m) => keep(m, value, Ordering::Less),
            AggState::Max(m) => keep(m, value, Ordering::Greater),
            AggState::Average { sum, count } => {
                if let Some(f) = value.as_f64() {
                    *sum += f * weight as f64;
                    *count = count.saturating_add(weight);
                }
            }
        }
    }

    /// Combines another partial state of the same aggregate.
    pub fn merge(&mut self, other: &AggState) {
        match (&mut *self, other) {
            (AggState::Count(a), AggState::Count(b)) => *a = a.saturating_add(*b),
            (AggState::SumInt(a), AggState::SumInt(b)) => *a += b,
            (AggState::SumInt(a), AggState::SumFloat(b)) => {
                *self = AggState::SumFloat(*a as f64 + b)
            }
            (AggState::SumFloat(a), AggState::SumInt(b)) => *a += *b as f64,
            (AggState::SumFloat(a), AggState::SumFloat(b)) => *a += b,
            (AggState::Min(_), AggState::Min(Some(v)))
            | (AggState::Max(_), AggState::Max(Some(v))) => self.add(v, 1),
            (AggState::Average { sum, count }, AggState::Average { sum: s, count: c }) => {
                *sum += s;
                *count = count.saturating_add(*c);
            }
            _ => {}
        }
    }

    /// Whether this is a state of `func`.
    pub fn is_state_of(&self, func: AggFn) -> bool {
        matches!(
            (self, func),
            (AggState::Count(_), AggFn::Count)
                | (AggState::SumInt(_) | AggState::SumFloat(_), AggFn::Sum)
                | (AggState::Min(_), AggFn::Min)
                | (AggState::Max(_), AggFn::Max)
                | (AggState::Average { .. }, AggFn::Average)
        )
    }

    /// The result.
    pub fn value(&self) -> Value {
        match self {
            AggState::Count(c) => Value::Int(i64::try_from(*c).unwrap_or(i64::MAX)),
            AggState::SumInt(s) => i64::try_from(*s).map_or(Value::Float(*s as f64), Value::Int),
            AggState::SumFloat(s) => Value::Float(*s),
            AggState::Min(m) | AggState::Max(m) => m.clone().unwrap_or(Value::Null),
            AggState::Average { count: 0, .. } => Value::Null,
            AggState::Average { sum, count } => Value::Float(sum / *count as f64),
        }
    }
}

/// Keeps `value` in `m` when `m` is empty or `value` compares to it as `want`.
fn keep(m: &mut Option<Value>, value: &Value, want: Ordering) {
    if matches!(value, Value::Null) {
        return;
    }
    let replace = match m {
        None => true,
        Some(cur) => value.compare(cur) == Some(want),
    };
    if replace {
        *m = Some(value.clone());
    }
}

/// One group's aggregate states and an example trace that fed it.
#[derive(Debug, Clone)]
struct GroupState {
    states: Vec<AggState>,
    example: Option<TraceId>,
}

/// A group's key. It hashes each value's bytes and nothing else (no length, no
/// variant tag: equality tells apart what collides), and so do the borrowed forms
/// advice and merges look it up with, [`KeyRefs`] and [`KeySlice`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct GroupKey(Vec<Value>);

impl Hash for GroupKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_values(self.0.iter(), h);
    }
}

/// A key of borrowed values: looked up without cloning them.
struct KeyRefs<'a>(&'a [&'a Value]);

impl Hash for KeyRefs<'_> {
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_values(self.0.iter().copied(), h);
    }
}

impl hashbrown::Equivalent<GroupKey> for KeyRefs<'_> {
    #[inline]
    fn equivalent(&self, key: &GroupKey) -> bool {
        key.0.len() == self.0.len() && key.0.iter().zip(self.0).all(|(k, v)| k == *v)
    }
}

/// A key as a slice of values.
struct KeySlice<'a>(&'a [Value]);

impl Hash for KeySlice<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_values(self.0.iter(), h);
    }
}

impl hashbrown::Equivalent<GroupKey> for KeySlice<'_> {
    fn equivalent(&self, key: &GroupKey) -> bool {
        key.0 == self.0
    }
}

/// The groups of one query in one process and interval.
#[derive(Debug, Clone)]
pub struct Aggregator {
    funcs: Vec<AggFn>,
    groups: hashbrown::HashMap<GroupKey, GroupState>,
    /// Tuples whose group did not fit under [`MAX_GROUPS`].
    pub overflow: u64,
}

impl Aggregator {
    /// For a query whose aggregates are `funcs` (none: groups count their tuples).
    pub fn new(funcs: &[AggFn]) -> Aggregator {
        Aggregator {
            funcs: funcs.to_vec(),
            groups: hashbrown::HashMap::new(),
            overflow: 0,
        }
    }

    /// Adds a tuple of group `key` with the aggregates' arguments, `weight` times.
    pub fn add(&mut self, key: &[Value], args: &[Value], weight: u64) {
        let key: Vec<&Value> = key.iter().collect();
        let args: Vec<&Value> = args.iter().collect();
        self.add_borrowed(&key, &args, weight, None);
    }

    /// [`Aggregator::add`] from borrowed values, cloned only into a new group (advice
    /// emits this way), and a trace that fed the group, kept if it has no example yet.
    pub fn add_borrowed(
        &mut self,
        key: &[&Value],
        args: &[&Value],
        weight: u64,
        example: Option<TraceId>,
    ) {
        let group = match self.groups.get_mut(&KeyRefs(key)) {
            Some(g) => g,
            None => {
                if self.groups.len() >= MAX_GROUPS {
                    self.overflow = self.overflow.saturating_add(weight);
                    return;
                }
                let fresh = GroupState {
                    states: self.funcs.iter().map(|f| AggState::new(*f)).collect(),
                    example: None,
                };
                let owned = GroupKey(key.iter().map(|v| (*v).clone()).collect());
                self.groups.entry(owned).or_insert(fresh)
            }
        };
        for (s, a) in group.states.iter_mut().zip(args) {
            s.add(a, weight);
        }
        if group.example.is_none() {
            group.example = example;
        }
    }

    /// Merges another aggregator of the same query (the hub's step).
    pub fn merge(&mut self, other: &Aggregator) {
        for (key, theirs) in &other.groups {
            match self.groups.get_mut(key) {
                Some(mine) => {
                    mine.states
                        .iter_mut()
                        .zip(&theirs.states)
                        .for_each(|(m, t)| m.merge(t));
                    if mine.example.is_none() {
                        mine.example = theirs.example;
                    }
                }
                None => {
                    self.groups.insert(key.clone(), theirs.clone());
                }
            }
        }
        self.overflow = self.overflow.saturating_add(other.overflow);
    }

    /// Keeps `trace` as the example of group `key` if the group has none yet.
    pub fn note_example(&mut self, key: &[Value], trace: TraceId) {
        if let Some(g) = self.groups.get_mut(&KeySlice(key)) {
            g.example.get_or_insert(trace);
        }
    }

    /// The example trace of group `key`.
    pub fn example(&self, key: &[Value]) -> Option<TraceId> {
        self.groups.get(&KeySlice(key)).and_then(|g| g.example)
    }

    /// Rows of key values then aggregate values, sorted by key.
    pub fn rows(&self) -> Vec<Vec<Value>> {
        self.rows_with_examples()
            .into_iter()
            .map(|(r, _)| r)
            .collect()
    }

    /// [`Aggregator::rows`], each with its group's example trace.
    pub fn rows_with_examples(&self) -> Vec<(Vec<Value>, Option<TraceId>)> {
        let mut rows: Vec<(Vec<Value>, Option<TraceId>)> = self
            .groups
            .iter()
            .map(|(k, s)| {
                let row =
                    k.0.iter()
                        .cloned()
                        .chain(s.states.iter().map(AggState::value))
                        .collect();
                (row, s.example)
            })
            .collect();
        rows.sort_by(|(a, _), (b, _)| {
            a.iter()
                .zip(b)
                .map(|(x, y)| {
                    x.compare(y)
                        .unwrap_or_else(|| x.to_string().cmp(&y.to_string()))
                })
                .find(|o| o.is_ne())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        rows
    }

    /// The groups: key values and aggregate states.
    pub fn groups(&self) -> impl Iterator<Item = (&[Value], &[AggState])> {
        self.groups
            .iter()
            .map(|(k, s)| (k.0.as_slice(), s.states.as_slice()))
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    /// Whether nothing was added since it was made or taken.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty() && self.overflow == 0
    }

    /// Merges one group of another process's partial result. False, and nothing
    /// changed, when the states are not this query's aggregates.
    pub fn merge_group(&mut self, key: &[Value], states: &[AggState]) -> bool {
        let fits = states.len() == self.funcs.len()
            && states
                .iter()
                .zip(&self.funcs)
                .all(|(s, f)| s.is_state_of(*f));
        if !fits {
            return false;
        }
        let full = self.groups.len() >= MAX_GROUPS;
        match self.groups.get_mut(&KeySlice(key)) {
            Some(mine) => mine
                .states
                .iter_mut()
                .zip(states)
                .for_each(|(m, t)| m.merge(t)),
            // Counted per group: how many tuples the group held is not known here.
            None if full => self.overflow = self.overflow.saturating_add(1),
            None => {
                let group = GroupState {
                    states: states.to_vec(),
                    example: None,
                };
                self.groups.insert(GroupKey(key.to_vec()), group);
            }
        }
        true
    }

    /// Takes the groups, leaving it empty for the next interval.
    pub fn take(&mut self) -> Aggregator {
        Aggregator {
            funcs: self.funcs.clone(),
            groups: std::mem::take(&mut self.groups),
            overflow: std::mem::take(&mut self.overflow),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_added_owned_borrowed_or_merged_is_one_group() {
        let trace = TraceId::new(7).expect("non-zero");
        let mut a = Aggregator::new(&[AggFn::Count, AggFn::Sum]);
        let key = [Value::from("A"), Value::Int(5)];
        a.add(&key, &[Value::Null, Value::Int(2)], 1);
        a.add_borrowed(
            &[&key[0], &key[1]],
            &[&Value::Null, &Value::Int(3)],
            2,
            None,
        );
        assert!(a.merge_group(&key, &[AggState::Count(4), AggState::SumInt(10)]));
        a.note_example(&key, trace);
        // Equal hashes, different values: other groups.
        a.add(
            &[Value::from("A"), Value::Float(f64::from_bits(5))],
            &[Value::Null, Value::Null],
            1,
        );
        a.add(&[Value::from("A5")], &[Value::Null, Value::Null], 1);
        assert_eq!(a.len(), 3);
        assert_eq!(a.example(&key), Some(trace));
        let states: Vec<&[AggState]> = a
            .groups()
            .filter(|(k, _)| *k == key.as_slice())
            .map(|(_, s)| s)
            .collect();
        assert_eq!(states, [&[AggState::Count(7), AggState::SumInt(18)][..]]);
    }
}
