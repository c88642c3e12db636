//! A SQL query cannot take the server's memory: values past the value limit are refused
//! before they are made, joins, sorts and groups draw on the query's memory pool, and
//! answers are cut at their row and byte limits; queries too large to plan in bounded
//! time are refused before planning.

mod common;

use causeway_store::sql::{self, SqlLimits};
use causeway_store::StoreError;

fn limited(e: Result<sql::SqlResult, StoreError>) -> String {
    match e {
        Err(StoreError::SqlLimit(m)) => m,
        Err(other) => panic!("expected a limit, got {other}"),
        Ok(r) => panic!("expected a limit, got {} rows", r.rows.len()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn functions_that_would_make_huge_values_are_refused_before_they_make_them() {
    let (store, dir) = common::store_of_spans("values", 2_000);
    let limits = SqlLimits::default();
    for (query, function) in [
        ("SELECT length(repeat('x', 1000000000))", "repeat"),
        ("SELECT length(repeat(operation, 100000000)) FROM spans", "repeat"),
        ("SELECT length(lpad('x', 2000000000))", "lpad"),
        ("SELECT length(rpad(operation, 2000000000, 'ab')) FROM spans", "rpad"),
        (
            "SELECT length(replace(repeat('a', 100000), 'a', repeat('b', 1000)))",
            "replace",
        ),
        (
            "SELECT length(regexp_replace(repeat('a', 100000), 'a', repeat('b', 1000), 'g'))",
            "regexp_replace",
        ),
        ("SELECT cardinality(range(0, 10000000000))", "range"),
        (
            "SELECT cardinality(generate_series(DATE '1970-01-01', DATE '2030-01-01', INTERVAL '1 second'))",
            "generate_series",
        ),
        ("SELECT cardinality(array_repeat('abc', 1000000000))", "array_repeat"),
        ("SELECT cardinality(array_resize([1], 1000000000, 7))", "array_resize"),
        (
            "SELECT length(concat(repeat('x', 10000000), repeat('y', 10000000)))",
            "concat",
        ),
    ] {
        let m = limited(sql::query(&store, query, limits).await);
        assert!(m.contains(&format!("{function}()")), "{query}: {m}");
        assert!(m.contains("one value may take"), "{query}: {m}");
    }
    // Within the limit they answer as ever.
    let r = sql::query(
        &store,
        "SELECT length(repeat('ab', 3)), length(lpad('x', 5)), cardinality(range(0, 10))",
        limits,
    )
    .await
    .unwrap();
    assert_eq!(
        r.rows,
        vec![vec![serde_json::json!(6), 5.into(), 10.into()]]
    );
    // Growth by concatenation is caught at the next batch.
    let doubling = "WITH a AS (SELECT repeat(operation, 1000) AS s FROM spans), \
        b AS (SELECT s || s AS s FROM a), c AS (SELECT s || s AS s FROM b), \
        d AS (SELECT s || s AS s FROM c), e AS (SELECT s || s AS s FROM d), \
        f AS (SELECT s || s AS s FROM e), g AS (SELECT s || s AS s FROM f) \
        SELECT sum(length(s)) FROM g";
    let m = limited(
        sql::query(
            &store,
            doubling,
            SqlLimits {
                max_memory: 64 << 20,
                ..limits
            },
        )
        .await,
    );
    assert!(m.contains("one batch may take"), "{m}");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregates_and_joins_draw_on_the_querys_memory() {
    let (store, dir) = common::store_of_spans("memory", 1_000);
    let limits = SqlLimits {
        max_memory: 16 << 20,
        ..SqlLimits::default()
    };
    // One value per group past the value limit (a 32nd of the memory).
    for (query, function) in [
        (
            "SELECT length(string_agg(a.operation || b.operation || repeat('x', 100), ',')) FROM spans a, spans b",
            "string_agg",
        ),
        (
            "SELECT cardinality(array_agg(a.operation || b.operation)) FROM spans a, spans b",
            "array_agg",
        ),
    ] {
        let m = limited(sql::query(&store, query, limits).await);
        assert!(m.contains(&format!("{function}()")), "{query}: {m}");
        assert!(m.contains("one value may take"), "{query}: {m}");
    }
    // Within it, as ever; grouped too.
    let r = sql::query(
        &store,
        "SELECT service, length(string_agg(operation, ',')) FROM spans GROUP BY service",
        limits,
    )
    .await
    .unwrap();
    assert_eq!(r.rows.len(), 1);
    for query in [
        "SELECT a.span_id, b.span_id, count(*) FROM spans a, spans b GROUP BY a.span_id, b.span_id",
        "SELECT a.span_id, b.span_id FROM spans a, spans b ORDER BY a.attributes['user'] || b.operation",
    ] {
        let m = limited(sql::query(&store, query, limits).await);
        assert!(
            m.contains("bytes of memory SQL may use"),
            "{query}: {m}"
        );
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_are_cut_at_their_byte_limit_and_huge_queries_refused_before_planning() {
    let (store, dir) = common::store_of_spans("result-bytes", 2_000);
    let r = sql::query(
        &store,
        "SELECT repeat(operation, 1000) FROM spans",
        SqlLimits {
            max_result_bytes: 100_000,
            ..SqlLimits::default()
        },
    )
    .await
    .unwrap();
    assert!(r.truncated);
    assert!(!r.rows.is_empty());
    let bytes = serde_json::to_vec(&r.rows).unwrap().len();
    assert!(bytes <= 100_000 + r.rows.len() + 2, "{bytes}");
    let joins: String = (1..=100).map(|i| format!(", spans t{i}")).collect();
    let m = limited(
        sql::query(
            &store,
            &format!("SELECT count(*) FROM spans t0{joins}"),
            SqlLimits::default(),
        )
        .await,
    );
    assert!(m.contains("relations"), "{m}");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
