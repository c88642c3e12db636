//! Bad input gets a clear answer naming the problem, never a panic, and never disturbs
//! other data.

use crate::common;

use std::io::Write;

use causeway_model::codec::{native, otlp};
use causeway_model::{KeyValue, Span, TraceId, Value};
use causeway_testkit::{now_ns, recent_span};
use common::{partial, TestServer};

const PROTO: (&str, &str) = ("content-type", "application/x-protobuf");
const JSON: (&str, &str) = ("content-type", "application/json");

fn error_of(body: &[u8]) -> String {
    let v: serde_json::Value = serde_json::from_slice(body).unwrap();
    v["error"].as_str().unwrap().to_string()
}

fn stored(server: &TestServer, trace: u128) -> usize {
    let (status, body) = server.get(&format!("/api/traces/{}", TraceId::new(trace).unwrap()));
    if status == 404 {
        return 0;
    }
    body["spans"].as_array().unwrap().len()
}

#[test]
fn malformed_payloads_are_refused_with_the_reason_and_nothing_else_is_lost() {
    let server = TestServer::start("bad-input");
    let good = otlp::encode_protobuf(&[recent_span(1, 1, "op")]);
    assert_eq!(server.post("/v1/traces", &[PROTO], &good).0, 200);

    // Truncated protobuf.
    let big = otlp::encode_protobuf(&[recent_span(2, 1, "op"), recent_span(2, 2, "op")]);
    let (status, _, body) = server.post("/v1/traces", &[PROTO], &big[..big.len() - 7]);
    assert_eq!(status, 400);
    assert!(
        error_of(&body).contains("invalid OTLP protobuf"),
        "{}",
        error_of(&body)
    );

    // Wrong content type.
    let (status, _, body) = server.post("/v1/traces", &[("content-type", "text/plain")], &good);
    assert_eq!(status, 415);
    assert!(error_of(&body).contains("text/plain"));
    let (status, _, _) = server.post(
        "/api/v2/spans",
        &[("content-type", "application/xml")],
        b"<x/>",
    );
    assert_eq!(status, 415);
    let (status, _, _) = server.post("/v1/native", &[JSON], b"{}");
    assert_eq!(status, 415);

    // Invalid JSON, with line and column.
    let (status, _, body) = server.post("/v1/traces", &[JSON], b"{\"resourceSpans\": [\n  {,}]}");
    assert_eq!(status, 400);
    assert!(
        error_of(&body).contains("line 2 column"),
        "{}",
        error_of(&body)
    );
    let (status, _, body) = server.post("/api/v2/spans", &[JSON], b"[{\"traceId\": ");
    assert_eq!(status, 400);
    assert!(!error_of(&body).is_empty());

    // Garbage as a native batch.
    let (status, _, body) = server.post(
        "/v1/native",
        &[("content-type", causeway_server::NATIVE_CONTENT_TYPE)],
        b"definitely not records",
    );
    assert_eq!(status, 400);
    assert!(
        error_of(&body).contains("invalid native batch"),
        "{}",
        error_of(&body)
    );

    // Unsupported content encoding.
    let (status, _, _) = server.post("/v1/traces", &[PROTO, ("content-encoding", "br")], &good);
    assert_eq!(status, 415);

    // The first batch is untouched, and a later good batch is taken.
    assert_eq!(stored(&server, 1), 1);
    assert_eq!(stored(&server, 2), 0);
    assert_eq!(
        server
            .post(
                "/v1/traces",
                &[PROTO],
                &otlp::encode_protobuf(&[recent_span(3, 1, "op")])
            )
            .0,
        200
    );
    assert_eq!(stored(&server, 3), 1);
    let metrics = server
        .http
        .get(&server.api_url("/metrics"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(
        metrics.contains("causeway_ingest_refused_requests_total{reason=\"malformed\"} 4"),
        "{metrics}"
    );
}

#[test]
fn bad_spans_are_rejected_one_by_one_with_partial_success() {
    let server = TestServer::start("bad-spans");
    // Ids of the wrong length, in OTLP/JSON, beside a good span.
    let json = format!(
        r#"{{"resourceSpans":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"svc"}}}}]}},
        "scopeSpans":[{{"spans":[
          {{"traceId":"0102","spanId":"0000000000000001","name":"short id","startTimeUnixNano":"{t}","endTimeUnixNano":"{t}"}},
          {{"traceId":"0000000000000000000000000000000a","spanId":"0000000000000001","name":"good","startTimeUnixNano":"{t}","endTimeUnixNano":"{t}"}}
        ]}}]}}]}}"#,
        t = now_ns()
    );
    let (status, _, body) = server.post("/v1/traces", &[JSON], json.as_bytes());
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["partialSuccess"]["rejectedSpans"], 1, "{v}");
    let msg = v["partialSuccess"]["errorMessage"].as_str().unwrap();
    assert!(
        msg.contains("resourceSpans[0].scopeSpans[0].spans[0].traceId"),
        "{msg}"
    );
    assert_eq!(stored(&server, 0xa), 1);

    // Absurd timestamps: zero, end before start, far future.
    let mut zero = recent_span(0x10, 1, "op");
    zero.start = 0;
    let mut backwards = recent_span(0x10, 2, "op");
    backwards.end = backwards.start - 5;
    let mut future = recent_span(0x10, 3, "op");
    future.start = now_ns() + 10 * 86_400_000_000_000;
    future.end = future.start + 1;
    let fine = recent_span(0x10, 4, "op");
    let (status, _, body) = server.post(
        "/v1/traces",
        &[PROTO],
        &otlp::encode_protobuf(&[zero, backwards, future, fine]),
    );
    assert_eq!(status, 200);
    let (rejected, msg) = partial(&body);
    assert_eq!(rejected, 3, "{msg}");
    assert!(msg.contains("start time is 0"), "{msg}");
    assert!(msg.contains("before it starts"), "{msg}");
    assert!(msg.contains("in the future"), "{msg}");
    assert_eq!(stored(&server, 0x10), 1);
}

#[test]
fn huge_values_deep_nesting_and_oversized_bodies() {
    let server = TestServer::start_with("huge", |c| c.limits.max_body_bytes = 12 << 20);
    // A 10 MB attribute value is cut to the limit, reported, and the span kept.
    let mut s = recent_span(0x20, 1, "op");
    s.attributes
        .push(KeyValue::new("blob", "x".repeat(10 << 20)));
    let (status, _, body) = server.post("/v1/traces", &[PROTO], &otlp::encode_protobuf(&[s]));
    assert_eq!(status, 200);
    let (rejected, msg) = partial(&body);
    assert_eq!(rejected, 0);
    assert!(
        msg.contains("attribute \"blob\" cut from 10485760 to 65536 bytes"),
        "{msg}"
    );
    let (_, t) = server.get(&format!("/api/traces/{}", TraceId::new(0x20).unwrap()));
    assert_eq!(
        t["spans"][0]["attributes"][0]["value"]
            .as_str()
            .unwrap()
            .len(),
        65536
    );

    // Arrays nested deeper than the store keeps come back as text.
    let nested = |levels| {
        let mut v = Value::I64(1);
        for _ in 0..levels {
            v = Value::Array(vec![v]);
        }
        let mut s = recent_span(0x21, 1, "op");
        s.attributes.push(KeyValue::new("deep", v));
        otlp::encode_protobuf(&[s])
    };
    let (status, _, _) = server.post("/v1/traces", &[PROTO], &nested(40));
    assert_eq!(status, 200);
    // Nesting past protobuf's recursion limit is a malformed body, said so.
    let (status, _, body) = server.post("/v1/traces", &[PROTO], &nested(500));
    assert_eq!(status, 400);
    assert!(error_of(&body).contains("recursion"), "{}", error_of(&body));
    let causeway_server::Backend::Embedded(store) = &server.server().backend else {
        panic!("the test server runs the embedded store");
    };
    store.flush().unwrap();
    let (status, t) = server.get(&format!("/api/traces/{}", TraceId::new(0x21).unwrap()));
    assert_eq!(status, 200, "{t}");
    assert!(t["spans"][0]["attributes"][0]["value"]
        .to_string()
        .contains("[[[1]]]"));

    // Over the body limit: 413, plain or as a gzip bomb.
    // (Sent by hand: the server answers from Content-Length without reading the body.)
    let mut tcp = std::net::TcpStream::connect(server.server().ingest_addr).unwrap();
    write!(
        tcp,
        "POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\r\n",
        13 << 20
    )
    .unwrap();
    let mut answer = vec![0u8; 4096];
    let n = std::io::Read::read(&mut tcp, &mut answer).unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("over the 12582912-byte limit"), "{answer}");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&vec![0u8; 64 << 20]).unwrap();
    let bomb = gz.finish().unwrap();
    let (status, _, _) = server.post("/v1/traces", &[PROTO, ("content-encoding", "gzip")], &bomb);
    assert_eq!(status, 413);
    // Good gzip is read.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&otlp::encode_protobuf(&[recent_span(0x22, 1, "op")]))
        .unwrap();
    let (status, _, _) = server.post(
        "/v1/traces",
        &[PROTO, ("content-encoding", "gzip")],
        &gz.finish().unwrap(),
    );
    assert_eq!(status, 200);
    assert_eq!(stored(&server, 0x22), 1);
}

#[test]
fn query_api_errors_name_the_problem() {
    let server = TestServer::start("api-errors");
    let (status, body) = server.get("/api/traces/xyz");
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().contains("\"xyz\""),
        "{body}"
    );
    let (status, body) = server.get("/api/traces/0000000000000000000000000000abcd");
    assert_eq!(status, 404);
    assert!(body["error"].as_str().unwrap().contains("not found"));
    let (status, body) = server.get("/api/search?minDuration=fast");
    assert_eq!(status, 400);
    assert!(
        body["error"].as_str().unwrap().contains("minDuration"),
        "{body}"
    );
    let (status, body) = server.get("/api/search?source=guessed");
    assert_eq!(status, 400);
    let error = body["error"].as_str().unwrap();
    assert!(
        error.contains("source") && error.contains("inferred"),
        "{body}"
    );
    let (status, body) = server.get("/api/search?start=tomorrow");
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("start"), "{body}");
    let (status, _) = server.get("/api/services/nope/operations");
    assert_eq!(status, 404);
    let mut r = server
        .http
        .post(&server.api_url("/api/sql"))
        .header("content-type", "application/json")
        .send(b"{\"query\": \"DELETE FROM spans\"}".as_slice())
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.body_mut().read_to_string().unwrap().contains("sql"));
    let r = server
        .http
        .post(&server.api_url("/api/sql"))
        .header("content-type", "application/json")
        .send(b"{\"qu".as_slice())
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
}

#[test]
fn a_token_is_required_on_every_listener_when_set() {
    let server = TestServer::start_with("token", |c| c.token = Some("s3cret".into()));
    let body = native::encode_all([&recent_span(0x30, 1, "op")]);
    let ct = ("content-type", causeway_server::NATIVE_CONTENT_TYPE);
    assert_eq!(server.post("/v1/native", &[ct], &body).0, 401);
    assert_eq!(
        server
            .post(
                "/v1/native",
                &[ct, ("authorization", "Bearer wrong")],
                &body
            )
            .0,
        401
    );
    assert_eq!(
        server
            .post(
                "/v1/native",
                &[ct, ("authorization", "Bearer s3cret")],
                &body
            )
            .0,
        200
    );
    assert_eq!(server.get("/api/services").0, 401);
    let r = server
        .http
        .get(&server.api_url("/api/services"))
        .header("authorization", "Bearer s3cret")
        .call()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
}

#[test]
fn a_public_address_without_a_token_is_refused() {
    let config = causeway_server::ServerConfig {
        ingest_addr: "0.0.0.0:0".parse().unwrap(),
        ..Default::default()
    };
    let e = config.check().unwrap_err().to_string();
    assert!(e.contains("0.0.0.0:0") && e.contains("token"), "{e}");
    // A blank token is none.
    for blank in ["", " ", "\t\n"] {
        let config = causeway_server::ServerConfig {
            token: Some(blank.into()),
            ..config.clone()
        };
        assert!(config.check().is_err(), "{blank:?}");
    }
    let config = causeway_server::ServerConfig {
        token: Some("t".into()),
        ..config
    };
    assert!(config.check().is_ok());
}

#[test]
fn shed_load_is_answered_503_with_retry_after() {
    let server = TestServer::start_with("shed", |c| {
        c.store.max_pending_heads = 0;
    });
    // A large batch is refused while heads wait (here: always)...
    let large: Vec<Span> = (1..=causeway_store::SMALL_BATCH_SPANS as u64 + 1)
        .map(|i| recent_span(0x40, i, "op"))
        .collect();
    let body = native::encode_all(&large);
    let mut r = server
        .http
        .post(&server.ingest_url("/v1/native"))
        .header("content-type", causeway_server::NATIVE_CONTENT_TYPE)
        .send(&body[..])
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(r.headers().get("retry-after").unwrap(), "1");
    assert!(r.body_mut().read_to_string().unwrap().contains("retry"));
    // ...while a small one may still fill one head more: a flood of large batches is
    // shed before the clients that send as most do.
    let (status, _, _) = server.post(
        "/v1/native",
        &[("content-type", causeway_server::NATIVE_CONTENT_TYPE)],
        &native::encode_all(&[recent_span(0x41, 1, "op")]),
    );
    assert_eq!(status, 200);
}

#[test]
fn jaeger_json_is_taken_at_v1_jaeger_with_bad_spans_named_by_path() {
    let server = TestServer::start("jaeger-ingest");
    let t = now_ns() / 1000 - 1_000_000;
    let doc = format!(
        r#"{{"data": [{{"traceID": "30", "spans": [
            {{"spanID": "1", "operationName": "good", "startTime": {t}, "duration": 10, "processID": "p1"}},
            {{"spanID": "2", "operationName": "bad", "startTime": {t}, "duration": 10, "processID": "p1",
              "tags": [{{"key": "n", "type": "int64", "value": "ten"}}]}}
        ], "processes": {{"p1": {{"serviceName": "svc"}}}}}}], "total": 0, "limit": 0, "offset": 0, "errors": null}}"#
    );
    let (status, ct, body) = server.post("/v1/jaeger", &[JSON], doc.as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(ct.starts_with("application/json"));
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["accepted"], 1, "{v}");
    assert_eq!(v["rejected"], 1, "{v}");
    let msg = v["errors"][0].as_str().unwrap();
    assert!(msg.ends_with("at data[0].spans[1].tags[0].value"), "{msg}");
    assert_eq!(stored(&server, 0x30), 1);

    // Gzipped is taken too.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(doc.replace("\"30\"", "\"31\"").as_bytes())
        .unwrap();
    let gz = gz.finish().unwrap();
    let (status, _, _) = server.post("/v1/jaeger", &[JSON, ("content-encoding", "gzip")], &gz);
    assert_eq!(status, 200);
    assert_eq!(stored(&server, 0x31), 1);

    // Malformed JSON: 400 with where; another content type: 415.
    let (status, _, body) = server.post("/v1/jaeger", &[JSON], b"{\"data\": [\n  {\"spans\": 5}]}");
    assert_eq!(status, 400);
    let e = error_of(&body);
    assert!(
        e.contains("invalid Jaeger JSON") && e.contains("line 2 column"),
        "{e}"
    );
    let (status, _, body) = server.post(
        "/v1/jaeger",
        &[("content-type", "application/x-thrift")],
        b"\x0c\x00",
    );
    assert_eq!(status, 415);
    assert!(error_of(&body).contains("/v1/jaeger"));

    let metrics = server
        .http
        .get(&server.api_url("/metrics"))
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap();
    assert!(
        metrics.contains("causeway_ingest_spans_total{protocol=\"jaeger\"} 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("causeway_ingest_rejected_spans_total{protocol=\"jaeger\"} 2"),
        "{metrics}"
    );
}
