//! Capture logs sent by agents (`causeway agent --captures DIR`), joined by the server.
//! `POST /v1/captures?log=NAME&offset=N[&host=HOST]` on the ingest listener takes a log's
//! bytes from `offset` on into one [`CaptureTail`] for every host, so a message between
//! two captured hosts is reconciled from both ends. A pass a second infers the window
//! that settled ([`SETTLE`] ago), asks the store for the traces begun from [`LOOKBACK`]
//! before its paths to their end, joins the paths to them (`causeway_blackbox::join`, as
//! `causeway infer --join`) and stores the result; where the windows reached is kept in
//! `DATA/captures.json`, so a restart takes up from there; each log's header and open
//! connections are kept in `DATA/capture-logs.json` (every [`HELD_LOGS_EVERY`] passes and
//! at shutdown), so its sender goes on from the first data still held, not from the log's
//! start. `GET /api/captures` says what is held and how fresh the joins are.
//!
//! Bounds: a body is an ingest body (size, time, receive budget); the records held are at
//! most `--max-capture-bytes` (a piece that finds them full is answered 503, and the next
//! pass lets the window's oldest go) across at most `--max-capture-logs` logs. A piece
//! past what was taken of its log is answered 409 with the offset expected; a log whose
//! bytes are not records is named in the status and followed no further.

use crate::now_ns;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{RawQuery, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use causeway_blackbox::infer::Options;
use causeway_blackbox::join::join;
use causeway_blackbox::tail::{CaptureTail, Gap, HeldLog, Window};
use causeway_model::{Source, Span};
use causeway_store::{Fields, TimeWindow};
use serde::{Deserialize, Serialize};

use crate::params::{pairs, param};
use crate::receive::{receive, Received, Rules};
use crate::work::blocking;
use crate::{ApiError, AppState};

/// How long after a path began it is inferred: its messages captured and sent, the
/// instrumented spans of its request exported and stored.
pub const SETTLE: Duration = Duration::from_secs(3);

/// How often a pass runs.
const PASS_EVERY: Duration = Duration::from_secs(1);

/// How far before a window's paths the store is asked for the traces begun then: the
/// instrumented calls into a captured process began with their request, no further back
/// than a path's context reaches.
const LOOKBACK: Duration = Duration::from_secs(15);

/// The header naming nodes for the logs a request sends: a JSON list of `[name, text]`
/// rules, as `causeway infer --names` reads them.
pub const NODE_NAMES_HEADER: &str = "x-causeway-node-names";

/// The rules one sender may add.
const MAX_NAME_RULES: usize = 1024;

/// Freshness and pass cost samples kept (the latest).
const SAMPLES: usize = 1 << 16;

/// Damaged or late logs named in the status (the first ones).
const DAMAGED_NAMED: usize = 100;

/// The file in the data directory saying where the windows reached.
const CHECKPOINT_FILE: &str = "captures.json";

/// The file in the data directory holding what each log needs to be taken up after a
/// restart without its sender starting it over (`CaptureTail::held_logs`).
const HELD_LOGS_FILE: &str = "capture-logs.json";

/// Passes (a second each) between two saves of the held logs: their open connections' records may be
/// megabytes; saved less often, a restart has their senders send a little more again.
const HELD_LOGS_EVERY: u64 = 10;

/// The capture tail every agent feeds, and what its passes did.
pub(crate) struct Captures {
    tail: Mutex<CaptureTail>,
    status: Mutex<Status>,
    checkpoint: PathBuf,
    held_logs: PathBuf,
}

#[derive(Serialize, Deserialize, Default)]
struct Checkpoint {
    from: u64,
}

/// A held log as saved: its records in base64.
#[derive(Serialize, Deserialize)]
struct SavedLog {
    name: PathBuf,
    host: Option<String>,
    offset: u64,
    records: String,
}

impl SavedLog {
    fn of(log: HeldLog) -> SavedLog {
        SavedLog {
            name: log.name,
            host: log.host,
            offset: log.offset,
            records: BASE64.encode(&log.records),
        }
    }

    fn held(self) -> Option<HeldLog> {
        Some(HeldLog {
            name: self.name,
            host: self.host,
            offset: self.offset,
            records: BASE64.decode(self.records).ok()?,
        })
    }
}

/// What the passes did, kept between them.
#[derive(Default)]
struct Status {
    from: u64,
    received_bytes: u64,
    refused: u64,
    passes: u64,
    paths: u64,
    paths_joined: u64,
    spans_stored: u64,
    /// The latest passes that linked messages: microseconds taken, messages linked.
    costs: VecDeque<(u64, u64)>,
    /// How long after they began the latest paths were stored (ns).
    delays: VecDeque<u64>,
    damaged: Vec<Damaged>,
    last_error: Option<String>,
}

/// What `GET /api/captures` answers: what is held, what the passes did, how fresh the
/// joins are and what it cost.
#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct CaptureReport {
    /// Logs held.
    pub logs: usize,
    /// Bytes of records held.
    pub held_bytes: usize,
    /// Paths that began before this (ns) were inferred and stored.
    pub from: u64,
    /// Bytes of logs received.
    pub received_bytes: u64,
    /// Pieces refused: a gap before them, or no room.
    pub refused: u64,
    /// Passes that inferred a window.
    pub passes: u64,
    /// Paths inferred and stored.
    pub paths: u64,
    /// Of those, joined to instrumented traces.
    pub paths_joined: u64,
    /// Spans stored (inferred, and the parent links the joins made).
    pub spans_stored: u64,
    /// How long after they began the latest paths were stored (ms): the median.
    pub freshness_p50_ms: f64,
    /// The same, 99th percentile.
    pub freshness_p99_ms: f64,
    /// The latest passes that linked messages.
    pub inferring_passes: usize,
    /// The median time one of them took reading and inferring (ms).
    pub pass_p50_ms: f64,
    /// The longest.
    pub pass_max_ms: f64,
    /// The median of the messages each linked.
    pub pass_messages_p50: u64,
    /// Logs whose bytes are not records, and where.
    pub damaged: Vec<Damaged>,
    /// Logs whose data records arrived stamped before the window (the most first): the
    /// paths they begin are not joined.
    pub late: Vec<LateLog>,
    /// Why the last pass failed, if it did.
    pub last_error: Option<String>,
}

/// A log whose data records arrived stamped before the window: its host's clock is
/// behind the server's (or its agent fell behind) by more than [`SETTLE`], or, for the
/// records older than the window's context, it was sent again from its start.
#[derive(Serialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct LateLog {
    /// The log's name.
    pub log: String,
    /// Records kept only as the context of later paths.
    pub records: u64,
    /// Records older than the window's context, not kept.
    pub skipped: u64,
    /// How far before the window the latest of them was stamped (ms).
    pub behind_ms: f64,
}

/// A log found unreadable.
#[derive(Serialize, Clone, Debug)]
pub struct Damaged {
    /// The log's name.
    pub log: String,
    /// Where and why.
    pub what: String,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Captures {
    /// A tail naming nodes by `names`, leaving out the traffic to `ignore_ports` (the
    /// server's own listeners: captured services export their spans there), from where
    /// the data directory's checkpoint says the last run stopped.
    pub(crate) fn open(
        data_dir: &Path,
        names: Vec<(String, String)>,
        ignore_ports: Vec<u16>,
    ) -> Captures {
        let checkpoint = data_dir.join(CHECKPOINT_FILE);
        let from = std::fs::read(&checkpoint)
            .ok()
            .and_then(|b| serde_json::from_slice::<Checkpoint>(&b).ok())
            .map_or(0, |c| c.from);
        let options = Options {
            ignore_ports,
            ..Options::default()
        };
        let mut tail = CaptureTail::new(Vec::new(), names, options, from);
        // Logs whose records do not read are started over by their senders.
        let held_logs = data_dir.join(HELD_LOGS_FILE);
        let saved = std::fs::read(&held_logs)
            .ok()
            .and_then(|b| serde_json::from_slice::<Vec<SavedLog>>(&b).ok())
            .unwrap_or_default();
        for log in saved.into_iter().filter_map(SavedLog::held) {
            tail.resume(log);
        }
        Captures {
            tail: Mutex::new(tail),
            status: Mutex::new(Status {
                from,
                ..Status::default()
            }),
            checkpoint,
            held_logs,
        }
    }

    /// What is held and what the passes did.
    pub(crate) fn report(&self) -> CaptureReport {
        // The tail before the status, as a piece takes them.
        let (logs, held_bytes, mut late) = {
            let tail = lock(&self.tail);
            let late: Vec<LateLog> = tail
                .late()
                .map(|(log, l)| LateLog {
                    log: log.display().to_string(),
                    records: l.records,
                    skipped: l.skipped,
                    behind_ms: l.behind_ns as f64 / 1e6,
                })
                .collect();
            (tail.logs(), tail.held_bytes(), late)
        };
        late.sort_by_key(|l| std::cmp::Reverse(l.records + l.skipped));
        late.truncate(DAMAGED_NAMED);
        let status = lock(&self.status);
        let delays: Vec<u64> = status.delays.iter().copied().collect();
        let micros: Vec<u64> = status.costs.iter().map(|c| c.0).collect();
        let messages: Vec<u64> = status.costs.iter().map(|c| c.1).collect();
        CaptureReport {
            logs,
            held_bytes,
            from: status.from,
            received_bytes: status.received_bytes,
            refused: status.refused,
            passes: status.passes,
            paths: status.paths,
            paths_joined: status.paths_joined,
            spans_stored: status.spans_stored,
            freshness_p50_ms: quantile(delays.clone(), 0.5) as f64 / 1e6,
            freshness_p99_ms: quantile(delays, 0.99) as f64 / 1e6,
            inferring_passes: micros.len(),
            pass_p50_ms: quantile(micros.clone(), 0.5) as f64 / 1e3,
            pass_max_ms: micros.iter().max().copied().unwrap_or(0) as f64 / 1e3,
            pass_messages_p50: quantile(messages, 0.5),
            damaged: status.damaged.clone(),
            late,
            last_error: status.last_error.clone(),
        }
    }

    fn save(&self, from: u64) -> std::io::Result<()> {
        crate::snapshot::save(&self.checkpoint, &serde_json::to_vec(&Checkpoint { from })?)
    }

    /// Saves what each log fed needs to be taken up after a restart.
    fn save_held_logs(&self) -> std::io::Result<()> {
        let logs: Vec<SavedLog> = lock(&self.tail)
            .held_logs()
            .into_iter()
            .map(SavedLog::of)
            .collect();
        crate::snapshot::save(&self.held_logs, &serde_json::to_vec(&logs)?)
    }
}

/// The ingest listener's routes.
pub(crate) fn ingest_routes() -> Router<Arc<AppState>> {
    Router::new().route("/v1/captures", post(take_piece))
}

/// The query API's routes.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/api/captures", get(status))
}

/// Where a piece of a log goes: its name, where it starts, the host its sender names.
struct Piece {
    log: PathBuf,
    offset: u64,
    host: Option<String>,
    names: Vec<(String, String)>,
}

impl Piece {
    fn of(query: Option<String>, headers: &HeaderMap) -> Result<Piece, ApiError> {
        let params = pairs(query)?;
        let bad = |m: &str| ApiError::BadRequest(m.to_string());
        let log = param(&params, "log")
            .ok_or_else(|| bad("parameter log: required (the capture log's file name)"))?;
        if log.is_empty() || log.len() > 255 {
            return Err(bad("parameter log: 1 to 255 bytes"));
        }
        let offset = param(&params, "offset")
            .ok_or_else(|| bad("parameter offset: required (where the bytes start in the log)"))?
            .parse::<u64>()
            .map_err(|e| ApiError::BadRequest(format!("parameter offset: {e}")))?;
        let host = param(&params, "host").filter(|h| !h.is_empty());
        if host.is_some_and(|h| h.len() > 255) {
            return Err(bad("parameter host: at most 255 bytes"));
        }
        let names = match headers.get(NODE_NAMES_HEADER) {
            None => Vec::new(),
            Some(v) => {
                let rules: Vec<(String, String)> = v
                    .to_str()
                    .ok()
                    .and_then(|v| serde_json::from_str(v).ok())
                    .ok_or_else(|| {
                        bad("header x-causeway-node-names: a JSON list of [name, text] pairs")
                    })?;
                if rules.len() > MAX_NAME_RULES {
                    return Err(ApiError::BadRequest(format!(
                        "header x-causeway-node-names: at most {MAX_NAME_RULES} rules"
                    )));
                }
                rules
            }
        };
        Ok(Piece {
            log: PathBuf::from(log),
            offset,
            host: host.map(str::to_string),
            names,
        })
    }
}

/// Takes a piece of a capture log: 200 with the offset the next piece starts at, 409 with
/// the offset expected when there is a gap before it, 503 when the window is full.
async fn take_piece(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let piece = Piece::of(query, &headers)?;
    let limits = &state.config.limits;
    let rules = Rules {
        limit: limits.max_body_bytes,
        timeout: limits.body_timeout,
        budget: &state.ingest_receiving,
    };
    let Received { bytes, held } = receive(&headers, body, rules)
        .await
        .map_err(|r| state.refused(r))?;
    let _permit = crate::receive::admit(&state)?;
    let app = state.clone();
    let fed = blocking(move || {
        let _held = held;
        let limits = &app.config.limits;
        let captures = &app.captures;
        let mut tail = lock(&captures.tail);
        let held_bytes = tail.held_bytes();
        let full = if held_bytes > limits.max_capture_bytes {
            Some(format!(
                "the capture window holds {held_bytes} bytes, over --max-capture-bytes ({}); retry after the next pass",
                limits.max_capture_bytes
            ))
        } else if !tail.holds(&piece.log) && tail.logs() >= limits.max_capture_logs {
            Some(format!(
                "{} capture logs held, the --max-capture-logs limit; retry once some are let go",
                tail.logs()
            ))
        } else {
            None
        };
        if let Some(why) = full {
            lock(&captures.status).refused += 1;
            return Ok(Err(ApiError::Unavailable(why)));
        }
        tail.add_names(&piece.names);
        let fed = tail.feed(&piece.log, piece.host.as_deref(), piece.offset, &bytes);
        drop(tail);
        let mut status = lock(&captures.status);
        match fed {
            Ok(()) => status.received_bytes += bytes.len() as u64,
            Err(_) => status.refused += 1,
        }
        Ok(Ok(fed.map(|()| piece.offset + bytes.len() as u64)))
    })
    .await?;
    match fed? {
        Ok(next) => Ok(Json(serde_json::json!({ "next": next })).into_response()),
        Err(Gap { expected }) => Ok((
            StatusCode::CONFLICT,
            Json(serde_json::json!({
                "error": format!("a gap in the log: its bytes from offset {expected} are needed first"),
                "expected": expected,
            })),
        )
            .into_response()),
    }
}

async fn status(State(state): State<Arc<AppState>>) -> Result<Json<CaptureReport>, ApiError> {
    let app = state.clone();
    Ok(Json(blocking(move || Ok(app.captures.report())).await?))
}

/// The `q` quantile of `samples` (0 without any).
fn quantile(mut samples: Vec<u64>, q: f64) -> u64 {
    samples.sort_unstable();
    let i = ((samples.len() as f64 * q) as usize).min(samples.len().saturating_sub(1));
    samples.get(i).copied().unwrap_or(0)
}

/// Keeps `sample`, the latest [`SAMPLES`].
fn keep<T>(samples: &mut VecDeque<T>, sample: T) {
    if samples.len() == SAMPLES {
        samples.pop_front();
    }
    samples.push_back(sample);
}

/// Runs a pass a second until `stopped`, then one last pass taking every path held.
pub(crate) async fn run(state: Arc<AppState>, mut stopped: tokio::sync::watch::Receiver<bool>) {
    let mut every = tokio::time::interval(PASS_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut ticks: u64 = 0;
    loop {
        let last = tokio::select! {
            _ = every.tick() => false,
            _ = stopped.wait_for(|s| *s) => true,
        };
        let settle = if last { Duration::ZERO } else { SETTLE };
        let to = now_ns().saturating_sub(settle.as_nanos() as u64);
        if let Err(e) = pass(&state, to).await {
            tracing::warn!(error = %e, "joining captures");
            lock(&state.captures.status).last_error = Some(e.to_string());
        }
        ticks += 1;
        if last || ticks.is_multiple_of(HELD_LOGS_EVERY) {
            let app = state.clone();
            let saved = blocking(move || {
                app.captures
                    .save_held_logs()
                    .map_err(|e| ApiError::Internal(e.to_string()))
            })
            .await;
            if let Err(e) = saved {
                tracing::warn!(error = %e, "saving the capture logs held");
            }
        }
        if last {
            return;
        }
    }
}

/// Infers the paths that began before `to` and since the last pass, joins them to the
/// stored traces of their time and stores them. On failure the window is taken again.
pub(crate) async fn pass(state: &Arc<AppState>, to: u64) -> Result<(), ApiError> {
    let app = state.clone();
    let settled = blocking(move || {
        let mut tail = lock(&app.captures.tail);
        if tail.logs() == 0 {
            return Ok(None);
        }
        let before = tail.from();
        let began = Instant::now();
        let window = tail
            .settle(to)
            .map_err(|e| ApiError::Internal(e.to_string()))?;
        Ok(window.map(|w| (before, tail.from(), w, began.elapsed())))
    })
    .await?;
    let Some((before, from, window, took)) = settled else {
        return Ok(());
    };
    let rewind = move |state: &AppState| lock(&state.captures.tail).rewind(before);
    let instrumented = match instrumented_around(state, &window.spans).await {
        Ok(spans) => spans,
        Err(e) => {
            rewind(state);
            return Err(e);
        }
    };
    let app = state.clone();
    blocking(move || {
        let Window {
            spans,
            starts,
            messages,
            damaged,
        } = window;
        let joined = join(spans, &instrumented);
        let stored = joined.spans.len() as u64;
        if !joined.spans.is_empty() {
            if let Err(e) = app.store.append(joined.spans) {
                rewind(&app);
                return Err(e.into());
            }
        }
        let captures = &app.captures;
        if let Err(e) = captures.save(from) {
            tracing::warn!(error = %e, path = %captures.checkpoint.display(), "saving where the capture windows reached");
        }
        let now = now_ns();
        // The tail before the status, as a piece takes them.
        let damaged_now: Vec<Damaged> = lock(&captures.tail)
            .damaged()
            .take(DAMAGED_NAMED)
            .map(|(log, what)| Damaged {
                log: log.display().to_string(),
                what: what.to_string(),
            })
            .collect();
        let mut status = lock(&captures.status);
        status.from = from;
        status.passes += 1;
        status.paths += starts.len() as u64;
        status.paths_joined += joined.report.joined as u64;
        status.spans_stored += stored;
        if messages > 0 {
            keep(&mut status.costs, (took.as_micros() as u64, messages as u64));
        }
        status.last_error = None;
        for start in starts {
            keep(&mut status.delays, now.saturating_sub(start));
        }
        for (log, what) in damaged {
            tracing::warn!(log = %log.display(), %what, "capture log");
        }
        status.damaged = damaged_now;
        Ok(())
    })
    .await
}

/// The stored spans, not inferred, of the traces begun from [`LOOKBACK`] before the first
/// of `spans` to the end of the last.
async fn instrumented_around(state: &AppState, spans: &[Span]) -> Result<Vec<Span>, ApiError> {
    let (Some(start), Some(end)) = (
        spans.iter().map(|s| s.start).min(),
        spans.iter().map(|s| s.end).max(),
    ) else {
        return Ok(Vec::new());
    };
    let window = TimeWindow {
        start: start.saturating_sub(LOOKBACK.as_nanos() as u64),
        end: end.saturating_add(1),
    };
    let store = state.store.clone();
    state
        .scans
        .run(move |deadline| {
            let found = Mutex::new(Vec::new());
            store.scan_fields(window, &Fields::All, &|t| {
                let mut found = lock(&found);
                found.extend(
                    t.spans
                        .into_iter()
                        .filter(|s| !matches!(s.source, Source::Inferred { .. })),
                );
                deadline.check()
            })?;
            Ok(found.into_inner().unwrap_or_else(|p| p.into_inner()))
        })
        .await
}
