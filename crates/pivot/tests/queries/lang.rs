//! The query language: the paper's queries as printed, errors with line:column, and
//! properties over generated text and trees.

use causeway_pivot::lang::ast::*;
use causeway_pivot::lang::{parse, parse_query, print_script};
use proptest::prelude::*;

const PAPER: &str = include_str!("../../../../demo/tracepoints/paper-queries.pivot");

fn queries(src: &str) -> Vec<QueryDef> {
    parse(src)
        .unwrap()
        .items
        .into_iter()
        .filter_map(|i| match i {
            Item::Query(q) => Some(q),
            Item::Tracepoint(_) => None,
        })
        .collect()
}

#[test]
fn the_papers_seven_queries_parse_as_printed() {
    let qs = queries(PAPER);
    let names: Vec<&str> = qs
        .iter()
        .map(|q| q.name.as_ref().unwrap().text.as_str())
        .collect();
    assert_eq!(names, ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7"]);

    let q2 = &qs[1].query;
    assert_eq!(q2.joins.len(), 1);
    assert_eq!(q2.joins[0].temporal, Temporal::First(1));
    assert_eq!(q2.joins[0].source.text, "ClientProtocols");
    assert!(matches!(
        &q2.select[1],
        SelectItem::Agg { func: AggFn::Sum, arg: Some(Expr::Ref(n)), .. } if n.text == "incr.delta"
    ));

    let q3 = &qs[2].query;
    assert_eq!(q3.source.text, "DN.DataTransferProtocol");
    assert!(matches!(
        q3.select[1],
        SelectItem::Agg {
            func: AggFn::Count,
            arg: None,
            ..
        }
    ));

    // Q7: its first Join spans two lines, its second joins to the first joined variable.
    let q7 = &qs[6].query;
    assert_eq!(q7.var.text, "DNop");
    assert_eq!(
        q7.joins
            .iter()
            .map(|j| (j.var.text.as_str(), j.after.text.as_str()))
            .collect::<Vec<_>>(),
        [("getloc", "DNop"), ("st", "getloc")]
    );
    assert_eq!(q7.joins[0].before.pos.line, 35);
    match &q7.clauses[..] {
        [Clause::Where(Expr::Bin(BinOp::Ne, l, r, _))] => {
            assert!(matches!(&**l, Expr::Ref(n) if n.text == "st.host"));
            assert!(matches!(&**r, Expr::Ref(n) if n.text == "DNop.host"));
        }
        other => panic!("Q7's Where: {other:?}"),
    }
    assert_eq!(q7.group_by.len(), 2);
    assert_eq!(q7.select.len(), 3);
}

#[test]
fn printing_and_parsing_again_gives_the_same_text() {
    let once = print_script(&parse(PAPER).unwrap());
    let twice = print_script(&parse(&once).unwrap());
    assert_eq!(once, twice);
    assert!(once.contains("Join cl In First(ClientProtocols) On cl -> incr"));
}

#[test]
fn keywords_are_case_insensitive_and_clauses_run_across_lines() {
    let a = parse_query(
        "from x in A join y in mostrecentn(3, B) on y -> x where x.v > 1 and not y.s startswith 'a' \
         let z = x.v * 2 groupby y.s select y.s, sum(z), average(x.v), count(*)",
    )
    .unwrap();
    let b = parse_query(
        "FROM x\nIN A\nJOIN y IN MostRecentN(3, B)\nON y\n->\nx\nWHERE x.v > 1 AND NOT y.s \
         StartsWith \"a\"\nLET z = x.v * 2\nGROUPBY y.s\nSELECT y.s, SUM(z), AVERAGE(x.v), COUNT",
    )
    .unwrap();
    let p = |q: &QueryDef| causeway_pivot::lang::print_query(q);
    assert_eq!(p(&a), p(&b));
    assert_eq!(a.query.joins[0].temporal, Temporal::MostRecent(3));
}

#[test]
fn operators_bind_as_usual() {
    let q =
        parse_query("From x In A Where x.a Or x.b And Not x.c == 1 + 2 * 3 Select x.a").unwrap();
    let Clause::Where(e) = &q.query.clauses[0] else {
        panic!()
    };
    assert_eq!(
        causeway_pivot::lang::print_expr(e),
        "x.a Or (x.b And (Not (x.c == (1 + (2 * 3)))))"
    );
    let q = parse_query("From x In A Where x.h In ('A', \"B\") And -x.n < 3 - 1 - 1 Select x.h")
        .unwrap();
    let Clause::Where(e) = &q.query.clauses[0] else {
        panic!()
    };
    assert_eq!(
        causeway_pivot::lang::print_expr(e),
        "(x.h In (\"A\", \"B\")) And ((-x.n) < ((3 - 1) - 1))"
    );
}

#[test]
fn tracepoint_definitions_with_unions_globs_and_exports() {
    let script = parse(
        "Tracepoint ClientProtocols =\n  span(target ~ \"replicas::client*\", name = \"rpc\")\n  \
         | event(level = \"INFO\", field = \"op\", line = 42)\n\
         Export op, bytes = \"payload.bytes\", replicas = explode(replicas), hosts = explode(hosts, ',');\n\
         Tracepoint Closes = span.close()",
    )
    .unwrap();
    let [Item::Tracepoint(a), Item::Tracepoint(b)] = &script.items[..] else {
        panic!("{script:?}")
    };
    assert_eq!(a.name.text, "ClientProtocols");
    assert_eq!(a.probes.len(), 2);
    assert_eq!(a.probes[0].kind, ProbeKind::Span);
    assert!(a.probes[0].matchers[0].glob);
    assert_eq!(a.probes[1].matchers[2].key, MatchKey::Line);
    assert_eq!(a.probes[1].matchers[2].value, "42");
    let exports: Vec<(&str, &str, Option<Option<&str>>)> = a
        .exports
        .iter()
        .map(|e| {
            (
                e.name.text.as_str(),
                e.field.as_str(),
                e.explode.as_ref().map(|s| s.as_deref()),
            )
        })
        .collect();
    assert_eq!(
        exports,
        [
            ("op", "op", None),
            ("bytes", "payload.bytes", None),
            ("replicas", "replicas", Some(None)),
            ("hosts", "hosts", Some(Some(","))),
        ]
    );
    assert_eq!(b.probes[0].kind, ProbeKind::SpanClose);
    let again = parse(&print_script(&script)).unwrap();
    assert_eq!(print_script(&again), print_script(&script));
}

#[test]
fn errors_point_at_the_line_and_column_with_a_caret() {
    let src = "Q1 : From incr In DataNodeMetrics.incrBytesRead\nGroupBy incr.host\nSelect incr.host SUM(incr.delta)";
    let e = parse(src).unwrap_err();
    assert_eq!((e.line, e.col), (3, 18), "{e}");
    assert_eq!(
        e.render("q.pivot", src),
        "q.pivot:3:18: found `SUM`, expected `From`, a query name (`Q1 = From ...`) or `Tracepoint`\n  \
         Select incr.host SUM(incr.delta)\n                   ^"
    );

    let cases = [
        ("From x In A Join y In B On y x Select x.a", (1, 30), "`->`"),
        (
            "From x In A Join y In FirstN(0, B) On y -> x Select x.a",
            (1, 30),
            "a count",
        ),
        ("From x In A Where Select x.a", (1, 19), "a value"),
        ("From x In A\nGroupBy x.a\n", (3, 1), "`,` or `Select`"),
        ("From select In A Select x", (1, 6), "a variable name"),
        ("From x In A Select SUM x.a", (1, 24), "`(`"),
        ("Tracepoint T = event(colour = 'red')", (1, 22), "`target`"),
        ("Tracepoint T = event(line = 'x')", (1, 29), "a line number"),
        ("Tracepoint T = event(line ~ 12)", (1, 29), "a glob string"),
        ("From x In A Select (x.a", (1, 24), "`)`"),
    ];
    for (src, at, expected) in cases {
        let e = parse(src).unwrap_err();
        assert_eq!((e.line, e.col), at, "{src}: {e}");
        assert!(e.expected.contains(expected), "{src}: {e}");
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    // `- ` with its space: `--` starts a comment.
    for (open, close) in [("(", ")"), ("Not ", ""), ("- ", ""), ("! ", "")] {
        let src = format!(
            "From x In A Where {}x.a{} Select x.a",
            open.repeat(100_000),
            close.repeat(100_000)
        );
        let e = parse(&src).unwrap_err();
        assert!(e.expected.contains("nested at most"), "{open}: {e}");
    }
    // A long chain parses in a loop but builds a tree as deep as the chain.
    let src = format!("From x In A Where x.a{} Select x.a", " + 1".repeat(100_000));
    assert!(parse(&src).unwrap_err().expected.contains("nested at most"));
    let src = format!("From x In A Where x.a{} Select x.a", " + 1".repeat(60));
    parse(&src).unwrap();
}

#[test]
fn a_query_text_holds_one_query() {
    assert!(parse_query("").is_err());
    let e = parse_query("From x In A Select x.a\nFrom y In B Select y.b").unwrap_err();
    assert_eq!((e.line, e.col), (2, 1));
}

const VOCABULARY: &[&str] = &[
    "From",
    "x",
    "y",
    "In",
    "A",
    "B.c",
    "Join",
    "On",
    "->",
    "Where",
    "Let",
    "=",
    "GroupBy",
    "Select",
    "x.a",
    "y.b",
    "COUNT",
    "SUM",
    "(",
    ")",
    ",",
    ";",
    ":",
    "First",
    "FirstN",
    "MostRecent",
    "1",
    "2.5",
    "'s'",
    "And",
    "Or",
    "Not",
    "==",
    "!=",
    "<",
    "+",
    "*",
    "-",
    "StartsWith",
    "Tracepoint",
    "event",
    "span.close",
    "target",
    "~",
    "|",
    "Export",
    "explode",
    "\n",
    "Q1",
];

fn paper_like_query() -> impl Strategy<Value = String> {
    let var = prop::sample::select(vec!["x", "y", "st", "getloc"]);
    let field = prop::sample::select(vec!["host", "delta", "src", "replicas"]);
    let r = (var.clone(), field).prop_map(|(v, f)| format!("{v}.{f}"));
    let lit = prop_oneof![
        any::<i32>().prop_map(|v| v.to_string()),
        "[a-z ]{0,6}".prop_map(|s| format!("'{s}'")),
        (0.0f64..1e6).prop_map(|f| format!("{f:?}")),
    ];
    let atom = prop_oneof![r.clone(), lit];
    let expr = atom.prop_recursive(4, 24, 2, |inner| {
        let op = prop::sample::select(vec![
            "==",
            "!=",
            "<",
            ">=",
            "+",
            "-",
            "*",
            "/",
            "%",
            "And",
            "Or",
            "StartsWith",
        ]);
        prop_oneof![
            (inner.clone(), op, inner.clone()).prop_map(|(a, o, b)| format!("({a} {o} {b})")),
            inner.clone().prop_map(|a| format!("(Not ({a}))")),
            (inner.clone(), prop::collection::vec(inner, 1..3))
                .prop_map(|(a, l)| format!("({a} In ({}))", l.join(", "))),
        ]
    });
    let temporal = prop::sample::select(vec![
        "",
        "First",
        "MostRecent",
        "FirstN(2, ",
        "MostRecentN(5, ",
    ]);
    (
        prop::collection::vec(expr.clone(), 0..3),
        prop::collection::vec(r, 0..3),
        temporal,
        any::<bool>(),
    )
        .prop_map(|(wheres, keys, t, let_)| {
            let source = match t {
                "" => "B".to_string(),
                t if t.ends_with(", ") => format!("{t}B)"),
                t => format!("{t}(B)"),
            };
            let mut q = format!("From x In A\nJoin y In {source} On y -> x");
            for w in &wheres {
                q.push_str(&format!("\nWhere {w}"));
            }
            if let_ {
                q.push_str("\nLet z = x.delta * 2");
            }
            if !keys.is_empty() {
                q.push_str(&format!("\nGroupBy {}", keys.join(", ")));
                q.push_str(&format!(
                    "\nSelect {}, COUNT, MAX(x.delta)",
                    keys.join(", ")
                ));
            } else {
                q.push_str("\nSelect x.host");
            }
            q
        })
}

proptest! {
    #[test]
    fn any_text_gives_a_tree_or_an_error_never_a_panic(src in "\\PC{0,200}") {
        let _ = parse(&src);
    }

    #[test]
    fn any_token_soup_gives_a_tree_or_an_error_never_a_panic(
        words in prop::collection::vec(prop::sample::select(VOCABULARY), 0..80)
    ) {
        if let Ok(script) = parse(&words.join(" ")) {
            // Whatever parses prints as text that parses to the same tree.
            let printed = print_script(&script);
            let again = parse(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
            prop_assert_eq!(print_script(&again), printed);
        }
    }

    #[test]
    fn generated_queries_parse_and_print_stably(q in paper_like_query()) {
        let script = parse(&q).map_err(|e| TestCaseError::fail(format!("{e}\n{q}")))?;
        let printed = print_script(&script);
        let again = parse(&printed).map_err(|e| TestCaseError::fail(format!("{e}\n{printed}")))?;
        prop_assert_eq!(print_script(&again), printed);
    }
}
