//! Capture logs sent in pieces (`POST /v1/captures`, as `causeway agent --captures` sends
//! them) are inferred by the server's passes; a gap, bad parameters, bytes that are not
//! a capture log and a full window each get a clear answer, and lose nothing else.

use crate::common;

use std::time::{Duration, Instant};

use causeway_blackbox::format::{Call, Direction, Record, MAGIC};
use causeway_testkit::capture_logs::{listen, log, process, stream_data, tcp_connection};
use causeway_testkit::now_ns;
use common::TestServer;

const S: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;
const OCTETS: (&str, &str) = ("content-type", "application/octet-stream");

/// A client's records and its server's, at `t0` (ns): their processes, the server's
/// listen and their one connection.
struct ClientAndServer {
    client: Vec<Record<'static>>,
    server: Vec<Record<'static>>,
}

impl ClientAndServer {
    fn at(t0: u64) -> ClientAndServer {
        ClientAndServer {
            client: vec![
                process(1, b"/bin/client", t0),
                tcp_connection(t0, 1, Call::Connect, 40_000, 8080),
            ],
            server: vec![
                process(2, b"/bin/server", t0),
                listen(t0, 8080),
                tcp_connection(t0, 1, Call::Accept, 8080, 40_000),
            ],
        }
    }

    /// Calls `calls` of the connection, one every 100 ms from `t0` (ns).
    fn calls(&mut self, t0: u64, calls: std::ops::Range<u64>) {
        for (k, i) in calls.enumerate() {
            let t = t0 + k as u64 * 100 * MS;
            self.client
                .push(stream_data(t, 1, Direction::Send, i * 100, 100));
            self.server
                .push(stream_data(t + MS, 1, Direction::Recv, i * 100, 100));
            self.server
                .push(stream_data(t + 3 * MS, 1, Direction::Send, i * 60, 60));
            self.client
                .push(stream_data(t + 4 * MS, 1, Direction::Recv, i * 60, 60));
        }
    }

    /// The two logs as written so far.
    fn logs(&self) -> (Vec<u8>, Vec<u8>) {
        (log(&self.client), log(&self.server))
    }
}

/// A client's log and its server's: `requests` calls on one connection, a call every
/// 100 ms from a second after `t0` (ns).
fn client_and_server(t0: u64, requests: u64) -> (Vec<u8>, Vec<u8>) {
    let mut both = ClientAndServer::at(t0);
    both.calls(t0 + S, 0..requests);
    both.logs()
}

fn piece(server: &TestServer, query: &str, bytes: &[u8]) -> (u16, serde_json::Value) {
    let (status, _, body) = server.post(&format!("/v1/captures?{query}"), &[OCTETS], bytes);
    let body = serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
    (status, body)
}

/// Polls `/api/captures` until `done` holds (30 s at most); the last status.
fn status_until(
    server: &TestServer,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, status) = server.get("/api/captures");
        assert_eq!(code, 200, "{status}");
        if done(&status) || Instant::now() > deadline {
            return status;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn pieces_of_logs_are_inferred_once_and_gaps_are_refused_with_the_offset_needed() {
    let server = TestServer::start("captures");
    let (client, server_log) = client_and_server(now_ns() - 60 * S, 20);
    // A log first sent past its start: its header is needed.
    let (code, body) = piece(&server, "log=c.sockcap&offset=10", &client[10..]);
    assert_eq!(
        (code, &body["expected"]),
        (409, &serde_json::json!(0)),
        "{body}"
    );
    // In pieces cut anywhere, one sent again (a retry after a lost answer).
    let cut = client.len() / 2 + 3;
    let (code, body) = piece(&server, "log=c.sockcap&offset=0", &client[..cut]);
    assert_eq!(
        (code, &body["next"]),
        (200, &serde_json::json!(cut)),
        "{body}"
    );
    let (code, _) = piece(&server, "log=c.sockcap&offset=0", &client[..cut]);
    assert_eq!(code, 200);
    let past = format!("log=c.sockcap&offset={}", cut + 5);
    let (code, body) = piece(&server, &past, &client[cut + 5..]);
    assert_eq!(
        (code, &body["expected"]),
        (409, &serde_json::json!(cut)),
        "{body}"
    );
    assert!(body["error"].as_str().unwrap().contains("offset"), "{body}");
    let rest = format!("log=c.sockcap&offset={cut}");
    assert_eq!(piece(&server, &rest, &client[cut..]).0, 200);
    assert_eq!(
        piece(&server, "log=s.sockcap&offset=0&host=web-2", &server_log).0,
        200
    );
    let status = status_until(&server, |s| s["paths"].as_u64() >= Some(20));
    assert_eq!(status["paths"], 20, "{status}");
    assert_eq!(status["logs"], 2, "{status}");
    assert!(status["spansStored"].as_u64() >= Some(40), "{status}");
    // Each request's call and the server span under it, the server on the host its
    // sender named.
    let (_, found) = server.get("/api/search?service=server&limit=100");
    let traces = found["traces"].as_array().expect("traces");
    assert_eq!(traces.len(), 20, "{found}");
    let id = traces[0]["traceId"].as_str().expect("id");
    let (_, trace) = server.get(&format!("/api/traces/{id}"));
    let hosts: Vec<(&str, &str)> = trace["spans"]
        .as_array()
        .expect("spans")
        .iter()
        .map(|s| (s["service"].as_str().unwrap(), s["host"].as_str().unwrap()))
        .collect();
    assert_eq!(
        hosts.iter().filter(|h| **h == ("server", "web-2")).count(),
        1,
        "{hosts:?}"
    );
    assert_eq!(
        hosts.iter().filter(|h| **h == ("client", "h")).count(),
        1,
        "{hosts:?}"
    );
    // Nothing is inferred twice.
    std::thread::sleep(Duration::from_millis(1500));
    let (_, later) = server.get("/api/captures");
    assert_eq!(later["paths"], 20, "{later}");
}

#[test]
fn a_restarted_server_takes_each_log_up_where_it_had_taken_it() {
    let mut server = TestServer::start("captures-restart");
    // 20 requests from now, then 20 after the restart. Stamped after they are sent, no
    // record is late however the passes fall between the pieces.
    let start = now_ns() + 100 * MS;
    let mut both = ClientAndServer::at(start);
    let send = |server: &TestServer, name: &str, log: &[u8], range: std::ops::Range<usize>| {
        let query = format!("log={name}&offset={}", range.start);
        let (code, body) = piece(server, &query, &log[range]);
        assert_eq!(code, 200, "{name}: {body}");
    };
    both.calls(start, 0..20);
    let (client, server_log) = both.logs();
    let cut = (client.len(), server_log.len());
    send(&server, "c.sockcap", &client, 0..cut.0);
    send(&server, "s.sockcap", &server_log, 0..cut.1);
    // Their paths handed over, and their data let go once past the window's context:
    // what is held is each log's header and connection.
    let status = status_until(&server, |s| {
        s["paths"].as_u64() >= Some(20) && s["heldBytes"].as_u64() < Some(400)
    });
    assert_eq!(status["paths"], 20, "{status}");
    assert!(status["heldBytes"].as_u64() < Some(400), "{status}");

    server.restart();
    // Each sender goes on from where it stopped, and the server takes it from there.
    both.calls(now_ns() + 100 * MS, 20..40);
    let (client, server_log) = both.logs();
    send(&server, "c.sockcap", &client, cut.0..client.len());
    send(&server, "s.sockcap", &server_log, cut.1..server_log.len());
    let status = status_until(&server, |s| s["paths"].as_u64() >= Some(20));
    assert_eq!(status["paths"], 20, "{status}");
    assert_eq!(status["late"], serde_json::json!([]), "{status}");
    let (_, found) = server.get("/api/search?service=server&limit=100");
    let traces = found["traces"].as_array().expect("traces");
    assert_eq!(traces.len(), 40, "{found}");
}

#[test]
fn bad_pieces_get_clear_answers_and_a_log_that_is_not_one_is_named() {
    let server = TestServer::start("captures-bad");
    for (query, names) in [
        ("offset=0", "parameter log"),
        ("log=x.sockcap", "parameter offset"),
        ("log=x.sockcap&offset=-1", "parameter offset"),
    ] {
        let (code, body) = piece(&server, query, b"");
        assert_eq!(code, 400, "{query}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(names),
            "{query}: {body}"
        );
    }
    let (code, _, body) = server.post(
        "/v1/captures?log=x.sockcap&offset=0",
        &[OCTETS, ("x-causeway-node-names", "not json")],
        b"",
    );
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    assert_eq!(
        piece(&server, "log=x.sockcap&offset=0", b"GET / HTTP/1.1\r\n\r\n").0,
        200
    );
    let status = status_until(&server, |s| {
        s["damaged"].as_array().is_some_and(|d| !d.is_empty())
    });
    assert_eq!(status["damaged"][0]["log"], "x.sockcap", "{status}");
    assert!(
        status["damaged"][0]["what"]
            .as_str()
            .unwrap()
            .contains("not a capture log"),
        "{status}"
    );
}

#[test]
fn a_full_window_and_too_many_logs_are_answered_503_and_taken_later() {
    let server = TestServer::start_with("captures-full", |c| {
        c.limits.max_capture_bytes = 1024;
        c.limits.max_capture_logs = 2;
    });
    // Recent enough that its records are held until the passes let them go.
    let (client, server_log) = client_and_server(now_ns() - 8 * S, 50);
    assert!(client.len() > 1024);
    assert_eq!(piece(&server, "log=c.sockcap&offset=0", &client).0, 200);
    let (code, body) = piece(&server, "log=s.sockcap&offset=0", &server_log);
    assert_eq!(code, 503, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("--max-capture-bytes"),
        "{body}"
    );
    // The passes let the window's old records go: the refused log is taken then.
    let deadline = Instant::now() + Duration::from_secs(30);
    while piece(&server, "log=s.sockcap&offset=0", &server_log).0 != 200 {
        assert!(Instant::now() < deadline, "never taken");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (code, body) = piece(&server, "log=third.sockcap&offset=0", MAGIC);
    assert_eq!(code, 503, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("--max-capture-logs"),
        "{body}"
    );
    let (_, status) = server.get("/api/captures");
    assert!(status["refused"].as_u64() >= Some(2), "{status}");
}

#[test]
fn logs_stamped_before_the_window_are_counted_late_and_block_nothing() {
    let server = TestServer::start("captures-late");
    let send = |name: &str, bytes: &[u8]| {
        let (code, body) = piece(&server, &format!("log={name}&offset=0"), bytes);
        assert_eq!(code, 200, "{name}: {body}");
    };
    // Hosts on time: the passes reach the present.
    let (client, server_log) = client_and_server(now_ns() - 2 * S, 20);
    send("c.sockcap", &client);
    send("s.sockcap", &server_log);
    let status = status_until(&server, |s| s["paths"].as_u64() >= Some(20));
    assert_eq!(status["paths"], 20, "{status}");
    // A host whose clock is 8 s behind the server's, and one 40 s behind (or a log sent
    // again from its start), while those on time go on.
    let (behind, behind_server) = client_and_server(now_ns() - 8 * S, 20);
    let (far, far_server) = client_and_server(now_ns() - 40 * S, 20);
    send("behind-c.sockcap", &behind);
    send("behind-s.sockcap", &behind_server);
    send("far-c.sockcap", &far);
    send("far-s.sockcap", &far_server);
    let (client, server_log) = client_and_server(now_ns() - S, 20);
    send("c2.sockcap", &client);
    send("s2.sockcap", &server_log);
    let status = status_until(&server, |s| s["paths"].as_u64() >= Some(40));
    // The late hosts' requests began no path; those on time were all joined.
    assert_eq!(status["paths"], 40, "{status}");
    let late = status["late"].as_array().expect("late");
    let entry = |name: &str| {
        late.iter()
            .find(|l| l["log"] == name)
            .unwrap_or_else(|| panic!("{name} not late: {status}"))
    };
    // Two data records a request in a client's log, two in its server's.
    for name in ["behind-c.sockcap", "behind-s.sockcap"] {
        let l = entry(name);
        assert_eq!(
            (l["records"].as_u64(), l["skipped"].as_u64()),
            (Some(40), Some(0)),
            "{l}"
        );
        let behind = l["behindMs"].as_f64().expect("behindMs");
        assert!(behind > 0.0 && behind < 10_000.0, "{l}");
    }
    for name in ["far-c.sockcap", "far-s.sockcap"] {
        assert_eq!(entry(name)["skipped"], 40, "{status}");
    }
    assert_eq!(late.len(), 4, "{status}");
}

#[test]
fn a_request_split_by_an_uninstrumented_process_reads_as_one_trace() {
    use causeway_model::codec::native;
    use causeway_model::parent_links::trace_link;
    use causeway_model::{SpanId, TraceId};
    use causeway_testkit::span;
    let server = TestServer::start("captures-split");
    let t = now_ns() - 10 * S;
    // web's request (trace 7) calls mid, which nobody instrumented; mid's call to store
    // began trace 8. The join linked them at mid's call (11) under mid's server span (10).
    let spans = vec![
        span(7, 1, None, "GET /", "web", t, t + 30 * MS),
        span(7, 2, Some(1), "call mid", "web", t + MS, t + 25 * MS),
        span(7, 10, Some(2), "mid", "mid", t + 2 * MS, t + 24 * MS),
        span(8, 11, None, "to store", "mid", t + 5 * MS, t + 19 * MS),
        span(8, 3, Some(11), "read", "store", t + 6 * MS, t + 18 * MS),
    ];
    let id = |n: u128| TraceId::new(n).unwrap();
    let sid = |n: u64| SpanId::new(n).unwrap();
    let links = trace_link(&spans[3], (id(7), sid(10)), (id(8), sid(11)));
    let body = native::encode_all(&[spans, links.to_vec()].concat());
    let ct = ("content-type", causeway_server::NATIVE_CONTENT_TYPE);
    assert_eq!(server.post("/v1/native", &[ct], &body).0, 200);
    for asked in [
        "00000000000000000000000000000008",
        "00000000000000000000000000000007",
    ] {
        let (code, trace) = server.get(&format!("/api/traces/{asked}"));
        assert_eq!(code, 200, "{trace}");
        let spans = trace["spans"].as_array().expect("spans");
        let parent_of = |span: &str| {
            spans
                .iter()
                .find(|s| s["span_id"] == span)
                .map(|s| s["parent_id"].clone())
        };
        assert_eq!(spans.len(), 5, "asked {asked}: {trace}");
        assert_eq!(
            parent_of("000000000000000b"),
            Some(serde_json::json!("000000000000000a")),
            "asked {asked}: {trace}"
        );
        assert!(
            spans
                .iter()
                .all(|s| s["trace_id"] == "00000000000000000000000000000007"),
            "asked {asked}: {trace}"
        );
    }
    // Searched by either part, the request is listed once, whole, by its upper trace;
    // analyses over many traces count it once.
    for search in [
        "/api/search?service=store&lookback=1h",
        "/api/search?service=web&lookback=1h",
        "/api/search?service=mid&lookback=1h&order=-duration",
    ] {
        let (code, found) = server.get(search);
        assert_eq!(code, 200, "{found}");
        let traces = found["traces"].as_array().expect("traces");
        assert_eq!(traces.len(), 1, "{search}: {found}");
        assert_eq!(traces[0]["traceId"], "00000000000000000000000000000007");
        assert_eq!(traces[0]["spanCount"], 5, "{search}: {found}");
    }
    let (_, deps) = server.get("/api/dependencies?lookback=1h");
    assert_eq!(deps["traces"], 1, "{deps}");
    let edge = |caller: &str, callee: &str| {
        deps["edges"].as_array().is_some_and(|e| {
            e.iter()
                .any(|e| e["caller"] == caller && e["callee"] == callee)
        })
    };
    assert!(edge("mid", "store") && edge("web", "mid"), "{deps}");
    let (_, patterns) = server.get("/api/patterns?lookback=1h");
    let patterns = patterns["patterns"].as_array().expect("patterns");
    assert_eq!(patterns.len(), 1, "{patterns:?}");
    // The Jaeger API's search gives the request's spans under one id.
    let (_, jaeger) = server.get("/jaeger/api/traces?service=store&lookback=1h");
    let data = jaeger["data"].as_array().expect("data");
    assert_eq!(data.len(), 1, "{jaeger}");
    assert_eq!(
        data[0]["spans"].as_array().map(Vec::len),
        Some(5),
        "{jaeger}"
    );
}
