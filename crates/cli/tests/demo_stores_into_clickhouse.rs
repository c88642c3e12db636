//! `causeway demo --store clickhouse://...`: the demo's server keeps its spans in a
//! two-shard ClickHouse cluster; after the demo stops by itself, the cluster holds whole
//! multi-service traces, and the patterns analysis reads them back through a server.

mod common;

use std::process::{Command, Stdio};

use causeway_clickhouse::local_cluster::Cluster;
use causeway_clickhouse::{ClickHouseOptions, ClickHouseStore, Endpoint};
use causeway_store::{SearchQuery, TraceStore};
use common::{run, temp, Serve, BIN};

#[test]
fn the_demo_ships_its_traces_to_clickhouse() {
    let cluster = Cluster::start(2);
    let url = cluster.url("demo");
    let out = Command::new(BIN)
        .args([
            "demo",
            "--grpc",
            "127.0.0.1:0",
            "--ingest",
            "127.0.0.1:0",
            "--http",
            "127.0.0.1:0",
            "--duration",
            "6s",
            "--rate",
            "20",
            "--store",
            &url,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("causeway demo runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("spans in clickhouse://"), "{stdout}");

    let store = ClickHouseStore::open(Endpoint::parse(&url).unwrap(), ClickHouseOptions::default())
        .unwrap();
    let services = store.services().unwrap();
    for s in ["frontend", "catalog", "orders"] {
        assert!(services.iter().any(|have| have == s), "{services:?}");
    }
    let found = store
        .search(&SearchQuery {
            service: Some("frontend".into()),
            limit: 50,
            ..Default::default()
        })
        .unwrap();
    assert!(!found.is_empty());
    assert!(
        found
            .iter()
            .any(|t| t.services.len() >= 3 && !t.root_missing),
        "no whole multi-service trace: {found:?}"
    );

    // Another server on the same cluster answers the analyses from it.
    let data = temp("demo-ch-reader");
    let serve = Serve::start(&data, &["--store", &url]);
    let (code, out, err) = run(&["patterns", "--server", &serve.api, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(v.to_string().contains("frontend"), "{v}");
    drop(serve);
    let _ = std::fs::remove_dir_all(&data);
}
