//! Which variables' values link the lines of one request, learned from the logs.
//!
//! A value printed by variable A and soon after by variable B (another log point, or
//! another node) links the two lines when that happens more often than chance would
//! make it. A request id links over seconds; an entity id (a user, a product) recurs
//! across requests, but a catalog that prints `user=27` a millisecond after the frontend
//! did is serving that user's request: such a link holds only within a short window.
//! For each pair (A, B), each window from 1 ms to 3 s is tried: the matches seen
//! (B's value last printed by A at most that long before) against the matches chance
//! gives (each value's rate at A over the log's span). The window with the most matches
//! above chance is the link's, and the share of its matches above chance its precision.
//!
//! A variable is a (file, log point, parameter): the same log point on two nodes is two
//! variables, so a value passed from one node to another links. Chance is worked out
//! from each value's rate at A over the time A's node logged (its file's first line to its
//! last, less pauses longer than 10 s and 100 median gaps, so that a node that logs longer
//! than the others, or stops for a while, does not make values look rarer): a match by
//! chance within a window is `1 - e^(-rate × window)`, from one exponential per first print
//! and its powers. A match is counted once, at A's first print of a value, for all of B's
//! later prints of it, from the counts of a first pass. A link is kept with at least 5
//! matches, a precision of 0.6, above-chance matches for 2% of B's lines, and 8 distinct
//! values at both ends (a status or a method links nothing), none of them printed in
//! more than half the variable's lines (a measure, such as a latency mostly of 1 ms,
//! matches the ids most requests print, and would tie a reply to another request).
//!
//! A value such as `product-43` also matches `43`: services often print an id with a
//! prefix on one side and bare on the other (a name, a `-` or `_`, a number; not
//! `block-65@storage-1`, whose `1` would match any count).

use foldhash::{HashMap, HashSet};

use crate::corpus::Corpus;
use crate::pair_index::{pair_key, PairIndex, TABLE_CELLS};
use crate::points::PointId;

/// A variable of one node: a (file, log point, parameter). The same log point printed on
/// two nodes is two variables, so that a value passed from one to the other links.
pub type Variable = (u32, PointId, u32);

/// The windows tried, in nanoseconds.
const WINDOWS_NS: [i64; 8] = [
    1_000_000,
    3_000_000,
    10_000_000,
    30_000_000,
    100_000_000,
    300_000_000,
    1_000_000_000,
    3_000_000_000,
];

/// Where each power of two falls among [`WINDOWS_NS`], by its bit length `k` (lags of
/// `2^(k-1)` to `2^k - 1`): how many windows end below it, and the end of the one window
/// that ends within it (`i64::MAX` for none). The windows are more than twice apart, so
/// no power of two holds two ends, and a lag's window is found without a comparison per
/// window.
const WINDOWS_BY_BITS: [(usize, i64); 65] = {
    let mut table = [(0, i64::MAX); 65];
    let mut w = 1;
    while w < WINDOWS_NS.len() {
        assert!(WINDOWS_NS[w] > 2 * WINDOWS_NS[w - 1]);
        w += 1;
    }
    let mut k = 1;
    while k < 64 {
        let low = 1i64 << (k - 1);
        let high = if k == 63 { i64::MAX } else { (1i64 << k) - 1 };
        let mut w = 0;
        while w < WINDOWS_NS.len() {
            if WINDOWS_NS[w] < low {
                table[k].0 += 1;
            } else if WINDOWS_NS[w] <= high {
                table[k].1 = WINDOWS_NS[w];
            }
            w += 1;
        }
        k += 1;
    }
    table
};

/// The smallest window that holds `lag` (`WINDOWS_NS.len()` past the longest): how many
/// windows end below it.
#[inline]
fn window_of(lag: i64) -> usize {
    let bits = (u64::BITS - (lag.max(0) as u64).leading_zeros()) as usize;
    let (below, within) = WINDOWS_BY_BITS[bits];
    below + usize::from(lag > within)
}

/// A learned link: a value printed by `from` is printed again by `to` in the same
/// request, within `window_ns`.
#[derive(Clone, Debug, PartialEq)]
pub struct Link {
    /// The variable whose value is printed first.
    pub from: Variable,
    /// The variable that prints the same value again.
    pub to: Variable,
    /// How long after the first the value is printed again, at most, in nanoseconds.
    pub window_ns: i64,
    /// The share of matches within the window that chance does not explain.
    pub precision: f64,
    /// Matches within the window.
    pub matches: usize,
}

/// What decides which pairs link.
#[derive(Clone, Debug)]
pub struct LinkOptions {
    /// A link needs at least this many matches ...
    pub min_matches: usize,
    /// ... at least this share of them above chance ...
    pub min_precision: f64,
    /// ... and matches above chance for at least this share of the target's lines.
    pub min_coverage: f64,
    /// Variables with fewer distinct values than this (a status, a method, a flag)
    /// link nothing ...
    pub min_distinct: usize,
    /// ... nor those that print one value in more than this share of their lines (a
    /// latency of 1 ms, a constant count): a measure, whose few common values match
    /// the common ids that requests print (product 1's lookup, answered in 1 ms).
    pub max_top_share: f64,
}

impl Default for LinkOptions {
    fn default() -> Self {
        LinkOptions {
            min_matches: 5,
            min_precision: 0.6,
            min_coverage: 0.02,
            min_distinct: 8,
            max_top_share: 0.5,
        }
    }
}

/// The links learned, by target variable.
#[derive(Clone, Debug, Default)]
pub struct Links {
    into: HashMap<Variable, Vec<Link>>,
    sources: HashSet<Variable>,
    /// Index into `into[to]` of the link from `from`.
    between: HashMap<(Variable, Variable), usize>,
}

impl Links {
    /// The links into `to`.
    pub fn into(&self, to: Variable) -> &[Link] {
        self.into.get(&to).map_or(&[], Vec::as_slice)
    }

    /// The link from `from` to `to`, if there is one.
    pub fn between(&self, from: Variable, to: Variable) -> Option<&Link> {
        let at = *self.between.get(&(from, to))?;
        self.into.get(&to)?.get(at)
    }

    /// Whether some link starts at `from`.
    pub fn is_source(&self, from: Variable) -> bool {
        self.sources.contains(&from)
    }

    /// The most matches of any link from `from`.
    pub fn matches_from(&self, from: Variable) -> usize {
        self.into
            .values()
            .flatten()
            .filter(|l| l.from == from)
            .map(|l| l.matches)
            .max()
            .unwrap_or(0)
    }

    /// Whether some link ends at `to`.
    pub fn is_target(&self, to: Variable) -> bool {
        self.into.contains_key(&to)
    }

    /// Every link, strongest first.
    pub fn all(&self) -> Vec<&Link> {
        let mut all: Vec<&Link> = self.into.values().flatten().collect();
        all.sort_by(|a, b| {
            b.precision
                .total_cmp(&a.precision)
                .then(b.matches.cmp(&a.matches))
                .then((a.from, a.to).cmp(&(b.from, b.to)))
        });
        all
    }

    /// Links of one's own, as from `learn`.
    pub fn from_links(links: impl IntoIterator<Item = Link>) -> Links {
        let mut l = Links::default();
        for link in links {
            l.sources.insert(link.from);
            let into = l.into.entry(link.to).or_default();
            l.between.insert((link.from, link.to), into.len());
            into.push(link);
        }
        l
    }
}

/// The chance of no print within each of [`WINDOWS_NS`], from the chance of none
/// within a millisecond: powers of it (the windows are 1, 3, 10, ... ms).
fn quiet_within_windows(quiet_ms: f64) -> [f64; WINDOWS_NS.len()] {
    let q3 = quiet_ms.powi(3);
    let q10 = q3 * q3 * q3 * quiet_ms;
    let q100 = q10.powi(10);
    let q1000 = q100.powi(10);
    [
        quiet_ms,
        q3,
        q10,
        q10.powi(3),
        q100,
        q100.powi(3),
        q1000,
        q1000.powi(3),
    ]
}

/// The least time a node is taken to have logged for.
const MIN_LOGGING_NS: i64 = 1_000_000_000;
/// A pause in a node's log longer than this and than [`PAUSE_GAPS`] of its median gap
/// is time it did not log.
const PAUSE_NS: i64 = 10_000_000_000;
const PAUSE_GAPS: i64 = 100;

/// How long each file's node logged: from its first line to its last, less its long
/// pauses (at least a second). A variable's rate is over this time, not the whole
/// corpus's: a node whose log starts earlier than the others', or that stopped for a
/// while, would otherwise make values look rarer, and chance smaller, than they are.
fn logging_time(corpus: &Corpus) -> Vec<i64> {
    let mut last: Vec<Option<i64>> = vec![None; corpus.files.len()];
    let mut gaps: Vec<Vec<i64>> = vec![Vec::new(); corpus.files.len()];
    for m in corpus.timeline() {
        let (file, t) = (m.file as usize, m.time);
        if let (Some(Some(before)), Some(gaps)) = (last.get(file), gaps.get_mut(file)) {
            gaps.push(t.saturating_sub(*before));
        }
        if let Some(l) = last.get_mut(file) {
            *l = Some(t);
        }
    }
    gaps.into_iter()
        .map(|mut gaps| {
            let total = gaps.iter().fold(0i64, |sum, &g| sum.saturating_add(g));
            let pause = if gaps.is_empty() {
                PAUSE_NS
            } else {
                let middle = gaps.len() / 2;
                let median = *gaps.select_nth_unstable(middle).1;
                PAUSE_NS.max(median.saturating_mul(PAUSE_GAPS))
            };
            let paused = gaps
                .iter()
                .filter(|&&g| g > pause)
                .fold(0i64, |sum, &g| sum.saturating_add(g));
            total.saturating_sub(paused).max(MIN_LOGGING_NS)
        })
        .collect()
}

/// The pairs of variables that printed a key one after the other, numbered by a
/// [`PairIndex`] over the linkable variables. Each pair's counts are kept apart, the
/// matches, counted per match, in an array small enough to stay in the first-level
/// cache; and the pairs are indexed by `to` first, so that the matches of one print,
/// all to the printing variable, read one row of the index's table.
struct Pairs {
    index: PairIndex,
    /// (from, to), by pair number.
    ends: Vec<(u32, u32)>,
    /// Matches by the smallest window that holds their lag.
    matched: Vec<[u32; WINDOWS_NS.len()]>,
    /// Matches chance gives, per window.
    chance: Vec<[f64; WINDOWS_NS.len()]>,
}

impl Pairs {
    fn new(linkable: usize, table_limit: usize) -> Pairs {
        Pairs {
            index: PairIndex::new(linkable, linkable, table_limit),
            ends: Vec::new(),
            matched: Vec::new(),
            chance: Vec::new(),
        }
    }

    /// The number of the pair of two variables, each given as (number, number among
    /// the linkable); made when new.
    #[inline(always)]
    fn at(&mut self, (from, from_dense): (u32, u32), (to, to_dense): (u32, u32)) -> usize {
        let (pair, new) = self.index.number(to_dense, from_dense);
        if new {
            self.ends.push((from, to));
            self.matched.push([0; WINDOWS_NS.len()]);
            self.chance.push([0.0; WINDOWS_NS.len()]);
        }
        pair
    }
}

/// Learns the links between the corpus's variables.
pub fn learn(corpus: &Corpus, o: &LinkOptions) -> Links {
    learn_with_table(corpus, o, TABLE_CELLS)
}

/// [`learn`], finding pairs in a table of at most `table_limit` cells, else by hash.
fn learn_with_table(corpus: &Corpus, o: &LinkOptions, table_limit: usize) -> Links {
    if corpus.timeline().is_empty() {
        return Links::default();
    }
    let logged_ns = logging_time(corpus);
    let span_ns = |file: u32| {
        logged_ns
            .get(file as usize)
            .copied()
            .unwrap_or(MIN_LOGGING_NS)
    };
    // Variables numbered densely, a (file, log point)'s slots one after another, so that
    // the pass below keys its maps by small numbers rather than by (file, point, slot).
    // Each line's (first variable, slots), by its place in the timeline.
    let timeline = corpus.timeline();
    let mut node_point_vars: Vec<Option<(u32, u32)>> = vec![None; corpus.node_point_count()];
    let mut variables: Vec<Variable> = Vec::new();
    let mut vars_at: Vec<(u32, u32)> = Vec::with_capacity(timeline.len());
    for m in timeline {
        let Some(vars) = node_point_vars.get_mut(m.node_point as usize) else {
            vars_at.push((0, 0));
            continue;
        };
        let vars = *vars.get_or_insert_with(|| {
            let (file, point) = (m.file, m.point);
            let slots = corpus.lines[m.line].values.len() as u32;
            let first = variables.len() as u32;
            variables.extend((0..slots).map(|slot| (file, point, slot)));
            (first, slots)
        });
        vars_at.push(vars);
    }
    let var_of = |at: usize, slot: u32| {
        vars_at
            .get(at)
            .filter(|&&(_, slots)| slot < slots)
            .map(|&(first, _)| first + slot)
    };
    // How often each variable prints each key, and how many lines each variable has.
    let mut printed: HashMap<u64, u32> = HashMap::default();
    let mut lines_of = vec![0u32; variables.len()];
    let mut distinct = vec![0usize; variables.len()];
    // How often each variable prints its most printed key.
    let mut most = vec![0u32; variables.len()];
    for (at, &(first, slots)) in vars_at.iter().enumerate() {
        for v in first..first + slots {
            lines_of[v as usize] += 1;
        }
        for &(slot, key) in corpus.keys_at(at) {
            if let Some(v) = var_of(at, slot) {
                let count = printed.entry(pair_key(v, key)).or_default();
                if *count == 0 {
                    distinct[v as usize] += 1;
                }
                *count += 1;
                most[v as usize] = most[v as usize].max(*count);
            }
        }
    }
    // The linkable variables (enough distinct values, none of them most of the
    // variable's) numbered densely; the others `u32::MAX`.
    let mut dense = vec![u32::MAX; variables.len()];
    let mut linkable_count = 0usize;
    for (v, _) in distinct.iter().enumerate().filter(|&(v, &n)| {
        n >= o.min_distinct && f64::from(most[v]) <= o.max_top_share * f64::from(lines_of[v])
    }) {
        dense[v] = linkable_count as u32;
        linkable_count += 1;
    }
    let mut pairs = Pairs::new(linkable_count, table_limit);
    // For each key, the linkable variables that print it (CSR by key, each key's by
    // variable number): how often in all, how often so far in the pass below, and when
    // last.
    #[derive(Clone, Copy)]
    struct Printer {
        var: u32,
        /// `dense[var]`, kept so that the pass below need not look it up per match.
        dense: u32,
        total: u32,
        so_far: u32,
        /// `i64::MIN` until its first print.
        at: i64,
    }
    let linkable_prints = || {
        printed
            .iter()
            .map(|(&pk, &total)| ((pk >> 32) as u32, pk as u32, total))
            .filter(|&(var, _, _)| dense[var as usize] != u32::MAX)
    };
    let mut printer_starts = vec![0usize; corpus.key_count() + 1];
    for (_, key, _) in linkable_prints() {
        printer_starts[key as usize + 1] += 1;
    }
    for k in 1..printer_starts.len() {
        printer_starts[k] += printer_starts[k - 1];
    }
    let unprinted = Printer {
        var: 0,
        dense: 0,
        total: 0,
        so_far: 0,
        at: i64::MIN,
    };
    let mut printers = vec![unprinted; printer_starts[corpus.key_count()]];
    let mut next_of_key = printer_starts.clone();
    for (var, key, total) in linkable_prints() {
        let next = &mut next_of_key[key as usize];
        printers[*next] = Printer {
            var,
            dense: dense[var as usize],
            total,
            ..unprinted
        };
        *next += 1;
    }
    for key in 0..corpus.key_count() {
        printers[printer_starts[key]..printer_starts[key + 1]].sort_unstable_by_key(|p| p.var);
    }
    for (at, m) in timeline.iter().enumerate() {
        let t = m.time;
        for &(slot, key) in corpus.keys_at(at) {
            let Some(to) = var_of(at, slot).filter(|&v| dense[v as usize] != u32::MAX) else {
                continue;
            };
            let Some(seen) = printer_starts
                .get(key as usize..key as usize + 2)
                .and_then(|r| printers.get_mut(r[0]..r[1]))
            else {
                continue;
            };
            let to_dense = dense[to as usize];
            // A match with each variable that printed the key within the longest window.
            let mut own = None;
            for (k, e) in seen.iter().enumerate() {
                if e.var == to {
                    own = Some(k);
                    continue;
                }
                let lag = t.saturating_sub(e.at);
                if lag <= WINDOWS_NS[WINDOWS_NS.len() - 1] {
                    let w = window_of(lag);
                    let pair = pairs.at((e.var, e.dense), (to, to_dense));
                    pairs.matched[pair][w] += 1;
                }
            }
            let Some(own) = own else { continue };
            if seen[own].at == i64::MIN {
                // Its first print: the chance that it printed the key within each window
                // before each later print of another variable, by chance (from the key's
                // rate at this variable), counted now for all of those prints at once.
                let rate_per_ms =
                    f64::from(seen[own].total) * 1e6 / span_ns(variables[to as usize].0) as f64;
                let by_chance = quiet_within_windows((-rate_per_ms).exp()).map(|q| 1.0 - q);
                for e in seen.iter().filter(|e| e.var != to && e.total > e.so_far) {
                    let later = f64::from(e.total - e.so_far);
                    let pair = pairs.at((to, to_dense), (e.var, e.dense));
                    for (sum, p) in pairs.chance[pair].iter_mut().zip(&by_chance) {
                        *sum += p * later;
                    }
                }
            }
            seen[own].at = t;
            seen[own].so_far += 1;
        }
    }
    let mut links = Vec::new();
    for ((&(from, to), pair_matched), pair_chance) in
        pairs.ends.iter().zip(&pairs.matched).zip(&pairs.chance)
    {
        let lines = f64::from(lines_of[to as usize]);
        let (from, to) = (variables[from as usize], variables[to as usize]);
        let mut best: Option<Link> = None;
        let mut best_excess = 0.0;
        let mut matched = 0u32;
        for (w, &window) in WINDOWS_NS.iter().enumerate() {
            matched += pair_matched[w];
            let excess = f64::from(matched) - pair_chance[w];
            if excess > best_excess {
                best_excess = excess;
                best = Some(Link {
                    from,
                    to,
                    window_ns: window,
                    precision: excess / f64::from(matched),
                    matches: matched as usize,
                });
            }
        }
        if let Some(link) = best {
            if link.matches >= o.min_matches
                && link.precision >= o.min_precision
                && best_excess >= o.min_coverage * lines
            {
                links.push(link);
            }
        }
    }
    Links::from_links(links)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::Options;

    #[test]
    fn chance_within_each_window_is_the_power_of_chance_within_a_millisecond() {
        let rate_per_ms = 0.0123f64;
        let got = quiet_within_windows((-rate_per_ms).exp());
        for (w, window) in WINDOWS_NS.iter().enumerate() {
            let want = (-rate_per_ms * (*window as f64 / 1e6)).exp();
            assert!(
                (got[w] - want).abs() < 1e-12,
                "{window} ns: {} against {want}",
                got[w]
            );
        }
    }

    #[test]
    fn a_lag_falls_in_the_smallest_window_that_holds_it() {
        let by_comparisons = |lag: i64| WINDOWS_NS.iter().filter(|&&w| lag > w).count();
        let mut lags = vec![i64::MIN, -1, 0, 1, 2, i64::MAX];
        for &w in &WINDOWS_NS {
            lags.extend([w - 1, w, w + 1, w / 2, w * 2]);
        }
        for k in 0..63 {
            lags.extend([(1i64 << k) - 1, 1i64 << k, (1i64 << k) + 1]);
        }
        for lag in lags {
            assert_eq!(window_of(lag), by_comparisons(lag), "lag {lag}");
        }
    }

    #[test]
    fn pairs_found_by_table_or_by_hash_give_the_same_links() {
        let corpus = corpus();
        let o = LinkOptions::default();
        let by_table = learn_with_table(&corpus, &o, usize::MAX);
        assert!(!by_table.all().is_empty());
        assert_eq!(by_table.all(), learn_with_table(&corpus, &o, 0).all());
    }

    /// The time of a line `ms` milliseconds in.
    fn at_ms(ms: i64) -> String {
        format!(
            "1970-01-01T00:{:02}:{:02}.{:03}Z",
            ms / 60_000,
            ms / 1000 % 60,
            ms % 1000
        )
    }

    /// Requests a second apart; each prints a user (one of ten) on the frontend, and
    /// the backend prints it 2 ms later. A third log point prints a user at random.
    fn corpus() -> Corpus {
        let noise = |r: i64| (r.wrapping_mul(2_654_435_761) >> 7) % 10;
        let (mut front, mut back) = (String::new(), String::new());
        for r in 0..60i64 {
            let user = r % 10;
            let ms = r * 1000;
            let t = at_ms;
            front.push_str(&format!("{} INFO serving user={user}\n", t(ms)));
            back.push_str(&format!(
                "{} INFO loading profile of user {user}\n",
                t(ms + 2)
            ));
            back.push_str(&format!(
                "{} INFO cache sweep found {} stale\n",
                t(ms + 500),
                noise(r)
            ));
        }
        Corpus::read(
            &[
                ("front.log".into(), front.into_bytes()),
                ("back.log".into(), back.into_bytes()),
            ],
            Options::default(),
        )
    }

    #[test]
    fn a_measure_mostly_of_one_value_links_nothing() {
        // A lookup of one of 12 products every 5 s, answered 1 ms later with its
        // latency: 1 ms in seven replies of ten, else 2 to 12. When the latency equals the product, the
        // reply matches the lookup within the window, far more often than chance.
        let at = |ms: u64| at_ms(ms as i64);
        let mut cache = String::new();
        for r in 0..300u64 {
            let ms = r * 5000;
            let product = 1 + (r * 7) % 12;
            let latency = if r % 10 < 7 { 1 } else { 2 + (r * 3) % 11 };
            cache += &format!("{} INFO get key=product-{product}\n", at(ms));
            cache += &format!("{} INFO finished latency_ms={latency}\n", at(ms + 1));
        }
        let c = Corpus::read(
            &[("cache.log".into(), cache.into_bytes())],
            Options::default(),
        );
        let into_latency = |o: &LinkOptions| {
            learn(&c, o)
                .all()
                .into_iter()
                .filter(|l| c.point_shape(l.to.1).text().starts_with("finished"))
                .count()
        };
        let o = LinkOptions::default();
        assert_eq!(into_latency(&o), 0);
        // Taken for an id, it links.
        let o = LinkOptions {
            max_top_share: 1.0,
            ..o
        };
        assert!(into_latency(&o) > 0);
    }

    #[test]
    fn a_value_printed_again_soon_after_links_and_chance_recurrence_does_not() {
        let c = corpus();
        let links = learn(&c, &LinkOptions::default());
        let named = |l: &Link| {
            let name = |v: Variable| c.point_shape(v.1).text();
            (name(l.from), name(l.to))
        };
        let all: Vec<_> = links
            .all()
            .into_iter()
            .map(|l| (named(l), l.window_ns))
            .collect();
        assert_eq!(
            all,
            [(
                (
                    "serving user = <NUM>".to_string(),
                    "loading profile of user <NUM>".to_string()
                ),
                3_000_000
            )],
        );
    }
}
