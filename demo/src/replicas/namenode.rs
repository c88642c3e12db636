//! The NameNode: where each file's replicas are, in the order its policy picks.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Json, Router};
use causeway::middleware::tower::TraceLayer;
use serde::Deserialize;

use super::{File, Layout, Setup};
use crate::BoxError;

struct NameNode {
    layout: Layout,
    files: HashMap<String, File>,
    rng: Mutex<fastrand::Rng>,
}

#[derive(Deserialize)]
struct Locate {
    file: String,
    client: String,
}

pub(super) async fn serve(
    setup: &Setup,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<(), BoxError> {
    let nn = Arc::new(NameNode {
        files: setup
            .layout
            .files()
            .into_iter()
            .map(|f| (f.name.clone(), f))
            .collect(),
        rng: Mutex::new(fastrand::Rng::with_seed(setup.layout.seed)),
        layout: setup.layout.clone(),
    });
    let app = Router::new()
        .route("/locations", get(locations))
        .layer(TraceLayer::new())
        .with_state(nn);
    let listener = super::listen(setup.namenode).await?;
    axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await?;
    Ok(())
}

async fn locations(
    State(nn): State<Arc<NameNode>>,
    Query(q): Query<Locate>,
) -> Result<Json<Vec<String>>, StatusCode> {
    get_block_locations(&nn, &q.file, &q.client)
        .await
        .map(Json)
        .ok_or(StatusCode::NOT_FOUND)
}

#[tracing::instrument(
    target = "replicas::namenode",
    name = "get_block_locations",
    skip(nn, client),
    fields(src = %file, replicas = tracing::field::Empty)
)]
async fn get_block_locations(nn: &NameNode, file: &str, client: &str) -> Option<Vec<String>> {
    let f = nn.files.get(file)?;
    let locations = {
        let mut rng = nn.rng.lock().unwrap_or_else(|e| e.into_inner());
        nn.layout.locations(f, client, Some(&mut rng))
    };
    tracing::Span::current().record("replicas", locations.join(",").as_str());
    Some(locations)
}
