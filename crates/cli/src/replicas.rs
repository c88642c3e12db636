//! `causeway demo replicas`: the Pivot Tracing paper's experiment. The server with its
//! hub, a NameNode, one DataNode per host and StressTest clients, each this binary re-run
//! as `causeway replicas-node ...`.
//!
//! With `--queries FILE --json`: installs the file's queries, waits until every process
//! acknowledged them, sends the clients `go` on stdin and waits for them, closes the
//! servers' stdin so that each reports its last results as it exits, prints each query's
//! totals as one JSON object and exits 0. Without: the clients read in a loop and the UI
//! shows the queries installed from it or the CLI. The NameNode lists the client's own
//! host first, then `--order` (or a shuffle with `--selection random`).
//!
//! The processes are started and stopped as a [`System`], which `causeway-bench pivot`
//! (`crates/bench/src/pivot/`) also runs: fresh processes per run, with or without the
//! agent, clients that time each request and print the latencies (`report_latency`), an
//! optional `pad` field of N values on each op span (which a query exploding it packs into
//! every request's bag: `pack60`), an optional W3C baggage member put on each op span
//! (`carried_baggage`: `bag60`'s 60-tuple bag, which no advice reads), and a program every
//! process runs under (`wrap`: valgrind, for `--instructions`).

use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use causeway_demo::replicas::{
    host_names, Layout, Node, Selection, Setup, LISTENING_PREFIX, SETUP_VAR, TRACEPOINTS,
};
use causeway_server::ServerConfig;
use clap::Args;
use serde_json::json;

use crate::client::Client;
use crate::nodes::{data_dir, loopback, stop_nodes, NodeProcess};

/// `causeway demo replicas`: the replicated file system Pivot Tracing is shown on.
#[derive(Args)]
pub struct ReplicasArgs {
    /// Hosts, named A, B, C, ... (3 to 26).
    #[arg(long, default_value_t = 8)]
    hosts: usize,
    /// StressTest client processes per host.
    #[arg(long, default_value_t = 1)]
    clients_per_host: usize,
    /// Files each 3-host subset holds (one replica on each of its hosts).
    #[arg(long, default_value_t = 1)]
    files_per_set: usize,
    /// Reads of every file by each client, one trace each.
    #[arg(long, default_value_t = 1)]
    reads: usize,
    /// Bytes per read.
    #[arg(long, default_value_t = 8192)]
    read_size: usize,
    /// The NameNode's static host order for remote replicas, a permutation of the host
    /// names (e.g. `HGFEDCBA`); default alphabetical.
    #[arg(long)]
    order: Option<String>,
    /// `first`: remote replicas in the static order (the paper's bug, HDFS-6268);
    /// `random`: shuffled per request.
    #[arg(long, default_value = "first", value_parser = ["first", "random"])]
    selection: String,
    /// Seed of the random order.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Install the queries in this file, run the workload once and print their totals.
    #[arg(long)]
    queries: Option<PathBuf>,
    /// Print the totals as one JSON object (with --queries).
    #[arg(long, requires = "queries")]
    json: bool,
    /// Directory of the store (default: a temporary directory removed at the end).
    #[arg(long)]
    data: Option<PathBuf>,
    #[command(flatten)]
    listen: crate::Listen,
}

fn layout(a: &ReplicasArgs) -> Result<Layout> {
    let hosts = host_names(a.hosts).map_err(|e| anyhow::anyhow!("--hosts: {e}"))?;
    let order = match &a.order {
        Some(o) => o.chars().map(|c| c.to_string()).collect(),
        None => hosts.clone(),
    };
    let layout = Layout {
        hosts,
        order,
        selection: if a.selection == "random" {
            Selection::Random
        } else {
            Selection::First
        },
        seed: a.seed,
        files_per_set: a.files_per_set,
        clients_per_host: a.clients_per_host,
        reads: a.reads,
        read_size: a.read_size,
    };
    layout
        .check()
        .map_err(|e| anyhow::anyhow!("--order: {e}"))?;
    Ok(layout)
}

/// Starts `nodes`, each under `wrap` (a program and its arguments, such as valgrind's)
/// when given; `capture` pipes their standard output for the caller to read.
fn spawn(
    nodes: &[Node],
    setup: &Setup,
    capture: bool,
    options: &Options,
) -> Result<Vec<NodeProcess>> {
    let (exe, wrap) = (&options.program, &options.wrap);
    let env = serde_json::to_string(setup)?;
    let mut running = Vec::new();
    for node in nodes {
        let mut command = match wrap.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(exe);
                c
            }
            None => Command::new(exe),
        };
        let child = command
            .arg("replicas-node")
            .args(node.args())
            .env(SETUP_VAR, &env)
            .stdin(Stdio::piped())
            .stdout(if capture {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .spawn()
            .with_context(|| format!("starting {}", node.proc_name()));
        match child {
            Ok(child) => running.push(NodeProcess {
                label: node.proc_name(),
                child,
            }),
            Err(e) => {
                stop_nodes(running);
                return Err(e);
            }
        }
    }
    Ok(running)
}

/// Where each server listens, in order, as it prints it on standard output (the rest of
/// which is read and dropped, so that a later line never finds the pipe closed).
fn listening(servers: &mut [NodeProcess], within: Duration) -> Result<Vec<SocketAddr>> {
    use std::io::BufRead as _;
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, n) in servers.iter_mut().enumerate() {
        let out = n
            .child
            .stdout
            .take()
            .context("a server's output is not piped")?;
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut lines = std::io::BufReader::new(out).lines();
            let addr = lines.by_ref().map_while(Result::ok).find_map(|l| {
                l.strip_prefix(LISTENING_PREFIX)
                    .and_then(|a| a.trim().parse::<SocketAddr>().ok())
            });
            let _ = tx.send((i, addr));
            lines.for_each(drop);
        });
    }
    drop(tx);
    let deadline = Instant::now() + within;
    let mut addrs: Vec<Option<SocketAddr>> = vec![None; servers.len()];
    while addrs.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, Some(a))) => addrs[i] = Some(a),
            Ok((i, None)) => {
                let status = servers[i].child.wait().ok();
                bail!(
                    "the {} process exited at start ({})",
                    servers[i].label,
                    status.map_or("unknown status".into(), |s| s.to_string())
                );
            }
            Err(_) => {
                let late: Vec<&str> = servers
                    .iter()
                    .zip(&addrs)
                    .filter(|(_, a)| a.is_none())
                    .map(|(n, _)| n.label.as_str())
                    .collect();
                bail!("not listening within {within:?}: {}", late.join(", "));
            }
        }
    }
    Ok(addrs.into_iter().flatten().collect())
}

/// Installs every query of `text`; their ids and names.
pub fn install(client: &Client, text: &str, origin: &str) -> Result<Vec<(u64, String)>> {
    let mut ids = Vec::new();
    for (i, q) in crate::pivot::queries_of(client, text, origin)?
        .into_iter()
        .enumerate()
    {
        let r = client.post_json("/api/pivot/queries", &json!({ "query": q }))?;
        let id = r["id"].as_u64().context("the hub answered without an id")?;
        let name = r["name"]
            .as_str()
            .map_or_else(|| format!("query{}", i + 1), str::to_string);
        ids.push((id, name));
    }
    Ok(ids)
}

/// Waits until each query is acknowledged by `processes` processes.
pub fn wait_acknowledged(client: &Client, processes: usize, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    loop {
        let r = client.get("/api/pivot/queries")?;
        let queries = r["queries"].as_array().cloned().unwrap_or_default();
        let short: Vec<String> = queries
            .iter()
            .filter_map(|q| {
                let procs = crate::pivot::items(&q["processes"]);
                if let Some(e) = procs.iter().find_map(|p| p["error"].as_str()) {
                    return Some(format!("query {} failed to install: {e}", q["id"]));
                }
                let acked = procs.iter().filter(|p| p["acknowledged"] == true).count();
                (acked < processes).then(|| format!("query {} by {acked}/{processes}", q["id"]))
            })
            .collect();
        if short.is_empty() {
            return Ok(());
        }
        if let Some(e) = short.iter().find(|s| s.contains("failed")) {
            bail!("{e}");
        }
        if Instant::now() > deadline {
            bail!("not acknowledged within {within:?}: {}", short.join("; "));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `causeway demo replicas`.
pub fn run(a: ReplicasArgs) -> Result<()> {
    let layout = layout(&a)?;
    let queries = match &a.queries {
        Some(f) => Some((
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?,
            f.display().to_string(),
        )),
        None => None,
    };
    let once = queries.is_some();
    let (data, temporary) = data_dir(a.data.clone());
    let config = ServerConfig {
        store: causeway_store::StoreOptions {
            fsync: causeway_store::FsyncPolicy::Interval(Duration::from_millis(200)),
            ..causeway_store::StoreOptions::default()
        },
        pivot_tracepoints: vec![("replicas.pivot".into(), TRACEPOINTS.into())],
        // Short intervals when the run is scripted: acknowledgements come sooner.
        pivot_interval: Duration::from_millis(if once { 200 } else { 1000 }),
        ..a.listen.config(data.clone())
    };
    let json_out = a.json;
    let result = crate::runtime()?.block_on(async move {
        let server = causeway_server::start(config).await?;
        let http = format!("http://{}", loopback(server.http_addr));
        let result = tokio::task::block_in_place(|| {
            drive(&layout, &http, server.ingest_addr, queries, json_out)
        });
        server.shutdown().await;
        result
    });
    if temporary {
        let _ = std::fs::remove_dir_all(&data);
    }
    result
}

/// The processes of one run of the system: servers listening, clients waiting for
/// the go signal.
pub struct System {
    servers: Vec<NodeProcess>,
    /// The clients.
    pub workers: Vec<NodeProcess>,
    /// How many processes there are.
    pub processes: usize,
}

/// How the processes of a [`System`] run.
pub struct Options {
    /// The hub's URL; none runs them without the Pivot Tracing agent.
    pub hub: Option<String>,
    /// Clients read until stopped.
    pub repeat: bool,
    /// Clients print their latencies (their standard output is piped).
    pub report_latency: bool,
    /// Values in each op span's `pad` field.
    pub pad_values: usize,
    /// Milliseconds each client waits after each read.
    pub pause_ms: u64,
    /// The causeway executable every process is (run as `causeway replicas-node`).
    pub program: std::path::PathBuf,
    /// A program (and its arguments) every process runs under, such as valgrind.
    pub wrap: Vec<String>,
    /// A W3C baggage member every client request carries.
    pub carried_baggage: Option<(String, String)>,
}

impl System {
    /// Starts a NameNode, the DataNodes and the clients of `layout`, sending spans to
    /// `ingest`; returns once every server listens.
    pub fn start(layout: &Layout, ingest: SocketAddr, options: Options) -> Result<System> {
        let mut nodes = vec![Node::NameNode];
        nodes.extend(layout.hosts.iter().map(|h| Node::DataNode(h.clone())));
        let clients: Vec<Node> = layout
            .hosts
            .iter()
            .flat_map(|h| (0..layout.clients_per_host).map(move |i| Node::Client(h.clone(), i)))
            .collect();
        // Servers bind ports the system picks and say which: ports found free first
        // could be taken by another system starting at the same time.
        let any_port = SocketAddr::from(([127, 0, 0, 1], 0));
        let mut setup = Setup {
            layout: layout.clone(),
            namenode: any_port,
            datanodes: layout
                .hosts
                .iter()
                .map(|h| (h.clone(), any_port))
                .collect::<BTreeMap<_, _>>(),
            otlp: format!("http://{}/v1/traces", loopback(ingest)),
            hub: options.hub.clone(),
            repeat: options.repeat,
            report_latency: options.report_latency,
            pad_values: options.pad_values,
            carried_baggage: options.carried_baggage.clone(),
            pause_ms: options.pause_ms,
        };
        let mut servers = spawn(&nodes, &setup, true, &options)?;
        let addrs = match listening(&mut servers, Duration::from_secs(20)) {
            Ok(a) => a,
            Err(e) => {
                stop_nodes(servers);
                return Err(e);
            }
        };
        // The clients learn where the servers listen.
        setup.namenode = addrs[0];
        for (host, addr) in layout.hosts.iter().zip(&addrs[1..]) {
            setup.datanodes.insert(host.clone(), *addr);
        }
        let workers = match spawn(&clients, &setup, options.report_latency, &options) {
            Ok(w) => w,
            Err(e) => {
                stop_nodes(servers);
                return Err(e);
            }
        };
        Ok(System {
            servers,
            workers,
            processes: nodes.len() + clients.len(),
        })
    }

    /// Tells every client to start.
    pub fn go(&mut self) -> Result<()> {
        for w in self.workers.iter_mut() {
            if let Some(stdin) = w.child.stdin.as_mut() {
                writeln!(stdin, "go").with_context(|| format!("starting {}", w.label))?;
            }
        }
        Ok(())
    }

    /// Waits for every client to finish its workload.
    pub fn wait_clients(&mut self) -> Result<()> {
        for w in self.workers.iter_mut() {
            let status = w
                .child
                .wait()
                .with_context(|| format!("waiting for {}", w.label))?;
            if !status.success() {
                bail!("{} failed ({status})", w.label);
            }
        }
        Ok(())
    }

    /// CPU time the servers have run so far (Linux only).
    pub fn servers_cpu_ns(&self) -> Option<u64> {
        self.servers
            .iter()
            .map(|n| causeway_demo::replicas::cpu_ns(n.child.id()))
            .sum()
    }

    /// Stops every process.
    pub fn stop(self) {
        stop_nodes(self.workers);
        stop_nodes(self.servers);
    }

    /// Every process's label and pid.
    pub fn pids(&self) -> Vec<(String, u32)> {
        self.servers
            .iter()
            .chain(&self.workers)
            .map(|n| (n.label.clone(), n.child.id()))
            .collect()
    }
}

fn drive(
    layout: &Layout,
    http: &str,
    ingest: SocketAddr,
    queries: Option<(String, String)>,
    json_out: bool,
) -> Result<()> {
    let options = Options {
        hub: Some(http.to_string()),
        repeat: queries.is_none(),
        report_latency: false,
        pad_values: 0,
        pause_ms: 0,
        program: std::env::current_exe().context("finding the causeway executable")?,
        wrap: Vec::new(),
        carried_baggage: None,
    };
    let mut system = System::start(layout, ingest, options)?;
    let client = Client::new(http, None);
    let outcome = match &queries {
        Some((text, origin)) => scripted(&client, text, origin, &mut system, json_out),
        None => live(http, &mut system),
    };
    system.stop();
    let ids = outcome?;
    if !ids.is_empty() {
        print_totals(&client, &ids, json_out)?;
    }
    Ok(())
}

/// Installs the queries, starts the clients once every process runs them, and waits
/// for the clients to finish. The queries' ids and names.
fn scripted(
    client: &Client,
    text: &str,
    origin: &str,
    system: &mut System,
    json_out: bool,
) -> Result<Vec<(u64, String)>> {
    let ids = install(client, text, origin)?;
    wait_acknowledged(client, system.processes, Duration::from_secs(60))?;
    if !json_out {
        statusln!(
            "{} queries acknowledged by {} processes; reading",
            ids.len(),
            system.processes
        );
    }
    system.go()?;
    system.wait_clients()?;
    Ok(ids)
}

/// Runs the clients until Ctrl-C.
fn live(http: &str, system: &mut System) -> Result<Vec<(u64, String)>> {
    system.go()?;
    statusln!("causeway demo replicas is running; the query API and UI are at {http}");
    statusln!("install the paper's queries: causeway pivot install --server {http} -f demo/tracepoints/paper-queries.pivot");
    statusln!("follow one: causeway pivot run --server {http} 'From d In DN.DataTransferProtocol GroupBy d.host Select d.host, COUNT'");
    statusln!("Ctrl-C stops everything");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let _ = rt.block_on(crate::stop_requested());
    statusln!("stopping");
    Ok(Vec::new())
}

/// Prints each query's final totals.
fn print_totals(client: &Client, ids: &[(u64, String)], json_out: bool) -> Result<()> {
    let mut out = Vec::new();
    for (id, name) in ids {
        let r = client.get(&format!("/api/pivot/queries/{id}/results"))?;
        out.push(json!({ "name": name, "columns": r["columns"], "rows": r["rows"] }));
    }
    if json_out {
        outln!("{}", json!({ "queries": out }));
        return Ok(());
    }
    for q in &out {
        outln!("{}", q["name"].as_str().unwrap_or_default());
        out!("{}\n", crate::pivot::results_table(q));
    }
    Ok(())
}

/// `causeway replicas-node ...`: one process of the system, set up by its parent.
pub fn node(args: &[String]) -> Result<()> {
    let node = Node::parse(args).map_err(|e| anyhow::anyhow!(e))?;
    let setup: Setup = serde_json::from_str(&std::env::var(SETUP_VAR).with_context(|| {
        format!("{SETUP_VAR} is not set (replicas-node is run by causeway demo replicas)")
    })?)
    .with_context(|| format!("reading {SETUP_VAR}"))?;
    causeway_demo::replicas::run_node(node.clone(), setup)
        .map_err(|e| anyhow::anyhow!("{}: {e}", node.proc_name()))
}
