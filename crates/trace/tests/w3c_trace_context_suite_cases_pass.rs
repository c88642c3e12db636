//! The cases of the W3C Trace Context test suite, run against the example service the
//! suite would drive: a harness server receives the service's callbacks and checks the
//! headers it propagated.

#[path = "../examples/w3c_tracecontext_service.rs"]
mod service;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::routing::post;
use axum::Router;
use causeway::propagation::{parse_traceparent, TraceState};

type Seen = Arc<Mutex<Vec<(String, HeaderMap)>>>;

struct Harness {
    service: SocketAddr,
    harness: SocketAddr,
    seen: Seen,
    rt: tokio::runtime::Runtime,
}

fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| {
        let rec = Box::leak(Box::new(causeway::testing::Recorder::new()));
        tracing::dispatcher::set_global_default(rec.dispatch()).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let seen: Seen = Arc::default();
        let (service, harness) = rt.block_on(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let service = l.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(l, service::app()).await.unwrap() });
            let app =
                Router::new()
                    .route(
                        "/callback/{id}",
                        post(
                            |State(seen): State<Seen>,
                             Path(id): Path<String>,
                             headers: HeaderMap| async move {
                                seen.lock().unwrap().push((id, headers));
                                ""
                            },
                        ),
                    )
                    .with_state(seen.clone());
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let harness = l.local_addr().unwrap();
            tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
            (service, harness)
        });
        Harness {
            service,
            harness,
            seen,
            rt,
        }
    })
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Sends a request with `headers`, asking for `count` callbacks; returns what each
/// callback carried: (traceparent values, tracestate).
fn request(headers: &[(&str, &str)], count: usize) -> Vec<(Vec<String>, TraceState)> {
    let _one_at_a_time = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let h = harness();
    h.seen.lock().unwrap().clear();
    let body: Vec<serde_json::Value> = (0..count)
        .map(|i| serde_json::json!({"url": format!("http://{}/callback/{i}", h.harness), "arguments": []}))
        .collect();
    h.rt.block_on(async {
        let mut req = reqwest::Client::new()
            .post(format!("http://{}/test", h.service))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = tokio::time::timeout(Duration::from_secs(10), req.send())
            .await
            .expect("the service answered in time")
            .unwrap();
        assert_eq!(resp.status(), 200);
    });
    let mut seen = h.seen.lock().unwrap().clone();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(seen.len(), count, "every callback was made");
    seen.into_iter()
        .map(|(_, hm)| {
            let tp = hm
                .get_all("traceparent")
                .iter()
                .map(|v| v.to_str().unwrap().to_owned())
                .collect();
            let ts =
                TraceState::parse(hm.get_all("tracestate").iter().map(|v| v.to_str().unwrap()));
            (tp, ts)
        })
        .collect()
}

fn one(headers: &[(&str, &str)]) -> (String, String, TraceState) {
    let (tps, ts) = request(headers, 1).remove(0);
    assert_eq!(tps.len(), 1, "exactly one traceparent: {tps:?}");
    let (t, s, _) = parse_traceparent(&tps[0]).expect("a valid traceparent");
    (t.to_string(), s.to_string(), ts)
}

const TRACE: &str = "12345678901234567890123456789012";
const TP: &str = "00-12345678901234567890123456789012-1234567890123456-01";
const TP0: &str = "00-12345678901234567890123456789012-1234567890123456-00";

#[test]
fn both_headers_missing_starts_a_trace() {
    let (t, _, _) = one(&[]);
    assert_ne!(t, TRACE);
}

#[test]
fn a_valid_traceparent_is_continued_with_a_new_parent_id() {
    let (t, s, _) = one(&[("traceparent", TP)]);
    assert_eq!(t, TRACE);
    assert_ne!(s, "1234567890123456");
    for name in ["TraceParent", "TrAcEpArEnT", "TRACEPARENT"] {
        assert_eq!(one(&[(name, TP)]).0, TRACE);
    }
    for v in [
        format!(" {TP}"),
        format!("\t{TP}"),
        format!("{TP} "),
        format!("{TP}\t"),
        format!("\t {TP} \t"),
    ] {
        assert_eq!(one(&[("traceparent", &v)]).0, TRACE, "{v:?}");
    }
    assert_eq!(
        one(&[(
            "traceparent",
            "cc-12345678901234567890123456789012-1234567890123456-01-what-the-future-will-be-like"
        )])
        .0,
        TRACE
    );
}

#[test]
fn an_invalid_traceparent_restarts_the_trace() {
    for bad in [
        "00-12345678901234567890123456789012-1234567890123456-01.",
        "ff-12345678901234567890123456789012-1234567890123456-01",
        "00-00000000000000000000000000000000-1234567890123456-01",
        "00-12345678901234567890123456789012-0000000000000000-01",
        "00-123456789012345678901234567890123-1234567890123456-01",
        "00-12345678901234567890123456789012-1234567890123456-001",
        "cc-12345678901234567890123456789012-1234567890123456-01.what-the-future-will-be-like",
    ] {
        let (t, _, _) = one(&[("traceparent", bad)]);
        assert_ne!(t, TRACE, "{bad}");
    }
    let (t, _, _) = one(&[("trace-parent", TP)]);
    assert_ne!(t, TRACE);
    let (t, _, _) = one(&[
        (
            "traceparent",
            "00-12345678901234567890123456789011-1234567890123456-01",
        ),
        (
            "traceparent",
            "00-12345678901234567890123456789012-1234567890123456-01",
        ),
    ]);
    assert!(t != TRACE && t != "12345678901234567890123456789011");
}

#[test]
fn tracestate_is_inherited_combined_and_discarded_as_the_suite_expects() {
    let (t, _, ts) = one(&[("traceparent", TP0), ("tracestate", "foo=1,bar=2")]);
    assert_eq!(t, TRACE);
    assert_eq!((ts.get("foo"), ts.get("bar")), (Some("1"), Some("2")));
    let (_, _, ts) = one(&[
        ("traceparent", TP0),
        ("tracestate", "foo=1,bar=2"),
        ("tracestate", "rojo=1,congo=2"),
        ("tracestate", "baz=3"),
    ]);
    assert_eq!(ts.header(), "foo=1,bar=2,rojo=1,congo=2,baz=3");
    let (_, _, ts) = one(&[("traceparent", TP0), ("TrAcEsTaTe", "foo=1")]);
    assert_eq!(ts.get("foo"), Some("1"));
    let (_, _, ts) = one(&[("traceparent", TP0), ("trace-state", "foo=1")]);
    assert_eq!(ts.get("foo"), None);
    let (_, _, ts) = one(&[("traceparent", TP0), ("tracestate", "foo=1,foo=2")]);
    assert_eq!(ts.get("foo"), None);
    // Level 2: `@` is a key character after the first (the suite since w3c/trace-context#584).
    let (_, _, ts) = one(&[("traceparent", TP0), ("tracestate", "foo@=1,bar=2")]);
    assert_eq!(ts.get("foo@"), Some("1"));
    assert_eq!(ts.get("bar"), Some("2"));
    let (_, _, ts) = one(&[("traceparent", TP0), ("tracestate", "@foo=1,bar=2")]);
    assert_eq!(ts.get("bar"), None);
    let (_, _, ts) = one(&[("tracestate", "foo=1")]);
    assert_eq!(ts.get("foo"), None, "no traceparent, no tracestate");
    let m32: Vec<String> = (1..=32).map(|i| format!("bar{i:02}={i:02}")).collect();
    let (_, _, ts) = one(&[("traceparent", TP0), ("tracestate", &m32.join(","))]);
    assert_eq!(ts.members().len(), 32);
    let m33 = format!("{},bar33=33", m32.join(","));
    let (_, _, ts) = one(&[("traceparent", TP0), ("tracestate", &m33)]);
    assert!(ts.is_empty());
}

#[test]
fn several_callbacks_share_the_trace_with_distinct_parents() {
    let got = request(&[("traceparent", TP)], 3);
    let mut parents = std::collections::HashSet::new();
    for (tps, _) in &got {
        let (t, s, _) = parse_traceparent(&tps[0]).unwrap();
        assert_eq!(t.to_string(), TRACE);
        parents.insert(s);
    }
    assert_eq!(parents.len(), 3);
    let got = request(
        &[(
            "traceparent",
            "00-00000000000000000000000000000000-1234567890123456-01",
        )],
        3,
    );
    let parents: std::collections::HashSet<_> = got.iter().map(|(tps, _)| tps[0].clone()).collect();
    assert_eq!(parents.len(), 3);
}
