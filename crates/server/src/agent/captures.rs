//! Capture directories followed (`causeway agent --captures DIR`): the socket calls of
//! the host's processes under `causeway capture`.
//!
//! By default each pass sends what every log gained to the collector's
//! `/v1/captures` (pieces of at most [`PIECE_BYTES`]), where the server infers and joins
//! the logs of every host (`crate::captures`); how much of each log the server took is
//! remembered in the checkpoint. A gap the server reports (it restarted, or let an idle
//! log go) is filled from the offset it expects; a full window is left for the next pass.
//!
//! With `infer_here` (and `join`, the query API), the agent infers them itself, a window at a time
//! (`causeway_blackbox::tail`) as the logs grow: every pass hands over the paths that
//! began since the last, more than [`super::SETTLE`] ago (their messages captured, the
//! instrumented spans of the same requests exported), joined to the traces the query API
//! holds for their time (`causeway_blackbox::join`, as `causeway infer --join`). Where the
//! windows reached is remembered in the checkpoint: a restart takes up from there (a first
//! run, from the captures' start).

use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::Path;
use std::time::Duration;

use causeway_blackbox::infer::Options;
use causeway_blackbox::join::join;
use causeway_blackbox::logs::{log_files, LogError};
use causeway_blackbox::tail::CaptureTail;
use causeway_model::Source;

use super::plain::record_delays;
use super::{Agent, AgentError, PassStats};
use crate::captures::NODE_NAMES_HEADER;
use crate::now_ns;

impl Agent {
    /// A tail over the configured capture directories, from where the checkpoint says
    /// the last run stopped; none without capture directories.
    pub(super) fn capture_tail(&self) -> Option<CaptureTail> {
        if self.config.captures.is_empty() || !self.config.infer_here {
            return None;
        }
        // The agent's own exports (to the collector) are not the system's requests.
        let ignore_ports = port_of(&self.config.collector).into_iter().collect();
        Some(CaptureTail::new(
            self.config.captures.clone(),
            self.config.node_names.clone(),
            Options {
                ignore_ports,
                ..Options::default()
            },
            self.checkpoint.captures_from,
        ))
    }

    /// Sends what the capture logs gained to the server, or (with `infer_here`) infers
    /// it and ships the paths that began up to `settle` ago (joined, with `join`).
    pub(super) fn ship_captures(
        &mut self,
        settle: Duration,
        stats: &mut PassStats,
    ) -> Result<(), AgentError> {
        if !self.config.infer_here {
            return self.send_capture_logs(stats);
        }
        let to = now_ns().saturating_sub(settle.as_nanos() as u64);
        let Some(tail) = self.captures.as_mut() else {
            return Ok(());
        };
        let before = tail.from();
        let began = std::time::Instant::now();
        let window = tail.settle(to).map_err(|e| AgentError::Io {
            action: "read capture directory",
            path: self.config.captures.first().cloned().unwrap_or_default(),
            source: std::io::Error::other(e),
        })?;
        let from = tail.from();
        stats.capture_us += began.elapsed().as_micros() as u64;
        let Some(window) = window else {
            return Ok(());
        };
        stats.capture_messages += window.messages as u64;
        for (log, what) in &window.damaged {
            tracing::warn!(log = %log.display(), %what, "capture log");
            stats.damaged += 1;
        }
        let shipped = self.ship_window(window.spans, stats);
        if let Err(e) = shipped {
            // Taken again on the next pass (its records are still held).
            if let Some(tail) = self.captures.as_mut() {
                tail.rewind(before);
            }
            return Err(e);
        }
        stats.inferred_paths += window.starts.len() as u64;
        // Only once shipped: a restart after a failure takes the window again.
        self.checkpoint.captures_from = from;
        self.save()?;
        record_delays(&mut self.capture_delays, &window.starts);
        Ok(())
    }

    /// Sends each capture log's new bytes to the server.
    fn send_capture_logs(&mut self, stats: &mut PassStats) -> Result<(), AgentError> {
        let mut files = Vec::new();
        for dir in &self.config.captures {
            match log_files(dir) {
                Ok(found) => files.extend(found),
                // Not made yet: its processes have not started.
                Err(LogError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(AgentError::Io {
                        action: "read capture directory",
                        path: dir.clone(),
                        source: std::io::Error::other(e),
                    })
                }
            }
        }
        // Logs removed (by their owner) are forgotten.
        let before = self.checkpoint.capture_offsets.len();
        self.checkpoint
            .capture_offsets
            .retain(|path, _| files.contains(path));
        let mut changed = before != self.checkpoint.capture_offsets.len();
        for path in files {
            let offset = self
                .checkpoint
                .capture_offsets
                .get(&path)
                .copied()
                .unwrap_or(0);
            let sent = self.send_capture_log(&path, offset, stats);
            let (reached, outcome) = match sent {
                Ok(reached) => (reached, Ok(())),
                Err((reached, e)) => (reached, Err(e)),
            };
            if reached != offset {
                self.checkpoint.capture_offsets.insert(path, reached);
                changed = true;
            }
            if let Err(e) = outcome {
                if changed {
                    self.save()?;
                }
                return match e {
                    Sent::Full => {
                        // The server's window is full: the rest goes next pass.
                        stats.capture_refused += 1;
                        Ok(())
                    }
                    Sent::Failed(e) => Err(e),
                    Sent::Gap(expected) => Err(AgentError::Collector {
                        url: self.config.collector.clone(),
                        reason: format!("the server expects offset {expected} first"),
                    }),
                };
            }
        }
        if changed {
            self.save()?;
        }
        Ok(())
    }

    /// Sends `path`'s bytes from `offset` on; how far the server took them, and why it
    /// stopped short of the end.
    fn send_capture_log(
        &self,
        path: &Path,
        mut offset: u64,
        stats: &mut PassStats,
    ) -> Result<u64, (u64, Sent)> {
        let failed = |offset: u64, e: AgentError| (offset, Sent::Failed(e));
        let mut file = std::fs::File::open(path)
            .map_err(|e| failed(offset, io_error("read capture log", path, e)))?;
        let len = file
            .metadata()
            .map_err(|e| failed(offset, io_error("read capture log", path, e)))?
            .len();
        if offset > len {
            // A shorter file under the same name is another log.
            offset = 0;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut piece = Vec::new();
        // Gaps filled in a row: a server that keeps asking for other bytes is not followed
        // round and round.
        let mut gaps = 0;
        while offset < len {
            piece.clear();
            file.seek(SeekFrom::Start(offset))
                .and_then(|_| file.by_ref().take(PIECE_BYTES).read_to_end(&mut piece))
                .map_err(|e| failed(offset, io_error("read capture log", path, e)))?;
            if piece.is_empty() {
                break;
            }
            match self.post_piece(&name, offset, &piece) {
                Ok(next) => {
                    stats.capture_bytes += piece.len() as u64;
                    offset = next;
                    gaps = 0;
                }
                Err(Sent::Gap(expected)) if gaps < 2 => {
                    offset = expected;
                    gaps += 1;
                }
                Err(Sent::Gap(expected)) => {
                    let e = AgentError::Collector {
                        url: self.config.collector.clone(),
                        reason: format!(
                            "asked again for {name} from offset {expected}: not sent this pass"
                        ),
                    };
                    return Err(failed(offset, e));
                }
                Err(other) => return Err((offset, other)),
            }
        }
        Ok(offset)
    }

    /// Posts one piece of a capture log: the offset the server takes the next from.
    fn post_piece(&self, name: &str, offset: u64, piece: &[u8]) -> Result<u64, Sent> {
        let url = format!(
            "{}/v1/captures",
            self.config.collector.trim_end_matches('/')
        );
        let fail = |reason: String| {
            Sent::Failed(AgentError::Collector {
                url: url.clone(),
                reason,
            })
        };
        // ureq percent-encodes query values.
        let mut req = self
            .http
            .post(&url)
            .query("log", name)
            .query("offset", offset.to_string())
            .header("content-type", "application/octet-stream");
        if let Some(host) = &self.config.host {
            req = req.query("host", host);
        }
        if let Some(t) = &self.config.token {
            req = req.header("authorization", &format!("Bearer {t}"));
        }
        if !self.config.node_names.is_empty() {
            let names = serde_json::to_string(&self.config.node_names).unwrap_or_default();
            req = req.header(NODE_NAMES_HEADER, &names);
        }
        let mut resp = req.send(piece).map_err(|e| fail(e.to_string()))?;
        let status = resp.status().as_u16();
        let body = resp.body_mut().read_to_string().unwrap_or_default();
        let field = |key: &str| {
            serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get(key)?.as_u64())
        };
        match (status, field("next"), field("expected")) {
            (200, Some(next), _) => Ok(next),
            (409, _, Some(expected)) => Err(Sent::Gap(expected)),
            (503, _, _) => Err(Sent::Full),
            _ => Err(fail(format!("answered {status}: {}", body.trim()))),
        }
    }

    /// Ships a window's inferred spans, joined to the instrumented traces with `join`.
    fn ship_window(
        &mut self,
        mut spans: Vec<causeway_model::Span>,
        stats: &mut PassStats,
    ) -> Result<(), AgentError> {
        if let Some(host) = &self.config.host {
            // Captured processes carry the host their capture recorded; their peers none.
            for s in spans.iter_mut().filter(|s| !s.host.is_empty()) {
                s.host = host.as_str().into();
            }
        }
        if spans.is_empty() {
            return Ok(());
        }
        if let Some(api) = self.config.join.clone() {
            let instrumented: Vec<_> = self
                .spans_around(&api, &spans, super::JOIN_LOOKBACK_NS)?
                .into_iter()
                .filter(|s| !matches!(s.source, Source::Inferred { .. }))
                .collect();
            let joined = join(spans, &instrumented);
            stats.inferred_paths_joined += joined.report.joined as u64;
            spans = joined.spans;
        }
        self.ship_spans(&spans, stats)
    }

    /// How long after they began the paths inferred since the last call were shipped (ns).
    pub fn take_capture_delays(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.capture_delays)
    }
}

/// Bytes of a capture log sent in one request (well under the server's body limit).
const PIECE_BYTES: u64 = 4 << 20;

/// Why a piece was not taken.
enum Sent {
    /// The server needs the log's bytes from this offset first.
    Gap(u64),
    /// The server's window is full.
    Full,
    Failed(AgentError),
}

fn io_error(action: &'static str, path: &Path, source: std::io::Error) -> AgentError {
    AgentError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The port of an address such as `http://127.0.0.1:4318`.
fn port_of(address: &str) -> Option<u16> {
    let rest = address.split_once("://").map_or(address, |(_, r)| r);
    let authority = rest.split('/').next()?;
    authority.rsplit_once(':')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_collector_port_is_read_from_its_address() {
        assert_eq!(super::port_of("http://127.0.0.1:4318"), Some(4318));
        assert_eq!(super::port_of("http://[::1]:14318/"), Some(14318));
        assert_eq!(super::port_of("collector:9000"), Some(9000));
        assert_eq!(super::port_of("http://collector/"), None);
    }
}
