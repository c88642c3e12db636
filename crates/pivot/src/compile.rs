//! Queries to advice: the paper's recipe (section 3). Each variable of a query becomes
//! advice at its tracepoint: OBSERVE the exports the query uses, UNPACK the bags of the
//! variables joined before it, the Let and Where clauses whose inputs are all there
//! (pushed as close to the source as they can go), then PACK what later advice needs
//! into the request's bag, or, at the From variable, EMIT the query's output.
//!
//! Joins form a tree rooted at the From variable: `Join y ... On y -> z` hangs `y` under
//! `z`. A bag packed without a temporal filter holds each distinct projected tuple once,
//! with a count (projection and COUNT pushed to the source): COUNT, SUM and AVERAGE
//! weigh by it, MIN and MAX ignore it.
//!
//! A query is checked against the tracepoint definitions first: its variables, its joins
//! (`y -> z` to the From variable or an earlier join), the exports it reads, and that
//! GroupBy and Select agree. Advice is built children before parents. A Where clause stays
//! above a First or MostRecent bag, which it would otherwise change the first tuple of; a
//! Let that nothing reads is dropped. [`explain`] prints the advice in the paper's
//! notation.

use std::collections::HashMap;
use std::fmt::Write;

use causeway_model::source::{Pos, SyntaxError};

pub use crate::catalog::{Catalog, MAX_JOINS};
use crate::lang::ast::*;
use crate::lang::{print_expr, print_select_item};
use crate::splice::{splice, Spliced};

/// Exports every tracepoint has.
pub const DEFAULT_EXPORTS: &[&str] = &[
    "host",
    "service",
    "procName",
    "pid",
    "thread",
    "timestamp",
    "tracepoint",
];

/// The export a tracepoint has when all its probes are `span.close`.
pub const DURATION_EXPORT: &str = "duration";

/// Whether `tracepoint` exports `field`.
fn exports(tracepoint: &TracepointDef, field: &str) -> bool {
    DEFAULT_EXPORTS.contains(&field)
        || tracepoint.exports.iter().any(|e| e.name.text == field)
        || field == DURATION_EXPORT && has_duration(tracepoint)
}

/// A span's duration is known when every probe fires at the span's close.
fn has_duration(tracepoint: &TracepointDef) -> bool {
    tracepoint
        .probes
        .iter()
        .all(|p| p.kind == ProbeKind::SpanClose)
}

/// A compiled query: advice per tracepoint, in the order a request meets them.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The advice; the last is the From variable's, which emits.
    pub advice: Vec<Advice>,
    /// The output's column headings, as the Select items print.
    pub columns: Vec<String>,
    /// The named queries it uses as sources, each after those it uses.
    pub named: Vec<String>,
}

/// What runs at one tracepoint for one query.
#[derive(Debug, Clone, PartialEq)]
pub struct Advice {
    /// The query variable it stands for.
    pub var: String,
    /// Where it runs.
    pub tracepoint: String,
    /// Exports read into slots named `var.export`.
    pub observe: Vec<String>,
    /// Bags read, each joined to the observed tuple by cross product.
    pub unpack: Vec<Unpack>,
    /// Let and Where clauses, in the query's order.
    pub steps: Vec<Step>,
    /// PACK or EMIT.
    pub end: End,
}

/// Reads a bag packed earlier in the request.
#[derive(Debug, Clone, PartialEq)]
pub struct Unpack {
    /// The bag, by the variable that packed it.
    pub bag: String,
    /// The slots its tuples hold.
    pub slots: Vec<String>,
}

/// A Let or Where clause placed in advice.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// A computed slot.
    Let(String, Expr),
    /// Drops the tuples for which the expression is not true.
    Filter(Expr),
}

/// How advice ends.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// Into the request's bag, for advice later in the request.
    Pack {
        /// The bag, named by the variable.
        bag: String,
        /// Which tuples it keeps.
        mode: Temporal,
        /// The slots packed.
        slots: Vec<String>,
    },
    /// Out to the process's aggregation of the query's results.
    Emit {
        /// Group keys (empty: one group, or raw tuples when there are no aggregates).
        keys: Vec<Expr>,
        /// The aggregates.
        aggs: Vec<(AggFn, Option<Expr>)>,
        /// Without GroupBy or aggregates: the selected values, one row per tuple.
        values: Vec<Expr>,
    },
}

fn err(pos: Pos, found: &str, expected: &str) -> SyntaxError {
    SyntaxError::new(pos, found, expected)
}

/// Checks `query` against `catalog` and compiles it to advice.
pub fn compile(query: &Query, catalog: &Catalog) -> Result<Plan, SyntaxError> {
    // Variables: the From variable is the root; each joined one hangs under its `after`,
    // a named query's variables under the variable that sources it.
    let Spliced {
        vars,
        clauses,
        named,
    } = splice(query, catalog)?;
    let parent: Vec<Option<usize>> = vars.iter().map(|v| v.2).collect();
    // Whether b is in a's subtree.
    let in_subtree = |a: usize, mut b: usize| loop {
        if a == b {
            return true;
        }
        match parent[b] {
            Some(p) => b = p,
            None => return false,
        }
    };

    // Every reference resolves to the variable whose advice first has it: an export of a
    // variable, or a Let name (then the variable the Let is placed at).
    let mut lets: HashMap<String, usize> = HashMap::new();
    let mut observe: Vec<Vec<String>> = vec![Vec::new(); vars.len()];
    let resolve = |e: &Expr,
                   lets: &HashMap<String, usize>,
                   observe: &mut Vec<Vec<String>>|
     -> Result<Vec<usize>, SyntaxError> {
        let mut at = Vec::new();
        let mut stack = vec![e];
        while let Some(e) = stack.pop() {
            match e {
                Expr::Lit(..) => {}
                Expr::Ref(n) => {
                    if let Some(&v) = lets.get(&n.text) {
                        at.push(v);
                        continue;
                    }
                    let (var, field) = n.text.split_once('.').unwrap_or((&n.text, ""));
                    let Some(v) = vars.iter().position(|x| x.0 == var) else {
                        return Err(err(
                            n.pos,
                            &format!("`{}`", n.text),
                            "a variable's export (`x.host`) or a name given by Let",
                        ));
                    };
                    if !exports(vars[v].1, field) {
                        return Err(err(
                            n.pos,
                            &format!("`{}`", n.text),
                            &format!(
                                "an export of {}: {}",
                                vars[v].1.name.text,
                                export_list(vars[v].1)
                            ),
                        ));
                    }
                    if !observe[v].contains(&n.text) {
                        observe[v].push(n.text.clone());
                    }
                    at.push(v);
                }
                Expr::Not(a, _) | Expr::Neg(a, _) => stack.push(a),
                Expr::Bin(_, a, b, _) => {
                    stack.push(a);
                    stack.push(b);
                }
                Expr::In(a, items, _) => {
                    stack.push(a);
                    stack.extend(items.iter());
                }
            }
        }
        Ok(at)
    };
    // The lowest variable whose subtree holds all of `at` (the root when `at` is empty
    // and nothing narrower is known).
    let place = |at: &[usize]| -> usize {
        let mut best = 0;
        for cand in 0..parent.len() {
            if at.iter().all(|&a| in_subtree(cand, a)) && in_subtree(best, cand) {
                best = cand;
            }
        }
        best
    };

    let mut steps: Vec<Vec<Step>> = vec![Vec::new(); vars.len()];
    let mut step_uses: Vec<(usize, Vec<String>, Option<String>)> = Vec::new();
    for (c, floor) in &clauses {
        match c {
            Clause::Where(e) => {
                let at = resolve(e, &lets, &mut observe)?;
                let mut v = if at.is_empty() { *floor } else { place(&at) };
                // A filter below First or MostRecent would change which tuple is first:
                // it runs after the selection, in the advice that unpacks it (a named
                // query's own filter stays below the selection of its tuples).
                while let (true, Some(p), Temporal::First(_) | Temporal::MostRecent(_)) =
                    (v != *floor, parent[v], vars[v].3)
                {
                    v = p;
                }
                step_uses.push((v, refs(e), None));
                steps[v].push(Step::Filter(e.clone()));
            }
            Clause::Let(n, e) => {
                if lets.contains_key(&n.text) || vars.iter().any(|v| v.0 == n.text) {
                    return Err(err(
                        n.pos,
                        &format!("`{}` again", n.text),
                        "a name not used before in this query",
                    ));
                }
                let at = resolve(e, &lets, &mut observe)?;
                let v = if at.is_empty() { *floor } else { place(&at) };
                step_uses.push((v, refs(e), Some(n.text.clone())));
                steps[v].push(Step::Let(n.text.clone(), e.clone()));
                lets.insert(n.text.clone(), v);
            }
        }
    }

    // The output, at the From variable.
    let printed_keys: Vec<String> = query.group_by.iter().map(print_expr).collect();
    let mut aggs = Vec::new();
    let mut values = Vec::new();
    let mut output_refs = Vec::new();
    for k in &query.group_by {
        resolve(k, &lets, &mut observe)?;
        output_refs.extend(refs(k));
    }
    for item in &query.select {
        match item {
            SelectItem::Expr(e) => {
                resolve(e, &lets, &mut observe)?;
                output_refs.extend(refs(e));
                if !query.group_by.is_empty() && !printed_keys.contains(&print_expr(e)) {
                    return Err(err(
                        e.pos(),
                        &format!("`{}`, not a GroupBy key", print_expr(e)),
                        "a GroupBy key or an aggregate",
                    ));
                }
                values.push(e.clone());
            }
            SelectItem::Agg { func, arg, .. } => {
                if let Some(a) = arg {
                    resolve(a, &lets, &mut observe)?;
                    output_refs.extend(refs(a));
                }
                aggs.push((*func, arg.clone()));
            }
        }
    }
    if query.group_by.is_empty() && !aggs.is_empty() && !values.is_empty() {
        let pos = match &query.select[0] {
            SelectItem::Expr(e) => e.pos(),
            SelectItem::Agg { pos, .. } => *pos,
        };
        return Err(err(
            pos,
            "plain values beside aggregates without GroupBy",
            "`GroupBy` naming the plain values, or only aggregates",
        ));
    }

    // What each bag must carry: the slots of its subtree that advice above it reads.
    let slot_var = |slot: &str| -> usize {
        lets.get(slot).copied().unwrap_or_else(|| {
            let var = slot.split_once('.').map_or(slot, |(v, _)| v);
            vars.iter().position(|x| x.0 == var).unwrap_or(0)
        })
    };
    let mut needed: Vec<Vec<String>> = vec![Vec::new(); vars.len()];
    let need = |slot: &str, at: usize, needed: &mut Vec<Vec<String>>| {
        // Every variable on the way from the slot's variable up to (not including) `at`
        // packs it.
        let mut v = slot_var(slot);
        while v != at {
            if !needed[v].iter().any(|s| s == slot) {
                needed[v].push(slot.to_string());
            }
            match parent[v] {
                Some(p) => v = p,
                None => break,
            }
        }
    };
    // A Let nothing reads is dropped (a joined named query's columns the query does
    // not use, among them): no slot computed or packed for it.
    let mut live: Vec<String> = output_refs.clone();
    loop {
        let before = live.len();
        for (_, uses, name) in &step_uses {
            if name.as_ref().is_none_or(|n| live.contains(n)) {
                for u in uses {
                    if !live.contains(u) {
                        live.push(u.clone());
                    }
                }
            }
        }
        if live.len() == before {
            break;
        }
    }
    step_uses.retain(|(_, _, name)| name.as_ref().is_none_or(|n| live.contains(n)));
    for s in &mut steps {
        s.retain(|step| match step {
            Step::Let(n, _) => live.contains(n),
            Step::Filter(_) => true,
        });
    }
    for (at, uses, _) in &step_uses {
        for slot in uses {
            need(slot, *at, &mut needed);
        }
    }
    for slot in &output_refs {
        need(slot, 0, &mut needed);
    }

    // Advice, children before parents (the order a request meets them).
    let mut order: Vec<usize> = Vec::new();
    fn post_order(v: usize, parent: &[Option<usize>], out: &mut Vec<usize>) {
        for c in (0..parent.len()).filter(|&c| parent[c] == Some(v)) {
            post_order(c, parent, out);
        }
        out.push(v);
    }
    post_order(0, &parent, &mut order);
    let advice = order
        .into_iter()
        .map(|v| {
            let unpack = (0..vars.len())
                .filter(|&c| parent[c] == Some(v))
                .map(|c| Unpack {
                    bag: vars[c].0.clone(),
                    slots: needed[c].clone(),
                })
                .collect();
            let end = if v == 0 {
                End::Emit {
                    keys: query.group_by.clone(),
                    aggs: aggs.clone(),
                    values: if aggs.is_empty() && query.group_by.is_empty() {
                        values.clone()
                    } else {
                        Vec::new()
                    },
                }
            } else {
                End::Pack {
                    bag: vars[v].0.clone(),
                    mode: vars[v].3,
                    slots: needed[v].clone(),
                }
            };
            Advice {
                var: vars[v].0.clone(),
                tracepoint: vars[v].1.name.text.clone(),
                observe: observe[v].clone(),
                unpack,
                steps: steps[v].clone(),
                end,
            }
        })
        .collect();
    Ok(Plan {
        advice,
        columns: query.select.iter().map(print_select_item).collect(),
        named,
    })
}

/// The names an expression reads, in order.
fn refs(e: &Expr) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::Lit(..) => {}
            Expr::Ref(n) => {
                if !out.contains(&n.text) {
                    out.push(n.text.clone());
                }
            }
            Expr::Not(a, _) | Expr::Neg(a, _) => stack.push(a),
            Expr::Bin(_, a, b, _) => {
                stack.push(b);
                stack.push(a);
            }
            Expr::In(a, items, _) => {
                stack.extend(items.iter().rev());
                stack.push(a);
            }
        }
    }
    out
}

fn export_list(t: &TracepointDef) -> String {
    let mut names: Vec<&str> = t.exports.iter().map(|e| e.name.text.as_str()).collect();
    names.extend(DEFAULT_EXPORTS);
    if has_duration(t) {
        names.push(DURATION_EXPORT);
    }
    names.join(", ")
}

/// The advice as `causeway pivot explain` prints it, in the paper's notation.
pub fn explain(plan: &Plan) -> String {
    let mut out = String::new();
    for (i, a) in plan.advice.iter().enumerate() {
        let _ = writeln!(out, "A{i} at {} ({}):", a.tracepoint, a.var);
        let _ = writeln!(out, "  OBSERVE {}", list(&a.observe));
        for u in &a.unpack {
            let _ = writeln!(out, "  UNPACK {} {}", u.bag, list(&u.slots));
        }
        for s in &a.steps {
            match s {
                Step::Let(n, e) => {
                    let _ = writeln!(out, "  LET {n} = {}", print_expr(e));
                }
                Step::Filter(e) => {
                    let _ = writeln!(out, "  FILTER {}", print_expr(e));
                }
            }
        }
        match &a.end {
            End::Pack { bag, mode, slots } => {
                let mode = match mode {
                    Temporal::All => "GROUP".to_string(),
                    Temporal::First(1) => "FIRST".to_string(),
                    Temporal::MostRecent(1) => "MOSTRECENT".to_string(),
                    Temporal::First(n) => format!("FIRSTN({n})"),
                    Temporal::MostRecent(n) => format!("MOSTRECENTN({n})"),
                };
                let _ = writeln!(out, "  PACK {bag} {mode} {}", list(slots));
            }
            End::Emit { .. } => {
                let _ = writeln!(out, "  EMIT {}", plan.columns.join(", "));
            }
        }
    }
    out
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        return "-".into();
    }
    items.join(", ")
}
