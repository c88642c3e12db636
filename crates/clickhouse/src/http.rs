//! ClickHouse's HTTP interface: statements, inserts and streamed selects, on one node or
//! the first of the endpoint's nodes that answers.

use std::io::Read;
use std::time::Duration;

use causeway_store::StoreError;

use crate::endpoint::Endpoint;

/// Most bytes read of an answer held in memory (a select that returns more is streamed).
const MAX_ANSWER: u64 = 1 << 30;
/// Most bytes of an error message kept.
const MAX_ERROR: u64 = 64 << 10;

/// How long an answer may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    /// The client's timeout, from connecting to the answer's last byte.
    Timeout,
    /// The timeout to connect and send only: for a scan, whose grouping may take minutes
    /// before its first row, and whose reader stops at the next trace when over time.
    AsLongAsItTakes,
}

/// A client of every node of one endpoint.
pub struct Client {
    agent: ureq::Agent,
    /// Longest a request may take (see [`Patience`]).
    timeout: Duration,
    endpoint: Endpoint,
    authorization: Option<String>,
}

impl Client {
    /// A client whose requests give up after `timeout` (connect, send and answer).
    pub fn new(endpoint: Endpoint, timeout: Duration) -> Result<Client, StoreError> {
        let roots = match &endpoint.ca {
            Some(path) => trusted_certificates(path)?,
            None => ureq::tls::RootCerts::WebPki,
        };
        let tls = ureq::tls::TlsConfig::builder()
            .provider(ureq::tls::TlsProvider::Rustls)
            .root_certs(roots)
            .build();
        let agent = ureq::Agent::new_with_config(
            ureq::config::Config::builder()
                .timeout_global(Some(timeout))
                .http_status_as_error(false)
                .tls_config(tls)
                .build(),
        );
        let authorization = endpoint.user.as_ref().map(|user| {
            let pair = format!("{user}:{}", endpoint.password.as_deref().unwrap_or(""));
            format!("Basic {}", base64_encode(pair.as_bytes()))
        });
        Ok(Client {
            agent,
            timeout,
            endpoint,
            authorization,
        })
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// Runs `sql` on `node` (a statement, or a select whose answer fits in memory).
    pub fn run_on(&self, node: &str, sql: &str) -> Result<Vec<u8>, StoreError> {
        self.run_on_with(node, sql, &[])
    }

    fn run_on_with(
        &self,
        node: &str,
        sql: &str,
        settings: &[(&str, &str)],
    ) -> Result<Vec<u8>, StoreError> {
        let mut answer = self.post(node, settings, sql.as_bytes(), Patience::Timeout)?;
        answer
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER)
            .read_to_vec()
            .map_err(|e| remote(node, format!("reading the answer: {e}")))
    }

    /// Runs `sql` on the first node that answers.
    pub fn run(&self, sql: &str) -> Result<Vec<u8>, StoreError> {
        self.first_node(|node| self.run_on(node, sql))
    }

    /// Runs `sql` on the first node that answers with `settings` (ClickHouse settings and
    /// HTTP parameters such as `database`) and reads its answer.
    pub fn run_with(&self, sql: &str, settings: &[(&str, &str)]) -> Result<Vec<u8>, StoreError> {
        self.first_node(|node| self.run_on_with(node, sql, settings))
    }

    /// Runs a select on the first node that answers and streams its answer.
    pub fn stream(&self, sql: &str, patience: Patience) -> Result<impl Read + use<>, StoreError> {
        self.stream_on(&self.endpoint.nodes, sql, patience)
    }

    /// Runs a select on the first of `nodes` that answers (the replicas of one shard) and
    /// streams its answer.
    pub fn stream_on(
        &self,
        nodes: &[String],
        sql: &str,
        patience: Patience,
    ) -> Result<impl Read + use<>, StoreError> {
        first_of(nodes, |node| {
            let answer = self.post(node, &[], sql.as_bytes(), patience)?;
            Ok(answer.into_body().into_reader())
        })
    }

    /// Inserts `rows`, already in the format `insert` names, on the first node that
    /// answers; `settings` are ClickHouse settings for this insert.
    pub fn insert(
        &self,
        insert: &str,
        settings: &[(&str, &str)],
        rows: Vec<u8>,
    ) -> Result<(), StoreError> {
        let mut params = vec![("query", insert)];
        params.extend_from_slice(settings);
        self.first_node(|node| {
            self.post(node, &params, &rows, Patience::Timeout)?;
            Ok(())
        })
    }

    fn first_node<T>(
        &self,
        attempt: impl FnMut(&str) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        first_of(&self.endpoint.nodes, attempt)
    }

    /// Posts `body` with `params` in the URL; an answer that is not 200
    /// becomes an error holding ClickHouse's message.
    fn post(
        &self,
        node: &str,
        params: &[(&str, &str)],
        body: &[u8],
        patience: Patience,
    ) -> Result<ureq::http::Response<ureq::Body>, StoreError> {
        // Every statement names its tables with their database, so none is set here
        // (one that does not exist yet would fail `CREATE DATABASE`).
        let query = serde_urlencoded::to_string(params)
            .map_err(|e| remote(node, format!("encoding the request: {e}")))?;
        let url = format!("{}?{query}", self.endpoint.base_url(node));
        let mut request = self.agent.post(&url);
        if patience == Patience::AsLongAsItTakes {
            request = request
                .config()
                .timeout_global(None)
                .timeout_connect(Some(self.timeout))
                .timeout_send_request(Some(self.timeout))
                .build();
        }
        if let Some(auth) = &self.authorization {
            request = request.header("Authorization", auth);
        }
        let mut answer = request.send(body).map_err(|e| unreachable(node, e))?;
        let status = answer.status().as_u16();
        if status == 200 {
            return Ok(answer);
        }
        let text = answer
            .body_mut()
            .with_config()
            .limit(MAX_ERROR)
            .read_to_string()
            .unwrap_or_default();
        Err(remote(
            node,
            format!(
                "HTTP {status}: {}",
                text.trim().lines().next().unwrap_or("")
            ),
        ))
    }
}

/// The answer of the first of `nodes` that answers.
fn first_of<T>(
    nodes: &[String],
    mut attempt: impl FnMut(&str) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let mut failure = None;
    for node in nodes {
        match attempt(node) {
            Ok(v) => return Ok(v),
            // A node that answered with an error would answer the same elsewhere.
            Err(e) if is_answer(&e) => return Err(e),
            Err(e) => failure = Some(e),
        }
    }
    Err(failure.unwrap_or_else(|| remote("(none)", "the store URL lists no node")))
}

/// The certificates of the PEM file at `path`, as the only roots HTTPS trusts.
fn trusted_certificates(path: &str) -> Result<ureq::tls::RootCerts, StoreError> {
    let refused = |reason: String| StoreError::Remote {
        node: format!("ca={path}"),
        reason,
    };
    let pem = std::fs::read(path).map_err(|e| refused(format!("reading it: {e}")))?;
    let mut certificates = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => certificates.push(c),
            Ok(_) => {}
            Err(e) => return Err(refused(format!("not PEM: {e}"))),
        }
    }
    if certificates.is_empty() {
        return Err(refused("holds no certificate".into()));
    }
    Ok(ureq::tls::RootCerts::new_with_certs(&certificates))
}

fn remote(node: &str, reason: impl Into<String>) -> StoreError {
    StoreError::Remote {
        node: node.to_string(),
        reason: reason.into(),
    }
}

fn unreachable(node: &str, e: ureq::Error) -> StoreError {
    remote(node, format!("unreachable: {e}"))
}

/// True when the node answered (as opposed to not being reachable).
fn is_answer(e: &StoreError) -> bool {
    matches!(e, StoreError::Remote { reason, .. } if reason.starts_with("HTTP "))
}

fn base64_encode(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}
