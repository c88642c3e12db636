//! Finding the slow requests and what sets them apart, in headless Chromium: the search
//! page's duration scatter (one dot per trace), a region dragged on it with the mouse, the
//! slowest 5% and the errors chosen by keyboard, and the comparison of each selection with
//! the rest of the window, ranked, each line a link to its search.

use crate::chromium;
use crate::common;

use causeway_model::{KeyValue, Span, SpanKind, Status, TraceId};
use causeway_testkit::{now_ns, TraceBuilder};
use chromium::Chromium;
use common::TestServer;
use serde_json::json;

const MS: u64 = 1_000_000;
const TRACES: u64 = 100;

fn is_slow(i: u64) -> bool {
    i % 10 == 3
}

fn is_failed(i: u64) -> bool {
    i % 20 == 7
}

/// GET /home: web calls api for items, api reads db. The ten slow ones (200 ms, against
/// 10) also rebuild an index, and come from eu, as a ninth of the fast ones do; five
/// fail in db.
fn request(i: u64, t: u64) -> Vec<Span> {
    let slow = is_slow(i);
    let ms = if slow { 200 } else { 10 };
    let mut b = TraceBuilder::new(0x9000 + i as u128).ids_from((i << 16) + 1);
    let root = b.root("web", "web-1", "GET /home", t, t + ms * MS);
    let region = if slow || i % 10 == 5 { "eu" } else { "us" };
    b.last().attributes = vec![KeyValue::new("region", region)];
    let api = b.rpc(
        root,
        ("web", "web-1"),
        ("api", "api-1"),
        "GET /items",
        t + MS / 2,
        t + (ms - 1) * MS,
        0,
    );
    let db = b.span(
        Some(api),
        "db",
        "db-1",
        SpanKind::Client,
        "SELECT",
        t + MS,
        t + 2 * MS,
    );
    if is_failed(i) {
        b.get(db).status = Status::Error("deadlock".into());
    }
    if slow {
        b.span(
            Some(api),
            "api",
            "api-1",
            SpanKind::Internal,
            "rebuild index",
            t + 3 * MS,
            t + 190 * MS,
        );
    }
    b.spans()
}

/// The comparison's rows: what, and the two shares as shown.
fn differences(ui: &mut Chromium) -> Vec<(String, String, String)> {
    let rows: Vec<Vec<String>> = serde_json::from_value(ui.eval(
        "[...document.querySelectorAll('table.differences tbody tr')].map(r => [...r.cells].slice(0, 3).map(c => c.innerText.replace(/\\s+/g, ' ').trim()))",
    ))
    .unwrap();
    rows.into_iter()
        .map(|r| (r[0].clone(), r[1].clone(), r[2].clone()))
        .collect()
}

/// Presses, moves and releases the left button, as a hand dragging does.
fn drag(ui: &mut Chromium, from: (f64, f64), to: (f64, f64)) {
    let mouse = |ui: &mut Chromium, kind: &str, (x, y): (f64, f64)| {
        ui.call(
            "Input.dispatchMouseEvent",
            json!({ "type": kind, "x": x, "y": y, "button": "left", "buttons": 1, "clickCount": 1 }),
        );
    };
    mouse(ui, "mousePressed", from);
    for k in 1..=5 {
        let f = k as f64 / 5.0;
        let at = (from.0 + (to.0 - from.0) * f, from.1 + (to.1 - from.1) * f);
        mouse(ui, "mouseMoved", at);
    }
    mouse(ui, "mouseReleased", to);
}

#[test]
fn the_slow_traces_are_found_and_what_sets_them_apart_is_shown() {
    let server = TestServer::start("explain");
    let t0 = now_ns() - 20 * 60 * 1_000 * MS;
    let spans: Vec<Span> = (0..TRACES)
        .flat_map(|i| request(i, t0 + i * 1_000 * MS))
        .collect();
    server.server().store.append(spans).unwrap();

    // The API first: every trace a point, each with its duration and error.
    let (status, body) = server.get("/api/scatter?lookback=1h");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total"], json!(TRACES));
    let points = body["points"].as_array().unwrap();
    assert_eq!(points.len() as u64, TRACES);
    let slow_points = points
        .iter()
        .filter(|p| p["duration"].as_u64() == Some(200 * MS))
        .count();
    assert_eq!(slow_points, 10);
    assert_eq!(
        points.iter().filter(|p| p["error"] == json!(true)).count(),
        5
    );
    let id = TraceId::new(0x9000 + 3).unwrap().to_string();
    assert!(points.iter().any(|p| p["traceId"] == json!(id)), "{id}");
    for bad in [
        "/api/scatter?lookback=1h&limit=0",
        "/api/scatter?lookback=1h&limit=20000",
        "/api/differences?lookback=1h",
        "/api/differences?lookback=1h&selErrors=maybe",
        "/api/differences?lookback=1h&selMinDuration=fast",
    ] {
        let (status, body) = server.get(bad);
        assert_eq!(status, 400, "{bad}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains("sel") || bad.contains("limit"),
            "{bad}: {body}"
        );
    }

    // A trace's own duration, searched: no trace lasts 100-190 ms, though the slow ones'
    // index rebuild (187 ms) is a span that does.
    let total = |path: &str| server.get(path).1["total"].clone();
    assert_eq!(
        total(
            "/api/search?lookback=1h&order=-duration&traceMinDuration=100ms&traceMaxDuration=190ms"
        ),
        json!(0)
    );
    assert_eq!(
        total("/api/search?lookback=1h&order=-duration&minDuration=100ms&maxDuration=190ms"),
        json!(10)
    );
    assert_eq!(
        total("/api/search?lookback=1h&order=-duration&traceMinDuration=150ms"),
        json!(10)
    );
    let (status, body) = server.get("/api/search?lookback=1h&traceMinDuration=150ms");
    assert_eq!(status, 400, "the index finds spans, not traces: {body}");

    let mut ui = Chromium::launch("explain");
    ui.goto(&server.api_url("/"));
    assert_eq!(ui.open("#/search?lookback=1h"), "ready");
    assert!(
        ui.text(".scatter-chart .hint").starts_with("100 traces"),
        "{}",
        ui.text(".scatter-chart .hint")
    );
    ui.screenshot("search-scatter");

    // Attribute autocomplete: the window's keys as a word is typed, then the key's values,
    // most common first.
    let (_, keys) = server.get("/api/attributes?lookback=1h");
    assert_eq!(keys["seen"], json!([{ "text": "region", "spans": 100 }]));
    let (_, values) = server.get("/api/attributes?lookback=1h&key=region");
    assert_eq!(
        values["seen"],
        json!([{ "text": "us", "spans": 80 }, { "text": "eu", "spans": 20 }])
    );
    let offered = "[...document.querySelectorAll('#attribute-suggestions option')].map(o => o.value).join(' | ')";
    ui.type_into("form.filters input[name=tags]", "reg");
    ui.wait_for(&format!("{offered} === 'region='"), "the keys offered");
    ui.type_into("form.filters input[name=tags]", "region=");
    ui.wait_for(
        &format!("{offered} === 'region=us | region=eu'"),
        "the values offered",
    );

    // A region dragged over the upper half of the chart (durations run 10 ms to 1 s on a
    // log scale, so its middle is 100 ms): the ten slow traces.
    let rect: Vec<f64> = serde_json::from_value(ui.eval(
        "(() => { const r = document.querySelector('canvas.scatter').getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })()",
    ))
    .unwrap();
    let (left, top, right, bottom) = (rect[0], rect[1], rect[2], rect[3]);
    // The plot's area: 64 px of labels to the left, 8 above, 22 below.
    let middle = top + 8.0 + (bottom - top - 30.0) / 2.0;
    drag(&mut ui, (left + 66.0, top + 2.0), (right - 2.0, middle));
    ui.wait_for(
        "location.hash.includes('sel=') && document.querySelector('section.differences h2')",
        "the comparison of the region",
    );
    assert_eq!(
        ui.text("section.differences h2"),
        "What sets these 10 traces apart from the other 90 of the window"
    );
    let rows = differences(&mut ui);
    assert_eq!(
        rows[0],
        (
            "api rebuild index".to_string(),
            "100.0% 10".to_string(),
            "0.0% 0".to_string()
        ),
        "{rows:?}"
    );
    assert_eq!(
        rows[1],
        (
            "region=eu".to_string(),
            "100.0% 10".to_string(),
            "11.1% 10".to_string()
        ),
        "{rows:?}"
    );
    // What every trace holds sets nothing apart.
    assert!(
        !rows.iter().any(|r| r.0.starts_with("web GET /home")),
        "{rows:?}"
    );
    // The region stays drawn where it was dragged (within the plot: its right edge at the
    // plot's, its top at the plot's), also when the chart is redrawn narrower (the page grew
    // a scroll bar with the comparison).
    let region: Vec<f64> = serde_json::from_value(ui.eval(
        "(() => { const r = document.querySelector('.scatter-region:not([hidden])').getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })()",
    ))
    .unwrap();
    let now_right = ui
        .eval("document.querySelector('canvas.scatter').getBoundingClientRect().right")
        .as_f64()
        .unwrap();
    let near = |a: f64, b: f64| (a - b).abs() < 3.0;
    assert!(
        near(region[0], left + 66.0)
            && near(region[1], top + 8.0)
            && near(region[2], now_right - 12.0)
            && near(region[3], middle),
        "region {region:?}, dragged from {:?} to {:?}",
        (left + 66.0, top + 2.0),
        (right - 2.0, middle)
    );
    ui.screenshot("search-differences");
    // The region's own traces, by their whole duration.
    ui.click("a[data-list=selection]");
    ui.wait_for(
        "document.getElementById('view').dataset.state === 'ready' && document.querySelector('table.traces')",
        "the region listed",
    );
    assert_eq!(ui.count("table.traces tbody tr"), 10);
    assert!(
        ui.text("form.filters").contains("trace at least 100 ms"),
        "{}",
        ui.text("form.filters")
    );
    assert_eq!(ui.open("#/search?lookback=1h"), "ready");
    drag(&mut ui, (left + 66.0, top + 2.0), (right - 2.0, middle));
    ui.wait_for(
        "location.hash.includes('sel=') && document.querySelector('section.differences table')",
        "the region compared again",
    );
    // Each line links to its search: the span's, listing the slow traces.
    ui.click("table.differences tbody tr:first-child a");
    ui.wait_for(
        "document.getElementById('view').dataset.state === 'ready' && location.hash.includes('operation=rebuild') && document.querySelector('table.traces')",
        "the search the line implies",
    );
    assert_eq!(ui.count("table.traces tbody tr"), 10);

    // By keyboard: the slowest 5% (they take 200 ms, as all ten slow ones do), then the
    // errors.
    assert_eq!(ui.open("#/search?lookback=1h"), "ready");
    ui.focus("button[data-select=slowest]");
    ui.press("Enter");
    ui.wait_for(
        "document.querySelector('section.differences h2')?.textContent.startsWith('What sets these 10 traces')",
        "the slowest compared",
    );
    ui.focus("button[data-select=errors]");
    ui.press(" ");
    ui.wait_for(
        "location.hash.includes('selErrors=1') && document.querySelector('section.differences h2')?.textContent.startsWith('What sets these 5 traces')",
        "the errors compared",
    );
    let rows = differences(&mut ui);
    assert_eq!(
        rows[0],
        (
            "an error in db".to_string(),
            "100.0% 5".to_string(),
            "0.0% 0".to_string()
        ),
        "{rows:?}"
    );
    // The selection's own traces, listed.
    ui.click("a[data-list=selection]");
    ui.wait_for(
        "document.getElementById('view').dataset.state === 'ready' && document.querySelector('table.traces')",
        "the errors listed",
    );
    assert_eq!(ui.count("table.traces tbody tr"), 5);
    // Cleared, the comparison goes.
    assert_eq!(ui.open("#/search?lookback=1h&selErrors=1"), "ready");
    assert_eq!(ui.count("section.differences"), 1);
    ui.click("button[data-select=clear]");
    ui.wait_for(
        "!location.hash.includes('selErrors') && !document.querySelector('section.differences')",
        "the selection cleared",
    );

    // From a pattern: the slow ones have a shape of their own (they rebuild an index);
    // what sets it apart from the rest of the window, on its page.
    let (_, patterns) = server.get("/api/patterns?lookback=1h");
    let of_count = |n: u64| {
        patterns["patterns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["count"] == json!(n))
            .unwrap_or_else(|| panic!("no pattern of {n} traces: {patterns}"))["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let slow = of_count(10);
    let (status, body) = server.get(&format!("/api/differences?lookback=1h&selPattern={slow}"));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        (body["selected"].clone(), body["rest"].clone()),
        (json!(10), json!(90))
    );
    let (_, body) = server.get(&format!(
        "/api/differences?lookback=1h&pattern={slow}&selMinDuration=150ms"
    ));
    assert_eq!(
        (body["selected"].clone(), body["rest"].clone()),
        (json!(10), json!(0)),
        "within the pattern"
    );
    let (status, _) = server.get("/api/differences?lookback=1h&selPattern=nope");
    assert_eq!(status, 400);

    assert_eq!(ui.open(&format!("#/pattern/{slow}?lookback=1h")), "ready");
    ui.click("a[data-apart=pattern]");
    ui.wait_for(
        "location.hash.includes('apart=pattern') && document.querySelector('section.differences table')",
        "the pattern compared with the window",
    );
    assert_eq!(
        ui.text("section.differences h2"),
        "What sets these 10 traces apart from the other 90 of the window"
    );
    assert!(
        differences(&mut ui)[0].0.contains("rebuild index"),
        "{:?}",
        differences(&mut ui)
    );
    // A bar of the other pattern's histogram against the rest of that pattern.
    let fast = of_count(90);
    assert_eq!(ui.open(&format!("#/pattern/{fast}?lookback=1h")), "ready");
    ui.focus(".histogram g.bar");
    ui.press("Enter");
    ui.wait_for(
        "document.querySelector('a[data-apart=bucket]')",
        "the bar's traces",
    );
    let in_bar: u64 = ui
        .text(".histogram .examples p")
        .split(": ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.replace(',', "").parse().ok())
        .expect("the bar's count");
    ui.click("a[data-apart=bucket]");
    ui.wait_for(
        "location.hash.includes('apart=bucket') && document.querySelector('section.differences h2')",
        "the bar compared with its pattern",
    );
    assert_eq!(
        ui.text("section.differences h2"),
        format!(
            "What sets these {in_bar} traces apart from the other {} of the pattern",
            90 - in_bar
        )
    );
    assert!(ui.exceptions.is_empty(), "{:?}", ui.exceptions);
}
