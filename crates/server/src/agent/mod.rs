//! The agent: tails the span-log directories the `causeway` library writes on a host,
//! ships their records to a collector in native batches, and remembers how far it got.
//!
//! Each pass reads every segment (under span-log roots holding one directory per process, or
//! segment files directly), decodes from the remembered offset, applies Dapper's
//! second-stage sampling and posts native batches of about 4 MiB to `/v1/native`. The
//! sampling keeps a whole trace or none of it: a trace is shipped iff a splitmix hash of its
//! id falls under `--keep`, the same decision on every host.
//!
//! Positions live in a JSON checkpoint file (`causeway-agent.checkpoint`: segment path to
//! byte offset), rewritten through a `.tmp` file, fsync and rename once all of a file's new
//! records are acknowledged, so a restart resumes where the last acknowledged file ended; a
//! failure part way re-sends those batches on the next pass, which the store's dedup by id
//! absorbs. A torn tail in a process's newest segment is left for its writer to finish; in
//! an older one it is skipped. Fully shipped segments older than `--retain` (1 h) are
//! deleted. Every pass reads each retained segment file whole, shipped or not.
//!
//! With `logs` globs it also follows application log files (`logs`): their lines that name
//! a trace go to the collector as log records of their spans; with `join`, the lines of
//! files that name none are stitched and joined to the traces of their requests (`plain`).
//! With `captures` it follows capture directories: their logs' bytes go to the collector
//! as they grow, and the server infers and joins them (`crate::captures`); with
//! `infer_here`, the agent infers them itself and sends the paths joined to the traces of
//! their requests (`captures`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

mod captures;
mod logs;
mod plain;

pub use plain::SETTLE;

use causeway::sinks::segment::segment_files;
use causeway_model::codec::native;
use causeway_model::{Span, TraceId};
use serde::{Deserialize, Serialize};

/// How the agent runs.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// Span-log roots: each holds one directory per process, or segment files directly.
    pub dirs: Vec<PathBuf>,
    /// The collector's ingest base address, e.g. `http://127.0.0.1:4318`.
    pub collector: String,
    /// Where positions are remembered.
    pub checkpoint: PathBuf,
    /// Fraction of traces kept (Dapper's second-stage coefficient), 0 to 1.
    pub keep: f64,
    /// Shipped segments whose last write is older than this are deleted.
    pub retention: Duration,
    /// Bytes of records per batch.
    pub batch_bytes: usize,
    /// Bearer token for the collector.
    pub token: Option<String>,
    /// Application log files to follow (glob patterns, `/var/log/shop/*.log*`).
    pub logs: Vec<String>,
    /// The query API the lines of followed files that name no trace, and the paths
    /// inferred from captures, are joined against (placed in the traces of their
    /// requests); none: they are not.
    pub join: Option<String>,
    /// Capture directories (`causeway capture --out`) followed: their logs are sent to
    /// the server as they grow (with `join`, their paths are inferred here).
    pub captures: Vec<std::path::PathBuf>,
    /// Node names for captured processes, as `causeway infer --names` gives them: a
    /// process whose command line contains the text (second) is the node named (first).
    pub node_names: Vec<(String, String)>,
    /// The host name the spans of captured processes carry, instead of the one their
    /// capture recorded.
    pub host: Option<String>,
    /// Infer the captures here and ship their paths joined against `join`, rather than
    /// send the logs to the server (which reconciles every host's).
    pub infer_here: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            dirs: Vec::new(),
            collector: "http://127.0.0.1:4318".into(),
            checkpoint: PathBuf::from("causeway-agent.checkpoint"),
            keep: 1.0,
            retention: Duration::from_secs(3600),
            batch_bytes: 4 << 20,
            token: None,
            logs: Vec::new(),
            join: None,
            captures: Vec::new(),
            node_names: Vec::new(),
            host: None,
            infer_here: false,
        }
    }
}

/// Why a pass stopped.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// A file could not be read, written or removed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The collector did not take a batch; it is retried on the next pass.
    #[error("collector {url}: {reason}")]
    Collector {
        /// Where the batch went.
        url: String,
        /// What went wrong.
        reason: String,
    },
}

fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> AgentError + 'a {
    move |source| AgentError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PassStats {
    /// Spans shipped.
    pub shipped: u64,
    /// Spans dropped by second-stage sampling.
    pub sampled_out: u64,
    /// Damaged regions skipped (a torn tail the writer abandoned, corrupt bytes).
    pub damaged: u64,
    /// Segment files deleted by retention.
    pub deleted: u64,
    /// Batches sent.
    pub batches: u64,
    /// Log-file lines read.
    pub log_lines: u64,
    /// Of those, lines that named a trace, shipped as log records.
    pub log_records: u64,
    /// Requests stitched from lines that named no trace, joined or not (with `join`).
    pub plain_requests: u64,
    /// Of those, joined to a trace.
    pub plain_requests_joined: u64,
    /// Lines of those placed on spans.
    pub plain_lines_placed: u64,
    /// Paths inferred from captures and shipped.
    pub inferred_paths: u64,
    /// Of those, joined to an instrumented trace (with `join`).
    pub inferred_paths_joined: u64,
    /// Messages linked to infer them (the window's and its context's).
    pub capture_messages: u64,
    /// Microseconds spent reading the captures and inferring.
    pub capture_us: u64,
    /// Bytes of capture logs sent to the server (without `join`).
    pub capture_bytes: u64,
    /// Pieces of capture logs the server had no room for (sent again next pass).
    pub capture_refused: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Checkpoint {
    /// Byte offset up to which each segment has been shipped.
    offsets: BTreeMap<PathBuf, u64>,
    /// How far each followed log file has been read, by its identity (`device:inode`), so a
    /// file renamed by rotation keeps its place.
    #[serde(default)]
    logs: BTreeMap<String, logs::Position>,
    /// Paths inferred from captures that began before this (ns) were shipped.
    #[serde(default)]
    captures_from: u64,
    /// How much of each capture log the server took (without `join`).
    #[serde(default)]
    capture_offsets: BTreeMap<PathBuf, u64>,
}

/// How far before a window of captured paths or stitched log requests the API is asked
/// for the traces that began then: the instrumented spans of a request began with it, no
/// further back than a path's context reaches (a request that reached the captured or
/// logging process later than that after it began is not joined). The API scans every
/// trace begun in the window, so each second more costs the server that second's traces
/// on every pass.
pub(super) const JOIN_LOOKBACK_NS: u64 = causeway_blackbox::tail::CONTEXT_NS + 5_000_000_000;

/// The query API's path for the native export of the traces begun from `lookback_ns`
/// before the first of `spans` to the end of the last (what a join of `spans` needs);
/// none without spans.
pub fn export_window(spans: &[Span], lookback_ns: u64) -> Option<String> {
    let start = spans.iter().map(|s| s.start).min()?;
    let end = spans.iter().map(|s| s.end).max()?;
    Some(format!(
        "/api/export?format=native&start={}&end={end}",
        start.saturating_sub(lookback_ns)
    ))
}

/// True when Dapper's second-stage sampling keeps this trace: the decision depends only on
/// the id, so every agent and collector agrees.
pub fn keeps(trace: TraceId, coefficient: f64) -> bool {
    if coefficient >= 1.0 {
        return true;
    }
    if coefficient <= 0.0 {
        return false;
    }
    // splitmix64 over both halves: ids from weak generators still spread evenly.
    let v = trace.get();
    let mut x = (v as u64) ^ ((v >> 64) as u64).rotate_left(29);
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x as f64) < coefficient * (u64::MAX as f64)
}

/// An agent with its checkpoint loaded.
pub struct Agent {
    config: AgentConfig,
    checkpoint: Checkpoint,
    http: ureq::Agent,
    /// Followed files whose lines name no trace, by identity, with `join`.
    tails: std::collections::HashMap<String, causeway_logflow::tail::Tail>,
    /// How long after they began joined requests were shipped, until taken.
    join_delays: Vec<u64>,
    /// Whether a stitching report was sent (the first window's, as `causeway logs`'s).
    report_sent: bool,
    /// The capture directories followed, with `captures`.
    captures: Option<causeway_blackbox::tail::CaptureTail>,
    /// How long after they began inferred paths were shipped, until taken.
    capture_delays: Vec<u64>,
}

impl Agent {
    /// Loads the checkpoint (an absent one means nothing shipped yet).
    pub fn new(config: AgentConfig) -> Result<Agent, AgentError> {
        let checkpoint = match std::fs::read(&config.checkpoint) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| AgentError::Io {
                action: "read checkpoint",
                path: config.checkpoint.clone(),
                source: std::io::Error::other(e),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Checkpoint::default(),
            Err(e) => return Err(io("read checkpoint", &config.checkpoint)(e)),
        };
        let http = ureq::Agent::new_with_config(
            ureq::config::Config::builder()
                .timeout_global(Some(Duration::from_secs(30)))
                .http_status_as_error(false)
                .build(),
        );
        let mut agent = Agent {
            config,
            checkpoint,
            http,
            tails: std::collections::HashMap::new(),
            join_delays: Vec::new(),
            report_sent: false,
            captures: None,
            capture_delays: Vec::new(),
        };
        agent.captures = agent.capture_tail();
        Ok(agent)
    }

    /// Every segment file under the roots, grouped by process directory, oldest first.
    fn segment_dirs(&self) -> Result<Vec<Vec<PathBuf>>, AgentError> {
        let mut out = Vec::new();
        for root in &self.config.dirs {
            let mut dirs = vec![root.clone()];
            let entries = match std::fs::read_dir(root) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(io("read span-log directory", root)(e)),
            };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    dirs.push(entry.path());
                }
            }
            for d in dirs {
                let files = segment_files(&d).map_err(io("read span-log directory", &d))?;
                if !files.is_empty() {
                    out.push(files);
                }
            }
        }
        Ok(out)
    }

    /// Ships everything new once; returns what it did. A collector failure stops the pass
    /// with the position at the last acknowledged batch. Lines joined to traces (`join`)
    /// go once their requests are [`SETTLE`] old.
    pub fn run_once(&mut self) -> Result<PassStats, AgentError> {
        self.pass(SETTLE)
    }

    /// A last pass: as [`Agent::run_once`], joining every request read (the processes
    /// writing the logs have stopped).
    pub fn finish(&mut self) -> Result<PassStats, AgentError> {
        self.pass(Duration::ZERO)
    }

    fn pass(&mut self, settle: Duration) -> Result<PassStats, AgentError> {
        let mut stats = PassStats::default();
        for files in self.segment_dirs()? {
            let newest = files.len() - 1;
            for (i, path) in files.iter().enumerate() {
                self.ship_file(path, i == newest, &mut stats)?;
            }
        }
        self.expire(&mut stats)?;
        self.ship_logs(&mut stats)?;
        self.join_tails(settle, &mut stats)?;
        self.ship_captures(settle, &mut stats)?;
        Ok(stats)
    }

    fn ship_file(
        &mut self,
        path: &Path,
        newest: bool,
        stats: &mut PassStats,
    ) -> Result<(), AgentError> {
        let bytes = std::fs::read(path).map_err(io("read segment", path))?;
        let mut offset = self.checkpoint.offsets.get(path).copied().unwrap_or(0) as usize;
        if offset > bytes.len() {
            // The file was replaced by a shorter one: start over.
            offset = 0;
        }
        if offset == bytes.len() {
            return Ok(());
        }
        let decoded = native::decode_stream(&bytes[offset..]);
        let mut end = offset + decoded.complete;
        for p in &decoded.problems {
            match p {
                native::Problem::TornTail { .. } if newest => {} // may still be completed
                native::Problem::TornTail { .. } => {
                    tracing::warn!(segment = %path.display(), problem = %p, "abandoned torn record skipped");
                    stats.damaged += 1;
                    end = bytes.len();
                }
                _ => {
                    tracing::warn!(segment = %path.display(), problem = %p, "damaged span-log record skipped");
                    stats.damaged += 1;
                }
            }
        }
        let (kept, dropped): (Vec<_>, Vec<_>) = decoded
            .spans
            .into_iter()
            .partition(|s| keeps(s.trace_id, self.config.keep));
        stats.sampled_out += dropped.len() as u64;
        let mut batch = Vec::with_capacity(self.config.batch_bytes.min(bytes.len()) + 1024);
        let mut count = 0u64;
        for span in &kept {
            native::encode(span, &mut batch);
            count += 1;
            if batch.len() >= self.config.batch_bytes {
                self.send(&batch)?;
                stats.batches += 1;
                stats.shipped += count;
                batch.clear();
                count = 0;
            }
        }
        if !batch.is_empty() {
            self.send(&batch)?;
            stats.batches += 1;
            stats.shipped += count;
        }
        // Position advances only once the whole file's new records are acknowledged; a
        // failure part way re-sends those batches, which the store's by-id dedup absorbs.
        self.checkpoint
            .offsets
            .insert(path.to_path_buf(), end as u64);
        self.save()
    }

    fn send(&self, batch: &[u8]) -> Result<(), AgentError> {
        self.post("/v1/native", crate::NATIVE_CONTENT_TYPE, batch)
    }

    /// Posts `body` to the collector's `path`.
    fn post(&self, path: &str, content_type: &str, body: &[u8]) -> Result<(), AgentError> {
        let url = format!("{}{path}", self.config.collector.trim_end_matches('/'));
        let mut req = self.http.post(&url).header("content-type", content_type);
        if let Some(t) = &self.config.token {
            req = req.header("authorization", &format!("Bearer {t}"));
        }
        let fail = |reason: String| AgentError::Collector {
            url: url.clone(),
            reason,
        };
        let mut resp = req.send(body).map_err(|e| fail(e.to_string()))?;
        let status = resp.status().as_u16();
        if status == 200 {
            return Ok(());
        }
        let body = resp.body_mut().read_to_string().unwrap_or_default();
        Err(fail(format!("answered {status}: {}", body.trim())))
    }

    fn save(&self) -> Result<(), AgentError> {
        let path = &self.config.checkpoint;
        let bytes = serde_json::to_vec_pretty(&self.checkpoint).map_err(|e| AgentError::Io {
            action: "encode checkpoint",
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        crate::snapshot::save(path, &bytes).map_err(io("write checkpoint", path))
    }

    /// Deletes fully shipped segments whose last write is older than the retention age.
    fn expire(&mut self, stats: &mut PassStats) -> Result<(), AgentError> {
        let now = SystemTime::now();
        let mut gone = Vec::new();
        for (path, &offset) in &self.checkpoint.offsets {
            let Ok(meta) = std::fs::metadata(path) else {
                gone.push(path.clone());
                continue;
            };
            let old = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .is_some_and(|age| age >= self.config.retention);
            if old && offset >= meta.len() {
                std::fs::remove_file(path).map_err(io("delete shipped segment", path))?;
                stats.deleted += 1;
                gone.push(path.clone());
            }
        }
        if !gone.is_empty() {
            for p in gone {
                self.checkpoint.offsets.remove(&p);
            }
            self.save()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_stage_sampling_keeps_about_the_coefficient_and_is_stable() {
        let ids: Vec<TraceId> = (1..=20_000u128)
            .map(|i| {
                TraceId::new(i.wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835)).unwrap()
            })
            .collect();
        let kept = ids.iter().filter(|&&id| keeps(id, 0.1)).count();
        assert!(
            (1_700..2_300).contains(&kept),
            "kept {kept} of 20000 at 0.1"
        );
        // Sequential (weakly random) ids spread too.
        let seq = (1..=20_000u128)
            .filter(|&i| keeps(TraceId::new(i).unwrap(), 0.5))
            .count();
        assert!((9_000..11_000).contains(&seq), "kept {seq} of 20000 at 0.5");
        for &id in &ids[..100] {
            assert_eq!(keeps(id, 0.3), keeps(id, 0.3));
            // A trace kept at a lower coefficient is kept at every higher one.
            if keeps(id, 0.2) {
                assert!(keeps(id, 0.6));
            }
        }
        assert!(ids.iter().all(|&id| keeps(id, 1.0)));
        assert!(!ids.iter().any(|&id| keeps(id, 0.0)));
    }
}
