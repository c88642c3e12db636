//! Dependencies, execution patterns and comparisons over hand-built traces, the Zipkin
//! fixtures and generated traces.

use crate::common;

use causeway_analysis::compare::{compare, Change, Profile};
use causeway_analysis::deps::{Dependencies, EdgeKind};
use causeway_analysis::patterns::{PatternId, Patterns, SortBy, TraceShape};
use causeway_model::{SpanKind, Status, Trace, TraceId};
use common::{fixture, span, trace, ZIPKIN_FIXTURES};

const MS: u64 = 1_000_000;

/// A request to `frontend` that calls `replicas` storage replicas concurrently, then the
/// cache once; each storage call takes `slow` ms.
fn request(trace: u128, replicas: u64, slow: u64, reverse: bool) -> Trace {
    let mut spans = vec![span(
        1,
        None,
        "frontend",
        "GET /",
        SpanKind::Server,
        0,
        100 * MS,
    )];
    let mut order: Vec<u64> = (0..replicas).collect();
    if reverse {
        order.reverse();
    }
    for (k, r) in order.into_iter().enumerate() {
        let (c, s) = (10 + 2 * r, 11 + 2 * r);
        let start = (1 + k as u64) * MS;
        spans.push(span(
            c,
            Some(1),
            "frontend",
            "write",
            SpanKind::Client,
            start,
            start + slow * MS,
        ));
        spans.push(span(
            s,
            Some(c),
            "storage",
            "put",
            SpanKind::Server,
            start + MS / 2,
            start + slow * MS - MS / 2,
        ));
    }
    spans.push(span(
        2,
        Some(1),
        "frontend",
        "get",
        SpanKind::Client,
        60 * MS,
        70 * MS,
    ));
    spans.push(span(
        3,
        Some(2),
        "cache",
        "get",
        SpanKind::Server,
        61 * MS,
        69 * MS,
    ));
    let id = TraceId::new(trace).unwrap();
    for s in &mut spans {
        s.trace_id = id;
    }
    Trace::assemble(id, spans)
}

fn edge<'a>(
    g: &'a causeway_analysis::deps::Graph,
    from: &str,
    to: &str,
) -> Option<&'a causeway_analysis::deps::Edge> {
    g.edges.iter().find(|e| e.caller == from && e.callee == to)
}

#[test]
fn dependencies_count_calls_errors_and_latency_per_edge() {
    let mut deps = Dependencies::default();
    for i in 0..10 {
        let mut t = request(100 + i, 3, 20 + i as u64, false);
        if i == 0 {
            let k = t
                .spans
                .iter()
                .position(|s| s.service.as_ref() == "cache")
                .unwrap();
            t.spans[k].status = Status::Error("miss storm".into());
        }
        deps.add(&t);
    }
    let g = deps.graph();
    assert_eq!(g.traces, 10);
    let storage = edge(&g, "frontend", "storage").unwrap();
    assert_eq!(
        (storage.calls, storage.errors, storage.kind),
        (30, 0, EdgeKind::Rpc)
    );
    // Client durations are 20..29 ms, three calls each.
    assert_eq!(storage.latency.min, 20 * MS);
    assert_eq!(storage.latency.max, 29 * MS);
    let p50 = storage.latency.p50 as f64;
    assert!((p50 - 24.0e6).abs() / 24.0e6 < 0.07, "p50 {p50}");
    let cache = edge(&g, "frontend", "cache").unwrap();
    assert_eq!((cache.calls, cache.errors), (10, 1));
    assert_eq!(g.edges[0].callee, "storage", "most calls first");
    let node = g.nodes.iter().find(|n| n.service == "frontend").unwrap();
    assert_eq!((node.calls_in, node.calls_out), (0, 40));
}

#[test]
fn merged_graphs_equal_one_graph_of_everything() {
    let traces: Vec<Trace> = (0..20)
        .map(|i| request(500 + i, 1 + i as u64 % 3, 5 + i as u64, false))
        .collect();
    let mut all = Dependencies::default();
    let (mut a, mut b) = (Dependencies::default(), Dependencies::default());
    for (i, t) in traces.iter().enumerate() {
        all.add(t);
        if i % 2 == 0 {
            a.add(t)
        } else {
            b.add(t)
        }
    }
    a.merge(b);
    assert_eq!(a.graph(), all.graph());
}

#[test]
fn by_host_each_replica_is_a_node_of_its_own() {
    let traces: Vec<Trace> = (1..=3u128)
        .map(|n| {
            let mut b = causeway_testkit::TraceBuilder::new(n);
            let web = if n == 3 { "web-2" } else { "web-1" };
            let root = b.root("web", web, "GET /", 0, 10 * MS);
            b.rpc(
                root,
                ("web", web),
                ("api", "api-1"),
                "GET /items",
                MS,
                9 * MS,
                0,
            );
            b.trace()
        })
        .collect();
    let (mut by_service, mut by_host) = (Dependencies::default(), Dependencies::new(true, None));
    for t in &traces {
        by_service.add(t);
        by_host.add(t);
    }
    let g = by_service.graph();
    assert_eq!(edge(&g, "web", "api").map(|e| e.calls), Some(3));
    assert_eq!(g.nodes.len(), 2);
    assert!(g
        .nodes
        .iter()
        .all(|n| n.host.is_none() && n.id == n.service));
    let g = by_host.graph();
    assert_eq!(edge(&g, "web@web-1", "api@api-1").map(|e| e.calls), Some(2));
    assert_eq!(edge(&g, "web@web-2", "api@api-1").map(|e| e.calls), Some(1));
    let nodes: Vec<(&str, &str, Option<&str>)> = g
        .nodes
        .iter()
        .map(|n| (n.id.as_str(), n.service.as_str(), n.host.as_deref()))
        .collect();
    assert_eq!(
        nodes,
        [
            ("api@api-1", "api", Some("api-1")),
            ("web@web-1", "web", Some("web-1")),
            ("web@web-2", "web", Some("web-2"))
        ]
    );
}

#[test]
fn from_one_source_only_the_calls_its_spans_show_are_edges() {
    let mut b = causeway_testkit::TraceBuilder::new(1);
    let root = b.root("web", "web-1", "GET /", 0, 10 * MS);
    b.rpc(
        root,
        ("web", "web-1"),
        ("api", "api-1"),
        "GET /items",
        MS,
        9 * MS,
        0,
    );
    let db = b.rpc(
        root,
        ("web", "web-1"),
        ("db", "db-1"),
        "SELECT",
        MS,
        2 * MS,
        0,
    );
    b.get(db).source = causeway_model::Source::Inferred { confidence: 0.9 };
    let t = b.trace();
    let edges = |source: Option<&str>| {
        let mut d = Dependencies::new(false, source.map(String::from));
        d.add(&t);
        let mut e: Vec<(String, String)> = d
            .graph()
            .edges
            .into_iter()
            .map(|e| (e.caller, e.callee))
            .collect();
        e.sort();
        e
    };
    let pair = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(edges(None), [pair("web", "api"), pair("web", "db")]);
    assert_eq!(edges(Some("instrumented")), [pair("web", "api")]);
    assert_eq!(edges(Some("inferred")), [pair("web", "db")]);
    assert!(edges(Some("logs")).is_empty());
}

#[test]
fn uninstrumented_peers_and_messaging_edges_appear() {
    let mut deps = Dependencies::default();
    for t in fixture("yelp.json") {
        deps.add(&t);
    }
    let g = deps.graph();
    assert_eq!(edge(&g, "yelp-main", "mysql").map(|e| e.calls), Some(2));
    assert_eq!(edge(&g, "yelp-main", "memcache").map(|e| e.calls), Some(3));
    assert_eq!(edge(&g, "mobile_api", "memcache").map(|e| e.calls), Some(2));
    assert_eq!(edge(&g, "mobile_api", "spectre").map(|e| e.calls), Some(1));

    let mut deps = Dependencies::default();
    for t in fixture("messaging-kafka.json") {
        deps.add(&t);
    }
    let g = deps.graph();
    let e = edge(&g, "servicea", "serviceb").unwrap();
    assert_eq!((e.kind, e.calls), (EdgeKind::Messaging, 3));
    assert!(g.edges.iter().all(|e| e.kind == EdgeKind::Messaging));
}

#[test]
fn a_producer_that_sends_through_its_own_client_call_makes_one_messaging_edge() {
    use causeway_model::SpanKind::{Client, Consumer, Producer, Server};
    // orders publishes through an HTTP call to the queue; the queue's worker consumes.
    let t = trace(vec![
        span(1, None, "orders", "publish", Producer, 0, 10),
        span(2, Some(1), "orders", "POST /publish", Client, 1, 9),
        span(3, Some(2), "queue", "POST /publish", Server, 2, 8),
        span(4, Some(1), "queue", "process", Consumer, 30, 40),
    ]);
    let mut deps = Dependencies::default();
    deps.add(&t);
    let g = deps.graph();
    let kinds: Vec<(&str, &str, EdgeKind, u64)> = g
        .edges
        .iter()
        .map(|e| (e.caller.as_str(), e.callee.as_str(), e.kind, e.calls))
        .collect();
    assert_eq!(kinds.len(), 2, "{kinds:?}");
    assert!(kinds.contains(&("orders", "queue", EdgeKind::Rpc, 1)));
    assert!(kinds.contains(&("orders", "queue", EdgeKind::Messaging, 1)));
    let m = g
        .edges
        .iter()
        .find(|e| e.kind == EdgeKind::Messaging)
        .unwrap();
    assert_eq!(m.latency.min, 30, "from the send to the consumer's start");
}

#[test]
fn a_shape_ignores_timing_and_sibling_order_but_not_the_fan_out() {
    let a = TraceShape::of(&request(1, 3, 20, false)).unwrap().id;
    let b = TraceShape::of(&request(2, 3, 45, true)).unwrap().id;
    let c = TraceShape::of(&request(3, 2, 20, false)).unwrap().id;
    assert_eq!(a, b);
    assert_ne!(a, c);
    // Ids are stable across runs and versions: links to patterns must keep working.
    assert_eq!(a.to_string(), "p1febdc556164cc3d");
    assert_eq!(a.to_string().parse::<PatternId>(), Ok(a));
    assert!("p123".parse::<PatternId>().is_err());
    assert!("q1febdc556164cc3d".parse::<PatternId>().is_err());
}

#[test]
fn patterns_group_traces_with_counts_latency_examples_and_mean_delays() {
    let mut p = Patterns::default();
    for i in 0..6 {
        p.add(&request(1000 + i, 3, 20 + 10 * (i as u64 % 2), i % 2 == 1));
    }
    for i in 0..2 {
        p.add(&request(2000 + i, 2, 20, false));
    }
    assert_eq!(p.traces(), 8);
    let list = p.summaries(SortBy::Count);
    assert_eq!(list.len(), 2);
    let (three, two) = (&list[0], &list[1]);
    assert_eq!((three.count, two.count), (6, 2));
    assert_eq!(three.root_service, "frontend");
    assert_eq!(three.root_operation, "GET /");
    assert_eq!(three.services, vec!["cache", "frontend", "storage"]);
    assert_eq!(three.spans, 9);
    assert_eq!(three.latency.p50, 100 * MS);

    let d = p.detail(three.id).unwrap();
    // Root, then the replica group (collapsed: 3 per trace) and the cache call, then
    // their servers.
    let shape: Vec<(Option<usize>, &str, &str, u32)> = d
        .nodes
        .iter()
        .map(|n| (n.parent, n.service.as_str(), n.operation.as_str(), n.count))
        .collect();
    assert_eq!(shape.len(), 5);
    assert_eq!(shape[0], (None, "frontend", "GET /", 1));
    let write = d.nodes.iter().find(|n| n.operation == "write").unwrap();
    let put = d.nodes.iter().find(|n| n.operation == "put").unwrap();
    assert_eq!((write.count, write.instances), (3, 18));
    assert_eq!(put.parent, Some(write.index));
    // Writes take 20 ms in three traces and 30 ms in the other three.
    assert_eq!(write.mean_duration_ns, 25 * MS);
    assert_eq!(put.mean_duration_ns, 24 * MS);
    assert_eq!(put.mean_network_ns, Some(MS));
    assert_eq!(put.mean_start_offset_ns, Some((MS / 2) as i64));
    assert_eq!(write.mean_start_offset_ns, Some(2 * MS as i64));
    let root = &d.nodes[0];
    assert_eq!(root.mean_start_offset_ns, None);
    // All six traces took 100 ms: one bucket holding the three smallest trace ids.
    assert_eq!(d.histogram.len(), 1);
    let bucket = &d.histogram[0];
    assert_eq!(bucket.count, 6);
    assert!(bucket.low_ns <= 100 * MS && 100 * MS < bucket.high_ns);
    let ids: Vec<u128> = bucket.examples.iter().map(|t| t.get()).collect();
    assert_eq!(ids, vec![1000, 1001, 1002]);
}

#[test]
fn patterns_of_one_root_are_named_by_what_sets_them_apart_from_the_usual_one() {
    let mut p = Patterns::default();
    // The usual: three writes. Then two writes; three writes and an audit; a lone shape.
    for i in 0..5 {
        p.add(&request(3000 + i, 3, 20, false));
    }
    for i in 0..2 {
        p.add(&request(3100 + i, 2, 20, false));
    }
    p.add(&with_extra(request(3200, 3, 20, false), 90, 1, "audit"));
    let list = p.summaries(SortBy::Count);
    assert_eq!(list.len(), 3);
    assert!(
        list[0].distinct.is_empty(),
        "the usual one: {:?}",
        list[0].distinct
    );
    assert_eq!(
        list[1].distinct,
        ["frontend write ×2 (usual ×3)", "storage put ×2 (usual ×3)"]
    );
    assert_eq!(list[2].distinct, ["+audit audit"]);
    // A pattern alone under its root needs no distinction, nor does its detail.
    let mut alone = Patterns::default();
    alone.add(&request(4000, 1, 5, false));
    assert!(alone.summaries(SortBy::Count)[0].distinct.is_empty());
    assert!(p.detail(list[1].id).unwrap().summary.distinct.is_empty());
}

#[test]
fn patterns_filter_by_service_sort_and_stay_within_their_memory_bound() {
    let mut traces = Vec::new();
    for i in 0..5 {
        traces.push(request(10 + i, 1, 5, false));
    }
    let mut slow = request(20, 2, 50, false);
    slow.spans[0].end = 900 * MS;
    traces.push(slow);
    let mut lonely = Trace::assemble(TraceId::new(30).unwrap(), vec![]);
    let mut s = span(
        1,
        None,
        "batch",
        "nightly",
        SpanKind::Internal,
        0,
        5_000 * MS,
    );
    s.trace_id = TraceId::new(30).unwrap();
    lonely = Trace::assemble(lonely.trace_id, vec![s]);
    traces.push(lonely);

    let mut p = Patterns::default();
    traces.iter().for_each(|t| p.add(t));
    let ids = |sort| {
        p.summaries(sort)
            .iter()
            .map(|s| s.count)
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(SortBy::Count), vec![5, 1, 1]);
    let by_tail = p.summaries(SortBy::Tail);
    assert_eq!(by_tail[0].root_service, "batch");
    assert_eq!(by_tail[1].latency.max, 900 * MS);

    let mut through_storage = Patterns::new(Some("storage".into()), None, 1_000);
    traces.iter().for_each(|t| through_storage.add(t));
    assert_eq!(through_storage.summaries(SortBy::Count).len(), 2);
    assert_eq!(through_storage.traces(), 6);

    // Room for one 5-node pattern only: the others are counted, not held.
    let mut bounded = Patterns::new(None, None, 5);
    traces.iter().for_each(|t| bounded.add(t));
    assert_eq!(bounded.summaries(SortBy::Count).len(), 1);
    assert_eq!(bounded.untracked(), 2);

    let only = by_tail[1].id;
    let mut one = Patterns::new(None, Some(only), 1_000);
    traces.iter().for_each(|t| one.add(t));
    assert_eq!(one.summaries(SortBy::Count).len(), 1);
    assert!(one.detail(only).is_some());
}

#[test]
fn merged_patterns_equal_patterns_of_everything() {
    let mut g =
        causeway_testkit::Generator::new(5, 1_700_000_000_000_000_000, MS).with_request_types(6);
    let traces: Vec<Trace> = (0..300)
        .map(|_| {
            let spans = g.trace();
            Trace::assemble(spans[0].trace_id, spans)
        })
        .collect();
    let mut all = Patterns::default();
    let (mut a, mut b) = (Patterns::default(), Patterns::default());
    for (i, t) in traces.iter().enumerate() {
        all.add(t);
        if i % 3 == 0 {
            a.add(t)
        } else {
            b.add(t)
        }
    }
    a.merge(b);
    let (x, y) = (a.summaries(SortBy::Total), all.summaries(SortBy::Total));
    assert_eq!(x, y);
    for s in &x {
        assert_eq!(a.detail(s.id), all.detail(s.id));
    }
    // Request types repeat: far fewer patterns than traces.
    assert!(x.len() < 60, "{} patterns", x.len());
    assert!(x[0].count > 20);
}

fn with_extra(mut t: Trace, id: u64, parent: u64, service: &str) -> Trace {
    let mut s = span(
        id,
        Some(parent),
        service,
        "audit",
        SpanKind::Internal,
        71 * MS,
        72 * MS,
    );
    s.trace_id = t.trace_id;
    t.spans.push(s);
    Trace::assemble(t.trace_id, t.spans)
}

#[test]
fn comparing_two_traces_names_missing_extra_and_slower_spans() {
    let a = request(1, 3, 20, false);
    let mut b = with_extra(request(2, 3, 20, false), 99, 1, "frontend");
    // B has no cache call and a slower storage put on one replica.
    b.spans.retain(|s| !matches!(s.span_id.get(), 2 | 3));
    let k = b.spans.iter().position(|s| s.span_id.get() == 11).unwrap();
    b.spans[k].end += 40 * MS;
    let b = Trace::assemble(b.trace_id, b.spans);
    let c = compare(&Profile::of_trace(&a), &Profile::of_trace(&b));
    let row = |service: &str, op: &str| {
        c.rows
            .iter()
            .find(|r| r.service == service && r.operation == op)
            .unwrap()
    };
    assert_eq!(row("frontend", "get").change, Change::Missing);
    assert_eq!(row("cache", "get").change, Change::Missing);
    assert_eq!(row("frontend", "audit").change, Change::Extra);
    // A span on one side only shows the time it took there.
    assert_eq!(row("frontend", "audit").delta_ns, MS as i64);
    let missing = row("cache", "get");
    assert_eq!(
        missing.delta_ns,
        -(missing.a.as_ref().map_or(0, |s| s.mean_ns) as i64)
    );
    assert!(missing.delta_ns < 0);
    let put = row("storage", "put");
    assert_eq!(put.change, Change::Slower);
    assert_eq!(put.delta_ns, (40 * MS / 3) as i64);
    assert_eq!(put.a.as_ref().map(|s| s.span_ids.len()), Some(3));
    assert_eq!(row("frontend", "GET /").change, Change::Same);
    assert_eq!((c.missing, c.extra, c.slower, c.faster), (2, 1, 1, 0));
    // Tree order: the root first, children after their parent.
    assert_eq!(c.rows[0].depth, 0);
    assert_eq!(c.a, "00000000000000000000000000000001");

    let same = compare(&Profile::of_trace(&a), &Profile::of_trace(&a));
    assert!(same.rows.iter().all(|r| r.change == Change::Same));
}

#[test]
fn comparing_two_patterns_uses_spans_per_trace_and_mean_durations() {
    let mut p = Patterns::default();
    for i in 0..4 {
        p.add(&request(10 + i, 3, 20, false));
        p.add(&request(20 + i, 2, 40, false));
    }
    let list = p.summaries(SortBy::Count);
    let (three, two) = if list[0].spans == 9 {
        (&list[0], &list[1])
    } else {
        (&list[1], &list[0])
    };
    let c = compare(
        &Profile::of_pattern(&p.detail(three.id).unwrap()),
        &Profile::of_pattern(&p.detail(two.id).unwrap()),
    );
    let write = c.rows.iter().find(|r| r.operation == "write").unwrap();
    assert_eq!(write.change, Change::Slower);
    assert_eq!(write.a.as_ref().map(|s| s.count), Some(3.0));
    assert_eq!(write.b.as_ref().map(|s| s.count), Some(2.0));
    assert_eq!(write.delta_ns, 20 * MS as i64);
    assert_eq!(c.a, three.id.to_string());
}

#[test]
fn every_fixture_goes_through_every_analysis() {
    for name in ZIPKIN_FIXTURES {
        let mut p = Patterns::default();
        let mut d = Dependencies::default();
        for t in fixture(name) {
            p.add(&t);
            d.add(&t);
            let profile = Profile::of_trace(&t);
            let c = compare(&profile, &profile);
            assert_eq!(c.missing + c.extra + c.slower + c.faster, 0, "{name}");
            let path = causeway_analysis::critical::critical_path(&t);
            let root = causeway_analysis::main_root(&t).unwrap();
            assert_eq!(
                path.iter().map(|s| s.end - s.start).sum::<u64>(),
                t.spans[root].duration(),
                "{name}"
            );
        }
        assert!(!p.summaries(SortBy::Count).is_empty(), "{name}");
        let spans: usize = fixture(name).iter().map(|t| t.spans.len()).sum();
        let nodes: u64 = p
            .summaries(SortBy::Count)
            .iter()
            .map(|s| s.spans * s.count)
            .sum();
        assert_eq!(
            nodes as usize, spans,
            "{name}: every span is in a pattern node"
        );
    }
}
