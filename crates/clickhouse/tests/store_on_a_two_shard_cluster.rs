//! The ClickHouse store on a two-shard cluster answers as the embedded store does for the
//! same spans: trace by id, search, bulk scan, services and operations.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Mutex;
use std::time::Duration;

use causeway_clickhouse::http::Client;
use causeway_clickhouse::local_cluster::Cluster;
use causeway_clickhouse::{ClickHouseOptions, ClickHouseStore, Endpoint};
use causeway_model::{KeyValue, Span, Status, Trace, TraceId};
use causeway_store::sql::SqlLimits;
use causeway_store::{
    Fields, FsyncPolicy, SearchQuery, Store, StoreError, StoreOptions, TimeWindow, TraceStore,
};
use causeway_testkit::Generator;

const T0: u64 = 1_700_000_000_000_000_000;

fn embedded(name: &str) -> (Store, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("causeway-ch-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(
        &dir,
        StoreOptions {
            fsync: FsyncPolicy::Never,
            head_max_age: Duration::from_secs(3600),
            ..StoreOptions::default()
        },
    )
    .unwrap();
    (store, dir)
}

fn clickhouse(url: &str) -> ClickHouseStore {
    ClickHouseStore::open(Endpoint::parse(url).unwrap(), ClickHouseOptions::default()).unwrap()
}

/// Generated traces, with a few spans given awkward text and tags to search by.
fn spans() -> Vec<Span> {
    let mut g = Generator::new(7, T0, 1_000_000);
    let mut all: Vec<Span> = (0..300).flat_map(|_| g.trace()).collect();
    for (i, s) in all.iter_mut().enumerate().filter(|(i, _)| i % 37 == 0) {
        s.attributes.push(KeyValue::new(
            "quote's\\key",
            format!("line\nbreak {}", i % 3),
        ));
        if i % 74 == 0 {
            s.status = Status::Error("boom".into());
        }
        // Longer than the attribute index holds.
        if i % 111 == 0 {
            s.attributes.push(KeyValue::new(
                "long",
                format!("{}{}", "x".repeat(200), i % 2),
            ));
        }
    }
    all
}

fn by_id(traces: Vec<Trace>) -> BTreeMap<TraceId, Vec<Span>> {
    traces
        .into_iter()
        .map(|t| {
            let mut spans = t.spans;
            spans.sort_by_key(|s| (s.span_id.get(), s.start));
            (t.trace_id, spans)
        })
        .collect()
}

fn scan(
    store: &dyn TraceStore,
    window: TimeWindow,
    fields: &Fields,
) -> BTreeMap<TraceId, Vec<Span>> {
    let seen = Mutex::new(Vec::new());
    store
        .scan_fields(window, fields, &|t| {
            seen.lock().unwrap().push(t);
            ControlFlow::Continue(())
        })
        .unwrap();
    by_id(seen.into_inner().unwrap())
}

#[test]
fn answers_as_the_embedded_store_does() {
    let cluster = Cluster::start(2);
    let ch = clickhouse(&cluster.url("answers"));
    let (local, dir) = embedded("answers");
    let spans = spans();
    // In batches, one of them sent twice (as after a crash before the acknowledgement).
    for batch in spans.chunks(500) {
        ch.append(batch.to_vec()).unwrap();
        local.append(batch.to_vec()).unwrap();
    }
    ch.append(spans[..500].to_vec()).unwrap();
    // Both shards hold spans, and each trace lies on one of them.
    let mut shard_of: BTreeMap<[u8; 16], usize> = BTreeMap::new();
    for node in 0..2 {
        let client = Client::new(
            Endpoint::parse(&cluster.node_url(node, "answers")).unwrap(),
            Duration::from_secs(30),
        )
        .unwrap();
        let answer = client
            .run("SELECT DISTINCT trace_id FROM answers.span_rows_local FORMAT RowBinary")
            .unwrap();
        assert!(!answer.is_empty(), "shard {node} holds no span");
        for id in answer.chunks(16) {
            let id: [u8; 16] = id.try_into().unwrap();
            assert_eq!(
                *shard_of.entry(id).or_insert(node),
                node,
                "a trace on two shards"
            );
            // Where the client sends the trace's reads.
            let id = TraceId::new(u128::from_be_bytes(id)).unwrap();
            assert_eq!(ch.shards().unwrap().shard_of(id), node, "trace {id}");
        }
    }

    let ids: Vec<TraceId> = {
        let mut v: Vec<TraceId> = spans.iter().map(|s| s.trace_id).collect();
        v.sort();
        v.dedup();
        v
    };
    for &id in ids.iter().step_by(17) {
        let a = by_id(ch.trace(id).unwrap().into_iter().collect());
        let b = by_id(local.trace(id).unwrap().into_iter().collect());
        assert_eq!(a, b, "trace {id}");
    }
    assert!(ch.trace(TraceId::new(12345).unwrap()).unwrap().is_none());

    let service = spans[0].service.to_string();
    let operation = spans[0].name.clone();
    let queries = [
        SearchQuery {
            service: Some(service.clone()),
            limit: 15,
            ..Default::default()
        },
        SearchQuery {
            service: Some(service.clone()),
            operation: Some(operation.clone()),
            min_duration: Some(200_000),
            ..Default::default()
        },
        SearchQuery {
            error: true,
            limit: 1000,
            ..Default::default()
        },
        SearchQuery {
            tags: vec![("quote's\\key".into(), "line\nbreak 1".into())],
            limit: 1000,
            ..Default::default()
        },
        SearchQuery {
            tags: vec![("error".into(), "true".into())],
            limit: 1000,
            ..Default::default()
        },
        SearchQuery {
            tags: vec![
                ("error".into(), "true".into()),
                ("quote's\\key".into(), "line\nbreak 2".into()),
            ],
            limit: 1000,
            ..Default::default()
        },
        SearchQuery {
            service: Some(spans[37].service.to_string()),
            tags: vec![("quote's\\key".into(), "line\nbreak 1".into())],
            window: Some(TimeWindow {
                start: T0,
                end: T0 + 150_000_000,
            }),
            limit: 1000,
            ..Default::default()
        },
        SearchQuery {
            tags: vec![("long".into(), format!("{}1", "x".repeat(200)))],
            limit: 1000,
            ..Default::default()
        },
        SearchQuery {
            window: Some(TimeWindow {
                start: T0 + 50_000_000,
                end: T0 + 90_000_000,
            }),
            limit: 1000,
            ..Default::default()
        },
        SearchQuery {
            service: Some("no such service".into()),
            ..Default::default()
        },
    ];
    for q in &queries {
        let a = ch.search(q).unwrap();
        let b = local.search(q).unwrap();
        assert_eq!(a, b, "{q:?}");
    }
    for q in [3, 5, 6, 7] {
        assert!(
            !ch.search(&queries[q]).unwrap().is_empty(),
            "the tag search finds something: {:?}",
            queries[q]
        );
    }

    for window in [
        TimeWindow::ALL,
        TimeWindow {
            start: T0 + 50_000_000,
            end: T0 + 150_000_000,
        },
    ] {
        let a = scan(&ch, window, &Fields::All);
        assert_eq!(a, scan(&local, window, &Fields::All), "{window:?}");
        assert!(!a.is_empty());
    }
    assert_eq!(ch.services().unwrap(), local.services().unwrap());
    sql_reads_the_spans(&ch, &spans);
    assert_eq!(
        ch.operations(&service).unwrap(),
        local.operations(&service).unwrap()
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn migration_is_idempotent_and_needs_every_shard() {
    let cluster = Cluster::start(2);
    let endpoint = Endpoint::parse(&cluster.url("migrated")).unwrap();
    let client = Client::new(endpoint, Duration::from_secs(30)).unwrap();
    let first = causeway_clickhouse::schema::migrate(&client).unwrap();
    assert!(first
        .iter()
        .all(|n| n.from == 0 && n.to == causeway_clickhouse::schema::VERSION));
    let again = causeway_clickhouse::schema::migrate(&client).unwrap();
    assert!(again
        .iter()
        .all(|n| n.from == causeway_clickhouse::schema::VERSION));

    // A URL naming one node of the two-shard cluster leaves the other without tables.
    let one = format!(
        "{}?cluster={}",
        cluster.node_url(0, "half"),
        causeway_clickhouse::local_cluster::CLUSTER
    );
    let client = Client::new(Endpoint::parse(&one).unwrap(), Duration::from_secs(30)).unwrap();
    let e = causeway_clickhouse::schema::migrate(&client)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("1 of cluster") && e.contains("list every node"),
        "{e}"
    );
}

#[test]
fn a_down_node_is_an_error_naming_it() {
    let mut cluster = Cluster::start(1);
    let url = cluster.node_url(0, "down");
    let ch = clickhouse(&url);
    cluster.kill_node(0);
    let e = ch.services().unwrap_err().to_string();
    assert!(e.contains("unreachable"), "{e}");
}

/// HTTPS to every node: the cluster's own authority trusted through `ca=`; without it the
/// nodes' certificate is refused, and a `ca=` that is not a certificate is named.
#[test]
fn https_trusts_the_authority_the_url_names() {
    let cluster = Cluster::start_with_https(2);
    let url = cluster.https_url("tls");
    let ch = clickhouse(&url);
    let spans = spans();
    ch.append(spans.clone()).unwrap();
    let id = spans[0].trace_id;
    let want = spans.iter().filter(|s| s.trace_id == id).count();
    assert_eq!(ch.trace(id).unwrap().unwrap().spans.len(), want);
    assert_eq!(scan(&ch, TimeWindow::ALL, &Fields::All).len(), 300);

    let open = |url: &str| {
        ClickHouseStore::open(Endpoint::parse(url).unwrap(), ClickHouseOptions::default())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let public_roots = url.split("&ca=").next().unwrap();
    let e = open(public_roots);
    assert!(e.contains("unreachable") && e.contains("ertificate"), "{e}");
    let not_pem = std::env::temp_dir().join(format!("causeway-not-a-ca-{}", std::process::id()));
    std::fs::write(&not_pem, "hello").unwrap();
    let e = open(&format!("{public_roots}&ca={}", not_pem.display()));
    assert!(
        e.contains(&not_pem.display().to_string()) && e.contains("no certificate"),
        "{e}"
    );
    let _ = std::fs::remove_file(not_pem);
}

/// SQL over the `spans` view: each span once (one batch was stored twice), the embedded
/// store's column names and text forms, the row limit, and refusals of writes and of bad
/// SQL as the user's errors.
fn sql_reads_the_spans(ch: &ClickHouseStore, spans: &[Span]) {
    let limits = SqlLimits::default();
    let r = ch
        .sql(
            "SELECT count() AS n, count(DISTINCT concat(trace_id, span_id)) AS d FROM spans;",
            limits,
        )
        .unwrap();
    let names: Vec<&str> = r.columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["n", "d"]);
    assert_eq!(
        r.rows,
        vec![vec![
            serde_json::json!(spans.len()),
            serde_json::json!(spans.len())
        ]]
    );

    let child = spans
        .iter()
        .find(|s| s.parent_id.is_some() && s.is_error())
        .unwrap();
    let r = ch
        .sql(
            &format!(
                "SELECT trace_id, span_id, parent_id, operation, kind, status_code, status_message, \
                 duration_ns FROM spans WHERE span_id = '{}' AND trace_id = '{}'",
                child.span_id, child.trace_id
            ),
            limits,
        )
        .unwrap();
    let kind = child.kind.as_str();
    let status = match &child.status {
        Status::Error(m) => m.clone(),
        _ => unreachable!(),
    };
    assert_eq!(
        r.rows,
        vec![vec![
            serde_json::json!(child.trace_id.to_string()),
            serde_json::json!(child.span_id.to_string()),
            serde_json::json!(child.parent_id.unwrap().to_string()),
            serde_json::json!(child.name),
            serde_json::json!(kind),
            serde_json::json!("error"),
            serde_json::json!(status),
            serde_json::json!(child.duration()),
        ]]
    );
    let root = spans.iter().find(|s| s.parent_id.is_none()).unwrap();
    let r = ch
        .sql(
            &format!(
                "SELECT parent_id FROM spans WHERE span_id = '{}'",
                root.span_id
            ),
            limits,
        )
        .unwrap();
    assert_eq!(r.rows[0][0], serde_json::Value::Null);

    let few = SqlLimits {
        max_rows: 5,
        ..limits
    };
    let r = ch.sql("SELECT span_id FROM spans", few).unwrap();
    assert_eq!(r.rows.len(), 5);
    assert!(r.truncated);

    for refused in [
        "DROP TABLE span_rows",
        "INSERT INTO span_rows (service) VALUES ('x')",
        "SELEC 1",
    ] {
        match ch.sql(refused, limits) {
            Err(StoreError::Sql(m)) => assert!(m.contains("Code:"), "{refused}: {m}"),
            other => panic!("{refused}: {other:?}"),
        }
    }
}

#[test]
fn retention_drops_whole_days_on_every_shard() {
    let cluster = Cluster::start(2);
    let ch = clickhouse(&cluster.url("retained"));
    const DAY: u64 = 86_400_000_000_000;
    let mut old = Generator::new(5, T0, 1_000_000);
    let mut new = Generator::new(6, T0 + 3 * DAY, 1_000_000);
    let old: Vec<Span> = (0..40).flat_map(|_| old.trace()).collect();
    let new: Vec<Span> = (0..40).flat_map(|_| new.trace()).collect();
    ch.append(old.clone()).unwrap();
    ch.append(new.clone()).unwrap();
    // A cutoff a minute after the new spans (the same day) keeps that day whole.
    let cutoff = T0 + 3 * DAY + 60_000_000_000;
    let dropped = ch.drop_days_before(cutoff).unwrap();
    // Of the span table and the four tables derived from it on both shards, and of the
    // operations on at least one.
    assert!(
        dropped >= 11,
        "the old day's spans, indexes, starts, operation spans and operations: {dropped}"
    );
    assert!(ch.trace(old[0].trace_id).unwrap().is_none());
    let by_service = SearchQuery {
        service: Some(old[0].service.to_string()),
        limit: 1000,
        ..SearchQuery::default()
    };
    let found: std::collections::BTreeSet<TraceId> = ch
        .search(&by_service)
        .unwrap()
        .iter()
        .map(|s| s.trace_id)
        .collect();
    let want: std::collections::BTreeSet<TraceId> = new
        .iter()
        .filter(|s| by_service.matches(s))
        .map(|s| s.trace_id)
        .collect();
    assert_eq!(found, want, "a search finds only the kept day's traces");
    let kept = scan(&ch, TimeWindow::ALL, &Fields::All);
    let want: std::collections::BTreeSet<TraceId> = new.iter().map(|s| s.trace_id).collect();
    assert_eq!(
        kept.keys()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        want
    );
    assert_eq!(ch.drop_days_before(cutoff).unwrap(), 0);
}

/// A search by service ranks traces by their start even where the matching spans come
/// long after it, in another order than the traces': the newest matching spans do not
/// name the newest traces, and the store has to read further back.
#[test]
fn a_search_by_service_ranks_traces_by_their_start_not_the_spans() {
    let cluster = Cluster::start(2);
    let ch = clickhouse(&cluster.url("late"));
    let (local, dir) = embedded("late");
    let mut g = Generator::new(11, T0, 1_000_000);
    let mut spans = Vec::new();
    for i in 0..300u64 {
        let mut trace = g.trace();
        // One span of each trace, not its root, moves to a service of its own and starts
        // up to 300 ms late: traces start 1 ms apart.
        let late = &mut trace[1];
        late.service = "late".into();
        let shift = (i * 7919 % 300) * 1_000_000;
        late.start += shift;
        late.end += shift;
        spans.extend(trace);
    }
    for batch in spans.chunks(1000) {
        ch.append(batch.to_vec()).unwrap();
        local.append(batch.to_vec()).unwrap();
    }
    for limit in [1, 5, 20, 299, 400] {
        let q = SearchQuery {
            service: Some("late".into()),
            limit,
            ..SearchQuery::default()
        };
        let found = ch.search(&q).unwrap();
        assert_eq!(found.len(), limit.min(300), "{q:?}");
        assert_eq!(found, local.search(&q).unwrap(), "{q:?}");
    }
    let windowed = SearchQuery {
        service: Some("late".into()),
        window: Some(TimeWindow {
            start: T0 + 100_000_000,
            end: T0 + 200_000_000,
        }),
        limit: 10,
        ..SearchQuery::default()
    };
    assert_eq!(
        ch.search(&windowed).unwrap(),
        local.search(&windowed).unwrap()
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A search by service reads the span index back from the newest spans over a range
/// sized from the operation's spans per unit of time; where the spans are uneven in time
/// or a condition thins them out, it reads further back and still finds what the
/// embedded store finds.
#[test]
fn a_search_by_service_reads_back_as_far_as_its_matches_need() {
    let cluster = Cluster::start(2);
    let ch = clickhouse(&cluster.url("uneven"));
    let (local, dir) = embedded("uneven");
    let mut g = Generator::new(13, T0, 1_000_000);
    let mut spans = Vec::new();
    for i in 0..400u64 {
        let mut trace = g.trace();
        // The first half spread thinly over the hour before; the rest 1 ms apart.
        let back = 3_600_000_000_000u64.saturating_sub(i * 18_000_000_000);
        for s in &mut trace {
            s.start -= back.min(s.start);
            s.end -= back.min(s.end);
        }
        spans.extend(trace);
    }
    for batch in spans.chunks(2000) {
        ch.append(batch.to_vec()).unwrap();
        local.append(batch.to_vec()).unwrap();
    }
    let last = spans.iter().map(|s| s.start).max().unwrap();
    let mut queries = Vec::new();
    for service in local.services().unwrap() {
        let host = spans
            .iter()
            .find(|s| *s.service == *service)
            .unwrap()
            .host
            .clone();
        let operation = local.operations(&service).unwrap().swap_remove(0);
        for limit in [1, 7, 20, 250] {
            let q = SearchQuery {
                service: Some(service.clone()),
                limit,
                ..SearchQuery::default()
            };
            queries.push(SearchQuery {
                operation: Some(operation.clone()),
                ..q.clone()
            });
            queries.push(SearchQuery {
                host: Some(host.to_string()),
                ..q.clone()
            });
            queries.push(SearchQuery {
                error: true,
                ..q.clone()
            });
            queries.push(SearchQuery {
                min_duration: Some(5_000_000),
                ..q.clone()
            });
            queries.push(SearchQuery {
                window: Some(TimeWindow {
                    start: last - 3_000_000_000_000,
                    end: last - 100_000_000,
                }),
                ..q.clone()
            });
            queries.push(q);
        }
    }
    let mut found_some = 0;
    for q in &queries {
        let found = ch.search(q).unwrap();
        assert_eq!(found, local.search(q).unwrap(), "{q:?}");
        found_some += usize::from(!found.is_empty());
    }
    assert!(
        found_some > queries.len() / 2,
        "{found_some} of {}",
        queries.len()
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// A scan whose grouping outgrows the memory a node may give it spills to the node's
/// disk and still sees every trace whole.
#[test]
fn a_scan_that_spills_to_disk_sees_every_trace_whole() {
    let cluster = Cluster::start(2);
    let url = cluster.url("spilled");
    let ch = clickhouse(&url);
    let spans = spans();
    for batch in spans.chunks(500) {
        ch.append(batch.to_vec()).unwrap();
    }
    let spilling = ClickHouseStore::open(
        Endpoint::parse(&url).unwrap(),
        ClickHouseOptions {
            scan_spill_bytes: 1 << 16,
            ..ClickHouseOptions::default()
        },
    )
    .unwrap();
    let all = scan(&ch, TimeWindow::ALL, &Fields::All);
    assert_eq!(all.len(), 300);
    assert_eq!(all.values().map(Vec::len).sum::<usize>(), spans.len());
    assert_eq!(scan(&spilling, TimeWindow::ALL, &Fields::All), all);
}

/// A search of thousands of traces names more ids than one query's text may hold.
#[test]
fn a_search_of_thousands_of_traces_finds_them_all() {
    let cluster = Cluster::start(2);
    let ch = clickhouse(&cluster.url("thousands"));
    let (local, dir) = embedded("thousands");
    // Each trace its root span alone.
    let mut g = Generator::new(13, T0, 1_000_000);
    let roots: Vec<Span> = (0..5000).map(|_| g.trace().swap_remove(0)).collect();
    ch.append(roots.clone()).unwrap();
    local.append(roots.clone()).unwrap();
    let service = roots[0].service.to_string();
    let q = SearchQuery {
        service: Some(service.clone()),
        limit: 10_000,
        ..SearchQuery::default()
    };
    let found = ch.search(&q).unwrap();
    assert_eq!(
        found.len(),
        roots.iter().filter(|s| *s.service == *service).count()
    );
    assert!(found.len() > 4000, "{} traces", found.len());
    assert_eq!(found, local.search(&q).unwrap());
    let _ = std::fs::remove_dir_all(dir);
}

/// A streamed answer that takes longer than the client's timeout is cut off unless the
/// stream is a scan's, which waits for as long as it takes.
#[test]
fn only_a_scan_waits_past_the_timeout() {
    use causeway_clickhouse::http::Patience;
    use std::io::Read;

    let cluster = Cluster::start(1);
    let client = Client::new(
        Endpoint::parse(&cluster.url("patience")).unwrap(),
        Duration::from_millis(700),
    )
    .unwrap();
    let slow = "SELECT sleep(1.5) FORMAT RowBinary";
    let read = |patience| -> Result<Vec<u8>, String> {
        let mut answer = client.stream(slow, patience).map_err(|e| e.to_string())?;
        let mut bytes = Vec::new();
        answer.read_to_end(&mut bytes).map_err(|e| e.to_string())?;
        Ok(bytes)
    };
    assert!(read(Patience::Timeout).is_err());
    assert_eq!(read(Patience::AsLongAsItTakes).unwrap(), [0]);
}

/// A cluster started with zstd keeps the same spans in fewer bytes than one with
/// ClickHouse's default LZ4.
#[test]
fn a_zstd_cluster_stores_the_spans_in_fewer_bytes() {
    use causeway_clickhouse::local_cluster::ClusterOptions;
    let spans = spans();
    let mut bytes = Vec::new();
    for zstd in [false, true] {
        let cluster = Cluster::start_with(
            1,
            ClusterOptions {
                zstd,
                ..ClusterOptions::default()
            },
        );
        let ch = clickhouse(&cluster.url("compressed"));
        ch.append(spans.clone()).unwrap();
        let usage = ch.disk_usage().unwrap();
        assert_eq!(usage.spans, spans.len() as u64);
        bytes.push(usage.bytes);
    }
    assert!(
        bytes[1] < bytes[0],
        "zstd {} against lz4 {}",
        bytes[1],
        bytes[0]
    );
}

/// The attribute index takes one row per distinct key, value and trace of a batch, not
/// one per attribute of each span, before ClickHouse merges anything.
#[test]
fn the_attribute_index_takes_a_row_per_distinct_attribute_of_a_trace() {
    let cluster = Cluster::start(2);
    let url = cluster.url("per_trace");
    let ch = clickhouse(&url);
    ch.append(spans()).unwrap();
    let client = Client::new(Endpoint::parse(&url).unwrap(), Duration::from_secs(30)).unwrap();
    let count = |sql: &str| {
        let answer = client.run(&format!("{sql} FORMAT TSV")).unwrap();
        String::from_utf8(answer)
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let attributes = count(
        "SELECT count() FROM per_trace.span_rows \
         ARRAY JOIN attr_keys AS key, attr_values AS value WHERE length(value) <= 128",
    );
    let distinct = count(
        "SELECT count() FROM (SELECT DISTINCT key, value, trace_id FROM per_trace.span_rows \
         ARRAY JOIN attr_keys AS key, attr_values AS value WHERE length(value) <= 128)",
    );
    assert!(distinct < attributes / 2, "{distinct} of {attributes}");
    assert_eq!(count("SELECT count() FROM per_trace.attr_index"), distinct);
}
