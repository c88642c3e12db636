//! Jaeger's JSON, as its query API answers and its UI downloads it, reads into spans and
//! is written back in the same shape.

use crate::spans::{find, sid};
use causeway_model::codec::{self, jaeger, Format};
use causeway_model::span::{FOLLOWS_FROM, REF_TYPE};
use causeway_model::{Span, SpanKind, Status, Trace, TraceId, Value};
use proptest::prelude::*;

/// Two traces as Jaeger's query API answers `/api/traces?service=frontend`: one with a
/// 64-bit id over two processes, one with a 128-bit id and a span that cannot be read.
const ANSWER: &str = r#"{
  "data": [
    {
      "traceID": "3c1a4f6e2b9d8e07",
      "spans": [
        {
          "traceID": "3c1a4f6e2b9d8e07",
          "spanID": "3c1a4f6e2b9d8e07",
          "flags": 1,
          "operationName": "HTTP GET /dispatch",
          "references": [],
          "startTime": 1700000000000000,
          "duration": 712345,
          "tags": [
            {"key": "span.kind", "type": "string", "value": "server"},
            {"key": "http.method", "type": "string", "value": "GET"},
            {"key": "http.status_code", "type": "int64", "value": 200},
            {"key": "sampler.param", "type": "bool", "value": true},
            {"key": "internal.span.format", "type": "string", "value": "proto"}
          ],
          "logs": [
            {"timestamp": 1700000000000100, "fields": [
              {"key": "event", "type": "string", "value": "HTTP request received"},
              {"key": "level", "type": "string", "value": "info"}
            ]},
            {"timestamp": 1700000000000250, "fields": [
              {"key": "message", "type": "string", "value": "dispatching"}
            ]}
          ],
          "processID": "p1",
          "warnings": null
        },
        {
          "traceID": "3c1a4f6e2b9d8e07",
          "spanID": "5e2f1c0d9a8b7c6d",
          "flags": 1,
          "operationName": "SQL SELECT",
          "references": [
            {"refType": "CHILD_OF", "traceID": "3c1a4f6e2b9d8e07", "spanID": "3c1a4f6e2b9d8e07"}
          ],
          "startTime": 1700000000001000,
          "duration": 300000,
          "tags": [
            {"key": "span.kind", "type": "string", "value": "client"},
            {"key": "sql.query", "type": "string", "value": "SELECT * FROM customer WHERE id=123"},
            {"key": "db.rows_scanned", "type": "int64", "value": "9007199254740993"},
            {"key": "cache.hit_ratio", "type": "float64", "value": 0.25},
            {"key": "request.digest", "type": "binary", "value": "AAAwOQ=="},
            {"key": "error", "type": "bool", "value": true},
            {"key": "otel.status_description", "type": "string", "value": "deadlock found"}
          ],
          "logs": [],
          "processID": "p2",
          "warnings": null
        },
        {
          "traceID": "3c1a4f6e2b9d8e07",
          "spanID": "1f",
          "flags": 1,
          "operationName": "notify driver",
          "references": [
            {"refType": "FOLLOWS_FROM", "traceID": "3c1a4f6e2b9d8e07", "spanID": "3c1a4f6e2b9d8e07"}
          ],
          "startTime": 1700000000710000,
          "duration": 50000,
          "tags": [
            {"key": "span.kind", "type": "string", "value": "producer"},
            {"key": "retries", "value": 3}
          ],
          "logs": null,
          "processID": "p1",
          "warnings": null
        }
      ],
      "processes": {
        "p1": {
          "serviceName": "frontend",
          "tags": [
            {"key": "hostname", "type": "string", "value": "web-1"},
            {"key": "ip", "type": "string", "value": "10.0.0.5"},
            {"key": "jaeger.version", "type": "string", "value": "Go-2.30.0"}
          ]
        },
        "p2": {
          "serviceName": "mysql",
          "tags": [
            {"key": "host.name", "type": "string", "value": "db-1"},
            {"key": "process.pid", "type": "int64", "value": 4242}
          ]
        }
      },
      "warnings": null
    },
    {
      "traceID": "5b8efff798038103d269b633813fc60c",
      "spans": [
        {
          "traceID": "5b8efff798038103d269b633813fc60c",
          "spanID": "eee19b7ec3c1b174",
          "operationName": "GetDriver",
          "references": [
            {"refType": "FOLLOWS_FROM", "traceID": "3c1a4f6e2b9d8e07", "spanID": "1f"}
          ],
          "startTime": 1700000000760000,
          "duration": 1500,
          "tags": [
            {"key": "span.kind", "type": "string", "value": "consumer"},
            {"key": "otel.status_code", "type": "string", "value": "OK"}
          ],
          "logs": [],
          "processID": "p1"
        },
        {
          "traceID": "5b8efff798038103d269b633813fc60c",
          "spanID": "zz19b7ec3c1b175",
          "operationName": "broken",
          "references": [],
          "startTime": 1700000000760100,
          "duration": 10,
          "tags": [],
          "logs": [],
          "processID": "p1"
        },
        {
          "spanID": "eee19b7ec3c1b176",
          "operationName": "FindDriverIDs",
          "references": [
            {"refType": "CHILD_OF", "spanID": "eee19b7ec3c1b174"}
          ],
          "startTime": 1700000000760200,
          "duration": 700,
          "tags": [],
          "logs": [],
          "processID": "p1"
        }
      ],
      "processes": {
        "p1": {"serviceName": "driver", "tags": []}
      },
      "warnings": null
    }
  ],
  "total": 0,
  "limit": 0,
  "offset": 0,
  "errors": null
}"#;

fn short_trace() -> TraceId {
    TraceId::new(0x3c1a4f6e2b9d8e07).unwrap()
}

#[test]
fn the_query_apis_answer_is_detected_and_read_span_for_span() {
    assert_eq!(codec::detect(ANSWER.as_bytes()), Format::JaegerJson);
    let d = jaeger::decode_json(ANSWER.as_bytes()).unwrap();
    assert_eq!(d.spans.len(), 5, "{:?}", d.rejected);

    // The root: a 64-bit trace id is the low half.
    let root = find(&d.spans, "3c1a4f6e2b9d8e07");
    assert_eq!(root.trace_id, short_trace());
    assert_eq!(
        root.trace_id.to_string(),
        "00000000000000003c1a4f6e2b9d8e07"
    );
    assert_eq!(root.parent_id, None);
    assert_eq!(root.name, "HTTP GET /dispatch");
    assert_eq!(root.kind, SpanKind::Server);
    assert_eq!(&*root.service, "frontend");
    assert_eq!(&*root.host, "web-1");
    assert_eq!(root.pid, 0);
    assert_eq!(root.start, 1_700_000_000_000_000_000);
    assert_eq!(root.end, 1_700_000_000_712_345_000);
    assert_eq!(root.status, Status::Unset);
    assert_eq!(root.attribute("http.method"), Some(&Value::from("GET")));
    assert_eq!(root.attribute("http.status_code"), Some(&Value::I64(200)));
    assert_eq!(root.attribute("sampler.param"), Some(&Value::Bool(true)));
    // The kind is the kind, Jaeger's own bookkeeping is dropped, and the process's other
    // tags are the span's.
    assert_eq!(root.attribute("span.kind"), None);
    assert_eq!(root.attribute("internal.span.format"), None);
    assert_eq!(root.attribute("hostname"), None);
    assert_eq!(root.attribute("ip"), Some(&Value::from("10.0.0.5")));
    assert_eq!(
        root.attribute("jaeger.version"),
        Some(&Value::from("Go-2.30.0"))
    );
    assert_eq!(root.events.len(), 2);
    assert_eq!(root.events[0].name, "HTTP request received");
    assert_eq!(root.events[0].time, 1_700_000_000_000_100_000);
    assert_eq!(root.events[0].attributes.len(), 1);
    assert_eq!(root.events[0].attributes[0].key, "level");
    assert_eq!(root.events[1].name, "log");
    assert_eq!(
        root.events[1].attributes[0].value,
        Value::from("dispatching")
    );
    assert!(root.links.is_empty());

    // CHILD_OF is the parent; error=true with a description is the error status.
    let sql = find(&d.spans, "5e2f1c0d9a8b7c6d");
    assert_eq!(sql.parent_id, Some(root.span_id));
    assert!(sql.links.is_empty());
    assert!(!sql.follows_from_parent());
    assert_eq!(sql.kind, SpanKind::Client);
    assert_eq!(&*sql.service, "mysql");
    assert_eq!(&*sql.host, "db-1");
    assert_eq!(sql.pid, 4242);
    assert_eq!(sql.status, Status::Error("deadlock found".into()));
    assert_eq!(
        sql.attribute("db.rows_scanned"),
        Some(&Value::I64(9_007_199_254_740_993)),
        "an int64 above 2^53 arrives as a string and is read exactly"
    );
    assert_eq!(sql.attribute("cache.hit_ratio"), Some(&Value::F64(0.25)));
    assert_eq!(
        sql.attribute("request.digest"),
        Some(&Value::Bytes(vec![0, 0, 0x30, 0x39]))
    );
    assert_eq!(sql.attribute("error"), None);
    assert_eq!(sql.attribute("otel.status_description"), None);
    assert_eq!(sql.attribute("process.pid"), None);

    // FOLLOWS_FROM is the parent too, marked by a link the analyses read.
    let notify = find(&d.spans, "000000000000001f");
    assert_eq!(notify.parent_id, Some(root.span_id));
    assert!(notify.follows_from_parent());
    assert_eq!(notify.kind, SpanKind::Producer);
    assert_eq!(notify.attribute("retries"), Some(&Value::I64(3)));
    assert!(notify.events.is_empty());

    // A 128-bit trace; a reference to another trace is a link, not a parent.
    let consumer = find(&d.spans, "eee19b7ec3c1b174");
    assert_eq!(
        consumer.trace_id,
        TraceId::parse("5b8efff798038103d269b633813fc60c").unwrap()
    );
    assert_eq!(consumer.parent_id, None);
    assert_eq!(consumer.status, Status::Ok);
    assert_eq!(consumer.kind, SpanKind::Consumer);
    assert_eq!(consumer.links.len(), 1);
    assert_eq!(consumer.links[0].trace_id, short_trace());
    assert_eq!(consumer.links[0].span_id, notify.span_id);
    assert_eq!(consumer.links[0].attributes[0].key, REF_TYPE);
    assert_eq!(
        consumer.links[0].attributes[0].value,
        Value::from(FOLLOWS_FROM)
    );
    // A span without its own trace id is the trace's; a reference without one is too.
    let child = find(&d.spans, "eee19b7ec3c1b176");
    assert_eq!(child.trace_id, consumer.trace_id);
    assert_eq!(child.parent_id, Some(consumer.span_id));
    assert_eq!(&*child.service, "driver");

    // Each trace is one tree.
    for id in [short_trace(), consumer.trace_id] {
        let spans: Vec<Span> = d
            .spans
            .iter()
            .filter(|s| s.trace_id == id)
            .cloned()
            .collect();
        let t = Trace::assemble(id, spans);
        assert_eq!(t.roots.len(), 1, "trace {id}");
        assert!(t.orphans.is_empty());
    }
}

#[test]
fn a_bad_span_is_rejected_with_its_path_and_the_rest_are_kept() {
    let d = jaeger::decode_json(ANSWER.as_bytes()).unwrap();
    assert_eq!(d.rejected.len(), 1);
    assert_eq!(d.rejected[0].path, "data[1].spans[1].spanID");
    assert_eq!(
        d.rejected[0].to_string(),
        "invalid span id \"zz19b7ec3c1b175\": 'z' at position 0 is not a hex digit \
         at data[1].spans[1].spanID"
    );
    assert!(d.spans.iter().all(|s| s.name != "broken"));

    // Tags, references and processes are named down to the field.
    let cases = [
        (
            r#"{"key": "n", "type": "int64", "value": "12x"}"#,
            "data[0].spans[0].tags[0].value",
            "int64 tag \"n\": \"12x\" is not a decimal 64-bit integer",
        ),
        (
            r#"{"key": "n", "type": "int128", "value": 1}"#,
            "data[0].spans[0].tags[0].type",
            "unknown type \"int128\"",
        ),
        (
            r#"{"key": "b", "type": "binary", "value": "not base64!"}"#,
            "data[0].spans[0].tags[0].value",
            "binary tag \"b\"",
        ),
        (
            r#"{"key": "b", "type": "bool", "value": 1}"#,
            "data[0].spans[0].tags[0].value",
            "bool tag \"b\": 1 is not true or false",
        ),
    ];
    for (tag, path, reason) in cases {
        let doc = format!(
            r#"{{"data": [{{"traceID": "1", "spans": [
                {{"spanID": "1", "startTime": 1, "duration": 1, "tags": [{tag}], "processID": "p1"}},
                {{"spanID": "2", "startTime": 1, "duration": 1, "processID": "p1"}}
            ], "processes": {{"p1": {{"serviceName": "s"}}}}}}]}}"#
        );
        let d = jaeger::decode_json(doc.as_bytes()).unwrap();
        assert_eq!(d.spans.len(), 1, "{tag}");
        assert_eq!(d.rejected.len(), 1, "{tag}");
        assert_eq!(d.rejected[0].path, path, "{tag}");
        assert!(
            d.rejected[0].reason.contains(reason),
            "{}",
            d.rejected[0].reason
        );
    }
    let doc = br#"{"data": [{"traceID": "1", "spans": [
        {"spanID": "1", "references": [{"refType": "CHILD_OF", "spanID": ""}], "processID": "p1"},
        {"spanID": "2", "references": [{"refType": "PARENT_OF", "spanID": "1"}], "processID": "p1"},
        {"spanID": "3", "processID": "p9"},
        {"spanID": "4", "processID": "p2"},
        {"spanID": "5", "processID": "p1"}
    ], "processes": {"p1": {"serviceName": "s"},
                     "p2": {"serviceName": "t", "tags": [{"key": "pid", "type": "int64", "value": 1.5}]}}}]}"#;
    let d = jaeger::decode_json(doc).unwrap();
    assert_eq!(d.spans.len(), 1);
    let paths: Vec<&str> = d.rejected.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "data[0].spans[0].references[0].spanID",
            "data[0].spans[1].references[0].refType",
            "data[0].spans[2].processID",
            "data[0].processes.p2.tags[0].value",
        ]
    );
    assert!(
        d.rejected[2]
            .reason
            .contains("process \"p9\" is not among the trace's processes"),
        "{}",
        d.rejected[2]
    );
}

#[test]
fn malformed_json_names_its_line_and_column_once() {
    let e = jaeger::decode_json(b"{\n  \"data\": [\n    {\"traceID\": 7}\n  ]\n}").unwrap_err();
    assert!(e.path.starts_with("line 3 column"), "{e}");
    assert!(e.reason.starts_with("invalid Jaeger JSON: "), "{e}");
    assert_eq!(e.to_string().matches("line").count(), 1, "{e}");
    let e = jaeger::decode_json(b"{\"data\": [").unwrap_err();
    assert!(e.path.starts_with("line 1 column"), "{e}");
    // Deep nesting is refused by the parser's depth limit, not by overflowing the stack.
    let deep = format!("{{\"data\": {}", "[".repeat(100_000));
    assert!(jaeger::decode_json(deep.as_bytes()).is_err());
    let deep = format!(
        r#"{{"traceID": "1", "spans": [{{"spanID": "1", "tags": [{{"key": "k", "value": {}}}]}}]}}"#,
        "[".repeat(100_000)
    );
    assert!(jaeger::decode_json(deep.as_bytes()).is_err());
    // Jaeger's own error answer says so.
    let e = jaeger::decode_json(
        br#"{"data":null,"total":0,"limit":0,"offset":0,"errors":[{"code":404,"msg":"trace not found"}]}"#,
    )
    .unwrap_err();
    assert_eq!(e.path, "errors");
    assert!(e.reason.contains("trace not found"), "{e}");
    let e = jaeger::decode_json(br#"{"resourceSpans": []}"#).unwrap_err();
    assert!(e.reason.starts_with("not Jaeger JSON"), "{e}");
}

#[test]
fn a_bare_trace_a_list_of_traces_and_embedded_processes_are_read() {
    let trace = r#"{"traceID": "a", "spans": [
        {"spanID": "b", "operationName": "op", "startTime": 5, "duration": 2,
         "process": {"serviceName": "embedded", "tags": [{"key": "pid", "type": "int64", "value": 77}]}},
        {"spanID": "c", "parentSpanID": "b", "operationName": "old", "startTime": 6, "duration": 1,
         "processID": "p1"},
        {"spanID": "d", "parentSpanID": "0000000000000000", "startTime": 6, "duration": 1},
        {"spanID": "zz", "startTime": 6, "duration": 1}
    ], "processes": {"p1": {"serviceName": "svc"}}}"#;
    assert_eq!(codec::detect(trace.as_bytes()), Format::JaegerJson);
    let d = jaeger::decode_json(trace.as_bytes()).unwrap();
    assert_eq!(d.spans.len(), 3);
    assert_eq!(d.rejected[0].path, "spans[3].spanID");
    let b = find(&d.spans, "000000000000000b");
    assert_eq!(b.trace_id, TraceId::new(0xa).unwrap());
    assert_eq!(&*b.service, "embedded");
    assert_eq!(b.pid, 77);
    assert_eq!(b.start, 5_000);
    assert_eq!(b.end, 7_000);
    // The deprecated parentSpanID is read when there are no references.
    assert_eq!(
        find(&d.spans, "000000000000000c").parent_id,
        Some(b.span_id)
    );
    let d_span = find(&d.spans, "000000000000000d");
    assert_eq!(d_span.parent_id, None);
    assert_eq!(&*d_span.service, "unknown_service");

    let list = format!("[\n  {trace},\n  {trace}\n]");
    assert_eq!(codec::detect(list.as_bytes()), Format::JaegerJson);
    let d = jaeger::decode_json(list.as_bytes()).unwrap();
    assert_eq!(d.spans.len(), 6);
    assert_eq!(d.rejected[1].path, "[1].spans[3].spanID");
}

#[test]
fn the_parent_is_the_first_child_of_reference_within_the_trace() {
    // As in Jaeger's own converter fixture: a CHILD_OF to another trace comes first, and
    // the parent is both CHILD_OF and FOLLOWS_FROM.
    let doc = br#"{"traceID": "1", "spans": [
        {"spanID": "2", "startTime": 1, "duration": 5, "processID": "p1"},
        {"spanID": "4", "startTime": 1, "duration": 5, "processID": "p1", "references": [
            {"refType": "CHILD_OF", "traceID": "ff", "spanID": "ff"},
            {"refType": "CHILD_OF", "traceID": "1", "spanID": "2"},
            {"refType": "FOLLOWS_FROM", "traceID": "1", "spanID": "2"},
            {"refType": "FOLLOWS_FROM", "spanID": "3"}
        ]}
    ], "processes": {"p1": {"serviceName": "s"}}}"#;
    let d = jaeger::decode_json(doc).unwrap();
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    let s = find(&d.spans, "0000000000000004");
    assert_eq!(s.parent_id, Some(sid("0000000000000002")));
    assert!(
        !s.follows_from_parent(),
        "CHILD_OF wins over FOLLOWS_FROM to the same span"
    );
    let links: Vec<(u128, u64, Value)> = s
        .links
        .iter()
        .map(|l| {
            (
                l.trace_id.get(),
                l.span_id.get(),
                l.attributes[0].value.clone(),
            )
        })
        .collect();
    assert_eq!(
        links,
        [
            (0xff, 0xff, Value::from("child_of")),
            (1, 3, Value::from(FOLLOWS_FROM))
        ]
    );
    let out: serde_json::Value = serde_json::from_slice(&jaeger::encode_json(&d.spans)).unwrap();
    let refs: Vec<(String, String)> = out["data"][0]["spans"][1]["references"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["refType"].as_str().unwrap().to_string(),
                r["spanID"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        refs,
        [
            ("CHILD_OF".into(), "0000000000000002".into()),
            ("CHILD_OF".into(), "00000000000000ff".into()),
            ("FOLLOWS_FROM".into(), "0000000000000003".into()),
        ],
        "the parent is written first"
    );
}

#[test]
fn detect_tells_jaeger_from_otlp_and_zipkin_by_the_first_key() {
    for (body, format) in [
        (r#"  {"data": []}"#, Format::JaegerJson),
        (r#"{ "traceID": "1", "spans": []}"#, Format::JaegerJson),
        (r#"{"spans": []}"#, Format::JaegerJson),
        (r#"{"total": 0, "data": []}"#, Format::JaegerJson),
        (r#"[ {"traceID": "1"}]"#, Format::JaegerJson),
        (r#"{"resourceSpans": []}"#, Format::OtlpJson),
        (r#"{}"#, Format::OtlpJson),
        (r#"[{"traceId": "1", "id": "2"}]"#, Format::ZipkinJson),
        (r#"[]"#, Format::ZipkinJson),
        (r#"{"data\"": []}"#, Format::OtlpJson),
    ] {
        assert_eq!(codec::detect(body.as_bytes()), format, "{body}");
    }
}

#[test]
fn spans_are_written_as_jaeger_writes_them() {
    let d = jaeger::decode_json(ANSWER.as_bytes()).unwrap();
    let out = jaeger::encode_json(&d.spans);
    assert_eq!(codec::detect(&out), Format::JaegerJson);
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    for key in ["total", "limit", "offset"] {
        assert_eq!(v[key], 0, "{key}");
    }
    assert!(v["errors"].is_null());
    assert!(v.as_object().unwrap().contains_key("errors"));
    let traces = v["data"].as_array().unwrap();
    assert_eq!(traces.len(), 2);
    let t = &traces[0];
    assert_eq!(t["traceID"], "00000000000000003c1a4f6e2b9d8e07");
    assert!(t["warnings"].is_null());
    // One process per service, host and pid.
    let processes = t["processes"].as_object().unwrap();
    assert_eq!(processes.len(), 2);
    assert_eq!(processes["p1"]["serviceName"], "frontend");
    assert_eq!(
        processes["p1"]["tags"][0],
        serde_json::json!({"key": "hostname", "type": "string", "value": "web-1"})
    );
    assert_eq!(processes["p2"]["serviceName"], "mysql");
    assert_eq!(
        processes["p2"]["tags"][1],
        serde_json::json!({"key": "process.pid", "type": "int64", "value": 4242})
    );
    let spans = t["spans"].as_array().unwrap();
    let span = |id: &str| spans.iter().find(|s| s["spanID"] == id).unwrap();
    let root = span("3c1a4f6e2b9d8e07");
    assert_eq!(root["references"], serde_json::json!([]));
    assert_eq!(root["startTime"], 1_700_000_000_000_000u64);
    assert_eq!(root["duration"], 712_345);
    assert_eq!(root["processID"], "p1");
    let tags = |s: &serde_json::Value| s["tags"].as_array().unwrap().clone();
    assert!(tags(root)
        .contains(&serde_json::json!({"key": "span.kind", "type": "string", "value": "server"})));
    assert_eq!(
        root["logs"][0]["fields"][0],
        serde_json::json!({"key": "event", "type": "string", "value": "HTTP request received"})
    );
    assert_eq!(root["logs"][0]["timestamp"], 1_700_000_000_000_100u64);

    let sql = span("5e2f1c0d9a8b7c6d");
    assert_eq!(
        sql["references"],
        serde_json::json!([{"refType": "CHILD_OF", "traceID": "00000000000000003c1a4f6e2b9d8e07", "spanID": "3c1a4f6e2b9d8e07"}])
    );
    let sql_tags = tags(sql);
    for want in [
        serde_json::json!({"key": "db.rows_scanned", "type": "int64", "value": "9007199254740993"}),
        serde_json::json!({"key": "cache.hit_ratio", "type": "float64", "value": 0.25}),
        serde_json::json!({"key": "request.digest", "type": "binary", "value": "AAAwOQ=="}),
        serde_json::json!({"key": "otel.status_code", "type": "string", "value": "ERROR"}),
        serde_json::json!({"key": "otel.status_description", "type": "string", "value": "deadlock found"}),
        serde_json::json!({"key": "error", "type": "bool", "value": true}),
        serde_json::json!({"key": "span.kind", "type": "string", "value": "client"}),
    ] {
        assert!(sql_tags.contains(&want), "{want} in {sql_tags:?}");
    }
    let notify = span("000000000000001f");
    assert_eq!(
        notify["references"],
        serde_json::json!([{"refType": "FOLLOWS_FROM", "traceID": "00000000000000003c1a4f6e2b9d8e07", "spanID": "3c1a4f6e2b9d8e07"}]),
        "the followed-from parent is one reference, not a parent and a link"
    );
    let consumer = traces[1]["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["spanID"] == "eee19b7ec3c1b174")
        .unwrap();
    assert_eq!(
        consumer["references"],
        serde_json::json!([{"refType": "FOLLOWS_FROM", "traceID": "00000000000000003c1a4f6e2b9d8e07", "spanID": "000000000000001f"}])
    );
    assert!(tags(consumer).contains(
        &serde_json::json!({"key": "otel.status_code", "type": "string", "value": "OK"})
    ));

    // And what was written reads back as the same spans.
    let again = jaeger::decode_json(&out).unwrap();
    assert!(again.rejected.is_empty(), "{:?}", again.rejected);
    assert_eq!(again.spans, d.spans);
}

/// A tag of each Jaeger type, as (type, JSON value, the value it reads as).
fn tag() -> impl Strategy<Value = (&'static str, serde_json::Value, Value)> {
    prop_oneof![
        "[ -~]{0,12}".prop_map(|s| ("string", serde_json::json!(s), Value::Str(s))),
        any::<bool>().prop_map(|b| ("bool", serde_json::json!(b), Value::Bool(b))),
        any::<i64>().prop_map(|i| {
            let json = if i.unsigned_abs() < 1 << 53 {
                serde_json::json!(i)
            } else {
                serde_json::json!(i.to_string())
            };
            ("int64", json, Value::I64(i))
        }),
        (-1e15f64..1e15).prop_map(|f| ("float64", serde_json::json!(f), Value::F64(f))),
        proptest::collection::vec(any::<u8>(), 0..12).prop_map(|b| {
            use base64::Engine as _;
            let text = base64::engine::general_purpose::STANDARD.encode(&b);
            ("binary", serde_json::json!(text), Value::Bytes(b))
        }),
    ]
}

/// Hex digits of `v` without leading zeros, padded to at least `min` digits.
fn hex(v: u128, min: usize) -> String {
    format!("{v:0min$x}")
}

proptest! {
    /// Jaeger documents with ids of every length and tags of every type read as Jaeger
    /// meant them, and what is written from them reads back the same.
    #[test]
    fn generated_jaeger_documents_read_and_write_back(
        trace in 1u128..,
        short in any::<bool>(),
        pad in 0usize..3,
        spans in proptest::collection::vec(
            (1u64.., 0u64..1 << 52, 0u64..1 << 30, "[a-z /]{0,12}",
             proptest::collection::vec(("[a-z][a-z_.]{0,8}", tag()), 0..5)),
            1..6,
        ),
    ) {
        let trace = if short { trace as u64 as u128 } else { trace };
        prop_assume!(trace != 0);
        let digits = if trace >> 64 == 0 { [1, 16, 16][pad] } else { [1, 32, 32][pad] };
        let trace_text = hex(trace, digits);
        let mut json_spans = Vec::new();
        for (i, (id, start, duration, name, tags)) in spans.iter().enumerate() {
            let parent = (i > 0).then(|| spans[0].0).filter(|p| p != id);
            json_spans.push(serde_json::json!({
                "traceID": trace_text,
                "spanID": hex(*id as u128, if i % 2 == 0 { 1 } else { 16 }),
                "operationName": name,
                "references": parent.map(|p| vec![serde_json::json!({
                    "refType": "CHILD_OF", "traceID": trace_text, "spanID": hex(p as u128, 16)
                })]).unwrap_or_default(),
                "startTime": start,
                "duration": duration,
                "tags": tags.iter().map(|(k, (ty, v, _))| serde_json::json!({
                    "key": format!("t.{k}"), "type": ty, "value": v
                })).collect::<Vec<_>>(),
                "logs": [],
                "processID": "p1",
            }));
        }
        let doc = serde_json::json!({
            "data": [{"traceID": trace_text, "spans": json_spans,
                      "processes": {"p1": {"serviceName": "svc", "tags": []}}}],
            "total": 0, "limit": 0, "offset": 0, "errors": null,
        });
        let body = serde_json::to_vec(&doc).unwrap();
        prop_assert_eq!(codec::detect(&body), Format::JaegerJson);
        let d = jaeger::decode_json(&body).unwrap();
        prop_assert!(d.rejected.is_empty(), "{:?}", d.rejected);
        prop_assert_eq!(d.spans.len(), spans.len());
        for (s, (id, start, duration, name, tags)) in d.spans.iter().zip(&spans) {
            prop_assert_eq!(s.trace_id.get(), trace);
            prop_assert_eq!(s.span_id.get(), *id);
            prop_assert_eq!(&s.name, name);
            prop_assert_eq!(s.start, start * 1000);
            prop_assert_eq!(s.end, (start + duration) * 1000);
            let want: Vec<Value> = tags.iter().map(|(_, (_, _, v))| v.clone()).collect();
            let got: Vec<Value> = s.attributes.iter().map(|a| a.value.clone()).collect();
            prop_assert_eq!(got, want);
        }
        // Written back: full-length ids, the same spans.
        let out = jaeger::encode_json(&d.spans);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        prop_assert_eq!(v["data"][0]["traceID"].as_str().unwrap().len(), 32);
        prop_assert_eq!(v["data"][0]["spans"][0]["spanID"].as_str().unwrap().len(), 16);
        let again = jaeger::decode_json(&out).unwrap();
        prop_assert!(again.rejected.is_empty());
        prop_assert_eq!(again.spans, d.spans);
    }
}
