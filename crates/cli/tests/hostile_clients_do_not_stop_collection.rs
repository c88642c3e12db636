//! The combined load: slow senders, an ingest flood, idle connections past the query
//! API's cap, greedy SQL, large exports and searches with huge limits, all at once,
//! beside a well-behaved client (`causeway bench hostile`, the harness BENCHMARKS.md
//! reports from). Every request of the well-behaved client is acknowledged, every span
//! it was acknowledged for is stored, each hostile client is answered as it should be,
//! and the server's resident memory stays under the bound its limits allow.

mod common;

use std::process::Command;

use common::BIN;

#[test]
fn well_behaved_ingest_goes_on_beside_hostile_clients_within_a_memory_bound() {
    let data = common::temp("hostile");
    let out = Command::new(BIN)
        .args([
            "bench",
            "hostile",
            "--seconds",
            "8",
            "--rate",
            "500",
            "--json",
        ])
        .args(["--rss-bound", "1GiB", "--data"])
        .arg(&data)
        .args([
            "--serve-flags",
            "--sql-memory 64MiB --sql-timeout 4s --max-receiving-bytes 64MiB \
             --block-spans 20000 --body-timeout 3s --max-connections 256",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    for phase in ["alone", "beside_hostile_clients"] {
        assert_eq!(r[phase]["failed"], 0, "{phase}: {r}");
        assert!(r[phase]["requests"].as_u64().unwrap() > 0, "{phase}: {r}");
    }
    let stored = &r["acknowledged_traces_stored"];
    assert_eq!(stored["stored"], stored["acknowledged"], "{r}");
    let rss = &r["server_rss_mib"];
    assert!(
        rss["peak"].as_f64().unwrap() <= rss["bound"].as_f64().unwrap(),
        "{r}"
    );
    let h = &r["hostile_clients"];
    // Slow senders are timed out; idle connections past the cap are refused; the flood
    // is stored; greedy SQL is refused or stopped; exports answer; a huge limit is
    // refused and a large one answered.
    assert!(
        h["slow_senders"]["answered"]["408"].as_u64().unwrap_or(0) > 0,
        "{h}"
    );
    assert!(
        h["idle_connections"]["refused_503"].as_u64().unwrap() > 0,
        "{h}"
    );
    assert!(
        h["ingest_flood"]["answered"]["200"].as_u64().unwrap_or(0) > 0,
        "{h}"
    );
    let sql = &h["greedy_sql"];
    assert!(sql["400"].as_u64().unwrap_or(0) > 0, "{h}");
    assert!(sql["408"].as_u64().unwrap_or(0) > 0, "{h}");
    assert!(sql.get("200").is_none(), "{h}");
    assert!(
        h["large_exports"]["answered"]["200"].as_u64().unwrap_or(0) > 0,
        "{h}"
    );
    assert!(h["huge_searches"]["400"].as_u64().unwrap_or(0) > 0, "{h}");
    assert!(h["huge_searches"]["200"].as_u64().unwrap_or(0) > 0, "{h}");
    let _ = std::fs::remove_dir_all(&data);
}
