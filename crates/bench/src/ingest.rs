//! `causeway-bench ingest`: spans per second into a server run in this process, durable,
//! over loopback HTTP.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use causeway_cli::progress::bar;
use causeway_model::codec::{native, otlp};
use causeway_model::Span;
use causeway_server::ServerConfig;
use causeway_store::{FsyncPolicy, StoreOptions};
use causeway_testkit::Generator;
use clap::{Args, ValueEnum};

use crate::harness::{now_ns, peak_rss_mib, per_span, percentiles, report, TempDir};
use crate::stores::{bench_endpoint, drop_database, generate};
use causeway_cli::client::Client;

#[derive(Clone, Copy, ValueEnum)]
enum Protocol {
    /// Native record batches to /v1/native.
    Native,
    /// OTLP protobuf to /v1/traces.
    Otlp,
}

#[derive(Args)]
pub struct IngestArgs {
    /// Spans to send.
    #[arg(long, default_value_t = 1_000_000)]
    spans: usize,
    /// Wire format.
    #[arg(long, value_enum, default_value = "native")]
    protocol: Protocol,
    /// Spans per request.
    #[arg(long, default_value_t = 2_000)]
    batch: usize,
    /// Client threads sending at once.
    #[arg(long, default_value_t = 2)]
    clients: usize,
    /// always, never, or an interval such as 100ms.
    #[arg(long, default_value = "always")]
    fsync: FsyncPolicy,
    /// Store directory (a fresh temporary one when absent).
    #[arg(long)]
    data: Option<PathBuf>,
    /// Also run it on this ClickHouse store (in a fresh database, dropped afterwards),
    /// side by side with the embedded store.
    #[command(flatten)]
    clickhouse: causeway_cli::ch::ClickHouseStoreArgs,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

pub fn run(a: IngestArgs) -> Result<()> {
    if a.batch == 0 || a.clients == 0 {
        bail!("--batch and --clients must be at least 1");
    }
    let dir = TempDir::new(a.data.clone(), "ingest");
    let traces = generate(a.spans, 1, now_ns() - 3_600_000_000_000);
    let spans: Vec<Span> = traces.into_iter().flatten().collect();
    let bodies: Vec<(usize, Vec<u8>)> = spans
        .chunks(a.batch)
        .map(|c| {
            let body = match a.protocol {
                Protocol::Native => native::encode_all(c),
                Protocol::Otlp => otlp::encode_protobuf(c),
            };
            (c.len(), body)
        })
        .collect();
    let wire_bytes: usize = bodies.iter().map(|(_, b)| b.len()).sum();
    let sent: usize = bodies.iter().map(|(n, _)| n).sum();
    drop(spans);

    let fsync = a.fsync;
    let embedded = ingest_into(&a, &bodies, dir.0.clone(), fsync, None)?;
    let Some(endpoint) = bench_endpoint(&a.clickhouse, "ingest")? else {
        let mut result = embedded;
        result["wire_bytes_per_span"] = per_span(wire_bytes, sent).into();
        return report(&result, a.json);
    };
    let spool = TempDir::new(None, "ingest-spool");
    let on_clickhouse = ingest_into(&a, &bodies, spool.0.clone(), fsync, Some(endpoint.clone()));
    drop_database(&endpoint);
    let on_clickhouse = on_clickhouse?;
    let ratio = |key: &str| {
        let (c, e) = (on_clickhouse[key].as_f64(), embedded[key].as_f64());
        c.zip(e)
            .map(|(c, e)| (c / e.max(1e-9) * 1000.0).round() / 1000.0)
    };
    let result = serde_json::json!({
        "wire_bytes_per_span": per_span(wire_bytes, sent),
        "embedded": embedded,
        "clickhouse": on_clickhouse,
        "clickhouse_to_embedded": {
            "spans_per_second": ratio("spans_per_second"),
            "sustained_spans_per_second": ratio("sustained_spans_per_second"),
            "disk_bytes_per_span": ratio("disk_bytes_per_span"),
        },
    });
    report(&result, a.json)
}

/// Sends the bodies to a fresh server (on ClickHouse when `clickhouse` is given) and
/// times it: acknowledged, then settled where queries read.
fn ingest_into(
    a: &IngestArgs,
    bodies: &[(usize, Vec<u8>)],
    data_dir: PathBuf,
    fsync: FsyncPolicy,
    clickhouse: Option<causeway_clickhouse::Endpoint>,
) -> Result<serde_json::Value> {
    let clickhouse_run = clickhouse.is_some();
    let (path, content_type) = match a.protocol {
        Protocol::Native => ("/v1/native", causeway_server::NATIVE_CONTENT_TYPE),
        Protocol::Otlp => ("/v1/traces", "application/x-protobuf"),
    };
    let rt = causeway_cli::runtime()?;
    let config = ServerConfig {
        data_dir,
        grpc_addr: "127.0.0.1:0".parse()?,
        ingest_addr: "127.0.0.1:0".parse()?,
        http_addr: "127.0.0.1:0".parse()?,
        store: StoreOptions {
            fsync,
            ..StoreOptions::default()
        },
        clickhouse: clickhouse.map(|endpoint| causeway_server::ClickHouseConfig {
            endpoint,
            options: causeway_clickhouse::ClickHouseOptions::default(),
            spool: causeway_clickhouse::SpoolOptions::default(),
        }),
        ..ServerConfig::default()
    };
    let server = rt.block_on(causeway_server::start(config))?;
    let ingest_url = format!("http://{}", server.ingest_addr);
    let api_url = format!("http://{}", server.http_addr);

    let next = AtomicUsize::new(0);
    let latencies = Mutex::new(Vec::new());
    let visible = Mutex::new(Vec::new());
    let retries = AtomicUsize::new(0);
    let done = std::sync::atomic::AtomicBool::new(false);
    let progress = bar(bodies.len() as u64, "batches");
    let started = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let mut handles = Vec::new();
        for _ in 0..a.clients {
            handles.push(s.spawn(|| -> Result<()> {
                let client = Client::new(&ingest_url, None);
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((_, body)) = bodies.get(i) else {
                        return Ok(());
                    };
                    loop {
                        let t = Instant::now();
                        match client.post(path, content_type, body) {
                            Ok(_) => {
                                latencies
                                    .lock()
                                    .unwrap_or_else(|p| p.into_inner())
                                    .push(t.elapsed());
                                break;
                            }
                            Err(e)
                                if e.to_string().contains("HTTP 503")
                                    || e.to_string().contains("HTTP 429") =>
                            {
                                retries.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(Duration::from_millis(50));
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    progress.inc(1);
                }
            }));
        }
        // Span end to queryable: a one-span trace, sent and then polled for.
        s.spawn(|| {
            let ingest = Client::new(&ingest_url, None);
            let api = Client::new(&api_url, None);
            let mut g = Generator::new(99, now_ns(), 1);
            while !done.load(Ordering::Relaxed) {
                let mut span = g.trace().swap_remove(0);
                span.parent_id = None;
                let end = Instant::now();
                span.end = now_ns();
                let id = span.trace_id;
                if ingest
                    .post(
                        "/v1/native",
                        causeway_server::NATIVE_CONTENT_TYPE,
                        &native::encode_all([&span]),
                    )
                    .is_err()
                {
                    continue;
                }
                while api.get_bytes(&format!("/api/traces/{id}")).is_err() {
                    std::thread::sleep(Duration::from_millis(1));
                }
                visible
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(end.elapsed());
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let mut first_err = None;
        for h in handles {
            if let Err(e) = h
                .join()
                .unwrap_or_else(|_| Err(anyhow::anyhow!("client panicked")))
            {
                first_err.get_or_insert(e);
            }
        }
        done.store(true, Ordering::Relaxed);
        first_err.map_or(Ok(()), Err)
    })?;
    let elapsed = started.elapsed();
    progress.finish_and_clear();
    // Sustained: until the store has the spans where queries read them (blocks written,
    // or shipped to ClickHouse).
    let settled = Instant::now();
    let (disk_bytes, disk_spans) = match server.backend.clone() {
        causeway_server::Backend::Embedded(store) => {
            store.flush().context("writing the head to a block")?;
            let stats = store.stats();
            (stats.block_bytes, stats.block_spans)
        }
        causeway_server::Backend::ClickHouse(spool) => {
            if !spool.wait_shipped(Duration::from_secs(3600)) {
                bail!("the spool did not ship within an hour");
            }
            let usage = spool.clickhouse().disk_usage()?;
            (usage.bytes, usage.spans)
        }
    };
    let settle_time = settled.elapsed();
    rt.block_on(server.shutdown());
    let sent: usize = bodies.iter().map(|(n, _)| n).sum();
    let round3 = |s: f64| (s * 1000.0).round() / 1000.0;
    Ok(serde_json::json!({
        "store": if clickhouse_run { "clickhouse" } else { "embedded" },
        "protocol": match a.protocol { Protocol::Native => "native", Protocol::Otlp => "otlp-http-protobuf" },
        "fsync": a.fsync.to_string(),
        "spans": sent,
        "batch_spans": a.batch,
        "clients": a.clients,
        "seconds": round3(elapsed.as_secs_f64()),
        "spans_per_second": (sent as f64 / elapsed.as_secs_f64()).round(),
        "settle_seconds": round3(settle_time.as_secs_f64()),
        "sustained_spans_per_second": (sent as f64 / (elapsed + settle_time).as_secs_f64()).round(),
        "disk_bytes_per_span": per_span(disk_bytes as usize, disk_spans as usize),
        "request_latency": percentiles(latencies.into_inner().unwrap_or_default()),
        "end_to_queryable": percentiles(visible.into_inner().unwrap_or_default()),
        "retried_requests": retries.load(Ordering::Relaxed),
        "peak_rss_mib": peak_rss_mib(),
    }))
}
