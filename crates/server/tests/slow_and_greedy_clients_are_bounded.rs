//! A few clients that are slow or greedy never stop the server for the others: slow
//! senders do not starve ingest, connections are capped per listener (ingest keeps its
//! own share), idle and half-sent connections are closed, and the bytes of bodies being
//! received are bounded.

#[path = "serving/common.rs"]
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use causeway_model::codec::{jaeger, native, otlp, zipkin};
use causeway_model::{Span, SpanId, TraceId};
use causeway_testkit::recent_span;
use common::{partial, TestServer};

const PROTO: (&str, &str) = ("content-type", "application/x-protobuf");
const JSON: (&str, &str) = ("content-type", "application/json");

/// A client that sends a request's headers and the start of its body, then a byte now
/// and then.
fn slow_sender(addr: std::net::SocketAddr, body_len: usize) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap();
    write!(
        c,
        "POST /v1/traces HTTP/1.1\r\nhost: x\r\ncontent-type: application/x-protobuf\r\ncontent-length: {body_len}\r\n\r\n"
    )
    .unwrap();
    c.write_all(&[0x0a]).unwrap();
    c
}

/// The status line a raw connection is answered with, or why there is none.
fn status_line(c: &mut TcpStream, wait: Duration) -> String {
    c.set_read_timeout(Some(wait)).unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                answer.extend_from_slice(&buf[..n]);
                if answer.windows(2).any(|w| w == b"\r\n") {
                    break;
                }
            }
            Err(e) => return format!("no answer: {e}"),
        }
    }
    let text = String::from_utf8_lossy(&answer);
    text.lines().next().unwrap_or("closed").to_string()
}

/// True once the server has closed `c` (within `wait`).
fn closed_within(c: &mut TcpStream, wait: Duration) -> bool {
    c.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 1024];
    let started = Instant::now();
    while started.elapsed() < wait {
        match c.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
    false
}

fn metric(server: &TestServer, line_start: &str) -> u64 {
    let (_, text) = server.get("/metrics");
    let text = text.as_str().unwrap().to_string();
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no metric {line_start} in\n{text}"))
}

/// Sends one span by every ingest protocol; each must be acknowledged. Returns the trace
/// id the gRPC span was given.
fn every_protocol_is_acknowledged(server: &TestServer, trace: u128) -> String {
    for (path, headers, body) in [
        (
            "/v1/traces",
            vec![PROTO],
            otlp::encode_protobuf(&[recent_span(trace, 1, "op")]),
        ),
        (
            "/v1/traces",
            vec![JSON],
            otlp::encode_json(&[recent_span(trace + 1, 1, "op")]),
        ),
        (
            "/api/v2/spans",
            vec![JSON],
            zipkin::encode_json(&[recent_span(trace + 2, 1, "op")]),
        ),
        (
            "/v1/jaeger",
            vec![JSON],
            jaeger::encode_json(&[recent_span(trace + 3, 1, "op")]),
        ),
        (
            "/v1/native",
            vec![("content-type", causeway_server::NATIVE_CONTENT_TYPE)],
            native::encode_all(&[recent_span(trace + 4, 1, "op")]),
        ),
    ] {
        let (status, _, answer) = server.post(path, &headers, &body);
        assert_eq!(
            status,
            200 + u16::from(path == "/api/v2/spans") * 2,
            "{path}: {}",
            String::from_utf8_lossy(&answer)
        );
    }
    // OTLP/gRPC, through the OpenTelemetry SDK's exporter.
    let _rt = server.rt.enter();
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .with_endpoint(format!("http://{}", server.server().grpc_addr))
        .build()
        .unwrap();
    use opentelemetry::trace::{Tracer, TracerProvider as _};
    use opentelemetry_otlp::WithExportConfig;
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_simple_exporter(exporter)
        .build();
    let mut id = None;
    provider.tracer("t").in_span("grpc", |cx| {
        use opentelemetry::trace::TraceContextExt;
        id = Some(cx.span().span_context().trace_id().to_string());
    });
    provider.shutdown().unwrap();
    id.unwrap()
}

fn stored(server: &TestServer, trace: &str) {
    let (status, body) = server.get(&format!("/api/traces/{trace}"));
    assert_eq!(status, 200, "trace {trace}: {body}");
}

#[test]
fn slow_senders_do_not_starve_ingest() {
    let server = TestServer::start_with("slow-senders", |c| {
        c.limits.body_timeout = Duration::from_secs(3);
    });
    let addr = server.server().ingest_addr;
    // As many slow senders as there are in-flight places, each trickling a body.
    let mut slow: Vec<TcpStream> = (0..64).map(|_| slow_sender(addr, 4096)).collect();
    let trickle = std::thread::spawn({
        let mut writers: Vec<TcpStream> = slow.iter().map(|c| c.try_clone().unwrap()).collect();
        move || {
            for _ in 0..10 {
                std::thread::sleep(Duration::from_millis(200));
                for w in &mut writers {
                    let _ = w.write_all(&[0x0a]);
                }
            }
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    for round in 0..3 {
        let grpc = every_protocol_is_acknowledged(&server, 0x1000 + round * 16);
        stored(&server, &grpc);
    }
    trickle.join().unwrap();
    // The slow ones are answered 408 once the body timeout passes.
    for c in &mut slow {
        let line = status_line(c, Duration::from_secs(10));
        assert!(line.starts_with("HTTP/1.1 408"), "{line}");
    }
    assert!(
        metric(
            &server,
            "causeway_ingest_refused_requests_total{reason=\"body_timeout\"}"
        ) >= 64
    );
}

/// Warnings the server logged, for tests that look for one.
#[derive(Clone, Default)]
struct Logged(Arc<Mutex<Vec<String>>>);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Logged {
    fn on_event(&self, event: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Message<'a>(&'a mut String);
        impl tracing::field::Visit for Message<'_> {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!("{}={value:?} ", field.name()));
            }
        }
        let mut line = String::new();
        event.record(&mut Message(&mut line));
        self.0.lock().unwrap().push(line);
    }
}

#[test]
fn connections_past_a_listeners_cap_are_refused_logged_and_counted_and_ingest_keeps_its_share() {
    use tracing_subscriber::layer::SubscriberExt;
    let logged = Logged::default();
    // Global: the server logs from its runtime's threads. Other tests of this file log
    // into it too, harmlessly.
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(logged.clone()))
        .unwrap();
    let server = TestServer::start_with("connection-cap", |c| {
        c.limits.connections.max_query = 16;
        c.limits.connections.max_ingest = 16;
    });
    let query = server.server().http_addr;
    let idle: Vec<TcpStream> = (0..16)
        .map(|_| TcpStream::connect(query).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut over = TcpStream::connect(query).unwrap();
    let line = status_line(&mut over, Duration::from_secs(5));
    assert!(line.starts_with("HTTP/1.1 503"), "{line}");
    // The query API is full; ingest, on its own share, is not.
    let grpc = every_protocol_is_acknowledged(&server, 0x2000);
    drop(idle);
    // Once the idle ones leave, the query API answers again. Until the server has seen
    // them go, a request is refused too, and counted.
    let mut answered = false;
    let mut refused = 1;
    for _ in 0..50 {
        let mut r = server.http.get(&server.api_url("/metrics")).call().unwrap();
        if r.status() == 503 {
            refused += 1;
        }
        if r.status() == 200 {
            let text = r.body_mut().read_to_string().unwrap();
            let counted =
                format!("causeway_connections_refused_total{{listener=\"query\"}} {refused}");
            assert!(text.contains(&counted), "{counted} in {text}");
            assert!(
                text.contains("causeway_connections_max{listener=\"query\"} 16"),
                "{text}"
            );
            answered = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(answered, "the query API never answered again");
    stored(&server, &grpc);
    let logged = logged.0.lock().unwrap();
    assert!(
        logged
            .iter()
            .any(|l| l.contains("connection cap") && l.contains("query")),
        "{logged:?}"
    );
}

#[test]
fn idle_and_half_sent_connections_are_closed() {
    let server = TestServer::start_with("idle", |c| {
        c.limits.connections.idle_timeout = Duration::from_secs(1);
        c.limits.connections.header_timeout = Duration::from_secs(1);
    });
    for addr in [
        server.server().http_addr,
        server.server().ingest_addr,
        server.server().grpc_addr,
    ] {
        // Connected and silent.
        let mut silent = TcpStream::connect(addr).unwrap();
        assert!(
            closed_within(&mut silent, Duration::from_secs(10)),
            "{addr}"
        );
    }
    // Headers a byte at a time, never finished: closed at the header timeout although
    // bytes keep arriving.
    let mut trickle = TcpStream::connect(server.server().http_addr).unwrap();
    trickle.write_all(b"GET /api/status HTTP/1.1\r\n").unwrap();
    let started = Instant::now();
    let mut closed = false;
    while started.elapsed() < Duration::from_secs(10) {
        if trickle.write_all(b"x").is_err() {
            closed = true;
            break;
        }
        if closed_within(&mut trickle, Duration::from_millis(300)) {
            closed = true;
            break;
        }
    }
    assert!(
        closed,
        "a connection trickling its headers was never closed"
    );
    // A kept-alive connection that answered a request is closed once idle too.
    let mut kept = TcpStream::connect(server.server().http_addr).unwrap();
    kept.write_all(b"GET /api/status HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    assert!(status_line(&mut kept, Duration::from_secs(5)).starts_with("HTTP/1.1 200"));
    assert!(closed_within(&mut kept, Duration::from_secs(10)));
}

#[test]
fn bodies_being_received_are_bounded_in_bytes() {
    let server = TestServer::start_with("receive-budget", |c| {
        c.limits.max_body_bytes = 1 << 20;
        c.limits.max_receiving_bytes = 1 << 20;
        c.limits.body_timeout = Duration::from_secs(2);
    });
    let addr = server.server().ingest_addr;
    // One sender holds most of the budget with a body it never finishes.
    let mut greedy = slow_sender(addr, 1 << 20);
    greedy.write_all(&vec![0x0a; 900 << 10]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let body = otlp::encode_protobuf(&[recent_span(0x3000, 1, "op")]);
    let mut big = recent_span(0x3001, 1, "op");
    big.attributes
        .push(causeway_model::KeyValue::new("blob", "y".repeat(60 << 10)));
    let big = otlp::encode_protobuf(&[big.clone(), big.clone(), big]);
    let (status, _, answer) = server.post("/v1/traces", &[PROTO], &big);
    assert_eq!(status, 429, "{}", String::from_utf8_lossy(&answer));
    assert!(
        String::from_utf8_lossy(&answer).contains("--max-receiving-bytes"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
    // A small body still fits.
    assert_eq!(server.post("/v1/traces", &[PROTO], &body).0, 200);
    // Once the greedy one times out, its bytes are given back.
    let line = status_line(&mut greedy, Duration::from_secs(10));
    assert!(line.starts_with("HTTP/1.1 408"), "{line}");
    assert_eq!(server.post("/v1/traces", &[PROTO], &big).0, 200);
    assert!(
        metric(
            &server,
            "causeway_ingest_refused_requests_total{reason=\"receive_budget\"}"
        ) >= 1
    );
}

#[test]
fn a_search_cannot_ask_for_more_than_the_servers_most() {
    let server = TestServer::start_with("search-limit", |c| {
        c.limits.max_search_limit = 50;
        c.limits.max_answer_spans = 30;
    });
    let spans: Vec<Span> = (0..60u128)
        .map(|i| {
            let mut s = recent_span(0x4000 + i, 1, "op");
            s.start -= i as u64 * 1_000_000;
            s.end = s.start + 1_000;
            s
        })
        .collect();
    assert_eq!(
        server
            .post("/v1/traces", &[PROTO], &otlp::encode_protobuf(&spans))
            .0,
        200
    );
    let (status, body) = server.get("/api/search?limit=18446744073709551615");
    assert_eq!(status, 400, "{body}");
    let (status, body) = server.get("/api/search?limit=51");
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("--max-search-limit"),
        "{body}"
    );
    let (status, body) = server.get("/api/search?limit=50");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["traces"].as_array().unwrap().len(), 50);
    // Jaeger's API cuts the limit to the most (50 of the 60 traces), and leaves out
    // whole traces past the most spans an answer holds, saying so.
    let (status, body) = server.get("/jaeger/api/traces?service=svc&limit=100000");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"].as_array().unwrap().len(), 30);
    let note = body["errors"][0]["msg"].as_str().unwrap();
    assert!(note.contains("20 matching traces left out"), "{note}");
    assert!(note.contains("--max-answer-spans"), "{note}");
}

#[test]
fn a_search_reads_its_lookback_and_refuses_a_bad_one() {
    let server = TestServer::start("search-lookback");
    let recent = recent_span(0x5001, 1, "op");
    let mut old = recent_span(0x5002, 1, "op");
    old.start -= 3 * 3_600_000_000_000;
    old.end = old.start + 1_000;
    assert_eq!(
        server
            .post(
                "/v1/traces",
                &[PROTO],
                &otlp::encode_protobuf(&[recent, old])
            )
            .0,
        200
    );
    let (status, body) = server.get("/api/search?lookback=1h");
    assert_eq!(status, 200, "{body}");
    let found: Vec<&str> = body["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["traceId"].as_str().unwrap())
        .collect();
    assert_eq!(found, [TraceId::new(0x5001).unwrap().to_string()]);
    let (status, body) = server.get("/api/search?lookback=abc");
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("lookback"),
        "{body}"
    );
}

#[test]
fn exports_are_streamed_whole_and_a_reader_that_stops_gives_back_the_scan_place() {
    let server = TestServer::start_with("export-stream", |c| {
        c.limits.max_scans = 1;
        c.limits.query_timeout = Duration::from_secs(3);
    });
    // 20 000 spans of 2 000 traces, each with a 1 KB attribute: tens of MB as JSON.
    for batch in 0..10u128 {
        let spans: Vec<Span> = (0..2_000u128)
            .map(|i| {
                let n = batch * 2_000 + i;
                let mut s = recent_span(0x10_0000 + n / 10, 1, "op");
                s.span_id = SpanId::new(n as u64 + 1).unwrap();
                s.attributes
                    .push(causeway_model::KeyValue::new("blob", "z".repeat(1000)));
                s
            })
            .collect();
        let (status, _, _) = server.post("/v1/traces", &[PROTO], &otlp::encode_protobuf(&spans));
        assert_eq!(status, 200);
    }
    for (format, decode) in [
        (
            "native",
            (|b: &[u8]| native::decode_stream(b).spans.len()) as fn(&[u8]) -> usize,
        ),
        ("otlp-protobuf", |b| {
            otlp::decode_protobuf(b).unwrap().spans.len()
        }),
        ("otlp-json", |b| otlp::decode_json(b).unwrap().spans.len()),
        ("zipkin", |b| zipkin::decode_json(b).unwrap().spans.len()),
        ("jaeger", |b| jaeger::decode_json(b).unwrap().spans.len()),
    ] {
        let mut r = server
            .http
            .get(&server.api_url(&format!("/api/export?format={format}")))
            .call()
            .unwrap();
        assert_eq!(r.status(), 200, "{format}");
        // Streamed: no length known up front.
        assert!(r.headers().get("content-length").is_none(), "{format}");
        let body = r
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_vec()
            .unwrap();
        assert_eq!(decode(&body), 20_000, "{format}");
    }
    // A client that reads the head and then nothing holds the only scan place until
    // the query time limit at most.
    let mut stalled = TcpStream::connect(server.server().http_addr).unwrap();
    stalled
        .write_all(b"GET /api/export?format=jaeger HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    assert!(status_line(&mut stalled, Duration::from_secs(10)).starts_with("HTTP/1.1 200"));
    let started = Instant::now();
    let mut answered = None;
    while started.elapsed() < Duration::from_secs(20) {
        let (status, _) = server.get("/api/dependencies");
        if status == 200 {
            answered = Some(started.elapsed());
            break;
        }
        // 503: no place came free in time; 408: one came free so late that the
        // scan itself ran out of the request's time.
        assert!(
            status == 503 || status == 408,
            "waiting for the scan place: {status}"
        );
    }
    assert!(answered.is_some(), "the stalled export kept the scan place");
    drop(stalled);
}

#[test]
fn valid_but_enormous_spans_are_cut_and_the_catalog_stays_bounded() {
    let server = TestServer::start_with("enormous", |c| {
        c.store.max_catalog_bytes = 4096;
    });
    // A 15 MB name, half a million attributes, 100 000 events, a 10 KB key, one span
    // ending at u64::MAX.
    let mut named = recent_span(0x6001, 1, "op");
    named.name = "n".repeat(15 << 20);
    let mut attributed = recent_span(0x6002, 1, "op");
    attributed.attributes = (0..500_000)
        .map(|i| causeway_model::KeyValue::new(format!("k{i}"), i as i64))
        .collect();
    let mut eventful = recent_span(0x6003, 1, "op");
    eventful.events = (0..100_000)
        .map(|i| causeway_model::Event {
            time: eventful.start,
            name: format!("e{i}"),
            attributes: Vec::new(),
        })
        .collect();
    let mut endless = recent_span(0x6004, 1, "op");
    endless.end = u64::MAX;
    let mut keyed = recent_span(0x6005, 1, "op");
    keyed
        .attributes
        .push(causeway_model::KeyValue::new("k".repeat(10_000), "v"));
    for (s, want) in [
        (named, "name cut from 15728640 to 1024 bytes"),
        (
            attributed,
            "499000 attributes dropped past the limit of 1000",
        ),
        (eventful, "99000 events dropped past the limit of 1000"),
        (keyed, "cut from 10000 to 256 bytes"),
    ] {
        let (status, _, body) = server.post("/v1/traces", &[PROTO], &otlp::encode_protobuf(&[s]));
        assert_eq!(status, 200);
        let (rejected, message) = partial(&body);
        assert_eq!(rejected, 0, "{message}");
        assert!(message.contains(want), "{message}");
    }
    let (status, _, body) = server.post("/v1/traces", &[PROTO], &otlp::encode_protobuf(&[endless]));
    assert_eq!(status, 200);
    let (rejected, message) = partial(&body);
    assert_eq!(rejected, 1);
    assert!(
        message.contains("more than a day in the future"),
        "{message}"
    );
    // What is stored is what was kept.
    let (_, t) = server.get(&format!("/api/traces/{}", TraceId::new(0x6002).unwrap()));
    assert_eq!(t["spans"][0]["attributes"].as_array().unwrap().len(), 1000);
    assert_eq!(t["spans"][0]["dropped_attributes"], 499_000);
    let (_, t) = server.get(&format!("/api/traces/{}", TraceId::new(0x6001).unwrap()));
    assert_eq!(t["spans"][0]["name"].as_str().unwrap().len(), 1024);
    let (status, _) = server.get(&format!("/api/traces/{}", TraceId::new(0x6004).unwrap()));
    assert_eq!(status, 404);
    // Names past the catalog's bytes are stored, searchable, and not listed.
    let many: Vec<Span> = (0..200u128)
        .map(|i| {
            let mut s = recent_span(0x7000 + i, 1, "op");
            s.name = format!("operation-with-a-long-name-{i:04}");
            s
        })
        .collect();
    assert_eq!(
        server
            .post("/v1/traces", &[PROTO], &otlp::encode_protobuf(&many))
            .0,
        200
    );
    let (_, ops) = server.get("/api/services/svc/operations");
    let listed = ops["operations"].as_array().unwrap().len();
    assert!((1..200).contains(&listed), "{listed} operations listed");
    let (status, found) =
        server.get("/api/search?service=svc&operation=operation-with-a-long-name-0199");
    assert_eq!(status, 200);
    assert_eq!(found["traces"].as_array().unwrap().len(), 1, "{found}");
    assert!(metric(&server, "causeway_store_catalog_refused_spans_total") > 0);
}
