//! The walk: every line in time order, joined to a request by the rules in the module
//! above (`stitch`), one after another.
//!
//! What the walk asks of a (file, log point) and its slots (the links into it, whether
//! it is a sure identifier or excluded, its predecessors) is looked up once, the first
//! time a line of it comes, and kept by its number. Each source variable's latest print
//! of each value is kept in `latest_prints`. Across windows, `stitch_after` is given the
//! context lines' requests, each a request of its own here, so later lines tie to them as
//! they would have.

use foldhash::{HashMap, HashSet};

use crate::corpus::{Corpus, Moment};
use crate::ids::Variable;
use crate::latest_prints::LatestPrints;
use crate::links::{self, Links};
use crate::points::PointId;

use super::durations::{Duration, RecentStarts};
use super::order::{Before, OrderFacts, Predecessor, Recent};
use super::StitchOptions;

type Point = (u32, PointId);

/// The variables that are sure request identifiers, those of them named as a request's
/// id, and those excluded.
pub(super) type Identifiers<'a> = (
    &'a HashSet<Variable>,
    &'a HashSet<Variable>,
    &'a HashSet<Variable>,
);

/// Whether a (file, log point) starts requests, and by what evidence.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Start {
    No,
    /// Its lines are mostly the first of their request in the first pass (by time and
    /// identifiers), and not mostly alone there.
    ByTime,
    /// It passes values on by links and is never linked to, or most of its lines are
    /// first in the first pass but alone there (after a pause): it may as well be a
    /// step of a request, one that makes a value (an order created) or that comes after
    /// a slow one (a token issued after a password check).
    Weakly,
}

/// What the walk asks of a (file, log point) and its slots, looked up once.
pub(super) struct PointFacts<'a> {
    slots: Vec<SlotFacts<'a>>,
    predecessors: Vec<Before>,
    /// Its number in [`Recent`], if it is a predecessor.
    recent: Option<u32>,
}

struct SlotFacts<'a> {
    excluded: bool,
    /// The links into it, from variables not excluded, each with its source's number.
    into: Vec<(&'a links::Link, u32)>,
    /// Its number, if links go out of it.
    source: Option<u32>,
    sure: bool,
    /// Named as a request's id: its first print begins a request, and it ties lines
    /// however far apart.
    named: bool,
}

impl<'a> PointFacts<'a> {
    /// `sources` numbers the variables links go out of, as they are met.
    fn new(
        (file, point): Point,
        slots: usize,
        links: &'a Links,
        (sure, named, excluded): Identifiers<'_>,
        (predecessors, recent): OrderFacts,
        sources: &mut HashMap<links::Variable, u32>,
    ) -> Self {
        let mut number = |v: links::Variable| {
            let next = sources.len() as u32;
            *sources.entry(v).or_insert(next)
        };
        let slots = (0..slots as u32)
            .map(|slot| SlotFacts {
                excluded: excluded.contains(&(point, slot)),
                into: links
                    .into((file, point, slot))
                    .iter()
                    .filter(|l| !excluded.contains(&(l.from.1, l.from.2)))
                    .map(|l| (l, number(l.from)))
                    .collect(),
                source: links
                    .is_source((file, point, slot))
                    .then(|| number((file, point, slot))),
                sure: sure.contains(&(point, slot)),
                named: named.contains(&(point, slot)),
            })
            .collect();
        PointFacts {
            slots,
            predecessors,
            recent,
        }
    }
}

/// The facts of each (file, log point), by node point, made the first time a line of it
/// is met.
pub(super) struct Facts<'a> {
    by_node_point: Vec<Option<PointFacts<'a>>>,
    /// Each node point's learned predecessors, until its facts take them.
    order: Vec<OrderFacts>,
    links: &'a Links,
    sure: &'a HashSet<Variable>,
    named: &'a HashSet<Variable>,
    excluded: &'a HashSet<Variable>,
    /// The variables links go out of, numbered as they are met (the keys' latest prints
    /// are kept by these numbers).
    sources: HashMap<links::Variable, u32>,
}

impl<'a> Facts<'a> {
    pub(super) fn new(
        corpus: &Corpus,
        links: &'a Links,
        (sure, named, excluded): Identifiers<'a>,
        order: Vec<OrderFacts>,
    ) -> Facts<'a> {
        Facts {
            by_node_point: (0..corpus.node_point_count()).map(|_| None).collect(),
            order,
            links,
            sure,
            named,
            excluded,
            sources: HashMap::default(),
        }
    }

    /// The facts of `m`'s (file, log point); none for a node point the corpus does not
    /// number.
    pub(super) fn of(&mut self, corpus: &Corpus, m: &Moment) -> Option<&PointFacts<'a>> {
        let np = m.node_point as usize;
        let (Some(f), Some(order)) = (self.by_node_point.get_mut(np), self.order.get_mut(np))
        else {
            return None;
        };
        Some(f.get_or_insert_with(|| {
            // A line has a value per parameter of its log point.
            let params = corpus.point_shape(m.point).parameters();
            PointFacts::new(
                (m.file, m.point),
                params,
                self.links,
                (self.sure, self.named, self.excluded),
                std::mem::take(order),
                &mut self.sources,
            )
        }))
    }
}

/// The strongest tie of a line to an earlier one: its strength, when the tied line was,
/// that line's request, and whether it is by a slow link.
#[derive(Clone, Copy)]
struct Tie {
    strength: f64,
    at: i64,
    request: u32,
    slow: bool,
}

/// What the walk keeps from line to line.
pub(super) struct Walk<'a> {
    corpus: &'a Corpus,
    o: &'a StitchOptions,
    /// By node point: whether its lines start requests.
    starts: Vec<Start>,
    /// By node point: its learned predecessors with their lags.
    predecessors: Vec<Vec<Predecessor>>,
    /// By (key, source variable's number): the key's latest print by that variable.
    /// Looked up by the links into a slot, so that a key many variables print costs no
    /// scan.
    latest: LatestPrints,
    /// A key's ties, put in the order of the pairs' first prints before they are weighed
    /// (the strongest first, then the latest; on a tie, the first printed).
    ties: Vec<(u32, f64, i64, u32, bool)>,
    /// By key number (`Corpus::keys_at`): the latest print of each identifier's value.
    by_id: Vec<Option<(u32, i64)>>,
    /// Each request's first and latest line's time, by request number (requests are
    /// numbered from 0 as they begin, each with its first line).
    active: Vec<(i64, i64)>,
    recent: Recent,
    /// By node point: the durations its lines print, and the recent lines they count
    /// from.
    durations: Vec<Vec<Duration>>,
    recent_starts: RecentStarts,
    /// The line before: its request, time, file and node point.
    previous: Option<(u32, i64, u32, u32)>,
    /// The next request's number.
    next: u32,
    /// Each given request's own.
    given: HashMap<u32, u32>,
}

impl<'a> Walk<'a> {
    pub(super) fn new(
        corpus: &'a Corpus,
        links: &Links,
        o: &'a StitchOptions,
        starts: Vec<Start>,
        predecessors: Vec<Vec<Predecessor>>,
        recent: Recent,
        durations: Vec<Vec<Duration>>,
    ) -> Walk<'a> {
        let source_count = links
            .all()
            .iter()
            .map(|l| l.from)
            .collect::<HashSet<_>>()
            .len();
        let longest_link_ns = links.all().iter().map(|l| l.window_ns).max().unwrap_or(0);
        Walk {
            corpus,
            o,
            starts,
            predecessors,
            latest: LatestPrints::new(corpus.key_count(), source_count, longest_link_ns),
            ties: Vec::new(),
            by_id: vec![None; corpus.key_count()],
            active: Vec::new(),
            recent,
            recent_starts: RecentStarts::new(&durations),
            durations,
            previous: None,
            next: 0,
            given: HashMap::default(),
        }
    }

    /// The request of the line at timeline position `at` (`m`), recorded for the lines
    /// after it. A line the window before stitched (`given`) keeps its request.
    pub(super) fn step(
        &mut self,
        at: usize,
        m: &Moment,
        f: &PointFacts<'_>,
        given: Option<u32>,
    ) -> u32 {
        let keys = self.corpus.keys_at(at);
        let request = match given {
            Some(g) => match self.given.get(&g) {
                Some(&r) => r,
                None => {
                    let r = self.new_request();
                    self.given.insert(g, r);
                    r
                }
            },
            None => {
                // A request's id, first printed, begins the request, whatever value a
                // link ties the line to (a user's id ties it to the user's last request).
                let fresh = self.prints_a_fresh_id(f, keys);
                let tie = self.strongest_tie(m.time, f, keys, !fresh);
                let tie = if fresh {
                    tie
                } else {
                    self.stronger_by_duration(m, tie)
                };
                if tie.is_none() && fresh {
                    self.new_request()
                } else {
                    self.choose(m, &f.predecessors, tie)
                }
            }
        };
        self.record(m, f, keys, request);
        request
    }

    fn new_request(&mut self) -> u32 {
        self.next += 1;
        self.next - 1
    }

    /// Whether a line with `keys` prints a value of an identifier named as a request's
    /// id that no line printed before: a request's id, first printed, begins the
    /// request.
    fn prints_a_fresh_id(&self, f: &PointFacts<'_>, keys: &[(u32, u32)]) -> bool {
        keys.iter().enumerate().any(|(k, &(n, key))| {
            f.slots
                .get(n as usize)
                .is_some_and(|s| s.named && !s.excluded)
                && crate::corpus::own_key(keys, k)
                && self.by_id.get(key as usize).is_some_and(Option::is_none)
        })
    }

    /// Rule 1's candidates: the strongest tie of a line at `t` with `keys` to an earlier
    /// line, by a sure identifier's value or (with `by_links`) by a learned link.
    fn strongest_tie(
        &mut self,
        t: i64,
        f: &PointFacts<'_>,
        keys: &[(u32, u32)],
        by_links: bool,
    ) -> Option<Tie> {
        let mut best: Option<Tie> = None;
        let mut consider = |strength: f64, at: i64, request: u32, slow: bool| {
            if best.is_none_or(|b| (strength, at) > (b.strength, b.at)) {
                best = Some(Tie {
                    strength,
                    at,
                    request,
                    slow,
                });
            }
        };
        for (k, &(n, key)) in keys.iter().enumerate() {
            let Some(slot) = f.slots.get(n as usize) else {
                continue;
            };
            if slot.excluded {
                continue;
            }
            // A value an identifier printed, printed again by any log point (the value's
            // own text is its slot's first key).
            let own = crate::corpus::own_key(keys, k);
            if let Some((r, at)) = self
                .by_id
                .get(key as usize)
                .copied()
                .flatten()
                .filter(|_| own)
            {
                // A request id's value is its request's however long it waits.
                if slot.named || t - at <= self.o.id_window_ns {
                    consider(1.0, at, r, false);
                }
            }
            self.ties.clear();
            if !by_links {
                continue;
            }
            for &(link, from) in &slot.into {
                if let Some((r, at, first)) = self.latest.get(key, from) {
                    if t - at <= link.window_ns {
                        let slow = link.window_ns >= self.o.slow_link_ns;
                        self.ties.push((first, link.precision, at, r, slow));
                    }
                }
            }
            // Most keys tie one line or none (the call alone cost more than that).
            if self.ties.len() > 1 {
                self.ties.sort_unstable_by_key(|tie| tie.0);
            }
            for &(_, strength, at, r, slow) in &self.ties {
                consider(strength, at, r, slow);
            }
        }
        best
    }

    /// `tie`, or the tie by a duration the line prints to the line it counts from, when
    /// that is stronger.
    fn stronger_by_duration(&self, m: &Moment, tie: Option<Tie>) -> Option<Tie> {
        let (Some(durations), Some(line)) = (
            self.durations.get(m.node_point as usize),
            self.corpus.lines.get(m.line),
        ) else {
            return tie;
        };
        let mut best = tie;
        for d in durations {
            if best.is_some_and(|b| b.strength >= d.precision) {
                continue;
            }
            let Some(target) = self
                .corpus
                .values(line)
                .nth(d.slot as usize)
                .and_then(|v| d.start_of(m.time, v))
            else {
                continue;
            };
            if let Some((at, request)) = self.recent_starts.nearest(d.start, target) {
                best = Some(Tie {
                    strength: d.precision,
                    at,
                    request,
                    slow: false,
                });
            }
        }
        best
    }

    /// Rules 1 to 5: the request a line at `m` with learned predecessors `before` joins,
    /// given its strongest tie.
    fn choose(&mut self, m: &Moment, before: &[Before], tie: Option<Tie>) -> u32 {
        let t = m.time;
        if let Some(tie) = tie {
            return self.tied_or_begun_since(tie, before, t);
        }
        let start = self
            .starts
            .get(m.node_point as usize)
            .copied()
            .unwrap_or(Start::No);
        if start != Start::ByTime {
            if let Some(r) = self.recent.followed_steadily(before, t) {
                return r;
            }
        }
        if start != Start::No {
            return self.new_request();
        }
        match self
            .recent
            .followed(before, t)
            .or_else(|| self.after_previous(m))
        {
            Some(r) => r,
            None => self.new_request(),
        }
    }

    /// Rule 1: the tied line's request; but a slow link to a request that has been quiet
    /// for longer than `quiet_ns` yields to the request of the line's learned
    /// predecessor when that request began since.
    fn tied_or_begun_since(&self, tie: Tie, before: &[Before], t: i64) -> u32 {
        let r = tie.request;
        let quiet_since = self.active.get(r as usize).map_or(i64::MIN, |a| a.1);
        match self.recent.followed(before, t) {
            Some(c)
                if tie.slow
                    && c != r
                    && t - quiet_since > self.o.quiet_ns
                    && self
                        .active
                        .get(c as usize)
                        .is_some_and(|a| a.0 > quiet_since) =>
            {
                c
            }
            _ => r,
        }
    }

    /// Rule 4: the request of the line before, on any node, unless the log fell quiet
    /// for longer than `bridge_ns`, or that line is of the same file and at a log point
    /// the line's own log point is learned to come before.
    fn after_previous(&self, m: &Moment) -> Option<u32> {
        let (r, at, file, before) = self.previous?;
        let broken_order = file == m.file
            && self
                .predecessors
                .get(before as usize)
                .is_some_and(|ps| ps.iter().any(|p| p.ordinary && p.point == m.node_point));
        (m.time - at <= self.o.bridge_ns && !broken_order).then_some(r)
    }

    /// Records the line at `m`, in `request`, for the lines after it.
    fn record(&mut self, m: &Moment, f: &PointFacts<'_>, keys: &[(u32, u32)], request: u32) {
        let t = m.time;
        for (k, &(n, key)) in keys.iter().enumerate() {
            let Some(slot) = f.slots.get(n as usize) else {
                continue;
            };
            if let Some(from) = slot.source {
                self.latest.record(key, from, request, t);
            }
            let own = crate::corpus::own_key(keys, k);
            if slot.sure && own {
                if let Some(id) = self.by_id.get_mut(key as usize) {
                    *id = Some((request, t));
                }
            }
        }
        self.latest.let_go(t);
        match self.active.get_mut(request as usize) {
            Some(a) => a.1 = t,
            None => self.active.resize(request as usize + 1, (t, t)),
        }
        self.recent.follow(&f.predecessors, request, t);
        if let Some(lines) = f.recent {
            self.recent.add(lines, request, t);
        }
        self.recent_starts.add(m.node_point, t, request);
        self.previous = Some((request, t, m.file, m.node_point));
    }
}
