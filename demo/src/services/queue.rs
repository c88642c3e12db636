//! The queue: accepts messages at once and has its worker process them later, each in a
//! consumer span that joins the sender's trace through the message token.

use axum::extract::{Query, State};
use axum::routing::post;
use axum::Router;
use causeway::message::MessageToken;
use causeway::SpanExt;
use http::{HeaderMap, StatusCode};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::orders::MESSAGE_HEADER;
use super::work;
use crate::{chance, millis};

const BACKLOG: usize = 10_000;

/// A message: its trace token and the order it announces.
type Message = (Option<MessageToken>, u64);

#[derive(serde::Deserialize)]
struct Published {
    order: u64,
}

pub(super) fn router() -> Router {
    let (tx, rx) = mpsc::channel(BACKLOG);
    tokio::spawn(consume(rx));
    Router::new()
        .route("/publish", post(publish))
        .with_state(tx)
}

async fn publish(
    State(tx): State<mpsc::Sender<Message>>,
    Query(p): Query<Published>,
    headers: HeaderMap,
) -> StatusCode {
    let token = headers
        .get(MESSAGE_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(MessageToken::decode);
    match tx.try_send((token, p.order)) {
        Ok(()) => StatusCode::ACCEPTED,
        Err(_) => {
            tracing::warn!(target: crate::LOG, order = p.order, "backlog full, message refused");
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

async fn consume(mut rx: mpsc::Receiver<Message>) {
    while let Some((token, order)) = rx.recv().await {
        tokio::time::sleep(millis(5.0, 40.0)).await;
        let span = tracing::info_span!(
            parent: None,
            "process order-placed",
            otel.kind = "consumer",
            messaging.system = "demo-queue",
            messaging.destination.name = "order-placed",
        );
        if let Some(token) = &token {
            causeway::message::receive(&span, token, Some("orders"), Some(8));
        }
        async {
            tracing::info!(target: crate::LOG, order, "processing order-placed");
            work(
                tracing::info_span!("send confirmation email"),
                millis(3.0, 10.0),
            )
            .await;
            if chance(0.02) {
                tracing::error!(target: crate::LOG, order, "mail server refused the message");
                tracing::Span::current().set_error("mail server refused the message");
            } else {
                tracing::info!(target: crate::LOG, order, "confirmation email sent");
            }
        }
        .instrument(span)
        .await;
    }
}
