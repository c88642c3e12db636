//! The queue: accepts messages at once and has its worker process them later, each in a
//! consumer span that joins the sender's trace through the message token. The message also
//! carries, in memory, the context of the request that enqueued it: the worker's span is
//! linked to it, and where the sender passed no token (a publisher nobody instrumented) it
//! is the span's parent, so the work stays in the request's trace.

use axum::extract::{Query, State};
use axum::routing::post;
use axum::Router;
use causeway::message::MessageToken;
use causeway::{Extracted, SpanContext, SpanExt};
use http::{HeaderMap, StatusCode};
use tokio::sync::mpsc;
use tracing::Instrument;

use super::orders::MESSAGE_HEADER;
use super::work;
use crate::{chance, millis};

const BACKLOG: usize = 10_000;

/// A message: its trace token, the context of the request that enqueued it, and the
/// order it announces.
type Message = (Option<MessageToken>, Option<SpanContext>, u64);

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
    let enqueued_by = tracing::Span::current().context();
    match tx.try_send((token, enqueued_by, p.order)) {
        Ok(()) => StatusCode::ACCEPTED,
        Err(_) => {
            tracing::warn!(target: crate::LOG, order = p.order, "backlog full, message refused");
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

async fn consume(mut rx: mpsc::Receiver<Message>) {
    while let Some((token, enqueued_by, order)) = rx.recv().await {
        tokio::time::sleep(millis(5.0, 40.0)).await;
        let consumer = || {
            tracing::info_span!(
                parent: None,
                "process order-placed",
                otel.kind = "consumer",
                messaging.system = "demo-queue",
                messaging.destination.name = "order-placed",
            )
        };
        let span = match (&token, &enqueued_by) {
            (None, Some(request)) => {
                let extracted = Extracted {
                    parent: Some(request.clone()),
                    ..Extracted::default()
                };
                causeway::with_remote_parent(&extracted, consumer)
            }
            _ => consumer(),
        };
        if let Some(token) = &token {
            causeway::message::receive(&span, token, Some("orders"), Some(8));
            if let Some(request) = &enqueued_by {
                span.add_link(request, Vec::new());
            }
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
