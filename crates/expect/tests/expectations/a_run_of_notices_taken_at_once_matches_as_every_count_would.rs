//! The matcher takes a whole run of notices at once where a `repeat ... notice(...)` loop
//! must (nothing after it can take a notice). That shortcut must never change a verdict:
//! the same programs, with the shortcut switched off so every count is tried, agree on
//! random threads of notices and tasks, with futures and optional statements around.

use causeway_expect::lang::ast::Item;
use causeway_expect::lang::parse;
use causeway_expect::matcher::{run, Candidates, Context, Outcome};
use causeway_expect::path::Path;
use causeway_expect::program::{compile_threads, Op, Params, Program};
use causeway_model::{Event, Span, SpanId, Trace, TraceId};
use proptest::prelude::*;

const MS: u64 = 1_000_000;

/// What the root task holds, in order: notices ("a", "b" or "c") and child tasks "t" with
/// a few notices of their own.
#[derive(Debug, Clone)]
enum Held {
    Notice(u8),
    Child(u8),
}

fn thread() -> impl Strategy<Value = Vec<Held>> {
    prop::collection::vec(
        prop_oneof![
            3 => (0u8..3).prop_map(Held::Notice),
            1 => (0u8..3).prop_map(Held::Child),
        ],
        0..12,
    )
}

fn text(n: u8) -> &'static str {
    ["a", "b", "c"][n as usize % 3]
}

fn path(items: &[Held]) -> Path {
    let trace = TraceId::new(1).unwrap();
    let mut spans = Vec::new();
    let mut root = Span::new(
        trace,
        SpanId::new(1).unwrap(),
        None,
        "root",
        "s",
        0,
        1_000 * MS,
    );
    root.host = "h".into();
    let mut t = MS;
    let mut next = 1;
    for item in items {
        match item {
            Held::Notice(n) => root.events.push(Event {
                time: t,
                name: text(*n).into(),
                attributes: vec![],
            }),
            Held::Child(k) => {
                next += 1;
                let mut c = Span::new(
                    trace,
                    SpanId::new(next).unwrap(),
                    Some(root.span_id),
                    "t",
                    "s",
                    t,
                    t + 10 * MS,
                );
                c.host = "h".into();
                for i in 0..*k {
                    c.events.push(Event {
                        time: t + (i as u64 + 1) * MS,
                        name: "a".into(),
                        attributes: vec![],
                    });
                }
                spans.push(c);
                t += 10 * MS;
            }
        }
        t += MS;
    }
    spans.push(root);
    Path::of(&Trace::assemble(trace, spans))
}

/// Statements of the root task's body: runs of notices of every shape, and what may
/// stand beside them.
fn statement() -> impl Strategy<Value = String> {
    let notice = prop_oneof![Just("*"), Just("\"a\""), Just("\"b\"")];
    prop_oneof![
        4 => (notice.clone(), 0u8..2, 0u8..4).prop_map(|(n, low, more)| format!(
            "repeat between {low} and {} notice({n});",
            low + more
        )),
        2 => notice.clone().prop_map(|n| format!("notice({n});")),
        1 => Just("task(\"t\") { repeat between 0 and 3 notice(*); }".to_string()),
        1 => Just("task(\"t\");".to_string()),
        1 => notice.clone().prop_map(|n| format!("future notice({n});")),
        1 => notice.prop_map(|n| format!("maybe notice({n});")),
        1 => Just("any();".to_string()),
    ]
}

fn program(body: &str) -> Program {
    let src = format!(r#"validator V {{ thread T(*, 1) {{ task("root") {{ {body} }} }} }}"#);
    let file = parse(&src).unwrap_or_else(|e| panic!("{}", e.render("test.pip", &src)));
    let Item::Recognizer(r) = &file.items[0] else {
        panic!("not a recognizer")
    };
    compile_threads(r, &Params::new(), &Default::default())
        .unwrap()
        .remove(0)
        .program
}

fn verdict(program: &Program, path: &Path) -> Outcome {
    let cx = Context {
        path,
        thread: 0,
        candidates: &Candidates::default(),
        fragment: false,
    };
    match run(program, &cx, &mut 1_000_000) {
        Outcome::NoMatch(_) => Outcome::NoMatch(causeway_expect::matcher::Stop { event: 0, op: 0 }),
        other => other,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn a_run_taken_at_once_gives_the_verdict_of_every_count_tried(
        items in thread(),
        body in prop::collection::vec(statement(), 0..6),
    ) {
        let path = path(&items);
        let shortcut = program(&body.join(" "));
        let mut every_count = shortcut.clone();
        let mut marked = 0;
        for op in &mut every_count.ops {
            if let Op::Loop { notice_run, .. } = op {
                marked += *notice_run as usize;
                *notice_run = false;
            }
        }
        let want = verdict(&every_count, &path);
        prop_assert_eq!(verdict(&shortcut, &path), want, "{} loops taken at once", marked);
    }
}

/// The generator's slots are the case the shortcut is for: each is marked, and a thread
/// with more notices in a row than a slot admits is still refused.
#[test]
fn the_slots_between_statements_take_their_runs_at_once() {
    let slot = "repeat between 0 and 2 notice(*);";
    let shortcut = program(&format!("{slot} task(\"t\") {{ {slot} }} {slot}"));
    let marked = shortcut
        .ops
        .iter()
        .filter(|op| {
            matches!(
                op,
                Op::Loop {
                    notice_run: true,
                    ..
                }
            )
        })
        .count();
    assert_eq!(marked, 3);
    let fits = path(&[
        Held::Notice(0),
        Held::Child(2),
        Held::Notice(1),
        Held::Notice(2),
    ]);
    assert_eq!(verdict(&shortcut, &fits), Outcome::Matched);
    let too_many = path(&[
        Held::Child(0),
        Held::Notice(0),
        Held::Notice(1),
        Held::Notice(2),
    ]);
    assert!(matches!(verdict(&shortcut, &too_many), Outcome::NoMatch(_)));
    // A pending future may take a notice in the middle of the run: then each count is tried.
    let future = program(r#"future notice("a"); repeat between 0 and 3 notice("b"); task("t");"#);
    let b_a_b = path(&[
        Held::Notice(1),
        Held::Notice(0),
        Held::Notice(1),
        Held::Child(0),
    ]);
    assert_eq!(verdict(&future, &b_a_b), Outcome::Matched);
    // Before a notice of its own the loop must try each count: not marked.
    let open = program(r#"repeat between 0 and 2 notice(*); notice("c");"#);
    assert!(!open.ops.iter().any(|op| matches!(
        op,
        Op::Loop {
            notice_run: true,
            ..
        }
    )));
}
