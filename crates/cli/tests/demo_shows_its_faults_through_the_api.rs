//! `causeway demo` end to end: it starts the server and ten processes, prints the UI
//! address, sends load, and stops by itself at `--duration`, removing its temporary store.
//! While it runs, the API shows what the demo is built to show: the replica-selection
//! skew (catalog reads only the first replica), the quorum writes to all three, the
//! queue's messages, and patterns of the home page. Its traces are checked against the
//! demo's expectations (demo/expectations/shop.pip) with the Rust test API; its log lines
//! are in them (the catalog's, which print no ids, stitched and joined), and its Pivot
//! Tracing query shows the skew too. The uninstrumented edge proxy's part of each request,
//! inferred from its socket calls, joins the same traces.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use causeway_expect::testing::Expectations;
use causeway_model::{Span, SpanKind, Trace, TraceId};
use common::BIN;
use serde_json::Value;

const SHOP: &str = include_str!("../../../demo/expectations/shop.pip");

/// Traces that started more than 3 s ago, so all their spans have arrived.
fn traces(api: &str, service: &str) -> Vec<Trace> {
    traces_before(api, service, ago(Duration::from_secs(3)))
}

/// The time (Unix ns) `before` now.
fn ago(before: Duration) -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
        - before.as_nanos()
}

/// The latest 60 traces that started before `end` (Unix ns).
fn traces_before(api: &str, service: &str, end: u128) -> Vec<Trace> {
    let found = get(&format!(
        "{api}/api/search?service={service}&limit=60&end={end}"
    ));
    found["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let id = t["traceId"].as_str().unwrap();
            let body = get(&format!("{api}/api/traces/{id}"));
            let spans: Vec<Span> = serde_json::from_value(body["spans"].clone()).unwrap();
            Trace::assemble(TraceId::parse(id).unwrap(), spans)
        })
        .collect()
}

/// The demo's expectations on its traces: normal paths pass, the replica skew fails the
/// HDFS-6268 assertion, and a quorum write that skipped a replica is caught.
fn check_expectations(api: &str) {
    let expectations = Expectations::new(SHOP).param("REPLICAS", 3.0);
    // Lines of the catalog's plain log that joined no request stay traces of their own:
    // no path of the shop's.
    let mut home = traces(api, "catalog");
    home.retain(|t| {
        t.spans
            .iter()
            .any(|s| s.source != causeway_model::Source::Logs)
    });
    let checkout = traces(api, "orders");
    assert!(home.len() >= 10 && checkout.len() >= 5);
    let mut all = home.clone();
    all.extend(checkout.iter().cloned());
    let outcome = expectations.check(&all).unwrap();
    // Paths whose edge part has joined (inferred, so now and then put in the wrong
    // request's trace) are held to a share; the instrumented shop's paths to all.
    let (mut with_edge, mut with_edge_expected) = (0, 0);
    for (t, p) in all.iter().zip(&outcome.paths) {
        if t.spans.iter().any(|s| s.is_error()) {
            continue;
        }
        if t.spans
            .iter()
            .any(|s| matches!(s.source, causeway_model::Source::Inferred { .. }))
        {
            with_edge += 1;
            with_edge_expected += usize::from(p.expected);
            continue;
        }
        assert!(
            p.expected,
            "a path without errors is unexpected: {}",
            outcome.report()
        );
    }
    assert!(
        with_edge_expected * 5 >= with_edge * 4,
        "{with_edge_expected} of {with_edge} paths with the edge's part expected: {}",
        outcome.report()
    );
    let skew: Vec<&String> = outcome
        .failed_assertions
        .iter()
        .filter(|a| a.contains("ReadsFirstReplica"))
        .collect();
    assert_eq!(skew.len(), 1, "{:?}", outcome.failed_assertions);

    // A checkout whose write to one replica never happened.
    let good = checkout
        .iter()
        .zip(&expectations.check(&checkout).unwrap().paths)
        .find(|(_, p)| p.expected)
        .map(|(t, _)| t.clone())
        .expect("an expected checkout");
    let dropped = good
        .spans
        .iter()
        .find(|s| &*s.service == "storage-2")
        .map(|s| s.parent_id)
        .expect("a write to storage-2");
    let broken: Vec<Span> = good
        .spans
        .iter()
        .filter(|s| {
            Some(s.span_id) != dropped && s.parent_id != dropped && &*s.service != "storage-2"
        })
        .cloned()
        .collect();
    let broken = Trace::assemble(good.trace_id, broken);
    let outcome = expectations.check(&[broken]).unwrap();
    assert!(!outcome.passed());
    assert!(
        outcome.report().contains("Checkout"),
        "{}",
        outcome.report()
    );
}

fn get(url: &str) -> Value {
    ureq::get(url)
        .call()
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .body_mut()
        .read_json()
        .unwrap()
}

fn calls(deps: &Value, caller: &str, callee: &str) -> u64 {
    deps["edges"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["caller"] == caller && e["callee"] == callee)
        .map_or(0, |e| e["calls"].as_u64().unwrap())
}

#[test]
fn the_demo_runs_sends_traffic_and_stops_cleanly() {
    let mut child = Command::new(BIN)
        // It runs until the checks are done and it is asked to stop (as Ctrl-C does);
        // the duration only bounds a test that hangs.
        .args(["demo", "--duration", "120s", "--rate", "40"])
        .args([
            "--http",
            "127.0.0.1:0",
            "--ingest",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("causeway demo starts");
    let (tx, lines) = mpsc::channel();
    let out = BufReader::new(child.stdout.take().unwrap());
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(90);
    let next = |what: &str| {
        let left = deadline.saturating_duration_since(Instant::now());
        lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("the demo printed no {what}"))
    };
    let mut data = None;
    let ui = loop {
        let line = next("UI address");
        if let Some(rest) = line.strip_prefix("causeway demo is running (data in ") {
            data = Some(rest.trim_end_matches(')').to_string());
        }
        if let Some(url) = line.strip_prefix("open the UI: ") {
            break url.to_string();
        }
    };
    let data = data.expect("the demo names its data directory");
    let running = Instant::now();

    // The UI page itself.
    let page = ureq::get(&ui)
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(page.contains("<title>Causeway</title>"), "{page}");

    // Wait until the reads and the writes have been seen, then check the edges.
    let api = ui.trim_end_matches('/');
    let start = Instant::now();
    let deps = loop {
        let deps = get(&format!("{api}/api/dependencies"));
        if calls(&deps, "catalog", "storage-1") >= 20 && calls(&deps, "orders", "storage-3") >= 5 {
            break deps;
        }
        assert!(
            start.elapsed() < Duration::from_secs(14),
            "too few calls seen: {deps}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    // HDFS-6268: every read goes to the first replica the metadata service lists.
    assert_eq!(calls(&deps, "catalog", "storage-2"), 0, "{deps}");
    assert_eq!(calls(&deps, "catalog", "storage-3"), 0, "{deps}");
    // Quorum writes go to all three.
    for replica in ["storage-1", "storage-2", "storage-3"] {
        assert!(
            calls(&deps, "orders", replica) > 0,
            "orders → {replica}: {deps}"
        );
    }
    assert!(calls(&deps, "catalog", "metadata") > 0);
    assert!(calls(&deps, "frontend", "recommend") > 0);
    let messaging = deps["edges"]
        .as_array()
        .unwrap()
        .iter()
        .any(|e| e["caller"] == "orders" && e["callee"] == "queue" && e["kind"] == "messaging");
    assert!(messaging, "no orders → queue message edge: {deps}");
    let patterns = get(&format!("{api}/api/patterns?service=frontend"));
    let ops: Vec<&str> = patterns["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["rootOperation"].as_str())
        .collect();
    assert!(
        ops.contains(&"GET /home") && ops.contains(&"POST /checkout"),
        "{ops:?}"
    );
    // Let traces older than 3 s accumulate.
    std::thread::sleep(Duration::from_secs(9).saturating_sub(running.elapsed()));
    check_expectations(api);
    // Every instrumented server span names its connection's other end, over HTTP and
    // gRPC alike (`causeway-bench infer-demo` matches captured messages to requests by it).
    let shop = traces(api, "frontend");
    let servers: Vec<&Span> = shop
        .iter()
        .flat_map(|t| &t.spans)
        .filter(|s| s.kind == SpanKind::Server && s.source == causeway_model::Source::Instrumented)
        .collect();
    assert!(servers.iter().any(|s| &*s.service == "metadata"));
    for s in &servers {
        let port = s.attribute("network.peer.port");
        let address = s.attribute("network.peer.address");
        assert!(
            matches!(port, Some(causeway_model::Value::I64(p)) if *p > 0)
                && matches!(address, Some(causeway_model::Value::Str(a)) if a == "127.0.0.1"),
            "{} {}: {port:?} {address:?}",
            s.service,
            s.name
        );
    }

    // The edge proxy has no instrumentation: its part of each request is inferred from
    // its socket calls and joined to the request's trace, where its call to the frontend
    // is the parent of the frontend's root (the agent takes requests older than 3 s,
    // a pass a second).
    std::thread::sleep(Duration::from_secs(13).saturating_sub(running.elapsed()));
    let edged = traces(api, "edge");
    let joined = edged
        .iter()
        .filter(|t| {
            let Some(root) = t.roots.first().map(|&r| &t.spans[r]) else {
                return false;
            };
            let parent_of = |s: &Span| s.parent_id.and_then(|p| t.span(p));
            t.roots.len() == 1
                && &*root.service == "edge"
                && matches!(root.source, causeway_model::Source::Inferred { .. })
                && t.spans.iter().any(|s| {
                    &*s.service == "frontend"
                        && s.kind == SpanKind::Server
                        && parent_of(s)
                            .is_some_and(|p| &*p.service == "edge" && p.kind == SpanKind::Client)
                })
        })
        .count();
    assert!(
        joined >= 10 && joined * 5 >= edged.len() * 4,
        "{joined} of {} traces with the edge's inferred part joined to the frontend's",
        edged.len()
    );

    // Each process's log lines are in its requests' traces, under their spans' logs.
    let logged = shop
        .iter()
        .flat_map(|t| &t.spans)
        .flat_map(|s| &s.events)
        .filter(|e| causeway_model::logs::is_log_event(e))
        .count();
    assert!(logged > 0, "no log line in the shop's traces");
    // The catalog's log prints no ids: its lines are stitched and joined to the traces of
    // their requests, on the catalog's spans, each saying how sure that is; the Logs page
    // shows their flows. The agent takes requests older than 3 s every second; a pass
    // takes a while in a debug build on a loaded machine, so the traces that started 9 s
    // ago are read again until they are joined, for up to 30 s.
    let joined_lines = |t: &Trace| {
        t.spans.iter().any(|s| {
            &*s.service == "catalog"
                && s.source == causeway_model::Source::Instrumented
                && s.events.iter().any(|e| {
                    e.attributes
                        .iter()
                        .any(|a| a.key == causeway_model::attributes::LOG_CONFIDENCE)
                })
        })
    };
    let waiting = Instant::now();
    let settled = ago(Duration::from_secs(9));
    let (with_plain_lines, catalog) = loop {
        let catalog = traces_before(api, "catalog", settled);
        let joined = catalog.iter().filter(|t| joined_lines(t)).count();
        if (joined >= 10 && joined * 5 >= catalog.len() * 4)
            || waiting.elapsed() > Duration::from_secs(30)
        {
            break (joined, catalog);
        }
        std::thread::sleep(Duration::from_secs(1));
    };
    assert!(
        with_plain_lines >= 10 && with_plain_lines * 5 >= catalog.len() * 4,
        "{with_plain_lines} of {} catalog traces with its plain log's lines joined",
        catalog.len()
    );
    let flows = get(&format!("{api}/api/logs?start=0"));
    assert_eq!(
        flows["sequences"][0]["segments"][0]["node"], "catalog",
        "{flows}"
    );
    // Pivot Tracing: the shop's tracepoints are defined, every process took the example
    // query, and its results show the replica skew (all of the catalog's reads on disk-1).
    // A process counts while it reported lately; on a loaded machine one may be a few
    // seconds late, so the list is read until all ten are in it.
    let took_query = |pivot: &Value| pivot["queries"][0]["processes"].as_array().map(Vec::len);
    let waiting = Instant::now();
    let pivot = loop {
        let pivot = get(&format!("{api}/api/pivot/queries"));
        if took_query(&pivot) == Some(10) || waiting.elapsed() > Duration::from_secs(15) {
            break pivot;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let query = &pivot["queries"][0];
    assert_eq!(took_query(&pivot), Some(10), "{pivot}");
    let results = get(&format!("{api}/api/pivot/queries/{}/results", query["id"]));
    let rows = results["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1, "{results}");
    assert_eq!(rows[0][0], "disk-1", "{results}");

    // Asked to stop, it stops and says what it collected.
    let stopped = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(stopped.success(), "kill -INT: {stopped}");
    let summary = loop {
        let line = next("summary");
        if line.contains("spans collected; UI was") {
            break line;
        }
    };
    let traces: u64 = summary
        .split("; ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(traces > 100, "{summary}");
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the demo did not exit");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{status}");
    assert!(
        !std::path::Path::new(&data).exists(),
        "the temporary store {data} was left behind"
    );
}
