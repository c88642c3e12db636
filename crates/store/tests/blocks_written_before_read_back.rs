//! A block written before the `events` column (by 02c0556, which kept events in each
//! span's detail) reads back as it was written: by id, by a search on an event's
//! attribute, and in a paths scan. `data/block-02c0556.parquet` holds one trace imported
//! from OTLP JSON (events with string, integer, float, boolean and array attributes, one
//! before its span's start in time order); `data/block-02c0556.spans.json` holds its
//! spans as that version's API gave them back.

use std::ops::ControlFlow;
use std::sync::Mutex;

use causeway_model::{Span, TraceId, Value};
use causeway_store::{
    Fields, FsyncPolicy, SearchQuery, Store, StoreOptions, TimeWindow, TraceStore,
};

fn open_old_block(name: &str) -> (Store, std::path::PathBuf) {
    let dir =
        std::env::temp_dir().join(format!("causeway-old-block-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("blocks")).unwrap();
    let data = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    std::fs::copy(
        data.join("block-02c0556.parquet"),
        dir.join("blocks/0000000000000001.parquet"),
    )
    .unwrap();
    let options = StoreOptions {
        fsync: FsyncPolicy::Never,
        ..StoreOptions::default()
    };
    (Store::open(&dir, options).unwrap(), dir)
}

fn written() -> Vec<Span> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/block-02c0556.spans.json");
    let mut spans: Vec<Span> = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    // JSON has no bytes: an array of small integers reads back as bytes, and the array
    // written was of integers.
    for kv in spans
        .iter_mut()
        .flat_map(|s| &mut s.events)
        .flat_map(|e| &mut e.attributes)
    {
        if let Value::Bytes(b) = &kv.value {
            kv.value = Value::Array(b.iter().map(|&n| Value::I64(n.into())).collect());
        }
    }
    spans.sort_by_key(|s| s.span_id);
    spans
}

#[test]
fn a_block_from_before_the_events_column_reads_back_as_written() {
    let (store, dir) = open_old_block("read");
    let want = written();
    assert!(
        want.iter().map(|s| s.events.len()).sum::<usize>() >= 4,
        "the fixture has events to read"
    );
    let id = want[0].trace_id;
    let mut got = store
        .trace(id)
        .unwrap()
        .expect("the old block's trace")
        .spans;
    got.sort_by_key(|s| s.span_id);
    assert_eq!(got, want);

    // Its index, rebuilt on opening, finds it by an event's attributes, typed or not.
    for (k, v) in [
        ("exception.type", "Timeout"),
        ("retry", "3"),
        ("ratio", "0.5"),
    ] {
        let q = SearchQuery {
            tags: vec![(k.to_string(), v.to_string())],
            ..SearchQuery::default()
        };
        let found: Vec<TraceId> = store
            .search(&q)
            .unwrap()
            .iter()
            .map(|t| t.trace_id)
            .collect();
        assert_eq!(found, [id], "{k}={v}");
    }

    // A paths scan: events whole but for their attributes.
    let seen = Mutex::new(Vec::new());
    store
        .scan_fields(TimeWindow::ALL, &Fields::Paths, &|t| {
            seen.lock().unwrap().extend(t.spans);
            ControlFlow::Continue(())
        })
        .unwrap();
    let mut seen = seen.into_inner().unwrap();
    seen.sort_by_key(|s| s.span_id);
    let events = |spans: &[Span]| -> Vec<(u64, String)> {
        spans
            .iter()
            .flat_map(|s| s.events.iter().map(|e| (e.time, e.name.clone())))
            .collect()
    };
    assert_eq!(events(&seen), events(&want));
    assert!(seen
        .iter()
        .flat_map(|s| &s.events)
        .all(|e| e.attributes.is_empty()));
    drop(store);
    let _ = std::fs::remove_dir_all(&dir);
}
