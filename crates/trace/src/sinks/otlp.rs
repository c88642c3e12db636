//! The OTLP/HTTP protobuf exporter: batches go to any OpenTelemetry collector (or
//! `causeway serve`) from a thread of its own, so a slow collector never stalls the
//! span-log writer. A full export queue drops batches and counts them.
//!
//! Batches are of 512 spans, the queue holds 64 batches, and a batch is tried three times on
//! what the OTLP specification calls retryable (429, 502, 503, 504, transport errors).
//! The exporter sends no `Authorization` header, so a process can export directly only to a
//! server without a token; with a token, write span logs and ship them with the agent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use causeway_model::codec::otlp;
use causeway_model::Span;

use crate::pipeline::SpanSink;

const EXPORT_BATCH: usize = 512;
const QUEUE_BATCHES: usize = 64;

enum Job {
    Export(Vec<Span>),
    Sync(SyncSender<()>),
}

/// Counters of the exporter.
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Spans the collector accepted.
    pub exported: AtomicU64,
    /// Spans dropped: queue full, or the collector refused or was unreachable after retries.
    pub failed: AtomicU64,
}

/// Sends spans to an OTLP/HTTP traces endpoint.
pub struct OtlpSink {
    tx: SyncSender<Job>,
    pending: Vec<Span>,
    stats: Arc<ExportStats>,
}

impl OtlpSink {
    /// Starts the exporter thread for `url` (ending in `/v1/traces`).
    pub fn start(url: String, timeout: Duration) -> std::io::Result<OtlpSink> {
        let (tx, rx) = mpsc::sync_channel(QUEUE_BATCHES);
        let stats = Arc::new(ExportStats::default());
        let thread_stats = stats.clone();
        std::thread::Builder::new()
            .name("causeway-otlp".into())
            .spawn(move || export_loop(url, timeout, rx, thread_stats))?;
        Ok(OtlpSink {
            tx,
            pending: Vec::new(),
            stats,
        })
    }

    /// The exporter's counters.
    pub fn stats(&self) -> Arc<ExportStats> {
        self.stats.clone()
    }

    fn hand_off(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let batch = std::mem::take(&mut self.pending);
        if let Err(
            TrySendError::Full(Job::Export(b)) | TrySendError::Disconnected(Job::Export(b)),
        ) = self.tx.try_send(Job::Export(batch))
        {
            self.stats
                .failed
                .fetch_add(b.len() as u64, Ordering::Relaxed);
        }
    }
}

impl SpanSink for OtlpSink {
    fn write(&mut self, spans: &[Span]) {
        self.pending.extend_from_slice(spans);
        if self.pending.len() >= EXPORT_BATCH {
            self.hand_off();
        }
    }

    fn flush(&mut self) {
        self.hand_off();
    }

    fn sync(&mut self, deadline: Instant) {
        self.hand_off();
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        if self.tx.try_send(Job::Sync(reply_tx)).is_ok() {
            let _ = reply_rx.recv_timeout(deadline.saturating_duration_since(Instant::now()));
        }
    }
}

fn export_loop(url: String, timeout: Duration, rx: Receiver<Job>, stats: Arc<ExportStats>) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .build()
        .into();
    let mut failures_reported = 0u64;
    while let Ok(job) = rx.recv() {
        let spans = match job {
            Job::Export(spans) => spans,
            Job::Sync(reply) => {
                let _ = reply.send(());
                continue;
            }
        };
        let body = otlp::encode_protobuf(&spans);
        match post(&agent, &url, &body) {
            Ok(()) => {
                stats
                    .exported
                    .fetch_add(spans.len() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                let failed = stats
                    .failed
                    .fetch_add(spans.len() as u64, Ordering::Relaxed);
                if failures_reported == 0 || failed / 10_000 > failures_reported {
                    failures_reported = failed / 10_000 + 1;
                    tracing::warn!(target: "causeway", url = %url, error = %e, spans = spans.len(), "OTLP export failed");
                }
            }
        }
    }
}

// Retries what the OTLP specification calls retryable (429, 502, 503, 504 and transport
// errors), three tries in all, honouring a short Retry-After.
fn post(agent: &ureq::Agent, url: &str, body: &[u8]) -> Result<(), String> {
    let mut last = String::new();
    for attempt in 0..3u32 {
        if attempt > 0 {
            std::thread::sleep(Duration::from_millis(100 * 4u64.pow(attempt - 1)));
        }
        match agent
            .post(url)
            .header("content-type", "application/x-protobuf")
            .send(body)
        {
            Ok(resp) => {
                let status = resp.status().as_u16();
                if (200..300).contains(&status) {
                    return Ok(());
                }
                last = format!("collector answered {status}");
                if !matches!(status, 429 | 502 | 503 | 504) {
                    return Err(last);
                }
                if let Some(secs) = resp
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.trim().parse::<u64>().ok())
                {
                    std::thread::sleep(Duration::from_secs(secs.min(2)));
                }
            }
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}
