//! A server on free loopback ports with a fresh store, for integration tests.

#![allow(dead_code)]

use std::time::Duration;

use causeway_server::{RunningServer, ServerConfig};
use causeway_store::{FsyncPolicy, StoreOptions};
use causeway_testkit::TempDir;

pub struct TestServer {
    pub rt: tokio::runtime::Runtime,
    pub server: Option<RunningServer>,
    /// The store's directory, removed after the server stops.
    pub dir: TempDir,
    pub http: ureq::Agent,
}

impl TestServer {
    pub fn start(name: &str) -> TestServer {
        Self::start_with(name, |_| {})
    }

    pub fn start_with(name: &str, tweak: impl FnOnce(&mut ServerConfig)) -> TestServer {
        let dir = TempDir::new(&format!("server-{name}"));
        let mut config = Self::config(&dir);
        tweak(&mut config);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = rt.block_on(causeway_server::start(config)).unwrap();
        let http = ureq::Agent::new_with_config(
            ureq::config::Config::builder()
                .timeout_global(Some(Duration::from_secs(30)))
                .http_status_as_error(false)
                .build(),
        );
        TestServer {
            rt,
            server: Some(server),
            dir,
            http,
        }
    }

    /// The configuration of a server on free loopback ports storing into `dir`.
    fn config(dir: &TempDir) -> ServerConfig {
        ServerConfig {
            data_dir: dir.to_path_buf(),
            grpc_addr: "127.0.0.1:0".parse().unwrap(),
            ingest_addr: "127.0.0.1:0".parse().unwrap(),
            http_addr: "127.0.0.1:0".parse().unwrap(),
            store: StoreOptions {
                fsync: FsyncPolicy::Never,
                ..StoreOptions::default()
            },
            ..ServerConfig::default()
        }
    }

    /// Stops the server (as on SIGTERM) and starts another on the same data directory,
    /// on new ports.
    pub fn restart(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
        let config = Self::config(&self.dir);
        self.server = Some(self.rt.block_on(causeway_server::start(config)).unwrap());
    }

    /// A server storing into the ClickHouse store at `url`, shipping its spool every 20 ms.
    pub fn start_on_clickhouse(name: &str, url: &str) -> TestServer {
        let endpoint = causeway_clickhouse::Endpoint::parse(url).unwrap();
        TestServer::start_with(name, |c| {
            c.clickhouse = Some(causeway_server::ClickHouseConfig {
                endpoint,
                options: causeway_clickhouse::ClickHouseOptions::default(),
                spool: causeway_clickhouse::SpoolOptions {
                    ship_interval: Duration::from_millis(20),
                    ..causeway_clickhouse::SpoolOptions::default()
                },
            })
        })
    }

    /// Waits until a server on ClickHouse has shipped every span it acknowledged.
    pub fn wait_shipped(&self) {
        let causeway_server::Backend::ClickHouse(spool) = &self.server().backend else {
            panic!("not on ClickHouse");
        };
        assert!(spool.wait_shipped(Duration::from_secs(30)));
    }

    pub fn server(&self) -> &RunningServer {
        self.server.as_ref().unwrap()
    }

    pub fn ingest_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server().ingest_addr)
    }

    pub fn api_url(&self, path: &str) -> String {
        format!("http://{}{path}", self.server().http_addr)
    }

    /// GET on the query API: status and JSON body.
    pub fn get(&self, path: &str) -> (u16, serde_json::Value) {
        let mut r = self.http.get(&self.api_url(path)).call().unwrap();
        let status = r.status().as_u16();
        let body = r.body_mut().read_to_string().unwrap();
        (
            status,
            serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body)),
        )
    }

    /// POST to the ingest listener: status, content type and body bytes.
    pub fn post(
        &self,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> (u16, String, Vec<u8>) {
        let mut req = self.http.post(&self.ingest_url(path));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut r = req.send(body).unwrap();
        let status = r.status().as_u16();
        let ct = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string();
        let body = r
            .body_mut()
            .with_config()
            .limit(64 << 20)
            .read_to_vec()
            .unwrap();
        (status, ct, body)
    }
}

/// An OTLP/HTTP protobuf answer's partial success: rejected spans and the message.
pub fn partial(body: &[u8]) -> (i64, String) {
    use prost::Message;
    let r =
        opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse::decode(body)
            .unwrap();
    let p = r.partial_success.unwrap_or_default();
    (p.rejected_spans, p.error_message)
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            self.rt.block_on(s.shutdown());
        }
    }
}
