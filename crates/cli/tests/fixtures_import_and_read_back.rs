//! Every public fixture imports through `causeway import` and reads back through
//! `causeway trace --json` span for span; search, SQL and export see the same data.

mod common;

use std::collections::BTreeMap;

use causeway_model::{Span, TraceId};
use common::{fixtures, run, temp, Serve};

fn fixture_files() -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for sub in ["otlp", "zipkin"] {
        for f in std::fs::read_dir(fixtures().join(sub)).unwrap().flatten() {
            files.push(f.path());
        }
    }
    files.sort();
    assert!(files.len() >= 7, "fixtures found: {files:?}");
    files
}

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

#[test]
fn fixtures_round_trip_through_import_trace_search_sql_and_export() {
    let data = temp("fixtures");
    let serve = Serve::start(&data, &[]);
    let files = fixture_files();
    let mut args = vec!["import", "--json", "--collector", &serve.ingest];
    let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    args.extend(names.iter().map(String::as_str));
    let (code, out, err) = run(&args);
    assert_eq!(code, 0, "{out}{err}");
    let counts: serde_json::Value = serde_json::from_str(&out).unwrap();

    let mut expected = Vec::new();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        let (_, spans, problems) = decode(&bytes);
        assert!(problems.is_empty(), "{}: {problems:?}", f.display());
        expected.extend(spans);
    }
    assert_eq!(counts["spans"], expected.len(), "{counts}");
    assert_eq!(counts["rejected"], 0);
    let expected = by_trace(expected);
    for (id, want) in &expected {
        let (code, out, err) = run(&["trace", &id.to_string(), "--json", "--server", &serve.api]);
        assert_eq!(code, 0, "{err}");
        let got: Body = serde_json::from_str(&out).unwrap();
        let got = by_trace(got.spans).remove(id).unwrap();
        assert_eq!(&got, want, "trace {id} comes back field for field");
        // 16-digit ids work everywhere.
        if id.is_short() {
            let short = format!("{:016x}", id.get());
            let (code, out, _) = run(&["trace", &short, "--server", &serve.api]);
            assert_eq!(code, 0);
            assert!(out.contains(&id.to_string()));
        }
    }

    // The tree printout names every span.
    let yelp = expected.keys().find(|id| expected[id].len() == 16).unwrap();
    let (_, tree, _) = run(&["trace", &yelp.to_string(), "--server", &serve.api]);
    assert_eq!(tree.lines().count(), 17, "{tree}");
    assert!(tree.contains("yelp-main"));

    let (code, out, _) = run(&[
        "search",
        "--service",
        "yelp-main",
        "--json",
        "--server",
        &serve.api,
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["traces"][0]["traceId"], yelp.to_string());
    // Sorted over everything stored: the trace of most spans first, of how many there are.
    let biggest = expected
        .iter()
        .max_by_key(|(id, spans)| (spans.len(), std::cmp::Reverse(**id)))
        .unwrap()
        .0;
    let (code, out, err) = run(&[
        "search",
        "--order=-spans",
        "--limit",
        "1",
        "--server",
        &serve.api,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&biggest.to_string()), "{out}");
    let line = format!(
        "1 of {} traces in the window, sorted by -spans",
        expected.len()
    );
    assert!(out.contains(&line), "{out}");
    let (code, _, err) = run(&["search", "--order", "size", "--server", &serve.api]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("order") && err.contains("\"size\""), "{err}");

    let total = expected.values().map(Vec::len).sum::<usize>();
    let (code, out, err) = run(&[
        "sql",
        "SELECT count(*) AS n FROM spans",
        "--json",
        "--server",
        &serve.api,
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rows"][0][0], total);

    // Export, import into a second server: the same spans.
    let dump = data.with_extension("native");
    let (code, _, err) = run(&[
        "export",
        "-o",
        dump.to_str().unwrap(),
        "--server",
        &serve.api,
    ]);
    assert_eq!(code, 0, "{err}");
    let data2 = temp("fixtures-2");
    let serve2 = Serve::start(&data2, &[]);
    let (code, _, err) = run(&["import", "--ingest", &serve2.ingest, dump.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    for (id, want) in expected.iter().take(3) {
        let (_, out, _) = run(&["trace", &id.to_string(), "--json", "--server", &serve2.api]);
        let got: Body = serde_json::from_str(&out).unwrap();
        assert_eq!(&by_trace(got.spans).remove(id).unwrap(), want);
    }
    drop((serve, serve2));
    let _ = std::fs::remove_dir_all(&data);
    let _ = std::fs::remove_dir_all(&data2);
    let _ = std::fs::remove_file(&dump);
}

fn decode(bytes: &[u8]) -> (causeway_model::codec::Format, Vec<Span>, Vec<String>) {
    use causeway_model::codec::{self, otlp, zipkin, Format};
    let f = codec::detect(bytes);
    match f {
        Format::OtlpJson => {
            let d = otlp::decode_json(bytes).unwrap();
            (
                f,
                d.spans,
                d.rejected.iter().map(|e| e.to_string()).collect(),
            )
        }
        Format::ZipkinJson => {
            let d = zipkin::decode_json(bytes).unwrap();
            (
                f,
                d.spans,
                d.rejected.iter().map(|e| e.to_string()).collect(),
            )
        }
        other => panic!("unexpected fixture format {other:?}"),
    }
}

#[test]
fn commands_fail_with_a_message_and_exit_status_one() {
    let (code, _, err) = run(&["trace", "not-an-id"]);
    assert_eq!(code, 1);
    assert!(err.contains("invalid trace id"), "{err}");
    let (code, _, err) = run(&["search", "--server", "http://127.0.0.1:9"]);
    assert_eq!(code, 1);
    assert!(err.contains("is `causeway serve` running?"), "{err}");
    let (code, _, _) = run(&["search", "--no-such-flag"]);
    assert_eq!(code, 2);
    let (code, out, _) = run(&["--help"]);
    assert_eq!(code, 0);
    for cmd in [
        "serve", "agent", "trace", "search", "sql", "import", "export", "logs",
    ] {
        assert!(out.contains(cmd), "{cmd} in --help");
        let (code, _, _) = run(&[cmd, "--help"]);
        assert_eq!(code, 0, "{cmd} --help");
    }
    let data = temp("refuse");
    let (code, _, err) = run(&[
        "serve",
        "--data",
        data.to_str().unwrap(),
        "--http",
        "0.0.0.0:0",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("requires an access token"), "{err}");
    let _ = std::fs::remove_dir_all(&data);
}
