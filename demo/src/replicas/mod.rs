//! A replicated file system modelled on the Pivot Tracing paper's HDFS setup: one
//! metadata process (the NameNode), one storage process per host (the DataNodes) and
//! client processes (StressTest) that read every file, each read one trace: ask the
//! NameNode where the file is, then read from the first location it returned.
//!
//! Every 3-host subset of the hosts holds `files_per_set` files, one replica on each of
//! its hosts. The NameNode lists the replica on the client's own host first, then the
//! others in a static host order (`Selection::First`, the paper's HDFS-6268: the same
//! DataNodes take every remote read) or shuffled (`Selection::Random`).
//!
//! Each process is the `causeway` binary re-run as `causeway replicas-node ...`, set up by
//! one JSON environment variable ([`SETUP_VAR`]). A client reads each file `reads` times,
//! one trace a read: `do_next_op`, then `get_block_locations` to the NameNode and
//! `read_block` from the first location. A scripted client waits for `go` on stdin; a
//! server runs until its stdin closes, reporting its last results as it exits.
//!
//! The processes' tracepoints carry the paper's names; the definitions ship in
//! [`TRACEPOINTS`], and with the paper's Q1-Q7 in `demo/tracepoints/`.

mod client;
mod datanode;
mod namenode;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::BoxError;

/// The environment variable that carries the [`Setup`] to each process.
pub const SETUP_VAR: &str = "CAUSEWAY_REPLICAS_SETUP";

/// The paper's tracepoints over these processes' callsites.
pub const TRACEPOINTS: &str = include_str!("../../tracepoints/replicas.pivot");

/// The paper's queries Q1-Q7, as printed in it.
pub const PAPER_QUERIES: &str = include_str!("../../tracepoints/paper-queries.pivot");

/// How the NameNode orders the replicas after the client's own host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Selection {
    /// In the static host order (the paper's bug).
    First,
    /// Shuffled per request.
    Random,
}

/// The file system's shape and the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    /// Host names: `A`, `B`, ...
    pub hosts: Vec<String>,
    /// The static order of hosts the NameNode lists remote replicas in.
    pub order: Vec<String>,
    /// First or random.
    pub selection: Selection,
    /// Seed of the random order.
    pub seed: u64,
    /// Files per 3-host subset.
    pub files_per_set: usize,
    /// Client processes per host.
    pub clients_per_host: usize,
    /// Reads of each file per client.
    pub reads: usize,
    /// Bytes per read.
    pub read_size: usize,
}

/// A file and the hosts of its replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct File {
    /// Its path, `/A-B-C/0`.
    pub name: String,
    /// The hosts holding it, in host-name order.
    pub replicas: Vec<String>,
}

/// Host names for `n` hosts: `A` ... `Z`.
pub fn host_names(n: usize) -> Result<Vec<String>, String> {
    if !(3..=26).contains(&n) {
        return Err(format!("{n} hosts; between 3 and 26 (named A to Z)"));
    }
    Ok((0..n)
        .map(|i| ((b'A' + i as u8) as char).to_string())
        .collect())
}

impl Layout {
    /// Checks that `order` is a permutation of the hosts.
    pub fn check(&self) -> Result<(), String> {
        let mut a = self.hosts.clone();
        let mut b = self.order.clone();
        a.sort();
        b.sort();
        if a != b {
            return Err(format!(
                "order {:?} is not a permutation of the hosts {:?}",
                self.order.join(""),
                self.hosts.join("")
            ));
        }
        Ok(())
    }

    /// Reads in one run of the workload: every client reads every file `reads` times.
    pub fn requests(&self) -> usize {
        self.files().len() * self.reads * self.hosts.len() * self.clients_per_host
    }

    /// Every file: `files_per_set` for each 3-host subset.
    pub fn files(&self) -> Vec<File> {
        let h = &self.hosts;
        let mut out = Vec::new();
        for i in 0..h.len() {
            for j in i + 1..h.len() {
                for k in j + 1..h.len() {
                    for n in 0..self.files_per_set {
                        out.push(File {
                            name: format!("/{}-{}-{}/{n}", h[i], h[j], h[k]),
                            replicas: vec![h[i].clone(), h[j].clone(), h[k].clone()],
                        });
                    }
                }
            }
        }
        out
    }

    /// The replicas of `file` in the order the NameNode returns them to a client on
    /// `client_host`: its own host first, then the static order (or shuffled by `rng`).
    pub fn locations(
        &self,
        file: &File,
        client_host: &str,
        rng: Option<&mut fastrand::Rng>,
    ) -> Vec<String> {
        let mut remote: Vec<String> = self
            .order
            .iter()
            .filter(|h| file.replicas.contains(h) && h.as_str() != client_host)
            .cloned()
            .collect();
        if let (Selection::Random, Some(rng)) = (self.selection, rng) {
            rng.shuffle(&mut remote);
        }
        let mut out = Vec::with_capacity(3);
        if file.replicas.iter().any(|h| h == client_host) {
            out.push(client_host.to_string());
        }
        out.extend(remote);
        out
    }
}

/// What every process of the system is told: the layout, the addresses, where to report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Setup {
    /// The file system and workload.
    pub layout: Layout,
    /// The NameNode's address.
    pub namenode: SocketAddr,
    /// Each host's DataNode.
    pub datanodes: BTreeMap<String, SocketAddr>,
    /// OTLP/HTTP traces URL.
    pub otlp: String,
    /// The hub (the server's query API); none runs the processes without the Pivot
    /// Tracing agent.
    pub hub: Option<String>,
    /// Clients repeat the workload until stopped (else they run it once and exit).
    pub repeat: bool,
    /// Clients print their requests' latencies when done (for `causeway-bench pivot`).
    #[serde(default)]
    pub report_latency: bool,
    /// Values clients put in their op span's `pad` field, comma-separated: a query that
    /// explodes it packs this many tuples into each request's bag.
    #[serde(default)]
    pub pad_values: usize,
    /// Milliseconds each client waits after each read when it runs the workload once (an
    /// open system instead of a closed loop that keeps every core busy).
    #[serde(default)]
    pub pause_ms: u64,
    /// A W3C baggage member (key, value) clients put on each op span, so that every
    /// request carries it: `causeway-bench pivot` puts a 60-tuple Pivot Tracing bag there
    /// that no advice reads (the paper's "baggage containing 60 tuples, no advice
    /// installed").
    #[serde(default)]
    pub carried_baggage: Option<(String, String)>,
}

impl Setup {
    /// The op span's `pad` field: `pad_values` distinct 14-character values (60 of them
    /// make a bag of about 1 kB, the paper's), or none.
    pub fn pad(&self) -> Option<String> {
        (self.pad_values > 0).then(|| {
            (0..self.pad_values)
                .map(|i| format!("pad-tuple-{i:04}"))
                .collect::<Vec<_>>()
                .join(",")
        })
    }
}

/// What a server prints once it listens: this prefix, then its address (it binds the
/// port its `Setup` names, or, for port 0, one the system gives it).
pub const LISTENING_PREFIX: &str = "LISTENING ";

/// Binds a server's address and says where it listens on standard output.
async fn listen(addr: SocketAddr) -> Result<tokio::net::TcpListener, BoxError> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("{LISTENING_PREFIX}{}", listener.local_addr()?);
    Ok(listener)
}

/// What a client prints when `report_latency` is set: one line, this prefix, then JSON.
pub const LATENCY_PREFIX: &str = "LATENCY ";

/// A client's request latencies, in nanoseconds, in the order they ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Latencies {
    /// Asking the NameNode for a file's locations (the shortest request, the paper's
    /// "Open").
    pub open_ns: Vec<u64>,
    /// A whole read: the locations, then the bytes from the first DataNode.
    pub read_ns: Vec<u64>,
    /// The client's CPU time over its workload (Linux only).
    #[serde(default)]
    pub cpu_ns: Option<u64>,
}

/// CPU time process `pid` has run so far, summed over its threads, in nanoseconds; from
/// Linux's `/proc/PID/task/*/schedstat` (threads that have exited are not counted), and
/// `None` where that is not there.
pub fn cpu_ns(pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = 0u64;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("schedstat")) else {
            // The thread exited while being read.
            continue;
        };
        let ran: u64 = stat.split_whitespace().next()?.parse().ok()?;
        total = total.saturating_add(ran);
    }
    Some(total)
}

/// One process of the system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// The metadata process.
    NameNode,
    /// The storage process of a host.
    DataNode(String),
    /// Client `index` of a host.
    Client(String, usize),
}

impl Node {
    /// The arguments of `causeway demo-node` that start it.
    pub fn args(&self) -> Vec<String> {
        match self {
            Node::NameNode => vec!["namenode".into()],
            Node::DataNode(h) => vec!["datanode".into(), h.clone()],
            Node::Client(h, i) => vec!["client".into(), h.clone(), i.to_string()],
        }
    }

    /// Parses [`Node::args`].
    pub fn parse(args: &[String]) -> Result<Node, String> {
        match args {
            [n] if n == "namenode" => Ok(Node::NameNode),
            [n, h] if n == "datanode" => Ok(Node::DataNode(h.clone())),
            [n, h, i] if n == "client" => i
                .parse()
                .map(|i| Node::Client(h.clone(), i))
                .map_err(|_| format!("client index {i:?} is not a number")),
            _ => Err(format!(
                "{args:?}: expected `namenode`, `datanode HOST` or `client HOST INDEX`"
            )),
        }
    }

    /// Its host (the NameNode's is `nn`).
    pub fn host(&self) -> &str {
        match self {
            Node::NameNode => "nn",
            Node::DataNode(h) | Node::Client(h, _) => h,
        }
    }

    fn service(&self) -> &'static str {
        match self {
            Node::NameNode => "namenode",
            Node::DataNode(_) => "datanode",
            Node::Client(..) => "client",
        }
    }

    /// The process name queries see as `procName`.
    pub fn proc_name(&self) -> String {
        match self {
            Node::NameNode => "NameNode".into(),
            Node::DataNode(h) => format!("DataNode-{h}"),
            Node::Client(h, i) => format!("StressTest-{h}-{i}"),
        }
    }
}

/// Runs one process until its work is done (a client) or stdin closes.
pub fn run_node(node: Node, setup: Setup) -> Result<(), BoxError> {
    let mut config = crate::node_config(node.service())?.with_process_name(node.proc_name());
    if let Some(hub) = &setup.hub {
        config = config.with_pivot_hub(hub.clone());
    }
    config.host = node.host().to_owned();
    config.otlp_endpoint = Some(setup.otlp.clone());
    config.shutdown_timeout = Duration::from_secs(10);
    config.targets = Some(
        tracing_subscriber::filter::Targets::new()
            .with_target("replicas", tracing::Level::TRACE)
            .with_target("causeway", tracing::Level::TRACE),
    );
    let guard = causeway::init(config)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        match &node {
            Node::NameNode => namenode::serve(&setup, crate::stopped()).await,
            Node::DataNode(h) => datanode::serve(&setup, h, crate::stopped()).await,
            Node::Client(h, _) => client::run(&setup, h).await,
        }
    });
    drop(runtime);
    drop(guard); // flushes the last spans and reports the last results
    result
}
