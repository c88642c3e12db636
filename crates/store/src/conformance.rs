//! The checks every [`TraceStore`] passes, whichever backend holds the spans: one suite
//! that the embedded store and the ClickHouse store both run (feature `conformance`).
//!
//! A backend's test file names how to open, settle and reopen its store and invokes
//! [`conformance_tests!`](crate::conformance_tests), which makes one `#[test]` per check.

use std::collections::{HashMap, HashSet};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use causeway_model::logs::{log_event, LOG_RECORDS};
use causeway_model::{
    Direction, Event, KeyValue, Link, Message, Source, Span, SpanId, Status, TraceId, Value,
};

use crate::{search_sorted, Fields, SearchQuery, TimeWindow, TraceStore};
pub use causeway_testkit::span;
use causeway_testkit::Generator;

/// The start of the spans the checks store (November 2023).
pub const T0: u64 = 1_700_000_000_000_000_000;

/// A store under test.
pub trait Backend {
    /// The store.
    type Store: TraceStore;
    /// An empty store of its own for the check `name`.
    fn open(&self, name: &str) -> Self::Store;
    /// Moves what the store has taken to where it rests (the embedded store writes its
    /// head as a block); a store that reads only from where spans rest does nothing.
    fn settle(&self, store: &Self::Store);
    /// Closes the store and opens it again on the same data.
    fn reopen(&self, store: Self::Store, name: &str) -> Self::Store;
    /// Closes the store and removes its data.
    fn remove(&self, store: Self::Store, name: &str);
}

/// Makes one `#[test]` per check of [`conformance`](crate::conformance) on the backend
/// that `$backend` (an expression, evaluated in each test) gives.
#[macro_export]
macro_rules! conformance_tests {
    ($backend:expr) => {
        $crate::conformance_tests!(@tests $backend;
            a_trace_comes_back_whole_before_and_after_it_settles,
            spans_of_one_trace_arriving_in_many_batches_come_back_as_one_trace,
            search_finds_by_service_operation_tags_duration_host_and_window,
            a_tag_matches_in_a_span_its_events_or_its_links_and_conditions_may_meet_apart,
            a_trace_whose_root_has_not_arrived_is_marked_in_search,
            a_bulk_scan_visits_every_trace_in_the_window_once_and_whole,
            a_structure_scan_gives_the_structure_and_the_attributes_asked_for,
            a_paths_scan_gives_whole_spans_but_their_attributes,
            a_sorted_search_orders_the_whole_window_and_counts_every_match,
            a_request_split_in_two_linked_traces_is_read_searched_and_scanned_as_one,
        );
    };
    (@tests $backend:expr; $($check:ident,)*) => {
        $(
            #[test]
            fn $check() {
                $crate::conformance::$check(&$backend);
            }
        )*
    };
}

/// `n` generated traces, 1 ms apart from [`T0`].
pub fn traces(n: usize, seed: u64) -> Vec<Vec<Span>> {
    let mut g = Generator::new(seed, T0, 1_000_000);
    (0..n).map(|_| g.trace()).collect()
}

/// The span ids of `spans`, sorted.
pub fn sorted_ids(spans: &[Span]) -> Vec<u64> {
    let mut v: Vec<u64> = spans.iter().map(|s| s.span_id.get()).collect();
    v.sort();
    v
}

fn by_span_id(spans: &[Span]) -> Vec<Span> {
    let mut v = spans.to_vec();
    v.sort_by_key(|s| s.span_id);
    v
}

fn scan_all(store: &dyn TraceStore, fields: &Fields) -> HashMap<TraceId, Vec<Span>> {
    let seen = Mutex::new(HashMap::new());
    let stats = store
        .scan_fields(TimeWindow::ALL, fields, &|t| {
            seen.lock().unwrap().insert(t.trace_id, t.spans);
            ControlFlow::Continue(())
        })
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(stats.traces as usize, seen.len(), "each trace visited once");
    seen
}

/// Trace by id: every field of every span, before and after the store settles, and
/// `None` for a trace it never saw.
pub fn a_trace_comes_back_whole_before_and_after_it_settles(backend: &impl Backend) {
    let name = "by-id";
    let store = backend.open(name);
    let all = traces(50, 1);
    store.append(all.concat()).unwrap();
    let probe = &all[17];
    for stage in ["taken", "settled"] {
        if stage == "settled" {
            backend.settle(&store);
        }
        let got = store.trace(probe[0].trace_id).unwrap();
        let got = got.unwrap_or_else(|| panic!("{stage}: the trace is missing"));
        assert_eq!(by_span_id(&got.spans), by_span_id(probe), "{stage}");
        assert_eq!(got.roots.len(), 1, "{stage}");
    }
    assert!(store.trace(TraceId::new(42).unwrap()).unwrap().is_none());
    backend.remove(store, name);
}

/// A trace's spans sent in several batches, some after the others settled, are one
/// trace; a batch sent again adds no second copy.
pub fn spans_of_one_trace_arriving_in_many_batches_come_back_as_one_trace(backend: &impl Backend) {
    let name = "batches";
    let store = backend.open(name);
    let t = 0xabcdef;
    let child = span(t, 2, Some(1), "child", "backend", T0 + 10, T0 + 50);
    store
        .append(vec![span(t, 1, None, "root", "frontend", T0, T0 + 100)])
        .unwrap();
    backend.settle(&store);
    store.append(vec![child.clone()]).unwrap();
    backend.settle(&store);
    // Minutes later, from a third process, and not settled yet.
    store
        .append(vec![span(
            t,
            3,
            Some(2),
            "db",
            "postgres",
            T0 + 20,
            T0 + 40,
        )])
        .unwrap();
    let id = TraceId::new(t).unwrap();
    let trace = store.trace(id).unwrap().unwrap();
    assert_eq!(trace.spans.len(), 3);
    assert_eq!(trace.roots.len(), 1);
    assert!(trace.orphans.is_empty());
    // A resent batch (the client did not see the acknowledgement) is not a second copy.
    store.append(vec![child]).unwrap();
    assert_eq!(store.trace(id).unwrap().unwrap().spans.len(), 3);
    backend.settle(&store);
    assert_eq!(store.trace(id).unwrap().unwrap().spans.len(), 3);
    let seen = scan_all(&store, &Fields::All);
    assert_eq!(seen[&id].len(), 3, "the scan also sees one copy");
    backend.remove(store, name);
}

/// Search by each of its conditions, newest first, over settled and unsettled spans;
/// the summary of a trace; services and operations.
pub fn search_finds_by_service_operation_tags_duration_host_and_window(backend: &impl Backend) {
    let name = "search";
    let store = backend.open(name);
    let mut a = span(1, 1, None, "GET /cart", "frontend", T0, T0 + 5_000_000);
    a.attributes.push(KeyValue::new("user.id", "alice"));
    a.host = "web-1".into();
    let mut b = span(
        2,
        1,
        None,
        "GET /cart",
        "frontend",
        T0 + 1_000,
        T0 + 50_000_000,
    );
    b.attributes.push(KeyValue::new("user.id", "bob"));
    b.attributes.push(KeyValue::new("http.status_code", 500i64));
    b.status = Status::Error("boom".into());
    b.host = "web-2".into();
    b.source = Source::Imported;
    let mut c = span(
        3,
        1,
        None,
        "POST /pay",
        "payments",
        T0 + 2_000,
        T0 + 7_000_000,
    );
    c.source = Source::Inferred { confidence: 0.5 };
    // Log records of `a`'s span: not a span of any source.
    let mut carrier = span(1, 1, None, LOG_RECORDS, "frontend", T0 + 500, T0 + 500);
    carrier.source = Source::Logs;
    carrier
        .events
        .push(log_event(T0 + 500, "cart read".into(), None, vec![]));
    store.append(vec![a, carrier]).unwrap();
    backend.settle(&store);
    store.append(vec![b, c]).unwrap();

    let ids = |q: &SearchQuery| -> Vec<u128> {
        let found = store.search(q).unwrap();
        found.iter().map(|s| s.trace_id.get()).collect()
    };
    let q = SearchQuery::default;
    let service = |name: &str| Some(name.to_string());
    let tag = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    let window = TimeWindow {
        start: T0 + 1_500,
        end: T0 + 3_000,
    };
    let cases: Vec<(&str, SearchQuery, Vec<u128>)> = vec![
        (
            "most recent first, settled and not",
            SearchQuery {
                service: service("frontend"),
                ..q()
            },
            vec![2, 1],
        ),
        (
            "operation",
            SearchQuery {
                service: service("frontend"),
                operation: Some("GET /cart".into()),
                ..q()
            },
            vec![2, 1],
        ),
        (
            "string tag",
            SearchQuery {
                tags: tag("user.id", "alice"),
                ..q()
            },
            vec![1],
        ),
        (
            "typed values match on their text",
            SearchQuery {
                tags: tag("http.status_code", "500"),
                ..q()
            },
            vec![2],
        ),
        ("error status", SearchQuery { error: true, ..q() }, vec![2]),
        (
            "error=true matches error status",
            SearchQuery {
                tags: tag("error", "true"),
                ..q()
            },
            vec![2],
        ),
        (
            "min duration",
            SearchQuery {
                service: service("frontend"),
                min_duration: Some(10_000_000),
                ..q()
            },
            vec![2],
        ),
        (
            "max duration",
            SearchQuery {
                service: service("frontend"),
                max_duration: Some(10_000_000),
                ..q()
            },
            vec![1],
        ),
        (
            "host",
            SearchQuery {
                host: Some("web-1".into()),
                ..q()
            },
            vec![1],
        ),
        (
            "window",
            SearchQuery {
                window: Some(window),
                ..q()
            },
            vec![3],
        ),
        (
            "unknown service",
            SearchQuery {
                service: service("nope"),
                ..q()
            },
            vec![],
        ),
        ("limit", SearchQuery { limit: 1, ..q() }, vec![3]),
        (
            "source",
            SearchQuery {
                source: Some("inferred".into()),
                ..q()
            },
            vec![3],
        ),
        (
            "source imported",
            SearchQuery {
                source: Some("imported".into()),
                ..q()
            },
            vec![2],
        ),
        (
            "source instrumented",
            SearchQuery {
                source: Some("instrumented".into()),
                ..q()
            },
            vec![1],
        ),
        (
            "log records are no source's spans",
            SearchQuery {
                source: Some("logs".into()),
                ..q()
            },
            vec![],
        ),
    ];
    for (what, query, want) in &cases {
        assert_eq!(&ids(query), want, "{what}");
    }

    let errors = store.search(&SearchQuery { error: true, ..q() }).unwrap();
    let summary = &errors[0];
    assert_eq!(summary.root_service, "frontend");
    assert_eq!(summary.root_operation, "GET /cart");
    assert_eq!(summary.duration, 50_000_000 - 1_000);
    assert_eq!(summary.error_count, 1);
    assert_eq!(store.services().unwrap(), vec!["frontend", "payments"]);
    assert_eq!(store.operations("frontend").unwrap(), vec!["GET /cart"]);
    assert!(store.operations("nope").unwrap().is_empty());
    backend.remove(store, name);
}

/// A tag is met in a span's attributes, its events' or its links'; several tags match
/// only when one span meets them all. Typed values match by their text.
pub fn a_tag_matches_in_a_span_its_events_or_its_links_and_conditions_may_meet_apart(
    backend: &impl Backend,
) {
    let name = "search-nested";
    let mut store = backend.open(name);
    // Trace 1: the resource attribute on the span (OTLP puts it there), the error code on
    // an event, the tenant on a link. Trace 2: the same values, but on two spans.
    let mut a = span(1, 1, None, "GET /cart", "frontend", T0, T0 + 5_000_000);
    a.attributes.push(KeyValue::new("k8s.pod.name", "web-7"));
    a.events.push(Event {
        time: T0 + 1_000,
        name: "exception".into(),
        attributes: vec![
            KeyValue::new("exception.type", "Timeout"),
            KeyValue::new("retry", 3i64),
            KeyValue::new("backoff.ratio", 0.5),
        ],
    });
    a.links.push(Link {
        trace_id: TraceId::new(9).unwrap(),
        span_id: SpanId::new(9).unwrap(),
        attributes: vec![KeyValue::new("tenant", "acme")],
    });
    let mut b1 = span(2, 1, None, "GET /cart", "frontend", T0, T0 + 5_000_000);
    b1.attributes.push(KeyValue::new("k8s.pod.name", "web-7"));
    let mut b2 = span(2, 2, Some(1), "query", "frontend", T0 + 10, T0 + 1_000);
    b2.events.push(Event {
        time: T0 + 500,
        name: "exception".into(),
        attributes: vec![KeyValue::new("exception.type", "Timeout")],
    });
    let tags = |pairs: &[(&str, &str)]| SearchQuery {
        tags: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..SearchQuery::default()
    };
    let check = |store: &dyn TraceStore, stage: &str| {
        for (q, want) in [
            (tags(&[("exception.type", "Timeout")]), vec![1, 2]),
            (tags(&[("tenant", "acme")]), vec![1]),
            (tags(&[("k8s.pod.name", "web-7")]), vec![1, 2]),
            // Met in three places of one span: trace 1 only.
            (
                tags(&[
                    ("k8s.pod.name", "web-7"),
                    ("exception.type", "Timeout"),
                    ("tenant", "acme"),
                ]),
                vec![1],
            ),
            // Met only on different spans: not a match.
            (
                tags(&[("k8s.pod.name", "web-7"), ("exception.type", "Timeout")]),
                vec![1],
            ),
            (tags(&[("exception.type", "Crash")]), vec![]),
            (tags(&[("retry", "3"), ("backoff.ratio", "0.5")]), vec![1]),
            (tags(&[("retry", "03")]), vec![]),
        ] {
            let mut ids: Vec<u128> = store
                .search(&q)
                .unwrap()
                .iter()
                .map(|s| s.trace_id.get())
                .collect();
            ids.sort_unstable();
            assert_eq!(ids, want, "{stage}: {:?}", q.tags);
        }
    };
    store.append(vec![a, b1, b2]).unwrap();
    check(&store, "taken");
    backend.settle(&store);
    check(&store, "settled");
    store = backend.reopen(store, name);
    check(&store, "reopened");
    backend.remove(store, name);
}

/// A trace whose root has not arrived is listed, marked, under its earliest span; once
/// the root arrives the listing names it.
pub fn a_trace_whose_root_has_not_arrived_is_marked_in_search(backend: &impl Backend) {
    let name = "root-missing";
    let store = backend.open(name);
    // The server's span came first; the root that called it is still on its way.
    store
        .append(vec![span(
            5,
            2,
            Some(1),
            "GET /items",
            "api",
            T0 + 10,
            T0 + 90,
        )])
        .unwrap();
    let find = |store: &dyn TraceStore| {
        store
            .search(&SearchQuery::default())
            .unwrap()
            .into_iter()
            .find(|t| t.trace_id.get() == 5)
            .expect("the trace is listed")
    };
    let arriving = find(&store);
    assert!(arriving.root_missing);
    assert_eq!(arriving.root_operation, "GET /items");
    store
        .append(vec![span(5, 1, None, "GET /home", "web", T0, T0 + 100)])
        .unwrap();
    let whole = find(&store);
    assert!(!whole.root_missing);
    assert_eq!(
        (whole.root_service.as_str(), whole.root_operation.as_str()),
        ("web", "GET /home")
    );
    backend.remove(store, name);
}

/// The bulk scan behind patterns, dependencies and Pip checks: every trace that starts in
/// the window, once and whole though its spans were stored apart; a visit that answers
/// `Break` stops it soon.
pub fn a_bulk_scan_visits_every_trace_in_the_window_once_and_whole(backend: &impl Backend) {
    let name = "scan";
    let store = backend.open(name);
    let all = traces(3000, 2);
    // Each trace in two parts: the first halves settled in three steps, the second halves
    // of the first 2000 traces in a fourth, of the rest not settled.
    let first_half = |t: &Vec<Span>| t[..t.len() / 2].to_vec();
    let second_half = |t: &Vec<Span>| t[t.len() / 2..].to_vec();
    for chunk in all.chunks(1000) {
        store
            .append(chunk.iter().flat_map(first_half).collect())
            .unwrap();
        backend.settle(&store);
    }
    for (i, chunk) in all.chunks(500).enumerate() {
        store
            .append(chunk.iter().flat_map(second_half).collect())
            .unwrap();
        if i == 3 {
            backend.settle(&store);
        }
    }
    let seen = Mutex::new(Vec::new());
    let stats = store
        .scan(TimeWindow::ALL, &|t| {
            seen.lock()
                .unwrap()
                .push((t.trace_id, sorted_ids(&t.spans)))
        })
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(stats.traces, 3000);
    assert_eq!(seen.len(), 3000);
    let distinct: HashSet<_> = seen.iter().map(|(id, _)| *id).collect();
    assert_eq!(distinct.len(), 3000);
    let total: usize = all.iter().map(Vec::len).sum();
    assert_eq!(stats.spans as usize, total);
    let spans: HashMap<_, _> = seen.into_iter().collect();
    for t in &all {
        let id = t[0].trace_id;
        assert_eq!(spans[&id], sorted_ids(t), "trace {id} whole");
    }

    // Windows of traces (they start 1 ms apart): settled ones, and ones whose later half
    // is not settled yet (in memory, where their start is not; in a 0.1 ms window, memory
    // holds no span that starts in it). Each is whole.
    for (first, width, n) in [
        (0, 100_000_000, 100),
        (1950, 100_000_000, 100),
        (2900, 100_000_000, 100),
        (2950, 100_000, 1),
    ] {
        let window = TimeWindow {
            start: T0 + first * 1_000_000,
            end: T0 + first * 1_000_000 + width,
        };
        let expected: HashMap<TraceId, Vec<u64>> = all
            .iter()
            .filter(|t| window.contains(t.iter().map(|s| s.start).min().unwrap()))
            .map(|t| (t[0].trace_id, sorted_ids(t)))
            .collect();
        assert_eq!(expected.len(), n as usize, "window from {first}");
        let seen = Mutex::new(HashMap::new());
        store
            .scan(window, &|t| {
                seen.lock()
                    .unwrap()
                    .insert(t.trace_id, sorted_ids(&t.spans));
            })
            .unwrap();
        assert_eq!(seen.into_inner().unwrap(), expected, "window from {first}");
    }

    // A visit that answers Break (a deadline passed) stops every scan thread soon after.
    let visited = AtomicUsize::new(0);
    let stats = store
        .scan_fields(TimeWindow::ALL, &Fields::All, &|_| {
            if visited.fetch_add(1, Ordering::Relaxed) >= 9 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    let visited = visited.into_inner();
    assert!(visited >= 10, "{visited}");
    // Each scan thread may finish the trace it holds; none reads on.
    assert!(
        visited <= 10 + 8,
        "a stopped scan visited {visited} of 3000 traces"
    );
    assert_eq!(stats.traces as usize, visited);
    backend.remove(store, name);
}

/// A structure scan gives every span's structure (ids, names, kind, service, host, pid,
/// times, status, source) and the attributes asked for, settled or not. (A store may give more;
/// what it leaves out is its own economy.)
pub fn a_structure_scan_gives_the_structure_and_the_attributes_asked_for(backend: &impl Backend) {
    let name = "structure";
    let store = backend.open(name);
    let mut all = traces(200, 9);
    // Statuses of every kind, and a peer attribute to keep.
    all[0][1].status = Status::Error("boom".into());
    all[0][2].status = Status::Ok;
    all[0][3]
        .attributes
        .push(KeyValue::new("peer.service", "mysql"));
    // Sources of every kind: a search or an analysis filters by them.
    all[1][1].source = Source::Inferred { confidence: 0.5 };
    all[1][2].source = Source::Logs;
    all[2][0].source = Source::Imported;
    all[170][1].source = Source::Inferred { confidence: 0.25 };
    store.append(all[..150].concat()).unwrap();
    backend.settle(&store);
    store.append(all[150..].concat()).unwrap();
    let asked = |kv: &&KeyValue| kv.key == "peer.service" || kv.key == "region";
    let fields = Fields::Structure {
        attributes: vec!["peer.service".into(), "region".into()],
    };
    let seen = scan_all(&store, &fields);
    assert_eq!(seen.len(), 200);
    for t in &all {
        let got = &seen[&t[0].trace_id];
        assert_eq!(got.len(), t.len());
        for want in t {
            let s = got.iter().find(|s| s.span_id == want.span_id).unwrap();
            assert_eq!(
                (s.parent_id, &s.name, s.kind, &s.service, &s.host, s.pid),
                (
                    want.parent_id,
                    &want.name,
                    want.kind,
                    &want.service,
                    &want.host,
                    want.pid
                )
            );
            assert_eq!(
                (s.start, s.end, &s.status, s.source),
                (want.start, want.end, &want.status, want.source)
            );
            let kept: Vec<&KeyValue> = s.attributes.iter().filter(asked).collect();
            let wanted: Vec<&KeyValue> = want.attributes.iter().filter(asked).collect();
            assert_eq!(kept, wanted);
        }
    }
    backend.remove(store, name);
}

/// A paths scan (Pip's checks) gives whole spans (events, messages, links, CPU time) but
/// may leave out their attributes.
pub fn a_paths_scan_gives_whole_spans_but_their_attributes(backend: &impl Backend) {
    let name = "paths";
    let store = backend.open(name);
    let mut all = traces(120, 11);
    // Typed attributes, messages, links and CPU time, which the generator does not make.
    let s = &mut all[0][1];
    s.attributes.push(KeyValue::new("retries", Value::I64(3)));
    s.attributes.push(KeyValue {
        key: "shards".into(),
        value: Value::Array(vec![Value::F64(0.5), Value::Bool(true)]),
    });
    s.messages.push(Message {
        direction: Direction::Send,
        id: 42,
        time: s.start + 5,
        peer: Some("db".into()),
        size: Some(512),
    });
    s.links.push(Link {
        trace_id: TraceId::new(9).unwrap(),
        span_id: SpanId::new(8).unwrap(),
        attributes: vec![KeyValue::new("link.kind", "follows")],
    });
    s.cpu_time = Some(1234);
    store.append(all[..100].concat()).unwrap();
    backend.settle(&store);
    store.append(all[100..].concat()).unwrap();
    let strip = |s: &Span| {
        let mut s = s.clone();
        s.attributes.clear();
        s.events.iter_mut().for_each(|e| e.attributes.clear());
        s.links.iter_mut().for_each(|l| l.attributes.clear());
        s
    };
    let seen = scan_all(&store, &Fields::Paths);
    assert_eq!(seen.len(), 120);
    let mut events = 0;
    for t in &all {
        let got = &seen[&t[0].trace_id];
        assert_eq!(got.len(), t.len());
        for want in t {
            let s = got.iter().find(|s| s.span_id == want.span_id).unwrap();
            assert_eq!(strip(s), strip(want));
            events += s.events.len();
        }
    }
    assert!(events > 0, "the generated traces have events to keep");
    let messages: usize = seen.values().flatten().map(|s| s.messages.len()).sum();
    assert_eq!(messages, 1);
    backend.remove(store, name);
}

/// The Traces tab's sort: every trace of the window is counted and the first in the order
/// come from all of them, settled or not (the indexed search would stop at its limit,
/// newest first).
pub fn a_sorted_search_orders_the_whole_window_and_counts_every_match(backend: &impl Backend) {
    let name = "sorted";
    let store = backend.open(name);
    let all = traces(300, 11);
    // One trace of three spans logs a timeout in an event, found by its tag.
    let mut flagged = all[150].clone();
    let at = flagged[0].start;
    flagged[0].events.push(Event {
        time: at,
        name: "exception".into(),
        attributes: vec![KeyValue::new("exception.type", "Timeout")],
    });
    let mut all_flagged = all.clone();
    all_flagged[150] = flagged;
    store.append(all_flagged[..200].concat()).unwrap();
    backend.settle(&store);
    store.append(all_flagged[200..].concat()).unwrap();
    // What each trace is, worked out here from the spans as generated.
    struct Row {
        id: u128,
        start: u64,
        duration: u64,
        spans: usize,
        errors: usize,
        services: HashSet<String>,
    }
    let rows: Vec<Row> = all
        .iter()
        .map(|t| {
            let start = t.iter().map(|s| s.start).min().unwrap();
            let end = t.iter().map(|s| s.end).max().unwrap();
            Row {
                id: t[0].trace_id.get(),
                start,
                duration: end - start,
                spans: t.len(),
                errors: t.iter().filter(|s| s.is_error()).count(),
                services: t.iter().map(|s| s.service.to_string()).collect(),
            }
        })
        .collect();
    let service = all[0][0].service.to_string();
    let window = TimeWindow {
        start: rows[40].start,
        end: rows[260].start,
    };
    let by_window = |r: &Row| window.contains(r.start);
    let by_service = |r: &Row| r.services.contains(&service);
    type Key = fn(&Row) -> u64;
    let cases: [(&str, Key, bool); 4] = [
        ("-duration", |r| r.duration, true),
        ("spans", |r| r.spans as u64, false),
        ("-errors", |r| r.errors as u64, true),
        ("start", |r| r.start, false),
    ];
    let keep_going = &|| ControlFlow::Continue(());
    for (order, key, descending) in cases {
        for (filter, query) in [
            (
                "window",
                SearchQuery {
                    window: Some(window),
                    limit: 25,
                    ..SearchQuery::default()
                },
            ),
            (
                "service in window",
                SearchQuery {
                    service: Some(service.clone()),
                    window: Some(window),
                    limit: 25,
                    ..SearchQuery::default()
                },
            ),
        ] {
            let wanted: Vec<&Row> = rows
                .iter()
                .filter(|r| by_window(r) && (filter == "window" || by_service(r)))
                .collect();
            let mut expected: Vec<(u64, u128)> = wanted.iter().map(|r| (key(r), r.id)).collect();
            expected.sort_by(|a, b| {
                let c = a.0.cmp(&b.0);
                (if descending { c.reverse() } else { c }).then(a.1.cmp(&b.1))
            });
            expected.truncate(25);
            let got = search_sorted(&store, &query, order.parse().unwrap(), keep_going).unwrap();
            assert_eq!(got.total, wanted.len() as u64, "{order}, {filter}");
            let ids: Vec<u128> = got.traces.iter().map(|t| t.trace_id.get()).collect();
            let want: Vec<u128> = expected.iter().map(|e| e.1).collect();
            assert_eq!(ids, want, "{order}, {filter}");
        }
    }
    // A tag met only in one span's event: the one trace, counted as such.
    let tagged = SearchQuery {
        tags: vec![("exception.type".into(), "Timeout".into())],
        ..SearchQuery::default()
    };
    let got = search_sorted(&store, &tagged, "-duration".parse().unwrap(), keep_going).unwrap();
    assert_eq!(got.total, 1);
    assert_eq!(got.traces[0].trace_id.get(), rows[150].id);
    // A caller that stops the scan (its deadline passed) stops it soon.
    let got = search_sorted(
        &store,
        &SearchQuery::default(),
        "-duration".parse().unwrap(),
        &|| ControlFlow::Break(()),
    )
    .unwrap();
    assert!(got.total < 300, "{}", got.total);
    backend.remove(store, name);
}

/// A request an uninstrumented process split in two traces, linked
/// (`causeway_model::parent_links::trace_link`): read by either id, searched by either
/// part (indexed or sorted) and scanned for analyses, it is one trace under the upper id.
pub fn a_request_split_in_two_linked_traces_is_read_searched_and_scanned_as_one(
    backend: &impl Backend,
) {
    use causeway_model::parent_links::trace_link;
    let name = "linked";
    let store = backend.open(name);
    let (upper, lower) = (TraceId::new(7).unwrap(), TraceId::new(8).unwrap());
    let spans = vec![
        span(7, 1, None, "GET /", "web", T0, T0 + 30_000),
        span(7, 2, Some(1), "call mid", "web", T0 + 1_000, T0 + 25_000),
        span(7, 10, Some(2), "mid", "mid", T0 + 2_000, T0 + 24_000),
        span(8, 11, None, "read", "store", T0 + 5_000, T0 + 19_000),
        // Another request, not linked.
        span(9, 1, None, "GET /other", "web", T0 + 40_000, T0 + 50_000),
    ];
    let links = trace_link(
        &spans[2],
        (upper, SpanId::new(10).unwrap()),
        (lower, SpanId::new(11).unwrap()),
    );
    store.append([spans, links.to_vec()].concat()).unwrap();
    for settled in [false, true] {
        if settled {
            backend.settle(&store);
        }
        for id in [upper, lower] {
            let t = crate::linked::joined_trace(&store, id)
                .unwrap()
                .expect("stored");
            assert_eq!((t.trace_id, t.spans.len(), t.roots.len()), (upper, 4, 1));
        }
        for service in ["store", "web", "mid"] {
            let q = SearchQuery {
                service: Some(service.into()),
                ..SearchQuery::default()
            };
            let found = store.search(&q).unwrap();
            let ids: Vec<u128> = found.iter().map(|t| t.trace_id.get()).collect();
            let want: &[u128] = if service == "web" { &[9, 7] } else { &[7] };
            assert_eq!(ids, want, "{service}, settled {settled}");
            let linked = found.iter().find(|t| t.trace_id == upper).unwrap();
            assert_eq!(linked.span_count, 4);
            let q = SearchQuery {
                window: Some(TimeWindow::ALL),
                ..q
            };
            let sorted = search_sorted(&store, &q, "-duration".parse().unwrap(), &|| {
                ControlFlow::Continue(())
            })
            .unwrap();
            let ids: Vec<u128> = sorted.traces.iter().map(|t| t.trace_id.get()).collect();
            // Longest first: the linked request's 30 us before the other's 10.
            let want: &[u128] = if service == "web" { &[7, 9] } else { &[7] };
            assert_eq!(ids, want, "{service}, settled {settled}");
            assert_eq!(sorted.traces[0].span_count, 4, "{service}");
        }
        let seen = Mutex::new(Vec::new());
        crate::linked::scan_requests(
            &store,
            TimeWindow::ALL,
            &Fields::Structure { attributes: vec![] },
            &|t| {
                seen.lock().unwrap().push((t.trace_id.get(), t.spans.len()));
                ControlFlow::Continue(())
            },
        )
        .unwrap();
        let mut seen = seen.into_inner().unwrap();
        seen.sort();
        assert_eq!(seen, [(7, 4), (9, 1)], "settled {settled}");
    }
    backend.remove(store, name);
}
