//! Where the closest recognizer stopped, kept cheap while classifying ([`Miss`]) and
//! described for the report only for the paths reported.

use super::*;

impl Checker {
    /// Describes a miss for the report.
    pub(super) fn describe_miss(&self, r: &Compiled, path: &Path, miss: Miss) -> Mismatch {
        if let Miss::Described(m) = miss {
            return *m;
        }
        let mut m = Mismatch {
            recognizer: r.name.clone(),
            closeness: miss.closeness(),
            thread: None,
            pattern: None,
            event: None,
            found: format!("{} threads", path.threads.len()),
            span_id: None,
            expected: String::new(),
        };
        let patterns: &[ThreadProgram] = match &r.shape {
            Shape::Full(patterns, _) => patterns,
            _ => &[],
        };
        match miss {
            Miss::Described(_) => {}
            Miss::ThreadCount { low, high } => {
                m.expected = format!("{low} to {high} threads (the thread patterns' counts)");
            }
            Miss::NoPattern { thread, .. } => {
                m.thread = Some(thread_name(path, thread));
                m.found = format!("a thread on {}", path.threads[thread].host());
                m.expected = format!(
                    "a thread pattern whose host matches ({})",
                    patterns
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            Miss::Stopped {
                thread,
                pattern,
                stop,
                ..
            } => {
                let (found, span) = match path.threads[thread].events.get(stop.event) {
                    Some(e) => (
                        describe_event(path, thread, stop.event),
                        Some(e.span.to_string()),
                    ),
                    None => ("the end of the thread".to_string(), None),
                };
                m.thread = Some(thread_name(path, thread));
                m.pattern = Some(patterns[pattern].name.clone());
                m.event = Some(stop.event);
                m.found = found;
                m.span_id = span;
                m.expected = crate::matcher::describe(&patterns[pattern].program.ops[stop.op]);
            }
            Miss::Counts { short, .. } => {
                m.expected = match short {
                    Some((p, n)) => {
                        let prog = &patterns[p];
                        format!(
                            "thread pattern {} needs {} to {} threads; {n} can match it",
                            prog.name, prog.low, prog.high
                        )
                    }
                    None => "each thread assigned to one thread pattern within its count".into(),
                };
            }
        }
        m
    }
}

/// Where a recognizer failed a path, kept cheap: only the closest validator's miss is
/// described (formatted) for the report.
#[derive(Debug, Clone)]
pub(super) enum Miss {
    /// Already described (a path limit); boxed, as it is rare and large.
    Described(Box<Mismatch>),
    /// The path's thread count is outside the patterns' total range.
    ThreadCount { low: u64, high: u64 },
    /// No thread pattern's host matches this thread.
    NoPattern { thread: usize, closeness: f64 },
    /// The pattern that went furthest in this thread stopped here.
    Stopped {
        thread: usize,
        pattern: usize,
        stop: Stop,
        closeness: f64,
    },
    /// Every thread can take some pattern; the counts cannot be met (this pattern has
    /// this few candidates, when one is short).
    Counts {
        short: Option<(usize, u32)>,
        closeness: f64,
    },
}

impl Miss {
    pub(super) fn closeness(&self) -> f64 {
        match self {
            Miss::Described(m) => m.closeness,
            Miss::ThreadCount { .. } => 0.0,
            Miss::NoPattern { closeness, .. }
            | Miss::Stopped { closeness, .. }
            | Miss::Counts { closeness, .. } => *closeness,
        }
    }
}

/// A (pattern, thread) attempt that failed: in which round of narrowing, and where.
pub(super) struct Failed {
    pub(super) pattern: usize,
    pub(super) thread: usize,
    pub(super) round: u32,
    pub(super) stop: Stop,
}

/// The closest miss: the thread that went least far, and where.
pub(super) fn explain(
    patterns: &[ThreadProgram],
    path: &Path,
    cand: &Candidates,
    stops: &[Failed],
) -> Miss {
    let total: usize = path
        .threads
        .iter()
        .map(|t| t.events.len())
        .sum::<usize>()
        .max(1);
    let mut matched_events = 0usize;
    // The thread whose failure came first (the others may only have lost their peer),
    // then the one that got least far.
    let mut worst: Option<(usize, usize, u32, &Stop)> = None;
    // Per thread, the pattern that got furthest in it (the later pattern on a tie).
    let mut furthest: Vec<Option<(usize, u32, &Stop)>> = vec![None; path.threads.len()];
    for f in stops {
        if let Some(best) = furthest.get_mut(f.thread) {
            if best.is_none_or(|(bp, _, bs)| (f.stop.event, f.pattern) > (bs.event, bp)) {
                *best = Some((f.pattern, f.round, &f.stop));
            }
        }
    }
    for (t, thread) in path.threads.iter().enumerate() {
        if cand.any_for(t) {
            matched_events += thread.events.len();
            continue;
        }
        if let Some((p, r, s)) = furthest[t] {
            matched_events += s.event;
            if worst.is_none_or(|(_, _, wr, w)| (r, s.event) < (wr, w.event)) {
                worst = Some((t, p, r, s));
            }
        } else if worst.is_none() {
            return Miss::NoPattern {
                thread: t,
                closeness: matched_events as f64 / total as f64,
            };
        }
    }
    let closeness = matched_events as f64 / total as f64;
    match worst {
        Some((thread, pattern, _, stop)) => Miss::Stopped {
            thread,
            pattern,
            stop: *stop,
            closeness,
        },
        None => Miss::Counts {
            short: (0..patterns.len())
                .map(|p| (p, cand.count(p) as u32))
                .find(|&(p, n)| n < patterns[p].low),
            closeness,
        },
    }
}

fn thread_name(path: &Path, t: usize) -> String {
    let k = &path.threads[t].key;
    format!(
        "{} ({}, pid {}, unit {})",
        k.service,
        path.threads[t].host(),
        k.pid,
        k.execution_unit
    )
}

fn describe_event(path: &Path, t: usize, i: usize) -> String {
    let thread = &path.threads[t];
    let e = &thread.events[i];
    let at = e.time.saturating_sub(path.start) as f64 / 1e6;
    let what = match e.kind {
        Kind::TaskStart => format!("task({:?}) starting", &*e.name),
        Kind::TaskEnd => format!("the end of task({:?})", &*e.name),
        Kind::Notice => format!("notice({:?})", &*e.name),
        Kind::Send | Kind::Recv => {
            let peer = e.peer.map_or("an unknown peer".to_string(), |p| {
                path.threads[p].host().to_string()
            });
            let way = if e.kind == Kind::Send {
                "send to"
            } else {
                "recv from"
            };
            format!("{way} {peer}")
        }
    };
    format!("{what} at +{at:.3} ms")
}
