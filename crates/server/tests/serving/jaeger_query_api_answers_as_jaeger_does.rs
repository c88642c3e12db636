//! Jaeger's query API under `/jaeger/api/` answers in Jaeger's envelope and shapes, with
//! Jaeger's units and parameter names, so Grafana's Jaeger data source and Jaeger's UI
//! read Causeway as they read Jaeger.

use crate::common;

use causeway_model::codec::jaeger;
use causeway_model::{Span, SpanKind, Status, TraceId};
use causeway_testkit::now_ns;
use common::TestServer;
use serde_json::{json, Value as Json};

const JSON: (&str, &str) = ("content-type", "application/json");
const MS: u64 = 1_000_000;

const TRACE_A: u128 = 0x0af7651916cd43dd8448eb211c80319c;
const TRACE_B: u128 = 0x6b221d5bc9e6496c;
const TRACE_C: u128 = 0xc0ffee;

#[allow(clippy::too_many_arguments)]
fn span(
    trace: u128,
    id: u64,
    parent: Option<u64>,
    name: &str,
    service: &str,
    host: &str,
    kind: SpanKind,
    start: u64,
    end: u64,
) -> Span {
    let mut s = causeway_testkit::span(trace, id, parent, name, service, start, end);
    s.kind = kind;
    s.host = host.into();
    s
}

/// Three traces: A (128-bit id) through frontend, customer and mysql with an error; B
/// (64-bit id) a quick frontend call; C three days old.
fn spans(base: u64) -> Vec<Span> {
    use SpanKind::*;
    let mut a3 = span(
        TRACE_A,
        3,
        Some(2),
        "HTTP GET /customer",
        "customer",
        "cust-1",
        Server,
        base + 20 * MS,
        base + 300 * MS,
    );
    a3.attributes
        .push(causeway_model::KeyValue::new("http.status_code", 200i64));
    let mut a4 = span(
        TRACE_A,
        4,
        Some(3),
        "SQL SELECT",
        "customer",
        "cust-1",
        Client,
        base + 30 * MS,
        base + 280 * MS,
    );
    a4.status = Status::Error("deadlock".into());
    vec![
        span(
            TRACE_A,
            1,
            None,
            "HTTP GET /dispatch",
            "frontend",
            "web-1",
            Server,
            base,
            base + 700 * MS,
        ),
        span(
            TRACE_A,
            2,
            Some(1),
            "HTTP GET /customer",
            "frontend",
            "web-1",
            Client,
            base + 10 * MS,
            base + 310 * MS,
        ),
        a3,
        a4,
        span(
            TRACE_A,
            5,
            Some(4),
            "SQL SELECT",
            "mysql",
            "db-1",
            Server,
            base + 40 * MS,
            base + 270 * MS,
        ),
        span(
            TRACE_B,
            6,
            None,
            "HTTP GET /config",
            "frontend",
            "web-1",
            Server,
            base + 1000 * MS,
            base + 1002 * MS,
        ),
        span(
            TRACE_C,
            7,
            None,
            "HTTP GET /dispatch",
            "frontend",
            "web-1",
            Server,
            base - 3 * 86_400_000 * MS,
            base - 3 * 86_400_000 * MS + 800 * MS,
        ),
    ]
}

fn envelope_ok(v: &Json) {
    for key in ["data", "total", "limit", "offset", "errors"] {
        assert!(v.get(key).is_some(), "{key} in {v}");
    }
    assert_eq!(v["limit"], 0);
    assert_eq!(v["offset"], 0);
    assert!(v["errors"].is_null(), "{v}");
}

/// An error answer: status, Jaeger's envelope with `data` null, and the message.
fn error(server: &TestServer, path: &str, status: u16) -> String {
    let (got, v) = server.get(path);
    assert_eq!(got, status, "{path}: {v}");
    assert!(v["data"].is_null(), "{v}");
    assert_eq!(v["total"], 0);
    assert_eq!(v["errors"][0]["code"], status, "{v}");
    v["errors"][0]["msg"].as_str().unwrap().to_string()
}

fn trace_ids(v: &Json) -> Vec<String> {
    v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["traceID"].as_str().unwrap().to_string())
        .collect()
}

fn id(t: u128) -> String {
    TraceId::new(t).unwrap().to_string()
}

fn sorted(mut spans: Vec<Span>) -> Vec<Span> {
    spans.sort_by_key(|s| (s.trace_id, s.span_id));
    spans
}

#[test]
fn every_endpoint_answers_in_jaegers_shapes() {
    let server = TestServer::start("jaeger-api");
    // Whole microseconds, as Jaeger's JSON carries them.
    let base = (now_ns() - 60_000 * MS) / 1000 * 1000;
    let posted = jaeger::encode_json(&spans(base));
    let (status, _, body) = server.post("/v1/jaeger", &[JSON], &posted);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let v: Json = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["accepted"], 7, "{v}");
    let expected = jaeger::decode_json(&posted).unwrap().spans;
    let of_trace = |t: u128| -> Vec<Span> {
        sorted(
            expected
                .iter()
                .filter(|s| s.trace_id.get() == t)
                .cloned()
                .collect(),
        )
    };

    // Services, and a service's operations, as lists of names with their count.
    let (status, v) = server.get("/jaeger/api/services");
    assert_eq!(status, 200);
    envelope_ok(&v);
    assert_eq!(v["data"], json!(["customer", "frontend", "mysql"]));
    assert_eq!(v["total"], 3);
    let (_, v) = server.get("/jaeger/api/services/frontend/operations");
    envelope_ok(&v);
    assert_eq!(
        v["data"],
        json!([
            "HTTP GET /config",
            "HTTP GET /customer",
            "HTTP GET /dispatch"
        ])
    );
    assert_eq!(v["total"], 3);
    let (status, v) = server.get("/jaeger/api/services/no%20such/operations");
    assert_eq!(status, 200);
    assert_eq!(v["data"], json!([]));

    // Operations with their span kinds, all or of one kind.
    let (_, v) = server.get("/jaeger/api/operations?service=frontend");
    envelope_ok(&v);
    assert_eq!(
        v["data"],
        json!([
            {"name": "HTTP GET /config", "spanKind": "server"},
            {"name": "HTTP GET /customer", "spanKind": "client"},
            {"name": "HTTP GET /dispatch", "spanKind": "server"},
        ])
    );
    assert_eq!(v["total"], 3);
    let (_, v) = server.get("/jaeger/api/operations?service=frontend&spanKind=server");
    assert_eq!(
        v["data"],
        json!([
            {"name": "HTTP GET /config", "spanKind": "server"},
            {"name": "HTTP GET /dispatch", "spanKind": "server"},
        ])
    );
    let msg = error(&server, "/jaeger/api/operations?spanKind=server", 400);
    assert_eq!(msg, "parameter 'service' is required");
    let msg = error(
        &server,
        "/jaeger/api/operations?service=frontend&spanKind=sideways",
        400,
    );
    assert!(msg.starts_with("unable to parse param 'spanKind'"), "{msg}");

    // A trace by its id: 32 digits, or 16 for a 64-bit id.
    let (status, v) = server.get(&format!("/jaeger/api/traces/{}", id(TRACE_A)));
    assert_eq!(status, 200);
    envelope_ok(&v);
    assert_eq!(v["total"], 0);
    assert_eq!(v["data"].as_array().unwrap().len(), 1);
    let t = &v["data"][0];
    assert_eq!(t["traceID"], id(TRACE_A));
    assert_eq!(t["spans"].as_array().unwrap().len(), 5);
    let services: Vec<&str> = t["processes"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p["serviceName"].as_str().unwrap())
        .collect();
    assert_eq!(services.len(), 3, "one process per service and host");
    let root = t["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["spanID"] == "0000000000000001")
        .unwrap();
    assert_eq!(root["startTime"], base / 1000);
    assert_eq!(root["duration"], 700_000);
    assert_eq!(root["references"], json!([]));
    let body = serde_json::to_vec(&v).unwrap();
    let got = jaeger::decode_json(&body).unwrap();
    assert!(got.rejected.is_empty());
    assert_eq!(sorted(got.spans), of_trace(TRACE_A), "field for field");
    let (_, v) = server.get(&format!("/jaeger/api/traces/{}?raw=true", id(TRACE_A)));
    let got = jaeger::decode_json(&serde_json::to_vec(&v).unwrap()).unwrap();
    assert_eq!(sorted(got.spans), of_trace(TRACE_A));
    let (status, v) = server.get("/jaeger/api/traces/6b221d5bc9e6496c");
    assert_eq!(status, 200);
    assert_eq!(v["data"][0]["traceID"], id(TRACE_B));
    // Not stored: 404 as Jaeger answers it.
    let (status, v) = server.get("/jaeger/api/traces/1234abcd");
    assert_eq!(status, 404);
    assert_eq!(
        v,
        json!({"data": null, "total": 0, "limit": 0, "offset": 0,
               "errors": [{"code": 404, "msg": "trace not found"}]})
    );
    let msg = error(&server, "/jaeger/api/traces/xyz", 400);
    assert!(msg.starts_with("cannot parse traceID param"), "{msg}");

    // Search: whole traces, most recent first, in the last two days unless told.
    let (status, v) = server.get("/jaeger/api/traces?service=frontend");
    assert_eq!(status, 200);
    envelope_ok(&v);
    assert_eq!(trace_ids(&v), [id(TRACE_B), id(TRACE_A)]);
    assert_eq!(v["data"][1]["spans"].as_array().unwrap().len(), 5);
    let us = |ns: u64| ns / 1000;
    let window = format!(
        "start={}&end={}",
        us(base - 4 * 86_400_000 * MS),
        us(base + 2000 * MS)
    );
    let search = |q: &str| {
        let (status, v) = server.get(&format!("/jaeger/api/traces?{window}&{q}"));
        assert_eq!(status, 200, "{q}: {v}");
        envelope_ok(&v);
        trace_ids(&v)
    };
    assert_eq!(
        search("service=frontend"),
        [id(TRACE_B), id(TRACE_A), id(TRACE_C)]
    );
    assert_eq!(search("service=frontend&limit=1"), [id(TRACE_B)]);
    assert_eq!(
        search("service=frontend&operation=HTTP%20GET%20%2Fdispatch"),
        [id(TRACE_A), id(TRACE_C)]
    );
    assert_eq!(
        search("service=customer&tags=%7B%22http.status_code%22%3A%22200%22%7D"),
        [id(TRACE_A)]
    );
    assert_eq!(search("service=customer&tag=error:true"), [id(TRACE_A)]);
    assert!(search("service=customer&tag=http.status_code:404").is_empty());
    assert_eq!(search("service=frontend&minDuration=750ms"), [id(TRACE_C)]);
    assert_eq!(
        search("service=frontend&minDuration=0.5s&maxDuration=750ms"),
        [id(TRACE_A)]
    );
    assert_eq!(search("service=frontend&maxDuration=2000us"), [id(TRACE_B)]);
    // Grafana's search: lookback=custom rides along and is ignored.
    assert_eq!(
        search("service=mysql&operation=SQL%20SELECT&lookback=custom&limit=20"),
        [id(TRACE_A)]
    );
    let (_, v) = server.get(&format!(
        "/jaeger/api/traces?service=frontend&start={}&end={}",
        us(base + 500 * MS),
        us(base + 2000 * MS)
    ));
    assert_eq!(trace_ids(&v), [id(TRACE_B)], "the window bounds the start");
    // By ids instead, the missing ones named in errors.
    let (status, v) = server.get(&format!(
        "/jaeger/api/traces?traceID={}&traceID=abc",
        id(TRACE_B)
    ));
    assert_eq!(status, 200);
    assert_eq!(trace_ids(&v), [id(TRACE_B)]);
    assert_eq!(
        v["errors"],
        json!([{"msg": "trace not found", "traceID": id(0xabc)}])
    );

    for (query, message) in [
        ("operation=x", "parameter 'service' is required"),
        (
            "service=frontend&minDuration=1s&maxDuration=10ms",
            "'maxDuration' should be greater than 'minDuration'",
        ),
        (
            "service=frontend&minDuration=10",
            "unable to parse param 'minDuration': time: missing unit in duration \"10\"",
        ),
        (
            "service=frontend&start=yesterday",
            "unable to parse param 'start'",
        ),
        (
            "service=frontend&tag=nocolon",
            "malformed 'tag' parameter, expecting key:value, received: nocolon",
        ),
        (
            "service=frontend&tags=%7Bnope",
            "malformed 'tags' parameter, cannot unmarshal JSON",
        ),
        ("service=frontend&limit=-1", "unable to parse param 'limit'"),
    ] {
        let msg = error(&server, &format!("/jaeger/api/traces?{query}"), 400);
        assert!(msg.starts_with(message), "{query}: {msg}");
    }

    // Dependencies over the window: parent, child, calls.
    let end_ms = (base + 2000 * MS) / MS;
    let (status, v) = server.get(&format!(
        "/jaeger/api/dependencies?endTs={end_ms}&lookback=3600000"
    ));
    assert_eq!(status, 200);
    envelope_ok(&v);
    assert_eq!(
        v["data"],
        json!([
            {"parent": "customer", "child": "mysql", "callCount": 1},
            {"parent": "frontend", "child": "customer", "callCount": 1},
        ])
    );
    let (_, v) = server.get(&format!(
        "/jaeger/api/dependencies?endTs={end_ms}&lookback=3600000&service=mysql"
    ));
    assert_eq!(
        v["data"],
        json!([{"parent": "customer", "child": "mysql", "callCount": 1}])
    );
    // Defaults: now, and the last day.
    let (_, v) = server.get("/jaeger/api/dependencies");
    assert_eq!(v["data"].as_array().unwrap().len(), 2, "{v}");
    let (_, v) = server.get(&format!(
        "/jaeger/api/dependencies?endTs={}&lookback=1000",
        (base - 86_400_000 * MS) / MS
    ));
    assert_eq!(v["data"], json!([]));
    let msg = error(&server, "/jaeger/api/dependencies?endTs=soon", 400);
    assert!(msg.starts_with("unable to parse param 'endTs'"), "{msg}");
}

#[test]
fn the_jaeger_api_requires_the_token_the_rest_does() {
    let server = TestServer::start_with("jaeger-token", |c| c.token = Some("s3cret".into()));
    let url = server.api_url("/jaeger/api/services");
    let r = server.http.get(&url).call().unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let mut r = server
        .http
        .get(&url)
        .header("authorization", "Bearer s3cret")
        .call()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Json = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(v["data"], json!([]));
    assert_eq!(v["total"], 0);
    // No trace yet: Jaeger's empty answers.
    let mut r = server
        .http
        .get(&server.api_url("/jaeger/api/traces?service=none"))
        .header("authorization", "Bearer s3cret")
        .call()
        .unwrap();
    let v: Json = serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
    assert_eq!(v["data"], json!([]));
}
