//! Followed log files whose lines name no trace, joined to the traces of their requests
//! (`causeway agent --logs GLOB --join API`): each such file's new lines go to its
//! [`Tail`], and every pass stitches each file with its last passes as context and joins
//! the requests that began more than [`SETTLE`] ago to the spans the query API holds for
//! their time (`causeway_logflow::join`); the lines go to the collector as log records of
//! the spans they were placed on, the rest as stitched requests of their own; the first
//! window that stitched any also sends its stitching report (the Logs page's identifiers
//! and links, `/v1/logflow/report`), as `causeway logs` does. A file whose
//! new lines name a trace is not stitched (its lines went to their spans already). What a
//! tail holds is in memory only: a restart starts each file's window afresh.

use crate::now_ns;
use std::time::Duration;

use causeway_logflow::join::{join, LogJoinReport};
use causeway_logflow::tail::Tail;
use causeway_model::codec::native;
use causeway_model::Span;

use super::{Agent, AgentError, PassStats};

/// How long after a request began its lines are joined: its lines have been written and
/// its spans exported by then. The last pass (`finish`) takes all.
pub const SETTLE: Duration = Duration::from_secs(3);

/// Freshness samples kept until taken.
const MAX_DELAYS: usize = 1 << 20;

/// Records, among `delays`, how long after `starts` (ns) their requests were shipped:
/// now (the first [`MAX_DELAYS`] until taken).
pub(super) fn record_delays(delays: &mut Vec<u64>, starts: &[u64]) {
    let sent = now_ns();
    let room = MAX_DELAYS.saturating_sub(delays.len());
    delays.extend(starts.iter().map(|s| sent.saturating_sub(*s)).take(room));
}

impl Agent {
    /// Adds `lines` (whole lines of the file known as `key`, named `name`, numbered from
    /// `first_line`) to its tail; a file seen for the first time is joined from its start.
    pub(super) fn tail_lines(&mut self, key: &str, name: &str, first_line: u32, lines: Vec<u8>) {
        self.tails
            .entry(key.to_string())
            .or_insert_with(|| Tail::new(name, first_line, 0))
            .push(lines);
    }

    /// Joins what each tail settled up to `settle` ago and ships it.
    pub(super) fn join_tails(
        &mut self,
        settle: Duration,
        stats: &mut PassStats,
    ) -> Result<(), AgentError> {
        let Some(api) = self.config.join.clone() else {
            return Ok(());
        };
        let to = now_ns().saturating_sub(settle.as_nanos() as u64);
        let mut keys: Vec<String> = self.tails.keys().cloned().collect();
        keys.sort();
        for key in keys {
            let Some(settled) = self.tails.get_mut(&key).and_then(|t| t.settle(to)) else {
                continue;
            };
            if settled.spans.is_empty() {
                continue;
            }
            let traces = self.spans_around(&api, &settled.spans, super::JOIN_LOOKBACK_NS)?;
            let joined = join(settled.spans, &traces);
            self.ship_spans(&joined.spans, stats)?;
            if !self.report_sent {
                self.post(
                    "/v1/logflow/report",
                    "application/json",
                    &settled
                        .stitched
                        .report(settled.run)
                        .to_string()
                        .into_bytes(),
                )?;
                self.report_sent = true;
            }
            add(stats, &joined.report);
            record_delays(&mut self.join_delays, &settled.starts);
        }
        Ok(())
    }

    /// How long after they began the requests joined since the last call were shipped (ns).
    pub fn take_join_delays(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.join_delays)
    }

    /// The spans of the traces the query API at `api` holds that began from `lookback_ns`
    /// before `spans` to their end, read through its native export.
    pub(super) fn spans_around(
        &self,
        api: &str,
        spans: &[Span],
        lookback_ns: u64,
    ) -> Result<Vec<Span>, AgentError> {
        let Some(window) = super::export_window(spans, lookback_ns) else {
            return Ok(Vec::new());
        };
        let url = format!("{}{window}", api.trim_end_matches('/'));
        let fail = |reason: String| AgentError::Collector {
            url: url.clone(),
            reason,
        };
        let mut req = self.http.get(&url);
        if let Some(t) = &self.config.token {
            req = req.header("authorization", &format!("Bearer {t}"));
        }
        let mut resp = req.call().map_err(|e| fail(e.to_string()))?;
        let status = resp.status().as_u16();
        if status != 200 {
            let body = resp.body_mut().read_to_string().unwrap_or_default();
            return Err(fail(format!("answered {status}: {}", body.trim())));
        }
        let body = resp
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_vec()
            .map_err(|e| fail(e.to_string()))?;
        let decoded = native::decode_stream(&body);
        if let Some(problem) = decoded.problems.first() {
            tracing::warn!(api, %problem, "the export to join to was damaged");
        }
        Ok(decoded.spans)
    }

    /// Ships `spans` in native batches.
    pub(super) fn ship_spans(
        &self,
        spans: &[Span],
        stats: &mut PassStats,
    ) -> Result<(), AgentError> {
        let mut batch = Vec::new();
        for s in spans {
            native::encode(s, &mut batch);
            if batch.len() >= self.config.batch_bytes {
                self.send(&batch)?;
                stats.batches += 1;
                batch.clear();
            }
        }
        if !batch.is_empty() {
            self.send(&batch)?;
            stats.batches += 1;
        }
        Ok(())
    }
}

fn add(stats: &mut PassStats, report: &LogJoinReport) {
    stats.plain_requests += report.requests as u64;
    stats.plain_requests_joined += report.joined as u64;
    stats.plain_lines_placed += report.placed as u64;
}
