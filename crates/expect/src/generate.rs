//! Writes recognizers that describe observed paths: one thread pattern per role (threads
//! of one service that behave alike, sharing a role and a count), runs of equal events as
//! `repeat`, and paths of the same structure merged into one validator whose repeat and
//! thread counts span what was seen. With timings, each task gets the observed REAL_TIME
//! range as a limit. Notices are written as seen, or abstracted: the texts a task logs (a
//! retry, a cache miss) often vary between requests of one kind, so `Notices::Any` writes
//! none of them and gives every task a slot of up to 9 notices (`repeat between 0 and 9
//! notice(*)`) before each statement, at the end of each body and after each round of a
//! repeat.

use std::collections::BTreeMap;

use crate::lang::ast::*;
use crate::path::{Kind, Path, Thread};

/// What the generator writes besides structure.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Each task's observed REAL_TIME range as a limit.
    pub timings: bool,
    /// `*` for every thread's host instead of the hosts seen (for paths that will run on
    /// other hosts).
    pub any_host: bool,
    /// How notices are written.
    pub notices: Notices,
}

/// How [`generate`] writes notices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Notices {
    /// Each notice as seen, in its place.
    #[default]
    Exact,
    /// None as seen; instead, before every statement of a thread or task and at its end,
    /// `repeat between 0 and 9 notice(*);`, so a path matches whatever notices it logged.
    Any,
}

/// The most notices `Notices::Any` admits in one run between two other events.
const ANY_NOTICES: u64 = 9;

impl std::str::FromStr for Notices {
    type Err = String;

    fn from_str(s: &str) -> Result<Notices, String> {
        match s {
            "exact" => Ok(Notices::Exact),
            "any" => Ok(Notices::Any),
            other => Err(format!("{other:?} is not exact or any")),
        }
    }
}

/// Recognizers for `paths`, as a file of validators.
pub fn generate(paths: &[Path], options: Options) -> File {
    let mut groups: BTreeMap<String, (Recognizer, usize)> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for p in paths {
        let r = describe(p, options);
        let key = skeleton(&r);
        match groups.get_mut(&key) {
            Some((g, n)) => {
                merge(g, &r);
                *n += 1;
            }
            None => {
                order.push(key.clone());
                groups.insert(key, (r, 1));
            }
        }
    }
    let mut used: BTreeMap<String, usize> = BTreeMap::new();
    let items = order
        .into_iter()
        .filter_map(|k| groups.remove(&k))
        .map(|(mut r, _)| {
            if options.any_host {
                for t in &mut r.threads {
                    t.host = Text::Any;
                }
            }
            let n = used.entry(r.name.clone()).or_insert(0);
            *n += 1;
            if *n > 1 {
                r.name = format!("{}_{n}", r.name);
            }
            Item::Recognizer(r)
        })
        .collect();
    File { items }
}

/// A name usable in the language: letters, digits and `_`.
fn ident(text: &str) -> String {
    let mut out = String::new();
    let mut upper = true;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(if upper { c.to_ascii_uppercase() } else { c });
            upper = false;
        } else {
            upper = true;
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'T');
    }
    out
}

/// One path as a validator.
fn describe(path: &Path, options: Options) -> Recognizer {
    let (timings, notices) = (options.timings, options.notices);
    // Roles, first without peer names (they need the roles), then with them.
    let plain: Vec<String> = path
        .threads
        .iter()
        .map(|t| signature(&body(t, 0, t.events.len(), &|_| None, false, notices)))
        .collect();
    let first = names(path, &plain);
    let peer_name = |t: usize| Some(first[t].clone());
    let full: Vec<Vec<Stmt>> = path
        .threads
        .iter()
        .map(|t| body(t, 0, t.events.len(), &peer_name, timings, notices))
        .collect();
    let keyed: Vec<String> = path
        .threads
        .iter()
        .zip(&full)
        .map(|(_, b)| signature(b))
        .collect();
    let role = names(path, &keyed);
    // The final names may split a first-pass role; peers refer to the final ones.
    let final_peer = |t: usize| Some(role[t].clone());
    let mut patterns: BTreeMap<String, (Vec<&Thread>, Vec<Stmt>)> = BTreeMap::new();
    for (i, t) in path.threads.iter().enumerate() {
        let e = patterns.entry(role[i].clone()).or_insert_with(|| {
            let body = body(t, 0, t.events.len(), &final_peer, timings, notices);
            (Vec::new(), body)
        });
        e.0.push(t);
    }
    let threads = patterns
        .into_iter()
        .map(|(name, (ts, body))| {
            let mut hosts: Vec<&str> = ts.iter().map(|t| t.host()).collect();
            hosts.sort_unstable();
            hosts.dedup();
            let host = if hosts.len() == 1 {
                Text::Exact(hosts[0].to_string())
            } else {
                Text::Regex(
                    format!(
                        "^({})$",
                        hosts
                            .iter()
                            .map(|h| regex_escape(h))
                            .collect::<Vec<_>>()
                            .join("|")
                    ),
                    At::default(),
                )
            };
            let n = Count::Num(ts.len() as u64);
            ThreadPattern {
                name,
                host,
                count: Range {
                    low: n.clone(),
                    high: n,
                },
                limits: Vec::new(),
                body,
            }
        })
        .collect();
    let root = path
        .threads
        .first()
        .and_then(|t| t.events.first())
        .map(|e| format!("{}_{}", path.threads[0].key.service, e.name))
        .unwrap_or_else(|| "Empty".into());
    Recognizer {
        role: Role::Validator,
        name: ident(&root),
        limits: Vec::new(),
        threads,
    }
}

/// Role names. Threads with the same key behave alike and share a role, whatever their
/// service (the replicas of one store): it is named after their service, or the services'
/// common stem (`storage` for storage-1..3), numbered when roles share a name.
fn names(path: &Path, keys: &[String]) -> Vec<String> {
    let mut groups: BTreeMap<&String, Vec<&str>> = BTreeMap::new();
    for (t, k) in path.threads.iter().zip(keys) {
        groups.entry(k).or_default().push(&t.key.service);
    }
    let base = |services: &[&str]| {
        let first = services[0];
        if services.iter().all(|s| *s == first) {
            ident(first)
        } else {
            ident(first.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-' || c == '_'))
        }
    };
    let bases: BTreeMap<&String, String> = groups.iter().map(|(k, v)| (*k, base(v))).collect();
    let mut numbered: BTreeMap<&String, String> = BTreeMap::new();
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut taken = std::collections::BTreeSet::new();
    for (k, b) in &bases {
        let total = bases.values().filter(|x| *x == b).count();
        let n = seen.entry(b.as_str()).or_insert(0);
        *n += 1;
        let wanted = if total == 1 {
            b.clone()
        } else {
            format!("{b}{n}")
        };
        // A numbered name can be another role's own (`H` numbered 1 next to service h1).
        let mut name = wanted.clone();
        let mut extra = 1;
        while !taken.insert(name.clone()) {
            extra += 1;
            name = format!("{wanted}_{extra}");
        }
        numbered.insert(k, name);
    }
    keys.iter().map(|k| numbered[k].clone()).collect()
}

fn signature(body: &[Stmt]) -> String {
    body.iter().map(stmt_text).collect::<Vec<_>>().join("")
}

fn stmt_text(s: &Stmt) -> String {
    // A statement printed inside a throwaway fragment: the printer is the one canonical form.
    let f = File {
        items: vec![Item::Fragment(Fragment {
            role: Role::Recognizer,
            name: "F".into(),
            limits: Vec::new(),
            body: vec![without_limits(s)],
        })],
    };
    f.to_string()
}

fn without_limits(s: &Stmt) -> Stmt {
    let mut s = s.clone();
    strip(&mut s);
    s
}

fn strip(s: &mut Stmt) {
    match s {
        Stmt::Task { limits, body, .. } => {
            limits.clear();
            for b in body.iter_mut().flatten() {
                strip(b);
            }
        }
        Stmt::Message { limits, .. } => limits.clear(),
        Stmt::Repeat { body, .. }
        | Stmt::Maybe(body)
        | Stmt::Future { body, .. }
        | Stmt::Bind { body, .. } => strip(body),
        Stmt::Block(b) => b.iter_mut().for_each(strip),
        Stmt::Xor(bs) => bs.iter_mut().flatten().for_each(strip),
        _ => {}
    }
}

/// The statements for events `[from, to)` of a thread.
fn body(
    t: &Thread,
    from: usize,
    to: usize,
    peer: &dyn Fn(usize) -> Option<String>,
    timings: bool,
    notices: Notices,
) -> Vec<Stmt> {
    let mut out: Vec<Stmt> = Vec::new();
    let mut i = from;
    while i < to {
        let e = &t.events[i];
        let s = match e.kind {
            Kind::TaskStart => {
                let end = t.end_of[i].max(i);
                let inner = body(t, i + 1, end.min(to), peer, timings, notices);
                let limits = if timings {
                    vec![real_time(e.real_ns, e.real_ns)]
                } else {
                    Vec::new()
                };
                i = end + 1;
                Stmt::Task {
                    name: Text::Exact(e.name.to_string()),
                    limits,
                    body: if inner.is_empty() { None } else { Some(inner) },
                }
            }
            Kind::TaskEnd => {
                i += 1;
                continue;
            }
            Kind::Notice if notices == Notices::Any => {
                i += 1;
                continue;
            }
            Kind::Notice => {
                i += 1;
                Stmt::Notice(Text::Exact(e.name.to_string()))
            }
            Kind::Send | Kind::Recv => {
                i += 1;
                Stmt::Message {
                    send: e.kind == Kind::Send,
                    peers: vec![e.peer.and_then(peer).map_or(Text::Any, Text::Name)],
                    limits: Vec::new(),
                }
            }
        };
        push_collapsed(&mut out, s);
    }
    if notices == Notices::Any {
        out = with_notice_slots(out);
    }
    out
}

/// `stmts` with room for any notices before each statement and after the last, and
/// between the rounds of a repeat: the events a repeat folded may have had notices
/// between them.
fn with_notice_slots(stmts: Vec<Stmt>) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(2 * stmts.len() + 1);
    for s in stmts {
        out.push(notice_slot());
        out.push(match s {
            Stmt::Repeat {
                low,
                high,
                between,
                body,
            } => Stmt::Repeat {
                low,
                high,
                between,
                body: Box::new(Stmt::Block(vec![*body, notice_slot()])),
            },
            other => other,
        });
    }
    out.push(notice_slot());
    out
}

/// `repeat between 0 and 9 notice(*);`
fn notice_slot() -> Stmt {
    Stmt::Repeat {
        low: Count::Num(0),
        high: Count::Num(ANY_NOTICES),
        between: true,
        body: Box::new(Stmt::Notice(Text::Any)),
    }
}

/// Appends `s`, folding it into a preceding run of the same statement.
fn push_collapsed(out: &mut Vec<Stmt>, s: Stmt) {
    let key = stmt_text(&s);
    if let Some(last) = out.last_mut() {
        match last {
            Stmt::Repeat {
                low: Count::Num(n),
                high,
                body,
                ..
            } if stmt_text(body) == key => {
                merge_stmt(body, &s);
                *n += 1;
                *high = Count::Num(*n);
                return;
            }
            other if stmt_text(other) == key => {
                let mut first = other.clone();
                merge_stmt(&mut first, &s);
                *other = Stmt::Repeat {
                    low: Count::Num(2),
                    high: Count::Num(2),
                    between: false,
                    body: Box::new(first),
                };
                return;
            }
            _ => {}
        }
    }
    out.push(s);
}

/// A REAL_TIME limit covering `[low, high]` ns, in whole microseconds rounded outward
/// (one unit for every limit, so merged limits compare).
fn real_time(low: u64, high: u64) -> Limit {
    let q = |v: f64| Quantity::Lit {
        value: v,
        unit: "us".to_string(),
    };
    Limit {
        metric: "REAL_TIME".into(),
        low: Some(q((low / 1000) as f64)),
        high: Some(q(high.div_ceil(1000) as f64)),
        form: LimitForm::Between,
    }
}

fn regex_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if "\\.+*?()|[]{}^$/".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The structure of a recognizer, without counts, hosts or limits: paths with the same
/// skeleton merge into one validator.
fn skeleton(r: &Recognizer) -> String {
    let mut r = r.clone();
    for t in &mut r.threads {
        t.count = Range {
            low: Count::Num(0),
            high: Count::Num(0),
        };
        t.host = Text::Any;
        t.body.iter_mut().for_each(uncount);
    }
    Item::Recognizer(r).to_string()
}

fn uncount(s: &mut Stmt) {
    strip(s);
    match s {
        Stmt::Repeat {
            low,
            high,
            between,
            body,
        } => {
            *low = Count::Num(0);
            *high = Count::Num(0);
            *between = false;
            uncount(body);
        }
        Stmt::Task { body: Some(b), .. } | Stmt::Block(b) => b.iter_mut().for_each(uncount),
        _ => {}
    }
}

/// Widens `into` to also describe `other` (same skeleton).
fn merge(into: &mut Recognizer, other: &Recognizer) {
    for (a, b) in into.threads.iter_mut().zip(&other.threads) {
        a.count = widen_range(&a.count, &b.count);
        if a.host != b.host {
            let hosts = |t: &Text| match t {
                Text::Exact(h) => vec![regex_escape(h)],
                Text::Regex(r, _) => r
                    .trim_start_matches("^(")
                    .trim_end_matches(")$")
                    .split('|')
                    .map(str::to_string)
                    .collect(),
                _ => vec![],
            };
            let mut all = hosts(&a.host);
            all.extend(hosts(&b.host));
            all.sort();
            all.dedup();
            a.host = Text::Regex(format!("^({})$", all.join("|")), At::default());
        }
        for (x, y) in a.body.iter_mut().zip(&b.body) {
            merge_stmt(x, y);
        }
    }
}

fn num(c: &Count) -> u64 {
    match c {
        Count::Num(n) => *n,
        _ => 0,
    }
}

fn widen_range(a: &Range, b: &Range) -> Range {
    Range {
        low: Count::Num(num(&a.low).min(num(&b.low))),
        high: Count::Num(num(&a.high).max(num(&b.high))),
    }
}

fn merge_stmt(a: &mut Stmt, b: &Stmt) {
    match (a, b) {
        (
            Stmt::Repeat {
                low,
                high,
                between,
                body,
            },
            Stmt::Repeat {
                low: l2,
                high: h2,
                body: b2,
                ..
            },
        ) => {
            *low = Count::Num(num(low).min(num(l2)));
            *high = Count::Num(num(high).max(num(h2)));
            *between = low != high;
            merge_stmt(body, b2);
        }
        (
            Stmt::Task { limits, body, .. },
            Stmt::Task {
                limits: l2,
                body: b2,
                ..
            },
        ) => {
            for (x, y) in limits.iter_mut().zip(l2) {
                if let (
                    Some(Quantity::Lit { value: lo, .. }),
                    Some(Quantity::Lit { value: lo2, .. }),
                ) = (&mut x.low, &y.low)
                {
                    *lo = lo.min(*lo2);
                }
                if let (
                    Some(Quantity::Lit { value: hi, unit }),
                    Some(Quantity::Lit {
                        value: hi2,
                        unit: u2,
                    }),
                ) = (&mut x.high, &y.high)
                {
                    if unit == u2 {
                        *hi = hi.max(*hi2);
                    }
                }
            }
            if let (Some(x), Some(y)) = (body, b2) {
                for (s, t) in x.iter_mut().zip(y) {
                    merge_stmt(s, t);
                }
            }
        }
        (Stmt::Block(x), Stmt::Block(y)) => {
            for (s, t) in x.iter_mut().zip(y) {
                merge_stmt(s, t);
            }
        }
        _ => {}
    }
}
