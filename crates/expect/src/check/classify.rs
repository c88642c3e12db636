//! Which recognizers a path matches: each recognizer's path limits, then its thread
//! patterns assigned to the path's threads (a matcher run per pair), then the sets of
//! recognizers built from others.
//!
//! A thread is tried only against the patterns its first task admits (the task every match
//! must begin with, found past leading optional notices) and whose host and limits it meets.
//! The (pattern, thread) candidates are then narrowed in rounds (a message's peer must be
//! able to take the pattern it names), and an assignment is searched that meets every
//! pattern's thread count.

use super::explain::{explain, Failed};
use super::*;

impl Checker {
    /// Decides which recognizers a path matches and whether it is expected, without
    /// formatting anything: a bulk check reports only some of the paths it classifies.
    pub fn classify(&self, path: &Path) -> Classification {
        let mut verdicts: Vec<Option<Verdict>> = vec![None; self.recognizers.len()];
        let mut misses: Vec<Option<Miss>> = vec![None; self.recognizers.len()];
        // The number of each thread's first task name, when a pattern names it.
        let firsts: Vec<Option<u32>> = path
            .threads
            .iter()
            .map(|t| match t.events.first() {
                Some(e) if e.kind == Kind::TaskStart => self.first_tasks.get(&e.name).copied(),
                _ => None,
            })
            .collect();
        for (i, r) in self.recognizers.iter().enumerate() {
            let (v, miss) = match &r.shape {
                Shape::Full(threads, first) => self.full(r, threads, first, &firsts, path),
                Shape::Fragment(program) => self.fragment(r, program, path),
                Shape::Set(_) => continue,
            };
            verdicts[i] = Some(v);
            misses[i] = miss;
        }
        for i in 0..self.recognizers.len() {
            if verdicts[i].is_none() {
                let v = self.set_verdict(i, &mut verdicts, 0);
                verdicts[i] = Some(v);
            }
        }
        let verdicts: Vec<Verdict> = verdicts
            .into_iter()
            .map(|v| v.unwrap_or(Verdict::NoMatch))
            .collect();
        let with = |verdict: Verdict| -> Vec<usize> {
            (0..verdicts.len())
                .filter(|&i| verdicts[i] == verdict)
                .collect()
        };
        let matched = with(Verdict::Matched);
        let undecided = with(Verdict::Undecided);
        let matched_role = |role: Role| matched.iter().any(|&i| self.recognizers[i].role == role);
        let validated = matched_role(Role::Validator);
        let invalidated = matched_role(Role::Invalidator);
        let closest = if validated {
            None
        } else {
            self.recognizers
                .iter()
                .enumerate()
                .filter(|(_, r)| r.role == Role::Validator)
                .filter_map(|(i, _)| misses[i].take().map(|m| (i, m)))
                .max_by(|(_, a), (_, b)| a.closeness().total_cmp(&b.closeness()))
        };
        Classification {
            expected: validated && !invalidated,
            matched,
            undecided,
            closest,
        }
    }

    fn set_verdict(&self, i: usize, verdicts: &mut Vec<Option<Verdict>>, depth: usize) -> Verdict {
        if let Some(v) = &verdicts[i] {
            return v.clone();
        }
        let Shape::Set(e) = &self.recognizers[i].shape else {
            return Verdict::NoMatch;
        };
        // A set that refers to itself through others is cut at a depth no honest file reaches.
        if depth > self.recognizers.len() {
            return Verdict::Undecided;
        }
        let v = self.eval_set(e, verdicts, depth + 1);
        verdicts[i] = Some(v.clone());
        v
    }

    fn eval_set(&self, e: &SetExpr, verdicts: &mut Vec<Option<Verdict>>, depth: usize) -> Verdict {
        let b = |v: bool| {
            if v {
                Verdict::Matched
            } else {
                Verdict::NoMatch
            }
        };
        match e {
            SetExpr::Name(n) => {
                let i = self
                    .recognizers
                    .iter()
                    .position(|r| &r.name == n)
                    .unwrap_or(0);
                self.set_verdict(i, verdicts, depth)
            }
            SetExpr::Not(x) => match self.eval_set(x, verdicts, depth) {
                Verdict::Undecided => Verdict::Undecided,
                v => b(v == Verdict::NoMatch),
            },
            SetExpr::And(x, y) | SetExpr::Or(x, y) | SetExpr::Implies(x, y) => {
                let (a, c) = (
                    self.eval_set(x, verdicts, depth),
                    self.eval_set(y, verdicts, depth),
                );
                if a == Verdict::Undecided || c == Verdict::Undecided {
                    return Verdict::Undecided;
                }
                let (a, c) = (a == Verdict::Matched, c == Verdict::Matched);
                b(match e {
                    SetExpr::And(..) => a && c,
                    SetExpr::Or(..) => a || c,
                    _ => !a || c,
                })
            }
        }
    }

    fn path_limits(&self, r: &Compiled, path: &Path) -> Option<Mismatch> {
        let m = &path.metrics;
        for b in &r.limits {
            let value = path_metric(m, b.metric);
            if !b.holds(value) {
                return Some(Mismatch {
                    recognizer: r.name.clone(),
                    closeness: 0.9,
                    thread: None,
                    pattern: None,
                    event: None,
                    found: format!(
                        "the path's {:?} is {}",
                        b.metric,
                        value.map_or("?".into(), |v| format!("{v}"))
                    ),
                    span_id: None,
                    expected: b.text.clone(),
                });
            }
        }
        None
    }

    fn fragment(&self, r: &Compiled, program: &Program, path: &Path) -> (Verdict, Option<Miss>) {
        if let Some(m) = self.path_limits(r, path) {
            return (Verdict::NoMatch, Some(Miss::Described(Box::new(m))));
        }
        let mut undecided = false;
        for t in 0..path.threads.len() {
            let mut budget = self.budget;
            let cx = Context {
                path,
                thread: t,
                candidates: &Candidates::default(),
                fragment: true,
            };
            match run(program, &cx, &mut budget) {
                Outcome::Matched => return (Verdict::Matched, None),
                Outcome::Undecided => undecided = true,
                Outcome::NoMatch(_) => {}
            }
        }
        let v = if undecided {
            Verdict::Undecided
        } else {
            Verdict::NoMatch
        };
        (v, None)
    }

    /// Matches a recognizer of thread patterns against a path whose threads' first tasks
    /// are numbered `firsts`.
    fn full(
        &self,
        r: &Compiled,
        patterns: &[ThreadProgram],
        first: &FirstTasks,
        firsts: &[Option<u32>],
        path: &Path,
    ) -> (Verdict, Option<Miss>) {
        if let Some(m) = self.path_limits(r, path) {
            return (Verdict::NoMatch, Some(Miss::Described(Box::new(m))));
        }
        let threads = &path.threads;
        let low: u64 = patterns.iter().map(|p| p.low as u64).sum();
        let high: u64 = patterns.iter().map(|p| p.high as u64).sum();
        if (threads.len() as u64) < low || threads.len() as u64 > high {
            return (Verdict::NoMatch, Some(Miss::ThreadCount { low, high }));
        }
        let mut cand = Candidates::none(patterns.len(), threads.len());
        // The (pattern, thread) pairs to try, thread by thread; then ordered pattern by
        // pattern, each pattern's threads in order.
        let mut found: Vec<(usize, usize)> = Vec::new();
        for (t, thread) in threads.iter().enumerate() {
            for p in first.admitting(firsts[t]) {
                let pattern = &patterns[p];
                let takes = host_ok(&pattern.host, thread.host())
                    && pattern.limits.iter().all(|b| {
                        b.holds(match b.metric {
                            Metric::RealTime => Some(thread.real_ns() as f64),
                            Metric::CpuTime => thread.cpu_ns().map(|c| c as f64),
                            _ => None,
                        })
                    });
                if takes {
                    cand.set(p, t, true);
                    found.push((p, t));
                }
            }
        }
        let mut first_of = vec![0usize; patterns.len() + 1];
        for &(p, _) in &found {
            first_of[p + 1] += 1;
        }
        for p in 0..patterns.len() {
            first_of[p + 1] += first_of[p];
        }
        let mut pairs = vec![(0, 0); found.len()];
        for (p, t) in found {
            pairs[first_of[p]] = (p, t);
            first_of[p] += 1;
        }
        // Progress of each (pattern, thread) attempt: events matched, and where it stopped.
        // With the round it failed in: later rounds fail because of earlier ones.
        let mut stops: Vec<Failed> = Vec::new();
        let mut before = Candidates::default();
        let mut round = 0u32;
        let mut undecided = false;
        let mut budget = self.budget;
        // Narrow the candidates until every remaining (pattern, thread) pair matches given
        // the others: a message's peer must be a thread that can take the named pattern.
        loop {
            let mut changed = false;
            // Each round reads the candidates as the last round left them, so a failure
            // is attributed to the round of its cause.
            before.clone_from(&cand);
            for &(p, t) in &pairs {
                let program = &patterns[p].program;
                // Only a program whose messages name patterns can change its mind.
                if (round > 0 && !program.uses_patterns) || !before.get(p, t) {
                    continue;
                }
                let cx = Context {
                    path,
                    thread: t,
                    candidates: &before,
                    fragment: false,
                };
                match run(program, &cx, &mut budget) {
                    Outcome::Matched => {}
                    Outcome::NoMatch(stop) => {
                        stops.push(Failed {
                            pattern: p,
                            thread: t,
                            round,
                            stop,
                        });
                        cand.set(p, t, false);
                        changed = true;
                    }
                    Outcome::Undecided => {
                        undecided = true;
                        cand.set(p, t, false);
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
            round += 1;
        }
        let mut counts = vec![0u32; patterns.len()];
        let mut steps = 100_000u32;
        if assign(0, threads.len(), patterns, &cand, &mut counts, &mut steps) {
            return (Verdict::Matched, None);
        }
        if undecided || steps == 0 {
            return (Verdict::Undecided, None);
        }
        (
            Verdict::NoMatch,
            Some(explain(patterns, path, &cand, &stops)),
        )
    }
}

fn host_ok(m: &NameMatch, host: &str) -> bool {
    match m {
        NameMatch::Exact(s) => &**s == host,
        NameMatch::Regex(r) => r.is_match(host),
        NameMatch::Any | NameMatch::Reg(_) => true,
        NameMatch::Not(m) => !host_ok(m, host),
    }
}

/// Threads in order, each to a pattern that may take it, within every pattern's count.
fn assign(
    t: usize,
    n: usize,
    patterns: &[ThreadProgram],
    cand: &Candidates,
    counts: &mut [u32],
    steps: &mut u32,
) -> bool {
    if *steps == 0 {
        return false;
    }
    *steps -= 1;
    if t == n {
        return patterns
            .iter()
            .zip(counts.iter())
            .all(|(p, &c)| c >= p.low && c <= p.high);
    }
    // Too few threads left to fill the patterns' minimums.
    let short: u32 = patterns
        .iter()
        .zip(counts.iter())
        .map(|(p, &c)| p.low.saturating_sub(c))
        .sum();
    if short as usize > n - t {
        return false;
    }
    for p in 0..patterns.len() {
        if cand.get(p, t) && counts[p] < patterns[p].high {
            counts[p] += 1;
            if assign(t + 1, n, patterns, cand, counts, steps) {
                return true;
            }
            counts[p] -= 1;
        }
    }
    false
}
