//! Bags: the tuples a request carries from advice to later advice (the paper's section
//! 3), in the process. Branches copy and joins merge, and merging two copies never counts a
//! tuple twice:
//!
//! - A bag packed without a temporal filter is a set of segments, each a list of distinct
//!   tuples with counts, written only by the copy that opened it. A copy (a child span, a
//!   request sent to another process) opens its own segment on its first pack; segments
//!   only grow, so a merge keeps, per segment, the version that has seen more packs.
//! - A `First(n)` or `MostRecent(n)` bag holds at most `n` tuples, each stamped with a
//!   timestamp that respects causality (a hybrid logical clock) and a unique origin; a
//!   merge is the union by stamp, cut again to the `n` first or most recent.
//!
//! A process marks what arrived with a request ([`Bags::mark_arrived`]), so that its
//! response carries back only what the request's caller does not have yet
//! ([`Bags::since_arrival`]): merging is idempotent, so anything more would only be
//! bytes on the wire and work for the caller.
//!
//! A segment holds its tuples as the wire writes them, one after another in one buffer,
//! each tuple a byte range with its count. A pack encodes the tuple at the end of the
//! buffer and takes it off again when an earlier tuple has the same bytes (found by
//! scanning up to 8 tuples, then through a hash index over the bytes); encoding the bag
//! copies the bytes. A segment that arrives is checked and kept as it came; its values are
//! decoded the first time advice joins it, once, and kept with it until a pack changes it.
//! Copies of a request's bags share segments (`HeldSegment`: an `Arc` with the version
//! that arrived), so copying the bags and merging a copy back copy pointers; a segment is
//! copied only when a copy packs into one it shares. The bags are a `SmallMap`
//! (`crate::small_map`), and a First/MostRecent bag holds its first tuple, and a stamped
//! tuple its first two values, in place (`smallvec`), so a request's first PACK FIRST
//! allocates only the baggage itself. A bag keeps its last header text until its bags
//! change (`crate::wire::encode_text_shared`), so a request's second call does not encode
//! the same bags again.

use std::hash::BuildHasher;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::small_map::SmallMap;
use crate::value::Value;

/// The bags of a request by key.
pub(crate) type BagMap = SmallMap<BagKey, Bag>;

/// A bag: the query it belongs to and the variable that packs it (or, shared, the query
/// and variable that first packed the same tuples).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct BagKey {
    /// The query's id (allocated by the hub).
    pub query: u32,
    /// The packing variable's index within the query.
    pub bag: u16,
}

/// The bags of one request at one point of its execution.
#[derive(Debug, Clone, Default)]
pub struct Bags {
    pub(crate) bags: BagMap,
    /// Bags were dropped somewhere on the way to keep the baggage under its size limit.
    pub overflowed: bool,
    /// The header text last encoded, kept until the bags change: a request's calls to
    /// several services send the same bags (see `wire::encode_text_shared`).
    pub(crate) text: std::sync::OnceLock<EncodedText>,
}

/// Header text as encoded for a byte limit and overflow mark: the text (none for no
/// bags) and whether bags were cut to fit.
#[derive(Debug, Clone)]
pub(crate) struct EncodedText {
    pub(crate) max_bytes: usize,
    pub(crate) overflowed: bool,
    pub(crate) text: Option<(std::sync::Arc<str>, bool)>,
}

impl PartialEq for Bags {
    fn eq(&self, other: &Bags) -> bool {
        (&self.bags, self.overflowed) == (&other.bags, other.overflowed)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Bag {
    Grouped(Grouped),
    Temporal(Temporal),
}

#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Grouped {
    /// The segment this copy writes, once it has packed.
    pub(crate) open: Option<u64>,
    pub(crate) segments: SmallMap<u64, HeldSegment>,
}

/// A segment as one copy of the baggage holds it. Copies share a segment until one packs
/// into it: copying a request's bags (a child span that packs, a response merged in)
/// copies pointers, not tuples.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct HeldSegment {
    /// The version that arrived with the request (0: it did not arrive).
    pub(crate) arrived: u64,
    pub(crate) segment: Arc<Segment>,
}

/// A segment's tuples are held as the wire writes them, one after another in one buffer:
/// packing encodes a tuple once (and finds an earlier copy of it by its bytes), sending
/// the bag copies bytes, and a bag that arrived is checked and kept as it came. The
/// values are decoded only when advice joins the segment, once, and kept with it.
#[derive(Debug, Default)]
pub(crate) struct Segment {
    /// Packs into this segment so far.
    pub(crate) version: u64,
    /// Each distinct tuple's values in the wire's form (`count value*`).
    bytes: Vec<u8>,
    /// Each distinct tuple: where its bytes end, and how many times it was packed.
    ends: SmallVec<[(u32, u64); 1]>,
    /// Where each tuple is in `ends`, by its bytes' hash, once the segment holds
    /// [`INDEXED`] tuples; built again whenever it does not cover `ends`.
    index: TupleIndex,
    /// The tuples' values, decoded the first time advice reads them.
    decoded: std::sync::OnceLock<Decoded>,
}

/// A segment's values: every tuple's, one after another, and where each tuple ends.
#[derive(Debug, Clone, Default)]
struct Decoded {
    values: InlineValues,
    ends: SmallVec<[usize; 1]>,
}

/// Values with the first two held in place: most stamped tuples hold one small tuple (a
/// request's host, packed at its start), which then costs no allocation of its own.
pub(crate) type InlineValues = SmallVec<[Value; 2]>;

/// Tuples a segment holds before packs find theirs through an index, not a scan.
const INDEXED: usize = 8;

#[derive(Debug, Clone, Default)]
struct TupleIndex {
    at: hashbrown::HashTable<u32>,
    hasher: hashbrown::DefaultHashBuilder,
}

/// A copy is made to pack into it (`Arc::make_mut`): the decoded values would be thrown
/// away at once, so they are not copied.
impl Clone for Segment {
    fn clone(&self) -> Segment {
        Segment {
            version: self.version,
            bytes: self.bytes.clone(),
            ends: self.ends.clone(),
            index: self.index.clone(),
            decoded: std::sync::OnceLock::new(),
        }
    }
}

impl PartialEq for Segment {
    fn eq(&self, other: &Segment) -> bool {
        (self.version, &self.bytes, &self.ends) == (other.version, &other.bytes, &other.ends)
    }
}

impl Segment {
    /// An empty segment at `version`, with room for `tuples` tuples.
    pub(crate) fn new(version: u64, tuples: usize) -> Segment {
        Segment {
            version,
            ends: SmallVec::with_capacity(tuples),
            ..Segment::default()
        }
    }

    /// Distinct tuples held.
    pub(crate) fn len(&self) -> usize {
        self.ends.len()
    }

    /// The bytes of tuple `i`.
    fn tuple_bytes(&self, i: usize) -> &[u8] {
        bytes_of(&self.bytes, &self.ends, i)
    }

    /// Each tuple's bytes (its values in the wire's form) and count.
    pub(crate) fn encoded(&self) -> impl Iterator<Item = (&[u8], u64)> {
        (0..self.ends.len()).map(|i| (self.tuple_bytes(i), self.ends[i].1))
    }

    /// The tuples with their counts, in the order they were first packed.
    pub(crate) fn tuples(&self) -> impl Iterator<Item = (&[Value], u64)> {
        let d = self.decoded.get_or_init(|| self.decode());
        let mut start = 0;
        d.ends
            .iter()
            .zip(&self.ends)
            .map(move |(&end, &(_, count))| {
                let t = d.values.get(start..end).unwrap_or_default();
                start = end;
                (t, count)
            })
    }

    fn decode(&self) -> Decoded {
        let mut d = Decoded::default();
        for i in 0..self.ends.len() {
            // Bytes this process encoded, or checked when they arrived: they decode.
            let mut r = crate::tuple_bytes::ValuesReader::new(self.tuple_bytes(i));
            let _ = r.values_into(&mut d.values);
            d.ends.push(d.values.len());
        }
        d
    }

    /// Appends a tuple as another writer sent it (decoding keeps a segment as written):
    /// `read` appends its values' bytes, checked.
    pub(crate) fn push_decoded<E>(
        &mut self,
        count: u64,
        read: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
    ) -> Result<(), E> {
        read(&mut self.bytes)?;
        self.ends.push((self.bytes.len() as u32, count));
        Ok(())
    }

    /// Adds `weight` packs of `values`: encoded at the end of the buffer, and taken off
    /// again when an earlier tuple has the same bytes.
    fn add<'v>(&mut self, values: impl ExactSizeIterator<Item = &'v Value>, weight: u64) {
        let indexed = self.ends.len() >= INDEXED;
        if indexed {
            self.cover_index(0);
        }
        let start = self.bytes.len();
        crate::tuple_bytes::put_values(&mut self.bytes, values);
        let new = &self.bytes[start..];
        let found = if !indexed {
            (0..self.ends.len()).find(|&i| bytes_of(&self.bytes, &self.ends, i) == new)
        } else {
            let hash = self.index.hasher.hash_one(new);
            let (ends, bytes) = (&self.ends, &self.bytes);
            match self
                .index
                .at
                .find(hash, |&j| bytes_of(bytes, ends, j as usize) == new)
            {
                Some(&j) => Some(j as usize),
                None => {
                    let hasher = &self.index.hasher;
                    self.index.at.insert_unique(hash, ends.len() as u32, |&j| {
                        hasher.hash_one(bytes_of(bytes, ends, j as usize))
                    });
                    None
                }
            }
        };
        match found {
            Some(i) => {
                self.bytes.truncate(start);
                let count = &mut self.ends[i].1;
                *count = count.saturating_add(weight);
            }
            None => self.ends.push((self.bytes.len() as u32, weight)),
        }
    }

    /// Makes the index cover every tuple, with room for `more` (a batch of packs
    /// reserves once, not at each growth).
    fn cover_index(&mut self, more: usize) {
        let (ends, bytes) = (&self.ends, &self.bytes);
        let hasher = self.index.hasher;
        let rehash = |&j: &u32| hasher.hash_one(bytes_of(bytes, ends, j as usize));
        if self.index.at.len() != ends.len() {
            self.index.at.clear();
            // Room to double before growing again: packs come in bursts.
            self.index.at.reserve(2 * ends.len() + more, rehash);
            for j in 0..ends.len() {
                let h = hasher.hash_one(bytes_of(bytes, ends, j));
                self.index.at.insert_unique(h, j as u32, rehash);
            }
        } else if more > 0 {
            self.index.at.reserve(more, rehash);
        }
    }

    /// Makes room for `tuples` more tuples of `width` values each.
    fn reserve(&mut self, tuples: usize, width: usize) {
        self.ends.reserve(tuples);
        // A short string's bytes: a guess, only to grow the buffer once.
        self.bytes
            .reserve(tuples.saturating_mul(1 + width.saturating_mul(10)));
        if self.ends.len() + tuples > INDEXED {
            self.cover_index(tuples);
        }
    }
}

/// Tuple `i`'s bytes in a segment's buffer.
fn bytes_of<'a>(bytes: &'a [u8], ends: &[(u32, u64)], i: usize) -> &'a [u8] {
    let end = |i: usize| ends.get(i).map_or(0, |e| e.0 as usize);
    let start = i.checked_sub(1).map_or(0, end);
    bytes.get(start..end(i)).unwrap_or_default()
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Temporal {
    /// Keeps the first tuples (else the most recent).
    pub(crate) first: bool,
    pub(crate) n: u32,
    /// Ordered by stamp (most such bags keep one tuple: `First`, `MostRecent`).
    pub(crate) tuples: SmallVec<[Stamped; 1]>,
}

/// A tuple of a temporal bag with its causal stamp.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Stamped {
    pub(crate) ts: u64,
    pub(crate) origin: u64,
    pub(crate) values: InlineValues,
    /// It arrived with the request.
    pub(crate) arrived: bool,
}

impl Temporal {
    /// Sorted by stamp, each stamp once, cut to the `n` first or most recent.
    pub(crate) fn trim(&mut self) {
        self.tuples.sort_by_key(|t| (t.ts, t.origin));
        self.tuples.dedup_by_key(|t| (t.ts, t.origin));
        let n = self.n as usize;
        if self.tuples.len() > n {
            if self.first {
                self.tuples.truncate(n);
            } else {
                self.tuples.drain(..self.tuples.len() - n);
            }
        }
    }
}

impl Bags {
    /// True when no bag holds anything.
    pub fn is_empty(&self) -> bool {
        self.bags.is_empty()
    }

    /// Packs tuples, each its number of times, into a bag without a temporal filter:
    /// every tuple of one advice hit at once (an exploded field gives dozens). `new_id`
    /// names the segment when this copy opens one.
    pub fn pack_grouped<'v, I>(
        &mut self,
        key: BagKey,
        tuples: impl ExactSizeIterator<Item = (I, u64)>,
        new_id: &mut dyn FnMut() -> u64,
    ) where
        I: ExactSizeIterator<Item = &'v Value> + Clone,
    {
        self.text.take();
        let bag = self
            .bags
            .get_or_insert_with(key, || Bag::Grouped(Grouped::default()));
        if !matches!(bag, Bag::Grouped(_)) {
            // A key is packed in one mode by its query; another mode is another query's
            // damaged bag, replaced.
            *bag = Bag::Grouped(Grouped::default());
        }
        let Bag::Grouped(g) = bag else {
            return;
        };
        let id = *g.open.get_or_insert_with(&mut *new_id);
        let held = g.segments.get_or_insert_with(id, HeldSegment::default);
        let seg = Arc::make_mut(&mut held.segment);
        // Its decoded values, if advice read them, no longer cover it.
        seg.decoded.take();
        let mut tuples = tuples.peekable();
        let width = tuples.peek().map_or(0, |(values, _)| values.len());
        seg.reserve(tuples.len(), width);
        for (values, weight) in tuples {
            seg.version += 1;
            seg.add(values, weight);
        }
    }

    /// Packs one stamped tuple into a `First(n)` (`first`) or `MostRecent(n)` bag.
    pub fn pack_temporal(
        &mut self,
        key: BagKey,
        first: bool,
        n: u32,
        ts: u64,
        origin: u64,
        values: impl IntoIterator<Item = Value>,
    ) {
        self.text.take();
        let empty = || {
            Bag::Temporal(Temporal {
                first,
                n,
                tuples: SmallVec::new(),
            })
        };
        let bag = self.bags.get_or_insert_with(key, empty);
        if !matches!(bag, Bag::Temporal(t) if t.first == first && t.n == n) {
            *bag = empty();
        }
        if let Bag::Temporal(t) = bag {
            // Pushed one by one: `collect` reserves first, which costs more than the
            // one or two values of most tuples.
            let mut held = InlineValues::new();
            values.into_iter().for_each(|v| held.push(v));
            t.tuples.push(Stamped {
                ts,
                origin,
                values: held,
                arrived: false,
            });
            t.trim();
        }
    }

    /// The tuples of a bag with their counts.
    pub fn unpack(&self, key: BagKey) -> Vec<(&[Value], u64)> {
        self.tuples(key).collect()
    }

    /// [`Bags::unpack`] without collecting them.
    pub fn tuples(&self, key: BagKey) -> impl Iterator<Item = (&[Value], u64)> {
        let (grouped, temporal) = match self.bags.get(&key) {
            None => (None, None),
            Some(Bag::Grouped(g)) => (Some(g), None),
            Some(Bag::Temporal(t)) => (None, Some(t)),
        };
        let grouped = grouped
            .into_iter()
            .flat_map(|g| g.segments.values().flat_map(|h| h.segment.tuples()));
        let temporal = temporal
            .into_iter()
            .flat_map(|t| t.tuples.iter().map(|s| (s.values.as_slice(), 1)));
        grouped.chain(temporal)
    }

    /// A copy for a branch of the request (a child span, a call to another process): it
    /// reads everything packed so far and writes segments of its own.
    pub fn branch(&self) -> Bags {
        let mut copy = self.clone();
        for bag in copy.bags.values_mut() {
            if let Bag::Grouped(g) = bag {
                g.open = None;
            }
        }
        copy
    }

    /// Merges a branch back (a closed child span, a response): nothing is counted twice.
    pub fn merge(&mut self, other: &Bags) {
        self.text.take();
        self.overflowed |= other.overflowed;
        for (key, theirs) in &other.bags {
            match (self.bags.get_mut(key), theirs) {
                (None, _) => {
                    let mut t = theirs.clone();
                    if let Bag::Grouped(g) = &mut t {
                        g.open = None;
                    }
                    self.bags.insert(*key, t);
                }
                (Some(Bag::Grouped(mine)), Bag::Grouped(theirs)) => {
                    for (id, held) in &theirs.segments {
                        match mine.segments.get_mut(id) {
                            Some(m) if m.segment.version >= held.segment.version => {}
                            Some(m) => {
                                m.arrived = m.arrived.max(held.arrived);
                                m.segment = Arc::clone(&held.segment);
                            }
                            None => {
                                mine.segments.insert(*id, held.clone());
                            }
                        }
                    }
                }
                (Some(Bag::Temporal(mine)), Bag::Temporal(theirs))
                    if mine.first == theirs.first && mine.n == theirs.n =>
                {
                    mine.tuples.extend(theirs.tuples.iter().cloned());
                    mine.trim();
                }
                // Different modes under one key: a damaged bag; ours stands.
                _ => {}
            }
        }
    }

    /// Marks everything as having arrived with the request: [`Bags::since_arrival`]
    /// leaves it out.
    pub fn mark_arrived(&mut self) {
        for bag in self.bags.values_mut() {
            match bag {
                Bag::Grouped(g) => g
                    .segments
                    .values_mut()
                    .for_each(|h| h.arrived = h.segment.version),
                Bag::Temporal(t) => t.tuples.iter_mut().for_each(|s| s.arrived = true),
            }
        }
    }

    /// What was packed or merged in since the request arrived: the segments packed
    /// further and the stamped tuples that did not arrive. `None` when nothing is new.
    pub fn since_arrival(&self) -> Option<Bags> {
        let mut delta = Bags::default();
        for (key, bag) in &self.bags {
            let new = match bag {
                Bag::Grouped(g) => {
                    let segments: SmallMap<u64, HeldSegment> = g
                        .segments
                        .iter()
                        .filter(|(_, h)| h.segment.version > h.arrived)
                        .map(|(id, h)| (*id, h.clone()))
                        .collect();
                    (!segments.is_empty()).then_some(Bag::Grouped(Grouped {
                        open: None,
                        segments,
                    }))
                }
                Bag::Temporal(t) => {
                    let tuples: SmallVec<[Stamped; 1]> =
                        t.tuples.iter().filter(|s| !s.arrived).cloned().collect();
                    (!tuples.is_empty()).then_some(Bag::Temporal(Temporal {
                        first: t.first,
                        n: t.n,
                        tuples,
                    }))
                }
            };
            if let Some(new) = new {
                delta.bags.insert(*key, new);
            }
        }
        if delta.bags.is_empty() {
            return None;
        }
        delta.overflowed = self.overflowed;
        Some(delta)
    }

    /// The latest stamp carried, to advance a receiver's clock past it.
    pub fn max_stamp(&self) -> u64 {
        self.bags
            .values()
            .filter_map(|b| match b {
                Bag::Temporal(t) => t.tuples.iter().map(|s| s.ts).max(),
                Bag::Grouped(_) => None,
            })
            .max()
            .unwrap_or(0)
    }
}

/// A hybrid logical clock: physical time in nanoseconds, never going back, and past every
/// stamp received, so a tuple packed after another in the request's causal order carries a
/// larger stamp even when hosts' clocks disagree.
#[derive(Debug, Default)]
pub struct Hlc {
    last: u64,
}

impl Hlc {
    /// A stamp later than every stamp this clock gave or saw, and not before `now`.
    pub fn stamp(&mut self, now: u64) -> u64 {
        self.last = now.max(self.last.saturating_add(1));
        self.last
    }

    /// Takes in a stamp received with a request or response.
    pub fn observe(&mut self, seen: u64) {
        self.last = self.last.max(seen);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: BagKey = BagKey { query: 1, bag: 0 };

    fn ids() -> impl FnMut() -> u64 {
        let mut next = 100;
        move || {
            next += 1;
            next
        }
    }

    fn pack(
        b: &mut Bags,
        key: BagKey,
        values: Vec<Value>,
        weight: u64,
        ids: &mut dyn FnMut() -> u64,
    ) {
        b.pack_grouped(key, std::iter::once((values.iter(), weight)), ids);
    }

    fn counts(b: &Bags) -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = b
            .unpack(K)
            .into_iter()
            .map(|(vals, c)| (vals[0].to_string(), c))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_branch_merged_back_counts_each_pack_once() {
        let mut ids = ids();
        let mut parent = Bags::default();
        pack(&mut parent, K, vec!["A".into()], 1, &mut ids);
        let mut child = parent.branch();
        pack(&mut child, K, vec!["B".into()], 1, &mut ids);
        // The parent goes on packing while the child runs.
        pack(&mut parent, K, vec!["A".into()], 1, &mut ids);
        let mut grandchild = child.branch();
        pack(&mut grandchild, K, vec!["C".into()], 2, &mut ids);
        child.merge(&grandchild);
        parent.merge(&child);
        // Merging the same copies again changes nothing.
        parent.merge(&child);
        parent.merge(&grandchild);
        assert_eq!(
            counts(&parent),
            [("A".into(), 2), ("B".into(), 1), ("C".into(), 2)]
        );
        // The parent's merge did not take the old copy of its own segment.
        let mut stale = parent.branch();
        pack(&mut parent, K, vec!["A".into()], 1, &mut ids);
        stale.merge(&parent);
        parent.merge(&stale);
        assert_eq!(counts(&parent)[0], ("A".into(), 3));
    }

    #[test]
    fn copies_share_segments_until_one_packs() {
        let segments = |b: &Bags| match b.bags.get(&K) {
            Some(Bag::Grouped(g)) => g
                .segments
                .values()
                .map(|h| Arc::as_ptr(&h.segment))
                .collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        let mut ids = ids();
        let mut a = Bags::default();
        pack(&mut a, K, vec!["A".into()], 1, &mut ids);
        let b = a.branch();
        assert_eq!(segments(&a), segments(&b));
        // Packing into a shared segment copies it first: the other copy is unchanged.
        pack(&mut a, K, vec!["B".into()], 1, &mut ids);
        assert_ne!(segments(&a), segments(&b));
        assert_eq!(counts(&b), [("A".into(), 1)]);
        assert_eq!(counts(&a), [("A".into(), 1), ("B".into(), 1)]);
        // A merge takes the newer version of a segment by pointer.
        let mut c = b.clone();
        c.merge(&a);
        assert_eq!(segments(&c), segments(&a));
        assert_eq!(counts(&c), counts(&a));
    }

    #[test]
    fn first_and_most_recent_keep_their_tuples_through_merges() {
        let mut a = Bags::default();
        a.pack_temporal(K, true, 2, 30, 1, vec!["late".into()]);
        let mut b = a.branch();
        b.pack_temporal(K, true, 2, 10, 2, vec!["early".into()]);
        a.pack_temporal(K, true, 2, 20, 3, vec!["middle".into()]);
        a.merge(&b);
        a.merge(&b);
        let got: Vec<String> = a.unpack(K).iter().map(|(v, _)| v[0].to_string()).collect();
        assert_eq!(got, ["early", "middle"]);

        let mut r = Bags::default();
        for (ts, name) in [(5, "a"), (9, "c"), (7, "b")] {
            r.pack_temporal(K, false, 1, ts, ts, vec![name.into()]);
        }
        let got: Vec<String> = r.unpack(K).iter().map(|(v, _)| v[0].to_string()).collect();
        assert_eq!(got, ["c"]);
        assert_eq!(r.max_stamp(), 9);
    }

    #[test]
    fn a_response_carries_back_only_what_the_server_added() {
        const F: BagKey = BagKey { query: 1, bag: 1 };
        let mut ids = ids();
        let mut client = Bags::default();
        pack(&mut client, K, vec!["A".into()], 1, &mut ids);
        pack(&mut client, K, vec!["B".into()], 1, &mut ids);
        client.pack_temporal(F, true, 2, 10, 1, vec!["early".into()]);
        // The request: a copy of the client's bag, as it arrives at the server.
        let mut server = client.branch();
        server.mark_arrived();
        assert_eq!(server.since_arrival(), None, "nothing new yet");
        pack(&mut server, K, vec!["C".into()], 1, &mut ids);
        server.pack_temporal(F, true, 2, 20, 2, vec!["later".into()]);
        let delta = server.since_arrival().expect("the server packed");
        assert_eq!(counts(&delta), [("C".into(), 1)]);
        let stamped: Vec<String> = delta.tuples(F).map(|(v, _)| v[0].to_string()).collect();
        assert_eq!(stamped, ["later"]);
        // The delta and the whole bag merge to the same counts: nothing lost, nothing twice.
        let mut with_delta = client.clone();
        with_delta.merge(&delta);
        let mut with_all = client.clone();
        with_all.merge(&server);
        assert_eq!(counts(&with_delta), counts(&with_all));
        assert_eq!(
            counts(&with_delta),
            [("A".into(), 1), ("B".into(), 1), ("C".into(), 1)]
        );
        // A segment that arrived and was merged back from a later copy with more packs
        // keeps its mark: only a version past it is new.
        let mut again = server.clone();
        again.merge(&server);
        assert_eq!(again.since_arrival(), server.since_arrival());
    }

    proptest::proptest! {
        /// Packs find their tuple by scanning a small segment and through the index of a
        /// large one, one tuple at a time or many in one call (with repeats among them),
        /// also after a round trip on the wire (which drops the index) and with tuples of
        /// several widths: the counts are the packs, whatever the path.
        #[test]
        fn packs_count_each_distinct_tuple(
            hits in proptest::collection::vec(
                proptest::collection::vec((0u8..40, 0i64..3, 1u64..4), 1..30),
                0..40,
            ),
            split in 0usize..40,
        ) {
            let mut ids = ids();
            let mut bag = Bags::default();
            let mut model: std::collections::BTreeMap<(String, i64), u64> = Default::default();
            for (i, hit) in hits.iter().enumerate() {
                if i == split {
                    let bytes = crate::wire::encode(&bag, usize::MAX);
                    bag = crate::wire::decode(&bytes).expect("own encoding");
                    // The decoded copy has no open segment: packs go on in a new one.
                }
                let tuples: Vec<(Vec<Value>, u64)> = hit
                    .iter()
                    .map(|(name, n, weight)| {
                        let mut values = vec![Value::from(format!("t{name}").as_str())];
                        // Widths 1 to 3: a segment decoded from elsewhere may mix them.
                        values.extend((0..*n).map(Value::Int));
                        *model.entry((format!("t{name}"), *n)).or_default() += weight;
                        (values, *weight)
                    })
                    .collect();
                bag.pack_grouped(K, tuples.iter().map(|(v, w)| (v.iter(), *w)), &mut ids);
            }
            let mut got: std::collections::BTreeMap<(String, i64), u64> = Default::default();
            for (values, count) in bag.tuples(K) {
                let n = values.len() as i64 - 1;
                *got.entry((values[0].to_string(), n)).or_default() += count;
            }
            proptest::prop_assert_eq!(got, model);
            // Within one segment each tuple is there once.
            if let Some(Bag::Grouped(g)) = bag.bags.get(&K) {
                for held in g.segments.values() {
                    let mut seen = std::collections::HashSet::new();
                    for (v, _) in held.segment.tuples() {
                        proptest::prop_assert!(seen.insert(v.to_vec()), "{v:?} twice");
                    }
                }
            }
        }
    }

    #[test]
    fn the_clock_passes_every_stamp_it_saw() {
        let mut c = Hlc::default();
        assert_eq!(c.stamp(100), 100);
        assert_eq!(c.stamp(50), 101);
        c.observe(1_000);
        assert_eq!(c.stamp(200), 1_001);
    }
}
