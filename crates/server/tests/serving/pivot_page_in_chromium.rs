//! The Pivot page in headless Chromium, against a hub that processes report to over the
//! agent protocol: a paper query picked and installed from the page, which processes
//! acknowledged it, the live pivot table with totals, sparklines and example traces,
//! rows and columns chosen from the group keys, errors with their place, and uninstall.
//! Screenshots go to `target/ui-screenshots/`.

use crate::chromium;
use crate::common;

use causeway_server::ServerConfig;
use chromium::Chromium;
use common::TestServer;
use serde_json::{json, Value};

const TRACEPOINTS: &str = include_str!("../../../../demo/tracepoints/replicas.pivot");
const EXAMPLE_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

fn tweak(c: &mut ServerConfig) {
    c.pivot_tracepoints = vec![("replicas.pivot".into(), TRACEPOINTS.into())];
}

fn post(ts: &TestServer, path: &str, body: Value) -> Value {
    let mut r = ts
        .http
        .post(&ts.api_url(path))
        .header("content-type", "application/json")
        .send(body.to_string().as_bytes())
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{path}");
    serde_json::from_str(&r.body_mut().read_to_string().unwrap()).unwrap()
}

/// A DataNode's report: the reads it served in one interval, by client host.
fn report(host: &str, installed: &[u64], seq: u64, at_ms: u64, groups: Value) -> Value {
    json!({
        "process": {"instance": host.as_bytes()[0] as u64, "service": "datanode", "host": host,
                    "proc_name": format!("DataNode-{host}"), "pid": 100 + host.as_bytes()[0] as u32},
        "installed": installed,
        "callsites": [{"kind": "span", "target": "replicas::datanode", "name": "DN.DataTransferProtocol",
                       "level": "INFO", "module": "replicas::datanode", "file": "datanode.rs", "line": 1,
                       "fields": ["src"]}],
        "batches": [{"seq": seq, "at_ms": at_ms, "partials": groups}],
    })
}

fn q6_groups(id: u64, dn: &str, counts: &[(&str, i64)], example: Option<&str>) -> Value {
    let groups: Vec<Value> = counts
        .iter()
        .map(|(client, n)| {
            let mut g = json!({"key": [client, dn], "states": [{"count": n}]});
            if let Some(t) = example.filter(|_| *client == "A") {
                g["example"] = json!(t);
            }
            g
        })
        .collect();
    json!([{"query": id, "overflow": 0, "groups": groups}])
}

#[test]
fn the_pivot_page_installs_a_query_and_follows_its_results() {
    let server = TestServer::start_with("pivot-ui", tweak);
    let base = server.api_url("/");
    let mut ui = Chromium::launch("pivot-ui");
    ui.goto(&base);

    // Nothing installed yet; the paper's queries are offered as examples, and the
    // catalog lists the demo's tracepoint definitions.
    assert_eq!(ui.open("#/pivot"), "ready");
    assert!(ui
        .text(".pivot .state.empty")
        .contains("No query is installed"));
    assert_eq!(ui.count("select[name=example] option"), 8);
    assert!(ui.count("pre.definition") >= 5, "{}", ui.text(".catalog"));

    // A mistake is named with its line and column, and the text stays.
    ui.eval(
        "const t = document.querySelector('textarea.pivot-query'); \
         t.value = 'From x In DN.DataTransferProtocol\\nSelect x.nope'; true",
    );
    ui.click("button.explain");
    let error = ui.wait_for(
        "document.querySelector('.pivot-answer .error')?.innerText",
        "the explain error",
    );
    assert!(error.as_str().unwrap().contains("query:2:8"), "{error}");

    // Pick Q6 and explain, then install it.
    ui.eval(
        "const s = document.querySelector('select[name=example]'); \
         s.value = [...s.options].find((o) => o.text === 'Q6').value; \
         s.dispatchEvent(new Event('change')); true",
    );
    assert!(ui
        .eval("document.querySelector('textarea.pivot-query').value")
        .as_str()
        .unwrap()
        .starts_with("Q6 : From DNop In DN.DataTransferProtocol"));
    ui.click("button.explain");
    let advice = ui.wait_for(
        "document.querySelector('.pivot-answer pre.explain')?.innerText",
        "the advice",
    );
    assert!(
        advice.as_str().unwrap().contains("PACK st GROUP st.host"),
        "{advice}"
    );
    ui.eval("document.getElementById('view').dataset.state = 'navigating'; true");
    ui.click(".pivot-form button[type=submit]");
    ui.wait_for(
        "location.hash.startsWith('#/pivot/') && document.getElementById('view').dataset.state === 'ready'",
        "the query's page",
    );
    let id: u64 = ui
        .eval("location.hash.split('/')[2]")
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(ui.text("h1"), format!("Q6 Uninstall"));
    assert!(ui.text(".pivot-results").contains("No results yet"));

    // Two DataNodes report two intervals each; A's first interval names a sampled trace.
    for (seq, at) in [(1u64, 1_000u64), (2, 2_000)] {
        post(
            &server,
            "/api/pivot/agent",
            report(
                "A",
                &[id],
                seq,
                at,
                q6_groups(
                    id,
                    "A",
                    &[("A", 4 * seq as i64), ("B", 1)],
                    Some(EXAMPLE_TRACE),
                ),
            ),
        );
        post(
            &server,
            "/api/pivot/agent",
            report("B", &[], seq, at, q6_groups(id, "B", &[("B", 3)], None)),
        );
    }
    // The page follows the results as they come: client hosts down, DataNodes across.
    // The page may render the first interval before the second arrives; wait for both.
    ui.wait_for(
        "document.querySelectorAll('table.pivot-table tbody tr').length === 2 \
         && document.querySelector('table.pivot-table td.grand')?.innerText === '20'",
        "the pivot table with both intervals",
    );
    let cell = |ui: &mut Chromium, row: &str, col: &str| {
        ui.text(&format!(
            "table.pivot-table tr[data-row='{row}'] td[data-col='{col}'] .value"
        ))
    };
    assert_eq!(cell(&mut ui, "A", "A"), "12");
    assert_eq!(cell(&mut ui, "B", "A"), "2");
    assert_eq!(cell(&mut ui, "B", "B"), "6");
    assert_eq!(
        ui.text("table.pivot-table tr[data-row='A'] td[data-col='B']"),
        "–"
    );
    assert_eq!(ui.text("table.pivot-table tr[data-row='B'] td.total"), "8");
    assert_eq!(ui.text("table.pivot-table td.grand"), "20");
    assert_eq!(ui.text("table.pivot-table tfoot td[data-col='A']"), "14");
    // A sparkline per cell (two intervals), and the example trace where one was sampled.
    assert_eq!(ui.count("table.pivot-table tbody svg.spark"), 3);
    assert_eq!(
        ui.eval("document.querySelector(\"tr[data-row='A'] td[data-col='A'] a.example\").getAttribute('href')"),
        format!("#/trace/{EXAMPLE_TRACE}")
    );
    assert_eq!(ui.count("table.pivot-table tbody a.example"), 1);
    // DataNode-A ran it; DataNode-B has not said it installed it.
    ui.wait_for(
        "document.querySelector(\"ul.acks li[data-proc='DataNode-A']\").classList.contains('ok') \
         && document.querySelector(\"ul.acks li[data-proc='DataNode-B']\").classList.contains('pending')",
        "DataNode-A acknowledged, DataNode-B not yet",
    );
    ui.eval("document.querySelector('h2:nth-of-type(2)').scrollIntoView(); true");
    ui.screenshot("pivot-q6");

    // DataNodes down instead, no columns: one total per DataNode.
    assert_eq!(
        ui.open(&format!("#/pivot/{id}?rows=DNop.host&cols=")),
        "ready"
    );
    assert_eq!(ui.count("table.pivot-table tbody tr"), 2);
    assert_eq!(
        ui.text("table.pivot-table tr[data-row='A'] td.cell .value"),
        "14"
    );
    assert_eq!(ui.count("table.pivot-table td.grand"), 0);
    assert!(
        ui.eval("document.querySelector('input[name=row][value=\"st.host\"]').checked") == false
    );

    // Both keys across: one row, a column per (client, DataNode) pair.
    assert_eq!(
        ui.open(&format!("#/pivot/{id}?rows=&cols=st.host,DNop.host")),
        "ready"
    );
    assert_eq!(ui.count("table.pivot-table tbody tr"), 1);
    let across = |ui: &mut Chromium, col: &str| {
        ui.text(&format!(
            "table.pivot-table tbody td[data-col='{col}'] .value"
        ))
    };
    assert_eq!(across(&mut ui, "A · A"), "12");
    assert_eq!(across(&mut ui, "B · A"), "2");
    assert_eq!(across(&mut ui, "B · B"), "6");
    assert_eq!(ui.text("table.pivot-table td.grand"), "20");
    assert!(
        ui.eval("document.querySelector('input[name=col][value=\"st.host\"]').checked") == true
    );
    ui.screenshot("pivot-q6-columns");
    // Checking a column key as a row takes it out of the columns.
    ui.click("input[name=row][value=\"st.host\"]");
    ui.wait_for(
        "document.querySelectorAll('table.pivot-table tbody tr').length === 2",
        "client hosts down, DataNodes across",
    );
    assert_eq!(cell(&mut ui, "B", "B"), "6");

    // The list shows it with its acknowledgements; uninstalling empties it.
    assert_eq!(ui.open("#/pivot"), "ready");
    assert_eq!(ui.count("table.pivot-queries tbody tr"), 1);
    assert!(ui
        .text("table.pivot-queries tbody tr")
        .contains("1 of 2 acknowledged"));
    assert!(ui.text(".catalog summary").contains("1 callsites"));
    ui.eval("document.getElementById('view').dataset.state = 'navigating'; true");
    ui.click("table.pivot-queries button.uninstall");
    ui.wait_for(
        "document.getElementById('view').dataset.state === 'ready' && !document.querySelector('table.pivot-queries')",
        "the list without the query",
    );
    let (_, list) = server.get("/api/pivot/queries");
    assert_eq!(list["queries"].as_array().unwrap().len(), 0);
    assert!(ui.exceptions.is_empty(), "{:?}", ui.exceptions);
}
