//! The first pass, by identifiers and time, and the log points it learns start
//! requests: lines that print one value of a ranked request identifier within a window
//! of each other are one request, on any node; lines of one file (and thread) that
//! follow each other closely are a run, and runs of different nodes that overlap in
//! time, or follow closely, are one request (union-find; by default a value within 2 s,
//! a run's lines within 50 ms, runs within 30 ms).
//!
//! A log point starts requests (per file) when it is the first line of its first-pass
//! request for at least `start_share` (70%) of `start_evidence` (5) or more lines:
//! lprof's top-level methods; when most of its lines are alone in their first-pass
//! request (after a pause), it starts requests only weakly (see the walk). Log points
//! that pass values on by links for most of their lines and are never linked to start
//! requests weakly too.

use crate::corpus::{Corpus, Moment};
use crate::ids::Evidence;
use crate::links::Links;

use super::{identifiers, numbered, StitchOptions};

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

/// The first pass: identifiers, runs of a node, runs that overlap.
pub fn by_identifiers_and_time(
    corpus: &Corpus,
    ranked: &[Evidence],
    o: &StitchOptions,
) -> Vec<u32> {
    let n = corpus.lines.len();
    let mut sets = Sets((0..n as u32).collect());
    let ids = identifiers(ranked, o);
    // The log points with an identifier, by number: most lines' have none, and need no
    // look-up per value.
    let mut with_id = vec![false; corpus.points().len()];
    for &(point, _) in &ids {
        if let Some(w) = with_id.get_mut(point as usize) {
            *w = true;
        }
    }
    // Each identifier value's lines, one after another in time order (the timeline's),
    // joined when within the window: by the value's key number, its latest line.
    let mut latest: Vec<Option<(i64, u32)>> = vec![None; corpus.key_count()];
    for (at, m) in corpus.timeline().iter().enumerate() {
        if !with_id.get(m.point as usize).copied().unwrap_or(false) {
            continue;
        }
        let line = m.line as u32;
        for (slot, key) in corpus.value_keys_at(at).enumerate() {
            if !ids.contains(&(m.point, slot as u32)) {
                continue;
            }
            let Some(latest) = latest.get_mut(key as usize) else {
                continue;
            };
            if let Some((t, before)) = *latest {
                if m.time - t <= o.id_window_ns {
                    sets.union(before, line);
                }
            }
            *latest = Some((m.time, line));
        }
    }
    // Runs of one file and thread whose lines follow within `local_gap_ns`: segments,
    // each (start, end, first line).
    // A thread's open segment, by its number (0 for none, else the thread's number
    // + 1), with its file: the lines come file by file, so an entry of another file
    // is one no line of this file has opened.
    let mut open: Vec<Option<(u32, usize)>> = vec![None; corpus.threads.len() + 1];
    let mut segments: Vec<(i64, i64, u32)> = Vec::new();
    for (i, line) in corpus.lines.iter().enumerate() {
        let Some(open) = open.get_mut(line.thread.map_or(0, |t| t as usize + 1)) else {
            continue;
        };
        let t = corpus.time(i);
        match open.filter(|&(file, _)| file == line.file).map(|(_, k)| k) {
            Some(k) if t - segments[k].1 <= o.local_gap_ns && t >= segments[k].0 => {
                sets.union(segments[k].2, i as u32);
                segments[k].1 = segments[k].1.max(t);
            }
            _ => {
                *open = Some((line.file, segments.len()));
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

/// Whether each (file, log point), by number, starts requests because it is mostly first
/// in its request (`requests` numbered from 0), and whether most of its lines are then
/// alone in their request: a line after a pause, which may as well be the step after a
/// slow one in the request before.
pub(super) fn first_pass_starts(
    corpus: &Corpus,
    requests: &[u32],
    o: &StitchOptions,
) -> Vec<(bool, bool)> {
    let request_count = requests.iter().max().map_or(0, |&r| r as usize + 1);
    let mut sizes = vec![0u32; request_count];
    for &r in requests {
        if let Some(size) = sizes.get_mut(r as usize) {
            *size += 1;
        }
    }
    // Each's lines, how many of them are the first of their request (the first met in
    // time order, which is by (time, line)), and how many of those are alone in it.
    let mut counts = vec![(0usize, 0usize, 0usize); corpus.node_point_count()];
    let mut begun = vec![false; request_count];
    for m in corpus.timeline() {
        let Some((lines, first, alone)) = counts.get_mut(m.node_point as usize) else {
            continue;
        };
        *lines += 1;
        let Some(&r) = requests.get(m.line) else {
            continue;
        };
        if let Some(begun) = begun.get_mut(r as usize).filter(|b| !**b) {
            *begun = true;
            *first += 1;
            if sizes.get(r as usize) == Some(&1) {
                *alone += 1;
            }
        }
    }
    counts
        .into_iter()
        .map(|(n, first, alone)| {
            let starts = n >= o.start_evidence && first as f64 >= o.start_share * n as f64;
            (starts, starts && 2 * alone > n)
        })
        .collect()
}

/// Whether each (file, log point), by number, starts requests because most of its lines
/// pass a value on by a link, and none is linked to.
pub(super) fn link_starts(corpus: &Corpus, links: &Links) -> Vec<bool> {
    let mut lines = vec![0usize; corpus.node_point_count()];
    let mut first: Vec<Option<&Moment>> = vec![None; corpus.node_point_count()];
    for m in corpus.timeline() {
        if let (Some(n), Some(first)) = (
            lines.get_mut(m.node_point as usize),
            first.get_mut(m.node_point as usize),
        ) {
            *n += 1;
            first.get_or_insert(m);
        }
    }
    first
        .iter()
        .zip(lines)
        .map(|(m, lines)| {
            m.is_some_and(|m| {
                let (file, point) = (m.file, m.point);
                let slots = corpus.lines[m.line].values.len() as u32;
                let vars = || (0..slots).map(move |slot| (file, point, slot));
                let passed_on = vars().map(|v| links.matches_from(v)).max().unwrap_or(0);
                2 * passed_on >= lines && !vars().any(|v| links.is_target(v))
            })
        })
        .collect()
}
