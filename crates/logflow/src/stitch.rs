//! Lines stitched into requests, in two passes.
//!
//! The first, by identifiers and time: lines that print one value of a request
//! identifier within a window of each other are one request, on any node; lines of one
//! file (and thread, when the prefix names it) that follow each other closely are a run,
//! and runs of different nodes that overlap in time, or follow closely, are one request.
//! It splits a request where it pauses (a call that logs nothing).
//!
//! The second, by where requests start (lprof's top-level methods, learned): a log point
//! of a node that is mostly the first line of its request in the first pass starts
//! requests; every other line, in time order, belongs to the request of an identifier
//! value it prints (seen within the window), else to the line before it, unless the log
//! falls quiet for longer than `bridge_ns`. The log-point order within requests
//! (lprof's step 3) and the log-point pairs that follow each other across nodes with a
//! steady lag are still to come; under concurrency, the second pass joins a line to the
//! latest request started, unless it prints an identifier value of another.

use foldhash::{HashMap, HashSet};

use crate::corpus::Corpus;
use crate::drain::TemplateId;
use crate::ids::{Evidence, Variable};

#[derive(Clone, Debug)]
pub struct StitchOptions {
    /// Variables scoring at least this are request identifiers.
    pub min_score: f64,
    /// Occurrences of an identifier's value at most this far apart join.
    pub id_window_ns: i64,
    /// Consecutive lines of one file and thread at most this far apart join.
    pub local_gap_ns: i64,
    /// Runs of lines on different nodes that overlap, or follow each other within this,
    /// join.
    pub cross_gap_ns: i64,
    /// A node's log point starts requests when at least this share of its lines are the
    /// first of their request in the first pass ...
    pub start_share: f64,
    /// ... and it was seen at least this often.
    pub start_evidence: usize,
    /// A pause of the whole log longer than this ends a request.
    pub bridge_ns: i64,
    /// Variables of these names are request identifiers whatever their score ...
    pub pinned: Vec<String>,
    /// ... and of these names are not.
    pub excluded: Vec<String>,
}

impl Default for StitchOptions {
    fn default() -> Self {
        StitchOptions {
            min_score: 0.2,
            id_window_ns: 2_000_000_000,
            local_gap_ns: 50_000_000,
            cross_gap_ns: 30_000_000,
            start_share: 0.7,
            start_evidence: 5,
            bridge_ns: 500_000_000,
            pinned: Vec::new(),
            excluded: Vec::new(),
        }
    }
}

/// Union-find over lines.
struct Sets(Vec<u32>);

impl Sets {
    fn find(&mut self, mut x: u32) -> u32 {
        while self.0[x as usize] != x {
            let parent = self.0[x as usize];
            self.0[x as usize] = self.0[parent as usize];
            x = parent;
        }
        x
    }

    fn union(&mut self, a: u32, b: u32) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            // The earlier line names the set.
            let (keep, join) = if a < b { (a, b) } else { (b, a) };
            self.0[join as usize] = keep;
        }
    }
}

/// Each line's request, numbered from 0 in order of each request's first line.
pub fn stitch(corpus: &Corpus, ranked: &[Evidence], o: &StitchOptions) -> Vec<u32> {
    let first = by_identifiers_and_time(corpus, ranked, o);
    let starts = starts(corpus, &first, o);
    let ids = identifiers(ranked, o);
    let mut order: Vec<usize> = (0..corpus.lines.len()).collect();
    order.sort_by_key(|&i| (corpus.time(i), i));
    let mut requests = vec![0u32; corpus.lines.len()];
    let mut current: Option<(u32, i64)> = None;
    // The request each identifier value was last seen in, and when.
    let mut by_value: HashMap<&str, (u32, i64)> = HashMap::default();
    let mut next = 0;
    for i in order {
        let line = &corpus.lines[i];
        let t = corpus.time(i);
        let values = || {
            line.values
                .iter()
                .enumerate()
                .filter(|(slot, _)| ids.contains(&(line.template, *slot as u32)))
                .map(|(_, v)| &**v)
        };
        let known = values()
            .filter_map(|v| by_value.get(v))
            .find(|(_, seen)| t - seen <= o.id_window_ns)
            .map(|(r, _)| *r);
        let request = match (known, current) {
            (Some(r), _) => r,
            (None, Some((r, last)))
                if t - last <= o.bridge_ns && !starts.contains(&(line.file, line.template)) =>
            {
                r
            }
            _ => {
                next += 1;
                next - 1
            }
        };
        for v in values() {
            by_value.insert(v, (request, t));
        }
        requests[i] = request;
        current = Some((request, t));
    }
    numbered(&requests)
}

/// The (file, log point) pairs that start requests: mostly first in their request.
fn starts(corpus: &Corpus, requests: &[u32], o: &StitchOptions) -> HashSet<(u32, TemplateId)> {
    let mut first_of: HashMap<u32, usize> = HashMap::default();
    for (i, &r) in requests.iter().enumerate() {
        let e = first_of.entry(r).or_insert(i);
        if (corpus.time(i), i) < (corpus.time(*e), *e) {
            *e = i;
        }
    }
    let mut seen: HashMap<(u32, TemplateId), (usize, usize)> = HashMap::default();
    for line in &corpus.lines {
        seen.entry((line.file, line.template)).or_default().0 += 1;
    }
    for &i in first_of.values() {
        let line = &corpus.lines[i];
        if let Some(e) = seen.get_mut(&(line.file, line.template)) {
            e.1 += 1;
        }
    }
    seen.into_iter()
        .filter(|(_, (n, first))| {
            *n >= o.start_evidence && *first as f64 >= o.start_share * *n as f64
        })
        .map(|(key, _)| key)
        .collect()
}

/// The variables taken for request identifiers.
pub fn identifiers(ranked: &[Evidence], o: &StitchOptions) -> HashSet<Variable> {
    ranked
        .iter()
        .filter(|e| {
            o.pinned.contains(&e.name) || (e.score >= o.min_score && !o.excluded.contains(&e.name))
        })
        .map(|e| e.variable)
        .collect()
}

/// Requests renumbered from 0 in order of their first line.
fn numbered(requests: &[u32]) -> Vec<u32> {
    let mut numbers: HashMap<u32, u32> = HashMap::default();
    requests
        .iter()
        .map(|&r| {
            let next = numbers.len() as u32;
            *numbers.entry(r).or_insert(next)
        })
        .collect()
}

/// The first pass: identifiers, runs of a node, runs that overlap.
pub fn by_identifiers_and_time(
    corpus: &Corpus,
    ranked: &[Evidence],
    o: &StitchOptions,
) -> Vec<u32> {
    let n = corpus.lines.len();
    let mut sets = Sets((0..n as u32).collect());
    let ids = identifiers(ranked, o);
    // Lines by identifier value, in time order.
    let mut by_value: HashMap<&str, Vec<(i64, u32)>> = HashMap::default();
    for (i, line) in corpus.lines.iter().enumerate() {
        for (slot, value) in line.values.iter().enumerate() {
            if ids.contains(&(line.template, slot as u32)) {
                by_value
                    .entry(value)
                    .or_default()
                    .push((corpus.time(i), i as u32));
            }
        }
    }
    for lines in by_value.values_mut() {
        lines.sort_unstable();
        for w in lines.windows(2) {
            if w[1].0 - w[0].0 <= o.id_window_ns {
                sets.union(w[0].1, w[1].1);
            }
        }
    }
    // Runs of one file and thread whose lines follow within `local_gap_ns`: segments,
    // each (start, end, first line).
    let mut open: HashMap<(u32, Option<&str>), usize> = HashMap::default();
    let mut segments: Vec<(i64, i64, u32)> = Vec::new();
    for (i, line) in corpus.lines.iter().enumerate() {
        let key = (line.file, line.thread.as_deref());
        let t = corpus.time(i);
        match open.get(&key).copied() {
            Some(k) if t - segments[k].1 <= o.local_gap_ns && t >= segments[k].0 => {
                sets.union(segments[k].2, i as u32);
                segments[k].1 = segments[k].1.max(t);
            }
            _ => {
                open.insert(key, segments.len());
                segments.push((t, t, i as u32));
            }
        }
    }
    // Segments of any node that overlap in time, or follow within `cross_gap_ns`.
    segments.sort_unstable();
    let mut current: Option<(i64, u32)> = None;
    for &(start, end, first) in &segments {
        match current {
            Some((until, line)) if start - until <= o.cross_gap_ns => {
                sets.union(line, first);
                current = Some((until.max(end), line));
            }
            _ => current = Some((end, first)),
        }
    }
    let roots: Vec<u32> = (0..n as u32).map(|i| sets.find(i)).collect();
    numbered(&roots)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::Options;
    use crate::ids::rank;

    #[test]
    fn lines_sharing_a_request_id_join_across_files_and_neighbours_join_in_a_file() {
        // Two files (nodes); requests a1 and b2 interleave; "cache warm" lines carry no
        // id and follow their request's line within a millisecond.
        let mut front = String::new();
        let mut back = String::new();
        for (k, id) in ["a1b2c3d4e5", "f6a7b8c9d0", "0a9b8c7d6e", "1f2e3d4c5b"]
            .iter()
            .enumerate()
        {
            let s = k as i64 * 3;
            front += &format!("1970-01-01T00:00:{s:02}.000Z [main] got request {id}\n");
            front += &format!("1970-01-01T00:00:{s:02}.001Z [main] cache warm\n");
            back += &format!("1970-01-01T00:00:{s:02}.050Z [pool] serving {id}\n");
            front += &format!("1970-01-01T00:00:{:02}.100Z [main] answered {id}\n", s + 1);
        }
        let corpus = Corpus::read(
            &[
                ("front.log".into(), front.into_bytes()),
                ("back.log".into(), back.into_bytes()),
            ],
            Options::default(),
        );
        let ranked = rank(&corpus);
        let requests = by_identifiers_and_time(&corpus, &ranked, &StitchOptions::default());
        // Front's lines come first (file order): got, warm, answered per request; then back's.
        let request_of = |file: u32, number: u32| {
            let i = corpus
                .lines
                .iter()
                .position(|l| l.file == file && l.number == number)
                .expect("the line");
            requests[i]
        };
        for k in 0..4u32 {
            let r = request_of(0, 3 * k + 1);
            assert_eq!(request_of(0, 3 * k + 2), r, "cache warm of request {k}");
            assert_eq!(request_of(0, 3 * k + 3), r, "answer of request {k}");
            assert_eq!(request_of(1, k + 1), r, "back end of request {k}");
            assert_eq!(r, k);
        }
    }

    #[test]
    fn runs_on_different_nodes_join_when_they_overlap_and_not_across_a_pause() {
        // No identifiers: web logs a request's start and end 40 ms apart, db logs a query
        // between them; the next request comes a second later.
        let mut web = String::new();
        let mut db = String::new();
        for k in 0..3 {
            web += &format!("1970-01-01T00:00:0{k}.000Z begin\n1970-01-01T00:00:0{k}.040Z end\n");
            db += &format!("1970-01-01T00:00:0{k}.020Z query\n");
        }
        let corpus = Corpus::read(
            &[
                ("web.log".into(), web.into_bytes()),
                ("db.log".into(), db.into_bytes()),
            ],
            Options::default(),
        );
        let requests = by_identifiers_and_time(&corpus, &rank(&corpus), &StitchOptions::default());
        // web: begin, end per request; then db: one query per request.
        assert_eq!(requests, vec![0, 0, 1, 1, 2, 2, 0, 1, 2]);
    }

    #[test]
    fn a_log_point_that_starts_requests_splits_them_and_pauses_within_one_do_not() {
        // Requests 400 ms apart: web logs "handle request", a step, a pause of 300 ms
        // (a call that logs nothing), the step again and the reply; db logs its query.
        let mut web = String::new();
        let mut db = String::new();
        let at = |k: u32, ms: u32| {
            let t = k * 400 + ms;
            format!("1970-01-01T00:00:{:02}.{:03}Z", t / 1000, t % 1000)
        };
        for k in 0..8 {
            web += &format!("{} handle request\n", at(k, 0));
            web += &format!("{} step one\n", at(k, 10));
            web += &format!("{} step one\n", at(k, 310));
            db += &format!("{} query done\n", at(k, 320));
            web += &format!("{} reply sent\n", at(k, 330));
        }
        let corpus = Corpus::read(
            &[
                ("web.log".into(), web.into_bytes()),
                ("db.log".into(), db.into_bytes()),
            ],
            Options::default(),
        );
        let ranked = rank(&corpus);
        let o = StitchOptions::default();
        // The first pass splits each request at its pause.
        let first = by_identifiers_and_time(&corpus, &ranked, &o);
        assert_ne!(first[0], first[2]);
        let requests = stitch(&corpus, &ranked, &o);
        for k in 0..8usize {
            let r = requests[4 * k];
            assert_eq!(
                &requests[4 * k..4 * k + 4],
                &[r; 4],
                "web lines of request {k}"
            );
            assert_eq!(requests[32 + k], r, "db line of request {k}");
            assert_eq!(r, k as u32);
        }
    }

    #[test]
    fn identifiers_are_pinned_and_excluded_by_name() {
        // "user" recurs across requests (an entity); "order" is printed once per line,
        // at one log point (so nothing says it identifies requests).
        let mut log = String::new();
        for k in 0..30 {
            // Half a second apart: one user's lines 1.5 s apart, within the id window.
            log += &format!(
                "1970-01-01T00:00:{:02}.{:03}Z order {} by user {}\n",
                k / 2,
                k % 2 * 500,
                1000 + k,
                k % 3
            );
        }
        let corpus = Corpus::read(&[("a.log".into(), log.into_bytes())], Options::default());
        let ranked = rank(&corpus);
        let names = |o: &StitchOptions| {
            let ids = identifiers(&ranked, o);
            let mut names: Vec<&str> = ranked
                .iter()
                .filter(|e| ids.contains(&e.variable))
                .map(|e| e.name.as_str())
                .collect();
            names.sort();
            names
        };
        let o = StitchOptions::default();
        assert!(names(&o).is_empty(), "{ranked:#?}");
        let pinned = StitchOptions {
            pinned: vec!["user".into()],
            ..StitchOptions::default()
        };
        assert_eq!(names(&pinned), ["user"]);
        // Lines of one user a second apart join once it is an identifier.
        let requests = by_identifiers_and_time(&corpus, &ranked, &pinned);
        assert_eq!(requests[0], requests[3]);
        assert_ne!(requests[0], requests[1]);
        let excluded = StitchOptions {
            pinned: vec!["user".into()],
            excluded: vec!["user".into()],
            ..StitchOptions::default()
        };
        assert_eq!(names(&excluded), ["user"], "pinning wins");
    }
}
