//! `causeway pivot` against a `causeway serve` started with `--pivot-tracepoints`:
//! tracepoints, explain, install (a whole file, and a file whose error is reported at its
//! own file:line:column), list, results, processes, run (live JSON lines, then
//! uninstalled) and uninstall; a named query uninstalled stays usable as a source.

mod common;

use common::{run, temp, Serve};
use serde_json::{json, Value};

const TRACEPOINTS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../demo/tracepoints/replicas.pivot"
);
const QUERIES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../demo/tracepoints/paper-queries.pivot"
);

fn json_of(args: &[&str]) -> Value {
    let (code, out, err) = run(args);
    assert_eq!(code, 0, "{args:?}: {out}{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

fn installed_ids(api: &str) -> Vec<u64> {
    let list = json_of(&["pivot", "list", "--json", "--server", api]);
    list["queries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["id"].as_u64().unwrap())
        .collect()
}

#[test]
fn every_pivot_command_answers_from_the_hub() {
    let data = temp("pivot-commands");
    let serve = Serve::start(
        &data,
        &[
            "--pivot-tracepoints",
            TRACEPOINTS,
            "--pivot-interval",
            "200ms",
        ],
    );
    let api = serve.api.as_str();

    let tp = json_of(&["pivot", "tracepoints", "--json", "--server", api]);
    let names: Vec<&str> = tp["definitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"DN.DataTransferProtocol"), "{tp}");
    assert!(names.contains(&"NN.GetBlockLocations"), "{tp}");

    let q3 = "From dnop In DN.DataTransferProtocol GroupBy dnop.host Select dnop.host, COUNT";
    let (code, out, err) = run(&["pivot", "explain", q3, "--server", api]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("EMIT"), "{out}");

    // An error in a file is reported at the file's own line and column, not the hub's
    // reprint of the query.
    let bad = data.with_extension("bad.pivot");
    std::fs::write(
        &bad,
        "-- Q3 with a misspelt export\n\nQ3 : From dnop In DN.DataTransferProtocol\nGroupBy dnop.hots\nSelect dnop.hots, COUNT\n",
    )
    .unwrap();
    let bad_path = bad.display().to_string();
    let (code, out, err) = run(&["pivot", "install", "-f", &bad_path, "--server", api]);
    assert_ne!(code, 0, "{out}");
    assert!(
        err.contains(&format!("{bad_path}:4:9")),
        "the error names the file, line 4, column 9: {err}"
    );
    assert!(
        err.contains("GroupBy dnop.hots"),
        "the line is shown: {err}"
    );
    assert!(installed_ids(api).is_empty());

    let installed = json_of(&["pivot", "install", "-f", QUERIES, "--json", "--server", api]);
    let names: Vec<&str> = installed["installed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7"]);
    let ids = installed_ids(api);
    assert_eq!(ids.len(), 7);

    // A process reports: it is listed with what it dropped, and its results show.
    let q3_id = installed["installed"][2]["id"].as_u64().unwrap();
    let report = json!({
        "process": {"instance": 5, "service": "dn", "host": "A", "proc_name": "DataNode-A", "pid": 42},
        "installed": ids,
        "batches": [{"seq": 1, "at_ms": 1000, "partials": [{"query": q3_id, "overflow": 0,
            "groups": [{"key": ["A"], "states": [{"count": 4}]}]}]}],
        "counters": {"bags_malformed": 1, "bags_overflowed": 0, "fanout_dropped": 0, "batches_dropped": 0},
    });
    let resp = ureq::post(format!("{api}/api/pivot/agent"))
        .header("content-type", "application/json")
        .send(report.to_string().as_bytes())
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let procs = json_of(&["pivot", "processes", "--json", "--server", api]);
    assert_eq!(procs["processes"][0]["procName"], "DataNode-A", "{procs}");
    assert_eq!(procs["processes"][0]["counters"]["bagsMalformed"], 1);
    let (code, table, err) = run(&["pivot", "processes", "--server", api]);
    assert_eq!(code, 0, "{err}");
    assert!(table.contains("DataNode-A"), "{table}");
    let id = q3_id.to_string();
    let results = json_of(&["pivot", "results", &id, "--json", "--server", api]);
    assert_eq!(results["rows"], json!([["A", 4]]), "{results}");

    // `run` installs its query, prints a JSON line per interval, and uninstalls it.
    let (code, out, err) = run(&[
        "pivot",
        "run",
        q3,
        "--duration",
        "1s",
        "--json",
        "--server",
        api,
    ]);
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 2, "a line per 200 ms interval: {out}");
    assert!(lines
        .iter()
        .all(|l| l["results"]["columns"] == json!(["dnop.host", "COUNT"])));
    assert_eq!(installed_ids(api), ids, "run uninstalled its own query");

    let uninstalled = json_of(&["pivot", "uninstall", &id, "--json", "--server", api]);
    assert_eq!(uninstalled["uninstalled"], q3_id);
    assert_eq!(installed_ids(api).len(), 6);
    let (code, _, err) = run(&["pivot", "uninstall", &id, "--server", api]);
    assert_ne!(code, 0, "uninstalling it again fails");
    assert!(err.contains("no Pivot Tracing query"), "{err}");

    // A named query stays a source after it is uninstalled: the hub keeps it, and the
    // CLI's own check knows it from the hub.
    let remote = "Remote : From getloc In NN.GetBlockLocations \
                  Join st In StressTest.DoNextOp On st -> getloc Select st.host, getloc.replicas";
    let r = json_of(&["pivot", "install", remote, "--json", "--server", api]);
    let remote_id = r["installed"][0]["id"].as_u64().unwrap().to_string();
    json_of(&["pivot", "uninstall", &remote_id, "--json", "--server", api]);
    let using = "From d In DN.DataTransferProtocol Join r In Remote On r -> d Select COUNT";
    let r = json_of(&["pivot", "install", using, "--json", "--server", api]);
    assert!(r["installed"][0]["id"].is_u64(), "{r}");

    drop(serve);
    let _ = std::fs::remove_dir_all(&data);
    let _ = std::fs::remove_file(&bad);
}
