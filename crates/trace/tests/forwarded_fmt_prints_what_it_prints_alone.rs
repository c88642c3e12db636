//! The exclusive subscriber forwards to an inner `registry().with(fmt::layer())` the
//! spans and events that one wants: its log output is the same as when it runs alone,
//! while Causeway records its own spans, including under spans only the inner one wants.

mod common;

use std::sync::{Arc, Mutex};

use causeway::model::Span;
use causeway::Config;
use common::{Buffer, Collect};
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

/// A log stack at `level`: what a service would install for its logs.
fn logs(out: &Buffer, level: LevelFilter) -> impl tracing::Subscriber + Send + Sync {
    let writer = out.clone();
    tracing_subscriber::registry().with(
        tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .without_time()
            .with_writer(move || writer.clone())
            .with_filter(level),
    )
}

/// Spans and events at several levels and targets: nested, recorded later, with an
/// explicit root, a span that outlives its parent's guard, and a thread hop.
fn workload() {
    let request = tracing::info_span!(target: "shop", "request", user = "alice", status = tracing::field::Empty);
    let _r = request.enter();
    tracing::info!(target: "shop", items = 3, "priced the basket");
    {
        let _h = tracing::info_span!(target: "hyper", "http", method = "GET").entered();
        tracing::debug!(target: "hyper", "parsed headers");
        let _q = tracing::info_span!(target: "shop", "query", table = "items").entered();
        tracing::info!(target: "shop", rows = 7, "fetched rows");
        tracing::trace!(target: "shop", "too fine for the logs");
    }
    let detached = tracing::info_span!(target: "shop", parent: None, "detached");
    detached.in_scope(|| tracing::warn!(target: "shop", "on its own"));
    let worker = tracing::info_span!(target: "shop", "worker");
    let handle = std::thread::spawn({
        let worker = worker.clone();
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        move || {
            tracing::dispatcher::with_default(&dispatch, || {
                worker.in_scope(|| tracing::error!(target: "shop", code = 42, "failed over"));
            })
        }
    });
    handle.join().unwrap();
    drop(worker);
    request.record("status", 200);
    tracing::info!(target: "shop", "done");
}

fn alone(level: LevelFilter) -> String {
    let out = Buffer::default();
    tracing::subscriber::with_default(logs(&out, level), workload);
    out.text()
}

fn forwarded(config: Config, level: LevelFilter) -> (String, Vec<Span>) {
    let out = Buffer::default();
    let spans = Arc::new(Mutex::new(Vec::new()));
    let (subscriber, guard) =
        causeway::subscriber(config.with_sink(Collect(spans.clone()))).unwrap();
    tracing::subscriber::with_default(subscriber.with_inner(logs(&out, level)), workload);
    drop(guard);
    let spans = spans.lock().unwrap().clone();
    (out.text(), spans)
}

fn by_name<'a>(spans: &'a [Span], name: &str) -> &'a Span {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name} in {spans:?}"))
}

// One test running the cases in turn: `tracing`'s callsite interest is process-wide, and
// subscribers made and dropped on parallel test threads race in rebuilding it.
#[test]
fn forwarding_keeps_the_log_output_and_records_causeways_spans() {
    the_inner_fmt_layer_prints_exactly_what_it_prints_alone();
    spans_only_the_logs_want_are_seen_through();
    callsites_the_logs_do_not_want_never_reach_them();
}

fn the_inner_fmt_layer_prints_exactly_what_it_prints_alone() {
    let expected = alone(LevelFilter::DEBUG);
    assert!(
        expected.contains("request{user=\"alice\"}:http{method=\"GET\"}: hyper: parsed headers"),
        "{expected}"
    );
    let (text, spans) = forwarded(causeway::testing::config("forwarding"), LevelFilter::DEBUG);
    assert_eq!(text, expected);
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    for name in ["request", "http", "query", "detached", "worker"] {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    let request = by_name(&spans, "request");
    assert_eq!(by_name(&spans, "http").parent_id, Some(request.span_id));
    assert_eq!(
        by_name(&spans, "query").parent_id,
        Some(by_name(&spans, "http").span_id)
    );
    assert_eq!(by_name(&spans, "detached").parent_id, None);
    let query = by_name(&spans, "query");
    // Causeway records the trace event the logs leave out.
    assert!(
        query
            .events
            .iter()
            .any(|e| e.name == "too fine for the logs"),
        "{query:?}"
    );
}

fn spans_only_the_logs_want_are_seen_through() {
    let expected = alone(LevelFilter::DEBUG);
    let targets: Targets = "shop=trace".parse().unwrap();
    let (text, spans) = forwarded(
        causeway::testing::config("forwarding").with_targets(targets),
        LevelFilter::DEBUG,
    );
    assert_eq!(text, expected);
    assert!(spans.iter().all(|s| s.name != "http"), "{spans:?}");
    // `query` ran inside `http`, which only the logs wanted: its parent is `request`.
    let request = by_name(&spans, "request");
    assert_eq!(by_name(&spans, "query").parent_id, Some(request.span_id));
    assert_eq!(by_name(&spans, "query").trace_id, request.trace_id);
}

fn callsites_the_logs_do_not_want_never_reach_them() {
    let expected = alone(LevelFilter::WARN);
    assert!(!expected.contains("priced the basket"), "{expected}");
    let (text, spans) = forwarded(causeway::testing::config("forwarding"), LevelFilter::WARN);
    assert_eq!(text, expected);
    let request = by_name(&spans, "request");
    assert!(request.events.iter().any(|e| e.name == "priced the basket"));
}
