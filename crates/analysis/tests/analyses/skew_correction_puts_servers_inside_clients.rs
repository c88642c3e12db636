//! Clock-skew correction and RPC timing on hand-built traces and the Zipkin fixtures.

use crate::common;

use causeway_analysis::skew::correct;
use causeway_analysis::stats::{rpc_hops, trace_stats};
use causeway_model::{SpanKind, Trace};
use common::{fixture, span, trace, ZIPKIN_FIXTURES};

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;
const T: u64 = 1_700_000_000 * S;

/// `a` serves GET / (100 ms) and calls `b` from 10 to 90 ms; b's server span as given.
fn one_call(server_start: u64, server_end: u64) -> Vec<causeway_model::Span> {
    vec![
        span(1, None, "a", "GET /", SpanKind::Server, T, T + 100 * MS),
        span(
            2,
            Some(1),
            "a",
            "call b",
            SpanKind::Client,
            T + 10 * MS,
            T + 90 * MS,
        ),
        span(
            3,
            Some(2),
            "b",
            "serve",
            SpanKind::Server,
            server_start,
            server_end,
        ),
    ]
}

fn by_id(t: &Trace, id: u64) -> &causeway_model::Span {
    t.spans.iter().find(|s| s.span_id.get() == id).unwrap()
}

#[test]
fn the_zipkin_skew_fixture_comes_out_with_the_server_inside_its_client() {
    let traces = fixture("skew.json");
    assert_eq!(traces.len(), 1);
    let raw = &traces[0];
    let client = raw
        .spans
        .iter()
        .find(|s| s.kind == SpanKind::Client)
        .expect("a client span");
    let server = raw
        .spans
        .iter()
        .find(|s| s.kind == SpanKind::Server && s.parent_id == Some(client.span_id))
        .expect("the server half of the shared id");
    assert!(
        server.start < client.start,
        "the fixture's server starts before its client"
    );

    let adjusted = correct(raw);
    let c = adjusted.trace.span(client.span_id).unwrap();
    let s = adjusted.trace.span(server.span_id).unwrap();
    assert!(
        c.start <= s.start && s.end <= c.end,
        "server {s:?} outside client {c:?}"
    );
    // Centred: the bounds are 65 441 and 66 403 microseconds.
    let offset = adjusted.offset_of(server);
    assert_eq!(offset, 65_922_000);
    assert_eq!(s.start, server.start + 65_922_000);
    assert_eq!(adjusted.offsets.len(), 1);
    assert_eq!(adjusted.offsets[0].host, server.host.to_string());
    // The server's other span (same host) moves with it; the client's host does not move.
    let other = raw
        .spans
        .iter()
        .find(|x| x.host == server.host && x.span_id != server.span_id)
        .unwrap();
    assert_eq!(
        adjusted.trace.span(other.span_id).unwrap().start,
        other.start + 65_922_000
    );
    assert_eq!(c.start, client.start);
    // The raw trace is untouched.
    assert_eq!(raw.span(server.span_id).unwrap().start, server.start);
}

#[test]
fn hosts_that_disagree_by_seconds_are_brought_back() {
    // b's clock runs 5 s ahead of a's, c's 3 s behind.
    let t = trace(vec![
        span(1, None, "a", "GET /", SpanKind::Server, T, T + 300 * MS),
        span(
            2,
            Some(1),
            "a",
            "call b",
            SpanKind::Client,
            T + 10 * MS,
            T + 110 * MS,
        ),
        span(
            3,
            Some(2),
            "b",
            "serve",
            SpanKind::Server,
            T + 5 * S + 20 * MS,
            T + 5 * S + 100 * MS,
        ),
        span(
            4,
            Some(3),
            "b",
            "call c",
            SpanKind::Client,
            T + 5 * S + 30 * MS,
            T + 5 * S + 90 * MS,
        ),
        span(
            5,
            Some(4),
            "c",
            "serve",
            SpanKind::Server,
            T - 3 * S + 40 * MS,
            T - 3 * S + 80 * MS,
        ),
        // An event moves with its span.
    ]);
    let adjusted = correct(&t);
    let offsets: Vec<(String, i64)> = adjusted
        .offsets
        .iter()
        .map(|o| (o.host.clone(), o.offset_ns))
        .collect();
    assert_eq!(
        offsets,
        vec![
            ("b-host".into(), -5 * S as i64),
            ("c-host".into(), 3 * S as i64)
        ]
    );
    let a = &adjusted.trace;
    assert_eq!(by_id(a, 3).start, T + 20 * MS);
    assert_eq!(by_id(a, 5).start, T + 40 * MS);
    assert_eq!(by_id(a, 5).end, T + 80 * MS);
    // Spans stay sorted by their corrected start.
    assert!(a.spans.windows(2).all(|w| w[0].start <= w[1].start));
}

#[test]
fn consistent_clocks_are_left_alone() {
    let t = trace(one_call(T + 20 * MS, T + 80 * MS));
    let adjusted = correct(&t);
    assert!(!adjusted.shifted());
    assert_eq!(adjusted.offsets.len(), 1);
    assert_eq!(adjusted.offsets[0].offset_ns, 0);
    assert_eq!(adjusted.trace.spans, t.spans);
}

#[test]
fn a_consumer_is_moved_just_after_its_producer() {
    let t = trace(vec![
        span(
            1,
            None,
            "shop",
            "order",
            SpanKind::Producer,
            T + 50 * MS,
            T + 51 * MS,
        ),
        span(
            2,
            Some(1),
            "mailer",
            "consume",
            SpanKind::Consumer,
            T + 10 * MS,
            T + 30 * MS,
        ),
    ]);
    let adjusted = correct(&t);
    assert_eq!(adjusted.offsets[0].offset_ns, 40 * MS as i64);
    let consumer = by_id(&adjusted.trace, 2);
    assert_eq!((consumer.start, consumer.end), (T + 50 * MS, T + 70 * MS));
}

#[test]
fn a_server_that_outlives_its_client_on_a_good_clock_is_left_alone() {
    // The quorum write of the demo: the server answers after two replicas and stays open
    // for the third. Its end says nothing about its clock.
    let t = trace(vec![
        span(
            1,
            None,
            "frontend",
            "checkout",
            SpanKind::Server,
            T,
            T + 60 * MS,
        ),
        span(
            2,
            Some(1),
            "frontend",
            "POST /orders",
            SpanKind::Client,
            T + 5 * MS,
            T + 40 * MS,
        ),
        span(
            3,
            Some(2),
            "orders",
            "POST /orders",
            SpanKind::Server,
            T + 6 * MS,
            T + 90 * MS,
        ),
    ]);
    let adjusted = correct(&t);
    assert!(!adjusted.shifted(), "{:?}", adjusted.offsets);
    assert_eq!(adjusted.offsets[0].reason, None);
    assert_eq!(adjusted.trace.spans, t.spans);
}

#[test]
fn an_offset_applied_says_why() {
    let traces = fixture("skew.json");
    let adjusted = correct(&traces[0]);
    let reason = adjusted.offsets[0].reason.as_deref().expect("a reason");
    assert!(reason.starts_with("server "), "{reason}");
    assert!(reason.contains("ms before its parent"), "{reason}");
    let t = trace(vec![
        span(1, None, "a", "call", SpanKind::Client, T, T + 10 * MS),
        span(
            2,
            Some(1),
            "b",
            "serve",
            SpanKind::Server,
            T + 30 * MS,
            T + 32 * MS,
        ),
    ]);
    let adjusted = correct(&t);
    let reason = adjusted.offsets[0].reason.as_deref().expect("a reason");
    assert_eq!(
        reason,
        "server \"serve\" on b-host started 20.000 ms after its client \"call\" on a-host had its answer"
    );
}

#[test]
fn a_server_longer_than_its_client_starts_midway_in_it() {
    let t = trace(vec![
        span(
            1,
            None,
            "a",
            "call",
            SpanKind::Client,
            T + 10 * MS,
            T + 20 * MS,
        ),
        span(
            2,
            Some(1),
            "b",
            "serve",
            SpanKind::Server,
            T + 100 * MS,
            T + 114 * MS,
        ),
    ]);
    let adjusted = correct(&t);
    let s = by_id(&adjusted.trace, 2);
    // Its start may lie anywhere in the client's 10 ms; its end bounds nothing.
    assert_eq!((s.start, s.end), (T + 15 * MS, T + 29 * MS));
}

#[test]
fn rpc_hops_split_client_time_into_network_and_server() {
    let mut spans = one_call(T + 25 * MS, T + 80 * MS);
    spans.push(span(
        4,
        Some(3),
        "b",
        "work",
        SpanKind::Internal,
        T + 30 * MS,
        T + 70 * MS,
    ));
    let t = trace(spans);
    let hops = rpc_hops(&t);
    assert_eq!(hops.len(), 1);
    let h = &hops[0];
    assert_eq!(
        (h.client_service.as_str(), h.server_service.as_str()),
        ("a", "b")
    );
    assert_eq!(
        (h.client_ns, h.server_ns, h.network_ns),
        (80 * MS, 55 * MS, 25 * MS)
    );
    assert_eq!(
        (h.request_ns, h.response_ns),
        (15 * MS as i64, 10 * MS as i64)
    );

    let stats = trace_stats(&t);
    assert_eq!(stats.spans, 4);
    let a = stats.services.iter().find(|s| s.service == "a").unwrap();
    let b = stats.services.iter().find(|s| s.service == "b").unwrap();
    // a: root self 20 ms + client self 25 ms; b: server 15 ms + work 40 ms.
    assert_eq!((a.count, a.total_ns, a.self_ns), (2, 180 * MS, 45 * MS));
    assert_eq!((b.count, b.total_ns, b.self_ns), (2, 95 * MS, 55 * MS));
    assert_eq!(stats.services[0].service, "b", "most self time first");
    let work = stats
        .operations
        .iter()
        .find(|o| o.operation.as_deref() == Some("work"))
        .unwrap();
    assert_eq!(work.self_ns, 40 * MS);
    let total_self: u64 = stats.operations.iter().map(|o| o.self_ns).sum();
    assert_eq!(total_self, 100 * MS, "self times add up to the busy time");
}

#[test]
fn every_zipkin_fixture_is_corrected_without_pushing_servers_out() {
    for name in ZIPKIN_FIXTURES {
        for raw in fixture(name) {
            let adjusted = correct(&raw);
            let t = &adjusted.trace;
            assert_eq!(t.spans.len(), raw.spans.len(), "{name}");
            for h in rpc_hops(t) {
                let (c, s) = (
                    t.span(h.client_span_id).unwrap(),
                    t.span(h.server_span_id).unwrap(),
                );
                if s.duration() <= c.duration() && c.host != s.host {
                    assert!(
                        c.start <= s.start && s.end <= c.end,
                        "{name}: server {s:?} outside client {c:?}"
                    );
                }
            }
        }
    }
}
