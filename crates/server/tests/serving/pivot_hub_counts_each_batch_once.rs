//! The Pivot Tracing hub: queries installed and listed through the API, partial results
//! merged once per batch however often a process re-sends it, and the totals exact
//! across a restart of the hub, as are the tracepoint definitions posted to it; what a
//! process dropped is listed with it.

use crate::common;

use causeway_server::ServerConfig;
use common::TestServer;
use serde_json::{json, Value};

const TRACEPOINTS: &str =
    r#"Tracepoint Read = event(target = "app", field = "delta") Export delta"#;

fn tweak(c: &mut ServerConfig) {
    c.pivot_tracepoints = vec![("app.pivot".into(), TRACEPOINTS.into())];
}

fn send(ts: &TestServer, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let url = ts.api_url(path);
    let resp = match (method, body) {
        ("POST", Some(b)) => ts
            .http
            .post(&url)
            .header("content-type", "application/json")
            .send(b.to_string().as_bytes()),
        ("DELETE", _) => ts.http.delete(&url).call(),
        _ => ts.http.get(&url).call(),
    };
    let mut r = resp.unwrap();
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn report(instance: u64, installed: &[u64], batches: Value) -> Value {
    json!({
        "process": {"instance": instance, "service": "dn", "host": "A", "proc_name": "DataNode-A", "pid": 7},
        "installed": installed,
        "callsites": [{"kind": "event", "target": "app", "name": "event app.rs:1", "level": "INFO",
                       "module": "app", "file": "app.rs", "line": 1, "fields": ["message", "delta"]}],
        "batches": batches,
        "counters": {"bags_malformed": 2, "bags_overflowed": 1, "fanout_dropped": 5, "batches_dropped": 3},
    })
}

fn batch(seq: u64, query: u64, host: &str, delta: i64) -> Value {
    json!({"seq": seq, "at_ms": 1_000 * seq, "partials": [{"query": query, "overflow": 0, "groups": [
        {"key": [host], "states": [{"sum_int": delta}, {"count": 1}, {"average": {"sum": delta as f64, "count": 1}}]}
    ]}]})
}

fn totals(ts: &TestServer, id: u64) -> Vec<Value> {
    let (status, r) = send(ts, "GET", &format!("/api/pivot/queries/{id}/results"), None);
    assert_eq!(status, 200, "{r}");
    r["rows"].as_array().unwrap().clone()
}

#[test]
fn batches_count_once_and_survive_a_restart() {
    let mut ts = TestServer::start_with("pivot-hub", tweak);
    let (status, r) = send(
        &ts,
        "POST",
        "/api/pivot/queries",
        Some(
            json!({"query": "Q = From r In Read GroupBy r.host Select r.host, SUM(r.delta), COUNT, AVERAGE(r.delta)"}),
        ),
    );
    assert_eq!(status, 201, "{r}");
    let id = r["id"].as_u64().unwrap();
    assert_eq!(r["name"], "Q");
    assert!(r["explain"].as_str().unwrap().contains("EMIT"), "{r}");

    // A process learns the query with its first report and applies batch 1 once.
    let (status, reply) = send(
        &ts,
        "POST",
        "/api/pivot/agent",
        Some(report(9, &[], json!([batch(1, id, "A", 10)]))),
    );
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["applied"], 1);
    assert_eq!(reply["queries"][0]["id"], id);
    assert!(reply["queries"][0]["script"]
        .as_str()
        .unwrap()
        .contains("Tracepoint Read"));
    // The answer was lost: batch 1 comes again, with batch 2.
    let (_, reply) = send(
        &ts,
        "POST",
        "/api/pivot/agent",
        Some(report(
            9,
            &[id],
            json!([batch(1, id, "A", 10), batch(2, id, "A", 5)]),
        )),
    );
    assert_eq!(reply["applied"], 2);
    assert_eq!(totals(&ts, id), [json!(["A", 15, 2, 7.5])]);
    let (_, list) = send(&ts, "GET", "/api/pivot/queries", None);
    let procs = &list["queries"][0]["processes"];
    assert_eq!(procs[0]["procName"], "DataNode-A", "{list}");
    assert_eq!(procs[0]["acknowledged"], true, "{list}");
    let (_, catalog) = send(&ts, "GET", "/api/pivot/tracepoints", None);
    assert_eq!(
        catalog["callsites"][0]["tracepoints"],
        json!(["Read"]),
        "{catalog}"
    );
    let (status, processes) = send(&ts, "GET", "/api/pivot/processes", None);
    assert_eq!(status, 200, "{processes}");
    let p = &processes["processes"][0];
    assert_eq!(p["procName"], "DataNode-A", "{processes}");
    assert_eq!(p["connected"], true, "{processes}");
    assert_eq!(p["installed"], json!([id]), "{processes}");
    assert_eq!(
        p["counters"],
        json!({"bagsMalformed": 2, "bagsOverflowed": 1, "fanoutDropped": 5, "batchesDropped": 3}),
        "{processes}"
    );
    // A definition posted to the API, used after the restart.
    let (status, r) = send(
        &ts,
        "POST",
        "/api/pivot/tracepoints",
        Some(
            json!({"text": "Tracepoint Write = event(target = \"app\", field = \"bytes\") Export bytes"}),
        ),
    );
    assert_eq!(status, 200, "{r}");

    // The hub restarts on the same data; the process re-sends what it has not seen
    // acknowledged (batch 2 again) and goes on.
    let server = ts.server.take().unwrap();
    ts.rt.block_on(server.shutdown());
    let mut config = ServerConfig {
        data_dir: ts.dir.to_path_buf(),
        grpc_addr: "127.0.0.1:0".parse().unwrap(),
        ingest_addr: "127.0.0.1:0".parse().unwrap(),
        http_addr: "127.0.0.1:0".parse().unwrap(),
        ..ServerConfig::default()
    };
    tweak(&mut config);
    ts.server = Some(ts.rt.block_on(causeway_server::start(config)).unwrap());
    assert_eq!(totals(&ts, id), [json!(["A", 15, 2, 7.5])]);
    // It sent its callsites before: this report carries only new ones (none).
    let mut again = report(
        9,
        &[id],
        json!([batch(2, id, "A", 5), batch(3, id, "B", 7)]),
    );
    again["callsites"] = json!([]);
    again["callsites_from"] = json!(1);
    let (_, reply) = send(&ts, "POST", "/api/pivot/agent", Some(again));
    assert_eq!(reply["applied"], 3);
    assert_eq!(
        reply["want_callsites"], true,
        "a restarted hub asks for the catalog"
    );
    assert_eq!(
        totals(&ts, id),
        [json!(["A", 15, 2, 7.5]), json!(["B", 7, 1, 7.0])]
    );
    // Ids are not reused after a restart.
    let (_, r2) = send(
        &ts,
        "POST",
        "/api/pivot/queries",
        Some(json!({"query": "From r In Read Select COUNT"})),
    );
    assert!(r2["id"].as_u64().unwrap() > id, "{r2}");
    let (status, r3) = send(
        &ts,
        "POST",
        "/api/pivot/queries",
        Some(json!({"query": "From w In Write Select SUM(w.bytes)"})),
    );
    assert_eq!(status, 201, "a definition posted before the restart: {r3}");

    let (status, _) = send(&ts, "DELETE", &format!("/api/pivot/queries/{id}"), None);
    assert_eq!(status, 204);
    let (status, _) = send(
        &ts,
        "GET",
        &format!("/api/pivot/queries/{id}/results"),
        None,
    );
    assert_eq!(status, 404);
}

#[test]
fn bad_queries_and_reports_get_clear_errors() {
    let ts = TestServer::start_with("pivot-bad", tweak);
    let (status, r) = send(
        &ts,
        "POST",
        "/api/pivot/queries",
        Some(json!({"query": "From r In Nowhere\nSelect COUNT"})),
    );
    assert_eq!(status, 400);
    let e = r["error"].as_str().unwrap();
    assert!(e.starts_with("query:1:11:"), "{e}");
    assert!(e.contains("Nowhere"), "{e}");
    let long = "x".repeat(100_000);
    let (status, _) = send(
        &ts,
        "POST",
        "/api/pivot/queries",
        Some(json!({ "query": long })),
    );
    assert_eq!(status, 413);
    let (status, _) = send(&ts, "POST", "/api/pivot/agent", Some(json!({"process": 1})));
    assert!((400..500).contains(&status), "{status}");
    // A partial whose states are not the query's aggregates is not merged.
    let (_, r) = send(
        &ts,
        "POST",
        "/api/pivot/queries",
        Some(json!({"query": "From r In Read Select COUNT"})),
    );
    let id = r["id"].as_u64().unwrap();
    let wrong = json!([{"seq": 1, "at_ms": 0, "partials": [{"query": id, "overflow": 0,
        "groups": [{"key": [], "states": [{"sum_int": 3}]}]}]}]);
    let (status, _) = send(
        &ts,
        "POST",
        "/api/pivot/agent",
        Some(report(3, &[id], wrong)),
    );
    assert_eq!(status, 200);
    assert!(totals(&ts, id).is_empty());
    let (status, _) = send(&ts, "GET", "/api/status", None);
    assert_eq!(status, 200, "the server still answers");
}

#[test]
fn queries_that_pack_the_same_tuples_share_one_bag() {
    let ts = TestServer::start_with("pivot-share", |c| {
        c.pivot_tracepoints = vec![(
            "app.pivot".into(),
            format!("{TRACEPOINTS}\nTracepoint Op = span(target = \"app\", name = \"op\")"),
        )];
    });
    let install = |q: &str| {
        let (status, r) = send(
            &ts,
            "POST",
            "/api/pivot/queries",
            Some(json!({ "query": q })),
        );
        assert_eq!(status, 201, "{r}");
        r["id"].as_u64().unwrap()
    };
    let by_host =
        install("From r In Read Join st In Op On st -> r GroupBy st.host Select st.host, COUNT");
    let by_pid =
        install("From r In Read Join o In Op On o -> r GroupBy o.host Select o.host, SUM(r.delta)");
    let first = install("From r In Read Join o In First(Op) On o -> r Select COUNT");
    let (_, reply) = send(
        &ts,
        "POST",
        "/api/pivot/agent",
        Some(report(4, &[], json!([]))),
    );
    let bags = |id: u64| {
        reply["queries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == id)
            .map(|o| o["bags"].clone())
            .unwrap()
    };
    // Advice comes children first: bag 0 is the Op advice's, bag 1 the Read advice's.
    assert_eq!(
        bags(by_host)[0],
        json!({"query": by_host, "bag": 0}),
        "{reply}"
    );
    assert_eq!(bags(by_pid)[0], bags(by_host)[0], "the same pack: one bag");
    assert_eq!(bags(by_pid)[1], json!({"query": by_pid, "bag": 1}));
    assert_eq!(
        bags(first)[0],
        json!({"query": first, "bag": 0}),
        "First keeps its own"
    );
}
