//! `causeway demo`: the server with its embedded store, the demo system (one process per
//! role, each this binary re-run as `causeway demo-node ROLE`) and a load generator.
//!
//! The server runs in this process, its store in a temporary directory unless `--data`
//! names one. Each of the ten roles (frontend, catalog, recommend, orders, cache,
//! metadata, storage-1 to -3, queue) exports OTLP/HTTP to the ingest port, and an
//! untraced Poisson load generator drives the frontend. The demo's faults are on purpose
//! (`demo/src/lib.rs`); its expectations are `demo/expectations/shop.pip`. With `--logs
//! DIR` each process also writes `tracing`'s fmt output there, for `causeway logs`.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use causeway_demo::{Load, Role, Topology, TOPOLOGY_VAR};
use causeway_server::ServerConfig;
use clap::Args;

use crate::nodes::{data_dir, loopback, stop_nodes, wait_listening, NodeProcess};

/// `causeway demo`: the server, the shop sending it traces, and load.
#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct DemoArgs {
    /// Another demo system (default: the shop).
    #[command(subcommand)]
    system: Option<DemoSystem>,
    /// Directory of the store (default: a temporary directory removed at the end).
    #[arg(long)]
    data: Option<PathBuf>,
    #[command(flatten)]
    listen: crate::Listen,
    /// Requests per second sent to the frontend, on average.
    #[arg(long, default_value_t = 20.0)]
    rate: f64,
    /// Stop after this long (e.g. `30s`, `10m`); default: run until Ctrl-C.
    #[arg(long)]
    duration: Option<humantime::Duration>,
    /// Have each process also write an ordinary log (`tracing`'s fmt output, each line
    /// ending with its trace id) to DIR/<service>.log, for `causeway logs`.
    #[arg(long, value_name = "DIR")]
    logs: Option<PathBuf>,
    /// Keep the spans in ClickHouse (as `causeway serve --store`); --data then holds the
    /// spool.
    #[command(flatten)]
    clickhouse: crate::ch::ClickHouseStoreArgs,
}

#[derive(clap::Subcommand)]
enum DemoSystem {
    /// The Pivot Tracing paper's experiment: a replicated file system (a NameNode, a
    /// DataNode per host, StressTest clients) whose replica selection is biased.
    Replicas(crate::replicas::ReplicasArgs),
}

/// Addresses for every role, on free loopback ports.
fn free_ports() -> Result<Topology> {
    let mut topology = Topology::default();
    let mut held = Vec::new();
    for role in Role::ALL {
        let l = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
        topology.insert(role, l.local_addr()?);
        held.push(l);
    }
    Ok(topology)
}

fn spawn_nodes(topology: &Topology, otlp: &str, logs: Option<&Path>) -> Result<Vec<NodeProcess>> {
    let exe = std::env::current_exe().context("finding the causeway executable")?;
    let mut nodes = Vec::new();
    for (role, _) in topology.iter() {
        let mut command = Command::new(&exe);
        command
            .args(["demo-node", role.service()])
            .env(TOPOLOGY_VAR, topology.to_string())
            .env("CAUSEWAY_OTLP_ENDPOINT", otlp);
        if let Some(dir) = logs {
            command.env(causeway_demo::logs::LOGS_VAR, dir);
        }
        let child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("starting the {role} process"));
        match child {
            Ok(child) => nodes.push(NodeProcess {
                label: role.to_string(),
                child,
            }),
            Err(e) => {
                stop_nodes(nodes);
                return Err(e);
            }
        }
    }
    Ok(nodes)
}

/// Waits until every role accepts connections.
fn wait_ready(topology: &Topology, nodes: &mut [NodeProcess], within: Duration) -> Result<()> {
    let listeners: Vec<(String, SocketAddr)> = topology
        .iter()
        .map(|(role, addr)| (role.to_string(), addr))
        .collect();
    wait_listening(&listeners, nodes, within)
}

/// Runs `causeway demo`.
pub fn run(a: DemoArgs) -> Result<()> {
    if let Some(DemoSystem::Replicas(r)) = a.system {
        return crate::replicas::run(r);
    }
    let (data, temporary) = data_dir(a.data);
    let config = ServerConfig {
        store: causeway_store::StoreOptions {
            // The demo's spans are not precious: sync in batches, not per request.
            fsync: causeway_store::FsyncPolicy::Interval(Duration::from_millis(200)),
            ..causeway_store::StoreOptions::default()
        },
        clickhouse: a
            .clickhouse
            .server_config(causeway_clickhouse::SpoolOptions::default().max_unshipped_bytes)?,
        ..a.listen.config(data.clone())
    };
    let shown = match &config.clickhouse {
        Some(c) => format!("spans in {}, spool in {}", c.endpoint, data.display()),
        None => format!("data in {}", data.display()),
    };
    let result = crate::runtime()?.block_on(async move {
        let server = causeway_server::start(config).await?;
        let topology = free_ports()?;
        let otlp = format!("http://{}/v1/traces", loopback(server.ingest_addr));
        if let Some(dir) = &a.logs {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating the log directory {}", dir.display()))?;
        }
        let mut nodes = spawn_nodes(&topology, &otlp, a.logs.as_deref())?;
        let ready = tokio::task::block_in_place(|| {
            wait_ready(&topology, &mut nodes, Duration::from_secs(20))
        });
        if let Err(e) = ready {
            stop_nodes(nodes);
            server.shutdown().await;
            return Err(e);
        }
        let ui = format!("http://{}/", loopback(server.http_addr));
        statusln!("causeway demo is running ({shown})");
        for (role, addr) in topology.iter() {
            statusln!("  {:<10} {addr}", role.service());
        }
        statusln!("  OTLP/HTTP  {otlp}");
        if let Some(dir) = &a.logs {
            statusln!(
                "  logs       {} (stitch them: causeway logs {} --collector http://{})",
                dir.display(),
                dir.display(),
                loopback(server.ingest_addr)
            );
        }
        statusln!("open the UI: {ui}");
        let until = match a.duration {
            Some(d) => format!("for {d}"),
            None => "until Ctrl-C".into(),
        };
        statusln!("sending {} requests/s {until}", a.rate);
        let load = Load::new(topology.addr(Role::Frontend)?, a.rate)?;
        let stop = async {
            match a.duration {
                Some(d) => tokio::select! {
                    _ = tokio::time::sleep(d.into()) => {}
                    _ = crate::stop_requested() => {}
                },
                None => {
                    let _ = crate::stop_requested().await;
                }
            }
        };
        let bar = indicatif::ProgressBar::new_spinner();
        tokio::select! {
            _ = load.run(stop) => {}
            _ = progress(&bar, &load, &*server.store) => {}
        }
        bar.finish_and_clear();
        statusln!("stopping");
        tokio::task::block_in_place(|| stop_nodes(nodes));
        let (counts, stats) = (load.counts(), server.store.stats());
        statusln!(
            "{} requests ({} failed); {} traces, {} spans collected; UI was {ui}",
            counts.sent,
            counts.failed,
            stats.appended_roots,
            stats.appended_spans
        );
        server.shutdown().await;
        Ok(())
    });
    if temporary {
        let _ = std::fs::remove_dir_all(&data);
    }
    result
}

/// Shows the counts as they grow (a spinner on a terminal, a line every 10 s otherwise).
async fn progress(
    bar: &indicatif::ProgressBar,
    load: &Load,
    store: &dyn causeway_store::TraceStore,
) {
    let plain = bar.is_hidden();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut last_line = Instant::now();
    loop {
        tick.tick().await;
        let (c, s) = (load.counts(), store.stats());
        let line = format!(
            "{} requests ({} failed) · {} traces, {} spans collected",
            c.sent, c.failed, s.appended_roots, s.appended_spans
        );
        if !plain {
            bar.set_message(line);
            bar.tick();
        } else if last_line.elapsed() >= Duration::from_secs(10) {
            statusln!("{line}");
            last_line = Instant::now();
        }
    }
}

/// `causeway demo-node ROLE`: one demo process, configured by its parent's environment.
pub fn node(role: &str) -> Result<()> {
    let role: Role = role.parse()?;
    let topology: Topology = std::env::var(TOPOLOGY_VAR)
        .with_context(|| format!("{TOPOLOGY_VAR} is not set (demo-node is run by causeway demo)"))?
        .parse()?;
    let otlp =
        std::env::var("CAUSEWAY_OTLP_ENDPOINT").context("CAUSEWAY_OTLP_ENDPOINT is not set")?;
    causeway_demo::run_node(role, topology, &otlp).map_err(|e| anyhow::anyhow!("{role}: {e}"))
}
