//! The Monitor page in headless Chromium: requests per second, error share and duration
//! quantiles over the window, per service and per operation, from stored traces with
//! nothing set up; a chart's point, reached by keyboard, lists the traces of its time.

use crate::chromium;
use crate::common;

use causeway_model::{Span, Status};
use causeway_testkit::{now_ns, TraceBuilder};
use chromium::Chromium;
use common::TestServer;
use serde_json::json;

const MS: u64 = 1_000_000;
const MINUTE: u64 = 60_000 * MS;

/// web GET /home calling api GET /items; `failed` when api's answer is an error.
fn request(n: u64, t: u64, failed: bool) -> Vec<Span> {
    let mut b = TraceBuilder::new(0xa000 + n as u128).ids_from((n << 8) + 1);
    let root = b.root("web", "web-1", "GET /home", t, t + 20 * MS);
    let api = b.rpc(
        root,
        ("web", "web-1"),
        ("api", "api-1"),
        "GET /items",
        t + MS,
        t + 15 * MS,
        0,
    );
    if failed {
        b.get(api).status = Status::Error("no stock".into());
    }
    b.spans()
}

#[test]
fn rate_errors_and_duration_over_time_lead_to_their_traces() {
    let server = TestServer::start("monitor");
    let now = now_ns();
    // Three requests a millisecond apart at 5.5, 20.5 and 40.5 minutes ago (mid-minute of the
    // window the API cuts from its own now, so each group is one point); one
    // of the 20-minute ones fails.
    let mut spans = Vec::new();
    let mut n = 0;
    for minutes in [5, 20, 40] {
        for k in 0..3 {
            spans.extend(request(
                n,
                now - minutes * MINUTE - MINUTE / 2 + k * MS,
                minutes == 20 && k == 0,
            ));
            n += 1;
        }
    }
    server.server().store.append(spans).unwrap();

    let (status, body) = server.get("/api/monitor?lookback=1h");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["step"], json!(MINUTE));
    assert_eq!(body["starts"].as_array().unwrap().len(), 60);
    let series = body["series"].as_array().unwrap();
    let names: Vec<&str> = series
        .iter()
        .map(|s| s["service"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    for s in series {
        assert_eq!(s["total"], json!(9), "{s}");
        let requests: Vec<u64> = serde_json::from_value(s["requests"].clone()).unwrap();
        assert_eq!(
            requests.iter().filter(|&&r| r > 0).count(),
            3,
            "{requests:?}"
        );
        assert!(requests.iter().all(|&r| r == 0 || r == 3), "{requests:?}");
    }
    let api = series
        .iter()
        .find(|s| s["service"] == json!("api"))
        .unwrap();
    assert_eq!(api["totalErrors"], json!(1));
    let (status, body) = server.get("/api/monitor?start=0");
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("window"), "{body}");
    let (status, _) = server.get("/api/monitor?lookback=1h&step=soon");
    assert_eq!(status, 400);

    let mut ui = Chromium::launch("monitor");
    ui.goto(&server.api_url("/"));
    assert_eq!(ui.open("#/monitor?lookback=1h"), "ready");
    assert_eq!(ui.count(".monitor-row"), 2);
    assert_eq!(ui.count(".monitor-row svg.metric-chart"), 6);
    let points = ui.eval(
        "document.querySelector('.monitor-row[data-series=web] svg.rate polyline').getAttribute('points').split(' ').length",
    );
    assert_eq!(points, json!(60));
    assert!(ui
        .text(".monitor-row[data-series=api] h3")
        .contains("9 requests · 1 errors"));
    // A minute without requests has no duration: three lone points a quantile, no line
    // drawn down to zero between them.
    assert_eq!(
        ui.count(".monitor-row[data-series=web] svg.latency circle"),
        9
    );
    assert_eq!(
        ui.count(".monitor-row[data-series=web] svg.latency polyline"),
        0
    );
    ui.screenshot("monitor");

    // By keyboard: along web's request rate from the newest point back to one with
    // requests, then Enter lists that minute's traces.
    ui.focus(".monitor-row[data-series=web] svg.rate");
    let mut rate = 0.0_f64;
    for _ in 0..60 {
        ui.call(
            "Input.dispatchKeyEvent",
            json!({ "type": "keyDown", "key": "ArrowLeft", "code": "ArrowLeft", "windowsVirtualKeyCode": 37 }),
        );
        // (SVG text has no innerText: its textContent is read.)
        let text = ui.eval(
            "document.querySelector('.monitor-row[data-series=web] svg.rate text.readout').textContent",
        );
        rate = text.as_str().unwrap_or_default().parse().unwrap_or(0.0);
        if rate > 0.0 {
            break;
        }
    }
    assert!((rate - 0.05).abs() < 1e-9, "3 requests in a minute: {rate}");
    ui.press("Enter");
    ui.wait_for(
        "document.getElementById('view').dataset.view === 'search' && document.getElementById('view').dataset.state === 'ready' && document.querySelector('table.traces')",
        "the minute's traces",
    );
    assert_eq!(ui.count("table.traces tbody tr"), 3);
    assert!(ui
        .eval("location.hash")
        .as_str()
        .unwrap()
        .contains("service=web"));

    // A service's operations, one click away.
    assert_eq!(ui.open("#/monitor?lookback=1h"), "ready");
    ui.click(".monitor-row[data-series=api] h3 a");
    ui.wait_for(
        "location.hash.includes('service=api') && document.getElementById('view').dataset.state === 'ready' && document.querySelectorAll('.monitor-row').length === 2",
        "api's whole and its operation",
    );
    assert_eq!(
        ui.eval("[...document.querySelectorAll('.monitor-row')].map(r => r.dataset.series)"),
        json!(["api", "api GET /items"])
    );
    assert!(ui.exceptions.is_empty(), "{:?}", ui.exceptions);
}
