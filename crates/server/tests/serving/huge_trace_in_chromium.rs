//! Traces of 100 001 and 1 000 001 spans, generated here, opened in headless Chromium: the
//! page is an outline (the server sends a summary and the rows that fit a few screens, each
//! closed row summing its subtree), rows open and close by mouse and keyboard, and a list
//! longer than the budget ends in a row that fetches the next of it. The open timings are
//! printed for BENCHMARKS.md (`--release -- --nocapture`), not asserted.

use std::time::Duration;

use crate::chromium;
use crate::common;

use causeway_model::{Span, SpanId, SpanKind, Status, TraceId};
use causeway_testkit::now_ns;
use chromium::Chromium;
use common::TestServer;
use serde_json::{json, Value};

const MS: u64 = 1_000_000;
const HUNDRED_K: u128 = 0x00a1_0000_0000_0000_0000_0000_0000_0001;
const MILLION: u128 = 0x00a2_0000_0000_0000_0000_0000_0000_0001;
/// Opening a million spans in a debug build reads them all first.
const PATIENCE: Duration = Duration::from_secs(180);

/// A nightly import: one root, `chunks` chunks, each of `rows` rows parsed by a worker,
/// each row an INSERT into db and a GET from cache. Every hundredth row's INSERT fails.
/// `1 + chunks * (1 + 3 * rows)` spans, appended to `server`'s store as they are made.
fn import(server: &TestServer, trace: u128, chunks: u64, rows: u64, t: u64) -> u64 {
    let tid = TraceId::new(trace).unwrap();
    let mut next = 0u64;
    let mut span = |parent: Option<SpanId>, service: &str, name: &str, kind, start, end| {
        next += 1;
        let mut s = Span::new(
            tid,
            SpanId::new(next).unwrap(),
            parent,
            name,
            service,
            start,
            end,
        );
        s.kind = kind;
        s.host = format!("{service}-1").into();
        s
    };
    let mut batch = Vec::with_capacity(100_000);
    let mut total = 0;
    let mut flush = |batch: &mut Vec<Span>, last: bool| {
        if batch.len() >= 100_000 || (last && !batch.is_empty()) {
            total += batch.len() as u64;
            append(server, std::mem::take(batch));
        }
    };
    let root = span(
        None,
        "batch",
        "nightly import",
        SpanKind::Server,
        t,
        t + chunks * 10 * MS,
    );
    let root_id = root.span_id;
    batch.push(root);
    for c in 0..chunks {
        let at = t + c * 10 * MS;
        let chunk = span(
            Some(root_id),
            "batch",
            "import chunk",
            SpanKind::Internal,
            at,
            at + 9 * MS,
        );
        let chunk_id = chunk.span_id;
        batch.push(chunk);
        for r in 0..rows {
            let rs = at + r * (9 * MS / rows);
            let row = span(
                Some(chunk_id),
                "worker",
                "parse row",
                SpanKind::Internal,
                rs,
                rs + 2_000,
            );
            let row_id = row.span_id;
            batch.push(row);
            let mut insert = span(
                Some(row_id),
                "db",
                "INSERT rows",
                SpanKind::Client,
                rs + 100,
                rs + 1_500,
            );
            if r % 100 == 7 {
                insert.status = Status::Error("disk full".into());
            }
            batch.push(insert);
            batch.push(span(
                Some(row_id),
                "cache",
                "GET key",
                SpanKind::Client,
                rs + 1_600,
                rs + 1_900,
            ));
            flush(&mut batch, false);
        }
    }
    flush(&mut batch, true);
    total
}

/// Appends `spans`, waiting while the store is busy writing blocks (as a client retries
/// a 503).
fn append(server: &TestServer, spans: Vec<Span>) {
    for _ in 0..600 {
        match server.server().store.append(spans.clone()) {
            Err(causeway_store::StoreError::Busy) => std::thread::sleep(Duration::from_millis(500)),
            done => return done.unwrap(),
        }
    }
    panic!("the store stayed busy for five minutes");
}

fn hex(id: u128) -> String {
    format!("{id:032x}")
}

/// The page's rows in memory (fetched), and the ones in the DOM.
fn rows(ui: &mut Chromium) -> (u64, u64) {
    let fetched = ui
        .eval("document.querySelector('section.outline').outline.rows.length")
        .as_u64()
        .unwrap();
    (fetched, ui.count(".rows .row"))
}

/// Scrolls the outline so that row `k` is in sight.
fn scroll_to(ui: &mut Chromium, k: u64) {
    ui.eval(&format!(
        "document.querySelector('.rows').scrollTop = {k} * 24 - 48; true"
    ));
}

fn opened(ui: &mut Chromium, id: &str) -> Value {
    ui.wait_for(
        &format!("window.causewayTiming && window.causewayTiming.trace === '{id}' && window.causewayTiming"),
        "the open timing",
    )
}

#[test]
fn traces_of_a_hundred_thousand_and_a_million_spans_open_as_outlines() {
    let server = TestServer::start("huge-trace");
    let t = now_ns() - 3_600_000 * MS;
    assert_eq!(import(&server, HUNDRED_K, 100, 333, t), 100_001);
    assert_eq!(
        import(&server, MILLION, 100, 3_333, t + 2_000 * MS),
        1_000_001
    );
    // Settled, as a store is some time after a trace arrives: every span in blocks, the
    // blocks merged; the timings below are of reading them, not of writing them.
    let causeway_server::Backend::Embedded(store) = &server.server().backend else {
        panic!("the test server runs the embedded store");
    };
    store.flush().unwrap();
    while store.compact().unwrap() {}

    // The API: a small `whole` is an outline; its rows are within the budget.
    let (status, body) = server.get(&format!("/api/traces/{}/outline?rows=50", hex(HUNDRED_K)));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["spanCount"], json!(100_001));
    assert!(body.get("whole").is_none());
    assert_eq!(body["rows"].as_array().unwrap().len(), 50);
    assert_eq!(body["summary"]["errors"], json!(400));
    // The critical path: its first 200 steps, and how many there are.
    let steps = body["criticalPath"]["sections"].as_array().unwrap().len() as u64;
    let all = body["criticalPath"]["sectionCount"].as_u64().unwrap();
    assert!(steps == all.min(200) && all > 0, "{steps} of {all}");
    let (status, body) = server.get(&format!(
        "/api/traces/{}/outline?rows=20000",
        hex(HUNDRED_K)
    ));
    assert_eq!(status, 400, "rows is bounded: {body}");

    let mut ui = Chromium::launch("huge-trace");
    ui.goto(&server.api_url("/"));

    // 100 001 spans: the root, its hundred chunks open, and as many of their rows as fit
    // 2000 rows (five chunks' worth, breadth first), then rows of the first of those.
    let id = hex(HUNDRED_K);
    assert_eq!(ui.open_within(&format!("#/trace/{id}"), PATIENCE), "ready");
    let timing = opened(&mut ui, &id);
    println!(
        "100K-span trace opened in {:.0} ms",
        timing["openMs"].as_f64().unwrap()
    );
    assert!(
        ui.text(".trace-head .summary").contains("100,001 spans"),
        "{}",
        ui.text(".trace-head .summary")
    );
    assert!(ui.text(".trace-head .summary").contains("400 errors"));
    let (fetched, drawn) = rows(&mut ui);
    assert_eq!(fetched, 2_000);
    assert!(drawn > 10 && drawn < 200, "{drawn} rows in the DOM");
    let services: Vec<String> = serde_json::from_value(ui.eval(
        "[...document.querySelectorAll('.outline-services tbody tr')].map(r => r.innerText.replace(/\\s+/g, ' ').trim())",
    ))
    .unwrap();
    assert_eq!(services.len(), 4, "{services:?}");
    assert!(
        services.iter().any(|s| s.starts_with("db 33,300 400")),
        "{services:?}"
    );
    // The span table over all of it, from the server: five kinds of span; sorted by count.
    assert_eq!(ui.count(".outline-groups table.span-groups tbody tr"), 5);
    ui.click(".outline-groups button.sort[data-order='-count']");
    let first = ui.text(".outline-groups table.span-groups tbody tr:first-child");
    assert!(first.contains("33,300"), "{first}");
    assert!(!first.contains("nightly import"), "{first}");
    ui.screenshot("huge-trace-100k");

    // The root chosen: what is below it.
    ui.click(".rows .row:first-child .op");
    assert!(
        ui.text(".detail").contains("100,000 spans in 100 children"),
        "{}",
        ui.text(".detail")
    );
    // The sixth chunk is the first closed one: it stands for its 999 spans. Opened, they
    // are rows (its 333 rows, each with its two calls); closed again, they go.
    let sixth = ui
        .eval("document.querySelector('section.outline').outline.rows.findIndex(r => r.span && r.span.name === 'import chunk' && !r.open)")
        .as_u64()
        .unwrap();
    assert_eq!(sixth, 1 + (1 + 333 + 117 * 2) + 4 * (1 + 333));
    scroll_to(&mut ui, sixth);
    let fold = format!(".rows button.fold[data-fold='{sixth}']");
    ui.wait_for(
        &format!("document.querySelector(\"{fold}\")"),
        "the sixth chunk in sight",
    );
    assert!(ui
        .text(&format!(".rows .row[data-row='{sixth}']"))
        .contains("+999"));
    ui.click(&fold);
    ui.wait_for(
        "document.querySelector('section.outline').outline.rows.length === 2999",
        "the chunk's rows",
    );
    ui.click(&fold);
    ui.wait_for(
        "document.querySelector('section.outline').outline.rows.length === 2000",
        "the chunk closed",
    );
    // By keyboard: the chunk chosen, opened with →, closed with ←; ↓ and ↑ move.
    ui.click(&format!(".rows .row[data-row='{sixth}'] .op"));
    ui.focus(".rows");
    ui.press("ArrowRight");
    ui.wait_for(
        "document.querySelector('section.outline').outline.rows.length === 2999",
        "the chunk opened by keyboard",
    );
    ui.press("ArrowLeft");
    ui.wait_for(
        "document.querySelector('section.outline').outline.rows.length === 2000",
        "the chunk closed by keyboard",
    );
    ui.press("ArrowUp");
    assert_eq!(ui.text(".detail h3"), "parse row");
    ui.press("ArrowDown");
    ui.press("ArrowDown");
    assert_eq!(ui.text(".detail h3"), "import chunk");
    assert_eq!(ui.text(".rows .row.selected .op"), "import chunk");

    // Collapsed to services: the chunks are batch's own work, folded into the root, whose
    // rows are where the worker's work begins: 33 300 of them, 1 998 listed and a row for
    // the rest.
    ui.click("button[data-toggle=services]");
    ui.wait_for(
        "location.hash.includes('tree=services') && document.getElementById('view').dataset.state === 'ready' && document.querySelector('section.outline')",
        "the outline collapsed to services",
    );
    assert_eq!(rows(&mut ui).0, 2_000);
    let second: Vec<Value> = serde_json::from_value(ui.eval(
        "(() => { const r = document.querySelector('section.outline').outline.rows; return [r[1].span.name, r[1].depth, r[1].children, r[1999].more]; })()",
    ))
    .unwrap();
    assert_eq!(
        second,
        [json!("parse row"), json!(1), json!(2), json!(31_302)]
    );

    // 1 000 001 spans: the root and its hundred chunks; no chunk's 3 333 rows fit what is
    // left of 2000, so the first chunk shows 1 898 of them and a row for the 1 435 more.
    let id = hex(MILLION);
    assert_eq!(ui.open_within(&format!("#/trace/{id}"), PATIENCE), "ready");
    let timing = opened(&mut ui, &id);
    let heap = ui.eval("performance.memory ? performance.memory.usedJSHeapSize : 0");
    println!(
        "1M-span trace opened in {:.0} ms ({} rows fetched; JS heap {:.1} MB)",
        timing["openMs"].as_f64().unwrap(),
        timing["rows"],
        heap.as_f64().unwrap_or(0.0) / 1e6
    );
    assert!(ui.text(".trace-head .summary").contains("1,000,001 spans"));
    assert_eq!(rows(&mut ui).0, 2_000);
    ui.screenshot("huge-trace-1m");
    let more_at = ui
        .eval(
            "document.querySelector('section.outline').outline.rows.findIndex(r => r.more != null)",
        )
        .as_u64()
        .unwrap();
    assert_eq!(more_at, 2 + 1_898);
    assert_eq!(ui.count(".rows .row.more"), 0, "out of sight");
    scroll_to(&mut ui, more_at);
    ui.wait_for(
        "document.querySelector('.rows .row.more button.more')",
        "the more row in sight",
    );
    assert!(
        ui.text(".rows .row.more").contains("1,435 more"),
        "{}",
        ui.text(".rows .row.more")
    );
    // The rest of the chunk: its 1 435 rows, and the calls of as many as fit.
    ui.click(".rows .row.more button.more");
    ui.wait_for_within(
        "document.querySelector('section.outline').outline.rows.length === 1999 + 1435 + 282 * 2",
        "the rest of the chunk's rows",
        PATIENCE,
    );
    // Another chunk opened: 2000 of its rows and a row for the rest.
    let second = ui
        .eval("document.querySelector('section.outline').outline.rows.findIndex(r => r.span && r.span.name === 'import chunk' && !r.open)")
        .as_u64()
        .unwrap();
    scroll_to(&mut ui, second);
    let fold = format!(".rows button.fold[data-fold='{second}']");
    ui.wait_for(
        &format!("document.querySelector(\"{fold}\")"),
        "the second chunk in sight",
    );
    ui.click(&fold);
    ui.wait_for_within(
        "document.querySelector('section.outline').outline.rows.length === 1999 + 1435 + 282 * 2 + 2001",
        "the second chunk's first rows",
        PATIENCE,
    );
    assert!(ui.exceptions.is_empty(), "{:?}", ui.exceptions);
}
