//! A small blocking client for the server's HTTP endpoints.

use std::time::Duration;

use anyhow::{anyhow, Context, Result};

/// A blocking client of the query API (and of the collector's ingest): errors carry the server's message and the URL.
pub struct Client {
    base: String,
    token: Option<String>,
    agent: ureq::Agent,
}

impl Client {
    /// A client of the server at `base`, sending `token` as a bearer token when given.
    pub fn new(base: &str, token: Option<String>) -> Client {
        Client::with_timeout(base, token, Duration::from_secs(120))
    }

    /// A client whose requests may take up to `timeout` (benchmarks over big stores).
    pub fn with_timeout(base: &str, token: Option<String>, timeout: Duration) -> Client {
        let agent = ureq::Agent::new_with_config(
            ureq::config::Config::builder()
                .timeout_global(Some(timeout))
                .http_status_as_error(false)
                .build(),
        );
        Client {
            base: base.trim_end_matches('/').to_string(),
            token,
            agent,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn answer(
        &self,
        url: &str,
        resp: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<Vec<u8>> {
        let mut resp = resp.map_err(|e| match e {
            ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound => {
                anyhow!(
                    "cannot reach causeway at {} ({e}); is `causeway serve` running?",
                    self.base
                )
            }
            other => anyhow!("request to {url} failed: {other}"),
        })?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_vec()
            .with_context(|| format!("reading the answer from {url}"))?;
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let message = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
            .unwrap_or_else(|| String::from_utf8_lossy(&body).trim().to_string());
        Err(anyhow!("{message} (HTTP {status} from {url})"))
    }

    /// GETs `path`: the body of a 2xx answer, else the server's error.
    pub fn get_bytes(&self, path: &str) -> Result<Vec<u8>> {
        let url = self.url(path);
        let mut req = self.agent.get(&url);
        if let Some(t) = &self.token {
            req = req.header("authorization", &format!("Bearer {t}"));
        }
        self.answer(&url, req.call())
    }

    /// GETs `path` and reads the answer as JSON.
    pub fn get(&self, path: &str) -> Result<serde_json::Value> {
        let bytes = self.get_bytes(path)?;
        serde_json::from_slice(&bytes).context("the server answered with invalid JSON")
    }

    /// POSTs `body` of `content_type` to `path`; the JSON answer (null when empty).
    pub fn post(&self, path: &str, content_type: &str, body: &[u8]) -> Result<serde_json::Value> {
        let url = self.url(path);
        let mut req = self.agent.post(&url).header("content-type", content_type);
        if let Some(t) = &self.token {
            req = req.header("authorization", &format!("Bearer {t}"));
        }
        let bytes = self.answer(&url, req.send(body))?;
        if bytes.is_empty() {
            return Ok(serde_json::Value::Null);
        }
        serde_json::from_slice(&bytes).context("the server answered with invalid JSON")
    }
}

impl Client {
    /// POSTs `body` as JSON.
    pub fn post_json(&self, path: &str, body: &serde_json::Value) -> Result<serde_json::Value> {
        self.post(path, "application/json", body.to_string().as_bytes())
    }

    /// DELETE.
    pub fn delete(&self, path: &str) -> Result<()> {
        let url = self.url(path);
        let mut req = self.agent.delete(&url);
        if let Some(t) = &self.token {
            req = req.header("authorization", &format!("Bearer {t}"));
        }
        self.answer(&url, req.call()).map(|_| ())
    }
}

/// Percent-encodes a query parameter value.
pub fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}
