//! The analyses through `causeway critical-path`, `stats`, `deps`, `patterns` and
//! `compare` (each backed by the query API), on the Zipkin fixtures and generated traces.

mod common;

use causeway_model::codec::native;
use causeway_testkit::Generator;
use common::{fixtures, run, temp, Serve, TempDir};
use serde_json::Value;

const SKEW_TRACE: &str = "1e223ff1f80f1c69";

fn json(args: &[&str]) -> Value {
    let (code, out, err) = run(args);
    assert_eq!(code, 0, "{args:?}: {out}{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// A server with the skew, yelp and kafka fixtures and 300 generated traces of a few
/// request types.
fn loaded(name: &str) -> (Serve, Vec<String>, TempDir) {
    let data = temp(name);
    let serve = Serve::start(&data, &[]);
    let generated = data.with_extension("generated.bin");
    let mut g = Generator::new(11, 1_700_000_000_000_000_000, 1_000_000).with_request_types(4);
    let mut spans = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..300 {
        let t = g.trace();
        ids.push(t[0].trace_id.to_string());
        spans.extend(t);
    }
    std::fs::write(&generated, native::encode_all(&spans)).unwrap();
    let z = fixtures().join("zipkin");
    let files = [
        z.join("skew.json"),
        z.join("yelp.json"),
        z.join("messaging-kafka.json"),
        generated.clone(),
    ];
    let mut args = vec!["import", "--collector", &serve.ingest];
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(names.iter().map(String::as_str));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{out}{err}");
    let _ = std::fs::remove_file(generated);
    (serve, ids, data)
}

/// Stops the server before its data directory goes.
fn stop(serve: Serve, data: TempDir) {
    drop(serve);
    drop(data);
}

#[test]
fn a_slow_trace_shows_where_its_time_went() {
    let (serve, ids, data) = loaded("critical");
    let api = serve.api.as_str();

    // The skew fixture: the server span comes out inside its client.
    let t = json(&[
        "trace",
        SKEW_TRACE,
        "--adjust-skew",
        "--json",
        "--server",
        api,
    ]);
    let offsets = t["clockOffsets"].as_array().unwrap();
    assert_eq!(offsets.len(), 1);
    assert_eq!(offsets[0]["offsetNs"], 65_922_000);
    let spans = t["spans"].as_array().unwrap();
    let client = spans.iter().find(|s| s["kind"] == "client").unwrap();
    let server = spans
        .iter()
        .find(|s| s["kind"] == "server" && s["parent_id"] == client["span_id"])
        .unwrap();
    let (cs, ce) = (
        client["start"].as_u64().unwrap(),
        client["end"].as_u64().unwrap(),
    );
    let (ss, se) = (
        server["start"].as_u64().unwrap(),
        server["end"].as_u64().unwrap(),
    );
    assert!(
        cs <= ss && se <= ce,
        "server {ss}..{se} outside client {cs}..{ce}"
    );
    let raw = json(&["trace", SKEW_TRACE, "--json", "--server", api]);
    assert!(raw.get("clockOffsets").is_none());

    // Critical paths of the fixture and of generated traces: sorted, contiguous, and
    // adding up to the root's duration.
    for id in [SKEW_TRACE, ids[0].as_str(), ids[1].as_str()] {
        let p = json(&["critical-path", id, "--json", "--server", api]);
        let sections = p["sections"].as_array().unwrap();
        assert!(!sections.is_empty(), "{id}");
        let mut at = sections[0]["start"].as_u64().unwrap();
        let mut sum = 0;
        for s in sections {
            let (start, end) = (s["start"].as_u64().unwrap(), s["end"].as_u64().unwrap());
            assert_eq!(start, at, "{id}: sections are contiguous");
            assert_eq!(s["spanId"].as_str().map(str::len), Some(16));
            sum += end - start;
            at = end;
        }
        assert_eq!(sum, p["durationNs"].as_u64().unwrap(), "{id}");
        let trace = json(&["trace", id, "--json", "--server", api]);
        assert_eq!(
            p["selfTimes"].as_array().map(Vec::len),
            trace["spans"].as_array().map(Vec::len)
        );
    }
    let (code, out, _) = run(&["critical-path", SKEW_TRACE, "--server", api]);
    assert_eq!(code, 0);
    assert!(
        out.contains("critical path of trace 1e223ff1f80f1c69"),
        "{out}"
    );
    assert!(
        out.contains("servicea get") && out.contains("clock skew corrected"),
        "{out}"
    );

    // Statistics: RPC hops with network time, totals per service.
    let s = json(&["stats", &ids[0], "--json", "--server", api]);
    let rpcs = s["rpcs"].as_array().unwrap();
    assert!(!rpcs.is_empty());
    for r in rpcs {
        assert_eq!(
            r["networkNs"].as_u64().unwrap(),
            r["clientNs"].as_u64().unwrap() - r["serverNs"].as_u64().unwrap()
        );
    }
    let spans_counted: u64 = s["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["count"].as_u64().unwrap())
        .sum();
    assert_eq!(spans_counted, s["spans"].as_u64().unwrap());
    let (code, out, _) = run(&["stats", &ids[0], "--server", api]);
    assert_eq!(code, 0);
    assert!(out.contains("network") && out.contains("frontend"), "{out}");

    // Errors name what is wrong, with exit status 1.
    let (code, _, err) = run(&["critical-path", "xyz", "--server", api]);
    assert_eq!(code, 1);
    assert!(err.contains("400") || err.contains("trace id"), "{err}");
    let (code, _, err) = run(&["critical-path", "0000000000000001", "--server", api]);
    assert_eq!(code, 1);
    assert!(err.contains("not found"), "{err}");
    stop(serve, data);
}

#[test]
fn dependencies_patterns_and_comparisons_cover_the_window() {
    let (serve, ids, data) = loaded("patterns");
    let api = serve.api.as_str();

    let d = json(&["deps", "--json", "--server", api]);
    let edge = |from: &str, to: &str| {
        d["edges"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["caller"] == from && e["callee"] == to)
            .cloned()
    };
    assert_eq!(
        edge("yelp-main", "mysql").map(|e| e["calls"].clone()),
        Some(2.into())
    );
    assert_eq!(
        edge("servicea", "serviceb").map(|e| e["kind"].clone()),
        Some("messaging".into())
    );
    let fe = edge("frontend", "cart").expect("generated edges");
    assert!(fe["latency"]["p50"].as_u64().unwrap() > 0);
    assert!(d["window"]["tracesScanned"].as_u64().unwrap() >= 303);
    // A window before the generated traces leaves only the 2016 fixtures.
    let old = json(&[
        "deps",
        "--json",
        "--end",
        "2020-01-01T00:00:00Z",
        "--server",
        api,
    ]);
    assert!(old["edges"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["caller"] != "frontend"));
    let (code, out, _) = run(&["deps", "--server", api]);
    assert_eq!(code, 0);
    assert!(out.contains("frontend -> cart"), "{out}");

    let p = json(&["patterns", "--json", "--limit", "1000", "--server", api]);
    let list = p["patterns"].as_array().unwrap();
    let total: u64 = list.iter().map(|x| x["count"].as_u64().unwrap()).sum();
    assert_eq!(total, p["traces"].as_u64().unwrap());
    assert!(
        list.len() < 60,
        "request types repeat: {} patterns",
        list.len()
    );
    let counts: Vec<u64> = list.iter().map(|x| x["count"].as_u64().unwrap()).collect();
    assert!(
        counts.windows(2).all(|w| w[0] >= w[1]),
        "sorted by count: {counts:?}"
    );
    let top = list[0]["id"].as_str().unwrap().to_string();
    assert!(top.starts_with('p') && top.len() == 17);

    let tail = json(&["patterns", "--json", "--sort", "tail", "--server", api]);
    let p99: Vec<u64> = tail["patterns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["latency"]["p99"].as_u64().unwrap())
        .collect();
    assert!(
        p99.windows(2).all(|w| w[0] >= w[1]),
        "sorted by p99: {p99:?}"
    );
    let through = json(&[
        "patterns",
        "--json",
        "--service",
        "payments",
        "--server",
        api,
    ]);
    for x in through["patterns"].as_array().unwrap() {
        assert!(x["services"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s == "payments"));
    }

    // One pattern: its graph and histogram, whose examples are real traces of it.
    let detail = json(&["patterns", &top, "--json", "--server", api]);
    assert_eq!(detail["id"], top.as_str());
    assert_eq!(detail["nodes"][0]["parent"], Value::Null);
    let buckets = detail["histogram"].as_array().unwrap();
    let in_buckets: u64 = buckets.iter().map(|b| b["count"].as_u64().unwrap()).sum();
    assert_eq!(in_buckets, detail["count"].as_u64().unwrap());
    let example = buckets[0]["examples"][0].as_str().unwrap().to_string();
    assert!(ids.contains(&example));
    let (code, out, _) = run(&["patterns", &top, "--server", api]);
    assert_eq!(code, 0);
    assert!(
        out.contains("frontend") && out.contains("examples"),
        "{out}"
    );

    // Two traces of the top pattern differ only in timing; two patterns differ in shape.
    let second = buckets
        .iter()
        .flat_map(|b| b["examples"].as_array().unwrap())
        .nth(1)
        .unwrap()
        .as_str()
        .unwrap()
        .to_string();
    let c = json(&["compare", &example, &second, "--json", "--server", api]);
    assert_eq!(
        (c["missing"].as_u64(), c["extra"].as_u64()),
        (Some(0), Some(0))
    );
    let other = list[1]["id"].as_str().unwrap();
    let c = json(&["compare", &top, other, "--json", "--server", api]);
    assert!(c["missing"].as_u64().unwrap() + c["extra"].as_u64().unwrap() > 0);
    let (code, out, _) = run(&["compare", &top, other, "--server", api]);
    assert_eq!(code, 0);
    assert!(out.contains("missing in B"), "{out}");

    // Bad parameters are refused, naming the parameter.
    let (code, _, err) = run(&["patterns", "--sort", "bogus", "--server", api]);
    assert_eq!(code, 1);
    assert!(err.contains("sort"), "{err}");
    let (code, _, err) = run(&["patterns", "p123", "--server", api]);
    assert_eq!(code, 1);
    assert!(err.contains("pattern id"), "{err}");
    let (code, _, err) = run(&["patterns", "p0000000000000001", "--server", api]);
    assert_eq!(code, 1);
    assert!(err.contains("no traces"), "{err}");
    let (code, _, err) = run(&["compare", "zz", &top, "--server", api]);
    assert_eq!(code, 1);
    assert!(err.contains("parameter a"), "{err}");
    stop(serve, data);
}
