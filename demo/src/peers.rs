//! Traced HTTP calls from one demo process to another.

use causeway::middleware::reqwest::TracedRequest;
use http::StatusCode;

use crate::{BoxError, Role, Topology};

/// How a call to a peer failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    /// The peer answered with an error status.
    #[error("{role} answered {status}: {body}")]
    Status {
        role: Role,
        status: StatusCode,
        body: String,
    },
    /// The request did not complete.
    #[error("{role} unreachable: {source}")]
    Transport { role: Role, source: reqwest::Error },
}

/// The other processes, reached through client spans.
#[derive(Clone)]
pub(crate) struct Peers {
    client: reqwest::Client,
    topology: Topology,
}

impl Peers {
    pub(crate) fn new(topology: Topology) -> Result<Peers, BoxError> {
        let client = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(5))
            .build()?;
        Ok(Peers { client, topology })
    }

    pub(crate) fn topology(&self) -> &Topology {
        &self.topology
    }

    /// Sends `method path` to `role` with `headers`; the body on a 2xx answer.
    pub(crate) async fn call_with(
        &self,
        method: http::Method,
        role: Role,
        path: &str,
        headers: http::HeaderMap,
    ) -> Result<String, CallError> {
        let addr = self.topology.addr(role).map_err(|_| CallError::Status {
            role,
            status: StatusCode::SERVICE_UNAVAILABLE,
            body: "not in the topology".into(),
        })?;
        let transport = |source| CallError::Transport { role, source };
        let resp = self
            .client
            .request(method, format!("http://{addr}{path}"))
            .headers(headers)
            .send_traced()
            .await
            .map_err(transport)?;
        let status = resp.status();
        let body = resp.text().await.map_err(transport)?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(CallError::Status { role, status, body })
        }
    }

    pub(crate) async fn get(&self, role: Role, path: &str) -> Result<String, CallError> {
        self.call_with(http::Method::GET, role, path, http::HeaderMap::new())
            .await
    }

    /// The cached value of `key`; `None` on a miss, or when the cache fails (logged on
    /// the current span: the caller goes on without it).
    pub(crate) async fn cached(&self, key: &str) -> Option<String> {
        match self.get(Role::Cache, &format!("/get?key={key}")).await {
            Ok(value) if !value.is_empty() => Some(value),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(error = %e, "cache unavailable");
                None
            }
        }
    }

    /// Stores `value` under `key` in the cache; a failure is logged, not returned.
    pub(crate) async fn fill(&self, key: &str, value: &str) {
        let path = format!("/put?key={key}&value={value}");
        if let Err(e) = self.send(http::Method::PUT, Role::Cache, &path).await {
            tracing::warn!(error = %e, "cache fill failed");
        }
    }

    pub(crate) async fn send(
        &self,
        method: http::Method,
        role: Role,
        path: &str,
    ) -> Result<String, CallError> {
        self.call_with(method, role, path, http::HeaderMap::new())
            .await
    }
}
