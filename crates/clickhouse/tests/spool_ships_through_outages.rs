//! The spool acknowledges spans once they are in its local WAL, ships them to ClickHouse
//! in the background, keeps acknowledging while ClickHouse is down up to its bound, then
//! refuses (busy), and catches up, without losing or duplicating a span, when ClickHouse
//! returns, also across a restart of the spool.

use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::sync::Mutex;
use std::time::Duration;

use causeway_clickhouse::local_cluster::Cluster;
use causeway_clickhouse::{
    ClickHouseOptions, ClickHouseStore, Endpoint, ShippingStore, SpoolOptions,
};
use causeway_model::{Span, SpanId, TraceId};
use causeway_store::{Fields, StoreError, TimeWindow, TraceStore};
use causeway_testkit::Generator;

const T0: u64 = 1_700_000_000_000_000_000;

fn open(url: &str, dir: &std::path::Path) -> ShippingStore {
    let store = ClickHouseStore::open(
        Endpoint::parse(url).unwrap(),
        ClickHouseOptions {
            timeout: Duration::from_secs(5),
            ..ClickHouseOptions::default()
        },
    )
    .unwrap();
    ShippingStore::open(
        dir,
        store,
        SpoolOptions {
            max_unshipped_bytes: 1 << 20,
            segment_bytes: 64 << 10,
            batch_bytes: 32 << 10,
            ship_interval: Duration::from_millis(20),
            ..SpoolOptions::default()
        },
    )
    .unwrap()
}

/// Span ids per trace, as stored.
fn stored(store: &dyn TraceStore) -> BTreeMap<TraceId, Vec<SpanId>> {
    let seen = Mutex::new(BTreeMap::new());
    store
        .scan_fields(TimeWindow::ALL, &Fields::All, &|t| {
            let mut ids: Vec<SpanId> = t.spans.iter().map(|s| s.span_id).collect();
            ids.sort();
            seen.lock().unwrap().insert(t.trace_id, ids);
            ControlFlow::Continue(())
        })
        .unwrap();
    seen.into_inner().unwrap()
}

fn expected(spans: &[Span]) -> BTreeMap<TraceId, Vec<SpanId>> {
    let mut out: BTreeMap<TraceId, Vec<SpanId>> = BTreeMap::new();
    for s in spans {
        out.entry(s.trace_id).or_default().push(s.span_id);
    }
    for ids in out.values_mut() {
        ids.sort();
    }
    out
}

#[test]
fn acknowledged_spans_reach_clickhouse_through_an_outage_and_a_restart() {
    let mut cluster = Cluster::start(2);
    let url = cluster.url("spooled");
    let dir = std::env::temp_dir().join(format!("causeway-spool-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut g = Generator::new(3, T0, 1_000_000);
    let mut acknowledged: Vec<Span> = Vec::new();

    let spool = open(&url, &dir);
    for _ in 0..10 {
        let trace = g.trace();
        spool.append(trace.clone()).unwrap();
        acknowledged.extend(trace);
    }
    assert!(
        spool.wait_shipped(Duration::from_secs(30)),
        "shipped while up"
    );
    assert_eq!(stored(&spool), expected(&acknowledged));

    // One shard down: appends are acknowledged into the WAL until the bound, then busy.
    cluster.kill_node(1);
    let mut refused = false;
    for _ in 0..2000 {
        let trace = g.trace();
        match spool.append(trace.clone()) {
            Ok(()) => acknowledged.extend(trace),
            Err(StoreError::Busy) => {
                refused = true;
                break;
            }
            Err(e) => panic!("append while ClickHouse is down: {e}"),
        }
    }
    assert!(
        refused,
        "appends were never refused while ClickHouse was down"
    );
    assert!(spool.unshipped_bytes() >= 1 << 20);

    // The spool stops (as a serve process would be restarted) with spans unshipped.
    drop(spool);
    cluster.start_node(1);
    let spool = open(&url, &dir);
    assert!(
        spool.wait_shipped(Duration::from_secs(60)),
        "caught up after the outage"
    );
    assert_eq!(
        stored(&spool),
        expected(&acknowledged),
        "nothing lost, nothing twice"
    );
    let trace = g.trace();
    spool.append(trace.clone()).unwrap();
    acknowledged.extend(trace);
    assert!(spool.wait_shipped(Duration::from_secs(30)));
    assert_eq!(stored(&spool), expected(&acknowledged));
    let leftover: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".wal"))
        .collect();
    assert!(
        leftover.len() <= 2,
        "shipped segments are removed: {} left",
        leftover.len()
    );
    drop(spool);
    let _ = std::fs::remove_dir_all(&dir);
}
