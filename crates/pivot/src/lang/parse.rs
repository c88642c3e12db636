//! The recursive-descent parser: tokens to [`Script`]. Keywords are case-insensitive and
//! clauses run freely across lines; statements end where the grammar says they end, so
//! `;` and blank lines between them are optional.

use causeway_model::source::{Pos, SyntaxError};

use super::ast::*;
use super::lex::{tokens, Tok};
use super::MAX_NESTING;

/// Parses a file of tracepoint definitions and queries.
pub fn parse(src: &str) -> Result<Script, SyntaxError> {
    let mut p = Parser {
        toks: tokens(src)?,
        at: 0,
        depth: 0,
    };
    let mut script = Script::default();
    loop {
        while p.eat_sym(";") {}
        if p.peek() == &Tok::End {
            return Ok(script);
        }
        script.items.push(p.item()?);
    }
}

/// Parses text holding exactly one query (named or not).
pub fn parse_query(src: &str) -> Result<QueryDef, SyntaxError> {
    let script = parse(src)?;
    let mut queries = script.items.into_iter().filter_map(|i| match i {
        Item::Query(q) => Some(q),
        Item::Tracepoint(_) => None,
    });
    match (queries.next(), queries.next()) {
        (Some(q), None) => Ok(q),
        (None, _) => Err(SyntaxError::new(
            Pos { line: 1, col: 1 },
            "no query",
            "a query (`From x In ...`)",
        )),
        (Some(_), Some(second)) => Err(SyntaxError::new(
            second.query.pos,
            "a second query",
            "one query",
        )),
    }
}

/// Words that cannot name a variable.
const RESERVED: &[&str] = &[
    "from",
    "in",
    "join",
    "on",
    "where",
    "let",
    "groupby",
    "select",
    "and",
    "or",
    "not",
    "startswith",
    "true",
    "false",
    "tracepoint",
    "export",
];

struct Parser {
    toks: Vec<(Tok, Pos)>,
    at: usize,
    depth: usize,
}

fn is_kw(t: &Tok, kw: &str) -> bool {
    matches!(t, Tok::Name(n) if n.eq_ignore_ascii_case(kw))
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.at.min(self.toks.len() - 1)].0
    }

    fn peek_at(&self, ahead: usize) -> &Tok {
        &self.toks[(self.at + ahead).min(self.toks.len() - 1)].0
    }

    fn pos(&self) -> Pos {
        self.toks[self.at.min(self.toks.len() - 1)].1
    }

    fn bump(&mut self) -> (Tok, Pos) {
        let t = self.toks[self.at.min(self.toks.len() - 1)].clone();
        if self.at < self.toks.len() - 1 {
            self.at += 1;
        }
        t
    }

    fn error<T>(&self, expected: &str) -> Result<T, SyntaxError> {
        Err(SyntaxError::new(
            self.pos(),
            &self.peek().describe(),
            expected,
        ))
    }

    fn eat_sym(&mut self, s: &str) -> bool {
        if matches!(self.peek(), Tok::Sym(t) if *t == s) {
            self.bump();
            return true;
        }
        false
    }

    fn expect_sym(&mut self, s: &str) -> Result<(), SyntaxError> {
        if self.eat_sym(s) {
            return Ok(());
        }
        self.error(&format!("`{s}`"))
    }

    fn at_kw(&self, kw: &str) -> bool {
        is_kw(self.peek(), kw)
    }

    fn eat_kw(&mut self, kw: &str) -> bool {
        if self.at_kw(kw) {
            self.bump();
            return true;
        }
        false
    }

    fn expect_kw(&mut self, kw: &str, expected: &str) -> Result<(), SyntaxError> {
        if self.eat_kw(kw) {
            return Ok(());
        }
        self.error(expected)
    }

    /// Any name (tracepoint, query, dotted reference).
    fn name(&mut self, expected: &str) -> Result<Name, SyntaxError> {
        match self.peek() {
            Tok::Name(n) => {
                let text = n.clone();
                let (_, pos) = self.bump();
                Ok(Name { text, pos })
            }
            _ => self.error(expected),
        }
    }

    /// A new variable: one undotted, unreserved name.
    fn variable(&mut self, expected: &str) -> Result<Name, SyntaxError> {
        match self.peek() {
            Tok::Name(n)
                if !n.contains('.') && !RESERVED.iter().any(|r| n.eq_ignore_ascii_case(r)) =>
            {
                self.name(expected)
            }
            _ => self.error(expected),
        }
    }

    /// `item {, item}`.
    fn comma_list<T>(
        &mut self,
        mut item: impl FnMut(&mut Parser) -> Result<T, SyntaxError>,
    ) -> Result<Vec<T>, SyntaxError> {
        let mut items = vec![item(self)?];
        while self.eat_sym(",") {
            items.push(item(self)?);
        }
        Ok(items)
    }

    /// Which of `all` the next token names, by `keyword`, case-insensitively.
    fn keyword_of<K: Copy, const N: usize>(
        &self,
        all: [K; N],
        keyword: fn(K) -> &'static str,
    ) -> Option<K> {
        match self.peek() {
            Tok::Name(n) => all
                .into_iter()
                .find(|k| n.eq_ignore_ascii_case(keyword(*k))),
            _ => None,
        }
    }

    fn item(&mut self) -> Result<Item, SyntaxError> {
        if self.at_kw("tracepoint") {
            return Ok(Item::Tracepoint(self.tracepoint()?));
        }
        if self.at_kw("from") {
            return Ok(Item::Query(QueryDef {
                name: None,
                query: self.query()?,
            }));
        }
        let label = matches!(self.peek_at(1), Tok::Sym(":" | "="));
        if matches!(self.peek(), Tok::Name(_)) && label {
            let name = self.variable("a query name")?;
            self.bump();
            if !self.at_kw("from") {
                return self.error("`From`, starting the named query");
            }
            return Ok(Item::Query(QueryDef {
                name: Some(name),
                query: self.query()?,
            }));
        }
        self.error("`From`, a query name (`Q1 = From ...`) or `Tracepoint`")
    }

    fn query(&mut self) -> Result<Query, SyntaxError> {
        let pos = self.pos();
        self.expect_kw("from", "`From`")?;
        let var = self.variable("a variable name after `From`")?;
        self.expect_kw("in", "`In`")?;
        let source = self.name("a tracepoint or query name after `In`")?;
        let mut q = Query {
            pos,
            var,
            source,
            joins: Vec::new(),
            clauses: Vec::new(),
            group_by: Vec::new(),
            select: Vec::new(),
        };
        while self.at_kw("join") {
            q.joins.push(self.join()?);
        }
        loop {
            if self.eat_kw("where") {
                q.clauses.push(Clause::Where(self.expr()?));
            } else if self.eat_kw("let") {
                let name = self.variable("a name after `Let`")?;
                self.expect_sym("=")?;
                q.clauses.push(Clause::Let(name, self.expr()?));
            } else {
                break;
            }
        }
        if self.eat_kw("groupby") {
            q.group_by = self.comma_list(Parser::expr)?;
        }
        if !self.eat_kw("select") {
            let expected = if q.group_by.is_empty() {
                "`Join`, `Where`, `Let`, `GroupBy` or `Select`"
            } else {
                "`,` or `Select`"
            };
            return self.error(expected);
        }
        q.select = self.comma_list(Parser::select_item)?;
        Ok(q)
    }

    fn join(&mut self) -> Result<Join, SyntaxError> {
        self.expect_kw("join", "`Join`")?;
        let var = self.variable("a variable name after `Join`")?;
        self.expect_kw("in", "`In`")?;
        let temporal_word = ["first", "mostrecent", "firstn", "mostrecentn"]
            .into_iter()
            .find(|w| self.at_kw(w));
        let (temporal, source) = match temporal_word {
            Some(word) if self.peek_at(1) == &Tok::Sym("(") => {
                self.bump();
                self.bump();
                let n = if word.ends_with('n') {
                    let n = self.count()?;
                    self.expect_sym(",")?;
                    n
                } else {
                    1
                };
                let source = self.name("a tracepoint or query name")?;
                self.expect_sym(")")?;
                let t = if word.starts_with("first") {
                    Temporal::First(n)
                } else {
                    Temporal::MostRecent(n)
                };
                (t, source)
            }
            _ => (
                Temporal::All,
                self.name("a tracepoint, query name or `First(...)`")?,
            ),
        };
        self.expect_kw("on", "`On`")?;
        let before = self.variable("the joined variable before `->`")?;
        self.expect_sym("->")?;
        let after = self.variable("a variable after `->`")?;
        Ok(Join {
            var,
            temporal,
            source,
            before,
            after,
        })
    }

    fn count(&mut self) -> Result<u32, SyntaxError> {
        match self.peek() {
            Tok::Int(n) if (1..=u32::MAX as i64).contains(n) => {
                let n = *n as u32;
                self.bump();
                Ok(n)
            }
            _ => self.error("a count of at least 1"),
        }
    }

    fn select_item(&mut self) -> Result<SelectItem, SyntaxError> {
        let func = match self.peek() {
            Tok::Name(n) => match n.to_ascii_lowercase().as_str() {
                "count" => Some(AggFn::Count),
                "sum" => Some(AggFn::Sum),
                "min" => Some(AggFn::Min),
                "max" => Some(AggFn::Max),
                "average" | "avg" => Some(AggFn::Average),
                _ => None,
            },
            _ => None,
        };
        let Some(func) = func else {
            return Ok(SelectItem::Expr(self.expr()?));
        };
        let pos = self.pos();
        self.bump();
        if func == AggFn::Count {
            // `COUNT`, `COUNT()` and `COUNT(*)` alike.
            if self.eat_sym("(") {
                self.eat_sym("*");
                self.expect_sym(")")?;
            }
            return Ok(SelectItem::Agg {
                func,
                arg: None,
                pos,
            });
        }
        self.expect_sym("(")?;
        let arg = self.expr()?;
        self.expect_sym(")")?;
        Ok(SelectItem::Agg {
            func,
            arg: Some(arg),
            pos,
        })
    }

    fn expr(&mut self) -> Result<Expr, SyntaxError> {
        Ok(self.expr_with_height()?.0)
    }

    /// An expression and its height (1 for a value). Both the parser's recursion and the
    /// tree's height are bounded by [`MAX_NESTING`]: a chain `a + b + c ...` parses in a
    /// loop but builds a tree as deep as it is long, and every walk over it recurses.
    fn expr_with_height(&mut self) -> Result<(Expr, usize), SyntaxError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return self.too_deep();
        }
        let e = self.binary(1);
        self.depth -= 1;
        e
    }

    fn too_deep<T>(&self) -> Result<T, SyntaxError> {
        self.error(&format!("an expression nested at most {MAX_NESTING} deep"))
    }

    /// `height` for a node over children of heights `a` and `b`, if within the bound.
    fn node_height(&self, a: usize, b: usize) -> Result<usize, SyntaxError> {
        let h = a.max(b) + 1;
        if h > MAX_NESTING {
            return self.too_deep();
        }
        Ok(h)
    }

    fn binop(&self) -> Option<BinOp> {
        Some(match self.peek() {
            Tok::Sym("||") => BinOp::Or,
            Tok::Sym("&&") => BinOp::And,
            Tok::Sym("==" | "=") => BinOp::Eq,
            Tok::Sym("!=" | "<>") => BinOp::Ne,
            Tok::Sym("<") => BinOp::Lt,
            Tok::Sym("<=") => BinOp::Le,
            Tok::Sym(">") => BinOp::Gt,
            Tok::Sym(">=") => BinOp::Ge,
            Tok::Sym("+") => BinOp::Add,
            Tok::Sym("-") => BinOp::Sub,
            Tok::Sym("*") => BinOp::Mul,
            Tok::Sym("/") => BinOp::Div,
            Tok::Sym("%") => BinOp::Rem,
            t if is_kw(t, "or") => BinOp::Or,
            t if is_kw(t, "and") => BinOp::And,
            t if is_kw(t, "startswith") => BinOp::StartsWith,
            _ => return None,
        })
    }

    /// Operators binding at least as tight as `level`, left-associative; `Not` sits
    /// between `And` (2) and the comparisons (4), and `In` with the comparisons.
    fn binary(&mut self, level: u8) -> Result<(Expr, usize), SyntaxError> {
        let (mut left, mut height) =
            if level <= 3 && (self.at_kw("not") || self.peek() == &Tok::Sym("!")) {
                let (_, pos) = self.bump();
                self.depth += 1;
                if self.depth > MAX_NESTING {
                    return self.too_deep();
                }
                let inner = self.binary(3);
                self.depth -= 1;
                let (inner, h) = inner?;
                (Expr::Not(Box::new(inner), pos), self.node_height(h, 0)?)
            } else if level <= 5 {
                self.binary(level.max(3) + 1)?
            } else {
                self.unary()?
            };
        if level > 6 {
            return Ok((left, height));
        }
        loop {
            if level <= 4 && self.at_kw("in") && self.peek_at(1) == &Tok::Sym("(") {
                let pos = self.pos();
                self.bump();
                self.bump();
                let mut items = Vec::new();
                loop {
                    let (item, h) = self.expr_with_height()?;
                    height = self.node_height(height, h)?;
                    items.push(item);
                    if !self.eat_sym(",") {
                        break;
                    }
                }
                self.expect_sym(")")?;
                left = Expr::In(Box::new(left), items, pos);
                continue;
            }
            match self.binop() {
                Some(op) if op.level() >= level => {
                    let pos = self.pos();
                    self.bump();
                    let (right, h) = self.binary(op.level() + 1)?;
                    height = self.node_height(height, h)?;
                    left = Expr::Bin(op, Box::new(left), Box::new(right), pos);
                }
                _ => return Ok((left, height)),
            }
        }
    }

    fn unary(&mut self) -> Result<(Expr, usize), SyntaxError> {
        if self.peek() == &Tok::Sym("-") {
            let (_, pos) = self.bump();
            self.depth += 1;
            if self.depth > MAX_NESTING {
                return self.too_deep();
            }
            let inner = self.unary();
            self.depth -= 1;
            let (inner, h) = inner?;
            return Ok((Expr::Neg(Box::new(inner), pos), self.node_height(h, 0)?));
        }
        let pos = self.pos();
        let value = match self.peek().clone() {
            Tok::Int(v) => Expr::Lit(Lit::Int(v), pos),
            Tok::Float(v) => Expr::Lit(Lit::Float(v), pos),
            Tok::Str(s) => Expr::Lit(Lit::Str(s), pos),
            Tok::Sym("(") => {
                self.bump();
                let e = self.expr_with_height()?;
                self.expect_sym(")")?;
                return Ok(e);
            }
            Tok::Name(n) if n.eq_ignore_ascii_case("true") || n.eq_ignore_ascii_case("false") => {
                Expr::Lit(Lit::Bool(n.eq_ignore_ascii_case("true")), pos)
            }
            Tok::Name(n) if !RESERVED.iter().any(|r| n.eq_ignore_ascii_case(r)) => {
                return Ok((Expr::Ref(self.name("a value")?), 1));
            }
            _ => return self.error("a value: a number, a string, a variable or `(`"),
        };
        self.bump();
        Ok((value, 1))
    }

    fn tracepoint(&mut self) -> Result<TracepointDef, SyntaxError> {
        self.expect_kw("tracepoint", "`Tracepoint`")?;
        let name = self.name("the tracepoint's name")?;
        self.expect_sym("=")?;
        let mut probes = vec![self.probe()?];
        while self.eat_sym("|") {
            probes.push(self.probe()?);
        }
        let mut exports = Vec::new();
        if self.eat_kw("export") {
            exports = self.comma_list(Parser::export)?;
        }
        Ok(TracepointDef {
            name,
            probes,
            exports,
        })
    }

    fn probe(&mut self) -> Result<Probe, SyntaxError> {
        let pos = self.pos();
        let Some(kind) = self.keyword_of(ProbeKind::ALL, ProbeKind::keyword) else {
            return self.error("`event`, `span`, `span.enter`, `span.exit` or `span.close`");
        };
        self.bump();
        self.expect_sym("(")?;
        let mut matchers = Vec::new();
        if !self.eat_sym(")") {
            matchers = self.comma_list(Parser::matcher)?;
            self.expect_sym(")")?;
        }
        Ok(Probe {
            kind,
            matchers,
            pos,
        })
    }

    fn matcher(&mut self) -> Result<Matcher, SyntaxError> {
        let pos = self.pos();
        let Some(key) = self.keyword_of(MatchKey::ALL, MatchKey::keyword) else {
            return self.error("`target`, `name`, `level`, `module`, `file`, `line` or `field`");
        };
        self.bump();
        let glob = if self.eat_sym("~") {
            true
        } else if self.eat_sym("=") || self.eat_sym("==") {
            false
        } else {
            return self.error("`=` (exact) or `~` (glob)");
        };
        let value = match (key, self.peek().clone()) {
            (MatchKey::Line, Tok::Int(n)) if !glob && n > 0 => n.to_string(),
            (MatchKey::Line, Tok::Str(s)) if glob => s,
            (MatchKey::Line, _) if glob => {
                return self.error("a glob string after `line ~` (`\"12?\"`)")
            }
            (MatchKey::Line, _) => return self.error("a line number after `line =`"),
            (_, Tok::Str(s)) => s,
            _ => return self.error("a string"),
        };
        self.bump();
        Ok(Matcher {
            key,
            glob,
            value,
            pos,
        })
    }

    fn export(&mut self) -> Result<Export, SyntaxError> {
        let name = self.variable("an export's name")?;
        if !self.eat_sym("=") {
            return Ok(Export {
                field: name.text.clone(),
                name,
                explode: None,
            });
        }
        if self.at_kw("explode") && self.peek_at(1) == &Tok::Sym("(") {
            self.bump();
            self.bump();
            let field = self.field()?;
            let sep = if self.eat_sym(",") {
                match self.peek().clone() {
                    Tok::Str(s) if !s.is_empty() => {
                        self.bump();
                        Some(s)
                    }
                    _ => return self.error("a separator string, not empty"),
                }
            } else {
                None
            };
            self.expect_sym(")")?;
            return Ok(Export {
                name,
                field,
                explode: Some(sep),
            });
        }
        Ok(Export {
            name,
            field: self.field()?,
            explode: None,
        })
    }

    /// A callsite field: a name, or a string for names that are not (`"http.status code"`).
    fn field(&mut self) -> Result<String, SyntaxError> {
        match self.peek().clone() {
            Tok::Name(n) => {
                self.bump();
                Ok(n)
            }
            Tok::Str(s) => {
                self.bump();
                Ok(s)
            }
            _ => self.error("a field name"),
        }
    }
}
