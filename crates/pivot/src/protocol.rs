//! What a process's agent and the hub in `causeway serve` say to each other, as JSON
//! over one HTTP connection the process opens (`POST /api/pivot/agent` each interval):
//! the process reports its partial results and what it installed; the hub answers with
//! the queries it should run.
//!
//! Exactly once: each batch of partial results has a sequence number per process
//! instance, the agent re-sends a batch until the hub's answer says it was applied, and
//! the hub applies a batch only if its number is past the last one it applied.

use serde::{Deserialize, Serialize};

use crate::aggregate::{AggState, Aggregator};
use crate::value::Value;

/// The hub's path for reports.
pub const AGENT_PATH: &str = "/api/pivot/agent";

/// Who reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// Random per process start: tells a restarted process from the old one.
    pub instance: u64,
    /// The `service` export.
    pub service: String,
    /// The `host` export.
    pub host: String,
    /// The `procName` export.
    pub proc_name: String,
    /// The `pid` export.
    pub pid: u32,
}

/// A `tracing` callsite a process registered: what tracepoint definitions match.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallsiteInfo {
    /// `span` or `event`.
    pub kind: String,
    /// Target.
    pub target: String,
    /// Name.
    pub name: String,
    /// Level, upper case.
    pub level: String,
    /// Module path.
    pub module: Option<String>,
    /// Source file.
    pub file: Option<String>,
    /// Source line.
    pub line: Option<u32>,
    /// Field names.
    pub fields: Vec<String>,
}

/// One group of a partial result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// The group-by values.
    pub key: Vec<Value>,
    /// One state per aggregate, in Select order.
    pub states: Vec<AggState>,
    /// A sampled trace that fed the group (32 hex digits), if one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

impl Group {
    /// The groups of an aggregator, with their example traces.
    pub fn all_of(a: &Aggregator) -> Vec<Group> {
        a.groups()
            .map(|(k, s)| Group {
                key: k.to_vec(),
                states: s.to_vec(),
                example: a.example(k).map(|t| t.to_string()),
            })
            .collect()
    }

    /// Merges the group into `into`, with its example; false when its states are not
    /// `into`'s aggregates.
    pub fn merge_into(&self, into: &mut Aggregator) -> bool {
        if !into.merge_group(&self.key, &self.states) {
            return false;
        }
        if let Some(trace) = self.example.as_deref().and_then(|t| t.parse().ok()) {
            into.note_example(&self.key, trace);
        }
        true
    }
}

/// One query's partial result over one interval of one process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partial {
    /// The query id.
    pub query: u32,
    /// The groups.
    pub groups: Vec<Group>,
    /// Tuples whose group did not fit.
    pub overflow: u64,
}

/// Partial results of one interval, numbered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// Increases by one per batch of a process instance, from 1.
    pub seq: u64,
    /// When the interval ended, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Per query.
    pub partials: Vec<Partial>,
}

/// Why a process could not install a query.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallFailure {
    /// The query id.
    pub query: u32,
    /// The compiler's message.
    pub error: String,
}

/// Counters of what the process's advice and baggage dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Incoming bags that did not decode (dropped).
    pub bags_malformed: u64,
    /// Outgoing bags cut to the size limit.
    pub bags_overflowed: u64,
    /// Joined tuples beyond the fan-out cap.
    pub fanout_dropped: u64,
    /// Batches of partial results the agent dropped, oldest first, while the hub did not
    /// answer for longer than it keeps them.
    #[serde(default)]
    pub batches_dropped: u64,
}

/// A process's report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Who.
    pub process: ProcessInfo,
    /// The query ids it runs now.
    pub installed: Vec<u32>,
    /// Queries it could not install.
    #[serde(default)]
    pub failed: Vec<InstallFailure>,
    /// Callsites registered since its last report the hub acknowledged (all of them
    /// when the hub asked), starting at this index of the process's catalog.
    #[serde(default)]
    pub callsites: Vec<CallsiteInfo>,
    /// The index of `callsites[0]` in the process's catalog (0: the whole catalog).
    #[serde(default)]
    pub callsites_from: usize,
    /// Batches the hub has not acknowledged, oldest first.
    #[serde(default)]
    pub batches: Vec<Batch>,
    /// Totals since the process started.
    #[serde(default)]
    pub counters: Counters,
}

/// A query a process should run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Order {
    /// The id, which also keys its bags.
    pub id: u32,
    /// Tracepoint definitions and the query ([`crate::install::Prepared::script`]).
    pub script: String,
    /// The bag each advice packs into, by advice ([`crate::share`]); empty: its own.
    #[serde(default)]
    pub bags: Vec<crate::bag::BagKey>,
}

/// The hub's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The last batch applied for this instance: the agent forgets batches up to it.
    pub applied: u64,
    /// Every query installed now; the process uninstalls any other.
    pub queries: Vec<Order>,
    /// How often to report, in milliseconds.
    pub interval_ms: u64,
    /// The hub does not know this instance's callsites (it restarted): send them all.
    pub want_callsites: bool,
}
