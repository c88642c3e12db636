//! The web UI in headless Chromium, against a server holding known traces: each page
//! loads, search and its filters, a pattern's graph and histogram, a trace's time line and
//! critical path, skew correction, folding, a 10K-span trace, dependencies, compare, and
//! the error and empty states. Screenshots go to `target/ui-screenshots/`.

use crate::chromium;
use crate::common;

use std::time::Duration;

use causeway_model::logs::{log_event, LOG_RECORDS};
use causeway_model::{Event, KeyValue, Source, Span, SpanId, SpanKind, Status, TraceId};
use causeway_testkit::{now_ns, TraceBuilder};
use chromium::Chromium;
use common::TestServer;

const MS: u64 = 1_000_000;
/// GET /home traces, of which every tenth (from the fourth) takes the slow path.
const HOMES: u64 = 40;
const SLOW: [u64; 4] = [3, 13, 23, 33];
/// The GET /home trace whose database read fails.
const FAILED: u64 = 7;
const BUYS: u64 = 10;
/// The trace whose parent links form a cycle.
const CYCLE: u128 = 0x4000;
const INFERRED: u128 = 0x5000;
/// Requests stitched from logs.
const STITCHED: u64 = 8;
/// 2^53 + 1: the first integer a double cannot hold.
const BLOCK_ID: i64 = 9_007_199_254_740_993;
/// db-2's clock runs this far ahead: its server spans seem to start after their client
/// spans ended, which only skew explains (a server that merely outlives its client does not
/// count as skew).
const DB2_AHEAD: u64 = 25 * MS;

/// A trace's builder, its span ids apart from every other trace's.
fn builder(trace: u128) -> TraceBuilder {
    TraceBuilder::new(trace).ids_from(((trace as u64) << 20) + 1)
}

fn home(i: u64, t: u64) -> Vec<Span> {
    let slow = if SLOW.contains(&i) { 200 * MS } else { 0 };
    let mut b = builder(0x1000 + i as u128);
    let root = b.root("web", "web-1", "GET /home", t, t + 20 * MS + slow);
    b.last().attributes = vec![
        KeyValue::new("http.route", "/home"),
        KeyValue::new(
            "user.tier",
            if i.is_multiple_of(2) { "gold" } else { "free" },
        ),
    ];
    let api = b.rpc(
        root,
        ("web", "web-1"),
        ("api", "api-1"),
        "GET /items",
        t + MS,
        t + 19 * MS + slow,
        0,
    );
    b.last().events = vec![Event {
        time: t + 3 * MS,
        name: "cache miss".into(),
        attributes: vec![KeyValue::new("key", format!("items:{i}"))],
    }];
    // An integer past 2^53, which a plain JSON.parse would round to ...992.
    b.last()
        .attributes
        .push(KeyValue::new("block.id", BLOCK_ID));
    let db = b.rpc(
        api,
        ("api", "api-1"),
        ("db-1", "db-1"),
        "SELECT items",
        t + 2 * MS,
        t + 8 * MS,
        0,
    );
    if i == FAILED {
        b.get(db).status = Status::Error("checksum mismatch".into());
    }
    if slow > 0 {
        b.span(
            Some(api),
            "api",
            "api-1",
            SpanKind::Internal,
            "rebuild index",
            t + 9 * MS,
            t + 9 * MS + slow,
        );
    }
    let mut spans = b.spans();
    if i == SLOW[0] {
        // A log record of the api span, arrived apart from it (as OTLP logs do).
        let mut carrier = Span::new(
            spans[0].trace_id,
            api,
            None,
            LOG_RECORDS,
            "api",
            t + 4 * MS,
            t + 4 * MS,
        );
        carrier.source = Source::Logs;
        carrier.events = vec![log_event(
            t + 4 * MS,
            "items listed".into(),
            Some("WARN"),
            vec![],
        )];
        spans.push(carrier);
    }
    spans
}

fn buy(i: u64, t: u64) -> Vec<Span> {
    let mut b = builder(0x2000 + i as u128);
    let root = b.root("web", "web-1", "POST /buy", t, t + 30 * MS);
    let api = b.rpc(
        root,
        ("web", "web-1"),
        ("api", "api-1"),
        "POST /orders",
        t + MS,
        t + 29 * MS,
        0,
    );
    for (r, skew) in [("db-1", 0), ("db-2", DB2_AHEAD), ("db-3", 0)] {
        b.rpc(
            api,
            ("api", "api-1"),
            (r, r),
            "WRITE block",
            t + 2 * MS,
            t + 20 * MS,
            skew,
        );
    }
    b.spans()
}

/// One trace of 10 001 spans: 100 chunks, each a call whose server parses 98 rows.
fn big(t: u64) -> Vec<Span> {
    let mut b = builder(0x3000);
    let root = b.root("importer", "batch-1", "import batch", t, t + 1_000 * MS);
    for c in 0..100 {
        let start = t + c * 10 * MS;
        let server = b.rpc(
            root,
            ("importer", "batch-1"),
            ("loader", "load-1"),
            "load chunk",
            start,
            start + 10 * MS,
            0,
        );
        for r in 0..98 {
            let s = start + MS + r * 80_000;
            b.span(
                Some(server),
                "loader",
                "load-1",
                SpanKind::Internal,
                &format!("parse row {r}"),
                s,
                s + 70_000,
            );
        }
    }
    b.spans()
}

fn hex(trace: u128) -> String {
    TraceId::new(trace).unwrap().to_string()
}

fn load(server: &TestServer) {
    let t0 = now_ns() - 10 * 60 * 1_000 * MS;
    let mut spans = Vec::new();
    for i in 0..HOMES {
        spans.extend(home(i, t0 + i * 100 * MS));
    }
    for i in 0..BUYS {
        spans.extend(buy(i, t0 + 5_000 * MS + i * 100 * MS));
    }
    spans.extend(big(t0 + 7_000 * MS));
    // Two hours back, out of the windows the search checks count.
    spans.extend(cycle(now_ns() - 2 * 3_600_000 * MS));
    spans.extend(inferred(now_ns() - 2 * 3_600_000 * MS));
    spans.extend(stitched(now_ns() - 2 * 3_600_000 * MS));
    server.server().store.append(spans).unwrap();
    report_stitching(server);
}

/// Eight requests stitched from two nodes' logs (JSON lines, as `causeway logs` reads
/// them): web receives an order, db writes it (odd orders miss its cache first), web
/// answers.
fn stitched(t: u64) -> Vec<Span> {
    use causeway_logflow::{corpus::Corpus, drain::Options, ids, links, stitch, traces};
    let (mut web, mut db) = (String::new(), String::new());
    let line = |at: u64, msg: String| {
        format!(
            "{{\"ts\": {}, \"level\": \"INFO\", \"msg\": \"{msg}\"}}\n",
            at as f64 / 1e9
        )
    };
    for k in 0..STITCHED {
        let (at, order) = (t + k * 500 * MS, 7000 + k);
        web += &line(at, format!("received order {order}"));
        if k % 2 == 1 {
            db += &line(at + 2 * MS, format!("cache miss for order {order}"));
        }
        db += &line(at + 5 * MS, format!("wrote order {order}"));
        // A stack frame: a line with no time, part of the line before.
        db += "\tat db.Store.write(Store.java:12)\n";
        web += &line(at + (20 + 10 * k) * MS, format!("order {order} done"));
    }
    let files = [
        ("web.log".to_string(), web.into_bytes()),
        ("db.log".to_string(), db.into_bytes()),
    ];
    let corpus = Corpus::read(&files, Options::default());
    let ranked = ids::rank(&corpus);
    let learned = links::learn(&corpus, &links::LinkOptions::default());
    let requests = stitch::stitch(
        &corpus,
        &ranked,
        &learned,
        &stitch::StitchOptions::default(),
    );
    traces::spans(&corpus, &files, &requests, 7)
}

/// The report `causeway logs --collector` sends beside the requests.
fn report_stitching(server: &TestServer) {
    let identifier = |name: &str, taken: bool, point: &str| {
        serde_json::json!({
            "template": 0, "parameter": 0, "log_point": point, "name": name, "taken": taken,
            "score": if taken { 1.0 } else { 0.1 }, "lines": 16, "distinct": 8, "shared": 1.0,
            "on_several_nodes": 1.0, "bursts": 1.0, "lifetime_ms": 25.0, "examples": ["7000", "7001"],
            "named_request_id": name == "request_id",
        })
    };
    let end = |file: &str, point: &str| serde_json::json!({"file": file, "template": 0, "parameter": 0, "log_point": point});
    let report = serde_json::json!({
        "run": "0000000000000007", "files": 2, "lines": 28, "requests": 8,
        "identifiers": [identifier("order", true, "received order <NUM>"), identifier("miss", false, "cache miss for order <NUM>"),
                        identifier("request_id", false, "served request_id = <*>")],
        "links": [{"from": end("web.log", "received order <NUM>"), "to": end("db.log", "wrote order <NUM>"),
                   "window_ms": 10.0, "precision": 1.0, "matches": 8}],
    });
    let json = [("content-type", "application/json")];
    let (status, _, body) = server.post("/v1/logflow/report", &json, report.to_string().as_bytes());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    // Not a JSON object: refused, and the report kept stays.
    let (status, _, body) = server.post("/v1/logflow/report", &json, b"[1, 2]");
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
}

/// A path inferred from black-box messages, as `causeway infer` sends it: a client's
/// request to `web`, and web's call to an uncaptured `db` (a client span at web, db's
/// server span timed on web's clock) with db's answer.
fn inferred(t: u64) -> Vec<Span> {
    use causeway_model::attributes as a;
    let trace = TraceId::new(INFERRED).unwrap();
    let id = |n| SpanId::new(n).unwrap();
    let span = |n, parent, name: String, service: &str, start, end| {
        let mut s = Span::new(trace, id(n), parent, name, service, start, end);
        s.source = causeway_model::Source::Inferred { confidence: 0.62 };
        s
    };
    let mut web = span(1, None, "from curl".into(), "web", t, t + 4 * MS);
    web.kind = SpanKind::Server;
    web.attributes.extend([
        KeyValue::new(a::NET_PEER_NAME, "curl[7]@h0"),
        KeyValue::new(a::MESSAGE_SEND_NS, (t - MS / 5) as i64),
    ]);
    let mut call = span(2, Some(id(1)), "to db".into(), "web", t + MS, t + 3 * MS);
    call.kind = SpanKind::Client;
    call.attributes.push(KeyValue::new(a::NET_PEER_NAME, "db"));
    let mut db = span(3, Some(id(2)), "from web".into(), "db", t + MS, t + 3 * MS);
    db.kind = SpanKind::Server;
    db.attributes.extend([
        KeyValue::new(a::NET_PEER_NAME, "web[9]@h1"),
        KeyValue::new(a::MESSAGE_SEND_NS, (t + MS) as i64),
        KeyValue::new(a::UNTRACED, true),
        KeyValue::new(a::REPLY_RECV_NS, (t + 3 * MS) as i64),
    ]);
    vec![web, call, db]
}

/// A root and two spans whose parent links form a cycle (each names the other).
fn cycle(t: u64) -> Vec<Span> {
    let trace = TraceId::new(CYCLE).unwrap();
    let id = |n| SpanId::new(n).unwrap();
    let span = |n, parent, name: &str, start| {
        let mut s = Span::new(trace, id(n), parent, name, "loop", start, start + 5 * MS);
        s.host = "loop-1".into();
        s
    };
    vec![
        span(1, None, "root", t),
        span(2, Some(id(3)), "ping", t + MS),
        span(3, Some(id(2)), "pong", t + 2 * MS),
    ]
}

/// A page of four traces, sorted on the server over all of the window's: the four slow
/// ones lead, though the newest four are others; the page says how many there are, and a
/// column head sorts again in place (the same page, not scrolled), as the API sorts.
fn traces_sort_the_whole_window_in_place(server: &TestServer, ui: &mut Chromium) {
    let page = "#/search?lookback=1h&service=web&tab=traces&order=-duration&limit=4";
    assert_eq!(ui.open(page), "ready");
    let rows =
        || "[...document.querySelectorAll('table.traces tbody tr')].map((r) => r.dataset.id)";
    let mut shown: Vec<String> = serde_json::from_value(ui.eval(rows())).unwrap();
    shown.sort();
    let mut slow: Vec<String> = SLOW.iter().map(|i| hex(0x1000 + *i as u128)).collect();
    slow.sort();
    assert_eq!(shown, slow, "the four longest of the window");
    let summary = ui.text(".results .summary");
    assert!(
        summary.starts_with(&format!("1–4 of {} traces in the window", HOMES + BUYS)),
        "{summary}"
    );
    // The next page: the next four of the order, as the API's offset answers them.
    ui.click("a[data-page=next]");
    ui.wait_for(
        "document.querySelector('.results .summary')?.innerText.startsWith('5–8 of')",
        "the second page",
    );
    let (_, api) =
        server.get("/api/search?lookback=1h&service=web&order=-duration&limit=4&offset=4");
    let want: Vec<String> = api["traces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["traceId"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(want.len(), 4);
    let got: Vec<String> = serde_json::from_value(ui.eval(rows())).unwrap();
    assert_eq!(got, want, "the second page");
    let (status, body) =
        server.get("/api/search?lookback=1h&service=web&order=-duration&limit=20&offset=9990");
    assert_eq!(status, 400, "{body}");
    assert!(body["error"].as_str().unwrap().contains("offset"), "{body}");
    ui.click("a[data-page=previous]");
    ui.wait_for(
        "document.querySelector('.results .summary')?.innerText.startsWith('1–4 of')",
        "the first page again",
    );
    assert!(
        summary.contains("sorted by duration (longest first)"),
        "{summary}"
    );
    ui.eval("document.querySelector('section.search').dataset.kept = 'yes'; window.scrollTo(0, 60); true");
    let scrolled = ui.eval("window.scrollY");
    // A number's first click sorts the most first; the second, the fewest.
    for order in ["-spans", "spans"] {
        ui.eval("document.getElementById('view').dataset.state = 'navigating'; true");
        ui.click(&format!("table.traces th a[data-order=\"{order}\"]"));
        ui.wait_for(
            "document.getElementById('view').dataset.state === 'ready'",
            "the table sorted again",
        );
        let (_, api) = server.get(&format!(
            "/api/search?lookback=1h&service=web&order={order}&limit=4"
        ));
        let want: Vec<String> = api["traces"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["traceId"].as_str().unwrap().to_string())
            .collect();
        let got: Vec<String> = serde_json::from_value(ui.eval(rows())).unwrap();
        assert_eq!(got, want, "{order}");
        assert_eq!(
            ui.eval("document.querySelector('section.search')?.dataset.kept"),
            serde_json::json!("yes"),
            "the search page was drawn anew to sort"
        );
        assert_eq!(ui.eval("window.scrollY"), scrolled, "the page jumped");
        let mark = if order.starts_with('-') { "▼" } else { "▲" };
        assert!(ui
            .text("table.traces th[aria-sort=descending], table.traces th[aria-sort=ascending]")
            .contains(mark));
        assert!(ui
            .eval("location.hash")
            .as_str()
            .unwrap()
            .contains(&format!("order={order}")));
    }
    ui.screenshot("search-traces-sorted");
    // The patterns tab sorts its table in place too, in the browser.
    assert_eq!(ui.open("#/search?lookback=1h"), "ready");
    ui.eval("document.querySelector('section.search').dataset.kept = 'again'; true");
    ui.click("table.patterns th a[data-order=\"-spans\"]");
    ui.wait_for(
        "document.querySelector('table.patterns th[aria-sort=descending]')",
        "the patterns sorted by spans",
    );
    let spans: Vec<u64> = serde_json::from_value(ui.eval(
        "[...document.querySelectorAll('table.patterns tbody tr td:nth-child(4)')].map((c) => Number(c.innerText.replace(/,/g, '')))",
    ))
    .unwrap();
    assert!(spans.windows(2).all(|w| w[0] >= w[1]), "{spans:?}");
    assert_eq!(
        ui.eval("document.querySelector('section.search')?.dataset.kept"),
        serde_json::json!("again")
    );
}

#[test]
fn every_page_renders_what_the_api_answers() {
    let server = TestServer::start("ui");
    load(&server);
    every_page_renders(&server, "ui");
}

/// The same pages, each check the same, on a server whose store is a two-shard ClickHouse
/// cluster.
#[test]
fn every_page_renders_the_same_on_clickhouse() {
    let cluster = causeway_clickhouse::local_cluster::Cluster::start(2);
    let server = TestServer::start_on_clickhouse("ui-ch", &cluster.url("ui"));
    load(&server);
    server.wait_shipped();
    every_page_renders(&server, "ui-ch");
}

fn every_page_renders(server: &TestServer, name: &str) {
    let base = server.api_url("/");
    let mut ui = Chromium::launch(name);
    // The embedded store's screenshots keep their names; another backend's are prefixed.
    let shot = |page: &str| match name {
        "ui" => page.to_string(),
        _ => format!("{name}-{page}"),
    };
    ui.goto(&base);

    // Search: the patterns of the last hour, the table agreeing with the API.
    assert_eq!(ui.open("#/search"), "ready");
    let (_, api) = server.get("/api/patterns?lookback=1h&limit=200");
    let patterns = api["patterns"].as_array().unwrap();
    assert_eq!(ui.count("table.patterns tbody tr") as usize, patterns.len());
    let first = ui.text("table.patterns tbody tr td:nth-child(2)");
    assert!(
        first.contains("web") && first.contains(patterns[0]["rootOperation"].as_str().unwrap()),
        "{first}"
    );
    assert!(ui
        .text(".results .summary")
        .contains(&format!("{} traces", HOMES + BUYS + 1)));
    // The GET /home patterns are told apart: the slow one by the span only it has.
    let table = ui.text("table.patterns");
    assert!(table.contains("+api rebuild index"), "{table}");
    assert!(table.contains("the usual shape"), "{table}");
    ui.screenshot(&shot("search-patterns"));

    // Span name filter: only the slow traces run "rebuild index".
    assert_eq!(
        ui.open("#/search?lookback=1h&service=api&operation=rebuild%20index"),
        "ready"
    );
    assert!(
        ui.text(".results .summary")
            .starts_with(&format!("{} traces", SLOW.len())),
        "{}",
        ui.text(".results .summary")
    );
    assert_eq!(
        ui.eval("document.querySelector('select[name=operation]').value"),
        "rebuild index"
    );
    // Attribute filter: half of the GET /home traces are gold.
    assert_eq!(
        ui.open("#/search?lookback=1h&tags=user.tier%3Dgold"),
        "ready"
    );
    assert!(ui
        .text(".results .summary")
        .starts_with(&format!("{} traces", HOMES / 2)));
    // Source filter: the one inferred trace (two hours old).
    assert_eq!(
        ui.open("#/search?lookback=3h&source=inferred&tab=traces"),
        "ready"
    );
    assert_eq!(ui.count("table.traces tbody tr"), 1);
    assert_eq!(
        ui.eval("document.querySelector('table.traces tbody tr').dataset.id"),
        hex(INFERRED)
    );
    assert_eq!(
        ui.eval("document.querySelector('select[name=source]').value"),
        "inferred"
    );
    // The traces tab, sorted by duration, longest first: a slow one leads.
    assert_eq!(
        ui.open("#/search?lookback=1h&service=web&tab=traces&order=-duration"),
        "ready"
    );
    assert_eq!(ui.count("table.traces tbody tr"), HOMES + BUYS);
    let top = ui.eval("document.querySelector('table.traces tbody tr').dataset.id");
    assert!(
        SLOW.iter().any(|i| top == hex(0x1000 + *i as u128)),
        "{top}"
    );
    ui.screenshot(&shot("search-traces"));
    traces_sort_the_whole_window_in_place(server, &mut ui);

    // A pattern: the graph has one box per node of the API's answer; a histogram bar
    // lists example traces, and one opens.
    let slow_id = hex(0x1000 + SLOW[0] as u128);
    let (_, slow_patterns) = server.get("/api/patterns?lookback=1h&operation=rebuild%20index");
    let pattern_id = slow_patterns["patterns"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let (_, detail) = server.get(&format!("/api/patterns/{pattern_id}?lookback=1h"));
    assert_eq!(
        ui.open(&format!("#/pattern/{pattern_id}?lookback=1h")),
        "ready"
    );
    assert_eq!(
        ui.count("svg.pattern-graph g.node") as usize,
        detail["nodes"].as_array().unwrap().len()
    );
    assert!(ui.text("section.pattern").contains("rebuild index"));
    let bucket = detail["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .position(|b| b["count"].as_u64() > Some(0))
        .unwrap();
    // Chosen with the keyboard: the bar takes the focus, Enter chooses it. The page is
    // updated in place: the same page element, scrolled where it was.
    ui.eval("document.querySelector('section.pattern').dataset.kept = 'yes'; window.scrollTo(0, 120); true");
    let scrolled = ui.eval("window.scrollY");
    ui.eval(&format!(
        "document.querySelector('g.bar[data-bucket=\"{bucket}\"]').focus({{preventScroll: true}}); true"
    ));
    ui.press("Enter");
    ui.wait_for("document.querySelector('.examples li a')", "example links");
    assert_eq!(
        ui.eval("document.querySelector('section.pattern')?.dataset.kept"),
        serde_json::json!("yes"),
        "the pattern page was drawn anew for a bar"
    );
    assert_eq!(ui.eval("window.scrollY"), scrolled, "the page jumped");
    ui.wait_for(
        &format!("document.activeElement?.matches('g.bar[data-bucket=\"{bucket}\"]')"),
        "the focus on the chosen bar after the redraw",
    );
    ui.screenshot(&shot("pattern"));
    ui.eval("document.getElementById('view').dataset.state = 'navigating'; true");
    ui.click(".examples li a");
    ui.wait_for("document.getElementById('view').dataset.view === 'trace' && document.getElementById('view').dataset.state === 'ready'", "the example trace");
    let example = ui.eval("location.hash").as_str().unwrap().to_string();
    assert!(
        SLOW.iter()
            .any(|i| example.contains(&hex(0x1000 + *i as u128))),
        "{example}"
    );

    // A slow trace: its rows, the critical path through "rebuild index", followed step by step.
    assert_eq!(ui.open(&format!("#/trace/{slow_id}")), "ready");
    assert!(
        ui.text(".trace-head .summary").contains("6 spans"),
        "{}",
        ui.text(".trace-head .summary")
    );
    assert_eq!(ui.count(".rows .row"), 6);
    // Spans are chosen with the keyboard too, and the focus shows.
    ui.focus(".rows");
    ui.press("Tab");
    assert_eq!(
        ui.eval("document.activeElement.matches('.row') && getComputedStyle(document.activeElement).outlineStyle"),
        serde_json::json!("solid"),
        "a focused row shows its focus"
    );
    ui.press("Enter");
    ui.wait_for(
        "location.hash.includes('span=') && document.querySelector('.row.selected') && document.activeElement.matches('.row.selected')",
        "the span chosen with Enter",
    );
    // Enter again unchooses it, as a second click does.
    ui.press("Enter");
    ui.wait_for(
        "!location.hash.includes('span=') && !document.querySelector('.row.selected')",
        "the span unchosen with Enter",
    );
    let critical: Vec<String> = serde_json::from_value(
        ui.eval("[...document.querySelectorAll('.row.critical .op')].map(e => e.textContent)"),
    )
    .unwrap();
    assert!(
        critical.contains(&"rebuild index".to_string()),
        "{critical:?}"
    );
    assert!(ui.text(".path ol.steps").contains("rebuild index"));
    ui.click("button[data-step=next]");
    ui.wait_for(
        "document.querySelector('.row.selected')",
        "the first step selected",
    );
    assert_eq!(ui.text(".detail h3"), "GET /home");
    let steps = ui.count(".path ol.steps li");
    for _ in 1..steps {
        ui.click("button[data-step=next]");
    }
    ui.wait_for(
        "document.querySelector('ol.steps li:last-child.current')",
        "the last step",
    );
    assert!(
        ui.eval("location.hash").as_str().unwrap().contains("span="),
        "the step is in the URL"
    );
    // The client span of an RPC shows its server's time and the network's.
    ui.eval("document.querySelector('.row .bar.rpc').closest('.row').click(); true");
    ui.wait_for(
        "document.querySelector('.detail')?.innerText.includes('Network and queueing')",
        "server and network time",
    );
    assert!(ui.count(".bar.rpc .server-part") > 0);
    ui.screenshot(&shot("trace"));
    // Folding the root hides the rest, in the URL too.
    ui.click(".row button.fold");
    ui.wait_for(
        "document.querySelectorAll('.rows .row').length === 1",
        "the folded trace",
    );
    assert!(ui
        .eval("location.hash")
        .as_str()
        .unwrap()
        .contains("collapsed="));

    // Events of a span, on demand.
    assert_eq!(ui.open(&format!("#/trace/{slow_id}")), "ready");
    ui.eval("[...document.querySelectorAll('.row')].find(r => r.querySelector('.op').textContent === 'GET /items' && r.querySelector('.svc').textContent === 'api').click(); true");
    ui.wait_for(
        "document.querySelector('.detail')?.innerText.includes('cache miss')",
        "the span's event",
    );
    assert!(
        ui.text(".detail").contains("key = items:3"),
        "{}",
        ui.text(".detail")
    );
    assert!(
        ui.text(".detail").contains(&BLOCK_ID.to_string()),
        "every digit of an integer past 2^53: {}",
        ui.text(".detail")
    );
    // Its parent link was recorded by its own instrumentation.
    assert!(
        ui.text(".detail").contains("Parent link\trecorded"),
        "{}",
        ui.text(".detail")
    );
    // Its log line, sent apart from it, under Logs with its level, and on its time line.
    let detail = ui.text(".detail");
    assert!(
        detail.contains("LOGS") && detail.contains("WARN") && detail.contains("items listed"),
        "{detail}"
    );
    assert_eq!(ui.count(".detail .level-warn"), 1);
    assert_eq!(ui.count(".lane .event.log"), 1);

    // Clock skew: db-2 runs ahead; the corrected view names its offset, the raw one says raw.
    let buy_id = hex(0x2000);
    assert_eq!(ui.open(&format!("#/trace/{buy_id}")), "ready");
    let offsets = ui.text(".offsets");
    assert!(offsets.contains("db-2"), "{offsets}");
    assert!(
        offsets.contains("because server"),
        "the reason is shown: {offsets}"
    );
    assert_eq!(ui.open(&format!("#/trace/{buy_id}?adjust=none")), "ready");
    assert!(ui.text(".offsets").starts_with("Raw times"));
    ui.screenshot(&shot("trace-raw-clocks"));

    // A cycle of parent links: every span drawn, once, and the tab stays responsive.
    assert_eq!(ui.open(&format!("#/trace/{}", hex(CYCLE))), "ready");
    assert_eq!(ui.count(".rows .row"), 3);
    for name in ["root", "ping", "pong"] {
        assert_eq!(
            ui.eval(&format!(
                "[...document.querySelectorAll('.rows .row .op')].filter(e => e.textContent === '{name}').length"
            )),
            1,
            "{name} drawn once"
        );
    }

    // An inferred trace (black-box linking) says so, with its path's probability, in the
    // header and in each span's detail.
    assert_eq!(ui.open(&format!("#/trace/{}", hex(INFERRED))), "ready");
    assert!(
        ui.text(".trace-head .summary")
            .contains("inferred from black-box messages, probability 0.62"),
        "{}",
        ui.text(".trace-head .summary")
    );
    ui.click(".rows .row");
    ui.wait_for(
        "[...document.querySelectorAll('.detail th')].some(e => e.textContent === 'Source')",
        "the span detail",
    );
    assert!(
        ui.text(".detail").contains("inferred (probability 0.62)"),
        "{}",
        ui.text(".detail")
    );
    // The root has no parent link; a child's is inferred with its path's probability.
    assert!(
        !ui.text(".detail").contains("Parent link"),
        "{}",
        ui.text(".detail")
    );
    ui.click(".rows .row:nth-child(2)");
    ui.wait_for(
        "document.querySelector('.detail')?.innerText.includes('Parent link')",
        "the child's detail",
    );
    assert!(
        ui.text(".detail")
            .contains("Parent link\tinferred (probability 0.62)"),
        "{}",
        ui.text(".detail")
    );
    ui.screenshot(&shot("trace-inferred"));

    // The Inferred page: the path's pattern, its timeline (web a box, db a diamond: it
    // was not captured), and web's delay before calling db.
    assert_eq!(ui.open("#/inferred"), "ready");
    assert!(
        ui.text("p.summary")
            .starts_with("1 inferred traces · 1 patterns"),
        "{}",
        ui.text("p.summary")
    );
    assert_eq!(ui.count("table.inferred-patterns tbody tr"), 1);
    assert_eq!(
        ui.text("table.inferred-patterns tbody tr td:nth-child(5)"),
        "curl>web[web>db[db>web]]"
    );
    assert_eq!(ui.count("svg.timeline text.lane-name"), 3);
    assert_eq!(ui.count("svg.timeline g.hop"), 3);
    assert_eq!(ui.count("svg.timeline g.untraced polygon"), 1);
    assert_eq!(ui.count("svg.timeline g.node-box"), 2);
    // The client's request took 200 µs on the network; web held it 1 ms before calling.
    // (SVG text has no innerText: its textContent is read.)
    let svg_text = |ui: &mut Chromium, selector: &str| {
        ui.eval(&format!(
            "document.querySelector({})?.textContent ?? ''",
            serde_json::json!(selector)
        ))
        .as_str()
        .unwrap_or_default()
        .to_string()
    };
    assert_eq!(
        svg_text(&mut ui, "svg.timeline g.hop[data-hop='0'] text.network"),
        "200 µs"
    );
    assert_eq!(
        svg_text(&mut ui, "svg.timeline g.node-box[data-hop='0'] text.delay"),
        "1.00 ms"
    );
    assert!(
        ui.text(".node-delay[data-node='web'] p")
            .contains("1 delays"),
        "{}",
        ui.text(".node-delays")
    );
    assert!(ui.count(&format!("a.example[href='#/trace/{}']", hex(INFERRED))) == 1);
    ui.screenshot(&shot("inferred"));

    // The Logs page: requests stitched from two nodes' logs, by log-point sequence, with
    // their latency histogram; an example opens as a trace whose lines are events; the
    // stitching report's identifier ranking.
    assert_eq!(ui.open("#/logs"), "ready");
    assert!(
        ui.text("p.summary").starts_with(&format!(
            "{STITCHED} requests stitched from logs · 2 log-point sequences"
        )),
        "{}",
        ui.text("p.summary")
    );
    assert_eq!(ui.count("table.log-sequences tbody tr"), 2);
    // Both flows begin at web's "received order"; the one with a cache miss is named by
    // it, as a line it printed.
    let flows = ui.text("table.log-sequences tbody");
    assert!(flows.contains("db: cache miss for order 70"), "{flows}");
    assert!(ui.count("div.histogram svg g.bar") >= 1);
    assert_eq!(ui.count("ol.log-sequence > li"), 2);
    // The sequence's log points are lines with their values; a click shows the template.
    let first_point = "ol.log-sequence code.point-line";
    assert!(
        ui.text(first_point).starts_with("received order 70"),
        "{}",
        ui.text(first_point)
    );
    ui.click(first_point);
    assert_eq!(ui.text(first_point), "received order <NUM>");
    assert_eq!(ui.count("table.log-identifiers tbody tr"), 3);
    assert_eq!(
        ui.text("table.log-identifiers tbody tr.taken td:nth-child(3)"),
        "order"
    );
    // A variable named as a request id says so.
    assert_eq!(ui.count("table.log-identifiers span.named-id"), 1);
    assert!(ui
        .text("table.log-identifiers tbody tr:nth-child(3) td:nth-child(3)")
        .contains("request_id by name"));
    assert_eq!(ui.count("table.log-links tbody tr"), 1);
    ui.screenshot(&shot("logs"));
    ui.click("table.log-sequences tbody tr:nth-child(2)");
    ui.wait_for(
        "document.querySelector('table.log-sequences tr.chosen')?.dataset.sequence === '1'",
        "the second sequence chosen",
    );
    ui.click("div.histogram a.example");
    ui.wait_for(
        "location.hash.startsWith('#/trace/') && document.getElementById('view').dataset.state === 'ready'",
        "a stitched request in the trace view",
    );
    assert!(
        ui.text(".trace-head .summary")
            .contains("stitched from logs"),
        "{}",
        ui.text(".trace-head .summary")
    );
    // A line's event shows the frames that continue it, on lines of their own.
    ui.eval("[...document.querySelectorAll('.row')].find(r => r.querySelector('.svc').textContent === 'db').click(); true");
    ui.wait_for(
        "document.querySelector('.detail')?.innerText.includes('wrote order')",
        "the db segment's events",
    );
    assert!(
        ui.text(".detail").contains("wrote order 70")
            && ui
                .text(".detail")
                .contains("\n\tat db.Store.write(Store.java:12)"),
        "{:?}",
        ui.text(".detail")
    );
    // Under the time line, the request's lines in the order its services wrote them;
    // a line opens its span, by mouse or keyboard.
    let services = ui.eval(
        "[...document.querySelectorAll('.trace-lines tbody tr')].map(r => r.querySelector('td.svc').textContent).join(',')",
    );
    let services = services.as_str().unwrap_or_default().to_string();
    assert!(
        services == "web,db,web" || services == "web,db,db,web",
        "{services}"
    );
    assert!(ui
        .text(".trace-lines tbody tr:first-child td.line")
        .starts_with("received order 70"));
    assert!(ui
        .text(".trace-lines tbody tr:last-child td.line")
        .ends_with("done"));
    ui.click(".trace-lines tbody tr:first-child");
    ui.wait_for(
        "document.querySelector('.trace-lines tr.chosen') === document.querySelector('.trace-lines tbody tr:first-child') \
         && !document.querySelector('.detail').innerText.includes('wrote order')",
        "the web line's span chosen",
    );
    ui.eval("[...document.querySelectorAll('.trace-lines tbody tr')].find(r => r.innerText.includes('wrote order')).focus(); true");
    ui.press("Enter");
    ui.wait_for(
        "document.querySelector('.detail').innerText.includes('wrote order') \
         && document.querySelector('.trace-lines tr.chosen td.svc')?.textContent === 'db'",
        "the db line's span chosen by keyboard",
    );

    // Switching quickly: the 10 001-span trace is asked for first and answers last; the
    // trace shown, and the one clicks act on, is the one asked for last.
    let big_id = hex(0x3000);
    ui.eval(&format!(
        "document.getElementById('view').dataset.state = 'navigating'; \
         location.hash = '#/trace/{big_id}'; setTimeout(() => location.hash = '#/trace/{buy_id}', 0); true"
    ));
    ui.wait_for(
        // The ids here are 64-bit: the page shows their own 16 digits.
        &format!("document.getElementById('view').dataset.state === 'ready' && document.querySelector('.trace-head code.id')?.textContent === '{}'", &buy_id[16..]),
        "the trace asked for last",
    );
    // Give the earlier, bigger answer time to arrive and be dropped.
    std::thread::sleep(Duration::from_millis(2000));
    assert!(ui.text(".trace-head").contains(&buy_id[16..]));
    ui.eval("document.querySelector('.rows .row').click(); true");
    ui.wait_for(
        "document.querySelector('.detail h3')?.textContent === 'POST /buy'",
        "a click acting on the trace on screen",
    );

    // 10 001 spans: opens, draws only the rows in sight, and scrolls to the last one.
    assert_eq!(ui.open(&format!("#/trace/{big_id}")), "ready");
    assert!(ui.text(".trace-head .summary").contains("10,001 spans"));
    let drawn = ui.count(".rows .row");
    assert!(drawn > 10 && drawn < 200, "{drawn} rows in the DOM");
    ui.eval("const r = document.querySelector('.rows'); r.scrollTop = r.scrollHeight; true");
    ui.wait_for("[...document.querySelectorAll('.rows .row .op')].some(e => e.textContent === 'parse row 97') && document.querySelectorAll('.rows .row').length < 200", "the last rows after scrolling");
    let timing = ui.wait_for("window.causewayTiming && window.causewayTiming.trace === '00000000000000000000000000003000' && window.causewayTiming", "the open timing");
    println!(
        "10K-span trace opened in {:.0} ms",
        timing["openMs"].as_f64().unwrap()
    );
    // Zoomed to the first tenth (a drag on the overview sets this), the axis ends at 100 ms.
    assert_eq!(ui.open(&format!("#/trace/{big_id}?zoom=0,0.1")), "ready");
    let ticks: Vec<String> = serde_json::from_value(
        ui.eval("[...document.querySelectorAll('.axis .tick')].map(t => t.textContent)"),
    )
    .unwrap();
    assert_eq!(
        ticks.last().map(String::as_str),
        Some("100 ms"),
        "{ticks:?}"
    );
    assert_eq!(ui.open(&format!("#/trace/{big_id}")), "ready");

    // Scrolling: 120 frames, each moving 20 rows; the time each frame took (printed for
    // BENCHMARKS.md, not asserted).
    let frames = ui.eval(
        "new Promise(done => { const r = document.querySelector('.rows'); r.scrollTop = 0; \
         const gaps = []; let last = performance.now(), n = 0; \
         const step = () => { const t = performance.now(); gaps.push(t - last); last = t; \
           r.scrollTop += 480; r.dispatchEvent(new Event('scroll')); \
           if (++n < 120) requestAnimationFrame(step); \
           else done({ mean: gaps.slice(1).reduce((a, b) => a + b, 0) / (gaps.length - 1), max: Math.max(...gaps.slice(1)) }); }; \
         requestAnimationFrame(step); })",
    );
    println!(
        "scrolling the 10K-span trace: mean frame {:.1} ms, longest {:.1} ms",
        frames["mean"].as_f64().unwrap(),
        frames["max"].as_f64().unwrap()
    );
    assert!(ui.count(".rows .row") < 200);
    ui.screenshot(&shot("trace-10k"));

    // Dependencies: every edge drawn, the replicas' uneven load called out.
    assert_eq!(ui.open("#/dependencies?lookback=1h"), "ready");
    let (_, deps) = server.get("/api/dependencies?lookback=1h");
    assert_eq!(
        ui.count("g.dep-edge") as usize,
        deps["edges"].as_array().unwrap().len()
    );
    assert!(ui.count("g.dep-edge[data-edge='api→db-1']") == 1);
    // No two edge labels overlap, as drawn.
    let overlaps = ui.eval(
        "(() => { const b = [...document.querySelectorAll('g.dep-edge text')].map(t => t.getBBox()); let n = 0; \
         for (let i = 0; i < b.length; i++) for (let j = i + 1; j < b.length; j++) \
           if (b[i].x < b[j].x + b[j].width && b[j].x < b[i].x + b[i].width && b[i].y < b[j].y + b[j].height && b[j].y < b[i].y + b[i].height) n++; \
         return n; })()",
    );
    assert_eq!(overlaps, serde_json::json!(0), "overlapping edge labels");
    // An edge chosen with the keyboard, in place.
    ui.eval("document.querySelector('section.dependencies').dataset.kept = 'yes'; true");
    ui.focus("g.dep-edge[data-edge='api→db-1']");
    ui.press("Enter");
    ui.wait_for(
        "location.hash.includes('edge=') && document.querySelector(\"g.dep-edge[data-edge='api→db-1']\").classList.contains('chosen')",
        "the edge chosen with Enter",
    );
    assert_eq!(
        ui.eval("document.querySelector('section.dependencies')?.dataset.kept"),
        serde_json::json!("yes"),
        "the dependencies page was drawn anew for an edge"
    );
    assert_eq!(ui.count("table.edges tr.chosen"), 1);
    let replicas = ui.text(".replica-set[data-stem=db]");
    assert!(replicas.contains("uneven"), "{replicas}");
    assert!(ui
        .text("table.edges")
        .contains(&format!("{}", HOMES + BUYS)));
    ui.screenshot(&shot("dependencies"));

    // Grouped by host: a node per service on a host, each host a box around its nodes.
    let (_, by_host) = server.get("/api/dependencies?lookback=1h&group=host");
    let nodes = by_host["nodes"].as_array().unwrap();
    let hosts: std::collections::BTreeSet<&str> =
        nodes.iter().filter_map(|n| n["host"].as_str()).collect();
    assert!(hosts.len() >= 2, "{by_host}");
    assert_eq!(
        server.get("/api/dependencies?lookback=1h&group=rack").0,
        400
    );
    ui.eval(
        "(() => { const s = document.querySelector('form.filters select[name=group]'); s.value = 'host'; \
         s.dispatchEvent(new Event('change')); return true; })()",
    );
    ui.wait_for(
        "location.hash.includes('group=host') && document.getElementById('view').dataset.state === 'ready' && document.querySelector('g.dep-host')",
        "the graph by host",
    );
    assert_eq!(ui.count("g.dep-host") as usize, hosts.len());
    assert_eq!(ui.count("g.dep-node") as usize, nodes.len());
    let outside = ui.eval(
        "(() => { let n = 0; for (const box of document.querySelectorAll('g.dep-host')) { \
           const r = box.querySelector('rect').getBoundingClientRect(); \
           for (const g of document.querySelectorAll('g.dep-node')) { \
             if (!g.dataset.service.endsWith('@' + box.dataset.host)) continue; \
             const b = g.getBoundingClientRect(); \
             if (b.left < r.left || b.right > r.right || b.top < r.top || b.bottom > r.bottom) n++; } } \
         return n; })()",
    );
    assert_eq!(
        outside,
        serde_json::json!(0),
        "nodes outside their host's box"
    );
    ui.screenshot(&shot("dependencies-by-host"));
    // From one source: every call here was recorded by instrumentation, none by logs.
    let (_, instrumented) = server.get("/api/dependencies?lookback=1h&source=instrumented");
    assert_eq!(instrumented["edges"], deps["edges"]);
    let (_, from_logs) = server.get("/api/dependencies?lookback=1h&source=logs");
    assert_eq!(from_logs["edges"], serde_json::json!([]));
    assert_eq!(
        server.get("/api/dependencies?lookback=1h&source=rumour").0,
        400
    );
    ui.eval(
        "(() => { const s = document.querySelector('form.filters select[name=source]'); s.value = 'logs'; \
         s.dispatchEvent(new Event('change')); return true; })()",
    );
    ui.wait_for(
        "location.hash.includes('source=logs') && location.hash.includes('group=host') && document.getElementById('view').dataset.state === 'ready'",
        "the graph of what logs show",
    );
    assert!(ui
        .text("section.dependencies")
        .contains("No calls between services"));

    // Compare a fast and a slow GET /home: the slow path is extra in B.
    let fast_id = hex(0x1000);
    assert_eq!(
        ui.open(&format!("#/compare?a={fast_id}&b={slow_id}")),
        "ready"
    );
    let extra = ui.text("tr.change-extra");
    assert!(extra.contains("rebuild index"), "{extra}");
    // A span on one side only shows the time it took there, not a change of 0.
    assert!(extra.contains("+200 ms"), "{extra}");
    ui.screenshot(&shot("compare"));

    // Expectations: GET /home has a validator that allows no slow path; the slow traces
    // are unexpected, stop at "rebuild index", and open in the trace view marked there.
    let pip = r#"
validator Home {
  thread Web("web-1", {1, 2}) { task("GET /home") { task("GET /items") { send(Api); recv(Api); } } }
  thread Api("api-1", 1) {
    task("GET /items") { recv(Web); task("SELECT items") { send(Db); recv(Db); } notice("cache miss"); send(Web); }
  }
  thread Db("db-1", 1) { task("SELECT items") { recv(Api); send(Api); } }
}
recognizer Any { thread T(*, {1, 300}) { any(); } }
assert(instances(Home) >= 30);
"#;
    assert_eq!(ui.open("#/expect"), "ready");
    ui.eval(&format!(
        "document.querySelector('textarea.pip').value = {}; document.querySelector('.expect-form button[type=submit]').click(); true",
        serde_json::json!(pip)
    ));
    ui.wait_for("location.hash.includes('run=') && document.getElementById('view').dataset.state === 'ready' && document.querySelector('table.recognizers')", "the check's report");
    let home_matched = ui.text("table.recognizers tr[data-recognizer=Home] td:nth-child(3)");
    assert_eq!(home_matched, (HOMES - SLOW.len() as u64).to_string());
    // The slow homes, the buys, the 10 001-span trace, the cycle, the inferred path and
    // the stitched requests (the window is all: expectations check inferred paths and
    // requests stitched from logs like any other).
    assert_eq!(
        ui.count("ul.unexpected li"),
        SLOW.len() as u64 + BUYS + 3 + STITCHED
    );
    assert_eq!(
        ui.count(&format!("ul.unexpected li[data-trace='{}']", hex(INFERRED))),
        1
    );
    let slow_entry = ui.text(&format!("ul.unexpected li[data-trace='{slow_id}']"));
    assert!(slow_entry.contains("rebuild index"), "{slow_entry}");
    assert!(ui.count("svg.metric-plot g.col") >= 2);
    assert!(
        ui.text("ul.failed").is_empty(),
        "the assertion holds: {}",
        ui.text("ul.failed")
    );
    ui.screenshot("expectations");
    ui.eval("document.getElementById('view').dataset.state = 'navigating'; true");
    ui.click(&format!("ul.unexpected li[data-trace='{slow_id}'] a"));
    ui.wait_for("document.getElementById('view').dataset.view === 'trace' && document.getElementById('view').dataset.state === 'ready'", "the unexpected trace");
    assert!(
        ui.text("p.note").contains("Home stopped here"),
        "{}",
        ui.text("p.note")
    );
    assert_eq!(ui.text(".row.selected .op"), "rebuild index");

    // A failed check shows beside the form, in the page's terms, and keeps what was typed.
    let unbound = r#"validator Q { thread T(*, $QUORUM) { task("x"); } }"#;
    assert_eq!(ui.open("#/expect"), "ready");
    ui.eval(&format!(
        "document.querySelector('textarea.pip').value = {}; document.querySelector('.expect-form input[name=params]').value = ''; document.querySelector('.expect-form button[type=submit]').click(); true",
        serde_json::json!(unbound)
    ));
    ui.wait_for(
        "document.querySelector('.expect-form') && document.querySelector('.form-error')",
        "the check's error beside the form",
    );
    let error = ui.text(".form-error");
    assert!(error.contains("Parameters field"), "{error}");
    assert!(!error.contains("--param"), "{error}");
    assert_eq!(
        ui.eval("document.querySelector('textarea.pip').value"),
        serde_json::json!(unbound)
    );
    // Parameters the text names in its comments fill the field: an example runs as it is.
    let hinted = format!("// check with --param QUORUM=2\n{unbound}");
    ui.eval(&format!(
        "localStorage.setItem('causeway.expect.text', {}); true",
        serde_json::json!(hinted)
    ));
    assert_eq!(ui.open("#/expect"), "ready");
    assert_eq!(
        ui.eval("document.querySelector('.expect-form input[name=params]').value"),
        serde_json::json!("QUORUM=2")
    );

    // Errors and empty results say what happened, with the API's message.
    assert_eq!(ui.open("#/trace/not-an-id"), "error");
    assert!(
        ui.text("p.state.error").starts_with("400:"),
        "{}",
        ui.text("p.state.error")
    );
    assert_eq!(ui.open("#/trace/0123456789abcdef0123456789abcdef"), "error");
    assert!(ui.text("p.state.error").contains("not found"));
    assert_eq!(ui.open("#/search?lookback=1h&minDuration=1h"), "ready");
    assert!(ui.text("p.state.empty").contains("No traces match"));
    assert_eq!(ui.open("#/search?lookback=forever"), "error");
    assert!(
        ui.text("p.state.error").contains("lookback"),
        "{}",
        ui.text("p.state.error")
    );
    ui.screenshot("error");

    assert!(
        ui.exceptions.is_empty(),
        "the page threw: {:?}",
        ui.exceptions
    );
}

#[test]
fn the_pages_are_public_and_the_api_keeps_its_token() {
    let server = TestServer::start_with("ui-token", |c| c.token = Some("s3cret".into()));
    let get = |path: &str| {
        let mut r = server.http.get(&server.api_url(path)).call().unwrap();
        let status = r.status().as_u16();
        (status, r.body_mut().read_to_string().unwrap())
    };
    let (status, page) = get("/");
    assert_eq!(status, 200);
    assert!(page.contains("/ui/app.js"), "{page}");
    let (status, script) = get("/ui/trace.js");
    assert_eq!(status, 200);
    assert!(script.contains("export async function render"));
    assert_eq!(get("/ui/nothing.js").0, 404);
    assert_eq!(get("/api/services").0, 401);
}
