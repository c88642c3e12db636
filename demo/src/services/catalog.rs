//! The catalog: three products per page, each from the cache or else from storage, whose
//! replica it learns from the metadata service (and, like HDFS-6268's client, always
//! reads the first one listed).

use axum::extract::{Query, State};
use axum::routing::get;
use axum::Router;
use causeway::middleware::tower::TraceService;
use tonic::transport::Channel;
use tracing::Instrument;

use super::frontend::User;
use super::{work, Failure};
use crate::peers::Peers;
use crate::{chance, metadata, millis, BoxError, Role};

#[derive(Clone)]
struct Catalog {
    peers: Peers,
    metadata: TraceService<Channel>,
}

pub(super) fn router(peers: Peers) -> Result<Router, BoxError> {
    let addr = peers.topology().addr(Role::Metadata)?;
    let metadata = metadata::traced_channel(addr)?;
    Ok(Router::new()
        .route("/products", get(products))
        .with_state(Catalog { peers, metadata }))
}

/// Popular products are asked for far more often than the rest.
fn product_id() -> u64 {
    (fastrand::f64().powi(3) * 400.0) as u64 + 1
}

async fn products(State(c): State<Catalog>, Query(u): Query<User>) -> Result<String, Failure> {
    if chance(0.03) {
        // The occasional slow path: a stale index rebuilt inside the request.
        let span = tracing::info_span!("rebuild search index", reason = "stale");
        work(span, millis(150.0, 300.0)).await;
    }
    let ids: Vec<u64> = (0..3).map(|_| product_id()).collect();
    tracing::info!(user = u.user, products = ?ids, "page products chosen");
    let found = futures_util::future::join_all(ids.iter().map(|&id| c.product(id))).await;
    let mut page = Vec::new();
    for product in found {
        page.push(product?);
    }
    Ok(page.join("\n"))
}

impl Catalog {
    async fn product(&self, id: u64) -> Result<String, Failure> {
        let key = format!("product-{id}");
        if let Some(value) = self.peers.cached(&key).await {
            return Ok(value);
        }
        let value = self.read_block(id).await?;
        self.peers.fill(&key, &value).await;
        Ok(value)
    }

    async fn read_block(&self, block: u64) -> Result<String, Failure> {
        let span = tracing::info_span!("read block", block);
        async {
            let replicas = metadata::locate(&self.metadata, block).await?;
            let first = replicas
                .first()
                .and_then(|r| r.parse::<Role>().ok())
                .ok_or_else(|| {
                    Failure(
                        http::StatusCode::BAD_GATEWAY,
                        format!("no usable replica in {replicas:?}"),
                    )
                })?;
            tracing::info!(target: crate::LOG, block, replica = %first, "reading block from replica");
            Ok(self
                .peers
                .get(first, &format!("/read?block={block}"))
                .await?)
        }
        .instrument(span)
        .await
    }
}
