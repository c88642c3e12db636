//! `causeway ch migrate` creates the tables on every shard of a cluster, says so as text
//! or JSON, changes nothing the second time, and fails with a clear error and a non-zero
//! exit on a bad URL or a cluster whose nodes are not all listed.

use std::process::{Command, Output};

use causeway_clickhouse::local_cluster::{Cluster, CLUSTER};

fn causeway(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_causeway"))
        .args(args)
        .env_remove("CAUSEWAY_STORE_USER")
        .env_remove("CAUSEWAY_STORE_PASSWORD")
        .output()
        .expect("run causeway")
}

#[test]
fn migrate_creates_then_finds_the_schema() {
    let cluster = Cluster::start(2);
    let url = cluster.url("traces");
    let first = causeway(&["ch", "migrate", "--store", &url, "--json"]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let nodes = report["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2);
    assert!(nodes
        .iter()
        .all(|n| n["from"] == 0 && n["to"] == report["version"]));

    let again = causeway(&["ch", "migrate", "--store", &url]);
    assert!(again.status.success());
    let text = String::from_utf8_lossy(&again.stdout);
    assert_eq!(text.matches("(up to date)").count(), 2, "{text}");

    let half = format!("{}?cluster={CLUSTER}", cluster.node_url(0, "other"));
    let missing = causeway(&["ch", "migrate", "--store", &half]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("list every node"));

    let bad = causeway(&["ch", "migrate", "--store", "clickhouse://127.0.0.1:x/db"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("store URL port"));
}
