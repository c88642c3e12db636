//! Orders: a quorum write (to three replicas, answered after two acknowledge, as FAB in
//! the Pip paper) and a one-way message to the queue.

use axum::extract::{Query, State};
use axum::routing::post;
use axum::Router;
use http::StatusCode;
use tracing::Instrument;

use super::frontend::User;
use super::{work, Failure};
use crate::peers::Peers;
use crate::{millis, Role};

const REPLICAS: [Role; 3] = [Role::Storage(1), Role::Storage(2), Role::Storage(3)];
const QUORUM: usize = 2;

/// The header that carries a message's token to the queue.
pub(crate) const MESSAGE_HEADER: &str = "causeway-message";

pub(super) fn router(peers: Peers) -> Router {
    Router::new()
        .route("/orders", post(place))
        .with_state(peers)
}

async fn place(State(peers): State<Peers>, Query(u): Query<User>) -> Result<String, Failure> {
    work(tracing::info_span!("validate basket"), millis(1.0, 3.0)).await;
    let order = fastrand::u64(..);
    tracing::info!(target: crate::LOG, user = u.user, order, "order accepted");
    quorum_write(&peers, order).await?;
    publish(&peers, order).await?;
    tracing::info!(target: crate::LOG, order, "order placed");
    Ok(format!("order {order} placed for user {}", u.user))
}

async fn quorum_write(peers: &Peers, block: u64) -> Result<(), Failure> {
    let span = tracing::info_span!(
        "quorum write",
        block,
        replicas = REPLICAS.len(),
        quorum = QUORUM
    );
    async {
        let (tx, mut rx) = tokio::sync::mpsc::channel(REPLICAS.len());
        for replica in REPLICAS {
            let (tx, peers) = (tx.clone(), peers.clone());
            let path = format!("/write?block={block}");
            // The writes outlive the quorum: the last one finishes after the answer.
            tokio::spawn(
                async move {
                    let result = peers.send(http::Method::PUT, replica, &path).await;
                    let _ = tx.send((replica, result)).await;
                }
                .in_current_span(),
            );
        }
        drop(tx);
        let (mut acks, mut failures) = (0, Vec::new());
        while let Some((replica, result)) = rx.recv().await {
            match result {
                Ok(_) => {
                    acks += 1;
                    if acks == QUORUM {
                        tracing::info!(last = %replica, "quorum reached");
                        return Ok(());
                    }
                }
                Err(e) => failures.push(e.to_string()),
            }
        }
        Err(Failure(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("quorum not reached: {}", failures.join("; ")),
        ))
    }
    .instrument(span)
    .await
}

async fn publish(peers: &Peers, order: u64) -> Result<(), Failure> {
    let span = tracing::info_span!(
        "publish order-placed",
        otel.kind = "producer",
        messaging.system = "demo-queue",
        messaging.destination.name = "order-placed",
    );
    let mut headers = http::HeaderMap::new();
    if let Some(token) = causeway::message::send(&span, Some("queue"), Some(8)) {
        if let Ok(v) = token.encode().parse() {
            headers.insert(MESSAGE_HEADER, v);
        }
    }
    let path = format!("/publish?order={order}");
    peers
        .call_with(http::Method::POST, Role::Queue, &path, headers)
        .instrument(span)
        .await?;
    tracing::info!(target: crate::LOG, topic = "order-placed", "order event published");
    Ok(())
}
