//! Which logged values identify requests. lprof took a variable that a request's code
//! prints and never modifies; from text, a (log point, parameter) variable is ranked by
//! the evidence the issue lists: its values recur at other log points (the same id
//! printed along the request's way), each value lives briefly, it has many distinct
//! values, and its values are seen on several nodes. A value that comes back in
//! separate bursts across the log (a train number, a user id) names an entity that many
//! requests touch, not a request.
//!
//! The score is the share of a variable's values printed at another log point, over the
//! number of bursts (separated by 2 s) a value comes in, times the distinct values per
//! line. A variable named as loggers name a request's id (`request_id`, `requestId`,
//! `http.req.id`, `X-Request-ID`, `correlation_id`, `trace_id`), whose values are
//! distinct on most of its lines, is one whatever its timing: a request that waits for
//! seconds prints its id in separate bursts.

use foldhash::HashSet;

use crate::corpus::Corpus;
use crate::points::PointId;

/// A variable: a log point's parameter.
pub type Variable = (PointId, u32);

/// Occurrences of one value further apart than this are separate bursts.
const BURST_GAP_NS: i64 = 2_000_000_000;
/// Values shown as examples of a variable.
const EXAMPLES: usize = 3;

/// The evidence for one variable.
#[derive(Clone, Debug, PartialEq)]
pub struct Evidence {
    /// The (log point, parameter) it is.
    pub variable: Variable,
    /// The word before it in its log point (`orderId`): what `--id` and `--not-id` name.
    pub name: String,
    /// Lines that print it.
    pub lines: usize,
    /// Distinct values it takes.
    pub distinct: usize,
    /// Share of its values also printed at another log point.
    pub shared: f64,
    /// Share of its values seen in more than one file.
    pub on_several_nodes: f64,
    /// Mean number of separate bursts a value occurs in (1 for a request id).
    pub bursts: f64,
    /// Median time from a value's first occurrence to its last (ns).
    pub lifetime_ns: i64,
    /// Named as loggers name a request's id.
    pub named_request_id: bool,
    /// The score the ranking sorts by, 0..=1.
    pub score: f64,
    /// Its first few distinct values, in line order.
    pub examples: Vec<String>,
}

/// Every variable with at least two distinct values, the likeliest request identifier
/// first.
pub fn rank(corpus: &Corpus) -> Vec<Evidence> {
    // Each value's facts, by its key number, from its occurrences in time order (the
    // lines are taken in it): gathered as they come rather than from a list of each
    // value's occurrences, which took a vector per value and 24 bytes per occurrence.
    #[derive(Default)]
    struct ValueFacts {
        first_at: i64,
        last_at: i64,
        /// The file and variable of its first occurrence.
        file: u32,
        variable: Variable,
        /// 0 until it is seen.
        bursts: usize,
        several_variables: bool,
        several_files: bool,
    }
    impl ValueFacts {
        fn lifetime(&self) -> i64 {
            self.last_at - self.first_at
        }
    }
    let mut facts: Vec<ValueFacts> = (0..corpus.key_count())
        .map(|_| ValueFacts::default())
        .collect();
    // Each variable's lines and distinct values (key numbers), and (below) its first
    // three values (in line order, so that the examples shown are the same on every
    // run). By log point (their ids are dense), then slot.
    type Values<'a> = (usize, HashSet<u32>, Vec<&'a str>);
    let mut values_of: Vec<Vec<Values<'_>>> = Vec::new();
    for (at, m) in corpus.timeline().iter().enumerate() {
        let t = m.time;
        let point = m.point as usize;
        if values_of.len() <= point {
            values_of.resize_with(point + 1, Vec::new);
        }
        let slots = &mut values_of[point];
        for (slot, key) in corpus.value_keys_at(at).enumerate() {
            if slots.len() <= slot {
                slots.resize_with(slot + 1, Values::default);
            }
            slots[slot].0 += 1;
            slots[slot].1.insert(key);
            let variable = (m.point, slot as u32);
            let Some(f) = facts.get_mut(key as usize) else {
                continue;
            };
            if f.bursts == 0 {
                *f = ValueFacts {
                    first_at: t,
                    last_at: t,
                    file: m.file,
                    variable,
                    bursts: 1,
                    ..ValueFacts::default()
                };
            } else {
                f.bursts += usize::from(t - f.last_at > BURST_GAP_NS);
                f.several_variables |= variable != f.variable;
                f.several_files |= m.file != f.file;
                f.last_at = t;
            }
        }
    }
    // The examples, in line order; a value's own key is its text's, so distinct values
    // are told by text. A log point whose slots all have theirs is passed over.
    let mut examples_done = vec![false; values_of.len()];
    for line in &corpus.lines {
        let point = line.point as usize;
        let (Some(slots), Some(done)) = (values_of.get_mut(point), examples_done.get_mut(point))
        else {
            continue;
        };
        if *done {
            continue;
        }
        for (value, e) in corpus.values(line).zip(slots.iter_mut()) {
            if e.2.len() < EXAMPLES && !e.2.contains(&value) {
                e.2.push(value);
            }
        }
        *done = slots.iter().all(|e| e.2.len() >= EXAMPLES.min(e.1.len()));
    }
    let mut ranked: Vec<Evidence> = values_of
        .into_iter()
        .enumerate()
        .flat_map(|(point, slots)| {
            slots
                .into_iter()
                .enumerate()
                .map(move |(slot, values)| ((point as PointId, slot as u32), values))
        })
        .filter(|(_, (_, values, _))| values.len() >= 2)
        .map(|(variable, (lines, values, first))| {
            let n = values.len() as f64;
            let none = ValueFacts::default();
            let of = |v: &u32| facts.get(*v as usize).unwrap_or(&none);
            let shared = values.iter().filter(|v| of(v).several_variables).count() as f64 / n;
            let several = values.iter().filter(|v| of(v).several_files).count() as f64 / n;
            let bursts = values.iter().map(|v| of(v).bursts as f64).sum::<f64>() / n;
            let mut lifetimes: Vec<i64> = values.iter().map(|v| of(v).lifetime()).collect();
            let middle = lifetimes.len() / 2;
            let lifetime_ns = *lifetimes.select_nth_unstable(middle).1;
            let distinct_share = n / lines as f64;
            let examples = first.iter().map(|v| v.to_string()).collect();
            let name = corpus
                .point_shape(variable.0)
                .parameter_names()
                .get(variable.1 as usize)
                .map(|n| n.to_string())
                .unwrap_or_default();
            let named_request_id = names_a_request_id(&name);
            let score = if named_request_id && distinct_share >= NAMED_DISTINCT_SHARE {
                1.0
            } else {
                shared * distinct_share / bursts
            };
            Evidence {
                variable,
                name,
                lines,
                distinct: values.len(),
                shared,
                on_several_nodes: several,
                bursts,
                lifetime_ns,
                named_request_id,
                score,
                examples,
            }
        })
        .collect();
    ranked.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.variable.cmp(&b.variable))
    });
    ranked
}

/// A variable named as a request's id takes that rank when at least this share of its
/// lines print a value no other line of it printed (so a session or a user id that a
/// program happens to call `request_id` does not).
const NAMED_DISTINCT_SHARE: f64 = 0.5;

/// Whether `name` is a request id's as loggers write it: words (split at punctuation and
/// at lower-to-upper case) ending in `id` after `req`, `request`, `correlation` or
/// `trace`, or one word such as `requestid`.
pub fn names_a_request_id(name: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_alphanumeric() {
            previous_lower = false;
            words.push(String::new());
            continue;
        }
        if c.is_uppercase() && previous_lower || words.is_empty() {
            words.push(String::new());
        }
        previous_lower = c.is_lowercase() || c.is_ascii_digit();
        if let Some(w) = words.last_mut() {
            w.extend(c.to_lowercase());
        }
    }
    words.retain(|w| !w.is_empty());
    const WHOSE: [&str; 4] = ["req", "request", "correlation", "trace"];
    match words.as_slice() {
        [.., whose, id] if id == "id" => WHOSE.contains(&whose.as_str()),
        [.., one] => WHOSE.iter().any(|w| one.strip_prefix(w) == Some("id")),
        [] => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::Options;

    #[test]
    fn request_ids_are_told_by_the_names_loggers_give_them() {
        for name in [
            "request_id",
            "requestId",
            "http.req.id",
            "X-Request-ID",
            "correlationId",
            "trace_id",
            "reqid",
            "RequestID",
        ] {
            assert!(names_a_request_id(name), "{name}");
        }
        for name in [
            "session",
            "user_id",
            "order_id",
            "id",
            "request",
            "requests_id_count",
            "paid",
            "",
        ] {
            assert!(!names_a_request_id(name), "{name}");
        }
    }

    #[test]
    fn a_variable_named_as_a_request_id_ranks_first_though_its_requests_wait() {
        // Each request prints its id, waits 5 s (a slow call), and prints it again; a
        // session id is printed by every request of its user.
        let mut log = String::new();
        for r in 0..20u32 {
            let (start, end) = (r * 2, r * 2 + 5);
            let session = ["s-alice", "s-bob", "s-carol"][r as usize % 3];
            for (t, what) in [(start, "started"), (end, "complete")] {
                log += &format!(
                    "1970-01-01T00:{:02}:{:02}.000Z {{\"msg\":\"request {what}\",\"request_id\":\"{:08x}\",\"session\":\"{session}\"}}\n",
                    t / 60,
                    t % 60,
                    r * 7919 + 11
                );
            }
        }
        let corpus = Corpus::read(&[("web.log".into(), log.into_bytes())], Options::default());
        let ranked = rank(&corpus);
        let top = &ranked[0];
        assert_eq!(top.name, "request_id", "{ranked:#?}");
        assert!(top.named_request_id && top.score == 1.0);
        assert!(top.bursts > 1.5, "its values come back after a wait");
        let session = ranked
            .iter()
            .find(|e| e.name == "session")
            .expect("session");
        assert!(
            !session.named_request_id && session.score < 0.5,
            "{session:?}"
        );
    }

    #[test]
    fn a_request_id_outranks_an_entity_id_and_a_counter() {
        // Each request: "start <req> for train <train>", "seat <n> held", "done <req>".
        // Trains recur across requests minutes apart; seat numbers are printed once.
        let mut log = String::new();
        for r in 0..30 {
            let t = r * 10; // seconds
            let train = ["G1234", "D77"][r as usize % 2];
            let req = format!("{:08x}{:08x}", r * 7919 + 1, r * 104_729 + 3);
            log += &format!(
                "1970-01-01T00:{:02}:{:02}.000Z start {req} for train {train}\n",
                t / 60,
                t % 60
            );
            log += &format!(
                "1970-01-01T00:{:02}:{:02}.100Z seat {} held\n",
                t / 60,
                t % 60,
                r * 3 + 1
            );
            log += &format!(
                "1970-01-01T00:{:02}:{:02}.200Z done {req} on {train}\n",
                t / 60,
                t % 60
            );
        }
        let corpus = Corpus::read(&[("a.log".into(), log.into_bytes())], Options::default());
        let ranked = rank(&corpus);
        let start = corpus.lines[0].point;
        let top = &ranked[0];
        assert_eq!(top.variable.0, start, "{ranked:#?}");
        assert_eq!(top.name, "start");
        assert_eq!(top.distinct, 30);
        assert_eq!(top.shared, 1.0);
        assert_eq!(top.bursts, 1.0);
        let train = ranked
            .iter()
            .find(|e| e.variable == (start, 1))
            .expect("the train variable");
        assert!(train.bursts > 10.0);
        assert_eq!(train.name, "train");
        assert!(train.score < 0.01);
        // The first distinct values, in line order, on every run.
        assert_eq!(train.examples, ["G1234", "D77"]);
        assert_eq!(
            top.examples,
            ["0000000100000003", "00001ef00001991c", "00003ddf00033235"]
        );
        let seat = ranked
            .iter()
            .find(|e| e.variable.0 == corpus.lines[1].point)
            .expect("the seat variable");
        assert_eq!(seat.shared, 0.0);
    }
}
