//! Compiles recognizers to programs for the matcher: statements become instructions,
//! repeats become counted loops, `call` inlines fragments, and parameters become
//! constants. Names that cannot be resolved are reported here, before any path is read.
//!
//! The compiler also marks the loops of `repeat ... notice(...)` that nothing after them
//! can follow with a notice: such a loop must take the whole run of notices where it
//! stands, which the matcher then does at once (see `crate::matcher`).

use std::collections::HashMap;
use std::sync::Arc;

use regex::Regex;

use crate::lang::ast::{self, Count, Expr, LimitForm, Quantity, Stmt, Text, Value};
use crate::units::{scale, Dimension};

/// Why an expectations file cannot be checked although it parses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{context}: {message}")]
pub struct CompileError {
    /// Where: the recognizer (and thread pattern).
    pub context: String,
    /// What is wrong.
    pub message: String,
}

/// Parameters given on the command line (`--param QUORUM=2`), used as `$QUORUM`.
pub type Params = HashMap<String, f64>;

/// A text matcher.
#[derive(Debug, Clone)]
pub enum NameMatch {
    /// Exactly this.
    Exact(Arc<str>),
    /// Searched for.
    Regex(Regex),
    /// Anything.
    Any,
    /// The name bound to a variable (register).
    Reg(usize),
    /// Anything the inner matcher does not match.
    Not(Box<NameMatch>),
}

impl NameMatch {
    pub(crate) fn describe(&self) -> String {
        match self {
            NameMatch::Exact(s) => format!("{s:?}"),
            NameMatch::Regex(r) => format!("m/{}/", r.as_str()),
            NameMatch::Any => "*".into(),
            NameMatch::Reg(_) => "a bound name".into(),
            NameMatch::Not(m) => format!("!{}", m.describe()),
        }
    }
}

/// Metrics limits can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Wall time, ns.
    RealTime,
    /// CPU time, ns.
    CpuTime,
    /// Message size, bytes.
    Size,
    /// Message latency, ns.
    Latency,
    /// Depth of the path.
    Depth,
    /// Messages in the path.
    Messages,
    /// Threads in the path.
    Threads,
    /// Hosts in the path.
    Hosts,
    /// A metric Causeway does not record (Pip's context switches and the like): a limit on
    /// it always holds.
    Unrecorded,
}

impl Metric {
    /// The metric of a name as Pip writes it.
    pub fn of(name: &str) -> Metric {
        match name.to_ascii_uppercase().as_str() {
            "REAL_TIME" => Metric::RealTime,
            "CPU_TIME" => Metric::CpuTime,
            "SIZE" => Metric::Size,
            "LATENCY" => Metric::Latency,
            "DEPTH" => Metric::Depth,
            "MESSAGES" => Metric::Messages,
            "THREADS" => Metric::Threads,
            "HOSTS" => Metric::Hosts,
            _ => Metric::Unrecorded,
        }
    }

    fn dimension(self) -> Option<Dimension> {
        match self {
            Metric::RealTime | Metric::CpuTime | Metric::Latency => Some(Dimension::Time),
            Metric::Size => Some(Dimension::Size),
            _ => None,
        }
    }
}

/// A compiled limit: the metric must lie in `[low, high]`.
#[derive(Debug, Clone)]
pub struct Bound {
    /// The metric.
    pub metric: Metric,
    /// Least (base units: ns, bytes).
    pub low: Option<f64>,
    /// Most.
    pub high: Option<f64>,
    /// As written, for reports.
    pub text: String,
}

impl Bound {
    /// True when `value` (None: not recorded) is within the bound.
    pub fn holds(&self, value: Option<f64>) -> bool {
        let Some(v) = value else { return true };
        self.low.is_none_or(|l| v >= l) && self.high.is_none_or(|h| v <= h)
    }
}

/// Who a message's other end must be.
#[derive(Debug, Clone)]
pub enum Peer {
    /// A thread assigned to this thread pattern (by index in the recognizer).
    Pattern(usize),
    /// A thread on a matching host.
    Host(NameMatch),
}

/// A loop count: a constant, a register, or arithmetic over them.
#[derive(Debug, Clone)]
pub enum Limit {
    /// A constant.
    Const(u32),
    /// The count bound to a variable.
    Reg(usize),
    /// `a + b`, `a - b` (at least 0) or `a * b` over counts known only while matching.
    Calc(Arc<(&'static str, Limit, Limit)>),
}

/// What a register (a variable, or a loop's counter) holds: a `u32` whose top bits say
/// which kind of value the rest is. A variable can be bound to different kinds on
/// different ways through `xor` or `maybe`, so the kind travels with the value.
pub mod held {
    /// Nothing bound yet.
    pub const UNBOUND: u32 = u32::MAX;
    /// The kind bits.
    pub const KIND: u32 = 0b11 << 30;
    /// A count (also the counters of loops).
    pub const COUNT: u32 = 0;
    /// The name of the thread's event at this index (`$x = task(*);`).
    pub const EVENT: u32 = 1 << 30;
    /// The name matcher at this index of [`Program::texts`](super::Program::texts)
    /// (`$x = "Foo";`).
    pub const TEXT: u32 = 2 << 30;
    /// The host of the path's thread at this index: a message's peer (`$h = send(Bar);`).
    pub const PEER: u32 = 3 << 30;
    /// Set when the value, as a name, is negated (`$x = !$y;`).
    pub const NOT: u32 = 1 << 29;
    /// The bits of the count or index; counts saturate here.
    pub const VALUE: u32 = (1 << 29) - 1;

    /// The count a register holds: 0 for anything but a count.
    pub fn count(v: u32) -> u32 {
        if v != UNBOUND && v & (KIND | NOT) == COUNT {
            v
        } else {
            0
        }
    }
}

/// `a op b` over counts, saturating at 0 and at the largest count.
pub fn count_op(op: &str, a: u32, b: u32) -> u32 {
    let v = match op {
        "+" => a.saturating_add(b),
        "-" => a.saturating_sub(b),
        _ => a.saturating_mul(b),
    };
    v.min(held::VALUE)
}

/// What `$v = VALUE;` stores.
#[derive(Debug, Clone)]
pub enum Set {
    /// A count.
    Count(Limit),
    /// The name matcher at this index of [`Program::texts`].
    Text(usize),
    /// What another register holds, negated as a name when `negate`.
    Copy {
        /// The register.
        from: usize,
        /// `$x = !$y;`.
        negate: bool,
    },
}

/// One instruction.
#[derive(Debug, Clone)]
pub enum Op {
    /// A task start with this name; `whole` skips to after its end.
    Task {
        /// Its name.
        name: NameMatch,
        /// Limits on it.
        limits: Vec<Bound>,
        /// `task(...);`: the task and everything in it.
        whole: bool,
        /// Register to bind the task's name to.
        bind: Option<usize>,
    },
    /// The end of the task whose body was matched.
    EndTask,
    /// A notice.
    Notice {
        /// Its text.
        text: NameMatch,
        /// Register to bind its text to.
        bind: Option<usize>,
    },
    /// A send or receive.
    Message {
        /// Send (true) or receive.
        send: bool,
        /// Any of these.
        peers: Vec<Peer>,
        /// Limits.
        limits: Vec<Bound>,
        /// Register to bind the peer's host to.
        bind: Option<usize>,
    },
    /// `$v = VALUE;`.
    Set {
        /// The variable's register.
        reg: usize,
        /// What it gets.
        value: Set,
    },
    /// Any one event, or one whole task.
    AnyOne,
    /// Try the first, then the second.
    Split(usize, usize),
    /// Go to.
    Jump(usize),
    /// Loop head: into the body at the next instruction while the counter is below `max`;
    /// to `exit` once it has reached `low` (an earlier exit could only fail there).
    Loop {
        /// The counter.
        reg: usize,
        /// Least iterations.
        low: Limit,
        /// Most iterations.
        max: Limit,
        /// After the loop.
        exit: usize,
        /// The body is one notice, and nothing after the loop can take a notice: the loop
        /// must take the whole run of notices where it stands, so the matcher does so at
        /// once, without trying each count (see [`mark_notice_runs`]).
        notice_run: bool,
    },
    /// After a loop: the counter must lie in `[low, high]`; copies it to `bind` if given,
    /// then clears it.
    EndLoop {
        /// The counter.
        reg: usize,
        /// Least.
        low: Limit,
        /// Most.
        high: Limit,
        /// Variable to bind the count to.
        bind: Option<usize>,
    },
    /// Counter plus one.
    Count(usize),
    /// Declares a future whose body starts at `body`.
    Future {
        /// Its body.
        body: usize,
    },
    /// End of a future's body: back to where it was started.
    FutureEnd,
    /// The futures of this name must have matched.
    Done(Arc<str>),
    /// The end of the pattern.
    Accept,
}

/// A compiled thread pattern (or fragment).
#[derive(Debug, Clone)]
pub struct Program {
    /// Instructions; execution starts at 0.
    pub ops: Vec<Op>,
    /// The name of each future, by its body's first instruction.
    pub future_names: HashMap<usize, Arc<str>>,
    /// Registers used.
    pub regs: usize,
    /// The name matchers assigned to variables (`$x = "Foo";`), by index.
    pub texts: Vec<NameMatch>,
    /// The name of the task every matching thread must begin with, when the program
    /// starts with `task("...")`: a cheap test before running it.
    pub first_task: Option<Arc<str>>,
    /// Whether a message names a thread pattern, so the outcome depends on the others.
    pub uses_patterns: bool,
}

/// A compiled thread pattern.
#[derive(Debug, Clone)]
pub struct ThreadProgram {
    /// The pattern's name.
    pub name: String,
    /// Hosts it matches.
    pub host: NameMatch,
    /// Least threads.
    pub low: u32,
    /// Most threads.
    pub high: u32,
    /// Limits on each thread.
    pub limits: Vec<Bound>,
    /// Its statements.
    pub program: Program,
}

struct Compiler<'a> {
    ops: Vec<Op>,
    texts: Vec<NameMatch>,
    future_names: HashMap<usize, Arc<str>>,
    vars: HashMap<String, usize>,
    regs: usize,
    params: &'a Params,
    fragments: &'a HashMap<String, &'a ast::Fragment>,
    patterns: &'a [String],
    context: String,
    calls: Vec<String>,
}

/// Largest program, so a file with huge nested repeats fails clearly instead of eating memory.
const MAX_OPS: usize = 1 << 20;

impl Compiler<'_> {
    fn err<T>(&self, message: String) -> Result<T, CompileError> {
        Err(CompileError {
            context: self.context.clone(),
            message,
        })
    }

    fn emit(&mut self, op: Op) -> Result<usize, CompileError> {
        if self.ops.len() >= MAX_OPS {
            return self.err(format!("the program passes {MAX_OPS} instructions"));
        }
        self.ops.push(op);
        Ok(self.ops.len() - 1)
    }

    fn reg(&mut self) -> usize {
        self.regs += 1;
        self.regs - 1
    }

    fn var(&mut self, name: &str) -> usize {
        if let Some(&r) = self.vars.get(name) {
            return r;
        }
        let r = self.reg();
        self.vars.insert(name.to_string(), r);
        r
    }

    fn name(&mut self, t: &Text) -> Result<NameMatch, CompileError> {
        Ok(match t {
            Text::Exact(s) | Text::Name(s) => NameMatch::Exact(Arc::from(s.as_str())),
            Text::Regex(r, at) => NameMatch::Regex(regex(r, *at).or_else(|m| self.err(m))?),
            Text::Any => NameMatch::Any,
            Text::Not(t) => NameMatch::Not(Box::new(self.name(t)?)),
            Text::Var(v) => match self.params.get(v) {
                Some(p) => NameMatch::Exact(Arc::from(p.to_string().as_str())),
                None => match self.vars.get(v) {
                    Some(&r) => NameMatch::Reg(r),
                    None => return self.err(format!("${v} is used before anything is bound to it, and no --param {v}=... is given")),
                },
            },
        })
    }

    fn count(&self, c: &Count) -> Result<Limit, CompileError> {
        match c {
            Count::Num(n) => Ok(Limit::Const((*n).min(held::VALUE as u64) as u32)),
            Count::Var(v) => match self.params.get(v) {
                Some(&p) if p >= 0.0 && p.fract() == 0.0 => {
                    Ok(Limit::Const(p.min(held::VALUE as f64) as u32))
                }
                Some(p) => self.err(format!("${v} is {p}, not a count")),
                None => match self.vars.get(v) {
                    Some(&r) => Ok(Limit::Reg(r)),
                    None => self.err(format!(
                        "${v} is not bound here and no --param {v}=... is given"
                    )),
                },
            },
            Count::Aggregate { .. } => self.err(aggregate_count(c)),
            Count::Bin(op, a, b) => Ok(match (self.count(a)?, self.count(b)?) {
                (Limit::Const(x), Limit::Const(y)) => Limit::Const(count_op(op, x, y)),
                (x, y) => Limit::Calc(Arc::new((op, x, y))),
            }),
        }
    }

    /// A text assigned to a variable: a matcher fixed now, or another register's value.
    fn literal(&self, t: &Text) -> Result<Literal, CompileError> {
        Ok(match t {
            Text::Exact(s) | Text::Name(s) => Literal::Fixed(NameMatch::Exact(Arc::from(s.as_str()))),
            Text::Regex(r, at) => Literal::Fixed(NameMatch::Regex(regex(r, *at).or_else(|m| self.err(m))?)),
            Text::Any => Literal::Fixed(NameMatch::Any),
            Text::Not(t) => match self.literal(t)? {
                Literal::Fixed(m) => Literal::Fixed(NameMatch::Not(Box::new(m))),
                Literal::Count(n) => Literal::Fixed(NameMatch::Not(Box::new(NameMatch::Exact(
                    Arc::from(n.to_string().as_str()),
                )))),
                Literal::Copy(r, negate) => Literal::Copy(r, !negate),
            },
            Text::Var(v) => match self.params.get(v) {
                Some(&p) if p >= 0.0 && p.fract() == 0.0 => {
                    Literal::Count(p.min(held::VALUE as f64) as u32)
                }
                Some(p) => Literal::Fixed(NameMatch::Exact(Arc::from(p.to_string().as_str()))),
                None => match self.vars.get(v) {
                    Some(&r) => Literal::Copy(r, false),
                    None => return self.err(format!("${v} is used before anything is bound to it, and no --param {v}=... is given")),
                },
            },
        })
    }

    fn stmts(&mut self, body: &[Stmt]) -> Result<(), CompileError> {
        for s in body {
            self.stmt(s, None)?;
        }
        Ok(())
    }

    fn stmt(&mut self, s: &Stmt, bind: Option<usize>) -> Result<(), CompileError> {
        match s {
            Stmt::Task { name, limits, body } => {
                let name = self.name(name)?;
                let limits = limits_of(limits, self.params).or_else(|m| self.err(m))?;
                self.emit(Op::Task {
                    name,
                    limits,
                    whole: body.is_none(),
                    bind,
                })?;
                if let Some(b) = body {
                    self.stmts(b)?;
                    self.emit(Op::EndTask)?;
                }
            }
            Stmt::Notice(t) => {
                let text = self.name(t)?;
                self.emit(Op::Notice { text, bind })?;
            }
            Stmt::Message {
                send,
                peers,
                limits,
            } => {
                let mut ps = Vec::new();
                for p in peers {
                    ps.push(match p {
                        Text::Name(n) => match self.patterns.iter().position(|x| x == n) {
                            Some(i) => Peer::Pattern(i),
                            None => Peer::Host(NameMatch::Exact(Arc::from(n.as_str()))),
                        },
                        other => Peer::Host(self.name(other)?),
                    });
                }
                let limits = limits_of(limits, self.params).or_else(|m| self.err(m))?;
                self.emit(Op::Message {
                    send: *send,
                    peers: ps,
                    limits,
                    bind,
                })?;
            }
            Stmt::Repeat {
                low, high, body, ..
            } => {
                let (low, high) = (self.count(low)?, self.count(high)?);
                self.repeat(body, low, high, bind)?;
            }
            Stmt::Maybe(body) => self.repeat(body, Limit::Const(0), Limit::Const(1), bind)?,
            Stmt::Xor(branches) => {
                let mut jumps = Vec::new();
                for (i, b) in branches.iter().enumerate() {
                    if i + 1 < branches.len() {
                        let split = self.emit(Op::Split(0, 0))?;
                        self.stmts(b)?;
                        jumps.push(self.emit(Op::Jump(0))?);
                        let next = self.ops.len();
                        self.ops[split] = Op::Split(split + 1, next);
                    } else {
                        self.stmts(b)?;
                    }
                }
                let end = self.ops.len();
                for j in jumps {
                    self.ops[j] = Op::Jump(end);
                }
            }
            Stmt::Any => {
                let head = self.emit(Op::Split(0, 0))?;
                self.emit(Op::AnyOne)?;
                self.emit(Op::Jump(head))?;
                let end = self.ops.len();
                self.ops[head] = Op::Split(head + 1, end);
            }
            Stmt::Call(name) => {
                let Some(f) = self.fragments.get(name).copied() else {
                    return self.err(format!("call({name}): no fragment named {name}"));
                };
                if self.calls.contains(name) {
                    return self.err(format!("call({name}) calls itself"));
                }
                if self.calls.len() >= crate::lang::MAX_NESTING {
                    return self.err(format!(
                        "call({name}): fragments call fragments more than {} deep",
                        crate::lang::MAX_NESTING
                    ));
                }
                self.calls.push(name.clone());
                self.stmts(&f.body)?;
                self.calls.pop();
            }
            Stmt::Future { name, body } => {
                let at = self.emit(Op::Future { body: 0 })?;
                let skip = self.emit(Op::Jump(0))?;
                let start = self.ops.len();
                self.stmt(body, None)?;
                self.emit(Op::FutureEnd)?;
                let end = self.ops.len();
                self.ops[at] = Op::Future { body: start };
                self.ops[skip] = Op::Jump(end);
                if let Some(n) = name {
                    self.future_names.insert(start, Arc::from(n.as_str()));
                }
            }
            Stmt::Done(n) => {
                self.emit(Op::Done(Arc::from(n.as_str())))?;
            }
            Stmt::Block(b) => self.stmts(b)?,
            Stmt::Bind { var, body } => {
                let r = self.var(var);
                self.stmt(body, Some(r))?;
            }
            Stmt::Assign { var, value } => {
                // The value first: `$x = $x + 1` reads the `$x` bound before.
                let value = match value {
                    Value::Count(c) => Set::Count(self.count(c)?),
                    Value::Text(t) => match self.literal(t)? {
                        Literal::Fixed(m) => {
                            self.texts.push(m);
                            Set::Text(self.texts.len() - 1)
                        }
                        Literal::Count(n) => Set::Count(Limit::Const(n)),
                        Literal::Copy(from, negate) => Set::Copy { from, negate },
                    },
                };
                let reg = self.var(var);
                self.emit(Op::Set { reg, value })?;
                // `$a = $b = 2;`
                if let Some(b) = bind {
                    self.emit(Op::Set {
                        reg: b,
                        value: Set::Copy {
                            from: reg,
                            negate: false,
                        },
                    })?;
                }
            }
        }
        Ok(())
    }

    fn repeat(
        &mut self,
        body: &Stmt,
        low: Limit,
        high: Limit,
        bind: Option<usize>,
    ) -> Result<(), CompileError> {
        let reg = self.reg();
        let head = self.emit(Op::Loop {
            reg,
            low: low.clone(),
            max: high.clone(),
            exit: 0,
            notice_run: false,
        })?;
        self.stmt(body, None)?;
        self.emit(Op::Count(reg))?;
        self.emit(Op::Jump(head))?;
        let exit = self.emit(Op::EndLoop {
            reg,
            low: low.clone(),
            high: high.clone(),
            bind,
        })?;
        self.ops[head] = Op::Loop {
            reg,
            low,
            max: high,
            exit,
            notice_run: false,
        };
        Ok(())
    }
}

/// A text assigned to a variable, compiled.
enum Literal {
    /// A matcher fixed at compile time.
    Fixed(NameMatch),
    /// A whole-number parameter: a count, or as a name its digits.
    Count(u32),
    /// Another register's value, negated when true.
    Copy(usize, bool),
}

/// Why an aggregate cannot be a count.
fn aggregate_count(c: &Count) -> String {
    match c {
        Count::Aggregate { function, of, at } => format!(
            "{at}: {function}({of}) counts paths across the whole check, but this count is needed while one path is matched; Causeway cannot check it here (use it in an assert)"
        ),
        _ => String::new(),
    }
}

/// A count known when compiling: numbers, parameters and arithmetic over them.
fn constant_count(c: &Count, params: &Params) -> Result<u32, String> {
    match c {
        Count::Num(n) => Ok((*n).min(held::VALUE as u64) as u32),
        Count::Var(v) => match params.get(v) {
            Some(&p) if p >= 0.0 && p.fract() == 0.0 => Ok(p.min(held::VALUE as f64) as u32),
            _ => Err(format!("${v} needs a whole number: give --param {v}=N")),
        },
        Count::Aggregate { .. } => Err(aggregate_count(c)),
        Count::Bin(op, a, b) => Ok(count_op(
            op,
            constant_count(a, params)?,
            constant_count(b, params)?,
        )),
    }
}

/// Compiles the regex `m/r/` written at `at`. Pip's regexes are PCRE's; the few PCRE
/// features the engine here lacks (backreferences, lookaround) are refused by place.
pub fn regex(r: &str, at: ast::At) -> Result<Regex, String> {
    Regex::new(r).map_err(|e| {
        let msg = e.to_string();
        let why = msg.lines().last().unwrap_or("").trim();
        let why = why.strip_prefix("error: ").unwrap_or(why);
        format!("{at}: m/{r}/ is not a regex Causeway can run ({why})")
    })
}

/// Compiles limits, converting units to ns and bytes.
pub fn limits_of(limits: &[ast::Limit], params: &Params) -> Result<Vec<Bound>, String> {
    limits
        .iter()
        .filter(|l| l.form != LimitForm::Level)
        .map(|l| {
            let metric = Metric::of(&l.metric);
            let q = |q: &Option<Quantity>| -> Result<Option<f64>, String> {
                q.as_ref()
                    .map(|q| quantity(q, metric, &l.metric, params))
                    .transpose()
            };
            let (low, high) = match l.form {
                LimitForm::Upper => (None, q(&l.high)?),
                _ => (q(&l.low)?, q(&l.high)?),
            };
            Ok(Bound {
                metric,
                low,
                high,
                text: l.to_string(),
            })
        })
        .collect()
}

/// `x op y` for the operators of aggregate expressions; comparisons and logic give 1 or 0.
pub fn binary(op: &str, x: f64, y: f64) -> Option<f64> {
    let truth = |b: bool| Some(if b { 1.0 } else { 0.0 });
    match op {
        "+" => Some(x + y),
        "-" => Some(x - y),
        "*" => Some(x * y),
        "/" => Some(x / y),
        "**" => Some(x.powf(y)),
        "<" => truth(x < y),
        "<=" => truth(x <= y),
        ">" => truth(x > y),
        ">=" => truth(x >= y),
        "==" => truth(x == y),
        "!=" => truth(x != y),
        "&&" => truth(x != 0.0 && y != 0.0),
        "||" => truth(x != 0.0 || y != 0.0),
        "->" => truth(x == 0.0 || y != 0.0),
        _ => None,
    }
}

/// Pip's functions of one number: `log` (base 10), `ln`, `exp`, `sqrt`.
pub fn function(f: &str, x: f64) -> Option<f64> {
    match f {
        "log" => Some(x.log10()),
        "ln" => Some(x.ln()),
        "exp" => Some(x.exp()),
        "sqrt" => Some(x.sqrt()),
        _ => None,
    }
}

/// A limit's bound written as an expression, computed now: numbers (in base units),
/// parameters, arithmetic and functions. `at` is where the bound was written.
fn constant(
    e: &Expr,
    metric: Metric,
    name: &str,
    params: &Params,
    at: ast::At,
) -> Result<f64, String> {
    let c = |e: &Expr| constant(e, metric, name, params, at);
    match e {
        Expr::Num(q) => quantity(q, metric, name, params),
        Expr::Neg(x) => Ok(-c(x)?),
        Expr::Not(x) => Ok(if c(x)? == 0.0 { 1.0 } else { 0.0 }),
        Expr::Bin(op, a, b) => binary(op, c(a)?, c(b)?)
            .ok_or_else(|| format!("{at}: unknown operator {op}")),
        Expr::Call(f, args) if args.len() == 1 && function(f, 1.0).is_some() => {
            Ok(function(f, c(&args[0])?).unwrap_or(f64::NAN))
        }
        Expr::Call(f, _) if ["instances", "unique", "average", "stddev", "min", "max"].contains(&f.as_str()) => Err(format!(
            "{at}: {e} is an aggregate over every checked path, but a limit is checked on each path alone; Causeway cannot check it as a bound (use it in an assert)"
        )),
        other => Err(format!("{at}: {other} is not a number a limit can be")),
    }
}

/// A quantity in base units (ns, bytes; plain numbers as they are).
pub fn quantity(q: &Quantity, metric: Metric, name: &str, params: &Params) -> Result<f64, String> {
    match q {
        Quantity::Expr(e, at) => constant(e, metric, name, params, *at),
        Quantity::Var(v) => params
            .get(v)
            .copied()
            .ok_or_else(|| format!("${v} has no value: give --param {v}=...")),
        Quantity::Lit { value, unit } if unit.is_empty() => Ok(*value),
        Quantity::Lit { value, unit } => {
            let (dim, factor) = scale(unit).ok_or_else(|| format!("unknown unit {unit:?}"))?;
            if metric.dimension().is_some_and(|d| d != dim) {
                return Err(format!("{name} cannot be measured in {unit}"));
            }
            Ok(value * factor)
        }
    }
}

/// Compiles the statements of a thread pattern or fragment.
pub fn compile(
    body: &[Stmt],
    params: &Params,
    fragments: &HashMap<String, &ast::Fragment>,
    patterns: &[String],
    context: String,
) -> Result<Program, CompileError> {
    let mut c = Compiler {
        ops: Vec::new(),
        texts: Vec::new(),
        future_names: HashMap::new(),
        vars: HashMap::new(),
        regs: 0,
        params,
        fragments,
        patterns,
        context,
        calls: Vec::new(),
    };
    c.stmts(body)?;
    c.emit(Op::Accept)?;
    mark_notice_runs(&mut c.ops);
    let first_task = first_task(&c.ops);
    let uses_patterns = c.ops.iter().any(|op| {
        matches!(op, Op::Message { peers, .. } if peers.iter().any(|p| matches!(p, Peer::Pattern(_))))
    });
    Ok(Program {
        ops: c.ops,
        future_names: c.future_names,
        regs: c.regs,
        texts: c.texts,
        first_task,
        uses_patterns,
    })
}

/// Marks the loops that must take a whole run of notices: `repeat between A and B
/// notice(...)` (Pip's way to let a task log what it likes, and what generated patterns put
/// between statements) whose next event, whatever way the program goes on, cannot be a
/// notice. Trying each count there is what made matching branch at every statement.
fn mark_notice_runs(ops: &mut [Op]) {
    for i in 0..ops.len() {
        let Op::Loop { reg, exit, .. } = ops[i] else {
            continue;
        };
        let shaped = exit == i + 4
            && matches!(ops.get(i + 1), Some(Op::Notice { bind: None, .. }))
            && matches!(ops.get(i + 2), Some(Op::Count(r)) if *r == reg)
            && matches!(ops.get(i + 3), Some(Op::Jump(t)) if *t == i)
            && matches!(ops.get(i + 4), Some(Op::EndLoop { bind: None, .. }));
        if shaped && !may_take_a_notice(ops, exit + 1) {
            if let Op::Loop { notice_run, .. } = &mut ops[i] {
                *notice_run = true;
            }
        }
    }
}

/// Whether the first event consumed from `from` on may be a notice, any way the program
/// goes on; true where that is not known (a future may match next, or a future's body
/// ends and goes back to where it was started).
fn may_take_a_notice(ops: &[Op], from: usize) -> bool {
    let mut seen = vec![false; ops.len()];
    let mut todo = vec![from];
    while let Some(pc) = todo.pop() {
        let Some(was) = seen.get_mut(pc) else {
            return true;
        };
        if std::mem::replace(was, true) {
            continue;
        }
        match &ops[pc] {
            Op::Notice { .. } | Op::AnyOne | Op::Future { .. } | Op::FutureEnd => return true,
            // Past the end a notice left over fails the match; a fragment's end is checked
            // by the matcher, which takes no run at once for fragments.
            Op::Task { .. } | Op::EndTask | Op::Message { .. } | Op::Accept => {}
            Op::Split(a, b) => todo.extend([*a, *b]),
            Op::Jump(t) => todo.push(*t),
            Op::Loop { exit, .. } => todo.extend([pc + 1, *exit]),
            Op::Set { .. } | Op::Count(_) | Op::EndLoop { .. } | Op::Done(_) => todo.push(pc + 1),
        }
    }
    false
}

/// The one task name every thread the program matches must begin with, when there is one.
/// A thread's first event is always a task start, so only the instructions that can be
/// passed without consuming an event (loops, splits, counters, `$v = ...`) lead to the
/// first one consumed; a notice, message or task end there cannot match and ends that
/// way. A generated pattern begins with `repeat between 0 and 9 notice(*)`, which must
/// repeat 0 times, and this sees through it. Unknown (`None`) when a way reaches a task
/// of another name or any name, any event, the end, or a future (which may match first).
fn first_task(ops: &[Op]) -> Option<Arc<str>> {
    let mut found: Option<Arc<str>> = None;
    let mut seen = vec![false; ops.len()];
    let mut todo = vec![0usize];
    while let Some(pc) = todo.pop() {
        if std::mem::replace(seen.get_mut(pc)?, true) {
            continue;
        }
        match ops.get(pc)? {
            Op::Task {
                name: NameMatch::Exact(n),
                ..
            } => match &found {
                Some(f) if f != n => return None,
                _ => found = Some(n.clone()),
            },
            Op::Task { .. } | Op::AnyOne | Op::Accept | Op::Future { .. } | Op::FutureEnd => {
                return None
            }
            Op::EndTask | Op::Notice { .. } | Op::Message { .. } => {}
            Op::Split(a, b) => todo.extend([*a, *b]),
            Op::Jump(t) => todo.push(*t),
            Op::Loop { exit, .. } => todo.extend([pc + 1, *exit]),
            Op::Set { .. } | Op::Count(_) | Op::EndLoop { .. } | Op::Done(_) => todo.push(pc + 1),
        }
    }
    found
}

/// A thread pattern's host matcher: a `$var` there is a parameter.
fn host(t: &Text, params: &Params) -> Result<NameMatch, String> {
    Ok(match t {
        Text::Exact(s) | Text::Name(s) => NameMatch::Exact(Arc::from(s.as_str())),
        Text::Regex(re, at) => NameMatch::Regex(regex(re, *at)?),
        Text::Any => NameMatch::Any,
        Text::Not(t) => NameMatch::Not(Box::new(host(t, params)?)),
        Text::Var(v) => match params.get(v) {
            Some(p) => NameMatch::Exact(Arc::from(p.to_string().as_str())),
            None => return Err(format!("${v} has no value: give --param {v}=...")),
        },
    })
}

/// Compiles a recognizer's thread patterns.
pub fn compile_threads(
    r: &ast::Recognizer,
    params: &Params,
    fragments: &HashMap<String, &ast::Fragment>,
) -> Result<Vec<ThreadProgram>, CompileError> {
    let names: Vec<String> = r.threads.iter().map(|t| t.name.clone()).collect();
    r.threads
        .iter()
        .map(|t| {
            let context = format!("{} {}, thread {}", r.role, r.name, t.name);
            let fail = |message: String| CompileError {
                context: context.clone(),
                message,
            };
            let count = |c: &Count| constant_count(c, params).map_err(fail);
            let host = host(&t.host, params).map_err(fail)?;
            Ok(ThreadProgram {
                name: t.name.clone(),
                host,
                low: count(&t.count.low)?,
                high: count(&t.count.high)?,
                limits: limits_of(&t.limits, params).map_err(fail)?,
                program: compile(&t.body, params, fragments, &names, context.clone())?,
            })
        })
        .collect()
}
