//! Everything Pip's own grammar (`expect.yy`, `expect.l`) accepts parses, prints back to
//! the same tree, and means what it means in Pip. Each test is named after a construct
//! that once failed; the texts are small files in the style of Pip's `spec.pip`.

use causeway_expect::check::Checker;
use causeway_expect::lang::ast::*;
use causeway_expect::lang::parse;
use causeway_expect::program::Params;

/// Parses `src`, prints it, parses the print: the trees must agree.
fn round_trip(src: &str) -> File {
    let file = parse(src).unwrap_or_else(|e| panic!("{}", e.render("test.pip", src)));
    let printed = file.to_string();
    let again = parse(&printed).unwrap_or_else(|e| panic!("{}", e.render("printed", &printed)));
    assert_eq!(
        without_lines(again),
        without_lines(file.clone()),
        "printed:\n{printed}"
    );
    file
}

fn without_lines(mut f: File) -> File {
    for item in &mut f.items {
        if let Item::Assert { line, .. } = item {
            *line = 0;
        }
    }
    f
}

/// The statements of the first thread of the first recognizer.
fn thread_body(file: &File) -> &[Stmt] {
    match &file.items[0] {
        Item::Recognizer(r) => &r.threads[0].body,
        Item::Fragment(f) => &f.body,
        other => panic!("{other:?}"),
    }
}

fn limits_of_first_task(file: &File) -> &[Limit] {
    match &thread_body(file)[0] {
        Stmt::Task { limits, .. } => limits,
        other => panic!("{other:?}"),
    }
}

#[test]
fn string_escapes_keep_an_unknown_backslash_as_pips_lexer_does() {
    let f = round_trip(r#"fragment recognizer F { notice("a\d"); notice("tab\there \"q\" \\"); }"#);
    assert_eq!(thread_body(&f)[0], Stmt::Notice(Text::Exact(r"a\d".into())));
    assert_eq!(
        thread_body(&f)[1],
        Stmt::Notice(Text::Exact("tab\there \"q\" \\".into()))
    );
}

#[test]
fn a_doubled_backslash_in_a_regex_is_one_backslash() {
    // `m/a\\d+/` is the PCRE `a\d+` in Pip; `m/x\\/` ends at its last slash.
    let f = round_trip(
        r"fragment recognizer F { notice(m/a\\d+/); notice(m/x\\/); notice(m/a\/b\d/); }",
    );
    let texts: Vec<&Text> = thread_body(&f)
        .iter()
        .map(|s| match s {
            Stmt::Notice(t) => t,
            other => panic!("{other:?}"),
        })
        .collect();
    let patterns: Vec<&str> = texts
        .iter()
        .map(|t| match t {
            Text::Regex(r, _) => r.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(patterns, [r"a\d+", r"x\", r"a/b\d"]);
}

#[test]
fn units_of_any_case_and_apart_from_their_number() {
    let f = round_trip(
        r#"fragment recognizer F {
             task("a") limit(SIZE, 4 kb) limit(REAL_TIME, {1 ms, 10 MS}) limit(CPU_TIME, {2h+});
             task("b") limit(REAL_TIME, {=1m}) limit(SIZE, {1gb, 2 TB});
           }
           assert(average(CPU_TIME, F) < 5 s);
           during(any 10 s) assert(instances(F) > 0);"#,
    );
    let l = limits_of_first_task(&f);
    assert_eq!(
        l[0].high,
        Some(Quantity::Lit {
            value: 4.0,
            unit: "kb".into()
        })
    );
    assert_eq!(
        l[1].high,
        Some(Quantity::Lit {
            value: 10.0,
            unit: "MS".into()
        })
    );
    // Hours, minutes, gigabytes and terabytes mean what they do in Pip.
    let c = checker(
        r#"validator V { thread T(*, 1) { task("root") limit(REAL_TIME, {1M, 1H}) limit(SIZE, 1TB); } }"#,
    );
    assert!(c.check(&one_task("root", 2 * MINUTE)).0.expected);
    assert!(!c.check(&one_task("root", 30 * SECOND)).0.expected);
    assert!(!c.check(&one_task("root", 61 * MINUTE)).0.expected);
}

// Paths to check, built the way paths_are_checked_as_pip_checks_them.rs builds them.

use causeway_expect::path::Path;
use causeway_model::Direction;
use causeway_testkit::TraceBuilder;

const MS: u64 = 1_000_000;
const SECOND: u64 = 1000 * MS;
const MINUTE: u64 = 60 * SECOND;

fn checker(src: &str) -> Checker {
    checker_with(src, Params::new())
}

fn checker_with(src: &str, params: Params) -> Checker {
    let file = parse(src).unwrap_or_else(|e| panic!("{}", e.render("test.pip", src)));
    Checker::new(&file, params).unwrap_or_else(|e| panic!("{e}"))
}

/// The compile error of a text that parses.
fn compile_error(src: &str) -> String {
    let file = parse(src).unwrap_or_else(|e| panic!("{}", e.render("test.pip", src)));
    match Checker::new(&file, Params::new()) {
        Ok(_) => panic!("compiled: {src}"),
        Err(e) => e.to_string(),
    }
}

/// One task on host "h" lasting `ns`.
fn one_task(name: &str, ns: u64) -> Path {
    let mut b = TraceBuilder::new(1);
    b.task(None, "h", name, 0, ns);
    Path::of(&b.trace())
}

/// A root task on `host` with notices at 1, 2, 3... ms.
fn notices_on(trace: u128, host: &str, texts: &[&str]) -> Path {
    let mut b = TraceBuilder::new(trace);
    let root = b.task(None, host, "root", 0, 100 * MS);
    for (i, t) in texts.iter().enumerate() {
        b.notice(root, t, (i as u64 + 1) * MS);
    }
    Path::of(&b.trace())
}

fn notices(texts: &[&str]) -> Path {
    notices_on(1, "h", texts)
}

#[test]
fn a_pcre_regex_parses_and_is_refused_by_place_when_compiled() {
    // Pip hands regexes to PCRE; the parser takes any, the compiler names the one it
    // cannot run by line and column.
    let src = "validator V {\n  thread T(*, 1) {\n    notice(m/(a)\\1/);\n  }\n}";
    round_trip(src);
    let e = compile_error(src);
    assert!(e.contains("3:12: m/(a)\\1/ is not a regex"), "{e}");
    let e = compile_error("validator V { thread T(m/(/, 1) { } }");
    assert!(e.contains("1:24: m/(/ is not a regex"), "{e}");
}

#[test]
fn negated_hosts_in_thread_patterns() {
    // split.pip's `thread Receiver(!"client0", {0,99})`: any host but the sender's.
    let src = r#"
validator Multicast {
  thread Sender("client0", 1) { task("root") { notice("sent"); } }
  thread Receiver(!"client0", {0, 99}) { task("root") { notice("got"); } }
}"#;
    let f = round_trip(src);
    let Item::Recognizer(r) = &f.items[0] else {
        panic!()
    };
    assert_eq!(
        r.threads[1].host,
        Text::Not(Box::new(Text::Exact("client0".into())))
    );
    let c = checker(src);
    let path = |receiver: &str| {
        let mut b = TraceBuilder::new(2);
        let root = b.task(None, "client0", "root", 0, 10 * MS);
        b.notice(root, "sent", MS);
        let other = b.task(Some(root), receiver, "root", 2 * MS, 9 * MS);
        b.notice(other, "got", 3 * MS);
        Path::of(&b.trace())
    };
    assert!(c.check(&path("client1")).0.expected);
    // The receiver's thread on client0 takes no pattern: the sender's wants "sent".
    assert!(!c.check(&path("client0")).0.expected);
}

#[test]
fn negated_task_names_notices_and_regexes() {
    let src = r#"validator V { thread T(*, 1) { task(!"idle") {
        notice(!m/^debug/);
        notice(!!"twice");
        notice(!*);
    } } }"#;
    let f = round_trip(src);
    let Stmt::Task { name, body, .. } = &thread_body(&f)[0] else {
        panic!()
    };
    assert_eq!(name, &Text::Not(Box::new(Text::Exact("idle".into()))));
    assert_eq!(
        body.as_ref().unwrap()[1],
        Stmt::Notice(Text::Not(Box::new(Text::Not(Box::new(Text::Exact(
            "twice".into()
        ))))))
    );
    // `!*` matches nothing, so this one never matches; without it, the rest decide.
    assert!(!checker(src).check(&notices(&["info", "twice"])).0.expected);
    let c = checker(
        r#"validator V { thread T(*, 1) { task(!"idle") { notice(!m/^debug/); notice(!!"twice"); } } }"#,
    );
    assert!(c.check(&notices(&["info", "twice"])).0.expected);
    assert!(
        !c.check(&notices(&["debug: x", "twice"])).0.expected,
        "!m/^debug/"
    );
    assert!(
        !c.check(&notices(&["info", "once"])).0.expected,
        "!!\"twice\""
    );
    let mut b = TraceBuilder::new(3);
    let idle = b.task(None, "h", "idle", 0, 10 * MS);
    b.notice(idle, "info", MS);
    b.notice(idle, "twice", 2 * MS);
    assert!(!c.check(&Path::of(&b.trace())).0.expected, "!\"idle\"");
}

#[test]
fn negated_send_and_recv_peers() {
    let src = r#"validator V {
      thread Client("client0", 1) { task("root") { send(!"client0"); } }
      thread Server(*, 1) { task("serve") { recv(!m/^server/); } }
    }"#;
    round_trip(src);
    let c = checker(src);
    let path = |server: &str| {
        let mut b = TraceBuilder::new(4);
        let root = b.task(None, "client0", "root", 0, 10 * MS);
        b.message(root, Direction::Send, 7, MS, 64);
        let serve = b.task(Some(root), server, "serve", 2 * MS, 9 * MS);
        b.message(serve, Direction::Recv, 7, 2 * MS, 64);
        Path::of(&b.trace())
    };
    assert!(c.check(&path("db-1")).0.expected);
    // A send to client0 itself is not a send to `!"client0"`.
    assert!(!c.check(&path("client0")).0.expected);
    // `!` before a bare name is not Pip's (its names are thread patterns, not texts).
    let e = parse(r#"validator V { thread T(*, 1) { send(!Server); } }"#).unwrap_err();
    assert!(e.to_string().contains("after `!`"), "{e}");
}

#[test]
fn level_is_kept_in_the_tree_and_printed() {
    // split.pip heads recognizers with `level(3);`, spec.pip an invalidator.
    let src = r#"
recognizer McPath {
  level(3);
  limit(HOSTS, {=1});
  thread Sender("h", 1) { level(2); task("root"); }
}
fragment invalidator I2 { level(1); task("outer") { task("inner"); } }"#;
    let f = round_trip(src);
    let printed = f.to_string();
    assert!(
        printed.contains("  level(3);\n  limit(HOSTS, {=1});"),
        "{printed}"
    );
    assert!(
        printed.contains("level(2);") && printed.contains("level(1);"),
        "{printed}"
    );
    let Item::Recognizer(r) = &f.items[0] else {
        panic!()
    };
    assert_eq!(r.limits[0].form, LimitForm::Level);
    // Pip ignores levels when checking, and so does Causeway.
    assert!(checker(src).check(&one_task("root", MS)).0.matched == ["McPath"]);
}

/// Recognizers A, B and C, each matching a path of one task of its (lower-case) name.
const ABC: &str = r#"
recognizer A { thread T(*, 1) { task("a"); } }
recognizer B { thread T(*, 1) { task("b"); } }
recognizer C { thread T(*, 1) { task("c"); } }
"#;

fn set_of(src: &str) -> SetExpr {
    match &round_trip(src).items[0] {
        Item::Set { expr, .. } => expr.clone(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn and_or_and_implies_share_one_level_left_to_right() {
    let n = |s: &str| Box::new(SetExpr::Name(s.into()));
    assert_eq!(
        set_of("recognizer R : A || B && C;"),
        SetExpr::And(Box::new(SetExpr::Or(n("A"), n("B"))), n("C"))
    );
    assert_eq!(
        set_of("recognizer R : A -> B -> C;"),
        SetExpr::Implies(Box::new(SetExpr::Implies(n("A"), n("B"))), n("C"))
    );
    assert_eq!(
        set_of("recognizer R : A -> B && C;"),
        SetExpr::And(Box::new(SetExpr::Implies(n("A"), n("B"))), n("C"))
    );
    assert_eq!(
        set_of("recognizer R : !A && (B || C);"),
        SetExpr::And(
            Box::new(SetExpr::Not(n("A"))),
            Box::new(SetExpr::Or(n("B"), n("C")))
        )
    );
    // Checked as Pip groups it: a path of A alone is (A || B) && C = false, where
    // A || (B && C) would have said true.
    let c = checker(&format!("{ABC}recognizer R : A || B && C;"));
    assert!(!c
        .check(&one_task("a", MS))
        .0
        .matched
        .contains(&"R".to_string()));
    let c = checker(&format!("{ABC}recognizer R : A -> B -> C;"));
    // (A -> B) -> C on a path of C alone: true; on A alone: (false -> ...) is true.
    assert!(c
        .check(&one_task("c", MS))
        .0
        .matched
        .contains(&"R".to_string()));
    assert!(c
        .check(&one_task("a", MS))
        .0
        .matched
        .contains(&"R".to_string()));
    // On B alone: (A -> B) is true, C is false.
    assert!(!c
        .check(&one_task("b", MS))
        .0
        .matched
        .contains(&"R".to_string()));

    // The same in assertions.
    let f = round_trip("assert(instances(A) > 0 || instances(B) > 0 && instances(C) > 0);");
    let Item::Assert { expr, .. } = &f.items[0] else {
        panic!()
    };
    assert!(
        matches!(expr, Expr::Bin("&&", left, _) if matches!(**left, Expr::Bin("||", ..))),
        "{expr:?}"
    );
    let c = checker(&format!(
        "{ABC}assert(instances(A) > 0 || instances(B) > 0 && instances(C) > 0);"
    ));
    let facts = vec![c.check(&one_task("a", MS)).1];
    assert_eq!(
        c.assertions(&facts).len(),
        1,
        "(A || B) && C fails without C"
    );
}

#[test]
fn implication_in_an_assertion() {
    // spec.pip's, commented out there but grammatical.
    let src = format!(
        "{ABC}during(any 5s) assert( instances(A) > 0 -> instances(B) == 0 );\n\
         assert(instances(A) > 0 -> instances(B) > 0 -> instances(C) > 0);"
    );
    let f = round_trip(&src);
    let Item::Assert { expr, .. } = &f.items[3] else {
        panic!()
    };
    assert!(matches!(expr, Expr::Bin("->", ..)), "{expr:?}");
    let c = checker(&src);
    let a = c.check(&one_task("a", MS)).1;
    let b = c.check(&one_task("b", MS)).1;
    // A and no B: both hold ((A -> B) is false, so (false -> C) holds).
    assert!(c.assertions(std::slice::from_ref(&a)).is_empty());
    // A and B in one window: the first fails; the second needs C.
    let failed: Vec<u32> = c.assertions(&[a, b]).iter().map(|f| f.line).collect();
    assert_eq!(failed, [5, 6]);
}

#[test]
fn not_before_a_comparison_negates_the_comparison() {
    let f = round_trip("assert(!instances(A) > 1);\nassert((!instances(A)) + 1 > 1);");
    let Item::Assert { expr, .. } = &f.items[0] else {
        panic!()
    };
    assert!(
        matches!(expr, Expr::Not(inner) if matches!(**inner, Expr::Bin(">", ..))),
        "{expr:?}"
    );
    let c = checker(&format!("{ABC}assert(!instances(A) > 1);"));
    // One instance: !(1 > 1) holds; (!1) > 1 would not.
    assert!(c.assertions(&[c.check(&one_task("a", MS)).1]).is_empty());
}

#[test]
fn in_a_pair_is_an_inclusive_range_as_in_pip() {
    // spec.pip's `instances(FR1) in { 1, 5 }`: from 1 to 5, not "1 or 5".
    let src = format!("{ABC}assert( instances(A) in {{ 1, 5 }} );");
    let f = round_trip(&src);
    let Item::Assert { expr, .. } = &f.items[3] else {
        panic!()
    };
    assert!(
        matches!(expr, Expr::In(_, w) if matches!(**w, Within::Between(..))),
        "{expr:?}"
    );
    let c = checker(&src);
    let three: Vec<_> = (0..3).map(|_| c.check(&one_task("a", MS)).1).collect();
    assert!(c.assertions(&three).is_empty(), "3 is in {{1, 5}}");
    let six: Vec<_> = (0..6).map(|_| c.check(&one_task("a", MS)).1).collect();
    assert_eq!(c.assertions(&six).len(), 1, "6 is not");
    // A list of another length was a set here; Pip has only pairs, so it is refused.
    let e = parse("assert(instances(A) in {1, 2, 3});").unwrap_err();
    assert!(e.to_string().contains("a range has two ends"), "{e}");
    let e = parse("assert(instances(A) in {1});").unwrap_err();
    assert!(e.to_string().contains("`{low+}`"), "{e}");
}

#[test]
fn in_at_least_and_in_exactly() {
    let src = format!(
        "{ABC}assert(instances(A) in {{2+}});\n\
         assert(average(REAL_TIME, A) in {{=5ms}});\n\
         assert(average(REAL_TIME, A) in {{4 ms, 6 ms}} && instances(A) in {{ 1.5 + }});"
    );
    let f = round_trip(&src);
    let Item::Assert { expr, .. } = &f.items[3] else {
        panic!()
    };
    assert!(
        matches!(expr, Expr::In(_, w) if matches!(**w, Within::AtLeast(..))),
        "{expr:?}"
    );
    let c = checker(&src);
    let two: Vec<_> = (0..2).map(|_| c.check(&one_task("a", 5 * MS)).1).collect();
    assert!(c.assertions(&two).is_empty(), "{:?}", c.assertions(&two));
    let one = vec![c.check(&one_task("a", 4 * MS)).1];
    let failed: Vec<u32> = c.assertions(&one).iter().map(|f| f.line).collect();
    assert_eq!(failed, [5, 6, 7]);
}

#[test]
fn aggregates_take_a_task_regex_or_any_task() {
    let src = r#"
assert(average(REAL_TIME, m/^fab::/) < 30ms);
assert(max(CPU_TIME, *) < 1s);
assert(max(REAL_TIME, *) < 50ms);
assert(min(REAL_TIME, *) >= 10 ms && stddev(REAL_TIME, m/^fab::/) == 5ms);
"#;
    let f = round_trip(src);
    let Item::Assert { expr, .. } = &f.items[0] else {
        panic!()
    };
    let Expr::Bin("<", avg, _) = expr else {
        panic!("{expr:?}")
    };
    assert!(
        matches!(&**avg, Expr::Call(n, a) if n == "average" && matches!(a[1], Expr::Text(Text::Regex(..)))),
        "{avg:?}"
    );
    let c = checker(src);
    let mut b = TraceBuilder::new(5);
    let root = b.task(None, "h", "other", 0, 100 * MS);
    b.task(Some(root), "h", "fab::read", MS, 11 * MS);
    b.task(Some(root), "h", "fab::write", 20 * MS, 40 * MS);
    let failed: Vec<u32> = c
        .assertions(&[c.check(&Path::of(&b.trace())).1])
        .iter()
        .map(|f| f.line)
        .collect();
    // These spans record no CPU time, so line 3 cannot be evaluated; of the rest only
    // the slowest of all tasks, 100 ms, breaks a bound (line 4).
    assert_eq!(failed, [3, 4]);
    let e = compile_error("assert(average(REAL_TIME, m/(a)\\1/) < 1s);");
    assert!(e.contains("1:27: m/(a)\\1/ is not a regex"), "{e}");
}

/// A root task on "h" with these tasks (each 1 ms, in order) inside.
fn tasks(names: &[&str]) -> Path {
    let mut b = TraceBuilder::new(6);
    let root = b.task(None, "h", "root", 0, 100 * MS);
    for (i, n) in names.iter().enumerate() {
        let at = (i as u64 + 1) * 2 * MS;
        b.task(Some(root), "h", n, at, at + MS);
    }
    Path::of(&b.trace())
}

fn expected(c: &Checker, path: &Path) -> bool {
    c.check(path).0.expected
}

#[test]
fn assignments_of_literals_and_counts_parse() {
    // The forms of spec.pip's validator VAR1, in a file of our own.
    let src = r#"
validator Vars {
  thread Client(*, 1) {
    $peer = send(Server);
    recv($peer);
    $t = task(*);
    $t = "Lookup";
    task($t);
    $u = m/^cache/;
    $v = *;
    $w = !"idle";
    $y = $t;
    $k = ($n);
  }
  thread Server(*, 1) {
    $from = recv(Client);
    send($from);
    $n = repeat between 1 and 3 { task(*); }
    $z = $n*$n;
    $z = 2;
    $z = $z + 1 - 1 * ($n - 2);
    repeat $z*2 { notice(*); }
    repeat between 1 and $n+1 notice(*);
    $k = instances(Vars);
    $k = unique($from);
  }
}"#;
    let f = round_trip(src);
    let Item::Recognizer(r) = &f.items[0] else {
        panic!()
    };
    let c = &r.threads[0].body;
    assert_eq!(
        c[3],
        Stmt::Assign {
            var: "t".into(),
            value: Value::Text(Text::Exact("Lookup".into()))
        }
    );
    assert!(matches!(&c[8], Stmt::Assign { value: Value::Text(Text::Var(y)), .. } if y == "t"));
    assert!(matches!(&c[9], Stmt::Assign { value: Value::Count(Count::Var(n)), .. } if n == "n"));
    let s = &r.threads[1].body;
    let var = |v: &str| Box::new(Count::Var(v.into()));
    assert_eq!(
        s[3],
        Stmt::Assign {
            var: "z".into(),
            value: Value::Count(Count::Bin("*", var("n"), var("n")))
        }
    );
    assert_eq!(
        s[4],
        Stmt::Assign {
            var: "z".into(),
            value: Value::Count(Count::Num(2))
        }
    );
    let Stmt::Repeat { low, .. } = &s[6] else {
        panic!("{:?}", s[6])
    };
    assert_eq!(low, &Count::Bin("*", var("z"), Box::new(Count::Num(2))));
    let Stmt::Repeat { high, .. } = &s[7] else {
        panic!("{:?}", s[7])
    };
    assert_eq!(high, &Count::Bin("+", var("n"), Box::new(Count::Num(1))));
    // Pip's counts have no parentheses; the printer writes them only where needed.
    let printed = f.to_string();
    assert!(printed.contains("$z = $z + 1 - 1 * ($n - 2);"), "{printed}");
    assert!(printed.contains("repeat $z * 2 {"), "{printed}");
}

#[test]
fn assigned_literals_bind_a_variable_for_later() {
    let c = checker(
        r#"validator V { thread T(*, 1) { task("root") {
             $t = task(*);
             $t = "lookup";
             task($t);
             $u = !m/^debug/;
             notice($u);
           } } }"#,
    );
    let path = |first: &str, second: &str, note: &str| {
        let mut b = TraceBuilder::new(7);
        let root = b.task(None, "h", "root", 0, 100 * MS);
        b.task(Some(root), "h", first, MS, 2 * MS);
        b.task(Some(root), "h", second, 3 * MS, 4 * MS);
        b.notice(root, note, 5 * MS);
        Path::of(&b.trace())
    };
    assert!(expected(&c, &path("any", "lookup", "info")));
    // `$t` was rebound to "lookup": the first task's name no longer counts.
    assert!(!expected(&c, &path("same", "same", "info")));
    assert!(
        !expected(&c, &path("any", "lookup", "debug: x")),
        "!m/^debug/"
    );
}

#[test]
fn a_variable_assigned_another_or_its_negation() {
    let copy = checker(
        r#"validator V { thread T(*, 1) { task("root") { $y = task(*); $x = $y; task($x); } } }"#,
    );
    assert!(expected(&copy, &tasks(&["a", "a"])));
    assert!(!expected(&copy, &tasks(&["a", "b"])));
    let negated = checker(
        r#"validator V { thread T(*, 1) { task("root") { $y = task(*); $x = !$y; task($x); $w = !$x; task($w); } } }"#,
    );
    assert!(expected(&negated, &tasks(&["a", "b", "a"])));
    assert!(!expected(&negated, &tasks(&["a", "a", "a"])), "!$y");
    assert!(!expected(&negated, &tasks(&["a", "b", "b"])), "!!$y");
}

#[test]
fn a_variable_bound_differently_on_each_branch() {
    let c = checker(
        r#"validator V { thread T(*, 1) { task("root") {
             xor {
               branch: notice("fixed"); $x = "a";
               branch: notice("seen"); $x = task(*);
             }
             task($x);
           } } }"#,
    );
    let path = |note: &str, names: &[&str]| {
        let mut b = TraceBuilder::new(8);
        let root = b.task(None, "h", "root", 0, 100 * MS);
        b.notice(root, note, MS);
        for (i, n) in names.iter().enumerate() {
            let at = (i as u64 + 2) * 2 * MS;
            b.task(Some(root), "h", n, at, at + MS);
        }
        Path::of(&b.trace())
    };
    assert!(expected(&c, &path("fixed", &["a"])));
    assert!(!expected(&c, &path("fixed", &["b"])));
    assert!(expected(&c, &path("seen", &["b", "b"])));
    assert!(!expected(&c, &path("seen", &["b", "a"])));
}

#[test]
fn expressions_as_repeat_counts() {
    let c = checker(
        r#"validator V { thread T(*, 1) { task("root") {
             $n = repeat between 1 and 3 notice("in");
             $z = $n * $n;
             repeat $z notice("out");
             $k = 2;
             repeat $k*2 - 1 notice("three");
           } } }"#,
    );
    let path = |ins: usize, outs: usize, threes: usize| {
        let mut texts = vec!["in"; ins];
        texts.extend(vec!["out"; outs]);
        texts.extend(vec!["three"; threes]);
        notices(&texts)
    };
    assert!(expected(&c, &path(2, 4, 3)));
    assert!(expected(&c, &path(3, 9, 3)));
    assert!(!expected(&c, &path(2, 2, 3)), "$n * $n");
    assert!(!expected(&c, &path(1, 1, 2)), "$k*2 - 1");
    // `between` ends from a parameter, computed when compiling.
    let c = checker_with(
        r#"validator V { thread T(*, $N - 1) { task("root") { repeat between $N - 1 and $N+1 notice(*); } } }"#,
        Params::from([("N".to_string(), 2.0)]),
    );
    assert!(expected(&c, &notices(&["a", "b", "c"])));
    assert!(!expected(&c, &notices(&["a", "b", "c", "d"])));
}

#[test]
fn a_message_binds_its_peer_for_a_reply() {
    // spec.pip's `$h = send(Bar); recv($h);`: the reply comes from where the request went.
    let c = checker(
        r#"validator V {
             thread Client("client", 1) { task("root") { $h = send(*); recv($h); } }
             thread Servers(m/^server/, {1, 2}) { task(*); }
           }"#,
    );
    let path = |replier: &str| {
        let mut b = TraceBuilder::new(9);
        let root = b.task(None, "client", "root", 0, 100 * MS);
        b.message(root, Direction::Send, 1, MS, 64);
        let a = b.task(Some(root), "server-a", "serve", 2 * MS, 10 * MS);
        b.message(a, Direction::Recv, 1, 2 * MS, 64);
        let r = if replier == "server-a" {
            a
        } else {
            b.task(Some(root), replier, "serve", 2 * MS, 10 * MS)
        };
        b.message(r, Direction::Send, 2, 9 * MS, 64);
        b.message(root, Direction::Recv, 2, 11 * MS, 64);
        Path::of(&b.trace())
    };
    assert!(expected(&c, &path("server-a")));
    assert!(!expected(&c, &path("server-b")));
    // Only the binding refuses it: a reply from anyone is fine.
    let any = checker(
        r#"validator V {
             thread Client("client", 1) { task("root") { send(*); recv(*); } }
             thread Servers(m/^server/, {1, 2}) { task(*); }
           }"#,
    );
    assert!(expected(&any, &path("server-b")));
}

#[test]
fn aggregates_as_counts_are_refused_by_place() {
    let e = compile_error(
        "recognizer R { thread T(*, 1) { task(\"x\"); } }\nvalidator V {\n  thread T(*, 1) {\n    repeat instances(R) task(*);\n  }\n}",
    );
    assert!(e.contains("4:12: instances(R) counts paths"), "{e}");
    let e = compile_error("validator V { thread T(*, 1) { $k = unique($h); } }");
    assert!(e.contains("1:37: unique($h)"), "{e}");
    let e = compile_error("validator V { thread T(*, instances(V)) { } }");
    assert!(e.contains("1:27: instances(V)"), "{e}");
    let e = compile_error("validator V { thread T(*, 1) { $x = $x + 1; } }");
    assert!(e.contains("$x is not bound here"), "{e}");
    // In an assertion, Pip's `unique($v)` parses; no set of paths can answer it.
    round_trip("assert(unique($h) == 1);");
    let e = compile_error("\nassert(unique($h) == 1);");
    assert!(
        e.contains("assert at line 2: unique($h): a variable"),
        "{e}"
    );
}

#[test]
fn limits_bounded_by_arithmetic_over_numbers_and_parameters() {
    let src = r#"
validator V {
  limit(THREADS, {$N, $N*2});
  thread Root("h", 1) { task("root") limit(REAL_TIME, {1 ms + 1 ms, sqrt(16.) * 1ms}); }
  thread Rest(!"h", {0, 9}) { task(*) limit(REAL_TIME, {2.**3. * 1ms +}); }
}"#;
    let f = round_trip(src);
    let Item::Recognizer(r) = &f.items[0] else {
        panic!()
    };
    assert!(
        matches!(r.limits[0].high, Some(Quantity::Expr(..))),
        "{:?}",
        r.limits[0]
    );
    let c = checker_with(src, Params::from([("N".to_string(), 2.0)]));
    let path = |root_ms: u64, rest: usize| {
        let mut b = TraceBuilder::new(10);
        let root = b.task(None, "h", "root", 0, root_ms * MS);
        for i in 0..rest {
            b.task(Some(root), &format!("other-{i}"), "work", 0, 9 * MS);
        }
        Path::of(&b.trace())
    };
    assert!(expected(&c, &path(3, 2)));
    assert!(!expected(&c, &path(1, 2)), "under 1 ms + 1 ms");
    assert!(!expected(&c, &path(5, 2)), "over sqrt(16.) * 1ms");
    assert!(!expected(&c, &path(3, 0)), "fewer threads than $N");
    assert!(!expected(&c, &path(3, 4)), "more than $N*2");
}

#[test]
fn aggregates_as_limit_bounds_parse_and_are_refused_by_place() {
    // Pip's parser takes them; its checker cannot (get_range_value aborts), nor can ours:
    // a limit is checked on one path, an aggregate needs all of them.
    let src = "recognizer R { thread T(*, 1) { task(\"read\"); } }
validator V {
  thread T(*, 1) {
    task(\"read\") limit(REAL_TIME, average(REAL_TIME, R));
    task(\"a\") limit(REAL_TIME, {min(REAL_TIME, R), max(REAL_TIME, m/^r/)});
    task(\"b\") limit(REAL_TIME, {=average(REAL_TIME, R)}) limit(CPU_TIME, {stddev(CPU_TIME, *)+});
  }
}";
    let f = round_trip(src);
    let Stmt::Task { limits, .. } = &match &f.items[1] {
        Item::Recognizer(r) => &r.threads[0].body,
        _ => panic!(),
    }[1] else {
        panic!()
    };
    assert_eq!(limits[0].form, LimitForm::Between);
    let e = compile_error(src);
    assert!(
        e.contains("4:35: average(REAL_TIME, R) is an aggregate"),
        "{e}"
    );
}

/// A file of our own in every form Pip's grammar has, as spec.pip is for Pip's.
const EVERY_FORM: &str = r#"
validator Lookup {
  level(2);
  limit(REAL_TIME, {0 s, 2 S});
  thread Client("client0", 1) {
    limit(CPU_TIME, 1 h);
    task("lookup") {
      $h = send(Server);
      recv($h) limit(LATENCY, {0 MS, 1 h}) limit(SIZE, {1 b, 2 GB});
      $t = task(*);
      $t = "render";
      task($t);
    }
  }
  thread Server(!"client0", {1, 3}) {
    task("serve") {
      $from = recv(Client);
      $n = repeat between 1 and $MAX { task(m/^shard-\d+$/); }
      $z = $n*$n;
      $z = 2;
      repeat $z*2 { notice(!m/^debug/); }
      maybe notice(*);
      xor {
        branch: send($from);
        branch: future F { send(!"client1"); } done(F);
      }
    }
  }
}

fragment recognizer Retry { limit(REAL_TIME, {10s+}); task("retry") { any(); } call(Backoff); }
fragment recognizer Backoff { { notice("backoff"); } }
invalidator Slow { thread Any(*, {1, 99}) { task(*) limit(REAL_TIME, {1m+}); } }
recognizer Both : Lookup && Retry || Slow -> !Lookup;

assert( instances(Lookup) in { 1, 5 } );
assert( instances(Lookup) in {1+} && instances(Slow) in {=0} );
assert( 5. < 2.**3. );
assert( exp(2.) < ln(10000.) );
assert( log(1000000.) == 6. );
during(any 5) assert( instances(Lookup) > 0 -> instances(Slow) == 0 );
during(0, 10) assert( !instances(Slow) > 0 );
assert( average(REAL_TIME, Lookup) < 5 s );
assert( stddev(REAL_TIME, m/^shard-/) < 5ms && max(REAL_TIME, *) < 1 m );
"#;

#[test]
fn a_file_in_every_form_of_pips_grammar_parses_prints_and_checks() {
    let f = round_trip(EVERY_FORM);
    assert_eq!(f.items.len(), 14);
    // Checked from its printed form: the same file.
    let c = checker_with(&f.to_string(), Params::from([("MAX".to_string(), 4.0)]));
    let mut b = TraceBuilder::new(11);
    let root = b.task(None, "client0", "lookup", 0, 50 * MS);
    b.message(root, Direction::Send, 1, MS, 64);
    let serve = b.task(Some(root), "server-1", "serve", 2 * MS, 40 * MS);
    b.message(serve, Direction::Recv, 1, 2 * MS, 64);
    b.task(Some(serve), "server-1", "shard-1", 3 * MS, 4 * MS);
    b.task(Some(serve), "server-1", "shard-2", 5 * MS, 6 * MS);
    for (i, text) in ["a", "b", "c", "d", "extra"].iter().enumerate() {
        b.notice(serve, text, (10 + i as u64) * MS);
    }
    b.message(serve, Direction::Send, 2, 30 * MS, 64);
    b.message(root, Direction::Recv, 2, 41 * MS, 64);
    b.task(Some(root), "client0", "prepare", 42 * MS, 43 * MS);
    b.task(Some(root), "client0", "render", 44 * MS, 45 * MS);
    let path = Path::of(&b.trace());
    let (report, facts) = c.check(&path);
    assert!(report.expected, "{report:?}");
    // Both is ((Lookup && Retry) || Slow) -> !Lookup: false -> ..., so it holds.
    assert_eq!(report.matched, ["Lookup", "Both"]);
    let failed = c.assertions(&[facts]);
    assert!(failed.is_empty(), "{failed:?}");
}
