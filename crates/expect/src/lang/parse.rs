//! Recursive descent over the tokens. Every error names the place, what was found and
//! what would have been accepted.

use super::ast::*;
use super::lex::{tokens, Tok};
use super::{Pos, SyntaxError, MAX_NESTING};
use crate::units::scale;

/// Parses a whole expectations file.
pub fn parse(src: &str) -> Result<File, SyntaxError> {
    let mut p = Parser {
        toks: tokens(src)?,
        at: 0,
        depth: 0,
    };
    let mut items = Vec::new();
    while p.peek() != &Tok::End {
        items.push(p.item()?);
    }
    Ok(File { items })
}

struct Parser {
    toks: Vec<(Tok, Pos)>,
    at: usize,
    /// How many nested statements or expressions enclose the current one.
    depth: usize,
}

type R<T> = Result<T, SyntaxError>;

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.at.min(self.toks.len() - 1)].0
    }

    fn peek2(&self) -> &Tok {
        &self.toks[(self.at + 1).min(self.toks.len() - 1)].0
    }

    fn pos(&self) -> Pos {
        self.toks[self.at.min(self.toks.len() - 1)].1
    }

    /// Where the next token is, for the tree.
    fn at(&self) -> At {
        let p = self.pos();
        At {
            line: p.line,
            col: p.col,
        }
    }

    fn next(&mut self) -> Tok {
        let t = self.peek().clone();
        if self.at < self.toks.len() - 1 {
            self.at += 1;
        }
        t
    }

    fn fail<T>(&self, expected: &str) -> R<T> {
        Err(SyntaxError::new(
            self.pos(),
            &self.peek().describe(),
            expected,
        ))
    }

    /// Runs `f` one level deeper, refusing input nested past [`MAX_NESTING`]: the parser
    /// and everything that walks its tree recurse, and must not overflow the stack.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        self.chain(|p| {
            p.deepen()?;
            f(p)
        })
    }

    /// Runs `f`, which may [`deepen`](Self::deepen) once per operator it chains, and
    /// restores the depth after.
    fn chain<T>(&mut self, f: impl FnOnce(&mut Self) -> R<T>) -> R<T> {
        let saved = self.depth;
        let out = f(self);
        self.depth = saved;
        out
    }

    /// One level deeper until the caller restores `depth`: each operator of a chain such as
    /// `a + b + c` nests the tree one level more.
    fn deepen(&mut self) -> R<()> {
        if self.depth >= MAX_NESTING {
            return Err(SyntaxError::new(
                self.pos(),
                &format!(
                    "{} nested more than {MAX_NESTING} deep",
                    self.peek().describe()
                ),
                "less nesting (split the expression or the statement)",
            ));
        }
        self.depth += 1;
        Ok(())
    }

    fn is_sym(&self, s: &str) -> bool {
        matches!(self.peek(), Tok::Sym(x) if *x == s)
    }

    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Ident(x) if x == w)
    }

    fn sym(&mut self, s: &str) -> R<()> {
        if self.is_sym(s) {
            self.next();
            Ok(())
        } else {
            self.fail(&format!("`{s}`"))
        }
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        let yes = self.is_sym(s);
        if yes {
            self.next();
        }
        yes
    }

    fn word(&mut self, w: &str) -> R<()> {
        if self.is_word(w) {
            self.next();
            Ok(())
        } else {
            self.fail(&format!("`{w}`"))
        }
    }

    fn name(&mut self, what: &str) -> R<String> {
        match self.peek() {
            Tok::Ident(s) => {
                let s = s.clone();
                self.next();
                Ok(s)
            }
            _ => self.fail(what),
        }
    }

    fn role(&mut self) -> R<Role> {
        let role = match self.peek() {
            Tok::Ident(w) if w == "validator" => Role::Validator,
            Tok::Ident(w) if w == "invalidator" => Role::Invalidator,
            Tok::Ident(w) if w == "recognizer" => Role::Recognizer,
            _ => return self.fail("`validator`, `invalidator` or `recognizer`"),
        };
        self.next();
        Ok(role)
    }

    fn item(&mut self) -> R<Item> {
        let line = self.pos().line;
        if self.is_word("assert") || self.is_word("during") {
            let during = if self.is_word("during") {
                self.next();
                self.sym("(")?;
                let d = if self.is_word("any") {
                    self.next();
                    During::Any(self.quantity()?)
                } else {
                    let a = self.quantity()?;
                    self.sym(",")?;
                    During::Between(a, self.quantity()?)
                };
                self.sym(")")?;
                Some(d)
            } else {
                None
            };
            self.word("assert")?;
            self.sym("(")?;
            let expr = self.expr()?;
            self.sym(")")?;
            self.sym(";")?;
            return Ok(Item::Assert { during, expr, line });
        }
        let fragment = self.is_word("fragment");
        if fragment {
            self.next();
        }
        if !matches!(self.peek(), Tok::Ident(w) if ["validator", "invalidator", "recognizer"].contains(&w.as_str()))
        {
            return self.fail(if fragment {
                "`validator`, `invalidator` or `recognizer`"
            } else {
                "a recognizer (`validator`, `invalidator`, `recognizer`, `fragment`) or an assertion (`assert`, `during`)"
            });
        }
        let role = self.role()?;
        let name = self.name("the recognizer's name")?;
        if !fragment && self.eat_sym(":") {
            let expr = self.set_expr()?;
            self.sym(";")?;
            return Ok(Item::Set { role, name, expr });
        }
        self.sym("{")?;
        let limits = self.preamble_limits()?;
        if fragment {
            let body = self.stmts_until_close()?;
            return Ok(Item::Fragment(Fragment {
                role,
                name,
                limits,
                body,
            }));
        }
        let mut threads = Vec::new();
        while !self.eat_sym("}") {
            if !self.is_word("thread") {
                return self.fail("`thread` or `}`");
            }
            threads.push(self.thread()?);
        }
        Ok(Item::Recognizer(Recognizer {
            role,
            name,
            limits,
            threads,
        }))
    }

    /// `limit(...)` and `level(N)` at the head of a block, each with an optional `;`.
    fn preamble_limits(&mut self) -> R<Vec<Limit>> {
        let mut out = Vec::new();
        loop {
            if self.is_word("limit") && self.peek2() == &Tok::Sym("(") {
                out.push(self.limit()?);
                self.eat_sym(";");
            } else if self.is_word("level") && self.peek2() == &Tok::Sym("(") {
                out.push(self.level()?);
                self.eat_sym(";");
            } else {
                return Ok(out);
            }
        }
    }

    /// `level(N)`, kept among the limits as Pip keeps it.
    fn level(&mut self) -> R<Limit> {
        self.word("level")?;
        self.sym("(")?;
        let Tok::Num { value, unit } = self.peek().clone() else {
            return self.fail("a level number");
        };
        self.next();
        self.sym(")")?;
        Ok(Limit {
            metric: "level".into(),
            low: None,
            high: Some(Quantity::Lit { value, unit }),
            form: LimitForm::Level,
        })
    }

    fn thread(&mut self) -> R<ThreadPattern> {
        self.word("thread")?;
        let name = self.name("the thread pattern's name")?;
        self.sym("(")?;
        let host = self.text("a host: a string, `m/regex/` or `*`")?;
        self.sym(",")?;
        let count = self.range()?;
        self.sym(")")?;
        self.sym("{")?;
        let limits = self.preamble_limits()?;
        let body = self.stmts_until_close()?;
        Ok(ThreadPattern {
            name,
            host,
            count,
            limits,
            body,
        })
    }

    fn range(&mut self) -> R<Range> {
        if self.eat_sym("{") {
            let low = self.count()?;
            self.sym(",")?;
            let high = self.count()?;
            self.sym("}")?;
            Ok(Range { low, high })
        } else {
            let n = self.count()?;
            Ok(Range {
                low: n.clone(),
                high: n,
            })
        }
    }

    /// A count: Pip's integer expression, `+` and `-` over `*` over numbers, `$vars`,
    /// `instances(R)`, `unique(R)` and (ours) parentheses.
    fn count(&mut self) -> R<Count> {
        self.chain(|p| {
            let mut left = p.count_term()?;
            loop {
                let op = if p.is_sym("+") {
                    "+"
                } else if p.is_sym("-") {
                    "-"
                } else {
                    return Ok(left);
                };
                p.deepen()?;
                p.next();
                left = Count::Bin(op, Box::new(left), Box::new(p.count_term()?));
            }
        })
    }

    fn count_term(&mut self) -> R<Count> {
        self.chain(|p| {
            let mut left = p.count_primary()?;
            while p.is_sym("*") {
                p.deepen()?;
                p.next();
                left = Count::Bin("*", Box::new(left), Box::new(p.count_primary()?));
            }
            Ok(left)
        })
    }

    fn count_primary(&mut self) -> R<Count> {
        self.nested(Self::count_primary_here)
    }

    fn count_primary_here(&mut self) -> R<Count> {
        let at = self.at();
        match self.peek().clone() {
            Tok::Num { value, unit } if unit.is_empty() && value.fract() == 0.0 && value >= 0.0 => {
                self.next();
                Ok(Count::Num(value as u64))
            }
            Tok::Var(v) => {
                self.next();
                Ok(Count::Var(v))
            }
            Tok::Sym("(") => {
                self.next();
                let c = self.count()?;
                self.sym(")")?;
                Ok(c)
            }
            Tok::Ident(f)
                if (f == "instances" || f == "unique") && self.peek2() == &Tok::Sym("(") =>
            {
                self.next();
                self.next();
                let of = match self.peek().clone() {
                    Tok::Ident(n) => Text::Name(n),
                    Tok::Var(v) if f == "unique" => Text::Var(v),
                    _ => return self.fail("a recognizer's name"),
                };
                self.next();
                self.sym(")")?;
                Ok(Count::Aggregate {
                    function: f,
                    of,
                    at,
                })
            }
            _ => self.fail("a count (a whole number or `$PARAM`)"),
        }
    }

    /// A host, task name, notice or peer. `!` negates a string, regex, `*`, `$var` or
    /// another negation, as Pip's `simple_string_expr` does (not a bare name).
    fn text(&mut self, expected: &str) -> R<Text> {
        if self.is_sym("!") {
            return self.nested(|p| {
                p.next();
                if let Tok::Ident(_) = p.peek() {
                    return p.fail("a string, `m/regex/`, `*`, `$var` or `!` after `!`");
                }
                Ok(Text::Not(Box::new(p.text(
                    "a string, `m/regex/`, `*`, `$var` or `!` after `!`",
                )?)))
            });
        }
        let t = match self.peek().clone() {
            Tok::Str(s) => Text::Exact(s),
            Tok::Regex(r) => Text::Regex(r, self.at()),
            Tok::Sym("*") => Text::Any,
            Tok::Var(v) => Text::Var(v),
            Tok::Ident(n) => Text::Name(n),
            _ => return self.fail(expected),
        };
        self.next();
        Ok(t)
    }

    fn stmts_until_close(&mut self) -> R<Vec<Stmt>> {
        let mut out = Vec::new();
        while !self.eat_sym("}") {
            if self.peek() == &Tok::End {
                return self.fail("a statement or `}`");
            }
            // Not Pip's (its levels head a block), accepted as before and dropped: there
            // is no list of limits here to keep it in.
            if self.is_word("level") && self.peek2() == &Tok::Sym("(") {
                self.level()?;
                self.eat_sym(";");
                continue;
            }
            out.push(self.stmt()?);
        }
        Ok(out)
    }

    /// Limits written after a statement's parentheses.
    fn trailing_limits(&mut self) -> R<Vec<Limit>> {
        let mut out = Vec::new();
        loop {
            if self.is_word("limit") {
                out.push(self.limit()?);
            } else if self.is_word("level") {
                out.push(self.level()?);
            } else {
                return Ok(out);
            }
        }
    }

    fn stmt(&mut self) -> R<Stmt> {
        self.nested(Self::stmt_here)
    }

    fn stmt_here(&mut self) -> R<Stmt> {
        const STATEMENTS: &str = "a statement (`task`, `notice`, `send`, `recv`, `repeat`, `maybe`, `xor`, `any`, `call`, `future`, `done`, `{`, or `$var =`)";
        if let Tok::Var(v) = self.peek().clone() {
            if self.peek2() == &Tok::Sym("=") {
                self.next();
                self.next();
                return self.assignment(v);
            }
        }
        if self.eat_sym("{") {
            return Ok(Stmt::Block(self.stmts_until_close()?));
        }
        let Tok::Ident(word) = self.peek().clone() else {
            return self.fail(STATEMENTS);
        };
        match word.as_str() {
            "task" => {
                self.next();
                self.sym("(")?;
                let name = self.text("a task name: a string, `m/regex/`, `*` or `$var`")?;
                self.sym(")")?;
                let limits = self.trailing_limits()?;
                let body = if self.eat_sym("{") {
                    Some(self.stmts_until_close()?)
                } else {
                    self.sym(";")?;
                    None
                };
                Ok(Stmt::Task { name, limits, body })
            }
            "notice" => {
                self.next();
                self.sym("(")?;
                let t = self.text("the notice's text: a string, `m/regex/` or `*`")?;
                self.sym(")")?;
                self.sym(";")?;
                Ok(Stmt::Notice(t))
            }
            "send" | "recv" => {
                self.next();
                self.sym("(")?;
                let mut peers = vec![self.text("a thread pattern name or a host")?];
                while self.eat_sym(",") {
                    peers.push(self.text("a thread pattern name or a host")?);
                }
                self.sym(")")?;
                let limits = self.trailing_limits()?;
                self.sym(";")?;
                Ok(Stmt::Message {
                    send: word == "send",
                    peers,
                    limits,
                })
            }
            "repeat" => {
                self.next();
                let (low, high, between) = if self.is_word("between") {
                    self.next();
                    let low = self.count()?;
                    self.word("and")?;
                    (low, self.count()?, true)
                } else {
                    let n = self.count()?;
                    (n.clone(), n, false)
                };
                let body = Box::new(self.stmt()?);
                Ok(Stmt::Repeat {
                    low,
                    high,
                    between,
                    body,
                })
            }
            "maybe" => {
                self.next();
                Ok(Stmt::Maybe(Box::new(self.stmt()?)))
            }
            "xor" => {
                self.next();
                self.sym("{")?;
                let mut branches = Vec::new();
                while !self.eat_sym("}") {
                    self.word("branch")?;
                    self.sym(":")?;
                    let mut b = Vec::new();
                    while !self.is_word("branch") && !self.is_sym("}") {
                        if self.peek() == &Tok::End {
                            return self.fail("a statement, `branch` or `}`");
                        }
                        b.push(self.stmt()?);
                    }
                    branches.push(b);
                }
                Ok(Stmt::Xor(branches))
            }
            "any" => {
                self.next();
                self.sym("(")?;
                self.sym(")")?;
                self.sym(";")?;
                Ok(Stmt::Any)
            }
            "call" | "include" => {
                self.next();
                self.sym("(")?;
                let n = self.name("a fragment's name")?;
                self.sym(")")?;
                self.sym(";")?;
                Ok(Stmt::Call(n))
            }
            "future" => {
                self.next();
                let name = match (self.peek().clone(), self.peek2()) {
                    // `future NAME stmt`; a name followed by `(` is the statement itself.
                    (Tok::Ident(n), next) if next != &Tok::Sym("(") && !is_keyword(&n) => {
                        self.next();
                        Some(n)
                    }
                    _ => None,
                };
                Ok(Stmt::Future {
                    name,
                    body: Box::new(self.stmt()?),
                })
            }
            "done" => {
                self.next();
                self.sym("(")?;
                let n = self.name("a future's name")?;
                self.sym(")")?;
                self.sym(";")?;
                Ok(Stmt::Done(n))
            }
            _ => self.fail(STATEMENTS),
        }
    }

    /// After `$v =`: a statement, whose match binds `$v`, or a value and `;`, as Pip's
    /// `VARIABLE '=' string_expr` and `VARIABLE '=' int_expr`.
    fn assignment(&mut self, var: String) -> R<Stmt> {
        let statement = match self.peek() {
            Tok::Sym("{") => true,
            Tok::Ident(w) => is_keyword(w),
            Tok::Var(_) => self.peek2() == &Tok::Sym("="),
            _ => false,
        };
        if statement {
            let body = Box::new(self.stmt()?);
            return Ok(Stmt::Bind { var, body });
        }
        let value =
            match self.peek() {
                Tok::Ident(f)
                    if (f == "instances" || f == "unique") && self.peek2() == &Tok::Sym("(") =>
                {
                    Value::Count(self.count()?)
                }
                Tok::Str(_) | Tok::Regex(_) | Tok::Sym("*") | Tok::Sym("!") | Tok::Ident(_) => {
                    Value::Text(self.text("a value")?)
                }
                // A lone `$y` is a text, as Bison resolves Pip's conflict; `($y)` a count.
                Tok::Var(_) => match self.count()? {
                    Count::Var(y) => Value::Text(Text::Var(y)),
                    c => Value::Count(c),
                },
                Tok::Num { .. } | Tok::Sym("(") => Value::Count(self.count()?),
                _ => return self.fail(
                    "a statement, or a value: a string, `m/regex/`, `*`, `!`, a count or `$var`",
                ),
            };
        self.sym(";")?;
        Ok(Stmt::Assign { var, value })
    }

    fn limit(&mut self) -> R<Limit> {
        self.word("limit")?;
        self.sym("(")?;
        let metric = self.name("a metric (REAL_TIME, CPU_TIME, SIZE, LATENCY, ...)")?;
        self.sym(",")?;
        let (low, high, form) = if self.eat_sym("{") {
            if self.eat_sym("=") {
                let v = self.bound()?;
                self.sym("}")?;
                (Some(v.clone()), Some(v), LimitForm::Exactly)
            } else {
                let low = self.bound()?;
                if self.eat_sym("+") {
                    self.sym("}")?;
                    (Some(low), None, LimitForm::AtLeast)
                } else {
                    self.sym(",")?;
                    let high = self.bound()?;
                    self.sym("}")?;
                    (Some(low), Some(high), LimitForm::Between)
                }
            }
        } else {
            (None, Some(self.bound()?), LimitForm::Upper)
        };
        self.sym(")")?;
        Ok(Limit {
            metric,
            low,
            high,
            form,
        })
    }

    /// A limit's bound: a quantity, or arithmetic and aggregates as Pip's `count_range`
    /// and `unit_qty` allow (`{$n, $n*2}`, `{1./3., 1.}`, `average(REAL_TIME, R)`).
    fn bound(&mut self) -> R<Quantity> {
        let at = self.at();
        Ok(match self.binary(COMPARISON + 1)? {
            Expr::Num(q) => q,
            e => Quantity::Expr(Box::new(e), at),
        })
    }

    fn quantity(&mut self) -> R<Quantity> {
        match self.peek().clone() {
            Tok::Num { value, unit } => {
                if !unit.is_empty() && scale(&unit).is_none() {
                    return Err(SyntaxError::new(
                        self.pos(),
                        &format!("an unknown unit {unit:?}"),
                        "a unit: h, m, s, ms, us, ns, b, kb, mb, gb or tb",
                    ));
                }
                self.next();
                // Pip reads `10 ms` as a number and then a unit, two tokens.
                let unit = match self.peek() {
                    Tok::Ident(u) if unit.is_empty() && scale(u).is_some() => {
                        let u = u.clone();
                        self.next();
                        u
                    }
                    _ => unit,
                };
                Ok(Quantity::Lit { value, unit })
            }
            Tok::Var(v) => {
                self.next();
                Ok(Quantity::Var(v))
            }
            _ => self.fail("a quantity (e.g. `10ms`, `4kb`, `3`, `$PARAM`)"),
        }
    }

    /// `&&`, `||` and `->` on one level, left to right, as Pip's `pathbool` has them:
    /// `A || B && C` is `(A || B) && C`.
    fn set_expr(&mut self) -> R<SetExpr> {
        self.chain(|p| {
            let mut left = p.set_unary()?;
            loop {
                let join = if p.is_sym("&&") {
                    SetExpr::And
                } else if p.is_sym("||") {
                    SetExpr::Or
                } else if p.is_sym("->") {
                    SetExpr::Implies
                } else {
                    return Ok(left);
                };
                p.deepen()?;
                p.next();
                left = join(Box::new(left), Box::new(p.set_unary()?));
            }
        })
    }

    fn set_unary(&mut self) -> R<SetExpr> {
        self.nested(Self::set_unary_here)
    }

    fn set_unary_here(&mut self) -> R<SetExpr> {
        if self.eat_sym("!") {
            return Ok(SetExpr::Not(Box::new(self.set_unary()?)));
        }
        if self.eat_sym("(") {
            let e = self.set_expr()?;
            self.sym(")")?;
            return Ok(e);
        }
        Ok(SetExpr::Name(self.name("a recognizer's name, `!` or `(`")?))
    }

    fn expr(&mut self) -> R<Expr> {
        self.binary(0)
    }

    /// Precedence climbing over the levels in [`LEVELS`].
    fn binary(&mut self, level: usize) -> R<Expr> {
        if level == LEVELS.len() {
            return self.power();
        }
        self.chain(|p| p.binary_chain(level))
    }

    fn binary_chain(&mut self, level: usize) -> R<Expr> {
        let mut left = self.binary(level + 1)?;
        loop {
            if level == COMPARISON && self.is_word("in") {
                self.deepen()?;
                self.next();
                self.sym("{")?;
                let within = self.nested(Self::within)?;
                left = Expr::In(Box::new(left), Box::new(within));
                continue;
            }
            let Some(op) = LEVELS[level].iter().find(|op| self.is_sym(op)) else {
                return Ok(left);
            };
            // `{x+}` closes a range: that `+` adds nothing.
            if *op == "+" && self.peek2() == &Tok::Sym("}") {
                return Ok(left);
            }
            self.deepen()?;
            self.next();
            let right = self.binary(level + 1)?;
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
    }

    /// The range after `in {`, through its `}`: `a, b}`, `a+}` or `=a}`.
    fn within(&mut self) -> R<Within> {
        if self.eat_sym("=") {
            let a = self.expr()?;
            self.sym("}")?;
            return Ok(Within::Exactly(a));
        }
        let a = self.expr()?;
        if self.eat_sym("+") {
            self.sym("}")?;
            return Ok(Within::AtLeast(a));
        }
        if !self.eat_sym(",") {
            return self.fail("`,` and the range's upper end, or `+}` (a range: `{low, high}`, `{low+}` or `{=x}`)");
        }
        let b = self.expr()?;
        if !self.eat_sym("}") {
            return self.fail("`}` (a range has two ends: `{low, high}`)");
        }
        Ok(Within::Between(a, b))
    }

    fn power(&mut self) -> R<Expr> {
        let base = self.unary()?;
        if self.eat_sym("**") {
            // Right-associative: 2 ** 3 ** 2 = 2 ** 9.
            let exp = self.nested(Self::power)?;
            return Ok(Expr::Bin("**", Box::new(base), Box::new(exp)));
        }
        Ok(base)
    }

    fn unary(&mut self) -> R<Expr> {
        self.nested(Self::unary_here)
    }

    fn unary_here(&mut self) -> R<Expr> {
        if self.eat_sym("-") {
            return Ok(Expr::Neg(Box::new(self.unary()?)));
        }
        // Pip's `!` negates a whole comparison: `!instances(A) > 1` is `!(instances(A) > 1)`.
        if self.eat_sym("!") {
            return Ok(Expr::Not(Box::new(self.binary(COMPARISON)?)));
        }
        if self.eat_sym("(") {
            let e = self.expr()?;
            self.sym(")")?;
            return Ok(e);
        }
        match self.peek().clone() {
            Tok::Num { .. } | Tok::Var(_) => Ok(Expr::Num(self.quantity()?)),
            // Task name patterns, as in `average(REAL_TIME, m/^fab::/)` or `max(CPU_TIME, *)`:
            // a `*` cannot start an operand otherwise.
            Tok::Str(_) | Tok::Regex(_) | Tok::Sym("*") => {
                Ok(Expr::Text(self.text("a task name pattern")?))
            }
            Tok::Ident(n) => {
                self.next();
                if self.eat_sym("(") {
                    let mut args = Vec::new();
                    if !self.eat_sym(")") {
                        args.push(self.expr()?);
                        while self.eat_sym(",") {
                            args.push(self.expr()?);
                        }
                        self.sym(")")?;
                    }
                    Ok(Expr::Call(n, args))
                } else {
                    Ok(Expr::Name(n))
                }
            }
            _ => {
                self.fail("a number, a name, a task name pattern, a function call, `-`, `!` or `(`")
            }
        }
    }
}

/// Operators by precedence, loosest first, each level left-associative; `**` (right-
/// associative) and the unary operators bind tighter. As Pip's `bool`: `&&`, `||` and
/// `->` share one level, so `a || b && c` is `(a || b) && c`.
const LEVELS: [&[&str]; 4] = [
    &["&&", "||", "->"],
    &["<=", ">=", "==", "!=", "<", ">"],
    &["+", "-"],
    &["*", "/"],
];
const COMPARISON: usize = 1;

fn is_keyword(w: &str) -> bool {
    [
        "task", "notice", "send", "recv", "repeat", "maybe", "xor", "any", "call", "include",
        "future", "done",
    ]
    .contains(&w)
}
