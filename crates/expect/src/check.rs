//! Checks paths against an expectations file: which recognizers each path matches,
//! whether it is expected, and for an unexpected path the recognizer that came closest
//! and where it stopped. Aggregate assertions are evaluated over the checked paths.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use regex::Regex;
use serde::Serialize;

use crate::lang::ast::{self, Expr, Item, Role, SetExpr, Within};
use crate::matcher::{run, Candidates, Context, Outcome, Stop};
use crate::path::{Kind, Path, PathMetrics, Problem};
use crate::program::{
    compile, compile_threads, limits_of, Bound, CompileError, Metric, NameMatch, Params, Program,
    ThreadProgram,
};

/// Steps one path may take against one recognizer before it is called undecided.
pub const DEFAULT_BUDGET: u64 = 2_000_000;

enum Shape {
    /// Thread patterns, and which of them each first task name admits.
    Full(Vec<ThreadProgram>, FirstTasks),
    Fragment(Program),
    Set(SetExpr),
}

/// The thread patterns of a recognizer by the name their first task must have: a thread
/// is ruled out for most patterns by its first task, and looking the patterns up by it
/// spares checking every pattern against every thread.
#[derive(Default)]
struct FirstTasks {
    /// (name number in [`Checker::first_tasks`], pattern), sorted.
    named: Vec<(u32, usize)>,
    /// Patterns that may start with anything.
    unnamed: Vec<usize>,
}

impl FirstTasks {
    /// The patterns a thread whose first task is numbered `first` may take.
    fn admitting(&self, first: Option<u32>) -> impl Iterator<Item = usize> + '_ {
        let named = match first {
            Some(n) => {
                let a = self.named.partition_point(|e| e.0 < n);
                let z = self.named.partition_point(|e| e.0 <= n);
                &self.named[a..z]
            }
            None => &[],
        };
        named
            .iter()
            .map(|e| e.1)
            .chain(self.unnamed.iter().copied())
    }
}

struct Compiled {
    role: Role,
    name: String,
    limits: Vec<Bound>,
    shape: Shape,
}

/// A compiled expectations file, ready to check paths.
pub struct Checker {
    recognizers: Vec<Compiled>,
    asserts: Vec<(Option<ast::During>, Expr, u32)>,
    params: Params,
    budget: u64,
    /// Every name a thread pattern's first task must have, numbered: a thread is ruled
    /// out for most patterns by its first task, compared by number.
    first_tasks: foldhash::HashMap<Arc<str>, u32>,
    /// The task name regexes of the assertions' aggregates, compiled once.
    regexes: HashMap<String, Regex>,
}

/// How one recognizer fared on one path.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Verdict {
    /// It matches.
    Matched,
    /// It does not.
    NoMatch,
    /// The step budget ran out.
    Undecided,
}

/// Where a recognizer stopped matching a path.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Mismatch {
    /// The recognizer.
    pub recognizer: String,
    /// How close it came, 0 to 1 (share of the path's events it matched).
    pub closeness: f64,
    /// The thread it stopped in (host/service pid execution unit), when one.
    pub thread: Option<String>,
    /// The thread pattern it was matched against.
    pub pattern: Option<String>,
    /// Index of the first event it could not match, in that thread.
    pub event: Option<usize>,
    /// That event, described (or "the end of the thread").
    pub found: String,
    /// The span of that event, when one.
    pub span_id: Option<String>,
    /// What the recognizer expected there.
    pub expected: String,
}

/// One path's classification.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PathReport {
    /// The trace.
    pub trace_id: String,
    /// Matches at least one validator and no invalidator.
    pub expected: bool,
    /// Every recognizer (of any role) it matches.
    pub matched: Vec<String>,
    /// Recognizers the budget ran out on.
    pub undecided: Vec<String>,
    /// For an unexpected path: the invalidators it matched.
    pub invalidated_by: Vec<String>,
    /// For an unexpected path that matched no validator: the closest one and where it stopped.
    pub closest: Option<Mismatch>,
    /// What the reconciler found.
    pub problems: Vec<Problem>,
}

/// Which recognizers a path matched, before anything is formatted (see
/// [`Checker::classify`]).
#[derive(Debug, Clone)]
pub struct Classification {
    /// Matches at least one validator and no invalidator.
    pub expected: bool,
    /// Indexes of the recognizers (of any role) it matches.
    pub matched: Vec<usize>,
    /// Indexes of the recognizers the budget ran out on.
    pub undecided: Vec<usize>,
    /// For a path that matched no validator: the closest validator and its miss.
    closest: Option<(usize, Miss)>,
}

/// What aggregates read of a checked path.
#[derive(Debug, Clone)]
pub struct PathFacts {
    /// First event time.
    pub start: u64,
    /// Indexes of the recognizers it matched.
    pub matched: Vec<usize>,
    /// Its metrics.
    pub metrics: PathMetrics,
    /// Each task's name, REAL_TIME and CPU_TIME; gathered only when the file has
    /// assertions, the only readers.
    pub tasks: Vec<(Arc<str>, u64, Option<u64>)>,
    /// A hash of its structure, for `unique`; 0 when the file has no assertions.
    pub shape: u64,
}

impl Checker {
    /// Compiles a parsed file with parameters.
    pub fn new(file: &ast::File, params: Params) -> Result<Checker, CompileError> {
        let fragments: HashMap<String, &ast::Fragment> = file
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Fragment(f) => Some((f.name.clone(), f)),
                _ => None,
            })
            .collect();
        let mut recognizers = Vec::new();
        let mut asserts = Vec::new();
        let mut regexes = HashMap::new();
        for item in &file.items {
            let context = |role: Role, name: &str| format!("{role} {name}");
            match item {
                Item::Recognizer(r) => recognizers.push(Compiled {
                    role: r.role,
                    name: r.name.clone(),
                    limits: limits_of(&r.limits, &params).map_err(|message| CompileError {
                        context: context(r.role, &r.name),
                        message,
                    })?,
                    shape: Shape::Full(
                        compile_threads(r, &params, &fragments)?,
                        FirstTasks::default(),
                    ),
                }),
                Item::Fragment(f) => recognizers.push(Compiled {
                    role: f.role,
                    name: f.name.clone(),
                    limits: limits_of(&f.limits, &params).map_err(|message| CompileError {
                        context: context(f.role, &f.name),
                        message,
                    })?,
                    shape: Shape::Fragment(compile(
                        &f.body,
                        &params,
                        &fragments,
                        &[],
                        context(f.role, &f.name),
                    )?),
                }),
                Item::Set { role, name, expr } => recognizers.push(Compiled {
                    role: *role,
                    name: name.clone(),
                    limits: Vec::new(),
                    shape: Shape::Set(expr.clone()),
                }),
                Item::Assert { during, expr, line } => {
                    prepare_assertion(expr, &mut regexes).map_err(|message| CompileError {
                        context: format!("assert at line {line}"),
                        message,
                    })?;
                    asserts.push((during.clone(), expr.clone(), *line))
                }
            }
        }
        let mut names: foldhash::HashMap<&str, usize> = Default::default();
        for (i, r) in recognizers.iter().enumerate() {
            if names.insert(r.name.as_str(), i).is_some() {
                return Err(CompileError {
                    context: format!("{} {}", r.role, r.name),
                    message: "a second recognizer of this name".into(),
                });
            }
        }
        for r in &recognizers {
            if let Shape::Set(e) = &r.shape {
                check_set(e, &names, &r.name)?;
            }
        }
        check_set_depths(&recognizers, &names)?;
        let mut first_tasks: foldhash::HashMap<Arc<str>, u32> = Default::default();
        for r in &mut recognizers {
            if let Shape::Full(patterns, first) = &mut r.shape {
                for (p, pattern) in patterns.iter().enumerate() {
                    match &pattern.program.first_task {
                        Some(name) => {
                            let next = first_tasks.len() as u32;
                            let n = *first_tasks.entry(name.clone()).or_insert(next);
                            first.named.push((n, p));
                        }
                        None => first.unnamed.push(p),
                    }
                }
                first.named.sort_unstable();
            }
        }
        Ok(Checker {
            recognizers,
            asserts,
            params,
            budget: DEFAULT_BUDGET,
            first_tasks,
            regexes,
        })
    }

    /// Sets the step budget per path and recognizer.
    pub fn with_budget(mut self, budget: u64) -> Checker {
        self.budget = budget;
        self
    }

    /// Names of the recognizers, in file order.
    pub fn names(&self) -> Vec<&str> {
        self.recognizers.iter().map(|r| r.name.as_str()).collect()
    }

    /// Roles of the recognizers, in file order.
    pub fn roles(&self) -> Vec<Role> {
        self.recognizers.iter().map(|r| r.role).collect()
    }

    /// Checks a path: its report and what aggregates read of it.
    pub fn check(&self, path: &Path) -> (PathReport, PathFacts) {
        let classified = self.classify(path);
        let facts = self.facts(path, classified.matched.clone());
        (self.report(path, classified), facts)
    }

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

    /// The report of a classified path.
    pub fn report(&self, path: &Path, classified: Classification) -> PathReport {
        let name = |i: &usize| self.recognizers[*i].name.clone();
        PathReport {
            trace_id: path.trace_id.to_string(),
            expected: classified.expected,
            matched: classified.matched.iter().map(name).collect(),
            undecided: classified.undecided.iter().map(name).collect(),
            invalidated_by: classified
                .matched
                .iter()
                .filter(|&&i| self.recognizers[i].role == Role::Invalidator)
                .map(name)
                .collect(),
            closest: classified
                .closest
                .map(|(i, m)| self.describe_miss(&self.recognizers[i], path, m)),
            problems: path.problems.clone(),
        }
    }

    /// What aggregates read of a path that matched the recognizers `matched`.
    pub fn facts(&self, path: &Path, matched: Vec<usize>) -> PathFacts {
        facts(path, matched, !self.asserts.is_empty())
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
            let value = match b.metric {
                Metric::RealTime => Some(m.real_ns as f64),
                Metric::CpuTime => m.cpu_ns.map(|c| c as f64),
                Metric::Depth => Some(m.depth as f64),
                Metric::Messages => Some(m.messages as f64),
                Metric::Threads => Some(m.threads as f64),
                Metric::Hosts => Some(m.hosts as f64),
                _ => None,
            };
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

    /// Describes a miss for the report.
    fn describe_miss(&self, r: &Compiled, path: &Path, miss: Miss) -> Mismatch {
        if let Miss::Described(m) = miss {
            return *m;
        }
        let mut m = Mismatch {
            recognizer: r.name.clone(),
            closeness: miss.closeness(),
            thread: None,
            pattern: None,
            event: None,
            found: format!("{} threads", path.threads.len()),
            span_id: None,
            expected: String::new(),
        };
        let patterns: &[ThreadProgram] = match &r.shape {
            Shape::Full(patterns, _) => patterns,
            _ => &[],
        };
        match miss {
            Miss::Described(_) => {}
            Miss::ThreadCount { low, high } => {
                m.expected = format!("{low} to {high} threads (the thread patterns' counts)");
            }
            Miss::NoPattern { thread, .. } => {
                m.thread = Some(thread_name(path, thread));
                m.found = format!("a thread on {}", path.threads[thread].host());
                m.expected = format!(
                    "a thread pattern whose host matches ({})",
                    patterns
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            Miss::Stopped {
                thread,
                pattern,
                stop,
                ..
            } => {
                let (found, span) = match path.threads[thread].events.get(stop.event) {
                    Some(e) => (
                        describe_event(path, thread, stop.event),
                        Some(e.span.to_string()),
                    ),
                    None => ("the end of the thread".to_string(), None),
                };
                m.thread = Some(thread_name(path, thread));
                m.pattern = Some(patterns[pattern].name.clone());
                m.event = Some(stop.event);
                m.found = found;
                m.span_id = span;
                m.expected = crate::matcher::describe(&patterns[pattern].program.ops[stop.op]);
            }
            Miss::Counts { short, .. } => {
                m.expected = match short {
                    Some((p, n)) => {
                        let prog = &patterns[p];
                        format!(
                            "thread pattern {} needs {} to {} threads; {n} can match it",
                            prog.name, prog.low, prog.high
                        )
                    }
                    None => "each thread assigned to one thread pattern within its count".into(),
                };
            }
        }
        m
    }

    /// Evaluates the aggregate assertions over the facts of the checked paths; returns
    /// the ones that fail.
    pub fn assertions(&self, paths: &[PathFacts]) -> Vec<FailedAssertion> {
        let mut failed = Vec::new();
        let first = paths.iter().map(|p| p.start).min().unwrap_or(0);
        for (during, expr, line) in &self.asserts {
            let windows: Vec<(u64, u64)> = match during {
                None => vec![(0, u64::MAX)],
                Some(ast::During::Between(a, b)) => {
                    let q = |q| {
                        crate::program::quantity(q, Metric::RealTime, "during", &self.params)
                            .unwrap_or(0.0) as u64
                    };
                    vec![(first + q(a), first + q(b))]
                }
                Some(ast::During::Any(n)) => {
                    let len = crate::program::quantity(n, Metric::RealTime, "during", &self.params)
                        .unwrap_or(0.0) as u64;
                    let mut starts: Vec<u64> = paths.iter().map(|p| p.start).collect();
                    starts.sort_unstable();
                    starts.dedup();
                    starts
                        .into_iter()
                        .map(|s| (s, s.saturating_add(len)))
                        .collect()
                }
            };
            for (lo, hi) in windows {
                let inside: Vec<&PathFacts> = paths
                    .iter()
                    .filter(|p| p.start >= lo && p.start < hi)
                    .collect();
                let value = self.eval(expr, &inside);
                if value.is_none_or(|v| v == 0.0) {
                    failed.push(FailedAssertion {
                        line: *line,
                        text: format!("assert({expr})"),
                        window: during.as_ref().map(|_| (lo, hi)),
                        why: match value {
                            None => {
                                "it cannot be evaluated (an empty set, or an unknown name)".into()
                            }
                            Some(_) => "it is false".into(),
                        },
                    });
                    break;
                }
            }
        }
        failed
    }

    fn eval(&self, e: &Expr, paths: &[&PathFacts]) -> Option<f64> {
        let truth = |b: bool| Some(if b { 1.0 } else { 0.0 });
        match e {
            Expr::Num(q) => {
                crate::program::quantity(q, Metric::Unrecorded, "assert", &self.params).ok()
            }
            Expr::Name(_) | Expr::Text(_) => None,
            Expr::Neg(x) => self.eval(x, paths).map(|v| -v),
            Expr::Not(x) => self
                .eval(x, paths)
                .map(|v| if v == 0.0 { 1.0 } else { 0.0 }),
            // Pip's ranges: `{a, b}` holds from a to b.
            Expr::In(x, within) => {
                let v = self.eval(x, paths)?;
                match &**within {
                    Within::Between(a, b) => {
                        truth(self.eval(a, paths)? <= v && v <= self.eval(b, paths)?)
                    }
                    Within::AtLeast(a) => truth(v >= self.eval(a, paths)?),
                    Within::Exactly(a) => truth(v == self.eval(a, paths)?),
                }
            }
            Expr::Bin(op, a, b) => {
                crate::program::binary(op, self.eval(a, paths)?, self.eval(b, paths)?)
            }
            Expr::Call(f, args) => self.call(f, args, paths),
        }
    }

    /// Whether a task name matches an aggregate's task name pattern.
    fn task_ok(&self, pattern: &ast::Text, name: &str) -> bool {
        match pattern {
            ast::Text::Exact(s) | ast::Text::Name(s) => s == name,
            ast::Text::Regex(r, _) => self.regexes.get(r).is_some_and(|r| r.is_match(name)),
            ast::Text::Any => true,
            ast::Text::Not(t) => !self.task_ok(t, name),
            ast::Text::Var(_) => false,
        }
    }

    fn call(&self, f: &str, args: &[Expr], paths: &[&PathFacts]) -> Option<f64> {
        let recognizer = |e: &Expr| match e {
            Expr::Name(n) => self.recognizers.iter().position(|r| &r.name == n),
            _ => None,
        };
        let one = |i: usize| args.get(i).and_then(|a| self.eval(a, paths));
        match f {
            "instances" => {
                let r = recognizer(args.first()?)?;
                Some(paths.iter().filter(|p| p.matched.contains(&r)).count() as f64)
            }
            "unique" => {
                let r = recognizer(args.first()?)?;
                let mut shapes: Vec<u64> = paths
                    .iter()
                    .filter(|p| p.matched.contains(&r))
                    .map(|p| p.shape)
                    .collect();
                shapes.sort_unstable();
                shapes.dedup();
                Some(shapes.len() as f64)
            }
            "average" | "stddev" | "min" | "max" => {
                let Expr::Name(metric) = args.first()? else {
                    return None;
                };
                let metric = Metric::of(metric);
                let values: Vec<f64> = match args.get(1)? {
                    Expr::Text(pattern) => paths
                        .iter()
                        .flat_map(|p| p.tasks.iter())
                        .filter(|(n, ..)| self.task_ok(pattern, n))
                        .filter_map(|(_, real, cpu)| match metric {
                            Metric::RealTime => Some(*real as f64),
                            Metric::CpuTime => cpu.map(|c| c as f64),
                            _ => None,
                        })
                        .collect(),
                    e => {
                        let r = recognizer(e)?;
                        paths
                            .iter()
                            .filter(|p| p.matched.contains(&r))
                            .filter_map(|p| path_metric(&p.metrics, metric))
                            .collect()
                    }
                };
                if values.is_empty() {
                    return None;
                }
                let n = values.len() as f64;
                let mean = values.iter().sum::<f64>() / n;
                Some(match f {
                    "average" => mean,
                    "stddev" => (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt(),
                    "min" => values.iter().copied().fold(f64::INFINITY, f64::min),
                    _ => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                })
            }
            _ => crate::program::function(f, one(0)?),
        }
    }
}

/// An aggregate assertion that does not hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FailedAssertion {
    /// Its line in the file.
    pub line: u32,
    /// The assertion, normalized.
    pub text: String,
    /// The window it failed in (Unix ns), for `during`.
    pub window: Option<(u64, u64)>,
    /// Why.
    pub why: String,
}

/// A path-wide metric (REAL_TIME, CPU_TIME, DEPTH, MESSAGES, THREADS, HOSTS), when
/// recorded.
pub fn path_metric(m: &PathMetrics, metric: Metric) -> Option<f64> {
    match metric {
        Metric::RealTime => Some(m.real_ns as f64),
        Metric::CpuTime => m.cpu_ns.map(|c| c as f64),
        Metric::Depth => Some(m.depth as f64),
        Metric::Messages => Some(m.messages as f64),
        Metric::Threads => Some(m.threads as f64),
        Metric::Hosts => Some(m.hosts as f64),
        _ => None,
    }
}

/// Compiles the regexes of an assertion (its aggregates' task name patterns) into `out`,
/// and refuses what Pip's grammar allows there but no path set can answer.
fn prepare_assertion(e: &Expr, out: &mut HashMap<String, Regex>) -> Result<(), String> {
    match e {
        Expr::Text(t) => {
            let mut t = t;
            while let ast::Text::Not(inner) = t {
                t = inner;
            }
            if let ast::Text::Regex(r, at) = t {
                if !out.contains_key(r) {
                    out.insert(r.clone(), crate::program::regex(r, *at)?);
                }
            }
            Ok(())
        }
        Expr::Num(_) | Expr::Name(_) => Ok(()),
        Expr::Neg(x) | Expr::Not(x) => prepare_assertion(x, out),
        Expr::Bin(_, a, b) => {
            prepare_assertion(a, out)?;
            prepare_assertion(b, out)
        }
        // Pip's `unique($v)`: a variable is bound while one path is matched, and means
        // nothing over all of them.
        Expr::Call(f, args)
            if (f == "unique" || f == "instances")
                && matches!(args.first(), Some(Expr::Num(ast::Quantity::Var(_)))) =>
        {
            Err(format!(
                "{e}: a variable is bound while one path is matched; {f} counts paths of a recognizer, named, across the whole check"
            ))
        }
        Expr::Call(_, args) => args.iter().try_for_each(|a| prepare_assertion(a, out)),
        Expr::In(x, w) => {
            prepare_assertion(x, out)?;
            match &**w {
                Within::Between(a, b) => {
                    prepare_assertion(a, out)?;
                    prepare_assertion(b, out)
                }
                Within::AtLeast(a) | Within::Exactly(a) => prepare_assertion(a, out),
            }
        }
    }
}

fn check_set(
    e: &SetExpr,
    names: &foldhash::HashMap<&str, usize>,
    owner: &str,
) -> Result<(), CompileError> {
    match e {
        SetExpr::Name(n) if names.contains_key(n.as_str()) => Ok(()),
        SetExpr::Name(n) => Err(CompileError {
            context: format!("recognizer set {owner}"),
            message: format!("no recognizer named {n}"),
        }),
        SetExpr::Not(x) => check_set(x, names, owner),
        SetExpr::And(a, b) | SetExpr::Or(a, b) | SetExpr::Implies(a, b) => {
            check_set(a, names, owner)?;
            check_set(b, names, owner)
        }
    }
}

/// The recognizers a set names, and how deep its expression nests.
fn set_refs(e: &SetExpr, names: &foldhash::HashMap<&str, usize>, out: &mut Vec<usize>) -> usize {
    match e {
        SetExpr::Name(n) => {
            out.extend(names.get(n.as_str()).copied());
            1
        }
        SetExpr::Not(x) => 1 + set_refs(x, names, out),
        SetExpr::And(a, b) | SetExpr::Or(a, b) | SetExpr::Implies(a, b) => {
            1 + set_refs(a, names, out).max(set_refs(b, names, out))
        }
    }
}

/// Refuses sets that name themselves through others, and chains of sets whose expressions
/// nest past [`MAX_NESTING`](crate::lang::MAX_NESTING) in all: evaluating a set recurses
/// through the sets it names. The walk keeps its own stack, so a long chain cannot overflow
/// this one.
fn check_set_depths(
    recognizers: &[Compiled],
    names: &foldhash::HashMap<&str, usize>,
) -> Result<(), CompileError> {
    const UNSEEN: usize = usize::MAX;
    const OPEN: usize = usize::MAX - 1;
    // Per recognizer: UNSEEN, OPEN while its references are walked, then its total depth.
    let mut depth = vec![UNSEEN; recognizers.len()];
    let refs_of = |i: usize| -> (usize, Vec<usize>) {
        let mut refs = Vec::new();
        let own = match &recognizers[i].shape {
            Shape::Set(e) => set_refs(e, names, &mut refs),
            _ => 0,
        };
        (own, refs)
    };
    for start in 0..recognizers.len() {
        if depth[start] != UNSEEN {
            continue;
        }
        let (own, refs) = refs_of(start);
        let mut stack = vec![(start, own, refs, 0)];
        depth[start] = OPEN;
        while let Some((i, own, refs, next)) = stack.last_mut() {
            if let Some(&j) = refs.get(*next) {
                *next += 1;
                if depth[j] == OPEN {
                    let r = &recognizers[j];
                    return Err(CompileError {
                        context: format!("recognizer set {}", r.name),
                        message: format!("{} names itself through the sets it names", r.name),
                    });
                }
                if depth[j] == UNSEEN {
                    let (own, refs) = refs_of(j);
                    depth[j] = OPEN;
                    stack.push((j, own, refs, 0));
                }
                continue;
            }
            let total = *own + refs.iter().map(|&j| depth[j]).max().unwrap_or(0);
            if total > crate::lang::MAX_NESTING {
                let r = &recognizers[*i];
                return Err(CompileError {
                    context: format!("recognizer set {}", r.name),
                    message: format!(
                        "sets naming sets nest more than {} deep",
                        crate::lang::MAX_NESTING
                    ),
                });
            }
            depth[*i] = total;
            stack.pop();
        }
    }
    Ok(())
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

/// Where a recognizer failed a path, kept cheap: only the closest validator's miss is
/// described (formatted) for the report.
#[derive(Debug, Clone)]
enum Miss {
    /// Already described (a path limit); boxed, as it is rare and large.
    Described(Box<Mismatch>),
    /// The path's thread count is outside the patterns' total range.
    ThreadCount { low: u64, high: u64 },
    /// No thread pattern's host matches this thread.
    NoPattern { thread: usize, closeness: f64 },
    /// The pattern that went furthest in this thread stopped here.
    Stopped {
        thread: usize,
        pattern: usize,
        stop: Stop,
        closeness: f64,
    },
    /// Every thread can take some pattern; the counts cannot be met (this pattern has
    /// this few candidates, when one is short).
    Counts {
        short: Option<(usize, u32)>,
        closeness: f64,
    },
}

impl Miss {
    fn closeness(&self) -> f64 {
        match self {
            Miss::Described(m) => m.closeness,
            Miss::ThreadCount { .. } => 0.0,
            Miss::NoPattern { closeness, .. }
            | Miss::Stopped { closeness, .. }
            | Miss::Counts { closeness, .. } => *closeness,
        }
    }
}

/// A (pattern, thread) attempt that failed: in which round of narrowing, and where.
struct Failed {
    pattern: usize,
    thread: usize,
    round: u32,
    stop: Stop,
}

/// The closest miss: the thread that went least far, and where.
fn explain(patterns: &[ThreadProgram], path: &Path, cand: &Candidates, stops: &[Failed]) -> Miss {
    let total: usize = path
        .threads
        .iter()
        .map(|t| t.events.len())
        .sum::<usize>()
        .max(1);
    let mut matched_events = 0usize;
    // The thread whose failure came first (the others may only have lost their peer),
    // then the one that got least far.
    let mut worst: Option<(usize, usize, u32, &Stop)> = None;
    // Per thread, the pattern that got furthest in it (the later pattern on a tie).
    let mut furthest: Vec<Option<(usize, u32, &Stop)>> = vec![None; path.threads.len()];
    for f in stops {
        if let Some(best) = furthest.get_mut(f.thread) {
            if best.is_none_or(|(bp, _, bs)| (f.stop.event, f.pattern) > (bs.event, bp)) {
                *best = Some((f.pattern, f.round, &f.stop));
            }
        }
    }
    for (t, thread) in path.threads.iter().enumerate() {
        if cand.any_for(t) {
            matched_events += thread.events.len();
            continue;
        }
        if let Some((p, r, s)) = furthest[t] {
            matched_events += s.event;
            if worst.is_none_or(|(_, _, wr, w)| (r, s.event) < (wr, w.event)) {
                worst = Some((t, p, r, s));
            }
        } else if worst.is_none() {
            return Miss::NoPattern {
                thread: t,
                closeness: matched_events as f64 / total as f64,
            };
        }
    }
    let closeness = matched_events as f64 / total as f64;
    match worst {
        Some((thread, pattern, _, stop)) => Miss::Stopped {
            thread,
            pattern,
            stop: *stop,
            closeness,
        },
        None => Miss::Counts {
            short: (0..patterns.len())
                .map(|p| (p, cand.count(p) as u32))
                .find(|&(p, n)| n < patterns[p].low),
            closeness,
        },
    }
}

fn thread_name(path: &Path, t: usize) -> String {
    let k = &path.threads[t].key;
    format!(
        "{} ({}, pid {}, unit {})",
        k.service,
        path.threads[t].host(),
        k.pid,
        k.execution_unit
    )
}

fn describe_event(path: &Path, t: usize, i: usize) -> String {
    let thread = &path.threads[t];
    let e = &thread.events[i];
    let at = e.time.saturating_sub(path.start) as f64 / 1e6;
    let what = match e.kind {
        Kind::TaskStart => format!("task({:?}) starting", &*e.name),
        Kind::TaskEnd => format!("the end of task({:?})", &*e.name),
        Kind::Notice => format!("notice({:?})", &*e.name),
        Kind::Send | Kind::Recv => {
            let peer = e.peer.map_or("an unknown peer".to_string(), |p| {
                path.threads[p].host().to_string()
            });
            let way = if e.kind == Kind::Send {
                "send to"
            } else {
                "recv from"
            };
            format!("{way} {peer}")
        }
    };
    format!("{what} at +{at:.3} ms")
}

fn facts(path: &Path, matched: Vec<usize>, for_assertions: bool) -> PathFacts {
    let mut tasks = Vec::new();
    let mut shape = 0;
    if for_assertions {
        let mut shapes: Vec<u64> = Vec::new();
        for t in &path.threads {
            let mut th = std::collections::hash_map::DefaultHasher::new();
            for e in &t.events {
                (e.kind as u8).hash(&mut th);
                e.name.hash(&mut th);
                if e.kind == Kind::TaskStart {
                    tasks.push((e.name.clone(), e.real_ns, e.cpu_ns));
                }
            }
            shapes.push(th.finish());
        }
        shapes.sort_unstable();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        shapes.hash(&mut h);
        shape = h.finish();
    }
    PathFacts {
        start: path.start,
        matched,
        metrics: path.metrics.clone(),
        tasks,
        shape,
    }
}
