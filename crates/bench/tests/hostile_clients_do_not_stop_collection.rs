//! The combined load: slow senders, an ingest flood, idle connections past the query
//! API's cap, greedy SQL, large exports and searches with huge limits, all at once,
//! beside a well-behaved client (`causeway-bench hostile`, the harness BENCHMARKS.md
//! reports from). Every request of the well-behaved client is acknowledged, every span
//! it was acknowledged for is stored, each hostile client is answered as it should be,
//! and the server's resident memory stays under the bound its limits allow.

use std::process::Command;

const BENCH: &str = env!("CARGO_BIN_EXE_causeway-bench");

#[test]
fn well_behaved_ingest_goes_on_beside_hostile_clients_within_a_memory_bound() {
    let data = std::env::temp_dir().join(format!(
        "causeway-bench-test-hostile-{}",
        std::process::id()
    ));
    let out = Command::new(BENCH)
        .args(["hostile", "--seconds", "8", "--rate", "500", "--json"])
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
    let count = |v: &serde_json::Value, status: &str| v[status].as_u64().unwrap_or(0);
    // Slow senders are timed out; idle connections past the cap are refused; the flood
    // is stored; a search limit past every cap is refused (400), or turned away while
    // the query listener is full (503: which, depends on the machine's speed), never
    // answered.
    assert!(count(&h["slow_senders"]["answered"], "408") > 0, "{h}");
    assert!(
        h["idle_connections"]["refused_503"].as_u64().unwrap() > 0,
        "{h}"
    );
    assert!(count(&h["ingest_flood"]["answered"], "200") > 0, "{h}");
    let past_cap = &h["search_limit_past_cap"];
    assert_eq!(count(past_cap, "200"), 0, "{h}");
    assert!(count(past_cap, "400") + count(past_cap, "503") > 0, "{h}");
    // Greedy SQL is refused (400), stopped (408) or turned away while the query
    // listener is full of idle connections or the SQL slots are taken (503): which of
    // them depends on the machine's speed, but never an answer.
    let sql = &h["greedy_sql"];
    assert_eq!(count(sql, "200"), 0, "{h}");
    assert!(
        count(sql, "400") + count(sql, "408") + count(sql, "503") > 0,
        "{h}"
    );
    // Exports and searches with a large limit are answered, or turned away as above.
    for answered in [&h["large_exports"]["answered"], &h["huge_searches"]] {
        assert!(count(answered, "200") + count(answered, "503") > 0, "{h}");
    }
    let _ = std::fs::remove_dir_all(&data);
}
