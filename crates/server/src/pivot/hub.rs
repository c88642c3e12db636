//! The hub's state: the installed queries with their merged totals and time series, and
//! the processes that report to it. Totals survive a restart: the queries, their totals
//! and the last batch applied per process instance are saved before a report is
//! answered, so a batch the hub acknowledged is never lost and one it did not is applied
//! once when re-sent.
//!
//! `HubState` holds the queries (canonical text, self-contained script, columns, explain
//! output, totals, a time series of 300 intervals), the processes (last report, installed
//! ids, failures, callsites) and, per process instance, the last batch applied. A report's
//! batches past that number are merged (a state that is not the query's aggregate is
//! refused per group); the state is saved to `DATA/pivot.json` (write, fsync, rename) before
//! the answer, under a lock that keeps saves in order. Each group carries an example: the
//! first sampled trace whose hit fed it. Definitions are saved with the state and load again
//! at start, then those of `ServerConfig::pivot_tracepoints` (`serve --pivot-tracepoints`),
//! which replace saved ones of the same name. The time series starts empty after a restart
//! (the totals do not).
//!
//! What the hub holds is bounded (`PivotLimits`): installs and definitions (409 past them),
//! processes served (503 to a new one), callsites per process and in all (each process
//! counts those not kept; their texts cut to 256 B, 64 fields each). A process silent past
//! `process_expiry` is forgotten, and the last batch applied per instance is kept for up to
//! four times `max_processes` instances: an instance gone past that and back would have a
//! re-sent batch applied again.

use std::collections::{BTreeMap, HashMap, VecDeque};

use causeway_model::source::SyntaxError;
use causeway_pivot::aggregate::Aggregator;
use causeway_pivot::bag::BagKey;
use causeway_pivot::compile::{explain, Catalog};
use causeway_pivot::install::{load, prepare};
use causeway_pivot::lang::ast::AggFn;
use causeway_pivot::protocol::{
    CallsiteInfo, Counters, Group, InstallFailure, Order, ProcessInfo, Reply, Report,
};
use causeway_pivot::share::Sharing;
use serde::{Deserialize, Serialize};

/// Buckets of the time series kept per query.
pub(crate) const SERIES_BUCKETS: usize = 300;

/// Bytes kept of each text field of a callsite (target, name, module, file, a field).
const MAX_CALLSITE_TEXT: usize = 256;
/// Field names kept per callsite.
const MAX_CALLSITE_FIELDS: usize = 64;

/// Bounds on the hub: what it installs, whom it serves, and what it keeps of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PivotLimits {
    /// Queries installed at once; installing another is refused (409).
    pub max_queries: usize,
    /// Tracepoint definitions kept; defining another is refused (409).
    pub max_definitions: usize,
    /// Processes served at once; a new one is refused (503) until another expires.
    pub max_processes: usize,
    /// A process not heard from for this long is forgotten, with its callsites.
    pub process_expiry: std::time::Duration,
    /// Callsites kept of one process.
    pub max_callsites_per_process: usize,
    /// Callsites kept over every process.
    pub max_callsites: usize,
}

impl Default for PivotLimits {
    fn default() -> Self {
        PivotLimits {
            max_queries: 64,
            max_definitions: 1000,
            max_processes: 1024,
            process_expiry: std::time::Duration::from_secs(600),
            max_callsites_per_process: 10_000,
            max_callsites: 200_000,
        }
    }
}

/// Why the hub refused a change.
#[derive(Debug)]
pub(crate) enum Refused {
    /// The query or definition does not parse or compile.
    Syntax(SyntaxError),
    /// A limit is reached; the message says which and how to change it.
    Full(String),
}

impl From<SyntaxError> for Refused {
    fn from(e: SyntaxError) -> Self {
        Refused::Syntax(e)
    }
}

fn cut_text(s: &mut String) {
    if s.len() > MAX_CALLSITE_TEXT {
        let mut at = MAX_CALLSITE_TEXT;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
}

/// A callsite as kept: its texts cut, its fields at most [`MAX_CALLSITE_FIELDS`].
fn bounded(mut c: CallsiteInfo) -> CallsiteInfo {
    for text in [&mut c.kind, &mut c.target, &mut c.name, &mut c.level] {
        cut_text(text);
    }
    for text in [&mut c.module, &mut c.file].into_iter().flatten() {
        cut_text(text);
    }
    c.fields.truncate(MAX_CALLSITE_FIELDS);
    for f in &mut c.fields {
        cut_text(f);
    }
    c
}

/// An installed query.
pub(crate) struct HubQuery {
    pub(crate) id: u32,
    pub(crate) name: Option<String>,
    pub(crate) query: String,
    pub(crate) script: String,
    pub(crate) columns: Vec<String>,
    pub(crate) explain: String,
    pub(crate) installed_at_ms: u64,
    /// The bag each advice packs into (shared with earlier queries where identical).
    bags: Vec<BagKey>,
    funcs: Vec<AggFn>,
    pub(crate) totals: Aggregator,
    /// Per interval (its start, in ms), oldest first.
    pub(crate) series: VecDeque<(u64, Aggregator)>,
    /// When the last partial result arrived.
    pub(crate) last_result_ms: Option<u64>,
}

/// A process that reports.
pub(crate) struct Process {
    pub(crate) info: ProcessInfo,
    pub(crate) last_seen_ms: u64,
    pub(crate) installed: Vec<u32>,
    pub(crate) failed: Vec<InstallFailure>,
    pub(crate) callsites: Vec<CallsiteInfo>,
    pub(crate) counters: Counters,
    callsites_known: bool,
    /// Callsites it registered that were not kept (past a limit).
    pub(crate) callsites_dropped: u64,
}

/// Everything the hub knows.
pub(crate) struct HubState {
    next_id: u32,
    pub(crate) queries: BTreeMap<u32, HubQuery>,
    pub(crate) processes: HashMap<u64, Process>,
    /// The last batch applied per process instance (kept after the process leaves).
    applied: HashMap<u64, u64>,
    pub(crate) catalog: Catalog,
    /// The bags given out, for later queries' identical packs to share.
    sharing: Sharing,
    /// Tracepoint definitions as loaded, for listing.
    pub(crate) definitions: Vec<(String, String)>,
    pub(crate) interval_ms: u64,
    /// Groups merged since start (for the benchmark and metrics).
    pub(crate) groups_merged: u64,
    pub(crate) limits: PivotLimits,
}

#[derive(Serialize, Deserialize)]
struct SavedQuery {
    id: u32,
    name: Option<String>,
    query: String,
    script: String,
    installed_at_ms: u64,
    groups: Vec<Group>,
    overflow: u64,
    #[serde(default)]
    bags: Vec<BagKey>,
}

#[derive(Serialize, Deserialize)]
struct Saved {
    next_id: u32,
    queries: Vec<SavedQuery>,
    applied: Vec<(u64, u64)>,
    /// Tracepoint definitions (name, text), so those posted to the API outlive a restart.
    #[serde(default)]
    definitions: Vec<(String, String)>,
}

/// What installing a query answers.
pub(crate) struct Installed {
    pub(crate) id: u32,
    pub(crate) name: Option<String>,
    pub(crate) columns: Vec<String>,
    pub(crate) explain: String,
}

impl HubState {
    pub(crate) fn new(interval_ms: u64, limits: PivotLimits) -> HubState {
        HubState {
            next_id: 1,
            queries: BTreeMap::new(),
            processes: HashMap::new(),
            applied: HashMap::new(),
            catalog: Catalog::default(),
            sharing: Sharing::default(),
            definitions: Vec::new(),
            interval_ms: interval_ms.max(10),
            groups_merged: 0,
            limits,
        }
    }

    /// Adds tracepoint definitions (a file's text); they replace earlier ones of the
    /// same name.
    pub(crate) fn define(&mut self, file: &str, text: &str) -> Result<usize, Refused> {
        let script = causeway_pivot::lang::parse(text)?;
        let new_names: std::collections::BTreeSet<&str> = script
            .items
            .iter()
            .filter_map(|item| match item {
                causeway_pivot::lang::ast::Item::Tracepoint(t) => Some(t.name.text.as_str()),
                _ => None,
            })
            .filter(|name| !self.definitions.iter().any(|(n, _)| n == name))
            .collect();
        if self.definitions.len() + new_names.len() > self.limits.max_definitions {
            return Err(Refused::Full(format!(
                "the hub keeps {} tracepoint definitions, the most it allows \
                 (--pivot-max-definitions); {} more would not fit",
                self.definitions.len(),
                new_names.len()
            )));
        }
        let mut added = 0;
        for item in &script.items {
            if let causeway_pivot::lang::ast::Item::Tracepoint(t) = item {
                let printed =
                    causeway_pivot::lang::print_script(&causeway_pivot::lang::ast::Script {
                        items: vec![item.clone()],
                    });
                self.definitions.retain(|(n, _)| *n != t.name.text);
                self.definitions.push((t.name.text.clone(), printed));
                added += 1;
            }
        }
        if added == 0 && !script.items.is_empty() {
            return Err(Refused::Syntax(SyntaxError::new(
                causeway_model::source::Pos { line: 1, col: 1 },
                &format!("no tracepoint definition in {file}"),
                "`Tracepoint NAME = ...` definitions",
            )));
        }
        self.catalog.add(&script);
        Ok(added)
    }

    /// Checks and installs a query; every process gets it with its next report.
    pub(crate) fn install(&mut self, text: &str, now_ms: u64) -> Result<Installed, Refused> {
        if self.queries.len() >= self.limits.max_queries {
            return Err(Refused::Full(format!(
                "{} queries are installed, the most the hub allows (--pivot-max-queries); \
                 uninstall one first",
                self.queries.len()
            )));
        }
        let prepared = prepare(text, &self.catalog)?;
        let id = self.next_id;
        let loaded = load(&prepared.script, id, &[])?;
        let bags = self.sharing.assign(&loaded.plan, &loaded.catalog, id);
        self.next_id += 1;
        // A named query can source later ones.
        self.catalog.add_query(&prepared.definition);
        let explain = explain(&prepared.plan);
        let q = HubQuery {
            id,
            name: prepared.name.clone(),
            query: prepared.query,
            script: prepared.script,
            columns: prepared.plan.columns.clone(),
            explain: explain.clone(),
            installed_at_ms: now_ms,
            bags,
            totals: Aggregator::new(&loaded.lowered.funcs),
            funcs: loaded.lowered.funcs,
            series: VecDeque::new(),
            last_result_ms: None,
        };
        let installed = Installed {
            id,
            name: q.name.clone(),
            columns: q.columns.clone(),
            explain,
        };
        self.queries.insert(id, q);
        Ok(installed)
    }

    /// Checks and explains a query without installing it.
    pub(crate) fn explain(&self, text: &str) -> Result<String, SyntaxError> {
        Ok(explain(&prepare(text, &self.catalog)?.plan))
    }

    /// Uninstalls a query; false if there is none with that id.
    pub(crate) fn uninstall(&mut self, id: u32) -> bool {
        self.queries.remove(&id).is_some()
    }

    /// Whether a process reported within the last three intervals (and 3 s).
    pub(crate) fn connected(&self, p: &Process, now_ms: u64) -> bool {
        now_ms.saturating_sub(p.last_seen_ms) <= (3 * self.interval_ms).max(3000)
    }

    /// Forgets the processes not heard from within the expiry, and the last batches of
    /// instances long gone once they are many.
    pub(crate) fn expire(&mut self, now_ms: u64) {
        let expiry = self.limits.process_expiry.as_millis() as u64;
        self.processes
            .retain(|_, p| now_ms.saturating_sub(p.last_seen_ms) <= expiry);
        let keep = self.limits.max_processes.saturating_mul(4);
        if self.applied.len() > keep {
            let processes = &self.processes;
            let mut gone: Vec<u64> = self
                .applied
                .keys()
                .filter(|i| !processes.contains_key(i))
                .copied()
                .collect();
            gone.truncate(self.applied.len() - keep);
            for i in gone {
                self.applied.remove(&i);
            }
        }
    }

    /// Callsites kept over every process.
    pub(crate) fn callsites_kept(&self) -> usize {
        self.processes.values().map(|p| p.callsites.len()).sum()
    }

    /// Applies a report; the answer, and whether a batch was applied. A process the hub
    /// has no room for is refused with the reason.
    pub(crate) fn report(&mut self, r: Report, now_ms: u64) -> Result<(Reply, bool), String> {
        let instance = r.process.instance;
        self.expire(now_ms);
        if !self.processes.contains_key(&instance)
            && self.processes.len() >= self.limits.max_processes
        {
            return Err(format!(
                "the hub serves {} processes, the most it allows (--pivot-max-processes); \
                 one is forgotten {} after its last report",
                self.processes.len(),
                humantime::format_duration(self.limits.process_expiry)
            ));
        }
        let room = self
            .limits
            .max_callsites
            .saturating_sub(self.callsites_kept());
        let per_process = self.limits.max_callsites_per_process;
        let mut applied = self.applied.get(&instance).copied().unwrap_or(0);
        let p = self.processes.entry(instance).or_insert_with(|| Process {
            info: r.process.clone(),
            last_seen_ms: now_ms,
            installed: Vec::new(),
            failed: Vec::new(),
            callsites: Vec::new(),
            counters: Counters::default(),
            callsites_known: false,
            callsites_dropped: 0,
        });
        p.info = r.process;
        p.last_seen_ms = now_ms;
        p.installed = r.installed;
        p.failed = r.failed;
        p.counters = r.counters;
        // What this process may hold: the room left over every process, and what it
        // holds already (a whole catalog replaces it).
        let allowed = (room + p.callsites.len()).min(per_process);
        let offered = r.callsites.len();
        let mut dropped = 0;
        if r.callsites_from == 0 {
            p.callsites = r.callsites.into_iter().take(allowed).map(bounded).collect();
            p.callsites_known = true;
            dropped = offered - p.callsites.len();
        } else if p.callsites_known {
            let more = allowed.saturating_sub(p.callsites.len());
            dropped = offered.saturating_sub(more);
            p.callsites
                .extend(r.callsites.into_iter().take(more).map(bounded));
        }
        p.callsites_dropped += dropped as u64;
        let want_callsites = !p.callsites_known;
        let mut changed = false;
        let mut batches = r.batches;
        batches.sort_by_key(|b| b.seq);
        for b in batches {
            if b.seq <= applied {
                continue;
            }
            let bucket = b.at_ms / self.interval_ms * self.interval_ms;
            for partial in &b.partials {
                let Some(q) = self.queries.get_mut(&partial.query) else {
                    // Uninstalled since: its late results have nowhere to go.
                    continue;
                };
                let mut slot = series_bucket(&mut q.series, bucket, &q.funcs);
                for g in &partial.groups {
                    if g.merge_into(&mut q.totals) {
                        if let Some(s) = slot.as_deref_mut() {
                            g.merge_into(s);
                        }
                        self.groups_merged += 1;
                    }
                }
                q.totals.overflow = q.totals.overflow.saturating_add(partial.overflow);
                q.last_result_ms = Some(now_ms);
            }
            applied = b.seq;
            changed = true;
        }
        self.applied.insert(instance, applied);
        let reply = Reply {
            applied,
            queries: self
                .queries
                .values()
                .map(|q| Order {
                    id: q.id,
                    script: q.script.clone(),
                    bags: q.bags.clone(),
                })
                .collect(),
            interval_ms: self.interval_ms,
            want_callsites,
        };
        Ok((reply, changed))
    }

    /// The state worth keeping across a restart, as JSON.
    pub(crate) fn snapshot(&self) -> Vec<u8> {
        let saved = Saved {
            next_id: self.next_id,
            queries: self
                .queries
                .values()
                .map(|q| SavedQuery {
                    id: q.id,
                    name: q.name.clone(),
                    query: q.query.clone(),
                    script: q.script.clone(),
                    installed_at_ms: q.installed_at_ms,
                    groups: Group::all_of(&q.totals),
                    overflow: q.totals.overflow,
                    bags: q.bags.clone(),
                })
                .collect(),
            applied: self.applied.iter().map(|(i, s)| (*i, *s)).collect(),
            definitions: self.definitions.clone(),
        };
        serde_json::to_vec(&saved).unwrap_or_default()
    }

    /// Restores a snapshot; a query whose script no longer compiles is dropped, and so
    /// is a saved definition that no longer parses.
    pub(crate) fn restore(&mut self, bytes: &[u8]) -> Result<(), String> {
        let saved: Saved = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
        for (name, text) in &saved.definitions {
            let _ = self.define(name, text);
        }
        self.next_id = saved.next_id.max(1);
        self.applied = saved.applied.into_iter().collect();
        for s in saved.queries {
            let Ok(loaded) = load(&s.script, s.id, &s.bags) else {
                continue;
            };
            self.sharing
                .remember(&loaded.plan, &loaded.catalog, s.id, &s.bags);
            let mut totals = Aggregator::new(&loaded.lowered.funcs);
            for g in &s.groups {
                g.merge_into(&mut totals);
            }
            totals.overflow = s.overflow;
            let explain = match prepare(&s.script, &Catalog::default()) {
                Ok(p) => {
                    self.catalog.add_query(&p.definition);
                    explain(&p.plan)
                }
                Err(_) => String::new(),
            };
            self.next_id = self.next_id.max(s.id + 1);
            self.queries.insert(
                s.id,
                HubQuery {
                    id: s.id,
                    name: s.name,
                    query: s.query,
                    script: s.script,
                    columns: loaded.columns,
                    explain,
                    installed_at_ms: s.installed_at_ms,
                    bags: s.bags,
                    funcs: loaded.lowered.funcs,
                    totals,
                    series: VecDeque::new(),
                    last_result_ms: None,
                },
            );
        }
        Ok(())
    }
}

/// The series bucket starting at `at` (made if new and not older than the kept window).
fn series_bucket<'a>(
    series: &'a mut VecDeque<(u64, Aggregator)>,
    at: u64,
    funcs: &[AggFn],
) -> Option<&'a mut Aggregator> {
    let pos = series.iter().rposition(|(t, _)| *t <= at);
    let index = match pos {
        Some(i) if series[i].0 == at => i,
        Some(i) => {
            series.insert(i + 1, (at, Aggregator::new(funcs)));
            i + 1
        }
        None if series.len() >= SERIES_BUCKETS => return None,
        None => {
            series.push_front((at, Aggregator::new(funcs)));
            0
        }
    };
    let index = if series.len() > SERIES_BUCKETS {
        series.pop_front();
        index.checked_sub(1)?
    } else {
        index
    };
    series.get_mut(index).map(|(_, a)| a)
}
