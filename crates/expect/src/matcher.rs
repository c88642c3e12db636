//! Runs a compiled thread pattern over one thread. Every way the variants and futures can
//! match is explored (depth first, so the common case ends early), each state at most
//! once: a state is the instruction, the event position, the futures pending, the
//! return points of running futures and the counters. Revisits are cut, which keeps
//! typical patterns linear in the thread's length; a step budget ends pathological ones
//! as undecided rather than hanging.
//!
//! The budget is `check::DEFAULT_BUDGET`, 2 M steps per path and recognizer; past it the
//! verdict is undecided. Until the search first holds two states it is one chain, whose
//! states cannot repeat, so it keeps no memo of states seen. Two shortcuts keep it from
//! branching where only one way can succeed: a loop does not exit below its least count,
//! and a loop the compiler marked (a `repeat ... notice(...)` that nothing after it can
//! follow with a notice) takes the whole run of notices at once, unless a pending future
//! could take part of it.

use foldhash::HashSet;
use foldhash::HashSetExt;

use crate::path::{Kind, Path, Thread};
use crate::program::{Limit, Metric, NameMatch, Op, Peer, Program, Set};

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The thread matches.
    Matched,
    /// It does not; the furthest any attempt got.
    NoMatch(Stop),
    /// The step budget ran out first.
    Undecided,
}

/// Where the furthest attempt stopped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stop {
    /// Index of the event it could not match (the thread's length: it ran out of events).
    pub event: usize,
    /// The instruction it expected to match there (see [`describe`]); described only
    /// when reported, since most misses are not.
    pub op: usize,
}

/// What a run may read besides the thread.
pub struct Context<'a> {
    /// The path.
    pub path: &'a Path,
    /// The thread (index in the path).
    pub thread: usize,
    /// Which threads each thread pattern of the recognizer may be assigned.
    pub candidates: &'a Candidates,
    /// A fragment: matches any contiguous part, not the whole thread.
    pub fragment: bool,
}

/// Which threads of a path each thread pattern may take: one table per recognizer and
/// path, thread by thread, so one allocation rather than one per pattern.
#[derive(Debug, Clone, Default)]
pub struct Candidates {
    patterns: usize,
    allowed: Vec<bool>,
}

impl Candidates {
    /// A table of `patterns` by `threads` that allows nothing yet.
    pub fn none(patterns: usize, threads: usize) -> Candidates {
        Candidates {
            patterns,
            allowed: vec![false; patterns * threads],
        }
    }

    fn at(&self, p: usize, t: usize) -> Option<usize> {
        (p < self.patterns).then(|| t * self.patterns + p)
    }

    /// Whether pattern `p` may take thread `t` (false for either out of range).
    pub fn get(&self, p: usize, t: usize) -> bool {
        self.at(p, t)
            .and_then(|i| self.allowed.get(i))
            .is_some_and(|&c| c)
    }

    /// Sets whether pattern `p` may take thread `t`.
    pub fn set(&mut self, p: usize, t: usize, allowed: bool) {
        if let Some(c) = self.at(p, t).and_then(|i| self.allowed.get_mut(i)) {
            *c = allowed;
        }
    }

    /// Whether some pattern may take thread `t`.
    pub fn any_for(&self, t: usize) -> bool {
        self.allowed
            .iter()
            .skip(t * self.patterns)
            .take(self.patterns)
            .any(|&c| c)
    }

    /// How many threads pattern `p` may take.
    pub fn count(&self, p: usize) -> usize {
        if p >= self.patterns {
            return 0;
        }
        self.allowed
            .iter()
            .skip(p)
            .step_by(self.patterns)
            .filter(|&&c| c)
            .count()
    }
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct State {
    pc: u32,
    pos: u32,
    stack: Vec<u32>,
    pending: Vec<u32>,
    regs: Vec<u32>,
}

use crate::program::held::{self, UNBOUND};

/// What names are matched against besides the matcher: the path and thread (for names
/// bound to events and peers) and the program's assigned texts.
struct Names<'a> {
    path: &'a Path,
    thread: &'a Thread,
    texts: &'a [NameMatch],
}

fn name_ok(m: &NameMatch, name: &str, regs: &[u32], env: &Names<'_>) -> bool {
    match m {
        NameMatch::Exact(s) => &**s == name,
        NameMatch::Regex(r) => r.is_match(name),
        NameMatch::Any => true,
        NameMatch::Reg(r) => regs
            .get(*r)
            .is_some_and(|&v| held_name_ok(v, name, regs, env)),
        NameMatch::Not(m) => !name_ok(m, name, regs, env),
    }
}

/// Whether `name` is the name a register holds.
fn held_name_ok(v: u32, name: &str, regs: &[u32], env: &Names<'_>) -> bool {
    if v == UNBOUND {
        return false;
    }
    let i = (v & held::VALUE) as usize;
    let ok = match v & held::KIND {
        held::COUNT => name == i.to_string(),
        held::EVENT => env.thread.events.get(i).is_some_and(|e| &*e.name == name),
        // Assigned texts never name registers, so this does not recurse further.
        held::TEXT => env
            .texts
            .get(i)
            .is_some_and(|m| name_ok(m, name, regs, env)),
        _ => env.path.threads.get(i).is_some_and(|t| t.host() == name),
    };
    ok != (v & held::NOT != 0)
}

fn limit(l: &Limit, regs: &[u32]) -> u32 {
    match l {
        Limit::Const(n) => *n,
        Limit::Reg(r) => regs.get(*r).map_or(0, |&v| held::count(v)),
        Limit::Calc(c) => crate::program::count_op(c.0, limit(&c.1, regs), limit(&c.2, regs)),
    }
}

/// Runs `program` over the context's thread, within `budget` steps (decremented).
pub fn run(program: &Program, cx: &Context<'_>, budget: &mut u64) -> Outcome {
    let thread = &cx.path.threads[cx.thread];
    let events = &thread.events;
    let n = events.len() as u32;
    let ops = &program.ops;
    let env = Names {
        path: cx.path,
        thread,
        texts: &program.texts,
    };
    let mut seen: HashSet<State> = HashSet::new();
    let start = |pos| State {
        pc: 0,
        pos,
        stack: Vec::new(),
        pending: Vec::new(),
        regs: vec![UNBOUND; program.regs],
    };
    let mut todo: Vec<State> = if cx.fragment {
        (0..=n).rev().map(start).collect()
    } else {
        vec![start(0)]
    };
    let mut best = Stop { event: 0, op: 0 };
    let miss = |pos: u32, op: usize, best: &mut Stop| {
        if pos as usize >= best.event {
            *best = Stop {
                event: pos as usize,
                op,
            };
        }
    };
    // Until the search first holds two states, it is one chain, whose states cannot
    // repeat without also repeating forever (which the budget ends): most runs fail or
    // match on that chain, and skip the memo's allocation and hashing.
    let mut branched = todo.len() > 1;
    while let Some(mut st) = todo.pop() {
        branched |= !todo.is_empty();
        if branched && !seen.insert(st.clone()) {
            continue;
        }
        if *budget == 0 {
            return Outcome::Undecided;
        }
        *budget -= 1;
        // Any pending future may match from here (not inside another future's body,
        // which matches contiguously).
        if st.stack.is_empty() {
            let mut last = None;
            for (i, &f) in st.pending.iter().enumerate() {
                if last == Some(f) {
                    continue;
                }
                last = Some(f);
                let mut next = st.clone();
                next.pending.remove(i);
                next.stack.push(st.pc);
                next.pc = f;
                todo.push(next);
            }
        }
        let pc = st.pc as usize;
        let pos = st.pos as usize;
        let ev = events.get(pos);
        match &ops[pc] {
            Op::Task {
                name,
                limits,
                whole,
                bind,
            } => {
                let ok = ev.is_some_and(|e| {
                    e.kind == Kind::TaskStart
                        && name_ok(name, &e.name, &st.regs, &env)
                        && limits.iter().all(|b| {
                            b.holds(match b.metric {
                                Metric::RealTime => Some(e.real_ns as f64),
                                Metric::CpuTime => e.cpu_ns.map(|c| c as f64),
                                _ => None,
                            })
                        })
                });
                if !ok {
                    miss(st.pos, pc, &mut best);
                    continue;
                }
                if let Some(r) = bind {
                    st.regs[*r] = held::EVENT | st.pos;
                }
                st.pos = if *whole {
                    thread.end_of[pos] as u32 + 1
                } else {
                    st.pos + 1
                };
                st.pc += 1;
                todo.push(st);
            }
            Op::EndTask => {
                if ev.is_some_and(|e| e.kind == Kind::TaskEnd) {
                    st.pos += 1;
                    st.pc += 1;
                    todo.push(st);
                } else {
                    miss(st.pos, pc, &mut best);
                }
            }
            Op::Notice { text, bind } => {
                if ev.is_some_and(|e| {
                    e.kind == Kind::Notice && name_ok(text, &e.name, &st.regs, &env)
                }) {
                    if let Some(r) = bind {
                        st.regs[*r] = held::EVENT | st.pos;
                    }
                    st.pos += 1;
                    st.pc += 1;
                    todo.push(st);
                } else {
                    miss(st.pos, pc, &mut best);
                }
            }
            Op::Message {
                send,
                peers,
                limits,
                bind,
            } => {
                let want = if *send { Kind::Send } else { Kind::Recv };
                let ok = ev.is_some_and(|e| {
                    e.kind == want
                        && peers.iter().any(|p| match p {
                            Peer::Pattern(i) => e.peer.is_some_and(|t| cx.candidates.get(*i, t)),
                            Peer::Host(NameMatch::Any) => true,
                            Peer::Host(h) => e.peer.is_some_and(|t| {
                                name_ok(h, cx.path.threads[t].host(), &st.regs, &env)
                            }),
                        })
                        && limits.iter().all(|b| {
                            b.holds(match b.metric {
                                Metric::Size => e.size.map(|s| s as f64),
                                Metric::Latency => e.latency.map(|l| l as f64),
                                _ => None,
                            })
                        })
                });
                if ok {
                    if let Some(r) = bind {
                        st.regs[*r] = match ev.and_then(|e| e.peer) {
                            Some(t) if t as u32 <= held::VALUE => held::PEER | t as u32,
                            _ => UNBOUND,
                        };
                    }
                    st.pos += 1;
                    st.pc += 1;
                    todo.push(st);
                } else {
                    miss(st.pos, pc, &mut best);
                }
            }
            Op::Set { reg, value } => {
                st.regs[*reg] = match value {
                    Set::Count(l) => limit(l, &st.regs),
                    Set::Text(i) => held::TEXT | *i as u32,
                    Set::Copy { from, negate } => match st.regs[*from] {
                        UNBOUND => UNBOUND,
                        v if *negate => v ^ held::NOT,
                        v => v,
                    },
                };
                st.pc += 1;
                todo.push(st);
            }
            Op::AnyOne => match ev {
                Some(e) if e.kind != Kind::TaskEnd => {
                    st.pos = if e.kind == Kind::TaskStart {
                        thread.end_of[pos] as u32 + 1
                    } else {
                        st.pos + 1
                    };
                    st.pc += 1;
                    todo.push(st);
                }
                _ => {}
            },
            Op::Split(a, b) => {
                let mut other = st.clone();
                other.pc = *b as u32;
                todo.push(other);
                st.pc = *a as u32;
                todo.push(st);
            }
            Op::Jump(t) => {
                st.pc = *t as u32;
                todo.push(st);
            }
            Op::Loop {
                reg,
                low,
                max,
                exit,
                notice_run,
            } => {
                // A loop entered afresh that must take the whole run of notices here takes
                // it at once, unless a pending future may take some of them, or the end of a
                // fragment may come in the middle of it.
                if *notice_run
                    && st.regs[*reg] == UNBOUND
                    && !cx.fragment
                    && (st.pending.is_empty() || !st.stack.is_empty())
                {
                    if let Some(Op::Notice { text, .. }) = ops.get(pc + 1) {
                        let run = events[pos..]
                            .iter()
                            .take_while(|e| e.kind == Kind::Notice)
                            .count();
                        let taken = events[pos..pos + run]
                            .iter()
                            .take_while(|e| name_ok(text, &e.name, &st.regs, &env))
                            .count();
                        let (low, max) = (limit(low, &st.regs), limit(max, &st.regs));
                        if taken == run && (low as usize..=max as usize).contains(&run) {
                            st.pos += run as u32;
                            st.pc = *exit as u32 + 1;
                            todo.push(st);
                        } else if taken < run && taken < max as usize {
                            miss(st.pos + taken as u32, pc + 1, &mut best);
                        } else if run < low as usize {
                            miss(st.pos + run as u32, *exit, &mut best);
                        } else {
                            miss(st.pos + max, *exit + 1, &mut best);
                        }
                        continue;
                    }
                }
                let count = match st.regs[*reg] {
                    UNBOUND => 0,
                    c => c,
                };
                if count >= limit(low, &st.regs) {
                    let mut out = st.clone();
                    out.pc = *exit as u32;
                    todo.push(out);
                }
                if count < limit(max, &st.regs) {
                    st.pc += 1;
                    todo.push(st);
                }
            }
            Op::Count(reg) => {
                st.regs[*reg] = match st.regs[*reg] {
                    UNBOUND => 1,
                    c => c + 1,
                };
                st.pc += 1;
                todo.push(st);
            }
            Op::EndLoop {
                reg,
                low,
                high,
                bind,
            } => {
                let count = match st.regs[*reg] {
                    UNBOUND => 0,
                    c => c,
                };
                if count < limit(low, &st.regs) || count > limit(high, &st.regs) {
                    miss(st.pos, pc, &mut best);
                    continue;
                }
                if let Some(b) = bind {
                    st.regs[*b] = count;
                }
                // Cleared, so states after the loop do not differ by a spent counter.
                st.regs[*reg] = UNBOUND;
                st.pc += 1;
                todo.push(st);
            }
            Op::Future { body } => {
                let at = st.pending.partition_point(|&p| p < *body as u32);
                st.pending.insert(at, *body as u32);
                st.pc += 1;
                todo.push(st);
            }
            Op::FutureEnd => {
                if let Some(back) = st.stack.pop() {
                    st.pc = back;
                    todo.push(st);
                }
            }
            Op::Done(name) => {
                let waiting = st
                    .pending
                    .iter()
                    .any(|p| program.future_names.get(&(*p as usize)) == Some(name));
                if waiting {
                    miss(st.pos, pc, &mut best);
                } else {
                    st.pc += 1;
                    todo.push(st);
                }
            }
            Op::Accept => {
                let done = st.pending.is_empty() && st.stack.is_empty();
                if done && (cx.fragment || st.pos == n) {
                    return Outcome::Matched;
                }
                miss(st.pos, pc, &mut best);
            }
        }
    }
    Outcome::NoMatch(best)
}

/// What an instruction expects, for reports.
pub fn describe(op: &Op) -> String {
    match op {
        Op::Task { name, .. } => format!("task({}) (within its limits)", name.describe()),
        Op::EndTask => "the end of the task (no more events in it)".into(),
        Op::Notice { text, .. } => format!("notice({})", text.describe()),
        Op::Message { send, .. } => format!(
            "{}(...) to or from the named peer, within its limits",
            if *send { "send" } else { "recv" }
        ),
        Op::AnyOne => "any event".into(),
        Op::Split(..)
        | Op::Jump(_)
        | Op::Loop { .. }
        | Op::Count(_)
        | Op::Set { .. }
        | Op::Future { .. }
        | Op::FutureEnd => "the next statement".into(),
        Op::EndLoop { .. } => "a repeat count within its range".into(),
        Op::Done(n) => format!("future {n} to have matched (done({n}))"),
        Op::Accept => "the end of the thread, every future matched".into(),
    }
}
