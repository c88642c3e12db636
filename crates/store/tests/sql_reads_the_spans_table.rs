//! SQL over the spans table: head and blocks together, attributes queryable, read-only,
//! row-limited.

mod common;

use std::time::Duration;

use serde_json::json;

use causeway_model::{KeyValue, Span, SpanId, TraceId};
use causeway_store::sql::{self, SqlLimits};
use causeway_store::{StoreError, TraceStore};

fn span(trace: u128, id: u64, name: &str, service: &str, ms: u64, user: &str) -> Span {
    let mut s = Span::new(
        TraceId::new(trace).unwrap(),
        SpanId::new(id).unwrap(),
        None,
        name,
        service,
        1_700_000_000_000_000_000,
        1_700_000_000_000_000_000 + ms * 1_000_000,
    );
    s.attributes.push(KeyValue::new("user.id", user));
    s.attributes.push(KeyValue::new("http.status_code", 200i64));
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sql_sees_head_and_blocks_and_reads_attributes() {
    let (store, dir) = common::fresh_store("sql");
    store
        .append(vec![
            span(1, 1, "GET /a", "web", 5, "alice"),
            span(1, 2, "SELECT", "db", 2, "alice"),
        ])
        .unwrap();
    store.flush().unwrap();
    store
        .append(vec![span(0xfeed, 3, "GET /b", "web", 9, "bob")])
        .unwrap();

    let limits = SqlLimits::default();
    let r = sql::query(
        &store,
        "SELECT service, count(*) AS n, max(duration_ns) AS longest FROM spans GROUP BY service ORDER BY service",
        limits,
    )
    .await
    .unwrap();
    assert_eq!(
        r.columns
            .iter()
            .map(|c| c.name.as_str())
            .collect::<Vec<_>>(),
        ["service", "n", "longest"]
    );
    assert_eq!(
        r.rows,
        vec![
            vec![json!("db"), json!(1), json!(2_000_000)],
            vec![json!("web"), json!(2), json!(9_000_000)],
        ]
    );
    assert!(!r.truncated);

    let r = sql::query(
        &store,
        "SELECT trace_id, span_id FROM spans WHERE attributes['user.id'] = 'bob'",
        limits,
    )
    .await
    .unwrap();
    assert_eq!(
        r.rows,
        vec![vec![
            json!("0000000000000000000000000000feed"),
            json!("0000000000000003")
        ]]
    );

    let r = sql::query(
        &store,
        "SELECT * FROM spans",
        SqlLimits {
            max_rows: 2,
            ..limits
        },
    )
    .await
    .unwrap();
    assert_eq!(r.rows.len(), 2);
    assert!(r.truncated);

    for statement in [
        "DROP VIEW spans",
        "CREATE TABLE x AS SELECT 1",
        "INSERT INTO spans_raw SELECT * FROM spans_raw",
        "COPY (SELECT 1) TO '/tmp/causeway-sql-escape.csv'",
    ] {
        let e = sql::query(&store, statement, limits).await.unwrap_err();
        assert!(matches!(e, StoreError::Sql(_)), "{statement}: {e}");
    }
    let e = sql::query(&store, "SELECT nonsense FROM spans", limits)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("nonsense"), "{e}");

    // A sum, not count(*): DataFusion can answer a cross join's count from statistics
    // without running it.
    let e = sql::query(
        &store,
        "SELECT sum(a.duration_ns + v.duration_ns) FROM spans a, spans b, spans c, spans d, spans e, spans f, spans g, spans h, spans i, spans j, spans k, spans l, spans m, spans n, spans o, spans p, spans q, spans r, spans s, spans t, spans u, spans v",
        SqlLimits { timeout: Duration::from_millis(100), ..limits },
    )
    .await;
    assert!(
        matches!(e, Err(StoreError::SqlTimeout(_)) | Err(StoreError::Sql(_))),
        "a runaway query is stopped: {e:?}"
    );
    // It was stopped, not left running on the SQL threads: the next query is answered.
    let r = sql::query(&store, "SELECT count(*) AS n FROM spans", limits)
        .await
        .unwrap();
    assert_eq!(r.rows, vec![vec![json!(3)]]);
    // Every span in blocks, none in memory: the table is the same.
    store.flush().unwrap();
    let r = sql::query(
        &store,
        "SELECT count(*) AS n, count(DISTINCT concat(trace_id, span_id)) AS d FROM spans",
        limits,
    )
    .await
    .unwrap();
    assert_eq!(r.rows, vec![vec![json!(3), json!(3)]]);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
