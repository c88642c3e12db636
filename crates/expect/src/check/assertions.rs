//! Aggregate assertions over the checked paths: what each path contributes
//! ([`PathFacts`]), and the assertions evaluated over them.

use super::*;

impl Checker {
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

/// What aggregates read of a path; its tasks and shape only when there are assertions.
pub(super) fn facts(path: &Path, matched: Vec<usize>, for_assertions: bool) -> PathFacts {
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
