//! Named queries as sources: `Join y In Q3 On y -> x` (or `From y In Q3`) splices Q3's
//! variables into the query's join tree. Q3's From variable becomes `y`, its joined
//! variables `y/name` beneath it, its Let names `y/name`; its Where and Let clauses come
//! along, and each name it selects is a column the outer query reads as `y.` followed by
//! the name as Q3 prints it (`y.st.host`, `y.n`). `y` also keeps the exports of Q3's From
//! tracepoint (`y.host`).
//!
//! A joined query's tuples are its selected rows, one per tuple, so it may not group or
//! aggregate, and it may select only plain names. Its Where clauses filter before a
//! `First` or `MostRecent` on `y` picks: they choose which tuples there are to pick from.
//! Cycles and nesting deeper than 8 (`MAX_NESTED_QUERIES`) are refused, and an error
//! inside a spliced query points at the source's name. `crate::install::prepare` puts the
//! named queries a query uses into the script each process compiles; the hub keeps every
//! named query it installs in its catalog, restored with its state.

use causeway_model::source::SyntaxError;

use crate::catalog::{Catalog, MAX_JOINS};
use crate::lang::ast::*;
use crate::lang::print_select_item;

/// How deep named queries may source each other.
pub const MAX_NESTED_QUERIES: usize = 8;

/// A query's variables and clauses, with named-query sources spliced in.
#[derive(Debug)]
pub(crate) struct Spliced<'a> {
    /// Variables: name, tracepoint, parent (None for the From variable), temporal filter.
    pub vars: Vec<(String, &'a TracepointDef, Option<usize>, Temporal)>,
    /// Where and Let clauses in order, each with the variable a Where may not be lifted
    /// above (0 for the query's own; the splice point for a named query's).
    pub clauses: Vec<(Clause, usize)>,
    /// The named queries used, each after those it uses.
    pub named: Vec<String>,
}

/// Splices every named-query source of `query` into one variable tree.
pub(crate) fn splice<'a>(query: &Query, catalog: &'a Catalog) -> Result<Spliced<'a>, SyntaxError> {
    let mut splicer = Splicer {
        out: Spliced {
            vars: Vec::new(),
            clauses: Vec::new(),
            named: Vec::new(),
        },
        catalog,
        stack: Vec::new(),
    };
    let root = Slot {
        name: &query.var.text,
        parent: None,
        temporal: Temporal::All,
    };
    splicer.add_query(query, root)?;
    Ok(splicer.out)
}

/// Where a variable goes in the tree: its name, the variable it hangs under, and which
/// of its tuples count.
#[derive(Clone, Copy)]
struct Slot<'s> {
    name: &'s str,
    parent: Option<usize>,
    temporal: Temporal,
}

/// The tree being built, the definitions it draws on, and the named queries being
/// spliced (outermost first).
struct Splicer<'a> {
    out: Spliced<'a>,
    catalog: &'a Catalog,
    stack: Vec<String>,
}

/// How a spliced query's names read in the outer one.
#[derive(Default)]
struct Renames {
    /// Its variables and Let names, to the names they take.
    names: Vec<(String, String)>,
}

impl Renames {
    fn of(&self, name: &str) -> String {
        if let Some((_, to)) = self.names.iter().find(|(from, _)| from == name) {
            return to.clone();
        }
        if let Some((var, field)) = name.split_once('.') {
            if let Some((_, to)) = self.names.iter().find(|(from, _)| from == var) {
                return format!("{to}.{field}");
            }
        }
        name.to_string()
    }

    fn expr(&self, e: &Expr) -> Expr {
        if self.names.is_empty() {
            return e.clone();
        }
        // Depth is bounded by the parser's nesting limit.
        match e {
            Expr::Lit(..) => e.clone(),
            Expr::Ref(n) => Expr::Ref(Name {
                text: self.of(&n.text),
                pos: n.pos,
            }),
            Expr::Not(a, p) => Expr::Not(Box::new(self.expr(a)), *p),
            Expr::Neg(a, p) => Expr::Neg(Box::new(self.expr(a)), *p),
            Expr::Bin(op, a, b, p) => {
                Expr::Bin(*op, Box::new(self.expr(a)), Box::new(self.expr(b)), *p)
            }
            Expr::In(a, items, p) => Expr::In(
                Box::new(self.expr(a)),
                items.iter().map(|i| self.expr(i)).collect(),
                *p,
            ),
        }
    }
}

impl Splicer<'_> {
    /// Adds `query`'s variables (its From variable at `at`) and clauses.
    fn add_query(&mut self, query: &Query, at: Slot) -> Result<usize, SyntaxError> {
        let root = at.name;
        let root_index = self.add_source(&query.source, at)?;
        // This query's own names, as the outer query knows them.
        let mut local = Renames::default();
        let outermost = self.stack.is_empty();
        let prefix = |name: &str| {
            if outermost {
                name.to_string()
            } else {
                format!("{root}/{name}")
            }
        };
        local.names.push((query.var.text.clone(), root.to_string()));
        let known = |out: &Spliced, name: &str| out.vars.iter().any(|v| v.0 == name);
        for j in &query.joins {
            let name = prefix(&j.var.text);
            if local.names.iter().any(|(from, _)| *from == j.var.text) || known(&self.out, &name) {
                return Err(SyntaxError::new(
                    j.var.pos,
                    &format!("`{}` again", j.var.text),
                    "a variable name not used before in this query",
                ));
            }
            if j.before.text != j.var.text {
                return Err(SyntaxError::new(
                    j.before.pos,
                    &format!("`{}`", j.before.text),
                    &format!("`{}`, the joined variable, before `->`", j.var.text),
                ));
            }
            let Some(after) = local
                .names
                .iter()
                .find(|(from, _)| *from == j.after.text)
                .and_then(|(_, to)| self.out.vars.iter().position(|v| v.0 == *to))
            else {
                return Err(SyntaxError::new(
                    j.after.pos,
                    &format!("`{}`", j.after.text),
                    "the From variable or a variable joined before, after `->`",
                ));
            };
            local.names.push((j.var.text.clone(), name.clone()));
            self.add_source(
                &j.source,
                Slot {
                    name: &name,
                    parent: Some(after),
                    temporal: j.temporal,
                },
            )?;
        }
        for c in &query.clauses {
            let clause = match c {
                Clause::Where(e) => Clause::Where(local.expr(e)),
                Clause::Let(n, e) => {
                    let e = local.expr(e);
                    let name = prefix(&n.text);
                    local.names.push((n.text.clone(), name.clone()));
                    Clause::Let(
                        Name {
                            text: name,
                            pos: n.pos,
                        },
                        e,
                    )
                }
            };
            let floor = if outermost { 0 } else { root_index };
            self.out.clauses.push((clause, floor));
        }
        if !outermost {
            // A spliced query: its selected names become the outer query's columns `root.NAME`.
            for item in &query.select {
                let SelectItem::Expr(e @ Expr::Ref(n)) = item else {
                    continue;
                };
                self.out.clauses.push((
                    Clause::Let(
                        Name {
                            text: format!("{root}.{}", n.text),
                            pos: n.pos,
                        },
                        local.expr(e),
                    ),
                    root_index,
                ));
            }
        }
        Ok(root_index)
    }

    /// Adds the variable at `at` ranging over `source`: a tracepoint, or a named query
    /// spliced in whole.
    fn add_source(&mut self, source: &Name, at: Slot) -> Result<usize, SyntaxError> {
        let out = &mut self.out;
        if out.vars.len() > MAX_JOINS {
            return Err(SyntaxError::new(
                source.pos,
                &format!("join number {}", out.vars.len()),
                &format!("at most {MAX_JOINS} joins, counting those of joined named queries"),
            ));
        }
        if let Some(t) = self.catalog.tracepoint(&source.text) {
            out.vars
                .push((at.name.to_string(), t, at.parent, at.temporal));
            return Ok(out.vars.len() - 1);
        }
        let Some(q) = self.catalog.query(&source.text) else {
            return Err(SyntaxError::new(
                source.pos,
                &format!("`{}`", source.text),
                "a tracepoint defined in the loaded tracepoint files, or a named query",
            ));
        };
        if self.stack.contains(&source.text) {
            return Err(SyntaxError::new(
                source.pos,
                &format!("`{}`, which sources itself", source.text),
                "named queries that do not source each other in a cycle",
            ));
        }
        if self.stack.len() >= MAX_NESTED_QUERIES {
            return Err(SyntaxError::new(
                source.pos,
                &format!("named queries nested {} deep", self.stack.len() + 1),
                &format!("at most {MAX_NESTED_QUERIES}"),
            ));
        }
        joinable(&q.query, source)?;
        self.stack.push(source.text.clone());
        // Errors inside the named query point at where it is used.
        let index = self.add_query(&q.query, at).map_err(|e| {
            SyntaxError::new(
                source.pos,
                &format!("`{}`, which does not compile: {e}", source.text),
                "a named query that compiles on its own",
            )
        })?;
        self.stack.pop();
        if !self.out.named.contains(&source.text) {
            self.out.named.push(source.text.clone());
        }
        Ok(index)
    }
}

/// A named query can be a source when its rows are its tuples: names selected, no
/// grouping or aggregates.
fn joinable(q: &Query, source: &Name) -> Result<(), SyntaxError> {
    for item in &q.select {
        if !matches!(item, SelectItem::Expr(Expr::Ref(_))) || !q.group_by.is_empty() {
            return Err(SyntaxError::new(
                source.pos,
                &format!(
                    "`{}`, which selects `{}`",
                    source.text,
                    print_select_item(item)
                ),
                "a named query that selects exports or Let names, without GroupBy or aggregates, to use as a source",
            ));
        }
    }
    Ok(())
}
