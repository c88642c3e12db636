//! The embedded store: the conformance suite every store passes (with "settled" meaning
//! the head written as a block), then what only the embedded store has: blocks, the WAL,
//! compaction, retention and back-pressure.

use std::sync::Mutex;
use std::time::Duration;

use causeway_model::{Span, TraceId};
use causeway_store::conformance::{self, sorted_ids, span, traces, T0};
use causeway_store::{FsyncPolicy, Store, StoreOptions, TimeWindow, TraceStore};

fn options() -> StoreOptions {
    StoreOptions {
        fsync: FsyncPolicy::Never,
        head_max_age: Duration::from_secs(3600),
        compact_min_blocks: usize::MAX,
        ..StoreOptions::default()
    }
}

fn dir(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("causeway-store-{name}-{}", std::process::id()))
}

/// An empty directory for the test `name`.
fn tmp(name: &str) -> std::path::PathBuf {
    let dir = dir(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

struct Embedded;

impl conformance::Backend for Embedded {
    type Store = Store;
    fn open(&self, name: &str) -> Store {
        Store::open(tmp(name), options()).unwrap()
    }
    fn settle(&self, store: &Store) {
        store.flush().unwrap();
        assert_eq!(
            store.stats().head_spans,
            0,
            "the head is written as a block"
        );
    }
    fn reopen(&self, store: Store, name: &str) -> Store {
        drop(store);
        Store::open(dir(name), options()).unwrap()
    }
    fn remove(&self, store: Store, name: &str) {
        drop(store);
        let _ = std::fs::remove_dir_all(tmp(name));
    }
}

causeway_store::conformance_tests!(Embedded);

/// Blocks decode only what a scan asks for; the head gives its spans whole.
#[test]
fn scans_of_blocks_decode_only_the_fields_asked_for() {
    let dir = tmp("fields");
    let store = Store::open(&dir, options()).unwrap();
    let all = traces(100, 9);
    for t in &all[..80] {
        store.append(t.clone()).unwrap();
    }
    store.flush().unwrap();
    for t in &all[80..] {
        store.append(t.clone()).unwrap();
    }
    let block: std::collections::HashSet<TraceId> =
        all[..80].iter().map(|t| t[0].trace_id).collect();
    // Else the check below could not fail.
    let stored = all[..80].iter().flatten();
    assert!(stored
        .flat_map(|s| &s.attributes)
        .any(|kv| kv.key != "region"));
    let structure = causeway_store::Fields::Structure {
        attributes: vec!["region".into()],
    };
    for fields in [structure, causeway_store::Fields::Paths] {
        let seen: Mutex<Vec<Span>> = Mutex::new(Vec::new());
        store
            .scan_fields(TimeWindow::ALL, &fields, &|t| {
                if block.contains(&t.trace_id) {
                    seen.lock().unwrap().extend(t.spans);
                }
                std::ops::ControlFlow::Continue(())
            })
            .unwrap();
        let seen = seen.into_inner().unwrap();
        assert!(!seen.is_empty());
        for s in &seen {
            assert!(
                s.attributes.iter().all(|kv| kv.key == "region"),
                "{fields:?}: {:?}",
                s.attributes
            );
            if matches!(fields, causeway_store::Fields::Structure { .. }) {
                assert!(s.events.is_empty(), "a structure scan decodes no events");
            }
        }
    }
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
    let mut g = causeway_testkit::Generator::new(9, T0, 1_000);
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
