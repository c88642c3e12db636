//! Prints a syntax tree as normalized text (what `causeway expect parse` shows). Binary
//! expressions are fully parenthesized, so the text parses back to the same tree.

use std::fmt::{self, Display, Formatter, Write};

use causeway_model::source::escape;

use super::ast::*;

impl Display for File {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for (i, item) in self.items.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{item}")?;
        }
        Ok(())
    }
}

impl Display for Role {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Validator => "validator",
            Role::Invalidator => "invalidator",
            Role::Recognizer => "recognizer",
        })
    }
}

struct Out<'a, 'b> {
    f: &'a mut Formatter<'b>,
    indent: usize,
}

impl Out<'_, '_> {
    fn line(&mut self, text: &str) -> fmt::Result {
        for _ in 0..self.indent {
            self.f.write_str("  ")?;
        }
        writeln!(self.f, "{text}")
    }

    fn block(&mut self, head: &str, limits: &[Limit], body: &[Stmt]) -> fmt::Result {
        if head.is_empty() {
            self.line("{")?;
        } else {
            self.line(&format!("{head} {{"))?;
        }
        self.indent += 1;
        for l in limits {
            self.line(&format!("{l};"))?;
        }
        for s in body {
            self.stmt(s, "")?;
        }
        self.indent -= 1;
        self.line("}")
    }

    /// A statement, with `prefix` (e.g. `maybe `) written before it on its first line.
    fn stmt(&mut self, s: &Stmt, prefix: &str) -> fmt::Result {
        match s {
            Stmt::Task { name, limits, body } => {
                let mut head = format!("{prefix}task({name})");
                for l in limits {
                    write!(head, " {l}")?;
                }
                match body {
                    None => self.line(&format!("{head};")),
                    Some(b) => self.block(&head, &[], b),
                }
            }
            Stmt::Notice(t) => self.line(&format!("{prefix}notice({t});")),
            Stmt::Message {
                send,
                peers,
                limits,
            } => {
                let mut text = format!(
                    "{prefix}{}({})",
                    if *send { "send" } else { "recv" },
                    join(peers)
                );
                for l in limits {
                    write!(text, " {l}")?;
                }
                self.line(&format!("{text};"))
            }
            Stmt::Repeat {
                low,
                high,
                between,
                body,
            } => {
                let head = if *between || low != high {
                    format!("{prefix}repeat between {low} and {high} ")
                } else {
                    format!("{prefix}repeat {low} ")
                };
                self.stmt(body, &head)
            }
            Stmt::Maybe(b) => self.stmt(b, &format!("{prefix}maybe ")),
            Stmt::Xor(branches) => {
                self.line(&format!("{prefix}xor {{"))?;
                for b in branches {
                    self.line("branch:")?;
                    self.indent += 1;
                    for s in b {
                        self.stmt(s, "")?;
                    }
                    self.indent -= 1;
                }
                self.line("}")
            }
            Stmt::Any => self.line(&format!("{prefix}any();")),
            Stmt::Call(n) => self.line(&format!("{prefix}call({n});")),
            Stmt::Future { name, body } => {
                let head = match name {
                    Some(n) => format!("{prefix}future {n} "),
                    None => format!("{prefix}future "),
                };
                self.stmt(body, &head)
            }
            Stmt::Done(n) => self.line(&format!("{prefix}done({n});")),
            Stmt::Block(b) => self.block(prefix.trim_end(), &[], b),
            Stmt::Bind { var, body } => self.stmt(body, &format!("{prefix}${var} = ")),
            Stmt::Assign { var, value } => self.line(&format!("{prefix}${var} = {value};")),
        }
    }
}

fn join<T: Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|t| t.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Display for Item {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let mut out = Out { f, indent: 0 };
        match self {
            Item::Recognizer(r) => {
                out.line(&format!("{} {} {{", r.role, r.name))?;
                out.indent += 1;
                for l in &r.limits {
                    out.line(&format!("{l};"))?;
                }
                for t in &r.threads {
                    out.block(
                        &format!("thread {}({}, {})", t.name, t.host, t.count),
                        &t.limits,
                        &t.body,
                    )?;
                }
                out.indent -= 1;
                out.line("}")
            }
            Item::Fragment(fr) => out.block(
                &format!("fragment {} {}", fr.role, fr.name),
                &fr.limits,
                &fr.body,
            ),
            Item::Set { role, name, expr } => out.line(&format!("{role} {name} : {expr};")),
            Item::Assert { during, expr, .. } => {
                let d = match during {
                    None => String::new(),
                    Some(During::Between(a, b)) => format!("during({a}, {b}) "),
                    Some(During::Any(n)) => format!("during(any {n}) "),
                };
                out.line(&format!("{d}assert({expr});"))
            }
        }
    }
}

impl Display for Text {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Text::Exact(s) => write!(f, "\"{}\"", escape(s)),
            Text::Regex(r, _) => write!(f, "m/{}/", regex_text(r)),
            Text::Any => f.write_str("*"),
            Text::Var(v) => write!(f, "${v}"),
            Text::Name(n) => f.write_str(n),
            Text::Not(t) => write!(f, "!{t}"),
        }
    }
}

/// A regex as written between `m/` and `/`: Pip's lexer reads `\/` as `/` and `\\` as `\`,
/// and any other backslash as itself, so only a backslash before `/`, `\` or the end
/// is doubled.
fn regex_text(r: &str) -> String {
    let mut out = String::with_capacity(r.len());
    let mut chars = r.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' => out.push_str("\\/"),
            '\\' if matches!(chars.peek(), None | Some('/' | '\\')) => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out
}

/// How tightly a count binds: Pip's counts have no parentheses, so they are printed only
/// where the tree needs them.
fn count_precedence(c: &Count) -> u8 {
    match c {
        Count::Bin("*", ..) => 2,
        Count::Bin(..) => 1,
        _ => 3,
    }
}

impl Display for Count {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Count::Num(n) => write!(f, "{n}"),
            Count::Var(v) => write!(f, "${v}"),
            Count::Aggregate { function, of, .. } => write!(f, "{function}({of})"),
            Count::Bin(op, a, b) => {
                let p = count_precedence(self);
                if count_precedence(a) < p {
                    write!(f, "({a})")?;
                } else {
                    write!(f, "{a}")?;
                }
                // Left to right: `a - (b - c)` keeps its parentheses.
                if count_precedence(b) <= p {
                    write!(f, " {op} ({b})")
                } else {
                    write!(f, " {op} {b}")
                }
            }
        }
    }
}

impl Display for Value {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Value::Text(t) => write!(f, "{t}"),
            // A lone `$y` reads as a text (as in Pip); parentheses keep it a count.
            Value::Count(Count::Var(v)) => write!(f, "(${v})"),
            Value::Count(c) => write!(f, "{c}"),
        }
    }
}

impl Display for Range {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.low == self.high {
            write!(f, "{}", self.low)
        } else {
            write!(f, "{{{}, {}}}", self.low, self.high)
        }
    }
}

impl Display for Quantity {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Quantity::Lit { value, unit } => write!(f, "{value}{unit}"),
            Quantity::Var(v) => write!(f, "${v}"),
            Quantity::Expr(e, _) => write!(f, "{e}"),
        }
    }
}

impl Display for Limit {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let q = |q: &Option<Quantity>| q.as_ref().map(|q| q.to_string()).unwrap_or_default();
        match self.form {
            LimitForm::Upper => write!(f, "limit({}, {})", self.metric, q(&self.high)),
            LimitForm::Between => write!(
                f,
                "limit({}, {{{}, {}}})",
                self.metric,
                q(&self.low),
                q(&self.high)
            ),
            LimitForm::AtLeast => write!(f, "limit({}, {{{}+}})", self.metric, q(&self.low)),
            LimitForm::Exactly => write!(f, "limit({}, {{={}}})", self.metric, q(&self.low)),
            LimitForm::Level => write!(f, "level({})", q(&self.high)),
        }
    }
}

impl Display for SetExpr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            SetExpr::Name(n) => f.write_str(n),
            SetExpr::Not(e) => write!(f, "!{e}"),
            SetExpr::And(a, b) => write!(f, "({a} && {b})"),
            SetExpr::Or(a, b) => write!(f, "({a} || {b})"),
            SetExpr::Implies(a, b) => write!(f, "({a} -> {b})"),
        }
    }
}

/// How tightly a binary operator binds (the parser's levels, `**` tightest).
fn binding(op: &str) -> usize {
    match op {
        "&&" | "||" | "->" => 0,
        "<=" | ">=" | "==" | "!=" | "<" | ">" => 1,
        "+" | "-" => 2,
        "*" | "/" => 3,
        _ => 4,
    }
}

/// `a op b` without outer parentheses, its operands bracketed only where the parser
/// needs it: a chain prints as the flat text it was parsed from, so the printed text
/// nests no deeper than the parsed one (plus the outer brackets) and parses again under
/// the nesting limit.
fn write_bin(f: &mut Formatter<'_>, op: &str, a: &Expr, b: &Expr) -> fmt::Result {
    let level = binding(op);
    let right_assoc = op == "**";
    // Left operand: bare when it binds tighter, or as tight on a left-associative level.
    match a {
        Expr::Bin(inner, x, y)
            if binding(inner) > level || (binding(inner) == level && !right_assoc) =>
        {
            write_bin(f, inner, x, y)?
        }
        _ => write!(f, "{a}")?,
    }
    write!(f, " {op} ")?;
    // Right operand: bare when it binds tighter, or as tight on the right-associative one.
    match b {
        Expr::Bin(inner, x, y)
            if binding(inner) > level || (binding(inner) == level && right_assoc) =>
        {
            write_bin(f, inner, x, y)
        }
        _ => write!(f, "{b}"),
    }
}

impl Display for Expr {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Num(q) => write!(f, "{q}"),
            Expr::Call(n, args) => write!(f, "{n}({})", join(args)),
            Expr::Name(n) => f.write_str(n),
            Expr::Text(t) => write!(f, "{t}"),
            Expr::Neg(e) => write!(f, "-{e}"),
            // In parentheses: `!` takes the whole comparison after it, so `(!a) + 1`
            // must not print as `!a + 1`.
            Expr::Not(e) => {
                // `!!x` once bracketed, not `(!(!x))`: no deeper than it was parsed.
                write!(f, "(!")?;
                let mut inner = &**e;
                while let Expr::Not(next) = inner {
                    write!(f, "!")?;
                    inner = next;
                }
                write!(f, "{inner})")
            }
            Expr::Bin(op, a, b) => {
                write!(f, "(")?;
                write_bin(f, op, a, b)?;
                write!(f, ")")
            }
            Expr::In(x, w) => match &**w {
                Within::Between(a, b) => write!(f, "({x} in {{{a}, {b}}})"),
                Within::AtLeast(a) => write!(f, "({x} in {{{a}+}})"),
                Within::Exactly(a) => write!(f, "({x} in {{={a}}})"),
            },
        }
    }
}
