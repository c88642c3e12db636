//! Capture directories followed (`causeway agent --captures DIR`): the socket calls of
//! the host's processes under `causeway capture`, inferred a window at a time
//! (`causeway_blackbox::tail`) as their logs grow. Every pass hands over the paths that
//! began since the last, more than [`super::SETTLE`] ago (their messages captured, the
//! instrumented spans of the same requests exported); with `join` they are joined to
//! the traces the query API holds for their time (`causeway_blackbox::join`, as
//! `causeway infer --join`), else shipped as traces of their own. Where the windows
//! reached is remembered in the checkpoint: a restart takes up from there (a first run,
//! from the captures' start).

use std::time::Duration;

use causeway_blackbox::infer::Options;
use causeway_blackbox::join::join;
use causeway_blackbox::tail::CaptureTail;
use causeway_model::Source;

use super::plain::{now_ns, record_delays};
use super::{Agent, AgentError, PassStats};

/// How far before a window's paths the API is asked for the traces that began then: the
/// instrumented calls into a captured process began with their request, no further back
/// than a path's context reaches (the API scans every trace begun in the window, so a
/// wider one costs the server each pass).
const LOOKBACK_NS: u64 = causeway_blackbox::tail::CONTEXT_NS + 5_000_000_000;

impl Agent {
    /// A tail over the configured capture directories, from where the checkpoint says
    /// the last run stopped; none without capture directories.
    pub(super) fn capture_tail(&self) -> Option<CaptureTail> {
        if self.config.captures.is_empty() {
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

    /// Infers what the captures gained, and ships the paths that began up to `settle`
    /// ago (joined, with `join`).
    pub(super) fn ship_captures(
        &mut self,
        settle: Duration,
        stats: &mut PassStats,
    ) -> Result<(), AgentError> {
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
                .spans_around(&api, &spans, LOOKBACK_NS)?
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
