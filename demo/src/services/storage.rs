//! A storage replica with one simulated disk: requests queue for it, so a replica that
//! takes every read (storage-1, see the catalog) is slower than its peers.

use std::sync::Arc;

use axum::extract::{Query, State};
use axum::routing::{get, put};
use axum::Router;
use causeway::SpanExt;
use http::StatusCode;
use serde::Deserialize;
use tracing::Instrument;

use super::{work, Failure};
use crate::{chance, millis};

#[derive(Clone)]
struct Replica {
    number: u8,
    disk: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Deserialize)]
struct Block {
    block: u64,
}

pub(super) fn router(number: u8) -> Router {
    Router::new()
        .route("/read", get(read))
        .route("/write", put(write))
        .with_state(Replica {
            number,
            disk: Arc::default(),
        })
}

impl Replica {
    async fn disk(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.disk
            .lock()
            .instrument(tracing::info_span!("wait for disk"))
            .await
    }
}

async fn read(State(r): State<Replica>, Query(b): Query<Block>) -> Result<String, Failure> {
    let _disk = r.disk().await;
    let span = tracing::info_span!("disk read", block = b.block);
    let mut time = millis(2.0, 6.0);
    if chance(0.01) {
        tracing::warn!(parent: &span, "compaction stall");
        time += millis(80.0, 150.0);
    }
    work(span.clone(), time).await;
    if chance(0.01) {
        tracing::error!(target: crate::LOG, block = b.block, "checksum mismatch");
        span.set_error("checksum mismatch");
        return Err(Failure(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("block {} failed its checksum", b.block),
        ));
    }
    // The read is over: its span ends here, not when the handler returns.
    drop(span);
    tracing::info!(target: crate::LOG, block = b.block, replica = r.number, "block read");
    Ok(format!("block-{}@storage-{}", b.block, r.number))
}

async fn write(State(r): State<Replica>, Query(b): Query<Block>) -> StatusCode {
    let _disk = r.disk().await;
    let span = tracing::info_span!("disk write", block = b.block);
    let mut time = millis(2.0, 4.0);
    // The third replica's disk is older: now and then its fsync stalls.
    if r.number == 3 && chance(0.15) {
        tracing::warn!(parent: &span, "fsync stall");
        time += millis(20.0, 60.0);
    }
    work(span, time).await;
    tracing::info!(target: crate::LOG, block = b.block, replica = r.number, "block written");
    StatusCode::NO_CONTENT
}
