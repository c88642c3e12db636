//! Durations lines print: a request's last line on a node often says how long the
//! request took there (`latency_ms=26`, `took 0.026s`, an access log's request
//! time), and so when that node logged the request's first line. Learned per (file,
//! log point, parameter): the unit (seconds or milliseconds) and the log point of
//! the same node on whose lines its values, counted back from its own lines, land
//! (within 1 ms), for at least half of its lines and with a precision of 0.6.
//! Chance is what the value the same parameter printed before gives, counted back
//! from the same line: a number that is no duration of this request (a count, a
//! small latency among lines close together) lands as often either way. In the
//! walk, such a line ties, with that precision, to the request of the start line
//! nearest the time its value points to (none when two are as near), unless a
//! stronger tie holds it.

use std::collections::VecDeque;

use foldhash::HashMap;

use crate::corpus::Corpus;

use super::StitchOptions;

/// How far a landing may be from a start line (a duration in whole milliseconds is
/// cut short by up to one).
const TOLERANCE_NS: i64 = 1_000_000;
/// The units tried, in nanoseconds: seconds and milliseconds (a duration in
/// microseconds is mostly within the tolerance).
const UNITS_NS: [f64; 2] = [1e9, 1e6];
/// Durations no longer than this land among a line's own neighbours, whatever they are:
/// not followed back.
const SHORTEST_NS: f64 = 2.0 * TOLERANCE_NS as f64;
/// Durations longer than this are not followed back.
const LONGEST_NS: f64 = 60e9;
/// A learned duration is kept when the values printed before explain at most this
/// share of its landings ...
const MIN_PRECISION: f64 = 0.6;
/// ... and its landings above chance are at least this share of its lines.
const MIN_COVERAGE: f64 = 0.5;

/// A learned duration of a log point: the parameter that prints it, the log point (by
/// node point) of the request's first line it counts from, its unit, and the share of
/// its landings chance does not explain (its ties' strength).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Duration {
    pub(super) slot: u32,
    pub(super) start: u32,
    pub(super) unit_ns: f64,
    pub(super) precision: f64,
}

impl Duration {
    /// When the request's first line was, by a line at `t` printing `value` (none for
    /// a duration within the tolerance, as in learning).
    pub(super) fn start_of(&self, t: i64, value: &str) -> Option<i64> {
        let back = scaled(number(value)?, self.unit_ns)?;
        Some(t - back as i64)
    }
}

/// `value` as a number, if it is one no longer than [`LONGEST_NS`] in the largest unit:
/// most numbers are whole, and many are ids or times far too large, both read without
/// the float parser.
fn number(value: &str) -> Option<f64> {
    let bytes = value.as_bytes();
    let significant = bytes.iter().position(|&b| b != b'0').unwrap_or(bytes.len());
    let whole = bytes[significant..]
        .iter()
        .position(|b| !b.is_ascii_digit())
        .unwrap_or(bytes.len() - significant);
    // More whole digits than the longest duration has in the smallest unit.
    if whole > LONGEST_DIGITS {
        return None;
    }
    if !bytes.is_empty() && significant + whole == bytes.len() {
        let n = bytes[significant..]
            .iter()
            .fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
        return Some(f64::from(n));
    }
    value.parse().ok()
}

/// How many whole digits the longest duration has in the smallest unit (60 000 ms).
const LONGEST_DIGITS: usize = ((LONGEST_NS / UNITS_NS[1]) as u64).ilog10() as usize + 1;

/// `v` units of `unit_ns`, in nanoseconds, if longer than [`SHORTEST_NS`] and no longer
/// than [`LONGEST_NS`].
fn scaled(v: f64, unit_ns: f64) -> Option<f64> {
    let ns = v * unit_ns;
    (ns > SHORTEST_NS && ns <= LONGEST_NS).then_some(ns)
}

/// Numbers of a parameter read to learn it, at most ...
const SAMPLE: usize = 200;
/// ... and past this many, only while they land more often than those before them.
const PROBE: usize = 20;

/// Whether the numbers of `var` (a parameter in a unit) are still read: `valued` of
/// them so far, `probed` the (own, before) that landed on any start.
fn read_on(valued: &[usize], probed: &[(usize, usize)], var: usize) -> bool {
    let n = valued.get(var).copied().unwrap_or(SAMPLE);
    let (own, before) = probed.get(var).copied().unwrap_or_default();
    n < SAMPLE && (n < PROBE || own as f64 - before as f64 >= MIN_COVERAGE / 2.0 * n as f64)
}

/// The durations learned, by node point (`Moment::node_point`) of the line that prints
/// them. Each parameter is learned from its first [`SAMPLE`] numbers in each unit,
/// and past the first [`PROBE`] only while they land more often than chance, so that
/// the cost does not grow with the logs and most parameters cost little.
pub(super) fn learn(corpus: &Corpus, o: &StitchOptions) -> Vec<Vec<Duration>> {
    let count = corpus.node_point_count();
    let timeline = corpus.timeline();
    // Each file's lines in time order: (time, node point).
    let mut by_file: Vec<Vec<(i64, u32)>> = vec![Vec::new(); corpus.files.len()];
    // The parameters numbered densely, a node point's one after another: its first's
    // number, as met.
    let mut first_var: Vec<Option<usize>> = vec![None; count];
    let mut vars: Vec<(u32, u32)> = Vec::new();
    for m in timeline {
        if let Some(lines) = by_file.get_mut(m.file as usize) {
            lines.push((m.time, m.node_point));
        }
        if let (Some(first @ None), Some(line)) = (
            first_var.get_mut(m.node_point as usize),
            corpus.lines.get(m.line),
        ) {
            *first = Some(vars.len());
            vars.extend((0..line.values.len() as u32).map(|slot| (m.node_point, slot)));
        }
    }
    // By (parameter, unit): its lines with a number, and the number before, in ns.
    let mut valued = vec![0usize; vars.len() * UNITS_NS.len()];
    let mut before: Vec<Option<f64>> = vec![None; vars.len() * UNITS_NS.len()];
    // By (parameter, unit, start): landings of each number, and of the number the
    // parameter printed before it, counted back from this line: what a number that is
    // no duration of this request gives.
    let mut landed: HashMap<(usize, u32), (usize, usize)> = HashMap::default();
    // By (parameter, unit): its numbers that landed on any start, and those before them.
    let mut probed = vec![(0usize, 0usize); vars.len() * UNITS_NS.len()];
    // By (parameter, unit): whether it is still read; once not, never again, as its
    // counts no longer change.
    let mut reading = vec![true; vars.len() * UNITS_NS.len()];
    let mut starts: Vec<u32> = Vec::new();
    for m in timeline {
        let (Some(line), Some(lines), Some(&Some(first))) = (
            corpus.lines.get(m.line),
            by_file.get(m.file as usize),
            first_var.get(m.node_point as usize),
        ) else {
            continue;
        };
        for (slot, value) in corpus.values(line).enumerate() {
            let vars = (first + slot) * UNITS_NS.len();
            // Many values are no numbers, and most parameters are soon no longer read: a
            // quick look at both before parsing.
            if !value.bytes().next().is_some_and(|b| b.is_ascii_digit())
                || !reading
                    .get(vars..vars + UNITS_NS.len())
                    .is_some_and(|r| r.contains(&true))
            {
                continue;
            }
            let Some(v) = number(value) else {
                continue;
            };
            for (unit, &unit_ns) in UNITS_NS.iter().enumerate() {
                let var = vars + unit;
                let Some(back) = scaled(v, unit_ns) else {
                    continue;
                };
                if !read_on(&valued, &probed, var) {
                    if let Some(r) = reading.get_mut(var) {
                        *r = false;
                    }
                    continue;
                }
                if let Some(n) = valued.get_mut(var) {
                    *n += 1;
                }
                let other = before.get_mut(var).and_then(|b| b.replace(back));
                for (null, back) in [(false, Some(back)), (true, other)] {
                    let Some(back) = back else { continue };
                    let target = m.time - back as i64;
                    let from = lines.partition_point(|l| l.0 < target - TOLERANCE_NS);
                    starts.clear();
                    for &(t, start) in &lines[from..] {
                        if t > target + TOLERANCE_NS {
                            break;
                        }
                        if start != m.node_point && !starts.contains(&start) {
                            if starts.is_empty() {
                                if let Some(p) = probed.get_mut(var) {
                                    if null {
                                        p.1 += 1;
                                    } else {
                                        p.0 += 1;
                                    }
                                }
                            }
                            starts.push(start);
                            let e = landed.entry((var, start)).or_default();
                            if null {
                                e.1 += 1;
                            } else {
                                e.0 += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    let mut found: Vec<Vec<Duration>> = vec![Vec::new(); count];
    // The best start per (node point, slot), over units and starts.
    let mut best: HashMap<(u32, u32), (f64, Duration)> = HashMap::default();
    for (&(var, start), &(hits, null_hits)) in &landed {
        let (Some(&(np, slot)), unit) = (vars.get(var / UNITS_NS.len()), var % UNITS_NS.len())
        else {
            continue;
        };
        let lines = valued.get(var).copied().unwrap_or(0);
        if lines < o.start_evidence || hits == 0 {
            continue;
        }
        let excess = hits as f64 - null_hits as f64;
        let precision = excess / hits as f64;
        if precision < MIN_PRECISION || excess < MIN_COVERAGE * lines as f64 {
            continue;
        }
        let d = Duration {
            slot,
            start,
            unit_ns: UNITS_NS[unit],
            precision,
        };
        let e = best.entry((np, slot)).or_insert((excess, d));
        // The larger excess; on a tie, the smaller unit, then the earlier start, so that
        // the hash map's order never decides.
        if (excess, -d.unit_ns, -(d.start as f64)) > (e.0, -e.1.unit_ns, -(e.1.start as f64)) {
            *e = (excess, d);
        }
    }
    for ((np, _), (_, d)) in best {
        if let Some(f) = found.get_mut(np as usize) {
            f.push(d);
        }
    }
    for f in &mut found {
        f.sort_by_key(|d| d.slot);
    }
    found
}

/// The recent lines of each log point a duration counts from, by node point: (time,
/// request), in time order, for up to [`LONGEST_NS`] and [`RecentStarts::KEPT`] lines.
pub(super) struct RecentStarts(Vec<Option<VecDeque<(i64, u32)>>>);

impl RecentStarts {
    const KEPT: usize = 4096;

    pub(super) fn new(durations: &[Vec<Duration>]) -> RecentStarts {
        let mut kept: Vec<Option<VecDeque<(i64, u32)>>> = vec![None; durations.len()];
        for d in durations.iter().flatten() {
            if let Some(k) = kept.get_mut(d.start as usize) {
                k.get_or_insert_with(VecDeque::new);
            }
        }
        RecentStarts(kept)
    }

    /// A line at node point `np`, at `t`, of `request`.
    pub(super) fn add(&mut self, np: u32, t: i64, request: u32) {
        let Some(Some(lines)) = self.0.get_mut(np as usize) else {
            return;
        };
        while lines
            .front()
            .is_some_and(|l| (t - l.0) as f64 > LONGEST_NS || lines.len() >= Self::KEPT)
        {
            lines.pop_front();
        }
        lines.push_back((t, request));
    }

    /// The line of log point `start` nearest `target`, within the tolerance: its time
    /// and request. None when two are as near.
    pub(super) fn nearest(&self, start: u32, target: i64) -> Option<(i64, u32)> {
        let lines = self.0.get(start as usize)?.as_ref()?;
        let from = lines.partition_point(|l| l.0 < target - TOLERANCE_NS);
        let mut best: Option<(i64, (i64, u32))> = None;
        let mut tied = false;
        for &l in lines.range(from..) {
            if l.0 > target + TOLERANCE_NS {
                break;
            }
            let off = (l.0 - target).abs();
            match best {
                Some((b, _)) if off > b => {}
                Some((b, _)) if off == b => tied = true,
                _ => {
                    best = Some((off, l));
                    tied = false;
                }
            }
        }
        best.filter(|_| !tied).map(|(_, l)| l)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::drain::Options;

    /// A node's requests, 3 to 9 ms apart and 10 to 40 ms long: the first line of each,
    /// its last with its latency in whole milliseconds (cut short), and between them a
    /// count of items that is no duration. The request of each line, in order.
    pub(in crate::stitch) fn timed_requests() -> (Vec<(String, Vec<u8>)>, Vec<u32>) {
        let at = crate::stitch::tests::at_us;
        let mut lines: Vec<(u64, String, u32)> = Vec::new();
        let mut t = 0u64;
        for k in 0..300u64 {
            t += 3_000 + (k * 7919) % 6_000;
            let took = 10_000 + (k * 104_729) % 30_000;
            let id = format!("{:08x}", k * 2_654_435_761 % 4_294_967_291);
            lines.push((
                t,
                format!("{} started request request_id={id}", at(t)),
                k as u32,
            ));
            lines.push((
                t + took / 2,
                format!("{} cart read items={}", at(t + took / 2), 1 + k % 40),
                k as u32,
            ));
            lines.push((
                t + took,
                format!(
                    "{} finished status=200 latency_ms={}",
                    at(t + took),
                    took / 1_000
                ),
                k as u32,
            ));
        }
        lines.sort_by_key(|l| l.0);
        let text: String = lines.iter().map(|l| l.1.clone() + "\n").collect();
        let truth = lines.iter().map(|l| l.2).collect();
        (vec![("web.log".into(), text.into_bytes())], truth)
    }

    #[test]
    fn a_latency_is_learned_as_counting_back_to_the_requests_first_line_and_a_count_is_not() {
        let (files, _) = timed_requests();
        let corpus = Corpus::read(&files, Options::default());
        let found = learn(&corpus, &StitchOptions::default());
        let point_of = |text: &str| {
            corpus
                .timeline()
                .iter()
                .find(|m| corpus.message(&corpus.lines[m.line], &files).contains(text))
                .map(|m| m.node_point)
        };
        let (started, read, finished) = (
            point_of("started"),
            point_of("cart read"),
            point_of("finished"),
        );
        let of = |np: Option<u32>| np.and_then(|np| found.get(np as usize)).cloned();
        let durations = of(finished).unwrap_or_default();
        assert_eq!(durations.len(), 1, "{durations:?}");
        assert_eq!(Some(durations[0].start), started);
        assert_eq!(durations[0].unit_ns, 1e6);
        assert_eq!(of(read), Some(Vec::new()));
        assert_eq!(of(started), Some(Vec::new()));
    }

    #[test]
    fn numbers_are_read_whole_or_decimal_and_ids_too_long_for_a_duration_are_not() {
        assert_eq!(number("26"), Some(26.0));
        assert_eq!(number("0026"), Some(26.0));
        assert_eq!(number("0.026"), Some(0.026));
        assert_eq!(number("12.5"), Some(12.5));
        assert_eq!(number("60000"), Some(60000.0));
        assert_eq!(number("0"), Some(0.0));
        // An epoch time in milliseconds, an id: longer than a minute in any unit.
        assert_eq!(number("1700000000000"), None);
        assert_eq!(number("123456.7"), None);
        assert_eq!(number("26ms"), None);
        assert_eq!(number(""), None);
    }

    proptest::proptest! {
        /// The quick reading agrees with the float parser on every number a duration
        /// can be, and reads none that is longer than any.
        #[test]
        fn numbers_read_as_the_float_parser_reads_them(
            value in "[0-9]{0,8}(\\.[0-9]{0,4})?|[0-9a-z.-]{0,12}"
        ) {
            match (number(&value), value.parse::<f64>().ok()) {
                (Some(quick), Some(parsed)) => {
                    proptest::prop_assert_eq!(quick.to_bits(), parsed.to_bits(), "{}", value)
                }
                (None, Some(parsed)) => proptest::prop_assert!(parsed > 60_000.0, "{value}"),
                (quick, None) => proptest::prop_assert_eq!(quick, None),
            }
        }
    }

    #[test]
    fn the_start_nearest_a_duration_is_found_and_none_when_two_are_as_near() {
        let d = Duration {
            slot: 0,
            start: 1,
            unit_ns: 1e6,
            precision: 0.9,
        };
        let mut recent = RecentStarts::new(&[Vec::new(), Vec::new(), vec![d]]);
        recent.add(1, 10_000_000, 7);
        recent.add(1, 12_000_000, 8);
        // 30 ms after the first start, printing 20 (ms): 10 ms, the first start.
        assert_eq!(d.start_of(30_400_000, "20"), Some(10_400_000));
        assert_eq!(recent.nearest(1, 10_400_000), Some((10_000_000, 7)));
        assert_eq!(recent.nearest(1, 11_000_000), None);
        assert_eq!(recent.nearest(1, 14_500_000), None);
        assert_eq!(d.start_of(1, "x"), None);
        assert_eq!(d.start_of(1, "-3"), None);
        assert_eq!(d.start_of(30_000_000, "2"), None);
    }
}
