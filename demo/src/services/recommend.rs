//! Recommendations: cached per user, else scored (slowly).

use axum::extract::{Query, State};
use axum::routing::get;
use axum::Router;

use super::frontend::User;
use super::{work, Failure};
use crate::peers::Peers;
use crate::{chance, millis};

pub(super) fn router(peers: Peers) -> Router {
    Router::new()
        .route("/recommendations", get(recommendations))
        .with_state(peers)
}

async fn recommendations(
    State(peers): State<Peers>,
    Query(u): Query<User>,
) -> Result<String, Failure> {
    let key = format!("rec-{}", u.user);
    if let Some(value) = peers.cached(&key).await {
        tracing::info!(target: crate::LOG, user = u.user, "recommendations served from cache");
        return Ok(value);
    }
    work(tracing::info_span!("score candidates"), millis(5.0, 25.0)).await;
    if chance(0.02) {
        return Err(Failure(
            http::StatusCode::INTERNAL_SERVER_ERROR,
            "model not loaded".into(),
        ));
    }
    let value = format!("picks-for-{}", u.user);
    tracing::info!(target: crate::LOG, user = u.user, "recommendations scored");
    peers.fill(&key, &value).await;
    Ok(value)
}
