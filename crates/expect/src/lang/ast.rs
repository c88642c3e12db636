//! The syntax tree of an expectations file. Printing it (`Display`) gives text that
//! parses back to the same tree.

use std::fmt;

/// Where a node was written, for errors found after parsing: line and column, 1-based (0
/// in trees built by code). Any two compare equal, so trees compare by what they say, not
/// by where they were written (printing moves everything).
#[derive(Debug, Clone, Copy, Default, Eq)]
pub struct At {
    /// Line.
    pub line: u32,
    /// Column, in characters.
    pub col: u32,
}

impl PartialEq for At {
    fn eq(&self, _: &At) -> bool {
        true
    }
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// A whole file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct File {
    /// Declarations in order.
    pub items: Vec<Item>,
}

/// What a recognizer says about the paths it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Matching paths are expected (unless an invalidator matches too).
    Validator,
    /// Matching paths are unexpected.
    Invalidator,
    /// Only classifies; used by sets and aggregates.
    Recognizer,
}

/// One declaration.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// `validator NAME { limits thread* }`.
    Recognizer(Recognizer),
    /// `fragment validator NAME { limits statement* }`: matches any contiguous part of a
    /// thread.
    Fragment(Fragment),
    /// `validator NAME : EXPR ;` over other recognizers.
    Set {
        /// Role.
        role: Role,
        /// Name.
        name: String,
        /// The combination.
        expr: SetExpr,
    },
    /// `[during(...)] assert(EXPR);`.
    Assert {
        /// The windows it is evaluated over; all paths when none.
        during: Option<During>,
        /// What must hold.
        expr: Expr,
        /// Line of the assertion, for reports.
        line: u32,
    },
}

/// A complete recognizer.
#[derive(Debug, Clone, PartialEq)]
pub struct Recognizer {
    /// Role.
    pub role: Role,
    /// Name.
    pub name: String,
    /// Limits on the whole path.
    pub limits: Vec<Limit>,
    /// Thread patterns.
    pub threads: Vec<ThreadPattern>,
}

/// A fragment recognizer.
#[derive(Debug, Clone, PartialEq)]
pub struct Fragment {
    /// Role.
    pub role: Role,
    /// Name.
    pub name: String,
    /// Limits on the path.
    pub limits: Vec<Limit>,
    /// The statements.
    pub body: Vec<Stmt>,
}

/// `thread NAME(HOST, COUNT) { limits statements }`.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadPattern {
    /// The pattern's name, used by `send` and `recv`.
    pub name: String,
    /// Which hosts it matches.
    pub host: Text,
    /// How many threads it matches.
    pub count: Range,
    /// Limits on each matching thread.
    pub limits: Vec<Limit>,
    /// The statements.
    pub body: Vec<Stmt>,
}

/// A name, host or notice matcher.
#[derive(Debug, Clone, PartialEq)]
pub enum Text {
    /// `"..."`: exactly this.
    Exact(String),
    /// `m/.../`: a regular expression, searched for; checked when compiled (Pip's are
    /// PCRE's, which the parser does not judge).
    Regex(String, At),
    /// `*`: anything.
    Any,
    /// `$v`: the name a variable bound.
    Var(String),
    /// A bare name: a thread pattern (in `send`/`recv`) or an exact name.
    Name(String),
    /// `!TEXT`: anything the text does not match (Pip's `!"client0"`).
    Not(Box<Text>),
}

/// A count: Pip's integer expression, as in `repeat $z*2 {...}` or `$z = $n*$n;`.
#[derive(Debug, Clone, PartialEq)]
pub enum Count {
    /// A literal.
    Num(u64),
    /// `$NAME`: a parameter, or a variable bound earlier in the thread.
    Var(String),
    /// `instances(R)`, `unique(R)` or `unique($v)`: Pip's grammar allows these aggregates
    /// over all paths in a count; the compiler refuses them, naming where.
    Aggregate {
        /// `instances` or `unique`.
        function: String,
        /// The recognizer's name ([`Text::Name`]) or a variable ([`Text::Var`]).
        of: Text,
        /// Where it was written.
        at: At,
    },
    /// `a + b`, `a - b` or `a * b` (`*` binds tighter; both left to right).
    Bin(&'static str, Box<Count>, Box<Count>),
}

/// What `$v = VALUE;` assigns.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A name matcher: `"Foo"`, `m/re/`, `*`, `!"a"`, or another variable's value (`$y`).
    Text(Text),
    /// A count: `2`, `$n*$n`, `($y)`.
    Count(Count),
}

/// A count range, `N` or `{MIN, MAX}`.
#[derive(Debug, Clone, PartialEq)]
pub struct Range {
    /// Least.
    pub low: Count,
    /// Most.
    pub high: Count,
}

/// One statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Stmt {
    /// `task(NAME) LIMITS;` or with a body of nested events.
    Task {
        /// The task's name.
        name: Text,
        /// Limits on it.
        limits: Vec<Limit>,
        /// Its nested events; `None` for `task(...);`, which takes any.
        body: Option<Vec<Stmt>>,
    },
    /// `notice(TEXT);`.
    Notice(Text),
    /// `send(PEERS) LIMITS;` and `recv(PEERS) LIMITS;`.
    Message {
        /// Send (`true`) or receive.
        send: bool,
        /// Thread pattern names or host strings the message goes to or comes from.
        peers: Vec<Text>,
        /// Limits on the message (SIZE, LATENCY).
        limits: Vec<Limit>,
    },
    /// `repeat N stmt`, `repeat between A and B stmt`.
    Repeat {
        /// Least times.
        low: Count,
        /// Most times.
        high: Count,
        /// `between` was written (prints back the same way).
        between: bool,
        /// What repeats.
        body: Box<Stmt>,
    },
    /// `maybe stmt`.
    Maybe(Box<Stmt>),
    /// `xor { branch: ... branch: ... }`.
    Xor(Vec<Vec<Stmt>>),
    /// `any();`.
    Any,
    /// `call(FRAGMENT);` (Pip's include).
    Call(String),
    /// `future [NAME] stmt`.
    Future {
        /// Its name, for `done`.
        name: Option<String>,
        /// What must match, now or later.
        body: Box<Stmt>,
    },
    /// `done(NAME);`.
    Done(String),
    /// `{ statements }`.
    Block(Vec<Stmt>),
    /// `$v = stmt`: binds what `stmt` matched (a task's name, a repeat's count, a notice's
    /// text, a message's peer).
    Bind {
        /// The variable.
        var: String,
        /// The statement.
        body: Box<Stmt>,
    },
    /// `$v = VALUE;`: binds a value, from here on (Pip's `$x = "Foo";`, `$z = 2;`).
    Assign {
        /// The variable.
        var: String,
        /// Its new value.
        value: Value,
    },
}

/// `limit(METRIC, SPEC)`, or `level(N)` (see [`LimitForm::Level`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// The metric, e.g. `REAL_TIME`.
    pub metric: String,
    /// Least allowed.
    pub low: Option<Quantity>,
    /// Most allowed.
    pub high: Option<Quantity>,
    /// How it was written, so it prints back the same way.
    pub form: LimitForm,
}

/// The written forms of a limit's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitForm {
    /// `10ms`: an upper bound.
    Upper,
    /// `{1ms, 10ms}`.
    Between,
    /// `{1ms+}`: a lower bound.
    AtLeast,
    /// `{=4kb}`.
    Exactly,
    /// `level(N)`, with N as `high` and the metric `level`: Pip keeps it in the list of
    /// limits and ignores it when checking, and so does Causeway.
    Level,
}

/// A number with its unit, or a parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Quantity {
    /// A literal: the number and unit as written.
    Lit {
        /// Number.
        value: f64,
        /// Unit (`ns us ms s`, `b kb mb`), empty when none.
        unit: String,
    },
    /// `$NAME`.
    Var(String),
    /// Arithmetic or an aggregate as a limit's bound (Pip's `count_range` and `unit_qty`:
    /// `{$n, $n*2}`, `average(REAL_TIME, R)`); only in limits. Numbers and parameters are
    /// computed when compiling; an aggregate is refused there, naming where.
    Expr(Box<Expr>, At),
}

/// `during(T0, T1)` or `during(any N)`.
#[derive(Debug, Clone, PartialEq)]
pub enum During {
    /// A fixed window.
    Between(Quantity, Quantity),
    /// Every window of this length (sliding).
    Any(Quantity),
}

/// A combination of recognizers.
#[derive(Debug, Clone, PartialEq)]
pub enum SetExpr {
    /// A recognizer by name.
    Name(String),
    /// `!A`.
    Not(Box<SetExpr>),
    /// `A && B`.
    And(Box<SetExpr>, Box<SetExpr>),
    /// `A || B`.
    Or(Box<SetExpr>, Box<SetExpr>),
    /// `A -> B`.
    Implies(Box<SetExpr>, Box<SetExpr>),
}

/// An aggregate expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A number, with its unit.
    Num(Quantity),
    /// A function call: `instances(R)`, `average(METRIC, R)`, `sqrt(x)`...
    Call(String, Vec<Expr>),
    /// A recognizer name, metric name, or task name string as an argument.
    Name(String),
    /// A task name pattern as an aggregate's argument: `"name"`, `m/regex/` or `*`.
    Text(Text),
    /// `-x`.
    Neg(Box<Expr>),
    /// `!x`.
    Not(Box<Expr>),
    /// A binary operation (`+ - * / ** < <= > >= == != && || ->`).
    Bin(&'static str, Box<Expr>, Box<Expr>),
    /// `x in {a, b}`, `x in {a+}`, `x in {=a}`.
    In(Box<Expr>, Box<Within>),
}

/// The range of `x in {...}`: Pip's, so `{a, b}` is every value from a to b.
#[derive(Debug, Clone, PartialEq)]
pub enum Within {
    /// `{a, b}`: from a to b, both included.
    Between(Expr, Expr),
    /// `{a+}`: a or more.
    AtLeast(Expr),
    /// `{=a}`: exactly a.
    Exactly(Expr),
}
