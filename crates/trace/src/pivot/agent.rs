//! The process's agent: a thread that reports partial results to the hub in
//! `causeway serve` each interval, over a connection it opens (the application needs no
//! inbound port), and installs and uninstalls the queries the hub's answer lists.
//!
//! A batch of results is numbered and kept until the hub's answer says it was applied,
//! so a lost answer or a hub restart re-sends it and the hub, which remembers the last
//! number it applied per process, applies it once.
//!
//! With `Config::pivot_hub` (`CAUSEWAY_PIVOT_HUB`) the thread posts a report to
//! `POST /api/pivot/agent` every interval over its own keep-alive connection: the queries
//! it runs (and any that failed to compile), new callsites, counters, and its
//! unacknowledged batches of partial results, each numbered per process instance. The
//! answer lists every installed query (the agent installs or uninstalls to match) and the
//! last batch applied (batches up to it are forgotten). After an answer that installed a
//! query the agent reports again after half an interval, so acknowledgements and first
//! results come within about 1.5 intervals of the install. Batches the hub has not answered
//! for 3 600 intervals (an hour at the default 1 s) are dropped and counted. On `Guard`
//! drop it takes the last results and re-sends until they are applied or the shutdown
//! timeout passes.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use causeway_pivot::protocol::{
    Batch, Counters, Group, InstallFailure, Partial, ProcessInfo, Reply, Report, AGENT_PATH,
};

use super::Runtime;

/// Batches kept for a hub that does not answer; past it the oldest are dropped.
const MAX_PENDING: usize = 3600;

#[derive(Default)]
struct Signal {
    stop: bool,
}

/// The running agent; [`Agent::shutdown`] makes a last report.
pub(crate) struct Agent {
    signal: Arc<(Mutex<Signal>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

struct Reporter {
    runtime: Arc<Runtime>,
    url: String,
    token: Option<String>,
    http: ureq::Agent,
    process: ProcessInfo,
    interval: Duration,
    seq: u64,
    pending: VecDeque<Batch>,
    callsites_sent: usize,
    failed: HashMap<u32, String>,
    /// The last answer installed a query: report again after half an interval, so its
    /// acknowledgement and first results come sooner.
    hurry: bool,
    /// Batches dropped because the hub did not answer for [`MAX_PENDING`] intervals.
    batches_dropped: u64,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Agent {
    pub(crate) fn start(
        runtime: Arc<Runtime>,
        hub: &str,
        token: Option<String>,
        interval: Duration,
        process: ProcessInfo,
    ) -> std::io::Result<Agent> {
        let signal = Arc::new((Mutex::new(Signal::default()), Condvar::new()));
        let http: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(5)))
            .http_status_as_error(false)
            .build()
            .into();
        let mut reporter = Reporter {
            runtime,
            url: format!("{}{AGENT_PATH}", hub.trim_end_matches('/')),
            token,
            http,
            process,
            interval,
            seq: 0,
            pending: VecDeque::new(),
            callsites_sent: 0,
            failed: HashMap::new(),
            hurry: false,
            batches_dropped: 0,
        };
        let s = signal.clone();
        let thread = std::thread::Builder::new()
            .name("causeway-pivot".into())
            .spawn(move || reporter.run(&s))?;
        Ok(Agent {
            signal,
            thread: Some(thread),
        })
    }

    /// Stops the agent after a last report that takes every result so far; waits at
    /// most `timeout` for the hub to apply it.
    pub(crate) fn shutdown(mut self, timeout: Duration) {
        self.signal_stop();
        let Some(t) = self.thread.take() else { return };
        let deadline = Instant::now() + timeout;
        while !t.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if t.is_finished() {
            let _ = t.join();
        }
    }
}

impl Agent {
    fn signal_stop(&self) {
        let (m, cv) = &*self.signal;
        m.lock().unwrap_or_else(|e| e.into_inner()).stop = true;
        cv.notify_all();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        self.signal_stop();
    }
}

impl Reporter {
    fn run(&mut self, signal: &(Mutex<Signal>, Condvar)) {
        let mut stop_deadline: Option<Instant> = None;
        loop {
            let stopping = {
                let (m, cv) = signal;
                let guard = m.lock().unwrap_or_else(|e| e.into_inner());
                let wait = if stop_deadline.is_some() {
                    // Stopping with batches the hub has not applied: retry soon.
                    Duration::from_millis(100)
                } else if self.hurry {
                    self.interval / 2
                } else {
                    self.interval
                };
                let (guard, _) = cv
                    .wait_timeout_while(guard, wait, |s| !s.stop || stop_deadline.is_some())
                    .unwrap_or_else(|e| e.into_inner());
                guard.stop
            };
            if stopping && stop_deadline.is_none() {
                stop_deadline = Some(Instant::now() + Duration::from_secs(10));
            }
            self.collect();
            let sent = self.report();
            if stopping {
                let out_of_time = stop_deadline.is_some_and(|d| Instant::now() > d);
                if out_of_time && !self.pending.is_empty() {
                    // The process is exiting: this is the last chance to say so.
                    eprintln!(
                        "causeway: {} batches of Pivot Tracing results never reached the hub \
                         at {} (it did not answer before the process exited)",
                        self.pending.len(),
                        self.url
                    );
                }
                if (sent && self.pending.is_empty()) || out_of_time {
                    return;
                }
            }
        }
    }

    /// Turns the results since the last interval into a numbered batch.
    fn collect(&mut self) {
        let results = self.runtime.take_results();
        if results.is_empty() {
            return;
        }
        self.seq += 1;
        let partials = results
            .into_iter()
            .map(|(query, a)| Partial {
                query,
                groups: Group::all_of(&a),
                overflow: a.overflow,
            })
            .collect();
        self.pending.push_back(Batch {
            seq: self.seq,
            at_ms: now_ms(),
            partials,
        });
        while self.pending.len() > MAX_PENDING {
            self.pending.pop_front();
            self.batches_dropped += 1;
        }
    }

    /// Sends one report; true if the hub answered.
    fn report(&mut self) -> bool {
        let (callsites, upto) = self.runtime.callsites_from(self.callsites_sent);
        let report = Report {
            process: self.process.clone(),
            installed: self.runtime.installed(),
            failed: self
                .failed
                .iter()
                .map(|(q, e)| InstallFailure {
                    query: *q,
                    error: e.clone(),
                })
                .collect(),
            callsites,
            callsites_from: self.callsites_sent,
            batches: self.pending.iter().cloned().collect(),
            counters: Counters {
                batches_dropped: self.batches_dropped,
                ..self.runtime.counters()
            },
        };
        let Ok(body) = serde_json::to_vec(&report) else {
            return false;
        };
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json");
        if let Some(t) = &self.token {
            req = req.header("authorization", format!("Bearer {t}"));
        }
        let Ok(mut resp) = req.send(&body[..]) else {
            return false;
        };
        if !resp.status().is_success() {
            return false;
        }
        let Ok(text) = resp.body_mut().read_to_string() else {
            return false;
        };
        let Ok(reply) = serde_json::from_str::<Reply>(&text) else {
            return false;
        };
        self.pending.retain(|b| b.seq > reply.applied);
        self.callsites_sent = if reply.want_callsites { 0 } else { upto };
        if reply.interval_ms > 0 {
            self.interval = Duration::from_millis(reply.interval_ms.clamp(10, 60_000));
        }
        self.hurry = self.apply(&reply);
        true
    }

    /// Installs what the hub lists and uninstalls what it no longer does; true if it
    /// installed one.
    fn apply(&mut self, reply: &Reply) -> bool {
        let installed = self.runtime.installed();
        for id in &installed {
            if !reply.queries.iter().any(|o| o.id == *id) {
                self.runtime.uninstall(*id);
            }
        }
        self.failed
            .retain(|id, _| reply.queries.iter().any(|o| o.id == *id));
        let mut added = false;
        for order in &reply.queries {
            if installed.contains(&order.id) || self.failed.contains_key(&order.id) {
                continue;
            }
            match self.runtime.install(order.id, &order.script, &order.bags) {
                Ok(()) => added = true,
                Err(e) => {
                    self.failed.insert(
                        order.id,
                        format!(
                            "{}:{}: found {}, expected {}",
                            e.line, e.col, e.found, e.expected
                        ),
                    );
                }
            }
        }
        added
    }
}
