//! A file downloaded from Jaeger imports through `causeway import`, reads back through
//! `causeway trace --json` span for span, and `causeway export --format jaeger` writes
//! the same spans as Jaeger's JSON, which imports again into another server.

mod common;

use std::collections::BTreeMap;

use causeway_model::codec::{self, jaeger, Format};
use causeway_model::{Span, TraceId};
use common::{run, temp, Serve};

/// What Jaeger's UI downloads for a search: two traces, one with a span that cannot be read.
const DOWNLOAD: &str = r#"{"data": [
  {"traceID": "6b221d5bc9e6496c", "spans": [
    {"traceID": "6b221d5bc9e6496c", "spanID": "6b221d5bc9e6496c", "flags": 1,
     "operationName": "HTTP GET /customer", "references": [],
     "startTime": 1700000000000000, "duration": 300000,
     "tags": [{"key": "span.kind", "type": "string", "value": "server"},
              {"key": "http.status_code", "type": "int64", "value": 200}],
     "logs": [{"timestamp": 1700000000000500, "fields": [
        {"key": "event", "type": "string", "value": "HTTP request received"}]}],
     "processID": "p1", "warnings": null},
    {"traceID": "6b221d5bc9e6496c", "spanID": "2a1c9e04c5f1d6b2", "flags": 1,
     "operationName": "SQL SELECT",
     "references": [{"refType": "CHILD_OF", "traceID": "6b221d5bc9e6496c", "spanID": "6b221d5bc9e6496c"}],
     "startTime": 1700000000001000, "duration": 250000,
     "tags": [{"key": "span.kind", "type": "string", "value": "client"},
              {"key": "error", "type": "bool", "value": true},
              {"key": "db.rows", "type": "int64", "value": "9007199254740993"}],
     "logs": [], "processID": "p2", "warnings": null},
    {"traceID": "6b221d5bc9e6496c", "spanID": "not-hex", "operationName": "broken",
     "references": [], "startTime": 1700000000002000, "duration": 1,
     "tags": [], "logs": [], "processID": "p1", "warnings": null}
   ],
   "processes": {
     "p1": {"serviceName": "customer", "tags": [{"key": "hostname", "type": "string", "value": "cust-1"}]},
     "p2": {"serviceName": "mysql", "tags": [{"key": "process.pid", "type": "int64", "value": 311}]}
   },
   "warnings": null},
  {"traceID": "0af7651916cd43dd8448eb211c80319c", "spans": [
    {"traceID": "0af7651916cd43dd8448eb211c80319c", "spanID": "b7ad6b7169203331",
     "operationName": "dispatch", "references": [{"refType": "FOLLOWS_FROM", "traceID": "6b221d5bc9e6496c", "spanID": "2a1c9e04c5f1d6b2"}],
     "startTime": 1700000000400000, "duration": 1200,
     "tags": [{"key": "span.kind", "type": "string", "value": "consumer"}],
     "logs": [], "processID": "p1", "warnings": null}
   ],
   "processes": {"p1": {"serviceName": "driver", "tags": []}},
   "warnings": null}
], "total": 0, "limit": 0, "offset": 0, "errors": null}"#;

#[derive(serde::Deserialize)]
struct Body {
    spans: Vec<Span>,
}

fn by_trace(spans: Vec<Span>) -> BTreeMap<TraceId, Vec<Span>> {
    let mut m: BTreeMap<TraceId, Vec<Span>> = BTreeMap::new();
    for s in spans {
        m.entry(s.trace_id).or_default().push(s);
    }
    for v in m.values_mut() {
        v.sort_by_key(|s| s.span_id);
    }
    m
}

fn read_back(serve: &Serve, expected: &BTreeMap<TraceId, Vec<Span>>) {
    for (id, want) in expected {
        let (code, out, err) = run(&["trace", &id.to_string(), "--json", "--server", &serve.api]);
        assert_eq!(code, 0, "{err}");
        let got: Body = serde_json::from_str(&out).unwrap();
        let got = by_trace(got.spans).remove(id).unwrap();
        assert_eq!(&got, want, "trace {id} comes back field for field");
    }
}

#[test]
fn a_jaeger_download_imports_reads_back_and_exports_as_jaeger_json() {
    let data = temp("jaeger");
    let serve = Serve::start(&data, &[]);
    let file = data.with_extension("jaeger.json");
    std::fs::write(&file, DOWNLOAD).unwrap();
    assert_eq!(codec::detect(DOWNLOAD.as_bytes()), Format::JaegerJson);

    let (code, out, err) = run(&[
        "import",
        "--json",
        "--collector",
        &serve.ingest,
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let counts: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(counts["spans"], 3, "{counts}");
    assert_eq!(counts["rejected"], 1, "{counts}");
    assert!(
        err.contains("skipped: invalid span id \"not-hex\"")
            && err.contains("at data[0].spans[2].spanID"),
        "{err}"
    );

    let decoded = jaeger::decode_json(DOWNLOAD.as_bytes()).unwrap();
    let expected = by_trace(decoded.spans);
    assert_eq!(expected.len(), 2);
    read_back(&serve, &expected);
    // The 64-bit id is found by its 16 digits too.
    let (code, out, _) = run(&["trace", "6b221d5bc9e6496c", "--server", &serve.api]);
    assert_eq!(code, 0);
    assert!(out.contains("SQL SELECT"), "{out}");

    // Exported as Jaeger's JSON: the same spans, in the shape Jaeger writes.
    let dump = data.with_extension("export.json");
    let (code, _, err) = run(&[
        "export",
        "--format",
        "jaeger",
        "-o",
        dump.to_str().unwrap(),
        "--server",
        &serve.api,
    ]);
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&dump).unwrap();
    assert_eq!(codec::detect(&bytes), Format::JaegerJson);
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["data"].as_array().unwrap().len(), 2);
    assert!(v["errors"].is_null());
    let exported = jaeger::decode_json(&bytes).unwrap();
    assert!(exported.rejected.is_empty(), "{:?}", exported.rejected);
    assert_eq!(by_trace(exported.spans), expected);

    // And the export brings the traces along to another server.
    let data2 = temp("jaeger-2");
    let serve2 = Serve::start(&data2, &[]);
    let (code, out, err) = run(&[
        "import",
        "--json",
        // The flag's older name still works.
        "--ingest",
        &serve2.ingest,
        dump.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}{err}");
    let counts: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(counts["spans"], 3, "{counts}");
    assert_eq!(counts["rejected"], 0, "{counts}");
    read_back(&serve2, &expected);

    // An unknown export format names the ones there are.
    let (code, _, err) = run(&["export", "--format", "jaegr", "--server", &serve.api]);
    assert_eq!(code, 1);
    assert!(err.contains("jaeger"), "{err}");

    drop((serve, serve2));
    for d in [&data, &data2] {
        let _ = std::fs::remove_dir_all(d);
    }
    for f in [&file, &dump] {
        let _ = std::fs::remove_file(f);
    }
}
