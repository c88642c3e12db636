//! The trace page's tools over one trace, in headless Chromium: in-trace search (matches
//! marked, the rest dimmed or hidden, next and previous, by keyboard), the flame graph and
//! the span table, the download as Jaeger's and OTLP's JSON, duration labels that are never
//! clipped, 64-bit trace ids shown as they were sent, and the raw duration beside the
//! skew-corrected one. Screenshots go to `target/ui-screenshots/`.

use crate::chromium;
use crate::common;

use causeway_model::{KeyValue, Span, SpanKind, Status, TraceId};
use causeway_testkit::{now_ns, TraceBuilder};
use chromium::Chromium;
use common::TestServer;
use serde_json::{json, Value};

const MS: u64 = 1_000_000;
const SHOP: u128 = 0x7000_0000_0000_0000_0000_0000_0000_0001;
/// A 64-bit id, as Zipkin and old Jaeger clients send.
const SHORT: u128 = 0x1234_abcd_5678_ef01;
const SKEWED: u128 = 0x7100_0000_0000_0000_0000_0000_0000_0001;
/// The database's clock runs this far ahead in the skewed trace.
const DB_AHEAD: u64 = 25 * MS;

/// GET /home on web: two calls to api (the first fails, and reads the database for 30 ms),
/// then 36 ms of rendering. Self times: render 36 ms, SELECT 30, api's two GET /items 18,
/// GET /home 14, web's two client spans 2.
fn shop(t: u64) -> Vec<Span> {
    let mut b = TraceBuilder::new(SHOP).ids_from(1);
    let root = b.root("web", "web-1", "GET /home", t, t + 100 * MS);
    let items = b.rpc(
        root,
        ("web", "web-1"),
        ("api", "api-1"),
        "GET /items",
        t + 5 * MS,
        t + 45 * MS,
        0,
    );
    b.get(items).status = Status::Error("out of stock".into());
    b.get(items).attributes = vec![KeyValue::new("http.status_code", 500_i64)];
    b.span(
        Some(items),
        "db",
        "db-1",
        SpanKind::Client,
        "SELECT",
        t + 10 * MS,
        t + 40 * MS,
    );
    b.rpc(
        root,
        ("web", "web-1"),
        ("api", "api-1"),
        "GET /items",
        t + 50 * MS,
        t + 60 * MS,
        0,
    );
    b.span(
        Some(root),
        "web",
        "web-1",
        SpanKind::Internal,
        "render",
        t + 62 * MS,
        t + 98 * MS,
    );
    b.spans()
}

/// web calls db, whose clock runs ahead: recorded, the trace lasts 44.5 ms; corrected, 30.
fn skewed(t: u64) -> Vec<Span> {
    let mut b = TraceBuilder::new(SKEWED).ids_from(100);
    let root = b.root("web", "web-1", "POST /buy", t, t + 30 * MS);
    b.rpc(
        root,
        ("web", "web-1"),
        ("db", "db-2"),
        "WRITE",
        t + 2 * MS,
        t + 20 * MS,
        DB_AHEAD,
    );
    b.spans()
}

fn short(t: u64) -> Vec<Span> {
    let mut b = TraceBuilder::new(SHORT).ids_from(200);
    b.root("legacy", "legacy-1", "GET /old", t, t + 3 * MS);
    b.spans()
}

fn hex(trace: u128) -> String {
    TraceId::new(trace).unwrap().to_string()
}

/// The rows' service and span names, as drawn.
fn rows(ui: &mut Chromium, selector: &str) -> Vec<String> {
    serde_json::from_value(ui.eval(&format!(
        "[...document.querySelectorAll({})].map(r => r.querySelector('.svc').textContent + ' ' + r.querySelector('.op').textContent)",
        json!(selector)
    )))
    .unwrap()
}

/// Types into the find box as a person does, and waits for the URL to take it.
fn find(ui: &mut Chromium, text: &str) {
    ui.type_into("form.find input[name=find]", text);
    ui.wait_for(
        &format!(
            "(new URLSearchParams(location.hash.split('?')[1] || '').get('find') || '') === {} && document.getElementById('view').dataset.state === 'ready'",
            json!(text)
        ),
        "the find in the URL",
    );
}

#[test]
fn a_trace_is_searched_and_seen_as_a_flame_graph_and_a_table() {
    let server = TestServer::start("trace-views");
    let t0 = now_ns() - 5 * 60 * 1_000 * MS;
    let mut spans = shop(t0);
    spans.extend(skewed(t0 + 1_000 * MS));
    spans.extend(short(t0 + 2_000 * MS));
    server.server().store.append(spans).unwrap();
    let mut ui = Chromium::launch("trace-views");
    ui.goto(&server.api_url("/"));

    // Every duration label whole, inside its lane: the root's bar fills the lane, so its
    // label goes inside the bar rather than before it, off the lane's edge.
    assert_eq!(ui.open(&format!("#/trace/{}", hex(SHOP))), "ready");
    assert_eq!(ui.count(".rows .row"), 7);
    let clipped = ui.eval(
        "[...document.querySelectorAll('.rows .row')].filter(r => { const l = r.querySelector('.lane').getBoundingClientRect(), d = r.querySelector('.dur').getBoundingClientRect(); return d.left < l.left - 0.5 || d.right > l.right + 0.5; }).map(r => r.querySelector('.dur').textContent)",
    );
    assert_eq!(clipped, json!([]), "labels across the lane's edge");
    assert_eq!(
        ui.text(".rows .row[data-index='0'] .dur"),
        "100 ms",
        "the root's label"
    );

    // The critical path: an RPC's client and server sections are one step (three sections
    // of one name would read as three steps), its network share said apart.
    let steps: Vec<String> = serde_json::from_value(
        ui.eval("[...document.querySelectorAll('.path ol.steps li')].map(li => li.textContent)"),
    )
    .unwrap();
    assert_eq!(
        steps,
        [
            "web GET /home5.00 ms",
            "api GET /items5.00 ms (network 500 µs)",
            "db SELECT30.0 ms",
            "api GET /items5.00 ms (network 500 µs)",
            "web GET /home5.00 ms",
            "api GET /items10.0 ms (network 1.00 ms)",
            "web GET /home2.00 ms",
            "web render36.0 ms",
            "web GET /home2.00 ms"
        ]
    );

    // Find: a word marks the spans it is in and dims the rest.
    find(&mut ui, "api");
    assert_eq!(
        rows(&mut ui, ".rows .row.match"),
        ["api GET /items", "api GET /items"]
    );
    assert_eq!(ui.count(".rows .row.dim"), 5);
    assert_eq!(ui.text(".find-count"), "2 matches");
    // Enter in the box goes to the first match, then the next; ◀ goes back.
    ui.focus("form.find input[name=find]");
    ui.press("Enter");
    ui.wait_for(
        "document.querySelector('.find-count').textContent === '1 of 2 matches'",
        "the first match chosen",
    );
    assert_eq!(ui.text(".detail h3"), "GET /items");
    assert!(ui.text(".detail").contains("out of stock"));
    ui.click("button[data-match=next]");
    ui.wait_for(
        "document.querySelector('.find-count').textContent === '2 of 2 matches'",
        "the second match",
    );
    ui.click("button[data-match=next]");
    ui.wait_for(
        "document.querySelector('.find-count').textContent === '1 of 2 matches'",
        "back round to the first",
    );
    // Terms: a service and a name, an attribute, a duration, errors only.
    find(&mut ui, "service:web name:items");
    assert_eq!(
        rows(&mut ui, ".rows .row.match"),
        ["web GET /items", "web GET /items"]
    );
    find(&mut ui, "http.status_code=500");
    assert_eq!(rows(&mut ui, ".rows .row.match"), ["api GET /items"]);
    find(&mut ui, ">=30ms");
    assert_eq!(
        rows(&mut ui, ".rows .row.match"),
        [
            "web GET /home",
            "web GET /items",
            "api GET /items",
            "db SELECT",
            "web render"
        ]
    );
    find(&mut ui, ">30ms");
    assert_eq!(ui.count(".rows .row.match"), 4, "SELECT lasted 30 ms");
    find(&mut ui, ">3parsecs");
    assert!(
        ui.text(".find-count").contains("not a duration"),
        "{}",
        ui.text(".find-count")
    );
    assert_eq!(ui.count(".rows .row.match"), 0);
    find(&mut ui, "");
    assert_eq!(ui.count(".rows .row.dim"), 0, "no find, nothing dimmed");
    ui.click("form.find input[name=errors]");
    ui.wait_for(
        "location.hash.includes('errors=1') && document.querySelector('.find-count').textContent === '1 of 1 match'",
        "errors only (the chosen span, the failed call, is the match)",
    );
    ui.click("form.find input[name=errors]");
    // Only matches: the matches and what leads to them, nothing else.
    find(&mut ui, "SELECT");
    ui.click("form.find input[name=only]");
    ui.wait_for(
        "location.hash.includes('only=1') && document.querySelectorAll('.rows .row').length === 4",
        "only the match and its ancestors",
    );
    assert_eq!(
        rows(&mut ui, ".rows .row"),
        [
            "web GET /home",
            "web GET /items",
            "api GET /items",
            "db SELECT"
        ]
    );
    ui.screenshot("trace-find");
    // "/" goes to the find box.
    assert_eq!(ui.open(&format!("#/trace/{}", hex(SHOP))), "ready");
    ui.focus(".rows");
    ui.press("/");
    assert_eq!(
        ui.eval("document.activeElement.name"),
        json!("find"),
        "/ focuses the find box"
    );

    // The span table: one row per service and span name, self time first.
    ui.click("button[data-view=table]");
    ui.wait_for(
        "document.querySelector('table.span-groups')",
        "the span table",
    );
    assert_eq!(
        ui.eval("document.querySelector('.trace-body').offsetHeight"),
        json!(0),
        "the time line is out of sight"
    );
    let groups = |ui: &mut Chromium| -> Vec<String> {
        serde_json::from_value(ui.eval(
            "[...document.querySelectorAll('table.span-groups tbody tr')].map(r => r.dataset.group)",
        ))
        .unwrap()
    };
    assert_eq!(
        groups(&mut ui),
        [
            "web render",
            "db SELECT",
            "api GET /items",
            "web GET /home",
            "web GET /items"
        ]
    );
    assert_eq!(
        ui.eval("document.querySelector('table.span-groups tbody tr td:nth-child(4)').textContent"),
        json!("36.0 ms")
    );
    // A column's first click sorts the most first: two spans each, api before web.
    ui.click("table.span-groups th button[data-order='-count']");
    ui.wait_for("location.hash.includes('sort=-count')", "sorted by count");
    assert_eq!(
        groups(&mut ui)[..2],
        ["api GET /items".to_string(), "web GET /items".to_string()]
    );
    ui.screenshot("trace-span-table");
    // A row, chosen by keyboard, shows its spans on the time line.
    ui.focus("table.span-groups tbody tr");
    ui.press("Enter");
    ui.wait_for(
        "!document.querySelector('.trace-body').hidden && document.querySelector('.find-count').textContent === '2 matches'",
        "the group's spans found on the time line",
    );
    assert_eq!(
        rows(&mut ui, ".rows .row.match"),
        ["api GET /items", "api GET /items"]
    );

    // The flame graph: a frame per stack, as wide as the self time below it.
    ui.click("button[data-view=flame]");
    ui.wait_for("document.querySelector('.flame .frame')", "the flame graph");
    assert_eq!(ui.count(".flame .frame"), 6);
    let width = |ui: &mut Chromium, text: &str| -> f64 {
        ui.eval(&format!(
            "(() => {{ const f = [...document.querySelectorAll('.flame .frame')].find(e => e.textContent === {}); return f ? f.getBoundingClientRect().width / document.querySelector('.flame').clientWidth : -1; }})()",
            json!(text)
        ))
        .as_f64()
        .unwrap()
    };
    let render = width(&mut ui, "web render");
    assert!((render - 0.36).abs() < 0.01, "render is 36% wide: {render}");
    let calls = width(&mut ui, "web GET /items");
    assert!(
        (calls - 0.50).abs() < 0.01,
        "the calls are 50% wide: {calls}"
    );
    ui.screenshot("trace-flame");
    // Zoomed into the calls (Enter on the frame): they fill the width, render is gone,
    // and the way back (their ancestors) stays above.
    ui.eval("[...document.querySelectorAll('.flame .frame')].find(e => e.textContent === 'web GET /items').focus(); true");
    ui.press("Enter");
    ui.wait_for(
        "location.hash.includes('frame=') && document.querySelectorAll('.flame .frame').length === 5",
        "the zoomed flame graph",
    );
    assert!((width(&mut ui, "web GET /items") - 1.0).abs() < 0.01);
    assert!(
        (width(&mut ui, "db SELECT") - 0.6).abs() < 0.01,
        "30 of 50 ms"
    );
    assert_eq!(width(&mut ui, "web render"), -1.0);
    ui.click(".flame-focus button");
    ui.wait_for(
        "!document.querySelector('.trace-body').hidden && document.querySelector('.find-count').textContent === '2 matches'",
        "the frame's spans on the time line",
    );

    // The download, as Jaeger UI's JSON and as OTLP's, each a file named for the trace.
    ui.eval(
        "window.saved = {}; HTMLAnchorElement.prototype.click = function () { const name = this.download; fetch(this.href).then(r => r.text()).then(t => { window.saved[name] = t; }); }; true",
    );
    let id = hex(SHOP);
    for (format, file) in [("jaeger", "jaeger"), ("otlp-json", "otlp")] {
        ui.click(&format!("button[data-download='{format}']"));
        let name = format!("trace-{id}.{file}.json");
        let text = ui.wait_for(&format!("window.saved[{}]", json!(name)), "the saved file");
        let body: Value = serde_json::from_str(text.as_str().unwrap()).unwrap();
        let spans = if format == "jaeger" {
            assert_eq!(body["data"][0]["traceID"], json!(id));
            body["data"][0]["spans"].as_array().unwrap().len()
        } else {
            body["resourceSpans"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|r| r["scopeSpans"].as_array().unwrap())
                .map(|s| s["spans"].as_array().unwrap().len())
                .sum()
        };
        assert_eq!(spans, 7, "{format}");
    }
    let disposition = ui.eval(&format!(
        "fetch('/api/traces/{id}/export?format=otlp-json').then(r => r.headers.get('content-disposition'))"
    ));
    assert_eq!(
        disposition,
        json!(format!("attachment; filename=\"trace-{id}.json\""))
    );
    let (status, body) = server.get(&format!("/api/traces/{id}/export?format=yaml"));
    assert_eq!(status, 400);
    assert!(body["error"].as_str().unwrap().contains("format"), "{body}");
    let (status, _) = server.get(&format!("/api/traces/{}/export", hex(0x99)));
    assert_eq!(status, 404);

    // Raw and skew-corrected durations, both shown, each saying which.
    assert_eq!(ui.open(&format!("#/trace/{}", hex(SKEWED))), "ready");
    assert_eq!(
        ui.text(".trace-head .durations"),
        "30.0 ms skew-corrected (44.5 ms as recorded)"
    );
    assert_eq!(
        ui.open(&format!("#/trace/{}?adjust=none", hex(SKEWED))),
        "ready"
    );
    assert_eq!(
        ui.text(".trace-head .durations"),
        "44.5 ms as recorded (30.0 ms skew-corrected)"
    );
    assert_eq!(ui.open(&format!("#/trace/{}", hex(SHOP))), "ready");
    assert_eq!(ui.text(".trace-head .durations"), "100 ms");
    // The list, sorted on recorded durations, gives the corrected one beside it.
    let (_, d) = server.get(&format!("/api/durations?ids={},{}", hex(SKEWED), hex(0x99)));
    assert_eq!(
        d["durations"],
        json!([{ "traceId": hex(SKEWED), "recorded": 44_500_000, "corrected": 30_000_000 }]),
        "an unknown id is left out"
    );
    assert_eq!(ui.open("#/search?tab=traces&lookback=1h"), "ready");
    let row = format!("table.traces tr[data-id='{}']", hex(SKEWED));
    ui.wait_for(
        &format!("document.querySelector(\"{row} .corrected\")?.textContent === '30.0 ms'"),
        "the corrected duration in the list",
    );
    assert!(ui.text(&row).contains("44.5 ms"), "{}", ui.text(&row));
    let shop = format!("table.traces tr[data-id='{}'] .corrected", hex(SHOP));
    assert_eq!(ui.text(&shop), "same");

    // A 64-bit trace id, shown in its own 16 digits, in the list and on its page; the
    // short form opens it too.
    assert_eq!(
        ui.open("#/search?lookback=1h&service=legacy&tab=traces"),
        "ready"
    );
    assert_eq!(
        ui.text("table.traces tbody tr td:nth-child(2)"),
        "1234abcd…"
    );
    assert_eq!(ui.open("#/trace/1234abcd5678ef01"), "ready");
    assert_eq!(ui.text(".trace-head code.id"), "1234abcd5678ef01");
    assert!(ui.exceptions.is_empty(), "{:?}", ui.exceptions);
}
