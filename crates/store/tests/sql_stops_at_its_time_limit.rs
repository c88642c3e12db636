//! A SQL query past its time limit stops: every operator stops at its next batch, and
//! the query's thread and its place among the running queries are given back. (A file of
//! its own: it counts the queries running in the process.)

use std::time::{Duration, Instant};

mod common;

use causeway_store::sql::{self, SqlLimits};
use causeway_store::StoreError;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_past_its_time_limit_stops_and_gives_back_its_place() {
    let (store, dir) = common::store_of_spans("sql-timeout", 2_000);
    let limits = SqlLimits {
        timeout: Duration::from_millis(500),
        ..SqlLimits::default()
    };
    // 16 billion rows grouped: minutes of work for one operator, never done.
    let e = sql::query(
        &store,
        "SELECT a.operation, b.operation, count(*) FROM spans a, spans b, spans c GROUP BY a.operation, b.operation, c.span_id",
        limits,
    )
    .await;
    assert!(matches!(e, Err(StoreError::SqlTimeout(_))), "{e:?}");
    // Its thread ends (and its place among the running queries is given back) soon
    // after: every operator stops at its next batch.
    let started = Instant::now();
    while sql::running() > 0 && started.elapsed() < Duration::from_secs(20) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(sql::running(), 0, "the stopped query kept running");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
