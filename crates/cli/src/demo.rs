//! `causeway demo`: the server with its embedded store, the demo system (one process per
//! role, each this binary re-run as `causeway demo-node ROLE`) and a load generator.
//!
//! The server runs in this process, its store in a temporary directory unless `--data`
//! names one. Each of the ten roles (frontend, catalog, recommend, orders, cache,
//! metadata, storage-1 to -3, queue) exports OTLP/HTTP to the ingest port, and an
//! untraced Poisson load generator drives the frontend through an edge proxy that has no
//! instrumentation (`demo/src/edge.rs`): it runs under socket capture, and the demo's
//! agent (`crate::demo_sources`) infers its part of each request and joins it to the
//! request's trace, a pass a second (`--no-edge` sends the load straight to the
//! frontend). The
//! demo's faults are on purpose
//! (`demo/src/lib.rs`); its expectations are `demo/expectations/shop.pip`. With `--logs
//! DIR` each process also writes `tracing`'s fmt output there, for `causeway logs`.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use causeway_demo::edge::EDGE_VAR;
use causeway_demo::{
    Load, Role, Topology, PIVOT_HUB_VAR, SHOP_QUERY, SHOP_TRACEPOINTS, TOPOLOGY_VAR,
};
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
    /// Where each process writes its ordinary log (`tracing`'s fmt output, each line
    /// ending with its trace id), DIR/<service>.log (default: `logs` in the data
    /// directory). The demo follows them as `causeway agent --logs` does: each line goes to
    /// its request's trace; `causeway logs DIR` stitches them without the ids.
    #[arg(long, value_name = "DIR")]
    logs: Option<PathBuf>,
    /// No edge proxy: the load goes straight to the frontend. By default an edge with no
    /// instrumentation at all stands in front of it, run under socket capture, and its
    /// part of each request is inferred and joined to the request's trace; without it
    /// every process is instrumented (the ground truth `causeway-bench infer-demo` scores
    /// inference against).
    #[arg(long)]
    no_edge: bool,
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

/// Addresses for every role, and one for the edge, on distinct free loopback ports (all
/// held until all are chosen).
fn free_ports() -> Result<(Topology, SocketAddr)> {
    let mut topology = Topology::default();
    let mut held = Vec::new();
    let mut free = || -> Result<SocketAddr> {
        let l = TcpListener::bind("127.0.0.1:0").context("finding a free port")?;
        let addr = l.local_addr()?;
        held.push(l);
        Ok(addr)
    };
    for role in Role::ALL {
        topology.insert(role, free()?);
    }
    let edge = free()?;
    Ok((topology, edge))
}

fn spawn_nodes(
    topology: &Topology,
    otlp: &str,
    hub: &str,
    logs: &Path,
    plain_log: Option<&str>,
) -> Result<Vec<NodeProcess>> {
    let exe = std::env::current_exe().context("finding the causeway executable")?;
    let mut nodes = Vec::new();
    for (role, _) in topology.iter() {
        let mut command = Command::new(&exe);
        command
            .args(["demo-node", role.service()])
            .env(TOPOLOGY_VAR, topology.to_string())
            .env("CAUSEWAY_OTLP_ENDPOINT", otlp)
            .env(PIVOT_HUB_VAR, hub)
            .env(causeway_demo::logs::LOGS_VAR, logs)
            .env(
                causeway_demo::logs::PLAIN_LOGS_VAR,
                plain_log.unwrap_or_default(),
            );
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
        pivot_tracepoints: vec![("shop.pivot".into(), SHOP_TRACEPOINTS.into())],
        ..a.listen.config(data.clone())
    };
    let logs = a.logs.clone().unwrap_or_else(|| data.join("logs"));
    let checkpoint = data.join("demo-logs.checkpoint");
    let captures = data.join("captures");
    let shown = match &config.clickhouse {
        Some(c) => format!("spans in {}, spool in {}", c.endpoint, data.display()),
        None => format!("data in {}", data.display()),
    };
    let result = crate::runtime()?.block_on(async move {
        let server = causeway_server::start(config).await?;
        let (topology, edge) = free_ports()?;
        let otlp = format!("http://{}/v1/traces", loopback(server.ingest_addr));
        let ingest = format!("http://{}", loopback(server.ingest_addr));
        let http = format!("http://{}", loopback(server.http_addr));
        std::fs::create_dir_all(&logs)
            .with_context(|| format!("creating the log directory {}", logs.display()))?;
        if let Err(e) = install_query(&http) {
            statusln!("warning: the example Pivot Tracing query was not installed: {e:#}");
        }
        let edge = (!a.no_edge).then_some(edge);
        // Partly instrumented, as real systems are: with the edge, one service's log
        // prints no ids either. Without it, every line names its trace (ground truth).
        let plain_log = edge.map(|_| PLAIN_LOG);
        let join = edge.map(|_| http.clone());
        let edge_capture = edge.map(|_| crate::demo_sources::EdgeCapture {
            dir: captures.clone(),
            node: ("edge".into(), "demo-node edge".into()),
            host: EDGE_HOST.into(),
        });
        let follower =
            crate::demo_sources::follow_sources(&logs, &ingest, checkpoint, join, edge_capture)?;
        let mut nodes = spawn_nodes(&topology, &otlp, &http, &logs, plain_log)?;
        let started = tokio::task::block_in_place(|| {
            if let Some(edge) = edge {
                nodes.push(spawn_edge(edge, topology.addr(Role::Frontend)?, &captures)?);
            }
            wait_ready(&topology, &mut nodes, Duration::from_secs(20))?;
            let edge: Vec<(String, SocketAddr)> =
                edge.map(|e| ("edge".to_string(), e)).into_iter().collect();
            wait_listening(&edge, &mut nodes, Duration::from_secs(20))
        });
        if let Err(e) = started {
            stop_nodes(nodes);
            follower.stop();
            server.shutdown().await;
            return Err(e);
        }
        let ui = format!("http://{}/", loopback(server.http_addr));
        statusln!("causeway demo is running ({shown})");
        if let Some(edge) = edge {
            statusln!("  {:<10} {edge} (no instrumentation, captured: its part of each request inferred and joined)", "edge");
        }
        for (role, addr) in topology.iter() {
            statusln!("  {:<10} {addr}", role.service());
        }
        statusln!("  OTLP/HTTP  {otlp}");
        statusln!(
            "  logs       {} (each line in its trace; {}; stitched without ids: causeway logs {} --collector {ingest})",
            logs.display(),
            match plain_log {
                Some(s) => format!("{s}'s prints no ids: stitched and joined"),
                None => "every line names its trace".into(),
            },
            logs.display(),
        );
        statusln!("  Pivot      the shop's tracepoints and a query (the Pivot page; causeway pivot list --server {http})");
        statusln!("open the UI: {ui}");
        let until = match a.duration {
            Some(d) => format!("for {d}"),
            None => "until Ctrl-C".into(),
        };
        statusln!("sending {} requests/s {until}", a.rate);
        let load = Load::new(edge.unwrap_or(topology.addr(Role::Frontend)?), a.rate)?;
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
        let plain = tokio::task::block_in_place(|| {
            stop_nodes(nodes);
            // The lines written and the requests captured last go too.
            follower.stop()
        });
        if edge.is_some() {
            // The server takes the paths the last bytes sent hold, settled or not.
            if let Err(e) = server.settle_captures().await {
                statusln!("warning: the edge's last requests were not joined: {e}");
            }
            let r = server.capture_report();
            statusln!(
                "edge: the parts of {} requests joined, p50 {:.1} s, p99 {:.1} s after they began; inferring a window took p50 {:.1} ms ({} messages), at most {:.1} ms, in {} passes",
                r.paths,
                r.freshness_p50_ms / 1e3,
                r.freshness_p99_ms / 1e3,
                r.pass_p50_ms,
                r.pass_messages_p50,
                r.pass_max_ms,
                r.inferring_passes
            );
        }
        if let (f, Some(service)) = (&plain, plain_log) {
            statusln!(
                "{service}'s plain log: {} requests stitched and sent, p50 {:.1} s, p99 {:.1} s after they began",
                f.requests,
                f.p50.as_secs_f64(),
                f.p99.as_secs_f64()
            );
        }
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

/// The host the demo names its edge proxy's node (as its processes name theirs).
const EDGE_HOST: &str = "edge-1";

/// The service whose log prints no ids when the edge runs: its lines reach their traces
/// only by stitching and joining. The catalog serves every home page, so the concurrency
/// its lines must be told apart under is the shop's highest.
const PLAIN_LOG: &str = "catalog";

/// Starts the edge proxy at `listen` in front of `upstream`, its socket calls captured
/// into `captures` (as `causeway capture` would).
fn spawn_edge(listen: SocketAddr, upstream: SocketAddr, captures: &Path) -> Result<NodeProcess> {
    std::fs::create_dir_all(captures)
        .with_context(|| format!("creating {}", captures.display()))?;
    let exe = std::env::current_exe().context("finding the causeway executable")?;
    let child = Command::new(exe)
        .args(["demo-node", "edge"])
        .env(EDGE_VAR, format!("{listen} {upstream}"))
        .env("LD_PRELOAD", crate::capture::library_file()?)
        .env(causeway_blackbox::format::DIR_VAR, captures)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .context("starting the edge process")?;
    Ok(NodeProcess {
        label: "edge".into(),
        child,
    })
}

/// Installs the shop's example Pivot Tracing query on the hub at `http`.
fn install_query(http: &str) -> Result<()> {
    crate::client::Client::new(http, None).post_json(
        "/api/pivot/queries",
        &serde_json::json!({ "query": SHOP_QUERY }),
    )?;
    Ok(())
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
    if role == "edge" {
        let var = std::env::var(EDGE_VAR).with_context(|| {
            format!("{EDGE_VAR} is not set (demo-node is run by causeway demo)")
        })?;
        let (listen, upstream) = var
            .split_once(' ')
            .with_context(|| format!("{EDGE_VAR}={var:?} is not `LISTEN UPSTREAM`"))?;
        return causeway_demo::edge::run_edge(listen.parse()?, upstream.parse()?)
            .map_err(|e| anyhow::anyhow!("edge: {e}"));
    }
    let role: Role = role.parse()?;
    let topology: Topology = std::env::var(TOPOLOGY_VAR)
        .with_context(|| format!("{TOPOLOGY_VAR} is not set (demo-node is run by causeway demo)"))?
        .parse()?;
    let otlp =
        std::env::var("CAUSEWAY_OTLP_ENDPOINT").context("CAUSEWAY_OTLP_ENDPOINT is not set")?;
    causeway_demo::run_node(role, topology, &otlp).map_err(|e| anyhow::anyhow!("{role}: {e}"))
}
