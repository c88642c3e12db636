//! Stores for the integration tests: a fresh directory, nothing synced.

#![allow(dead_code)]

use std::path::PathBuf;

use causeway_model::{KeyValue, Span, SpanId, TraceId};
use causeway_store::{FsyncPolicy, Store, StoreOptions, TraceStore};

/// An empty store in a fresh directory named for `name`, never synced.
pub fn fresh_store(name: &str) -> (Store, PathBuf) {
    let dir = std::env::temp_dir().join(format!("causeway-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(
        &dir,
        StoreOptions {
            fsync: FsyncPolicy::Never,
            ..StoreOptions::default()
        },
    )
    .unwrap();
    (store, dir)
}

/// A store of `n` spans of `svc` over 20 operations, ten to a trace, each with a user.
pub fn store_of_spans(name: &str, n: u64) -> (Store, PathBuf) {
    let (store, dir) = fresh_store(name);
    let t = 1_700_000_000_000_000_000u64;
    let spans: Vec<Span> = (0..n)
        .map(|i| {
            let mut s = Span::new(
                TraceId::new(u128::from(i / 10 + 1)).unwrap(),
                SpanId::new(i + 1).unwrap(),
                None,
                format!("op-{}", i % 20),
                "svc",
                t + i * 1000,
                t + i * 1000 + 500,
            );
            s.attributes
                .push(KeyValue::new("user", format!("user-{}", i % 100)));
            s
        })
        .collect();
    store.append(spans).unwrap();
    (store, dir)
}
