//! The generator: what it writes parses, reads as Pip, and matches every path it came from.

use causeway_expect::check::Checker;
use causeway_expect::generate::{generate, Notices, Options};
use causeway_expect::lang::parse;
use causeway_expect::path::Path;
use causeway_expect::program::Params;
use causeway_model::{Event, Span, SpanId, SpanKind, Trace, TraceId};
use proptest::prelude::*;

/// A call tree: each node a span name, its children, and whether it is a call to
/// another host (a client span with a server span there). A local node logs its notices
/// after `notices_after` of its children (all of them when it has fewer): between the
/// children, a repeat of equal children may have notices between its rounds.
#[derive(Debug, Clone)]
struct Node {
    name: u8,
    remote: Option<u8>,
    notices: u8,
    notices_after: u8,
    children: Vec<Node>,
}

fn node() -> impl Strategy<Value = Node> {
    let leaf =
        (0u8..3, prop::option::of(0u8..3), 0u8..3).prop_map(|(name, remote, notices)| Node {
            name,
            remote,
            notices,
            notices_after: 0,
            children: vec![],
        });
    leaf.prop_recursive(3, 20, 4, |inner| {
        (
            0u8..3,
            prop::option::of(0u8..3),
            0u8..2,
            0u8..4,
            prop::collection::vec(inner, 0..4),
        )
            .prop_map(|(name, remote, notices, notices_after, children)| Node {
                name,
                remote,
                notices,
                notices_after,
                children,
            })
    })
}

/// Lays the tree out sequentially in time on hosts h0..h2 (the root on "front").
fn trace(id: u128, root: &Node) -> Trace {
    let mut spans = Vec::new();
    let mut next = 0u64;
    let mut t = 1_000u64;
    fn place(
        n: &Node,
        parent: Option<SpanId>,
        host: &str,
        id: u128,
        spans: &mut Vec<Span>,
        next: &mut u64,
        t: &mut u64,
    ) {
        let mk = |sid: u64,
                  p: Option<SpanId>,
                  name: String,
                  host: &str,
                  start: u64,
                  end: u64,
                  kind: SpanKind| {
            let mut s = Span::new(
                TraceId::new(id).unwrap(),
                SpanId::new(sid).unwrap(),
                p,
                name,
                host,
                start,
                end,
            );
            s.host = host.into();
            s.pid = 1;
            s.execution_unit = 1;
            s.kind = kind;
            s
        };
        *next += 1;
        let me = *next;
        let start = *t;
        *t += 10;
        let mut events = Vec::new();
        let log = |events: &mut Vec<Event>, t: &mut u64| {
            for k in 0..n.notices {
                events.push(Event {
                    time: *t,
                    name: format!("note {k}"),
                    attributes: vec![],
                });
                *t += 10;
            }
        };
        let notices_after = match n.remote {
            Some(_) => 0,
            None => (n.notices_after as usize).min(n.children.len()),
        };
        if notices_after == 0 {
            log(&mut events, t);
        }
        let (child_parent, child_host) = match n.remote {
            Some(r) => {
                // The server side of the call, on its own host.
                *next += 1;
                let srv = *next;
                let server_host = format!("h{r}");
                *t += 10;
                let sstart = *t;
                for c in &n.children {
                    place(
                        c,
                        Some(SpanId::new(srv).unwrap()),
                        &server_host,
                        id,
                        spans,
                        next,
                        t,
                    );
                }
                *t += 10;
                spans.push(mk(
                    srv,
                    Some(SpanId::new(me).unwrap()),
                    format!("op{}", n.name),
                    &server_host,
                    sstart,
                    *t,
                    SpanKind::Server,
                ));
                *t += 10;
                (None, None)
            }
            None => (Some(SpanId::new(me).unwrap()), Some(host.to_string())),
        };
        if let (Some(p), Some(h)) = (child_parent, child_host) {
            for (i, c) in n.children.iter().enumerate() {
                place(c, Some(p), &h, id, spans, next, t);
                if i + 1 == notices_after {
                    log(&mut events, t);
                }
            }
        }
        *t += 10;
        let kind = if n.remote.is_some() {
            SpanKind::Client
        } else {
            SpanKind::Internal
        };
        let mut s = mk(me, parent, format!("op{}", n.name), host, start, *t, kind);
        s.events = events;
        spans.push(s);
    }
    place(root, None, "front", id, &mut spans, &mut next, &mut t);
    Trace::assemble(TraceId::new(id).unwrap(), spans)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(120))]
    #[test]
    fn a_generated_recognizer_matches_the_paths_it_came_from(
        roots in prop::collection::vec(node(), 1..5),
        timings in any::<bool>(),
        any_host in any::<bool>(),
        any_notices in any::<bool>(),
    ) {
        let paths: Vec<Path> = roots.iter().enumerate().map(|(i, r)| Path::of(&trace(i as u128 + 1, r))).collect();
        let notices = if any_notices { Notices::Any } else { Notices::Exact };
        let file = generate(&paths, Options { timings, any_host, notices });
        let text = file.to_string();
        let parsed = parse(&text).map_err(|e| TestCaseError::fail(e.render("generated", &text)))?;
        let checker = Checker::new(&parsed, Params::new()).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        for p in &paths {
            let (r, _) = checker.check(p);
            prop_assert!(r.expected, "path {} is not matched by\n{}\n{:?}", p.trace_id, text, r.closest);
        }
    }
}

#[test]
fn peers_that_behave_alike_are_one_pattern_and_runs_are_repeats() {
    // A front end that calls h1 three times in a row, each call parsing twice.
    let leaf = |name| Node {
        name,
        remote: None,
        notices: 0,
        notices_after: 0,
        children: vec![],
    };
    let call = |host| Node {
        name: 1,
        remote: Some(host),
        notices: 0,
        notices_after: 0,
        children: vec![leaf(2), leaf(2)],
    };
    let root = Node {
        name: 0,
        remote: None,
        notices: 1,
        notices_after: 0,
        children: vec![call(1), call(1), call(1)],
    };
    let paths = [Path::of(&trace(1, &root))];
    let text = generate(&paths, Options::default()).to_string();
    assert!(text.contains("repeat 3 task(\"op1\")"), "{text}");
    assert!(text.contains("send(H1);"), "{text}");
    // Three handlings on h1, one after another, each its own thread of one role.
    assert!(text.contains("thread H1(\"h1\", 3)"), "{text}");
    assert!(text.contains("repeat 2 task(\"op2\");"), "{text}");

    // The same call to three hosts: one role over the three.
    let root = Node {
        name: 0,
        remote: None,
        notices: 0,
        notices_after: 0,
        children: vec![call(0), call(1), call(2)],
    };
    let text = generate(&[Path::of(&trace(2, &root))], Options::default()).to_string();
    assert!(text.contains(r#"thread H(m/^(h0|h1|h2)$/, 3)"#), "{text}");
}

/// Requests of one kind log different notices (a retry here, a cache miss there): with
/// abstract notices, a recognizer generated from one request matches the others; with
/// exact ones it matches only its own.
#[test]
fn abstract_notices_match_requests_of_one_kind_whatever_they_log() {
    let tree = |notices: [u8; 3]| Node {
        name: 0,
        remote: None,
        notices: notices[0],
        notices_after: 0,
        children: vec![
            Node {
                name: 1,
                remote: Some(1),
                notices: notices[1],
                notices_after: 0,
                children: vec![],
            },
            Node {
                name: 2,
                remote: None,
                notices: notices[2],
                notices_after: 0,
                children: vec![],
            },
        ],
    };
    let logged = [[0, 0, 0], [1, 0, 2], [0, 2, 0], [2, 1, 1]];
    let paths: Vec<Path> = logged
        .iter()
        .enumerate()
        .map(|(i, n)| Path::of(&trace(i as u128 + 1, &tree(*n))))
        .collect();
    let expected = |notices: Notices| -> Vec<bool> {
        let options = Options {
            notices,
            ..Options::default()
        };
        let text = generate(&paths[..1], options).to_string();
        let checker = Checker::new(&parse(&text).unwrap(), Params::new()).unwrap();
        paths.iter().map(|p| checker.check(p).0.expected).collect()
    };
    assert_eq!(expected(Notices::Any), vec![true; 4]);
    assert_eq!(expected(Notices::Exact), vec![true, false, false, false]);
    let text = generate(
        &paths[..1],
        Options {
            notices: Notices::Any,
            ..Options::default()
        },
    )
    .to_string();
    assert!(text.contains("repeat between 0 and 9 notice(*);"), "{text}");
    assert!(!text.contains("note"), "{text}");
}

/// A request that logs between calls a repeat folds (a cache miss between the third and the
/// fourth of four equal queries): with abstract notices, the recognizer generated from it
/// admits notices between the repeat's rounds, so it matches the request it came from.
#[test]
fn notices_between_the_rounds_of_a_repeat_do_not_stop_its_own_recognizer() {
    let query = Node {
        name: 1,
        remote: Some(1),
        notices: 0,
        notices_after: 0,
        children: vec![],
    };
    let root = Node {
        name: 0,
        remote: None,
        notices: 1,
        notices_after: 3,
        children: vec![query.clone(), query.clone(), query.clone(), query],
    };
    let path = Path::of(&trace(1, &root));
    let options = Options {
        notices: Notices::Any,
        ..Options::default()
    };
    let text = generate(std::slice::from_ref(&path), options).to_string();
    assert!(text.contains("repeat 4 {"), "{text}");
    let checker = Checker::new(&parse(&text).unwrap(), Params::new()).unwrap();
    let (report, _) = checker.check(&path);
    assert!(report.expected, "{text}\n{:?}", report.closest);
}
