//! `causeway logs` on a directory of two services' plain logs: one assignment per input
//! line (stack frames included), requests joined across the two by their order id and
//! their timing, a binary file reported and skipped, and the JSON tables; lines that name
//! their trace go to that trace's spans.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::{temp, BIN};

/// `causeway logs DIR ARGS...`, which must succeed.
fn logs(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(BIN)
        .arg("logs")
        .arg(dir)
        .args(args)
        .output()
        .expect("causeway logs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn logs_become_requests_with_one_assignment_per_line() {
    let dir = temp("logs");
    std::fs::create_dir_all(dir.join("shop")).expect("dirs");
    let mut front = String::new();
    let mut back = String::new();
    let orders = [
        "4d2a46c7-71cb-4cf1-b5bb-b68406d9da6f",
        "5e3b57d8-82dc-4cf1-b5bb-b68406d9da70",
    ];
    for (k, order) in orders.iter().enumerate() {
        let s = 10 * k;
        front += &format!("2023-01-29T08:42:{s:02}.000Z INFO  o.c.OrderController#39 [create][order {order} received]\n");
        back += &format!(
            "2023-01-29T08:42:{s:02}.020Z INFO  p.s.PayService#12 [pay][paying {order}]\n"
        );
        back += &format!("2023-01-29T08:42:{s:02}.030Z ERROR p.s.PayService#40 [pay][declined]\n");
        back += "\tat p.s.PayService.pay(PayService.java:40)\n";
        front += &format!("2023-01-29T08:42:{:02}.500Z INFO  o.c.OrderController#60 [create][order {order} done]\n", s + 1);
    }
    std::fs::write(dir.join("front.log"), front).expect("front");
    std::fs::write(dir.join("shop/pay.log"), back).expect("back");
    std::fs::write(dir.join("core.bin"), [0u8, 1, 2, 3]).expect("binary");
    let assignments = dir.join("a.jsonl");
    let assignments_arg = assignments.to_str().expect("utf-8");
    let out = logs(&dir, &["--assignments", assignments_arg, "--json"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("core.bin: not a log (binary), skipped"));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["requests"], 2);
    assert_eq!(report["lines"], 10);
    assert_eq!(report["continuation_lines"], 2);
    assert_eq!(report["skipped_files"][0], "core.bin");
    // The order id is the likeliest request identifier.
    let top = &report["identifiers"][0];
    assert_eq!(top["shared"], 1.0);
    assert!(orders.contains(&top["examples"][0].as_str().expect("an example")));
    assert_eq!(report["sequences"][0]["count"], 2);

    let text = std::fs::read_to_string(&assignments).expect("assignments");
    let rows: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(rows.len(), 10, "one per input line");
    let request = |file: &str, line: u64| {
        rows.iter()
            .find(|r| r["file"] == file && r["line"] == line)
            .unwrap_or_else(|| panic!("{file}:{line} assigned"))["request"]
            .clone()
    };
    for (k, first) in [(0u64, 1u64), (1, 3)] {
        let r = request("front.log", first);
        assert_eq!(request("front.log", first + 1), r, "order {k} done");
        let pay = 1 + 3 * k;
        assert_eq!(request("shop/pay.log", pay), r, "order {k} paid");
        assert_eq!(request("shop/pay.log", pay + 1), r, "order {k} declined");
        assert_eq!(
            request("shop/pay.log", pay + 2),
            r,
            "order {k}'s stack frame"
        );
    }
    assert_ne!(request("front.log", 1), request("front.log", 3));
    assert_eq!(top["name"], "paying");
    assert_eq!(top["taken"], true);

    // Excluded by name, the order ids are not taken.
    let out = logs(&dir, &["--json", "--not-id", "order", "--not-id", "paying"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let identifiers = report["identifiers"].as_array().expect("identifiers");
    assert!(
        identifiers.iter().all(|e| e["taken"] == false),
        "{identifiers:#?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn logs_longer_than_a_window_are_read_in_windows_and_keep_each_request_whole() {
    use std::io::Write as _;
    let dir = temp("logs-windows");
    std::fs::create_dir_all(&dir).expect("dir");
    // 8 000 requests, one every 25 ms (200 s, 2.4 MB): several 1 MiB windows.
    const REQUESTS: u64 = 8_000;
    let (mut front, mut pay) = (String::new(), String::new());
    for k in 0..REQUESTS {
        let ms = 25 * k;
        let at = |d: u64| {
            let t = ms + d;
            format!(
                "2023-01-29T08:{:02}:{:02}.{:03}Z",
                t / 60_000,
                t / 1_000 % 60,
                t % 1_000
            )
        };
        let order = format!(
            "{:08x}-{:04x}-4cf1-b5bb-{:012x}",
            k * 2_654_435_761 % (1 << 32),
            k,
            k * 7_919
        );
        front += &format!(
            "{} INFO [http-{}] order {order} received from the shop\n",
            at(0),
            k % 4
        );
        pay += &format!("{} INFO [pool-1] paying {order} by card\n", at(5));
        if k % 100 == 0 {
            pay += "\tat p.s.PayService.pay(PayService.java:40)\n";
        }
        front += &format!("{} INFO [http-{}] order {order} done\n", at(20), k % 4);
    }
    // One file gzip-compressed: streamed through the decoder.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(front.as_bytes()).expect("gzip");
    std::fs::write(dir.join("front.log.gz"), gz.finish().expect("gzip")).expect("front");
    std::fs::write(dir.join("pay.log"), &pay).expect("pay");
    let assignments = dir.join("a.jsonl");
    let assignments_arg = assignments.to_str().expect("utf-8");
    let out = logs(
        &dir,
        &[
            "--assignments",
            assignments_arg,
            "--json",
            "--window-mb",
            "1",
        ],
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(
        report["windows"].as_u64().expect("windows") >= 3,
        "{}",
        report["windows"]
    );
    let lines = 3 * REQUESTS + REQUESTS / 100;
    assert_eq!(report["lines"], lines);
    assert_eq!(report["continuation_lines"], REQUESTS / 100);
    assert_eq!(report["requests"], REQUESTS);
    // Every line once; each request's lines under one id, numbered by its first line.
    let text = std::fs::read_to_string(&assignments).expect("assignments");
    let mut seen = std::collections::HashMap::new();
    for row in text.lines() {
        let row: serde_json::Value = serde_json::from_str(row).expect("a JSON line");
        let key = (
            row["file"].as_str().expect("file").to_string(),
            row["line"].as_u64().expect("line"),
        );
        assert!(
            seen.insert(key.clone(), row["request"].as_u64().expect("request"))
                .is_none(),
            "{key:?} twice"
        );
    }
    assert_eq!(seen.len() as u64, lines);
    let request = |file: &str, line: u64| seen[&(file.to_string(), line)];
    let mut pay_line = 1;
    for k in 0..REQUESTS {
        assert_eq!(
            request("front.log.gz", 2 * k + 1),
            k,
            "request {k} received"
        );
        assert_eq!(request("front.log.gz", 2 * k + 2), k, "request {k} done");
        assert_eq!(request("pay.log", pay_line), k, "request {k} paid");
        if k % 100 == 0 {
            pay_line += 1;
            assert_eq!(request("pay.log", pay_line), k, "request {k}'s stack frame");
        }
        pay_line += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn stitched_requests_reach_the_store_as_traces_from_logs() {
    let data = temp("logs-collector-data");
    let serve = common::Serve::start(&data, &[]);
    let dir = temp("logs-collector");
    std::fs::create_dir_all(&dir).expect("dir");
    let now = std::time::SystemTime::now();
    let at = |ms: u64| humantime::format_rfc3339_millis(now + std::time::Duration::from_millis(ms));
    let web = format!(
        "{} INFO [main] order 7 received\n{} INFO [main] order 7 done\n",
        at(0),
        at(300)
    );
    let db = format!("{} INFO [pool] wrote order 7\n", at(100));
    std::fs::write(dir.join("web.log"), web).expect("web");
    std::fs::write(dir.join("db.log"), db).expect("db");
    let out = logs(&dir, &["--collector", &serve.ingest]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("sent 2 spans"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let found = serve.search_service("web");
    assert_eq!(found.len(), 1, "one request");
    let spans = serve.trace_spans(found[0]["traceId"].as_str().expect("an id"));
    assert_eq!(spans.len(), 2);
    for s in spans {
        assert_eq!(s["source"]["type"], "logs", "{s}");
    }
    // The Logs page's data: the request by its log-point sequence, and the report sent
    // beside it (the identifier ranking).
    let flows: serde_json::Value = ureq::get(&format!("{}/api/logs?start=0", serve.api))
        .call()
        .expect("the flows")
        .body_mut()
        .read_json()
        .expect("JSON");
    assert_eq!(flows["traces"], 1, "{flows}");
    let segments = &flows["sequences"][0]["segments"];
    assert_eq!(segments[0]["node"], "web", "{flows}");
    assert_eq!(segments[0]["points"][0], "order <NUM> <*>", "{flows}");
    assert_eq!(flows["report"]["requests"], 1, "{flows}");
    assert_eq!(
        flows["report"]["identifiers"][0]["name"], "order",
        "{flows}"
    );
    drop(serve);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(data);
}

#[test]
fn lines_that_name_their_trace_go_to_its_spans() {
    use causeway_model::SpanKind;
    let data = temp("logs-ids-data");
    let serve = common::Serve::start(&data, &[]);
    let dir = temp("logs-ids");
    std::fs::create_dir_all(&dir).expect("dir");
    let now = std::time::SystemTime::now();
    let ns = |ms: u64| {
        (now + std::time::Duration::from_millis(ms))
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_nanos() as u64
    };
    let at = |ms: u64| humantime::format_rfc3339_millis(now + std::time::Duration::from_millis(ms));
    // The instrumented trace: orders' checkout calls payments.
    let mut b = causeway_testkit::TraceBuilder::new(0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736);
    let root = b.root("orders", "", "checkout", ns(0), ns(100));
    b.span(
        Some(root),
        "payments",
        "",
        SpanKind::Internal,
        "charge",
        ns(10),
        ns(60),
    );
    let body = causeway_model::codec::otlp::encode_json(&b.spans());
    ureq::post(&format!("{}/v1/traces", serve.ingest))
        .header("content-type", "application/json")
        .send(&body[..])
        .expect("the trace is taken");
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    std::fs::write(
        dir.join("orders.log"),
        format!(
            "{} INFO [main] basket read trace_id={trace} span_id=0000000000000001\n\
             {} INFO [main] order 9 without ids\n",
            at(5),
            at(90)
        ),
    )
    .expect("orders.log");
    // Only the trace: the line goes to the payments span whose time holds it.
    std::fs::write(
        dir.join("payments.log"),
        format!(
            "{{\"ts\":\"{}\",\"level\":\"WARN\",\"msg\":\"card slow\",\"traceId\":\"{trace}\"}}\n",
            at(20)
        ),
    )
    .expect("payments.log");
    let out = logs(&dir, &["--collector", &serve.ingest, "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["lines_with_trace_ids"], 2, "{report}");
    let spans = serve.trace_spans(trace);
    let lines = |name: &str| -> Vec<(String, String)> {
        let span = spans
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no span {name}: {spans:?}"));
        span["events"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                let level = e["attributes"]
                    .as_array()
                    .and_then(|a| a.iter().find(|kv| kv["key"] == "level"))
                    .map_or(String::new(), |kv| kv["value"].to_string());
                (e["name"].as_str().unwrap_or_default().to_string(), level)
            })
            .collect()
    };
    let checkout = lines("checkout");
    assert_eq!(checkout.len(), 1, "{checkout:?}");
    assert!(
        checkout[0].0.contains("basket read") && checkout[0].1 == "\"INFO\"",
        "{checkout:?}"
    );
    let charge = lines("charge");
    assert_eq!(charge.len(), 1, "{charge:?}");
    assert!(
        charge[0].0.contains("card slow") && charge[0].1 == "\"WARN\"",
        "{charge:?}"
    );
    assert_eq!(spans.len(), 2, "no carrier left over: {spans:?}");
    drop(serve);
}

#[test]
fn lines_without_ids_join_the_trace_of_their_request() {
    let data = temp("logs-join-data");
    let serve = common::Serve::start(&data, &[]);
    let dir = temp("logs-join");
    std::fs::create_dir_all(&dir).expect("dir");
    // Two checkouts on orders at once, their order in the query; the service's log prints
    // no ids, the two requests' lines interleaved.
    let now = std::time::SystemTime::now();
    let (traces, requests) = causeway_testkit::plain_logs::interleaved_checkouts(now);
    for spans in traces {
        let body = causeway_model::codec::otlp::encode_json(&spans);
        ureq::post(&format!("{}/v1/traces", serve.ingest))
            .header("content-type", "application/json")
            .send(&body[..])
            .expect("the trace is taken");
    }
    std::fs::write(
        dir.join("orders.log"),
        causeway_testkit::plain_logs::interleaved_checkouts_log(now),
    )
    .expect("orders.log");
    let out = logs(
        &dir,
        &["--collector", &serve.ingest, "--join", &serve.api, "--json"],
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["join"]["placed"], 6, "{report}");
    for (trace, order) in requests {
        let spans = serve.trace_spans(&format!("{trace:032x}"));
        assert_eq!(
            spans.len(),
            1,
            "the lines on the span, no trace of their own: {spans:?}"
        );
        let events = spans[0]["events"].as_array().cloned().unwrap_or_default();
        assert_eq!(events.len(), 3, "{events:?}");
        for e in &events {
            let text = e["name"].as_str().unwrap_or_default();
            assert!(
                text.contains(&format!("order {order}")),
                "{text} in order {order}'s trace"
            );
            let confidence = e["attributes"]
                .as_array()
                .and_then(|a| a.iter().find(|kv| kv["key"] == "causeway.log.confidence"));
            assert!(confidence.is_some(), "{e}");
        }
    }
    drop(serve);
    let _ = std::fs::remove_dir_all(dir);
    let _ = std::fs::remove_dir_all(data);
}

#[test]
fn gzipped_logs_are_read_and_a_cut_one_up_to_the_damage() {
    use std::io::Write as _;
    let dir = temp("logs-gzip");
    std::fs::create_dir_all(&dir).expect("dir");
    let mut text = String::new();
    for k in 0..200 {
        text += &format!(
            "2023-01-29T08:42:{:02}.{:03}Z INFO request {k} served\n",
            k / 10,
            k % 10 * 100
        );
    }
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(text.as_bytes()).expect("gzip");
    let gz = gz.finish().expect("gzip");
    std::fs::write(dir.join("web.log.gz"), &gz).expect("whole");
    let out = logs(&dir.join("web.log.gz"), &["--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report["lines"], 200);

    std::fs::write(dir.join("cut.log.gz"), &gz[..gz.len() / 2]).expect("cut");
    let out = logs(&dir.join("cut.log.gz"), &["--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cut.log.gz: gzip data cut short or corrupt"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let lines = report["lines"].as_u64().expect("lines");
    assert!(lines > 0 && lines < 200, "{lines}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_prefix_given_as_a_pattern_is_read_and_a_bad_pattern_is_named() {
    let dir = temp("logs-format");
    std::fs::create_dir_all(&dir).expect("dir");
    // A prefix the detection does not know: host, then time and level between bars.
    let mut text = String::new();
    for k in 0..20 {
        text += &format!(
            "edge-3|2023-01-29 08:42:{:02}.{:03}|INFO|request {k} served\n",
            k / 4,
            k % 4 * 250
        );
    }
    std::fs::write(dir.join("edge.log"), &text).expect("log");
    let report = |args: &[&str]| -> serde_json::Value {
        serde_json::from_slice(&logs(&dir, args).stdout).expect("JSON")
    };
    let plain = report(&["--json"]);
    let patterned = report(&["--json", "--format", "{skip}|{time}|{level}|{message}"]);
    let texts = |r: &serde_json::Value| -> Vec<String> {
        r["templates"]
            .as_array()
            .expect("templates")
            .iter()
            .map(|t| t["text"].as_str().expect("text").to_string())
            .collect()
    };
    assert_eq!(texts(&patterned), ["request <NUM> served"], "{patterned}");
    assert_ne!(texts(&plain), texts(&patterned));

    let out = Command::new(BIN)
        .args(["logs", "--format", "{time} {lvl} {message}"])
        .arg(&dir)
        .output()
        .expect("causeway logs");
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--format") && stderr.contains("column 8: unknown field `{lvl}`"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn log_points_are_named_by_their_place_in_the_sources() {
    let dir = temp("logs-source");
    std::fs::create_dir_all(dir.join("src/handlers")).expect("dirs");
    std::fs::create_dir_all(dir.join("logs")).expect("dirs");
    std::fs::write(
        dir.join("src/handlers/auth.rs"),
        "pub fn login(id: u32) {\n    log::info!(\"user {} logged in\", id);\n    log::info!(\"user {} logged out\", id);\n}\n",
    )
    .expect("source");
    let mut text = String::new();
    for k in 0..6 {
        let how = if k % 2 == 0 { "in" } else { "out" };
        text += &format!(
            "2023-01-29T08:42:0{k}.000Z INFO user {} logged {how}\n",
            7 + k / 2
        );
    }
    std::fs::write(dir.join("logs/auth.log"), &text).expect("log");
    let src = dir.join("src");
    let out = logs(
        &dir.join("logs"),
        &["--json", "--source", src.to_str().expect("utf-8")],
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("2 log points read from the sources"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut texts: Vec<&str> = report["templates"]
        .as_array()
        .expect("templates")
        .iter()
        .map(|t| t["text"].as_str().expect("text"))
        .collect();
    texts.sort();
    assert_eq!(
        texts,
        [
            "handlers/auth.rs:2 user <NUM> logged in",
            "handlers/auth.rs:3 user <NUM> logged out"
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn each_file_is_read_in_its_own_format_and_the_report_says_which() {
    // OnlineBoutique's services, as Kubernetes keeps their output: a collector's timestamp,
    // then JSON from most (Go, Node.js, Python) and text from the others (C#, Java).
    let out = logs(&common::fixtures().join("nezha-ob/logs"), &["--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let formats = report["formats"].as_array().expect("formats");
    assert_eq!(formats.len(), 10);
    let of = |prefix: &str| {
        let f = formats
            .iter()
            .find(|f| f["file"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .unwrap_or_else(|| panic!("{prefix} in {formats:?}"));
        (
            f["format"].as_str().unwrap_or_default(),
            f["parsed"].as_f64().unwrap_or_default(),
        )
    };
    for json in [
        "frontend",
        "checkoutservice",
        "currencyservice",
        "emailservice",
    ] {
        assert_eq!(of(json), ("json", 1.0), "{json}");
    }
    for text in ["cartservice", "adservice"] {
        assert_eq!(of(text), ("text", 1.0), "{text}");
    }
    // A JSON field is a value named by its key: the frontend's request id is ranked.
    let names: Vec<&str> = report["identifiers"]
        .as_array()
        .expect("identifiers")
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    assert!(names.contains(&"http.req.id"), "{names:?}");
}
