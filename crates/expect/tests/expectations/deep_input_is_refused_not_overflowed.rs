//! Input nested past any honest file is refused with its position, never by overflowing
//! the stack: a server checks files sent by anyone.

use causeway_expect::check::Checker;
use causeway_expect::lang::{parse, MAX_NESTING};

/// `assert(- - - ... 1 > 0);`, the request that once aborted the server.
#[test]
fn an_assertion_negated_200_000_times_is_refused_at_the_limit() {
    let src = format!("assert({}1 > 0);", "-".repeat(200_000));
    let err = parse(&src).unwrap_err();
    assert_eq!(err.line, 1);
    // The operator one past the limit: `assert(` is 7 characters.
    assert_eq!(err.col as usize, 7 + MAX_NESTING + 1, "{err}");
    assert!(err.found.contains("nested more than"), "{err}");
}

#[test]
fn deeply_nested_blocks_parentheses_and_sets_are_refused() {
    let blocks = format!(
        "validator V {{ thread t(*, 1) {}task(\"x\");{} }}",
        "{".repeat(100_000),
        "}".repeat(100_000)
    );
    let parens = format!(
        "assert({}1{} > 0);",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    let powers = format!("assert(2{} > 0);", " ** 2".repeat(100_000));
    let sums = format!("assert(1{} > 0);", " + 1".repeat(100_000));
    let sets = format!("validator S : {}A;", "!".repeat(100_000));
    let ands = format!("validator S : A{};", " && A".repeat(100_000));
    let implies = format!("validator S : A{};", " -> A".repeat(100_000));
    let ins = format!(
        "assert(1{});",
        " in {1".repeat(50_000) + &"}".repeat(50_000)
    );
    let maybes = format!(
        "validator V {{ thread t(*, 1) {{ {}task(\"x\"); }} }}",
        "maybe ".repeat(100_000)
    );
    let negations = format!(
        "validator V {{ thread t(*, 1) {{ notice({}\"x\"); }} }}",
        "!".repeat(100_000)
    );
    let count_sums = format!(
        "validator V {{ thread t(*, 1) {{ repeat 1{} task(\"x\"); }} }}",
        " + 1".repeat(100_000)
    );
    let count_parens = format!(
        "validator V {{ thread t(*, 1) {{ $z = {}1{}; }} }}",
        "(".repeat(100_000),
        ")".repeat(100_000)
    );
    for (what, src) in [
        ("negated texts", negations),
        ("sums in a repeat count", count_sums),
        ("parenthesized counts", count_parens),
        ("blocks", blocks),
        ("parentheses", parens),
        ("powers", powers),
        ("sums", sums),
        ("negated sets", sets),
        ("conjunctions", ands),
        ("implications", implies),
        ("in-sets", ins),
        ("maybes", maybes),
    ] {
        let err = parse(&src).unwrap_err();
        assert!(err.found.contains("nested more than"), "{what}: {err}");
        assert!(err.line >= 1 && err.col > 1, "{what}: {err}");
    }
}

#[test]
fn nesting_within_the_limit_still_parses() {
    let src = format!("assert({}1{} > 0);", "(".repeat(30), ")".repeat(30));
    parse(&src).unwrap();
    let sums = format!("assert(1{} > 0);", " + 1".repeat(90));
    parse(&sums).unwrap();
    let ins = format!("assert(1{});", " in {1, 1".repeat(30) + &"}".repeat(30));
    parse(&ins).unwrap();
    let negations = format!(
        "validator V {{ thread t(*, 1) {{ notice({}\"x\"); }} }}",
        "!".repeat(90)
    );
    parse(&negations).unwrap();
    let counts = format!(
        "validator V {{ thread t(*, 1) {{ repeat 1{} task(\"x\"); $z = {}1{}; }} }}",
        " * 1".repeat(90),
        "(".repeat(30),
        ")".repeat(30)
    );
    // Parsed, printed and compiled: every walk of the tree stays within the bound.
    let file = parse(&counts).unwrap();
    assert_eq!(parse(&file.to_string()).unwrap(), file);
    Checker::new(&file, Default::default()).unwrap();
}

fn compile(src: &str) -> String {
    let file = parse(src).unwrap();
    match Checker::new(&file, Default::default()) {
        Ok(_) => String::from("compiled"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_chain_of_100_000_fragments_is_refused_when_it_calls_too_deep() {
    let mut src = String::from("validator V { thread t(*, 1) { call(F0); } }\n");
    for i in 0..100_000 {
        src.push_str(&format!(
            "fragment validator F{i} {{ call(F{}); }}\n",
            i + 1
        ));
    }
    src.push_str("fragment validator F100000 { task(\"x\"); }\n");
    let err = compile(&src);
    assert!(err.contains("more than 100 deep"), "{err}");
}

#[test]
fn a_chain_of_100_000_sets_is_refused_and_a_cycle_is_named() {
    let mut src = String::from("validator A { thread t(*, 1) { task(\"x\"); } }\n");
    src.push_str("validator S0 : A;\n");
    for i in 1..100_000 {
        src.push_str(&format!("validator S{i} : S{};\n", i - 1));
    }
    let err = compile(&src);
    assert!(err.contains("nest more than 100 deep"), "{err}");

    let cycle = "validator A : B;\nvalidator B : !A;\n";
    let err = compile(cycle);
    assert!(err.contains("names itself"), "{err}");

    let fine = "validator A { thread t(*, 1) { task(\"x\"); } }\nvalidator B : A;\nvalidator C : B && !A;\n";
    assert_eq!(compile(fine), "compiled");
}
