//! The expectation language: Pip's files parse, errors say where and what was expected,
//! and printing a tree gives text that parses back to the same tree.

use causeway_expect::lang::ast::*;
use causeway_expect::lang::parse;
use proptest::prelude::*;

/// The FAB read of the Pip paper's Figure 3, as Pip's authors wrote it.
const FAB_READ: &str = r#"
validator ReadOperation {
  limit(REAL_TIME, 40ms);
  thread Client(*, 1) {
    send(Coordinator);
    recv(Coordinator);
  }
  thread Coordinator(*, 1) {
    recv(Client);
    task("fab::read") limit(CPU_TIME, {100us, 2ms}) {
      repeat 3 send(Peer);
      repeat 2 {
        recv(Peer) limit(SIZE, {=4096b});
        task("got read reply");
      }
      future F1 {
        recv(Peer);
        task("got read reply");
      }
      send(Client);
    }
    done(F1);
  }
  thread Peer(m/^storage-\d+$/, 3) {
    recv(Coordinator);
    task("read") limit(REAL_TIME, {1ms, 10ms}) level(2);
    send(Coordinator);
  }
}

/* aggregates over all paths */
assert(average(REAL_TIME, ReadOperation) < 30ms);
during(any 10s) assert(instances(ReadOperation) >= 1);
"#;

#[test]
fn the_fab_read_of_figure_3_parses() {
    let file = parse(FAB_READ).unwrap();
    assert_eq!(file.items.len(), 3);
    let Item::Recognizer(r) = &file.items[0] else {
        panic!("{:?}", file.items[0])
    };
    assert_eq!(
        (r.role, r.name.as_str()),
        (Role::Validator, "ReadOperation")
    );
    assert_eq!(r.limits.len(), 1);
    let names: Vec<&str> = r.threads.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["Client", "Coordinator", "Peer"]);
    assert_eq!(
        r.threads[2].host,
        Text::Regex(r"^storage-\d+$".into(), At::default())
    );
    assert_eq!(
        r.threads[2].count,
        Range {
            low: Count::Num(3),
            high: Count::Num(3)
        }
    );
    let Stmt::Task {
        name,
        limits,
        body: Some(body),
    } = &r.threads[1].body[1]
    else {
        panic!("{:?}", r.threads[1].body[1])
    };
    assert_eq!(name, &Text::Exact("fab::read".into()));
    assert_eq!(limits[0].form, LimitForm::Between);
    assert!(matches!(&body[2], Stmt::Future { name: Some(n), .. } if n == "F1"));
    assert!(matches!(
        &file.items[2],
        Item::Assert {
            during: Some(During::Any(_)),
            ..
        }
    ));
}

#[test]
fn every_statement_kind_and_set_recognizers_parse() {
    let src = r#"
fragment invalidator Retry {
  task("GET /read");
  any();
  task("GET /read");
}
recognizer Home {
  thread Front("web-1", {1, 2}) {
    limit(REAL_TIME, {5ms+});
    $n = repeat between 1 and $MAX notice(m/cache (hit|miss)/);
    maybe task(*);
    xor {
      branch: send(Back, "db-host");
      branch: recv(Back) limit(LATENCY, 2ms); notice("x");
    }
    call(Retry);
    future { task($t); }
    { task(name_without_quotes); }
    repeat $n send(Back);
  }
}
validator Good : Home && !Retry;
invalidator Odd : (Home || Retry) -> !Home;
assert(unique(Home) == instances(Home) ** 2 - sqrt(4) * log(8) / ln(exp(1)));
assert(max(REAL_TIME, "GET /read") in {1ms, $LIMIT});
assert(instances(Home) in {1+} && min(REAL_TIME, Home) in {=2ms});
"#;
    let file = parse(src).unwrap();
    assert_eq!(file.items.len(), 7);
    let again = parse(&file.to_string()).unwrap();
    assert_eq!(
        without_lines(again),
        without_lines(file.clone()),
        "printed:\n{file}"
    );
}

fn error(src: &str) -> (u32, u32, String) {
    let e = parse(src).unwrap_err();
    (e.line, e.col, e.to_string())
}

#[test]
fn errors_name_the_line_the_column_and_what_was_expected() {
    let (line, col, msg) = error("validator A {\n  thread T(*, 1) {\n    task(\"x\")\n  }\n}");
    assert_eq!((line, col), (4, 3), "{msg}");
    assert!(msg.contains("expected `;`"), "{msg}");

    let (line, col, msg) = error("validator A {\n  thread T(*, 1) {\n    tsk(\"x\");\n  }\n}");
    assert_eq!((line, col), (3, 5));
    assert!(
        msg.contains("found `tsk`") && msg.contains("a statement"),
        "{msg}"
    );

    let (line, col, msg) =
        error("validator A { thread T(*, 1) { task(\"x\") limit(REAL_TIME, 3parsecs); } }");
    assert_eq!(line, 1);
    assert_eq!(col, 59, "{msg}");
    assert!(msg.contains("unknown unit"), "{msg}");

    let (line, _, msg) = error("/* open\n\n comment");
    assert_eq!(line, 1);
    assert!(msg.contains("never closed"), "{msg}");

    let e = parse("validator A {\n  thread T(*, x) { }\n}").unwrap_err();
    let shown = e.render("demo.pip", "validator A {\n  thread T(*, x) { }\n}");
    assert_eq!(
        shown,
        "demo.pip:2:15: found `x`, expected a count (a whole number or `$PARAM`)\n    thread T(*, x) { }\n                ^"
    );
}

// Generated trees for the round trip: names, texts, counts and statements nested a few deep.

fn ident() -> impl Strategy<Value = String> {
    "[A-Z][A-Za-z0-9_]{0,6}".prop_filter("not a keyword", |s| !["A"].contains(&s.as_str()))
}

fn text() -> impl Strategy<Value = Text> {
    // What Pip's `!` may negate: anything but a bare name.
    let negatable = prop_oneof![
        "[a-z /:._\"\\\\-]{0,8}".prop_map(Text::Exact),
        // Slashes and backslashes anywhere: the printer must escape them as Pip's lexer reads.
        "[a-z./\\\\]{1,5}".prop_map(|r| Text::Regex(r, At::default())),
        Just(Text::Any),
        ident().prop_map(Text::Var),
    ];
    prop_oneof![
        4 => negatable.clone(),
        1 => ident().prop_map(Text::Name),
        1 => (negatable, 1..3usize)
            .prop_map(|(t, n)| (0..n).fold(t, |t, _| Text::Not(Box::new(t)))),
    ]
}

fn count() -> impl Strategy<Value = Count> {
    let leaf = prop_oneof![
        3 => (0u64..50).prop_map(Count::Num),
        3 => ident().prop_map(Count::Var),
        1 => ident().prop_map(|r| Count::Aggregate {
            function: "instances".into(),
            of: Text::Name(r),
            at: At::default()
        }),
        1 => prop_oneof![ident().prop_map(Text::Name), ident().prop_map(Text::Var)].prop_map(
            |of| Count::Aggregate {
                function: "unique".into(),
                of,
                at: At::default()
            }
        ),
    ];
    leaf.prop_recursive(2, 6, 2, |inner| {
        (
            prop::sample::select(vec!["+", "-", "*"]),
            inner.clone(),
            inner,
        )
            .prop_map(|(op, a, b)| Count::Bin(op, Box::new(a), Box::new(b)))
    })
}

fn quantity() -> impl Strategy<Value = Quantity> {
    prop_oneof![
        (
            0u32..100_000,
            prop::sample::select(vec!["", "ns", "us", "ms", "s", "b", "kb", "mb"])
        )
            .prop_map(|(v, u)| Quantity::Lit {
                value: v as f64 / 8.0,
                unit: u.to_string()
            }),
        ident().prop_map(Quantity::Var),
    ]
}

/// A limit's bound: a quantity, or an expression (arithmetic, aggregates) that is not one.
fn bound() -> impl Strategy<Value = Quantity> {
    prop_oneof![
        3 => quantity(),
        1 => expr()
            .prop_filter("a quantity parses as one", |e| !matches!(e, Expr::Num(_)))
            .prop_map(|e| Quantity::Expr(Box::new(e), At::default())),
    ]
}

fn limit() -> impl Strategy<Value = Limit> {
    (ident(), bound(), bound(), 0..5u8).prop_map(|(metric, a, b, form)| match form {
        0 => Limit {
            metric,
            low: None,
            high: Some(a),
            form: LimitForm::Upper,
        },
        1 => Limit {
            metric,
            low: Some(a),
            high: Some(b),
            form: LimitForm::Between,
        },
        2 => Limit {
            metric,
            low: Some(a),
            high: None,
            form: LimitForm::AtLeast,
        },
        3 => Limit {
            metric,
            low: Some(a.clone()),
            high: Some(a),
            form: LimitForm::Exactly,
        },
        _ => Limit {
            metric: "level".into(),
            low: None,
            high: Some(Quantity::Lit {
                value: (b.to_string().len() % 5) as f64,
                unit: String::new(),
            }),
            form: LimitForm::Level,
        },
    })
}

fn stmt() -> impl Strategy<Value = Stmt> {
    let leaf = prop_oneof![
        (text(), prop::collection::vec(limit(), 0..2)).prop_map(|(name, limits)| Stmt::Task {
            name,
            limits,
            body: None
        }),
        text().prop_map(Stmt::Notice),
        (
            any::<bool>(),
            prop::collection::vec(text(), 1..3),
            prop::collection::vec(limit(), 0..2)
        )
            .prop_map(|(send, peers, limits)| Stmt::Message {
                send,
                peers,
                limits
            }),
        Just(Stmt::Any),
        (
            ident(),
            prop_oneof![text().prop_map(Value::Text), count().prop_map(Value::Count)]
        )
            .prop_map(|(var, value)| Stmt::Assign { var, value }),
        ident().prop_map(Stmt::Call),
        ident().prop_map(Stmt::Done),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (text(), prop::collection::vec(inner.clone(), 0..3)).prop_map(|(name, b)| Stmt::Task {
                name,
                limits: vec![],
                body: Some(b)
            }),
            (count(), count(), inner.clone()).prop_map(|(low, high, b)| Stmt::Repeat {
                between: low != high,
                low,
                high,
                body: Box::new(b)
            }),
            inner.clone().prop_map(|b| Stmt::Maybe(Box::new(b))),
            prop::collection::vec(prop::collection::vec(inner.clone(), 0..3), 0..3)
                .prop_map(Stmt::Xor),
            (prop::option::of(ident()), inner.clone()).prop_map(|(name, b)| Stmt::Future {
                name,
                body: Box::new(b)
            }),
            prop::collection::vec(inner.clone(), 0..3).prop_map(Stmt::Block),
            (ident(), inner).prop_map(|(var, b)| Stmt::Bind {
                var,
                body: Box::new(b)
            }),
        ]
    })
}

fn set_expr() -> impl Strategy<Value = SetExpr> {
    ident()
        .prop_map(SetExpr::Name)
        .prop_recursive(3, 12, 2, |inner| {
            prop_oneof![
                inner.clone().prop_map(|e| SetExpr::Not(Box::new(e))),
                (inner.clone(), inner.clone())
                    .prop_map(|(a, b)| SetExpr::And(Box::new(a), Box::new(b))),
                (inner.clone(), inner.clone())
                    .prop_map(|(a, b)| SetExpr::Or(Box::new(a), Box::new(b))),
                (inner.clone(), inner)
                    .prop_map(|(a, b)| SetExpr::Implies(Box::new(a), Box::new(b))),
            ]
        })
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        quantity().prop_map(Expr::Num),
        ident().prop_map(Expr::Name),
        "[a-z ]{0,6}".prop_map(|s| Expr::Text(Text::Exact(s))),
        "[a-z:^]{1,6}".prop_map(|r| Expr::Text(Text::Regex(r, At::default()))),
        Just(Expr::Text(Text::Any)),
    ];
    leaf.prop_recursive(3, 16, 3, |inner| {
        prop_oneof![
            (ident(), prop::collection::vec(inner.clone(), 0..3))
                .prop_map(|(n, a)| Expr::Call(n, a)),
            inner.clone().prop_map(|e| Expr::Neg(Box::new(e))),
            inner.clone().prop_map(|e| Expr::Not(Box::new(e))),
            (
                prop::sample::select(vec![
                    "+", "-", "*", "/", "**", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "->"
                ]),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(op, a, b)| Expr::Bin(op, Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone(), inner, 0..3u8).prop_map(|(x, a, b, form)| {
                let within = match form {
                    0 => Within::Between(a, b),
                    1 => Within::AtLeast(a),
                    _ => Within::Exactly(a),
                };
                Expr::In(Box::new(x), Box::new(within))
            }),
        ]
    })
}

fn role() -> impl Strategy<Value = Role> {
    prop::sample::select(vec![Role::Validator, Role::Invalidator, Role::Recognizer])
}

fn item() -> impl Strategy<Value = Item> {
    let thread = (
        ident(),
        text(),
        count(),
        count(),
        prop::collection::vec(limit(), 0..2),
        prop::collection::vec(stmt(), 0..4),
    )
        .prop_map(|(name, host, low, high, limits, body)| ThreadPattern {
            name,
            host,
            count: Range { low, high },
            limits,
            body,
        });
    prop_oneof![
        (
            role(),
            ident(),
            prop::collection::vec(limit(), 0..2),
            prop::collection::vec(thread, 0..3)
        )
            .prop_map(
                |(role, name, limits, threads)| Item::Recognizer(Recognizer {
                    role,
                    name,
                    limits,
                    threads
                })
            ),
        (
            role(),
            ident(),
            prop::collection::vec(limit(), 0..2),
            prop::collection::vec(stmt(), 0..4)
        )
            .prop_map(|(role, name, limits, body)| Item::Fragment(Fragment {
                role,
                name,
                limits,
                body
            })),
        (role(), ident(), set_expr()).prop_map(|(role, name, expr)| Item::Set { role, name, expr }),
        (
            prop::option::of(prop_oneof![
                quantity().prop_map(During::Any),
                (quantity(), quantity()).prop_map(|(a, b)| During::Between(a, b)),
            ]),
            expr()
        )
            .prop_map(|(during, expr)| Item::Assert {
                during,
                expr,
                line: 0
            }),
    ]
}

/// Assertion lines depend on layout; the round trip compares everything else.
fn without_lines(mut f: File) -> File {
    for item in &mut f.items {
        if let Item::Assert { line, .. } = item {
            *line = 0;
        }
    }
    f
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn printing_then_parsing_gives_the_same_tree(items in prop::collection::vec(item(), 0..4)) {
        let file = File { items };
        let text = file.to_string();
        let back = parse(&text).map_err(|e| TestCaseError::fail(format!("{}\n{text}", e.render("printed", &text))))?;
        prop_assert_eq!(without_lines(back), file, "printed:\n{}", text);
    }

    #[test]
    fn any_input_parses_or_fails_with_a_position(src in "\\PC{0,200}") {
        if let Err(e) = parse(&src) {
            prop_assert!(e.line >= 1 && e.col >= 1);
        }
    }
}
