//! Prints syntax trees back as text that parses to the same tree: queries in the paper's
//! layout, one clause a line, every nested operation in parentheses.

use std::fmt::Write;

use causeway_model::source::escape;

use super::ast::*;

/// A whole file, statements separated by blank lines.
pub fn print_script(script: &Script) -> String {
    let items: Vec<String> = script
        .items
        .iter()
        .map(|item| match item {
            Item::Tracepoint(t) => print_tracepoint(t),
            Item::Query(q) => print_query(q),
        })
        .collect();
    items.join("\n\n")
}

/// One query, with its name when it has one.
pub fn print_query(def: &QueryDef) -> String {
    let q = &def.query;
    let mut out = String::new();
    if let Some(name) = &def.name {
        let _ = write!(out, "{} = ", name.text);
    }
    let _ = write!(out, "From {} In {}", q.var.text, q.source.text);
    for j in &q.joins {
        let source = match j.temporal {
            Temporal::All => j.source.text.clone(),
            Temporal::First(1) => format!("First({})", j.source.text),
            Temporal::MostRecent(1) => format!("MostRecent({})", j.source.text),
            Temporal::First(n) => format!("FirstN({n}, {})", j.source.text),
            Temporal::MostRecent(n) => format!("MostRecentN({n}, {})", j.source.text),
        };
        let _ = write!(
            out,
            "\nJoin {} In {source} On {} -> {}",
            j.var.text, j.before.text, j.after.text
        );
    }
    for c in &q.clauses {
        match c {
            Clause::Where(e) => {
                let _ = write!(out, "\nWhere {}", print_expr(e));
            }
            Clause::Let(n, e) => {
                let _ = write!(out, "\nLet {} = {}", n.text, print_expr(e));
            }
        }
    }
    if !q.group_by.is_empty() {
        let keys: Vec<String> = q.group_by.iter().map(print_expr).collect();
        let _ = write!(out, "\nGroupBy {}", keys.join(", "));
    }
    let items: Vec<String> = q.select.iter().map(print_select_item).collect();
    let _ = write!(out, "\nSelect {}", items.join(", "));
    out
}

/// A select item as written in a query and as a result column's heading.
pub fn print_select_item(item: &SelectItem) -> String {
    match item {
        SelectItem::Expr(e) => print_expr(e),
        SelectItem::Agg {
            func, arg: None, ..
        } => func.keyword().to_string(),
        SelectItem::Agg {
            func, arg: Some(a), ..
        } => format!("{}({})", func.keyword(), print_expr(a)),
    }
}

/// An expression; operands that are operations themselves are parenthesized.
pub fn print_expr(e: &Expr) -> String {
    match e {
        Expr::Lit(l, _) => print_lit(l),
        Expr::Ref(n) => n.text.clone(),
        Expr::Not(inner, _) => format!("Not {}", operand(inner)),
        Expr::Neg(inner, _) => format!("-{}", operand(inner)),
        Expr::Bin(op, l, r, _) => format!("{} {} {}", operand(l), op.symbol(), operand(r)),
        Expr::In(l, items, _) => {
            let items: Vec<String> = items.iter().map(print_expr).collect();
            format!("{} In ({})", operand(l), items.join(", "))
        }
    }
}

fn operand(e: &Expr) -> String {
    match e {
        Expr::Lit(..) | Expr::Ref(_) => print_expr(e),
        _ => format!("({})", print_expr(e)),
    }
}

fn print_lit(l: &Lit) -> String {
    match l {
        Lit::Int(v) if *v < 0 => format!("({v})"),
        Lit::Int(v) => v.to_string(),
        // `{:?}` keeps a fraction (`1.0`) so the number reads back as a float.
        Lit::Float(v) if *v < 0.0 => format!("({v:?})"),
        Lit::Float(v) => format!("{v:?}"),
        Lit::Str(s) => quote(s),
        Lit::Bool(b) => b.to_string(),
    }
}

fn quote(s: &str) -> String {
    format!("\"{}\"", escape(s))
}

fn print_tracepoint(t: &TracepointDef) -> String {
    let probes: Vec<String> = t
        .probes
        .iter()
        .map(|p| {
            let ms: Vec<String> = p
                .matchers
                .iter()
                .map(|m| {
                    let value = match m.key {
                        MatchKey::Line if !m.glob => m.value.clone(),
                        _ => quote(&m.value),
                    };
                    let op = if m.glob { "~" } else { "=" };
                    format!("{} {op} {value}", m.key.keyword())
                })
                .collect();
            format!("{}({})", p.kind.keyword(), ms.join(", "))
        })
        .collect();
    let mut out = format!(
        "Tracepoint {} =\n    {}",
        t.name.text,
        probes.join("\n  | ")
    );
    if !t.exports.is_empty() {
        let exports: Vec<String> = t
            .exports
            .iter()
            .map(|e| match &e.explode {
                None if e.field == e.name.text => e.name.text.clone(),
                None => format!("{} = {}", e.name.text, quote(&e.field)),
                Some(None) => format!("{} = explode({})", e.name.text, quote(&e.field)),
                Some(Some(sep)) => format!(
                    "{} = explode({}, {})",
                    e.name.text,
                    quote(&e.field),
                    quote(sep)
                ),
            })
            .collect();
        let _ = write!(out, "\n  Export {}", exports.join(", "));
    }
    out
}
