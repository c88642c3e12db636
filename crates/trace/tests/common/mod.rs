//! What several of these tests share: a log output to read back, a sink that keeps the
//! spans, a field value that counts how often it is formatted, and Pivot Tracing results
//! as strings.

// Each test binary uses part of this module.
#![allow(dead_code)]

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use causeway::model::Span;
use causeway::SpanSink;

/// A writer for `fmt::layer().with_writer(...)` whose output the test reads back.
#[derive(Clone, Default)]
pub struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Buffer {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// A sink that keeps every span it is handed.
pub struct Collect(pub Arc<Mutex<Vec<Span>>>);

impl SpanSink for Collect {
    fn write(&mut self, spans: &[Span]) {
        self.0.lock().unwrap().extend_from_slice(spans);
    }
    fn flush(&mut self) {}
}

static FORMATTED: AtomicUsize = AtomicUsize::new(0);

/// A field value that counts how often it is formatted (see [`formatted`]).
pub struct Counted;

impl fmt::Debug for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        FORMATTED.fetch_add(1, Ordering::Relaxed);
        f.write_str("counted")
    }
}

/// How often a [`Counted`] was formatted in this test binary.
pub fn formatted() -> usize {
    FORMATTED.load(Ordering::Relaxed)
}

/// Each query's result rows (key values, then aggregates) as strings.
#[cfg(feature = "pivot")]
pub fn rows_of(
    results: impl IntoIterator<Item = (u32, causeway_pivot::aggregate::Aggregator)>,
) -> Vec<(u32, Vec<Vec<String>>)> {
    results
        .into_iter()
        .map(|(id, a)| {
            let rows = a
                .rows()
                .iter()
                .map(|r| r.iter().map(ToString::to_string).collect())
                .collect();
            (id, rows)
        })
        .collect()
}

/// Installs `query` as query `id`, over the tracepoint definitions in `tracepoints`.
#[cfg(feature = "pivot")]
pub fn install(pivot: &causeway::Pivot, id: u32, tracepoints: &str, query: &str) {
    let text = format!("{tracepoints}\n{query}");
    let prepared = causeway_pivot::install::prepare(&text, &Default::default())
        .unwrap_or_else(|e| panic!("{}", e.render("query", &text)));
    pivot.install(id, &prepared.script).unwrap();
}

/// The gRPC client type [`traced_health_client`] gives.
#[cfg(feature = "tower")]
pub type TracedHealthClient = tonic_health::pb::health_client::HealthClient<
    causeway::middleware::tower::TraceService<tonic::transport::Channel>,
>;

/// A tonic health service behind `TraceLayer` on loopback, and a client of it over a
/// channel wrapped in `ClientTraceLayer`.
#[cfg(feature = "tower")]
pub async fn traced_health_client() -> TracedHealthClient {
    use causeway::middleware::tower::{ClientTraceLayer, Layer, TraceLayer};
    let (_reporter, health) = tonic_health::server::health_reporter();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(TraceLayer::new())
            .add_service(health)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let server = addr.to_string().parse().unwrap();
    tonic_health::pb::health_client::HealthClient::new(
        ClientTraceLayer::new().server(server).layer(channel),
    )
}
