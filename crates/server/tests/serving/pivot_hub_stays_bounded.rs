//! The Pivot Tracing hub stays bounded whatever its clients send: installed queries,
//! definitions, processes served and callsites kept each have a limit; processes that
//! stop reporting are forgotten; the callsite catalog is answered in pages, and building
//! it holds no async worker, so the rest of the API answers meanwhile.

use crate::common;

use std::time::{Duration, Instant};

use causeway_server::PivotLimits;
use common::TestServer;
use serde_json::{json, Value};

fn send(ts: &TestServer, path: &str, body: Option<Value>) -> (u16, Value) {
    let url = ts.api_url(path);
    let resp = match body {
        Some(b) => ts
            .http
            .post(&url)
            .header("content-type", "application/json")
            .send(b.to_string().as_bytes()),
        None => ts.http.get(&url).call(),
    };
    let mut r = resp.unwrap();
    let status = r.status().as_u16();
    let text = r.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// A process's first report, registering `callsites` callsites of its own.
fn report(instance: u64, callsites: usize) -> Value {
    let sites: Vec<Value> = (0..callsites)
        .map(|i| {
            json!({"kind": "event", "target": format!("app{instance}"), "name": format!("event {i}"),
                   "level": "INFO", "module": "app", "file": "app.rs", "line": i, "fields": ["message"]})
        })
        .collect();
    json!({
        "process": {"instance": instance, "service": "svc", "host": "h", "proc_name": format!("p{instance}"), "pid": instance},
        "installed": [],
        "callsites": sites,
        "callsites_from": 0,
        "batches": [],
    })
}

const TRACEPOINTS: &str =
    r#"Tracepoint Read = event(target = "app", field = "delta") Export delta"#;

#[test]
fn installs_definitions_processes_and_callsites_are_bounded() {
    let ts = TestServer::start_with("pivot-bounds", |c| {
        c.pivot_tracepoints = vec![("app.pivot".into(), TRACEPOINTS.into())];
        c.limits.pivot = PivotLimits {
            max_queries: 3,
            max_definitions: 2,
            max_processes: 4,
            process_expiry: Duration::from_secs(2),
            max_callsites_per_process: 50,
            max_callsites: 120,
        };
    });
    for i in 0..3 {
        let (status, r) = send(
            &ts,
            "/api/pivot/queries",
            Some(json!({"query": format!("Q{i} = From r In Read Select COUNT")})),
        );
        assert_eq!(status, 201, "{r}");
    }
    let (status, r) = send(
        &ts,
        "/api/pivot/queries",
        Some(json!({"query": "From r In Read Select COUNT"})),
    );
    assert_eq!(status, 409, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("--pivot-max-queries"),
        "{r}"
    );
    let (status, r) = send(
        &ts,
        "/api/pivot/tracepoints",
        Some(
            json!({"text": "Tracepoint A = event(target = \"a\") Export x\nTracepoint B = event(target = \"b\") Export x"}),
        ),
    );
    assert_eq!(status, 409, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("--pivot-max-definitions"),
        "{r}"
    );

    // Four processes of 50 callsites each: the first two keep 50, the third the 20 left.
    for instance in 1..=4 {
        let (status, r) = send(&ts, "/api/pivot/agent", Some(report(instance, 80)));
        assert_eq!(status, 200, "{r}");
    }
    let (status, r) = send(&ts, "/api/pivot/agent", Some(report(5, 1)));
    assert_eq!(status, 503, "{r}");
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("--pivot-max-processes"),
        "{r}"
    );
    let (_, r) = send(&ts, "/api/pivot/processes", None);
    let kept: Vec<(u64, u64)> = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["callsites"].as_u64().unwrap(),
                p["callsitesDropped"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(kept, [(50, 30), (50, 30), (20, 60), (0, 80)], "{r}");

    // The catalog in pages, with its total.
    let (_, page) = send(&ts, "/api/pivot/tracepoints?limit=25&offset=100", None);
    assert_eq!(page["total"], 120, "{page}");
    assert_eq!(page["callsites"].as_array().unwrap().len(), 20);
    let (status, _) = send(&ts, "/api/pivot/tracepoints?limit=1000000", None);
    assert_eq!(status, 400);

    // Processes that stop reporting are forgotten, and make room for others.
    std::thread::sleep(Duration::from_millis(2500));
    let (status, r) = send(&ts, "/api/pivot/agent", Some(report(5, 10)));
    assert_eq!(status, 200, "{r}");
    let (_, r) = send(&ts, "/api/pivot/processes", None);
    assert_eq!(r["processes"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["processes"][0]["callsites"], 10, "{r}");
}

#[test]
fn the_catalog_is_built_off_the_async_workers() {
    let ts = TestServer::start_with("pivot-catalog", |c| {
        c.limits.pivot.max_callsites_per_process = 100_000;
        c.limits.pivot.max_callsites = 100_000;
    });
    for instance in 1..=4 {
        let (status, r) = send(&ts, "/api/pivot/agent", Some(report(instance, 25_000)));
        assert_eq!(status, 200, "{r}");
    }
    // Whole-catalog pages, more at once than the server has async workers (two).
    let url = ts.api_url("/api/pivot/tracepoints?limit=10000");
    let pages: Vec<_> = (0..4)
        .map(|_| {
            let (http, url) = (ts.http.clone(), url.clone());
            std::thread::spawn(move || {
                let mut r = http.get(&url).call().unwrap();
                let _ = r.body_mut().with_config().limit(1 << 30).read_to_vec();
                Instant::now()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(50));
    let (status, _) = send(&ts, "/api/status", None);
    let answered = Instant::now();
    assert_eq!(status, 200);
    let first_page = pages.into_iter().map(|p| p.join().unwrap()).min().unwrap();
    assert!(
        answered < first_page,
        "the status waited for the catalog pages to be built"
    );
}
