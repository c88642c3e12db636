//! Property: whatever spans arrive, in whatever batches, with blocks cut at whatever
//! moments, each trace reads back as exactly its distinct spans, every field intact;
//! search by service finds every trace with that service; a scan visits each trace once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use causeway_model::{Event, KeyValue, Span, SpanId, SpanKind, Status, TraceId, Value};
use causeway_store::{FsyncPolicy, SearchQuery, Store, StoreOptions, TimeWindow, TraceStore};
use proptest::prelude::*;

fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::I64),
        "[a-z0-9 ]{0,12}".prop_map(Value::Str),
        (-1e9f64..1e9).prop_map(Value::F64),
        prop::collection::vec(any::<i64>().prop_map(Value::I64), 0..3).prop_map(Value::Array),
    ]
}

fn span() -> impl Strategy<Value = Span> {
    (
        1u128..6,
        1u64..40,
        prop::option::of(1u64..40),
        prop::sample::select(vec!["GET /", "query", "charge", "ünïcode op"]),
        prop::sample::select(vec!["web", "db", "pay"]),
        1_600_000_000_000_000_000u64..1_600_000_100_000_000_000,
        0u64..5_000_000_000,
        prop::collection::vec(("[a-z.]{1,8}", value()), 0..5),
        prop::option::of("[a-z ]{0,10}"),
        prop::collection::vec(
            (
                // Before the start, within the span, or after its end.
                -1_000i64..6_000_000_000,
                "[a-z ]{0,6}",
                prop::collection::vec(("[a-z.]{1,8}", value()), 0..4),
            ),
            0..4,
        ),
    )
        .prop_map(
            |(t, id, parent, name, service, start, dur, attrs, error, events)| {
                let mut s = Span::new(
                    TraceId::new(t).unwrap(),
                    SpanId::new(id).unwrap(),
                    parent.and_then(SpanId::new),
                    name,
                    service,
                    start,
                    start + dur,
                );
                s.kind = SpanKind::Server;
                s.host = "h1".into();
                s.attributes = attrs
                    .into_iter()
                    .map(|(k, v)| KeyValue { key: k, value: v })
                    .collect();
                if let Some(m) = error {
                    s.status = Status::Error(m);
                }
                s.events = events
                    .into_iter()
                    .map(|(at, name, attrs)| Event {
                        time: start.wrapping_add_signed(at),
                        name,
                        attributes: attrs
                            .into_iter()
                            .map(|(k, v)| KeyValue { key: k, value: v })
                            .collect(),
                    })
                    .collect();
                s
            },
        )
}

static CASE: AtomicUsize = AtomicUsize::new(0);

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn spans_read_back_exactly(
        spans in prop::collection::vec(span(), 1..60),
        cuts in prop::collection::vec(any::<bool>(), 1..8),
    ) {
        let dir = std::env::temp_dir().join(format!(
            "causeway-prop-{}-{}", std::process::id(), CASE.fetch_add(1, Ordering::Relaxed)));
        let _ = std::fs::remove_dir_all(&dir);
        let opts = StoreOptions { fsync: FsyncPolicy::Never, compact_min_blocks: 3, ..StoreOptions::default() };
        let store = Store::open(&dir, opts.clone()).unwrap();
        // Same (trace, span) id twice: the first one stored is the one kept... or any
        // one of them; the reads must be consistent with one copy per id.
        let chunk = spans.len().div_ceil(cuts.len());
        for (batch, cut) in spans.chunks(chunk.max(1)).zip(&cuts) {
            store.append(batch.to_vec()).unwrap();
            if *cut {
                store.flush().unwrap();
            }
        }
        store.compact().unwrap();
        // Reopen half the time: the WAL replay must give the same answers.
        let store = if cuts[0] { drop(store); Store::open(&dir, opts).unwrap() } else { store };

        let mut want: BTreeMap<TraceId, BTreeMap<SpanId, Vec<Span>>> = BTreeMap::new();
        for s in &spans {
            want.entry(s.trace_id).or_default().entry(s.span_id).or_default().push(s.clone());
        }
        let mut kept = Vec::new();
        for (id, by_span) in &want {
            let got = store.trace(*id).unwrap().expect("trace stored");
            kept.extend(got.spans.iter().cloned());
            let got_ids: BTreeSet<SpanId> = got.spans.iter().map(|s| s.span_id).collect();
            prop_assert_eq!(&got_ids, &by_span.keys().copied().collect::<BTreeSet<_>>());
            for s in &got.spans {
                prop_assert!(by_span[&s.span_id].contains(s), "span {} changed in storage", s.span_id);
            }
        }
        for service in ["web", "db", "pay"] {
            let found: BTreeSet<TraceId> = store
                .search(&SearchQuery { service: Some(service.into()), limit: 100, ..Default::default() })
                .unwrap()
                .iter()
                .map(|s| s.trace_id)
                .collect();
            // A span id sent twice with different content reads back as one copy;
            // search agrees with what reads return.
            let expected: BTreeSet<TraceId> = kept.iter().filter(|s| &*s.service == service).map(|s| s.trace_id).collect();
            prop_assert_eq!(found, expected);
        }
        let visited = Mutex::new(Vec::new());
        store.scan(TimeWindow::ALL, &|t| visited.lock().unwrap().push(t.trace_id)).unwrap();
        let mut visited = visited.into_inner().unwrap();
        visited.sort();
        prop_assert_eq!(visited, want.keys().copied().collect::<Vec<_>>());
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
