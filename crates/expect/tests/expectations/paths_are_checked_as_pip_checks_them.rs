//! The checker on the Pip paper's cases: the greedy trap, futures and done, the 2-of-3
//! quorum read with a late third reply, limits on tasks, messages and paths, set
//! recognizers, aggregates with windows, parameters and variables, and the reconciler.

use causeway_expect::check::Checker;
use causeway_expect::lang::parse;
use causeway_expect::path::{Path, Problem};
use causeway_expect::program::Params;
use causeway_model::{Direction, SpanKind};
use causeway_testkit::TraceBuilder;

const MS: u64 = 1_000_000;

fn checker(src: &str) -> Checker {
    checker_with(src, Params::new())
}

fn checker_with(src: &str, params: Params) -> Checker {
    let file = parse(src).unwrap_or_else(|e| panic!("{}", e.render("test.pip", src)));
    Checker::new(&file, params).unwrap()
}

/// A root task with notices at 1, 2, 3... ms.
fn notices(texts: &[&str]) -> Path {
    let mut b = TraceBuilder::new(1);
    let root = b.task(None, "h", "root", 0, 100 * MS);
    for (i, t) in texts.iter().enumerate() {
        b.notice(root, t, (i as u64 + 1) * MS);
    }
    Path::of(&b.trace())
}

#[test]
fn a_repeat_that_could_take_too_much_is_not_matched_greedily() {
    // Figure 5's trap: a greedy matcher lets the repeat take "C" and then fails.
    let c = checker(
        r#"validator V { thread T(*, 1) { task("root") {
             repeat between 0 and 2 notice(*);
             notice("C");
           } } }"#,
    );
    let (r, _) = c.check(&notices(&["A", "C"]));
    assert!(r.expected, "{r:?}");
    let (r, _) = c.check(&notices(&["A", "B", "C"]));
    assert!(r.expected, "{r:?}");
    // Three before C is one too many for the repeat.
    let (r, _) = c.check(&notices(&["A", "B", "D", "C"]));
    assert!(!r.expected);
    let miss = r.closest.unwrap();
    assert_eq!(miss.recognizer, "V");
    assert_eq!(miss.event, Some(3), "{miss:?}");
    assert!(miss.found.contains("notice(\"D\")"), "{miss:?}");
}

#[test]
fn futures_match_now_or_later_and_done_demands_them_by_its_point() {
    let later = r#"validator V { thread T(*, 1) { task("root") {
        future notice("A");
        notice("B");
    } } }"#;
    let c = checker(later);
    assert!(c.check(&notices(&["A", "B"])).0.expected, "now");
    assert!(c.check(&notices(&["B", "A"])).0.expected, "later");
    assert!(
        !c.check(&notices(&["B"])).0.expected,
        "never: every future by the end"
    );

    let done = r#"validator V { thread T(*, 1) { task("root") {
        future F { notice("A"); notice("A2"); }
        notice("B");
        done(F);
        notice("C");
    } } }"#;
    let c = checker(done);
    assert!(c.check(&notices(&["B", "A", "A2", "C"])).0.expected);
    assert!(
        !c.check(&notices(&["B", "C", "A", "A2"])).0.expected,
        "F after done(F)"
    );
    // A future matches contiguously.
    assert!(!c.check(&notices(&["A", "B", "A2", "C"])).0.expected);

    // Nested futures: the inner one only after the outer one.
    let nested = r#"validator V { thread T(*, 1) { task("root") {
        future { notice("X"); future notice("Y"); }
        notice("B");
    } } }"#;
    let c = checker(nested);
    assert!(c.check(&notices(&["X", "B", "Y"])).0.expected);
    assert!(c.check(&notices(&["B", "X", "Y"])).0.expected);
    assert!(!c.check(&notices(&["Y", "B", "X"])).0.expected);
}

/// The coordinator sends to three disks, takes two replies, notes "replied", and gets the
/// third reply at `third` (before or after the note), or never.
fn quorum(trace: u128, third: Option<u64>, reply_size: u64) -> Path {
    let mut b = TraceBuilder::new(trace);
    let read = b.task(None, "coord", "read", 0, 40 * MS);
    for d in 0..3u64 {
        b.message(read, Direction::Send, 10 + d, MS + d, 64);
        let disk = format!("disk-{d}");
        let srv = b.task(
            Some(read),
            &disk,
            "read block",
            2 * MS + d,
            10 * MS + d * 5 * MS,
        );
        b.message(srv, Direction::Recv, 10 + d, 2 * MS + d, 64);
        let reply_at = 10 * MS + d * 5 * MS;
        b.message(srv, Direction::Send, 20 + d, reply_at - 1, reply_size);
        let got = if d < 2 { Some(reply_at) } else { third };
        if let Some(t) = got {
            b.message(read, Direction::Recv, 20 + d, t, reply_size);
        }
    }
    b.notice(read, "replied", 22 * MS);
    Path::of(&b.trace())
}

const QUORUM: &str = r#"
validator QuorumRead {
  limit(REAL_TIME, 50ms);
  thread Coordinator("coord", 1) {
    task("read") {
      repeat 3 send(Peer);
      repeat $Q recv(Peer) limit(SIZE, {=4kb});
      future recv(Peer) limit(SIZE, 4kb);
      notice("replied");
    }
  }
  thread Peer(m/^disk-\d$/, 3) {
    task("read block") limit(REAL_TIME, {1ms, 30ms}) { recv(Coordinator); send(Coordinator); }
  }
}
fragment invalidator AllRepliesFirst { recv(*); recv(*); recv(*); notice("replied"); }
recognizer Slow { thread Coordinator("coord", 1) { task("read") limit(REAL_TIME, {30ms+}); } thread Peer(*, 3) { any(); } }
validator FastQuorum : QuorumRead && !Slow;
"#;

#[test]
fn a_two_of_three_quorum_read_with_a_late_third_reply() {
    let params = Params::from([("Q".to_string(), 2.0)]);
    let c = checker_with(QUORUM, params);
    // The third reply after the answer: expected, and the path is reconciled clean.
    let late = quorum(1, Some(25 * MS), 4096);
    assert!(late.problems.is_empty(), "{:?}", late.problems);
    let (r, _) = c.check(&late);
    assert!(r.expected, "{r:?}");
    assert_eq!(r.matched, ["QuorumRead", "Slow"]);
    // All three before the answer: the future matched at once, but the invalidator fires.
    let (r, _) = c.check(&quorum(2, Some(21 * MS), 4096));
    assert!(!r.expected);
    assert_eq!(r.invalidated_by, ["AllRepliesFirst"]);
    // The third reply never arrives: no validator, and the reconciler sees the unpaired send.
    let lost = quorum(3, None, 4096);
    assert!(
        matches!(
            lost.problems[..],
            [Problem::UnpairedSend { message: 22, .. }]
        ),
        "{:?}",
        lost.problems
    );
    let (r, _) = c.check(&lost);
    assert!(!r.expected);
    let miss = r.closest.expect("a closest validator");
    // The first thing that went wrong: disk-2's reply has no receiver.
    assert_eq!(miss.pattern.as_deref(), Some("Peer"), "{miss:?}");
    assert!(
        miss.thread.as_deref().unwrap().contains("disk-2"),
        "{miss:?}"
    );
    assert!(
        miss.found.starts_with("send to an unknown peer"),
        "{miss:?}"
    );
    // Replies of the wrong size break the SIZE limit.
    let (r, _) = c.check(&quorum(4, Some(25 * MS), 100));
    assert!(!r.expected);
    // With --param Q=3 the same file asks for three replies before the answer.
    let c3 = checker_with(QUORUM, Params::from([("Q".to_string(), 3.0)]));
    assert!(!c3
        .check(&quorum(5, Some(25 * MS), 4096))
        .0
        .matched
        .contains(&"QuorumRead".to_string()));
}

#[test]
fn limits_on_tasks_and_paths() {
    let c = checker(
        r#"validator V { limit(REAL_TIME, 20ms); thread T(*, 1) { task("root") limit(REAL_TIME, {1ms, 10ms}) { any(); } } }"#,
    );
    let path = |end| {
        let mut b = TraceBuilder::new(9);
        b.task(None, "h", "root", 0, end);
        Path::of(&b.trace())
    };
    assert!(c.check(&path(5 * MS)).0.expected);
    assert!(!c.check(&path(15 * MS)).0.expected, "task limit");
    assert!(!c.check(&path(MS / 2)).0.expected, "task lower bound");
    let c = checker(r#"validator V { limit(REAL_TIME, 2ms); thread T(*, 1) { task("root"); } }"#);
    let (r, _) = c.check(&path(5 * MS));
    assert!(!r.expected);
    assert!(r
        .closest
        .unwrap()
        .expected
        .contains("limit(REAL_TIME, 2ms)"));
}

#[test]
fn variables_bind_a_count_and_a_name_for_later() {
    let c = checker(
        r#"validator V { thread T(*, 1) { task("root") {
             $n = repeat between 1 and 5 notice("in");
             $x = task(*);
             repeat $n notice("out");
             task($x);
           } } }"#,
    );
    let path = |ins: usize, outs: usize, second: &str| {
        let mut b = TraceBuilder::new(3);
        let root = b.task(None, "h", "root", 0, 100 * MS);
        let mut t = MS;
        for _ in 0..ins {
            b.notice(root, "in", t);
            t += MS;
        }
        b.task(Some(root), "h", "step", t, t + 1);
        t += MS;
        for _ in 0..outs {
            b.notice(root, "out", t);
            t += MS;
        }
        b.task(Some(root), "h", second, t, t + 1);
        Path::of(&b.trace())
    };
    assert!(c.check(&path(3, 3, "step")).0.expected);
    assert!(!c.check(&path(3, 2, "step")).0.expected, "counts differ");
    assert!(!c.check(&path(2, 2, "other")).0.expected, "names differ");
}

#[test]
fn aggregates_over_paths_and_windows() {
    let src = r#"
recognizer Read { thread T(*, 1) { task("root"); } }
assert(instances(Read) == 4);
assert(average(REAL_TIME, Read) < 6ms);
assert(max(REAL_TIME, "root") <= 8ms && min(REAL_TIME, "root") >= 2ms);
assert(unique(Read) in {1, 2});
during(any 15s) assert(instances(Read) <= 2);
during(any 15s) assert(instances(Read) <= 1);
assert(sqrt(instances(Read)) ** 2 == 4);
"#;
    let c = checker(src);
    let facts: Vec<_> = [2u64, 4, 6, 8]
        .iter()
        .enumerate()
        .map(|(i, ms)| {
            let mut b = TraceBuilder::new(10 + i as u128);
            let start = i as u64 * 10_000 * MS;
            b.task(None, "h", "root", start, start + ms * MS);
            c.check(&Path::of(&b.trace())).1
        })
        .collect();
    let failed = c.assertions(&facts);
    let lines: Vec<u32> = failed.iter().map(|f| f.line).collect();
    // Only the one-per-15s window fails: paths 10 s apart put two in a window.
    assert_eq!(lines, [8], "{failed:?}");
    assert!(failed[0].window.is_some());
}

#[test]
fn the_reconciler_reports_reused_ids_and_tasks_without_an_end() {
    let mut b = TraceBuilder::new(7);
    let a = b.task(None, "h", "outer", 0, 10 * MS);
    // Same thread, starts inside "outer" but ends after it: it ran concurrently (an
    // async task), so it is a thread of its own, not an error.
    b.task(Some(a), "h", "spawned", 2 * MS, 20 * MS);
    // A span whose end precedes its start never properly ended.
    b.task(Some(a), "h", "broken", 5 * MS, 4 * MS);
    b.message(a, Direction::Send, 5, MS, 1);
    b.message(a, Direction::Send, 5, 3 * MS, 1);
    let other = b.task(Some(a), "g", "peer", MS, 9 * MS);
    b.message(other, Direction::Recv, 5, 4 * MS, 1);
    let path = Path::of(&b.trace());
    assert!(
        path.problems.contains(&Problem::ReusedMessageId {
            message: 5,
            times: 3
        }),
        "{:?}",
        path.problems
    );
    let unended: Vec<&str> = path
        .problems
        .iter()
        .filter_map(|p| match p {
            Problem::TaskWithoutEnd { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(unended, ["broken"], "{:?}", path.problems);
    assert_eq!(
        path.threads
            .iter()
            .filter(|t| t.key.host.as_ref() == "h")
            .count(),
        2
    );
}

#[test]
fn a_pathological_pattern_ends_undecided_instead_of_hanging() {
    let src = r#"validator V { thread T(*, 1) { task("root") {
        repeat between 0 and 40 { maybe notice(*); maybe notice(*); future notice(*); }
        notice("never");
    } } }"#;
    let file = parse(src).unwrap();
    let c = Checker::new(&file, Params::new())
        .unwrap()
        .with_budget(20_000);
    let texts: Vec<String> = (0..30).map(|i| format!("n{i}")).collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (r, _) = c.check(&notices(&refs));
    assert!(!r.expected);
    assert_eq!(r.undecided, ["V"]);
}

#[test]
fn rpcs_become_send_and_receive_inside_the_client_and_server_tasks() {
    let mut b = TraceBuilder::new(8);
    let root = b.task(None, "web", "GET /", 0, 10 * MS);
    let call = b.task(Some(root), "web", "GET /item", MS, 9 * MS);
    b.get(call).kind = SpanKind::Client;
    let srv = b.task(Some(call), "db", "GET /item", 2 * MS, 8 * MS);
    b.get(srv).kind = SpanKind::Server;
    let c = checker(
        r#"validator V {
             thread Web("web", 1) { task("GET /") { task("GET /item") { send(Db); recv(Db) limit(LATENCY, 2ms); } } }
             thread Db("db", 1) { task("GET /item") { recv(Web); send(Web); } }
           }"#,
    );
    let (r, _) = c.check(&Path::of(&b.trace()));
    assert!(r.expected, "{r:?}");
}

#[test]
fn the_reconcilers_findings_come_in_message_id_order() {
    let mut b = TraceBuilder::new(8);
    let a = b.task(None, "h", "root", 0, 10 * MS);
    for (message, at) in [(900, 1), (3, 2), (57, 3), (3, 4), (12, 5)] {
        b.message(a, Direction::Send, message, at * MS, 1);
    }
    let path = Path::of(&b.trace());
    let ids: Vec<u64> =
        path.problems
            .iter()
            .filter_map(|p| match p {
                Problem::ReusedMessageId { message, .. }
                | Problem::UnpairedSend { message, .. } => Some(*message),
                _ => None,
            })
            .collect();
    assert_eq!(ids, [3, 3, 12, 57, 900], "{:?}", path.problems);
    // A reused id is reported before its unpaired end.
    assert!(
        matches!(
            path.problems[..2],
            [
                Problem::ReusedMessageId {
                    message: 3,
                    times: 2
                },
                Problem::UnpairedSend { message: 3, .. }
            ]
        ),
        "{:?}",
        path.problems
    );
}

/// A thread is tried only on the patterns its first task admits. The task a pattern must
/// begin with is found past what may match nothing (generated patterns begin with any
/// notices), and a pattern that may begin otherwise is tried on every thread.
#[test]
fn a_pattern_is_looked_up_by_the_task_it_must_begin_with_past_optional_notices() {
    let first = |body: &str| -> Option<String> {
        let src = format!("validator V {{ thread T(*, 1) {{ {body} }} }}");
        let file = parse(&src).unwrap_or_else(|e| panic!("{}", e.render("test.pip", &src)));
        let causeway_expect::lang::ast::Item::Recognizer(r) = &file.items[0] else {
            panic!("not a recognizer")
        };
        let threads =
            causeway_expect::program::compile_threads(r, &Params::new(), &Default::default())
                .unwrap();
        threads[0].program.first_task.as_deref().map(str::to_string)
    };
    let a = Some("root".to_string());
    assert_eq!(first(r#"task("root");"#), a);
    assert_eq!(
        first(r#"repeat between 0 and 9 notice(*); task("root") { notice("A"); }"#),
        a
    );
    assert_eq!(
        first(r#"$n = 2; xor { branch: task("root"); branch: task("root") { notice("A"); } }"#),
        a
    );
    for open in [
        r#"maybe task("other"); task("root");"#,
        r#"future task("other"); task("root");"#,
        r#"any(); task("root");"#,
        r#"task(m/ro+t/);"#,
        r#"repeat between 0 and 2 task("root");"#,
    ] {
        assert_eq!(first(open), None, "{open}");
    }
    // Looked up or tried everywhere, the verdicts are Pip's.
    for (body, expected) in [
        (
            r#"repeat between 0 and 9 notice(*); task("root") { repeat between 0 and 9 notice(*); }"#,
            true,
        ),
        (r#"repeat between 0 and 9 notice(*); task("other");"#, false),
        (r#"maybe task("other"); task("root");"#, true),
        (r#"future task("other"); task("root");"#, false),
    ] {
        let c = checker(&format!("validator V {{ thread T(*, 1) {{ {body} }} }}"));
        let (r, _) = c.check(&notices(&["A", "B"]));
        assert_eq!(r.expected, expected, "{body}: {r:?}");
    }
}
