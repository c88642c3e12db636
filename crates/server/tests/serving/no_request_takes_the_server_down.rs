//! One request never takes the server down nor holds it up: input nested past any honest
//! file is refused, in-flight limits hold while bodies arrive, scans end at their time
//! limit, and every error is counted and worded once.

use crate::common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use causeway_model::codec::otlp;
use causeway_model::TraceId;
use causeway_testkit::recent_span;
use common::TestServer;

fn post_api(server: &TestServer, path: &str, body: &[u8]) -> (u16, String) {
    let mut r = server
        .http
        .post(&server.api_url(path))
        .header("content-type", "application/json")
        .send(body)
        .unwrap();
    let status = r.status().as_u16();
    (status, r.body_mut().read_to_string().unwrap())
}

#[test]
fn a_200_000_deep_expectation_is_refused_and_the_server_keeps_serving() {
    let server = TestServer::start("deep-expect");
    let text = format!("assert({}1 > 0);", "-".repeat(200_000));
    let body = serde_json::json!({ "text": text }).to_string();
    let (status, answer) = post_api(&server, "/api/expect/check", body.as_bytes());
    assert_eq!(status, 400, "{answer}");
    assert!(answer.contains("request:1:108"), "{answer}");
    assert!(answer.contains("nested more than 100 deep"), "{answer}");
    // The same for generate's and check's neighbours: the server is still up.
    assert_eq!(server.get("/api/status").0, 200);
    let (status, _) = post_api(
        &server,
        "/api/expect/check",
        br#"{"text": "validator V { thread t(*, 1) { task(\"x\"); } }"}"#,
    );
    assert_eq!(status, 200);
}

#[test]
fn a_body_still_arriving_holds_no_inflight_place() {
    let server = TestServer::start_with("inflight", |c| c.limits.max_inflight = 1);
    let body = otlp::encode_protobuf(&[recent_span(0x51, 1, "slow")]);
    // A client that sends its headers and half its body, then stalls.
    let mut slow = TcpStream::connect(server.server().ingest_addr).unwrap();
    write!(
        slow,
        "POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    slow.write_all(&body[..body.len() / 2]).unwrap();
    slow.flush().unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // The only in-flight place is taken once a body is whole: a complete request is
    // stored while the stalled one waits.
    for i in 0..5 {
        let (status, _, answer) = server.post(
            "/v1/traces",
            &[("content-type", "application/x-protobuf")],
            &otlp::encode_protobuf(&[recent_span(0x52 + i, 1, "fast")]),
        );
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
    }
    // The stalled request completes once its body does.
    slow.write_all(&body[body.len() / 2..]).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut answer = [0u8; 12];
    slow.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"HTTP/1.1 200");
    let (status, body) = server.get(&format!("/api/traces/{}", TraceId::new(0x51).unwrap()));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_span_named_like_a_cut_message_is_still_counted_as_rejected() {
    let server = TestServer::start("rejected-count");
    // Rejected (start 0), with a name that reads like an attribute-cut note.
    let mut bad = recent_span(0x61, 1, "x cut from y");
    bad.start = 0;
    let mut long = recent_span(0x61, 2, "fine");
    long.attributes
        .push(causeway_model::KeyValue::new("blob", "y".repeat(100 << 10)));
    let (status, _, body) = server.post(
        "/v1/traces",
        &[("content-type", "application/json")],
        &otlp::encode_json(&[bad, long]),
    );
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["partialSuccess"]["rejectedSpans"], 1, "{v}");
    let message = v["partialSuccess"]["errorMessage"].as_str().unwrap();
    assert!(message.contains("start time is 0"), "{message}");
    assert!(message.contains("attribute \"blob\" cut from"), "{message}");
    let (_, metrics) = server.get("/metrics");
    let metrics = metrics.as_str().unwrap().to_string();
    assert!(
        metrics.contains("causeway_ingest_rejected_spans_total{protocol=\"otlp_http\"} 1"),
        "{metrics}"
    );
}

#[test]
fn json_errors_state_their_position_once() {
    let server = TestServer::start("json-position");
    let json = [("content-type", "application/json")];
    for (path, body) in [
        ("/v1/traces", &b"{\n  \"resourceSpans\": [}"[..]),
        ("/api/v2/spans", &b"[\n  {\"traceId\": }"[..]),
    ] {
        let (status, _, answer) = server.post(path, &json, body);
        assert_eq!(status, 400);
        let answer = String::from_utf8_lossy(&answer);
        assert_eq!(
            answer.matches("line 2 column").count(),
            1,
            "{path}: {answer}"
        );
        assert_eq!(answer.matches(" at line").count(), 1, "{path}: {answer}");
    }
    for path in ["/api/expect/check", "/api/sql"] {
        let (status, answer) = post_api(&server, path, b"{\n  \"text\": }");
        assert_eq!(status, 400);
        assert_eq!(
            answer.matches("line 2 column").count(),
            1,
            "{path}: {answer}"
        );
    }
}

#[test]
fn an_analysis_or_a_search_past_the_query_time_limit_is_answered_408() {
    let server = TestServer::start_with("query-timeout", |c| {
        c.limits.query_timeout = Duration::ZERO;
    });
    let (status, _, _) = server.post(
        "/v1/traces",
        &[("content-type", "application/x-protobuf")],
        &otlp::encode_protobuf(&[recent_span(0x71, 1, "a"), recent_span(0x72, 1, "b")]),
    );
    assert_eq!(status, 200);
    for path in [
        "/api/dependencies",
        "/api/patterns",
        "/api/export",
        "/api/search?service=svc",
        "/api/search?order=-duration",
        "/jaeger/api/traces?service=svc",
    ] {
        let (status, body) = server.get(path);
        assert_eq!(status, 408, "{path}: {body}");
        let message = body["error"]
            .as_str()
            .or(body["errors"][0]["msg"].as_str())
            .unwrap_or_default();
        assert!(message.contains("query time limit"), "{path}: {message}");
    }
    let (status, answer) = post_api(
        &server,
        "/api/expect/check",
        br#"{"text": "validator V { thread t(*, 1) { task(\"a\"); } }"}"#,
    );
    assert_eq!(status, 408, "{answer}");
    // Requests that scan nothing are not limited.
    assert_eq!(server.get("/api/services").0, 200);
    let (status, _) = server.get(&format!("/api/traces/{}", TraceId::new(0x71).unwrap()));
    assert_eq!(status, 200);
}

#[test]
fn errors_quote_little_of_the_input_and_are_json_everywhere() {
    let server = TestServer::start("short-errors");
    // A 1.5 MB expectations file on one line, wrong near its end.
    let text = format!(
        "validator V {{ {} ??? }}",
        "thread t(*, 1) { task(\"x\"); } ".repeat(50_000)
    );
    let body = serde_json::json!({ "text": text }).to_string();
    let (status, answer) = post_api(&server, "/api/expect/check", body.as_bytes());
    assert_eq!(status, 400, "{}", &answer[..answer.len().min(500)]);
    assert!(answer.len() < 2048, "a {}-byte error", answer.len());
    assert!(answer.contains("request:1:"), "{answer}");
    // The framework's own refusals (a body of the wrong type, an unknown path, a method
    // not allowed) are JSON too.
    let mut r = server
        .http
        .post(&server.api_url("/api/pivot/queries"))
        .header("content-type", "text/plain")
        .send(&b"From r In Read Select COUNT"[..])
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    let v: serde_json::Value =
        serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap();
    assert!(v["error"].as_str().unwrap().contains("Content-Type"), "{v}");
    let (status, v) = server.get("/api/no-such-thing");
    assert_eq!(status, 404);
    assert_eq!(v["error"], "no endpoint GET /api/no-such-thing");
    let (status, _, answer) = server.post("/v1/nothing", &[], b"x");
    assert_eq!(status, 404);
    let v: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(v["error"], "no endpoint POST /v1/nothing");
}
