//! The cache: entries expire a few seconds after they are written.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Query, State};
use axum::routing::{get, put};
use axum::Router;
use http::StatusCode;
use serde::Deserialize;

use crate::millis;

type Entries = Arc<Mutex<HashMap<String, (String, Instant)>>>;

/// Kept this long at most, so that a long run sees misses as well as hits.
const LONGEST_TTL: Duration = Duration::from_secs(10);
const MAX_ENTRIES: usize = 10_000;

#[derive(Deserialize)]
struct Key {
    key: String,
    #[serde(default)]
    value: String,
}

pub(super) fn router() -> Router {
    Router::new()
        .route("/get", get(lookup))
        .route("/put", put(store))
        .with_state(Entries::default())
}

async fn lookup(State(entries): State<Entries>, Query(k): Query<Key>) -> (StatusCode, String) {
    tokio::time::sleep(millis(0.1, 0.5)).await;
    let found = entries
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&k.key)
        .filter(|(_, expires)| *expires > Instant::now())
        .map(|(v, _)| v.clone());
    tracing::info!(key = %k.key, cache.hit = found.is_some(), "lookup");
    match found {
        Some(v) => (StatusCode::OK, v),
        // A miss is an ordinary answer, not an error: 204 with no body.
        None => (StatusCode::NO_CONTENT, String::new()),
    }
}

async fn store(State(entries): State<Entries>, Query(k): Query<Key>) -> StatusCode {
    tokio::time::sleep(millis(0.1, 0.3)).await;
    let ttl = LONGEST_TTL.mul_f64(0.3 + 0.7 * fastrand::f64());
    let mut map = entries.lock().unwrap_or_else(|p| p.into_inner());
    if map.len() >= MAX_ENTRIES {
        map.clear();
    }
    tracing::info!(target: crate::LOG, key = %k.key, ttl_ms = ttl.as_millis() as u64, "entry stored");
    map.insert(k.key, (k.value, Instant::now() + ttl));
    StatusCode::NO_CONTENT
}
