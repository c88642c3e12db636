//! Checks paths against an expectations file: which recognizers each path matches,
//! whether it is expected, and for an unexpected path the recognizer that came closest
//! and where it stopped. Aggregate assertions are evaluated over the checked paths.
//!
//! A path is expected when it matches a validator and no invalidator; for the others the
//! closest validator and where it stopped are reported. Aggregate assertions run over
//! per-path facts, held in memory for every path of the window when the file has
//! assertions.
//!
//! This module compiles the file into a [`Checker`] and reports on a path;
//! `classify` decides which recognizers a path matches, `explain` describes where the
//! closest one stopped, `assertions` evaluates the aggregates over many paths.

mod assertions;
mod classify;
mod explain;

pub use assertions::{path_metric, FailedAssertion};
use explain::Miss;

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
        assertions::facts(path, matched, !self.asserts.is_empty())
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
