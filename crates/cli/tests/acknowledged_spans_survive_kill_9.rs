//! Crash recovery: `causeway serve` killed with SIGKILL while spans stream in, then
//! restarted: every acknowledged span is there, and none twice; with the embedded store,
//! and with a ClickHouse cluster behind the serve process's spool.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use causeway_clickhouse::local_cluster::Cluster;
use causeway_model::codec::native;
use causeway_model::TraceId;
use causeway_testkit::Generator;
use common::{run, temp, Serve};

/// Streams batches until the server dies; returns the acknowledged traces and sizes.
fn stream_until_killed(serve: Serve, seed: u64, kill_after: Duration) -> HashMap<TraceId, usize> {
    let acked = Mutex::new(HashMap::new());
    let stop = AtomicBool::new(false);
    let url = format!("{}/v1/native", serve.ingest);
    std::thread::scope(|s| {
        s.spawn(|| {
            let http = ureq::Agent::new_with_config(
                ureq::config::Config::builder()
                    .timeout_global(Some(Duration::from_secs(10)))
                    .http_status_as_error(false)
                    .build(),
            );
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            let mut g = Generator::new(seed, now - 600_000_000_000, 1_000);
            while !stop.load(Ordering::Relaxed) {
                let traces: Vec<_> = (0..40).map(|_| g.trace()).collect();
                let body = native::encode_all(traces.iter().flatten());
                let r = http
                    .post(&url)
                    .header("content-type", causeway_server::NATIVE_CONTENT_TYPE)
                    .send(&body[..]);
                match r {
                    Ok(resp) if resp.status().as_u16() == 200 => {
                        let mut a = acked.lock().unwrap();
                        for t in &traces {
                            a.insert(t[0].trace_id, t.len());
                        }
                    }
                    Ok(_) => std::thread::sleep(Duration::from_millis(10)),
                    Err(_) => break, // the server is gone
                }
            }
        });
        std::thread::sleep(kill_after);
        serve.kill();
        stop.store(true, Ordering::Relaxed);
    });
    acked.into_inner().unwrap()
}

/// Three rounds of `serve` on `data`, each killed at a later moment of streaming;
/// the traces acknowledged in all of them.
fn killed_three_times(
    data: &std::path::Path,
    flags: &[&str],
    seed: u64,
) -> HashMap<TraceId, usize> {
    let mut all = HashMap::new();
    for (round, ms) in [300u64, 900, 1700].into_iter().enumerate() {
        let serve = Serve::start(data, flags);
        let acked = stream_until_killed(serve, round as u64 + seed, Duration::from_millis(ms));
        assert!(!acked.is_empty(), "round {round}: nothing was acknowledged");
        all.extend(acked);
    }
    all
}

/// Through `causeway sql`: as many span rows as distinct spans, and at least `acked`.
fn assert_no_span_twice(serve: &Serve, acked: usize) {
    let (code, out, err) = run(&[
        "sql",
        "SELECT count(*) AS n, count(DISTINCT concat(trace_id, span_id)) AS d FROM spans",
        "--json",
        "--server",
        &serve.api,
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rows"][0][0], v["rows"][0][1], "duplicated spans: {v}");
    assert!(v["rows"][0][0].as_u64().unwrap() as usize >= acked);
}

#[test]
fn every_acknowledged_span_is_present_once_after_sigkill() {
    let data = temp("crash");
    // Small blocks, so kills also land during block writes and WAL truncation.
    let flags = ["--fsync", "always", "--block-spans", "5000"];
    let all = killed_three_times(&data, &flags, 1);
    let serve = Serve::start(&data, &flags);
    let http = ureq::Agent::new_with_config(
        ureq::config::Config::builder()
            .http_status_as_error(false)
            .build(),
    );
    for (id, n) in &all {
        let mut r = http
            .get(&format!("{}/api/traces/{id}", serve.api))
            .call()
            .unwrap();
        let body = r.body_mut().read_to_string().unwrap();
        assert_eq!(
            r.status().as_u16(),
            200,
            "acknowledged trace {id} lost: {body}"
        );
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["spans"].as_array().unwrap().len(), *n, "trace {id}");
    }
    // Nothing stored twice: as many rows as distinct spans.
    assert_no_span_twice(&serve, all.values().sum());
    drop(serve);
    let _ = std::fs::remove_dir_all(&data);
}

/// The number of spans the API gives for `id`, once it has any.
fn spans_of(http: &ureq::Agent, api: &str, id: &TraceId) -> Option<usize> {
    let mut r = http.get(&format!("{api}/api/traces/{id}")).call().ok()?;
    if r.status().as_u16() != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&r.body_mut().read_to_string().ok()?).ok()?;
    v["spans"].as_array().map(Vec::len)
}

#[test]
fn every_acknowledged_span_reaches_clickhouse_once_after_sigkill() {
    let cluster = Cluster::start(2);
    let url = cluster.url("crash");
    let data = temp("crash-ch");
    let flags = ["--fsync", "always", "--store", &url];
    let all = killed_three_times(&data, &flags, 11);
    // The restarted process ships what its predecessors left in the spool.
    let serve = Serve::start(&data, &flags);
    let http = ureq::Agent::new_with_config(
        ureq::config::Config::builder()
            .http_status_as_error(false)
            .build(),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    for (id, n) in &all {
        loop {
            let got = spans_of(&http, &serve.api, id);
            if got == Some(*n) {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "acknowledged trace {id}: {got:?} spans of {n}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // SQL reads the same spans, each once.
    assert_no_span_twice(&serve, all.values().sum());
    drop(serve);
    let _ = std::fs::remove_dir_all(&data);
}
