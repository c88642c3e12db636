//! The frontend: a home page from the catalog and recommendations (fetched in parallel),
//! and checkout through orders.

use axum::extract::{Query, State};
use axum::routing::{get, post};
use axum::Router;
use serde::Deserialize;

use super::{work, Failure};
use crate::peers::Peers;
use crate::{millis, Role};

#[derive(Deserialize)]
pub(crate) struct User {
    pub user: u32,
}

pub(super) fn router(peers: Peers) -> Router {
    Router::new()
        .route("/home", get(home))
        .route("/checkout", post(checkout))
        .with_state(peers)
}

async fn home(State(peers): State<Peers>, Query(u): Query<User>) -> Result<String, Failure> {
    let products_path = format!("/products?user={}", u.user);
    let recommendations_path = format!("/recommendations?user={}", u.user);
    let (products, recommendations) = tokio::join!(
        peers.get(Role::Catalog, &products_path),
        peers.get(Role::Recommend, &recommendations_path),
    );
    let products = products?;
    // Recommendations are optional: without them the page still renders.
    let recommendations = recommendations.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "recommendations unavailable");
        String::new()
    });
    work(tracing::info_span!("render page"), millis(0.5, 2.0)).await;
    tracing::info!(target: crate::LOG, user = u.user, "home page rendered");
    Ok(format!("{products}\n{recommendations}"))
}

async fn checkout(State(peers): State<Peers>, Query(u): Query<User>) -> Result<String, Failure> {
    tracing::info!(target: crate::LOG, user = u.user, "checkout started");
    let order = peers
        .send(
            http::Method::POST,
            Role::Orders,
            &format!("/orders?user={}", u.user),
        )
        .await?;
    work(tracing::info_span!("render receipt"), millis(0.3, 1.0)).await;
    tracing::info!(target: crate::LOG, receipt = %order, "checkout complete");
    Ok(order)
}
