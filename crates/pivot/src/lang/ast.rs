//! The syntax tree of query files: tracepoint definitions and queries, every name with
//! its place in the source.

use causeway_model::source::Pos;

/// A parsed file: its definitions and queries in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Script {
    /// Tracepoint definitions and queries, as written.
    pub items: Vec<Item>,
}

/// One statement of a file.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// `Tracepoint NAME = probe | probe Export ...`.
    Tracepoint(TracepointDef),
    /// A query, named (`Q3 = From ...`, or as the paper prints it, `Q3 : From ...`) or not.
    Query(QueryDef),
}

/// A name as written, with where it was written.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Name {
    /// The text (dotted names keep their dots).
    pub text: String,
    /// Where it starts.
    pub pos: Pos,
}

/// A query and the name it may be joined by.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryDef {
    /// `Q3` in `Q3 = From ...`.
    pub name: Option<Name>,
    /// The query.
    pub query: Query,
}

/// `From x In SOURCE {Join ...} {Where ... | Let ...} [GroupBy ...] Select ...`.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// Where `From` is.
    pub pos: Pos,
    /// The From variable.
    pub var: Name,
    /// The tracepoint (or named query) the From variable ranges over.
    pub source: Name,
    /// Happened-before joins, in order.
    pub joins: Vec<Join>,
    /// Where and Let clauses, in order.
    pub clauses: Vec<Clause>,
    /// GroupBy keys; empty without GroupBy.
    pub group_by: Vec<Expr>,
    /// Select items.
    pub select: Vec<SelectItem>,
}

/// `Join y In [Temporal(]SOURCE[)] On y -> z`.
#[derive(Debug, Clone, PartialEq)]
pub struct Join {
    /// The joined variable.
    pub var: Name,
    /// Which of the joined tuples count.
    pub temporal: Temporal,
    /// The tracepoint or named query joined.
    pub source: Name,
    /// The left of `->`: must be `var`.
    pub before: Name,
    /// The right of `->`: the From variable or an earlier joined one.
    pub after: Name,
}

/// Which tuples of a joined source a join keeps, by causal order within the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Temporal {
    /// Every tuple.
    All,
    /// The first `n` (`First` is 1).
    First(u32),
    /// The most recent `n` (`MostRecent` is 1).
    MostRecent(u32),
}

/// A Where or Let clause.
#[derive(Debug, Clone, PartialEq)]
pub enum Clause {
    /// Keeps the tuples for which the expression is true.
    Where(Expr),
    /// Names a computed value.
    Let(Name, Expr),
}

/// One item of Select.
#[derive(Debug, Clone, PartialEq)]
pub enum SelectItem {
    /// A value (a GroupBy key, when there is a GroupBy).
    Expr(Expr),
    /// An aggregate: `COUNT` has no argument.
    Agg {
        /// The function.
        func: AggFn,
        /// Its argument.
        arg: Option<Expr>,
        /// Where it is written.
        pos: Pos,
    },
}

/// The aggregate functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggFn {
    /// How many tuples.
    Count,
    /// Their sum.
    Sum,
    /// The least.
    Min,
    /// The greatest.
    Max,
    /// The mean (carried as sum and count until the end).
    Average,
}

impl AggFn {
    /// The keyword, as printed.
    pub fn keyword(self) -> &'static str {
        match self {
            AggFn::Count => "COUNT",
            AggFn::Sum => "SUM",
            AggFn::Min => "MIN",
            AggFn::Max => "MAX",
            AggFn::Average => "AVERAGE",
        }
    }
}

/// An expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A literal.
    Lit(Lit, Pos),
    /// A variable's export (`x.host`), a joined query's column (`y.x.host`) or a Let name.
    Ref(Name),
    /// `Not e` or `!e`.
    Not(Box<Expr>, Pos),
    /// `-e`.
    Neg(Box<Expr>, Pos),
    /// `a OP b`.
    Bin(BinOp, Box<Expr>, Box<Expr>, Pos),
    /// `e In (a, b, ...)`.
    In(Box<Expr>, Vec<Expr>, Pos),
}

impl Expr {
    /// Where the expression starts (for a binary one, where its operator is).
    pub fn pos(&self) -> Pos {
        match self {
            Expr::Lit(_, p) | Expr::Not(_, p) | Expr::Neg(_, p) => *p,
            Expr::Bin(_, _, _, p) | Expr::In(_, _, p) => *p,
            Expr::Ref(n) => n.pos,
        }
    }
}

/// A literal value.
#[derive(Debug, Clone, PartialEq)]
pub enum Lit {
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string.
    Str(String),
    /// `true` or `false`.
    Bool(bool),
}

/// Binary operators, loosest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `Or`, `||`.
    Or,
    /// `And`, `&&`.
    And,
    /// `==`, `=`.
    Eq,
    /// `!=`, `<>`.
    Ne,
    /// `<`.
    Lt,
    /// `<=`.
    Le,
    /// `>`.
    Gt,
    /// `>=`.
    Ge,
    /// `a StartsWith b`: string prefix.
    StartsWith,
    /// `+`.
    Add,
    /// `-`.
    Sub,
    /// `*`.
    Mul,
    /// `/`.
    Div,
    /// `%`.
    Rem,
}

impl BinOp {
    /// The operator as printed.
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Or => "Or",
            BinOp::And => "And",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::StartsWith => "StartsWith",
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
        }
    }

    /// Binding strength: a higher level binds tighter.
    pub fn level(self) -> u8 {
        match self {
            BinOp::Or => 1,
            BinOp::And => 2,
            BinOp::Eq
            | BinOp::Ne
            | BinOp::Lt
            | BinOp::Le
            | BinOp::Gt
            | BinOp::Ge
            | BinOp::StartsWith => 4,
            BinOp::Add | BinOp::Sub => 5,
            BinOp::Mul | BinOp::Div | BinOp::Rem => 6,
        }
    }
}

/// `Tracepoint NAME = probe {| probe} [Export export {, export}]`.
#[derive(Debug, Clone, PartialEq)]
pub struct TracepointDef {
    /// The name queries use (`DN.DataTransferProtocol`).
    pub name: Name,
    /// The callsites it stands for: any of these.
    pub probes: Vec<Probe>,
    /// The variables it exports beyond the defaults.
    pub exports: Vec<Export>,
}

/// Which callsites, and at which moment of theirs, a tracepoint fires.
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// The moment.
    pub kind: ProbeKind,
    /// All must hold of the callsite's metadata.
    pub matchers: Vec<Matcher>,
    /// Where the probe is written.
    pub pos: Pos,
}

/// The moment of a callsite a probe fires at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// An event.
    Event,
    /// A span's creation (its fields as created).
    Span,
    /// Each entry into a span (every poll, for a future's span).
    SpanEnter,
    /// Each exit from a span.
    SpanExit,
    /// A span's close (its fields as last recorded, and its `duration`).
    SpanClose,
}

impl ProbeKind {
    /// The keyword, as written.
    pub fn keyword(self) -> &'static str {
        match self {
            ProbeKind::Event => "event",
            ProbeKind::Span => "span",
            ProbeKind::SpanEnter => "span.enter",
            ProbeKind::SpanExit => "span.exit",
            ProbeKind::SpanClose => "span.close",
        }
    }

    /// Every kind.
    pub const ALL: [ProbeKind; 5] = [
        ProbeKind::Event,
        ProbeKind::Span,
        ProbeKind::SpanEnter,
        ProbeKind::SpanExit,
        ProbeKind::SpanClose,
    ];
}

/// `key = "exact"` or `key ~ "glob*"` over a callsite's metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct Matcher {
    /// What of the metadata.
    pub key: MatchKey,
    /// True for `~` (a glob with `*` and `?`), false for `=`.
    pub glob: bool,
    /// The text matched.
    pub value: String,
    /// Where the matcher is written.
    pub pos: Pos,
}

/// The parts of a callsite's metadata a matcher may test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchKey {
    /// `target`.
    Target,
    /// `name` (an event's name is `event file:line` unless given).
    Name,
    /// `level`: `trace` ... `error`, any case.
    Level,
    /// `module`.
    Module,
    /// `file`.
    File,
    /// `line`.
    Line,
    /// `field`: the callsite has a field of this name.
    Field,
}

impl MatchKey {
    /// The keyword, as written.
    pub fn keyword(self) -> &'static str {
        match self {
            MatchKey::Target => "target",
            MatchKey::Name => "name",
            MatchKey::Level => "level",
            MatchKey::Module => "module",
            MatchKey::File => "file",
            MatchKey::Line => "line",
            MatchKey::Field => "field",
        }
    }

    /// Every key.
    pub const ALL: [MatchKey; 7] = [
        MatchKey::Target,
        MatchKey::Name,
        MatchKey::Level,
        MatchKey::Module,
        MatchKey::File,
        MatchKey::Line,
        MatchKey::Field,
    ];
}

/// `name`, `name = field` or `name = explode(field[, "separator"])`.
#[derive(Debug, Clone, PartialEq)]
pub struct Export {
    /// The variable queries read.
    pub name: Name,
    /// The callsite's field it comes from.
    pub field: String,
    /// One tuple per element: `None` for an unexploded field; `Some(None)` splits a
    /// Debug-printed list (`["A", "B"]`), `Some(Some(sep))` splits on `sep`.
    pub explode: Option<Option<String>>,
}
