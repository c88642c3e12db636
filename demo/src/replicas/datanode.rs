//! A DataNode: serves reads of the blocks on its host.

use std::future::Future;

use axum::extract::Query;
use axum::routing::get;
use axum::Router;
use causeway::middleware::tower::TraceLayer;
use serde::Deserialize;

use super::Setup;
use crate::BoxError;

/// Largest read served, in bytes.
const MAX_READ: usize = 16 << 20;

#[derive(Deserialize)]
struct Read {
    file: String,
    size: usize,
}

pub(super) async fn serve(
    setup: &Setup,
    host: &str,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), BoxError> {
    let addr = *setup
        .datanodes
        .get(host)
        .ok_or_else(|| format!("no DataNode address for host {host}"))?;
    let app = Router::new()
        .route(
            "/read",
            get(|Query(r): Query<Read>| read_block(r.file, r.size)),
        )
        .layer(TraceLayer::new());
    let listener = super::listen(addr).await?;
    axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await?;
    Ok(())
}

#[tracing::instrument(target = "replicas::datanode", name = "read_block", fields(src = %file))]
async fn read_block(file: String, size: usize) -> Vec<u8> {
    let size = size.min(MAX_READ);
    let data = vec![b'x'; size];
    tracing::info!(target: "replicas::datanode", delta = size as i64, "incrBytesRead");
    data
}
