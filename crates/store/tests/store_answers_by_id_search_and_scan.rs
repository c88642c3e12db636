//! The store's three ways in, before and after spans move from the head into blocks, and
//! across reopenings.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use causeway_model::{KeyValue, Span, SpanId, Status, TraceId};
use causeway_store::generate::Generator;
use causeway_store::{FsyncPolicy, SearchQuery, Store, StoreOptions, TimeWindow, TraceStore};

const T0: u64 = 1_700_000_000_000_000_000;

fn options() -> StoreOptions {
    StoreOptions {
        fsync: FsyncPolicy::Never,
        head_max_age: Duration::from_secs(3600),
        compact_min_blocks: usize::MAX,
        ..StoreOptions::default()
    }
}

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("causeway-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn traces(n: usize, seed: u64) -> Vec<Vec<Span>> {
    let mut g = Generator::new(seed, T0, 1_000_000);
    (0..n).map(|_| g.trace()).collect()
}

fn span(
    trace: u128,
    id: u64,
    parent: Option<u64>,
    name: &str,
    service: &str,
    start: u64,
    end: u64,
) -> Span {
    Span::new(
        TraceId::new(trace).unwrap(),
        SpanId::new(id).unwrap(),
        parent.and_then(SpanId::new),
        name,
        service,
        start,
        end,
    )
}

fn sorted_ids(spans: &[Span]) -> Vec<u64> {
    let mut v: Vec<u64> = spans.iter().map(|s| s.span_id.get()).collect();
    v.sort();
    v
}

#[test]
fn a_trace_comes_back_whole_from_the_head_and_from_blocks() {
    let dir = tmp("byid");
    let store = Store::open(&dir, options()).unwrap();
    let all = traces(50, 1);
    for t in &all {
        store.append(t.clone()).unwrap();
    }
    let probe = &all[17];
    let got = store
        .trace(probe[0].trace_id)
        .unwrap()
        .expect("trace in head");
    assert_eq!(sorted_ids(&got.spans), sorted_ids(probe));

    store.flush().unwrap();
    assert_eq!(store.stats().head_spans, 0);
    assert_eq!(store.stats().blocks, 1);
    let got = store
        .trace(probe[0].trace_id)
        .unwrap()
        .expect("trace in block");
    // Every field survives the block: the detail column is the full native record.
    let mut want = probe.clone();
    want.sort_by_key(|s| s.span_id);
    let mut have = got.spans.clone();
    have.sort_by_key(|s| s.span_id);
    assert_eq!(have, want);
    assert!(store.trace(TraceId::new(42).unwrap()).unwrap().is_none());
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn spans_of_one_trace_arriving_in_many_batches_come_back_as_one_trace() {
    let dir = tmp("batches");
    let store = Store::open(&dir, options()).unwrap();
    let t = 0xabcdef;
    store
        .append(vec![span(t, 1, None, "root", "frontend", T0, T0 + 100)])
        .unwrap();
    store.flush().unwrap();
    store
        .append(vec![span(
            t,
            2,
            Some(1),
            "child",
            "backend",
            T0 + 10,
            T0 + 50,
        )])
        .unwrap();
    store.flush().unwrap();
    // Minutes later, from a third process, and still in the head.
    store
        .append(vec![span(
            t,
            3,
            Some(2),
            "db",
            "postgres",
            T0 + 20,
            T0 + 40,
        )])
        .unwrap();
    let trace = store.trace(TraceId::new(t).unwrap()).unwrap().unwrap();
    assert_eq!(trace.spans.len(), 3);
    assert_eq!(trace.roots.len(), 1);
    assert!(trace.orphans.is_empty());
    // A resent batch is not a second copy.
    store
        .append(vec![span(
            t,
            2,
            Some(1),
            "child",
            "backend",
            T0 + 10,
            T0 + 50,
        )])
        .unwrap();
    assert_eq!(
        store
            .trace(TraceId::new(t).unwrap())
            .unwrap()
            .unwrap()
            .spans
            .len(),
        3
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn search_finds_by_service_operation_tags_duration_host_and_window() {
    let dir = tmp("search");
    let store = Store::open(&dir, options()).unwrap();
    let mut a = span(1, 1, None, "GET /cart", "frontend", T0, T0 + 5_000_000);
    a.attributes.push(KeyValue::new("user.id", "alice"));
    a.host = "web-1".into();
    let mut b = span(
        2,
        1,
        None,
        "GET /cart",
        "frontend",
        T0 + 1_000,
        T0 + 50_000_000,
    );
    b.attributes.push(KeyValue::new("user.id", "bob"));
    b.attributes.push(KeyValue::new("http.status_code", 500i64));
    b.status = Status::Error("boom".into());
    b.host = "web-2".into();
    let c = span(
        3,
        1,
        None,
        "POST /pay",
        "payments",
        T0 + 2_000,
        T0 + 7_000_000,
    );
    store.append(vec![a]).unwrap();
    store.flush().unwrap();
    store.append(vec![b, c]).unwrap();

    let ids = |q: &SearchQuery| -> Vec<u128> {
        store
            .search(q)
            .unwrap()
            .iter()
            .map(|s| s.trace_id.get())
            .collect()
    };
    let q = SearchQuery::default;
    let service = |name: &str| Some(name.to_string());
    let tag = |k: &str, v: &str| vec![(k.to_string(), v.to_string())];
    let cases: Vec<(&str, SearchQuery, Vec<u128>)> = vec![
        (
            "most recent first, across block and head",
            SearchQuery {
                service: service("frontend"),
                ..q()
            },
            vec![2, 1],
        ),
        (
            "operation",
            SearchQuery {
                service: service("frontend"),
                operation: Some("GET /cart".into()),
                ..q()
            },
            vec![2, 1],
        ),
        (
            "string tag",
            SearchQuery {
                tags: tag("user.id", "alice"),
                ..q()
            },
            vec![1],
        ),
        (
            "typed values match on their text",
            SearchQuery {
                tags: tag("http.status_code", "500"),
                ..q()
            },
            vec![2],
        ),
        ("error status", SearchQuery { error: true, ..q() }, vec![2]),
        (
            "error=true matches error status",
            SearchQuery {
                tags: tag("error", "true"),
                ..q()
            },
            vec![2],
        ),
        (
            "min duration",
            SearchQuery {
                service: service("frontend"),
                min_duration: Some(10_000_000),
                ..q()
            },
            vec![2],
        ),
        (
            "max duration",
            SearchQuery {
                service: service("frontend"),
                max_duration: Some(10_000_000),
                ..q()
            },
            vec![1],
        ),
        (
            "host",
            SearchQuery {
                host: Some("web-1".into()),
                ..q()
            },
            vec![1],
        ),
        (
            "window",
            SearchQuery {
                window: Some(TimeWindow {
                    start: T0 + 1_500,
                    end: T0 + 3_000,
                }),
                ..q()
            },
            vec![3],
        ),
        (
            "unknown service",
            SearchQuery {
                service: service("nope"),
                ..q()
            },
            vec![],
        ),
        ("limit", SearchQuery { limit: 1, ..q() }, vec![3]),
    ];
    for (what, query, want) in &cases {
        assert_eq!(&ids(query), want, "{what}");
    }

    let summary = &store
        .search(&SearchQuery {
            error: true,
            ..Default::default()
        })
        .unwrap()[0];
    assert_eq!(summary.root_service, "frontend");
    assert_eq!(summary.root_operation, "GET /cart");
    assert_eq!(summary.duration, 50_000_000 - 1_000);
    assert_eq!(summary.error_count, 1);
    assert_eq!(store.services().unwrap(), vec!["frontend", "payments"]);
    assert_eq!(store.operations("frontend").unwrap(), vec!["GET /cart"]);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_tag_matches_in_a_span_its_events_or_its_links_and_conditions_may_meet_apart() {
    let dir = tmp("search-nested");
    let store = Store::open(&dir, options()).unwrap();
    // Trace 1: the resource attribute on the span (OTLP puts it there), the error code on an
    // event, the tenant on a link. Trace 2: the same values, but on two different spans.
    let mut a = span(1, 1, None, "GET /cart", "frontend", T0, T0 + 5_000_000);
    a.attributes.push(KeyValue::new("k8s.pod.name", "web-7"));
    a.events.push(causeway_model::Event {
        time: T0 + 1_000,
        name: "exception".into(),
        attributes: vec![
            KeyValue::new("exception.type", "Timeout"),
            KeyValue::new("retry", 3i64),
            KeyValue::new("backoff.ratio", 0.5),
        ],
    });
    a.links.push(causeway_model::Link {
        trace_id: TraceId::new(9).unwrap(),
        span_id: SpanId::new(9).unwrap(),
        attributes: vec![KeyValue::new("tenant", "acme")],
    });
    let mut b1 = span(2, 1, None, "GET /cart", "frontend", T0, T0 + 5_000_000);
    b1.attributes.push(KeyValue::new("k8s.pod.name", "web-7"));
    let mut b2 = span(2, 2, Some(1), "query", "frontend", T0 + 10, T0 + 1_000);
    b2.events.push(causeway_model::Event {
        time: T0 + 500,
        name: "exception".into(),
        attributes: vec![KeyValue::new("exception.type", "Timeout")],
    });
    let tags = |pairs: &[(&str, &str)]| SearchQuery {
        tags: pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        ..SearchQuery::default()
    };
    let ids = |store: &Store, q: &SearchQuery| -> Vec<u128> {
        let mut ids: Vec<u128> = store
            .search(q)
            .unwrap()
            .iter()
            .map(|s| s.trace_id.get())
            .collect();
        ids.sort_unstable();
        ids
    };
    let check = |store: &Store, stage: &str| {
        for (q, want) in [
            (tags(&[("exception.type", "Timeout")]), vec![1, 2]),
            (tags(&[("tenant", "acme")]), vec![1]),
            (tags(&[("k8s.pod.name", "web-7")]), vec![1, 2]),
            // Met in three places of one span: trace 1 only.
            (
                tags(&[
                    ("k8s.pod.name", "web-7"),
                    ("exception.type", "Timeout"),
                    ("tenant", "acme"),
                ]),
                vec![1],
            ),
            // Met only on different spans: not a match.
            (
                tags(&[("k8s.pod.name", "web-7"), ("exception.type", "Timeout")]),
                vec![1],
            ),
            (tags(&[("exception.type", "Crash")]), vec![]),
            // Typed values match by their text.
            (tags(&[("retry", "3"), ("backoff.ratio", "0.5")]), vec![1]),
            (tags(&[("retry", "03")]), vec![]),
        ] {
            assert_eq!(ids(store, &q), want, "{stage}: {:?}", q.tags);
        }
    };
    store.append(vec![a, b1, b2]).unwrap();
    check(&store, "head");
    store.flush().unwrap();
    check(&store, "block");
    drop(store);
    let store = Store::open(&dir, options()).unwrap();
    check(&store, "reopened");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_trace_whose_root_has_not_arrived_is_marked_in_search() {
    let dir = tmp("root-missing");
    let store = Store::open(&dir, options()).unwrap();
    // The server's span came first; the root that called it is still on its way.
    store
        .append(vec![span(
            5,
            2,
            Some(1),
            "GET /items",
            "api",
            T0 + 10,
            T0 + 90,
        )])
        .unwrap();
    let find = |store: &Store| {
        store
            .search(&SearchQuery::default())
            .unwrap()
            .into_iter()
            .find(|t| t.trace_id.get() == 5)
            .unwrap()
    };
    let arriving = find(&store);
    assert!(arriving.root_missing);
    assert_eq!(arriving.root_operation, "GET /items");
    store
        .append(vec![span(5, 1, None, "GET /home", "web", T0, T0 + 100)])
        .unwrap();
    let whole = find(&store);
    assert!(!whole.root_missing);
    assert_eq!(
        (whole.root_service.as_str(), whole.root_operation.as_str()),
        ("web", "GET /home")
    );
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bulk_scan_visits_every_trace_in_the_window_once_and_whole() {
    let dir = tmp("scan");
    let store = Store::open(&dir, options()).unwrap();
    let all = traces(3000, 2);
    // Each trace in two parts: the first halves in three blocks; the second halves of
    // the first 2000 traces in a fourth block, of the rest in the head.
    for chunk in all.chunks(1000) {
        for t in chunk {
            store.append(t[..t.len() / 2].to_vec()).unwrap();
        }
        store.flush().unwrap();
    }
    for (i, t) in all.iter().enumerate() {
        store.append(t[t.len() / 2..].to_vec()).unwrap();
        if i == 1999 {
            store.flush().unwrap();
        }
    }
    assert_eq!(store.stats().blocks, 4);
    let seen = Mutex::new(Vec::new());
    let stats = store
        .scan(TimeWindow::ALL, &|t| {
            seen.lock()
                .unwrap()
                .push((t.trace_id, sorted_ids(&t.spans)))
        })
        .unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(stats.traces, 3000);
    assert_eq!(seen.len(), 3000);
    let distinct: HashSet<_> = seen.iter().map(|(id, _)| *id).collect();
    assert_eq!(distinct.len(), 3000);
    let total: usize = all.iter().map(Vec::len).sum();
    assert_eq!(stats.spans as usize, total);
    let spans: std::collections::HashMap<_, _> = seen.into_iter().collect();
    for t in &all {
        assert_eq!(
            spans[&t[0].trace_id],
            sorted_ids(t),
            "trace {} whole",
            t[0].trace_id
        );
    }

    // A window of the first 100 traces (they start 1 ms apart).
    let window = TimeWindow {
        start: T0,
        end: T0 + 100 * 1_000_000,
    };
    let count = Mutex::new(0);
    store
        .scan(window, &|_| *count.lock().unwrap() += 1)
        .unwrap();
    assert_eq!(*count.lock().unwrap(), 100);

    // A visit that answers Break (a deadline passed) stops every scan thread soon after.
    let visited = std::sync::atomic::AtomicUsize::new(0);
    let stats = store
        .scan_fields(TimeWindow::ALL, &causeway_store::Fields::All, &|_| {
            if visited.fetch_add(1, std::sync::atomic::Ordering::Relaxed) >= 9 {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        })
        .unwrap();
    let visited = visited.into_inner();
    assert!(visited >= 10, "{visited}");
    // Each scan thread may finish the trace it holds; none reads on.
    assert!(
        visited <= 10 + 8,
        "a stopped scan visited {visited} of 3000 traces"
    );
    assert_eq!(stats.traces as usize, visited);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reopening_replays_the_wal_and_keeps_blocks_without_duplicates() {
    let dir = tmp("reopen");
    let all = traces(200, 3);
    {
        let store = Store::open(
            &dir,
            StoreOptions {
                fsync: FsyncPolicy::Always,
                ..options()
            },
        )
        .unwrap();
        for t in &all[..100] {
            store.append(t.clone()).unwrap();
        }
        store.flush().unwrap();
        for t in &all[100..] {
            store.append(t.clone()).unwrap();
        }
        // A second store on the same directory is refused while the first is open.
        assert!(matches!(
            Store::open(&dir, options()),
            Err(causeway_store::StoreError::Locked(_))
        ));
    }
    let store = Store::open(&dir, options()).unwrap();
    let total: usize = all.iter().map(Vec::len).sum();
    let stats = store.stats();
    assert_eq!(stats.block_spans + stats.head_spans, total as u64);
    for t in [&all[5], &all[150]] {
        let got = store.trace(t[0].trace_id).unwrap().unwrap();
        assert_eq!(sorted_ids(&got.spans), sorted_ids(t));
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn compaction_merges_blocks_and_keeps_every_span_once() {
    let dir = tmp("compact");
    let store = Store::open(&dir, options()).unwrap();
    let all = traces(400, 4);
    // Each trace split over two blocks.
    for chunk in all.chunks(100) {
        for t in chunk {
            store.append(t[..t.len() / 2].to_vec()).unwrap();
        }
        store.flush().unwrap();
        for t in chunk {
            store.append(t[t.len() / 2..].to_vec()).unwrap();
        }
        store.flush().unwrap();
    }
    // A client's retry: spans already in a block arrive again, into a ninth block.
    store.append(all[0][..2].to_vec()).unwrap();
    store.flush().unwrap();
    assert_eq!(store.stats().blocks, 9);
    assert!(store.compact().unwrap());
    let stats = store.stats();
    assert_eq!(stats.blocks, 1);
    let total: usize = all.iter().map(Vec::len).sum();
    assert_eq!(stats.block_spans, total as u64);
    for t in all.iter().step_by(37) {
        let got = store.trace(t[0].trace_id).unwrap().unwrap();
        assert_eq!(sorted_ids(&got.spans), sorted_ids(t));
    }
    drop(store);
    // The merged block survives a reopen; the inputs are gone.
    let store = Store::open(&dir, options()).unwrap();
    assert_eq!(store.stats().blocks, 1);
    assert_eq!(store.stats().block_spans, total as u64);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn retention_drops_old_blocks_by_age_and_by_size() {
    let dir = tmp("retain");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    {
        let store = Store::open(&dir, options()).unwrap();
        store
            .append(vec![span(1, 1, None, "old", "a", T0, T0 + 1)])
            .unwrap();
        store.flush().unwrap();
        store
            .append(vec![span(2, 1, None, "new", "a", now, now + 1)])
            .unwrap();
        store.flush().unwrap();
    }
    let store = Store::open(
        &dir,
        StoreOptions {
            retention_age: Some(Duration::from_secs(86_400)),
            ..options()
        },
    )
    .unwrap();
    assert_eq!(store.apply_retention().unwrap(), 1);
    assert!(store.trace(TraceId::new(1).unwrap()).unwrap().is_none());
    assert!(store.trace(TraceId::new(2).unwrap()).unwrap().is_some());
    drop(store);
    let store = Store::open(
        &dir,
        StoreOptions {
            retention_bytes: Some(1),
            ..options()
        },
    )
    .unwrap();
    assert_eq!(store.apply_retention().unwrap(), 1);
    assert_eq!(store.stats().blocks, 0);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Regression: readers once shared one seek offset through `File::try_clone`, so
/// parallel scans of one block read at each other's positions ("Unexpected struct field
/// type" from the Parquet decoder).
#[test]
fn concurrent_reads_of_one_block_do_not_share_a_seek_offset() {
    let dir = tmp("concurrent");
    let store = Store::open(
        &dir,
        StoreOptions {
            scan_threads: 8,
            ..options()
        },
    )
    .unwrap();
    let all = traces(3000, 9);
    let total: usize = all.iter().map(Vec::len).sum();
    for t in &all {
        store.append(t.clone()).unwrap();
    }
    store.flush().unwrap();
    for _ in 0..3 {
        let stats = store.scan(TimeWindow::ALL, &|_| {}).unwrap();
        assert_eq!(stats.spans as usize, total);
    }
    std::thread::scope(|s| {
        for chunk in all.chunks(500) {
            let store = &store;
            s.spawn(move || {
                for t in chunk {
                    assert_eq!(
                        store.trace(t[0].trace_id).unwrap().unwrap().spans.len(),
                        t.len()
                    );
                }
            });
        }
    });
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_structure_scan_reads_the_structure_and_only_the_attributes_asked_for() {
    let dir = tmp("structure");
    let store = Store::open(&dir, options()).unwrap();
    let mut all = traces(200, 9);
    // Statuses of every kind, and a peer attribute to keep.
    all[0][1].status = Status::Error("boom".into());
    all[0][2].status = Status::Ok;
    all[0][3]
        .attributes
        .push(KeyValue::new("peer.service", "mysql"));
    for t in &all[..150] {
        store.append(t.clone()).unwrap();
    }
    store.flush().unwrap();
    // The rest stay in the head, where spans are given whole.
    for t in &all[150..] {
        store.append(t.clone()).unwrap();
    }
    let fields = causeway_store::Fields::Structure {
        attributes: vec!["peer.service".into(), "region".into()],
    };
    let seen = Mutex::new(std::collections::HashMap::new());
    let stats = store
        .scan_fields(TimeWindow::ALL, &fields, &|t| {
            seen.lock().unwrap().insert(t.trace_id, t.spans);
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(stats.traces, 200);
    let seen = seen.into_inner().unwrap();
    for (n, t) in all.iter().enumerate() {
        let got = &seen[&t[0].trace_id];
        assert_eq!(got.len(), t.len());
        for want in t {
            let s = got.iter().find(|s| s.span_id == want.span_id).unwrap();
            assert_eq!(
                (s.parent_id, &s.name, s.kind, &s.service, &s.host, s.pid),
                (
                    want.parent_id,
                    &want.name,
                    want.kind,
                    &want.service,
                    &want.host,
                    want.pid
                )
            );
            assert_eq!(
                (s.start, s.end, &s.status),
                (want.start, want.end, &want.status)
            );
            if n < 150 {
                let kept: Vec<&KeyValue> = want
                    .attributes
                    .iter()
                    .filter(|kv| kv.key == "peer.service" || kv.key == "region")
                    .collect();
                assert_eq!(s.attributes.iter().collect::<Vec<_>>(), kept);
                assert!(s.events.is_empty());
            } else {
                assert_eq!(s, want, "head spans are whole");
            }
        }
    }
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_paths_scan_gives_whole_spans_but_their_attributes() {
    use causeway_model::{Direction, Link, Message, Value};
    let dir = tmp("paths");
    let store = Store::open(&dir, options()).unwrap();
    let mut all = traces(120, 11);
    // Typed attributes, messages, links and CPU time, which the generator does not make.
    let s = &mut all[0][1];
    s.attributes.push(KeyValue::new("retries", Value::I64(3)));
    s.attributes.push(KeyValue {
        key: "shards".into(),
        value: Value::Array(vec![Value::F64(0.5), Value::Bool(true)]),
    });
    s.messages.push(Message {
        direction: Direction::Send,
        id: 42,
        time: s.start + 5,
        peer: Some("db".into()),
        size: Some(512),
    });
    s.links.push(Link {
        trace_id: TraceId::new(9).unwrap(),
        span_id: SpanId::new(8).unwrap(),
        attributes: vec![KeyValue::new("link.kind", "follows")],
    });
    s.cpu_time = Some(1234);
    for t in &all[..100] {
        store.append(t.clone()).unwrap();
    }
    store.flush().unwrap();
    for t in &all[100..] {
        store.append(t.clone()).unwrap();
    }
    let seen = Mutex::new(std::collections::HashMap::new());
    let stats = store
        .scan_fields(TimeWindow::ALL, &causeway_store::Fields::Paths, &|t| {
            seen.lock().unwrap().insert(t.trace_id, t.spans);
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(stats.traces, 120);
    let seen = seen.into_inner().unwrap();
    let mut events = 0;
    for (n, t) in all.iter().enumerate() {
        let got = &seen[&t[0].trace_id];
        assert_eq!(got.len(), t.len());
        for want in t {
            let s = got.iter().find(|s| s.span_id == want.span_id).unwrap();
            if n < 100 {
                let mut stripped = want.clone();
                stripped.attributes.clear();
                stripped
                    .events
                    .iter_mut()
                    .for_each(|e| e.attributes.clear());
                stripped.links.iter_mut().for_each(|l| l.attributes.clear());
                assert_eq!(s, &stripped);
                events += s.events.len();
            } else {
                assert_eq!(s, want, "head spans are whole");
            }
        }
    }
    assert!(events > 0, "the generated traces have events to keep");
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn appends_faster_than_blocks_are_written_are_refused_rather_than_held() {
    let dir = tmp("backpressure");
    let store = Store::open(
        &dir,
        StoreOptions {
            head_max_spans: 2_000,
            max_pending_heads: 2,
            ..options()
        },
    )
    .unwrap();
    let batch = 500;
    // The head is frozen once full, and at most two frozen heads wait for the writer.
    let bound = (2 + 1) * (2_000 + batch) as u64;
    let mut g = causeway_store::generate::Generator::new(9, T0, 1_000);
    let mut busy = 0;
    let mut appended = 0;
    while appended < 200_000 {
        let mut spans = Vec::new();
        while spans.len() < batch {
            spans.extend(g.trace());
        }
        spans.truncate(batch);
        let n = spans.len();
        match store.append(spans) {
            Ok(()) => appended += n,
            Err(causeway_store::StoreError::Busy) => busy += 1,
            Err(e) => panic!("append failed: {e}"),
        }
        let held = store.stats().head_spans;
        assert!(held <= bound, "{held} spans held in memory (bound {bound})");
    }
    assert_eq!(store.stats().busy_rejections, busy);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The Traces tab's sort: every trace of the window is counted and the first in the order
/// come from all of them, in blocks and in the head alike (the indexed search would stop
/// at its limit, newest first).
#[test]
fn a_sorted_search_orders_the_whole_window_and_counts_every_match() {
    let dir = tmp("sorted");
    let store = Store::open(&dir, options()).unwrap();
    let all = traces(300, 11);
    // One trace of three spans logs a timeout in an event, found by its tag.
    let mut flagged = all[150].clone();
    let at = flagged[0].start;
    flagged[0].events.push(causeway_model::Event {
        time: at,
        name: "exception".into(),
        attributes: vec![KeyValue::new("exception.type", "Timeout")],
    });
    for (i, t) in all.iter().enumerate() {
        store
            .append(if i == 150 { flagged.clone() } else { t.clone() })
            .unwrap();
        if i == 199 {
            store.flush().unwrap();
        }
    }
    assert!(store.stats().blocks >= 1 && store.stats().head_spans > 0);
    // What each trace is, worked out here from the spans as generated.
    struct Row {
        id: u128,
        start: u64,
        duration: u64,
        spans: usize,
        errors: usize,
        services: HashSet<String>,
    }
    let rows: Vec<Row> = all
        .iter()
        .map(|t| {
            let start = t.iter().map(|s| s.start).min().unwrap();
            let end = t.iter().map(|s| s.end).max().unwrap();
            Row {
                id: t[0].trace_id.get(),
                start,
                duration: end - start,
                spans: t.len(),
                errors: t.iter().filter(|s| s.is_error()).count(),
                services: t.iter().map(|s| s.service.to_string()).collect(),
            }
        })
        .collect();
    let service = all[0][0].service.to_string();
    let window = TimeWindow {
        start: rows[40].start,
        end: rows[260].start,
    };
    let by_window = |r: &Row| window.contains(r.start);
    let by_service = |r: &Row| r.services.contains(&service);
    type Key = fn(&Row) -> u64;
    let cases: [(&str, Key, bool); 4] = [
        ("-duration", |r| r.duration, true),
        ("spans", |r| r.spans as u64, false),
        ("-errors", |r| r.errors as u64, true),
        ("start", |r| r.start, false),
    ];
    for (order, key, descending) in cases {
        for (filter, query) in [
            (
                "window",
                SearchQuery {
                    window: Some(window),
                    limit: 25,
                    ..SearchQuery::default()
                },
            ),
            (
                "service in window",
                SearchQuery {
                    service: Some(service.clone()),
                    window: Some(window),
                    limit: 25,
                    ..SearchQuery::default()
                },
            ),
        ] {
            let wanted: Vec<&Row> = rows
                .iter()
                .filter(|r| by_window(r) && (filter == "window" || by_service(r)))
                .collect();
            let mut expected: Vec<(u64, u128)> = wanted.iter().map(|r| (key(r), r.id)).collect();
            expected.sort_by(|a, b| {
                let c = a.0.cmp(&b.0);
                (if descending { c.reverse() } else { c }).then(a.1.cmp(&b.1))
            });
            expected.truncate(25);
            let got =
                causeway_store::search_sorted(&store, &query, order.parse().unwrap(), &|| {
                    std::ops::ControlFlow::Continue(())
                })
                .unwrap();
            assert_eq!(got.total, wanted.len() as u64, "{order}, {filter}");
            let ids: Vec<u128> = got.traces.iter().map(|t| t.trace_id.get()).collect();
            let want: Vec<u128> = expected.iter().map(|e| e.1).collect();
            assert_eq!(ids, want, "{order}, {filter}");
        }
    }
    // A tag met only in one span's event: the one trace, counted as such.
    let tagged = SearchQuery {
        tags: vec![("exception.type".into(), "Timeout".into())],
        ..SearchQuery::default()
    };
    let got = causeway_store::search_sorted(&store, &tagged, "-duration".parse().unwrap(), &|| {
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(got.total, 1);
    assert_eq!(got.traces[0].trace_id.get(), rows[150].id);
    // A caller that stops the scan (its deadline passed) stops it soon.
    let got = causeway_store::search_sorted(
        &store,
        &SearchQuery::default(),
        "-duration".parse().unwrap(),
        &|| std::ops::ControlFlow::Break(()),
    )
    .unwrap();
    assert!(got.total < 300, "{}", got.total);
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
