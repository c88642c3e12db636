//! `causeway-bench pivot`: Pivot Tracing end to end on `causeway demo replicas`.
//!
//! - Overhead: the system runs its workload once per configuration and round, the
//!   configurations interleaved (their order rotates each round), fresh processes each
//!   run: `off` (no Pivot Tracing agent), `enabled` (the agent reports to the hub, no
//!   query), `bag60` (each request carries a bag of 60 tuples, about 1 kB, that no advice
//!   reads: the paper's configuration), `pack60` (a query packs 60 tuples into each
//!   request's bag at the client, and nothing reads them) and `q3-q7` (the paper's Q3 to
//!   Q7 installed). Clients time every request;
//!   each run gives the median latency of the NameNode lookup (the shortest request) and
//!   of the whole read. A configuration's overhead is the mean over rounds of its
//!   median's ratio to `off`'s in the same round, with a 95% confidence interval.
//! - Instructions (`--instructions`, `instructions.rs`): the same configurations with
//!   every process under valgrind's callgrind, counted per read on each process's main
//!   thread; deterministic where timings on a shared VM are not.
//! - Install to first result: a system reads in a loop; at a random point of the
//!   agents' report cycle a query is installed, the hub asked for its results until a
//!   group appears, and the query uninstalled; the time, in report intervals.

use std::io::BufRead as _;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use causeway_demo::replicas::{
    host_names, Latencies, Layout, Selection, LATENCY_PREFIX, PAPER_QUERIES, TRACEPOINTS,
};
use causeway_server::ServerConfig;
use clap::Args;
use serde_json::json;

use crate::stats::{mean_ci, median};
use causeway_cli::client::Client;
use causeway_cli::nodes::{data_dir, loopback};
use causeway_cli::replicas::{install, wait_acknowledged, Options, System};

mod instructions;

#[derive(Args)]
pub struct PivotArgs {
    /// Rounds; each runs every configuration once.
    #[arg(long, default_value_t = 10)]
    rounds: usize,
    /// Hosts, named A, B, C, ... (one DataNode and the clients of each).
    #[arg(long, default_value_t = 3)]
    hosts: usize,
    /// Client processes per host.
    #[arg(long, default_value_t = 1)]
    clients_per_host: usize,
    /// Files each 3-host subset holds.
    #[arg(long, default_value_t = 4)]
    files_per_set: usize,
    /// Reads of every file by each client per run (the first tenth of each client's
    /// requests warm up and are not counted).
    #[arg(long, default_value_t = 300)]
    reads: usize,
    /// Installs timed, after one to warm up (0 skips the install measurement).
    #[arg(long, default_value_t = 10)]
    installs: usize,
    /// The agents' report interval, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    interval_ms: u64,
    /// The configurations to run besides `off` (the baseline, always run), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [Config::Enabled, Config::Bag60, Config::Pack60, Config::Paper])]
    configs: Vec<Config>,
    /// Milliseconds each client waits after each read (0: a closed loop, every core
    /// busy).
    #[arg(long, default_value_t = 0)]
    pause_ms: u64,
    /// Count instructions per read instead of timing: every process runs under
    /// valgrind's callgrind, each configuration with --reads and twice as many (keep
    /// --reads small: valgrind runs programs about fifty times slower).
    #[arg(long)]
    instructions: bool,
    /// With --instructions: keep callgrind's output files in this directory (one
    /// subdirectory per configuration and run; `NNN.out.1-01` is a server's main thread,
    /// `NNN.out-01` a client's), to read with callgrind_annotate.
    #[arg(long, requires = "instructions")]
    profiles: Option<std::path::PathBuf>,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
}

/// A query whose only advice packs each request's 60 `pad` values at the client: the
/// tuples travel with every call and response, and nothing unpacks them.
const PACK60: &str = r#"
Tracepoint Bench.Pad = span(target = "replicas::client", name = "do_next_op")
  Export pad = explode(pad, ",")
Tracepoint Bench.Never = event(target = "bench::never")
From n In Bench.Never
Join p In Bench.Pad On p -> n
GroupBy p.pad
Select p.pad, COUNT
"#;

/// Values in each request's `pad` field, in every configuration (so that only `pack60`'s
/// packing them differs from `enabled`), and tuples in `bag60`'s bag.
const PAD_VALUES: usize = 60;

/// `bag60`'s W3C baggage member: a Pivot Tracing bag of 60 tuples (the `pad` values)
/// under a query id no process runs, so nothing decodes or packs it.
fn carried_bag() -> (String, String) {
    use causeway_pivot::bag::{BagKey, Bags};
    use causeway_pivot::value::Value;
    use causeway_pivot::wire::{encode_text, BAGGAGE_MEMBER, MAX_BYTES};
    let values: Vec<Value> = (0..PAD_VALUES)
        .map(|i| Value::from(format!("pad-tuple-{i:04}").as_str()))
        .collect();
    let mut bag = Bags::default();
    let mut next = 0;
    let key = BagKey {
        query: u32::MAX,
        bag: 0,
    };
    let tuples = values.iter().map(|v| (std::iter::once(v), 1));
    bag.pack_grouped(key, tuples, &mut || {
        next += 1;
        next
    });
    let text = encode_text(&bag, MAX_BYTES).unwrap_or_default();
    (BAGGAGE_MEMBER.to_string(), text)
}

#[derive(Clone, Copy, PartialEq, Debug, clap::ValueEnum)]
enum Config {
    /// No Pivot Tracing agent: the baseline.
    Off,
    /// Agents report to the hub; no query.
    Enabled,
    /// Each request carries a bag of 60 tuples (about 1 kB) that no advice reads: the
    /// paper's "baggage containing 60 tuples, no advice installed".
    Bag60,
    /// A query packs 60 tuples into each request's bag at the client; nothing reads them.
    Pack60,
    /// The paper's Q3 to Q7 installed.
    #[value(name = "q3-q7")]
    Paper,
}

impl std::fmt::Display for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Config {
    fn name(self) -> &'static str {
        match self {
            Config::Off => "off",
            Config::Enabled => "enabled",
            Config::Bag60 => "bag60",
            Config::Pack60 => "pack60",
            Config::Paper => "q3-q7",
        }
    }
}

/// One run's median latencies and the CPU time a read took, in nanoseconds.
#[derive(Clone, Copy)]
struct Run {
    open: f64,
    read: f64,
    /// The system's CPU time over the workload (clients and servers; not this process's
    /// hub and collector, whose store's background work would drown the difference),
    /// per read; NaN where it cannot be read.
    cpu: f64,
    /// The clients' share of `cpu`.
    cpu_clients: f64,
}

pub fn run(a: PivotArgs) -> Result<()> {
    if a.rounds < 2 && !a.instructions {
        bail!(
            "--rounds {}: at least 2, for a confidence interval",
            a.rounds
        );
    }
    let hosts = host_names(a.hosts).map_err(|e| anyhow::anyhow!("--hosts: {e}"))?;
    let layout = Layout {
        order: hosts.clone(),
        hosts,
        selection: Selection::First,
        seed: 1,
        files_per_set: a.files_per_set,
        clients_per_host: a.clients_per_host,
        reads: a.reads,
        read_size: 8192,
    };
    let (data, temporary) = data_dir(None);
    let config = ServerConfig {
        data_dir: data.clone(),
        http_addr: "127.0.0.1:0".parse()?,
        ingest_addr: "127.0.0.1:0".parse()?,
        grpc_addr: "127.0.0.1:0".parse()?,
        store: causeway_store::StoreOptions {
            fsync: causeway_store::FsyncPolicy::Interval(Duration::from_millis(200)),
            ..causeway_store::StoreOptions::default()
        },
        pivot_tracepoints: vec![("replicas.pivot".into(), TRACEPOINTS.into())],
        pivot_interval: if a.instructions {
            instructions::REPORT_INTERVAL
        } else {
            Duration::from_millis(a.interval_ms)
        },
        ..ServerConfig::default()
    };
    let result = causeway_cli::runtime()?.block_on(async move {
        let server = causeway_server::start(config).await?;
        let http = format!("http://{}", loopback(server.http_addr));
        let ingest = server.ingest_addr;
        let result = tokio::task::block_in_place(|| measure(&a, &layout, &http, ingest));
        server.shutdown().await;
        result
    });
    if temporary {
        let _ = std::fs::remove_dir_all(&data);
    }
    result
}

fn measure(a: &PivotArgs, layout: &Layout, http: &str, ingest: SocketAddr) -> Result<()> {
    let client = Client::new(http, None);
    let mut configs = vec![Config::Off];
    for c in &a.configs {
        if !configs.contains(c) {
            configs.push(*c);
        }
    }
    if a.instructions {
        return instructions::measure(a, &configs, layout, http, ingest);
    }
    let installs_run = if a.installs > 0 { a.installs + 1 } else { 0 };
    let progress = causeway_cli::progress::bar(
        (a.rounds * configs.len() + installs_run) as u64,
        "runs and installs",
    );
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); configs.len()];
    for round in 0..a.rounds {
        for k in 0..configs.len() {
            let at = (round + k) % configs.len();
            let run = run_once(&client, layout, http, ingest, configs[at], a.pause_ms)?;
            runs[at].push(run);
            progress.inc(1);
        }
    }
    let installs = if a.installs > 0 {
        install_to_first_result(&client, layout, http, ingest, a, &progress)?
    } else {
        Vec::new()
    };
    progress.finish_and_clear();
    report(a, layout, &configs, &runs, &installs)
}

/// Runs the workload once in `config`; the clients' median latencies.
fn run_once(
    client: &Client,
    layout: &Layout,
    http: &str,
    ingest: SocketAddr,
    config: Config,
    pause_ms: u64,
) -> Result<Run> {
    let options = Options {
        hub: (config != Config::Off).then(|| http.to_string()),
        repeat: false,
        report_latency: true,
        pad_values: PAD_VALUES,
        pause_ms,
        program: crate::harness::causeway_exe()?,
        wrap: Vec::new(),
        carried_baggage: (config == Config::Bag60).then(carried_bag),
    };
    let mut system = System::start(layout, ingest, options)?;
    let outcome: Result<(Latencies, Option<u64>)> = (|| {
        let queries = queries_of(client, config)?;
        if !queries.is_empty() {
            wait_acknowledged(client, system.processes, Duration::from_secs(60))?;
        }
        let servers_before = system.servers_cpu_ns();
        system.go()?;
        let latencies = collect(&mut system)?;
        system.wait_clients()?;
        let since = |after: Option<u64>, before: Option<u64>| {
            after.zip(before).map(|(a, b)| a.saturating_sub(b))
        };
        let servers = since(system.servers_cpu_ns(), servers_before);
        for (id, _) in &queries {
            client.delete(&format!("/api/pivot/queries/{id}"))?;
        }
        let cpu = [latencies.cpu_ns, servers].into_iter().sum();
        Ok((latencies, cpu))
    })();
    system.stop();
    let (all, cpu) = outcome?;
    // Every read, the warm-up's too: the CPU time covers them all.
    let reads = layout.requests() as f64;
    let run = Run {
        open: median(all.open_ns.iter().map(|n| *n as f64).collect())
            .context("the clients reported no latency")?,
        read: median(all.read_ns.iter().map(|n| *n as f64).collect())
            .context("the clients reported no latency")?,
        cpu: cpu.map_or(f64::NAN, |ns| ns as f64 / reads),
        cpu_clients: all.cpu_ns.map_or(f64::NAN, |ns| ns as f64 / reads),
    };
    Ok(run)
}

/// Installs the configuration's queries (none for `off` and `enabled`).
fn queries_of(client: &Client, config: Config) -> Result<Vec<(u64, String)>> {
    match config {
        Config::Off | Config::Enabled | Config::Bag60 => Ok(Vec::new()),
        Config::Pack60 => install(client, PACK60, "pack60"),
        Config::Paper => install(client, &paper_q3_to_q7(), "paper"),
    }
}

/// The paper's Q3 to Q7, each with the named queries before it.
fn paper_q3_to_q7() -> String {
    PAPER_QUERIES
        .split("\n\n")
        .filter(|q| {
            let t = q.trim_start();
            ["Q3", "Q4", "Q5", "Q6", "Q7"]
                .iter()
                .any(|n| t.starts_with(&format!("{n} ")))
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Reads every client's latency line.
fn collect(system: &mut System) -> Result<Latencies> {
    let mut all = Latencies {
        cpu_ns: Some(0),
        ..Latencies::default()
    };
    for w in system.workers.iter_mut() {
        let out = w
            .child
            .stdout
            .take()
            .with_context(|| format!("{} has no output to read", w.label))?;
        let line = std::io::BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .find_map(|l| l.strip_prefix(LATENCY_PREFIX).map(str::to_owned))
            .with_context(|| format!("{} reported no latencies", w.label))?;
        let mine: Latencies = serde_json::from_str(&line)
            .with_context(|| format!("reading {}'s latencies", w.label))?;
        // A fresh process's first requests open connections and fill caches: the
        // first tenth of each client's are left out.
        let warm = |v: Vec<u64>| {
            let skip = v.len() / 10;
            v.into_iter().skip(skip)
        };
        all.open_ns.extend(warm(mine.open_ns));
        all.read_ns.extend(warm(mine.read_ns));
        all.cpu_ns = all.cpu_ns.zip(mine.cpu_ns).map(|(a, b)| a + b);
    }
    Ok(all)
}

/// Times installs of Q3 against a system that reads in a loop: seconds from the install
/// to the first group in its results.
fn install_to_first_result(
    client: &Client,
    layout: &Layout,
    http: &str,
    ingest: SocketAddr,
    a: &PivotArgs,
    progress: &indicatif::ProgressBar,
) -> Result<Vec<f64>> {
    let options = Options {
        hub: Some(http.to_string()),
        repeat: true,
        report_latency: false,
        pad_values: 0,
        pause_ms: 0,
        program: crate::harness::causeway_exe()?,
        wrap: Vec::new(),
        carried_baggage: None,
    };
    let mut system = System::start(layout, ingest, options)?;
    let outcome: Result<Vec<f64>> = (|| {
        system.go()?;
        let q3 = "From dnop In DN.DataTransferProtocol GroupBy dnop.host Select dnop.host, COUNT";
        let mut took = Vec::new();
        for i in 0..=a.installs {
            // At a random point of the agents' report cycle, as a user would install.
            std::thread::sleep(Duration::from_millis(fastrand::u64(
                0..a.interval_ms.max(1),
            )));
            let started = Instant::now();
            let r = client.post_json("/api/pivot/queries", &json!({ "query": q3 }))?;
            let id = r["id"].as_u64().context("the hub answered without an id")?;
            let deadline = started + Duration::from_millis(a.interval_ms * 20);
            loop {
                let results = client.get(&format!("/api/pivot/queries/{id}/results"))?;
                if results["rows"].as_array().is_some_and(|r| !r.is_empty()) {
                    break;
                }
                if Instant::now() > deadline {
                    bail!("query {id} had no result after {:?}", started.elapsed());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // The first install waits for the processes to connect: not counted.
            if i > 0 {
                took.push(started.elapsed().as_secs_f64());
            }
            client.delete(&format!("/api/pivot/queries/{id}"))?;
            progress.inc(1);
        }
        Ok(took)
    })();
    system.stop();
    outcome
}

fn report(
    a: &PivotArgs,
    layout: &Layout,
    configs: &[Config],
    runs: &[Vec<Run>],
    installs: &[f64],
) -> Result<()> {
    let off = &runs[0];
    let mut rows = Vec::new();
    for (c, runs) in configs.iter().zip(runs) {
        let overhead = |pick: fn(&Run) -> f64| -> (f64, f64) {
            let ratios: Vec<f64> = runs
                .iter()
                .zip(off)
                .map(|(r, o)| 100.0 * (pick(r) / pick(o) - 1.0))
                .collect();
            mean_ci(&ratios)
        };
        let (open, open_ci) = overhead(|r| r.open);
        let (read, read_ci) = overhead(|r| r.read);
        let (cpu, cpu_ci) = overhead(|r| r.cpu);
        rows.push(json!({
            "config": c.name(),
            "open_median_us": median(runs.iter().map(|r| r.open / 1e3).collect()),
            "read_median_us": median(runs.iter().map(|r| r.read / 1e3).collect()),
            "open_overhead_pct": open,
            "open_overhead_ci_pct": open_ci,
            "read_overhead_pct": read,
            "read_overhead_ci_pct": read_ci,
            "cpu_per_read_us": median(runs.iter().map(|r| r.cpu / 1e3).collect()),
            "clients_cpu_per_read_us": median(runs.iter().map(|r| r.cpu_clients / 1e3).collect()),
            "cpu_overhead_pct": cpu,
            "cpu_overhead_ci_pct": cpu_ci,
        }));
    }
    let interval = a.interval_ms as f64 / 1e3;
    let in_intervals: Vec<f64> = installs.iter().map(|s| s / interval).collect();
    let install = json!({
        "installs": installs.len(),
        "interval_ms": a.interval_ms,
        "median_intervals": median(in_intervals.clone()),
        "max_intervals": in_intervals.iter().copied().fold(0.0, f64::max),
    });
    let requests = layout.requests();
    if a.json {
        outln!(
            "{}",
            json!({
                "rounds": a.rounds,
                "requests_per_run": requests,
                "overhead": rows,
                "install_to_first_result": install,
            })
        );
        return Ok(());
    }
    outln!(
        "{} rounds, {requests} reads per run, configurations interleaved; overhead against `off` in the same round, mean ± 95% CI",
        a.rounds
    );
    outln!(
        "{:<9} {:>10} {:>20} {:>10} {:>20} {:>12} {:>20} {:>19}",
        "config",
        "lookup µs",
        "lookup overhead",
        "read µs",
        "read overhead",
        "CPU/read µs",
        "CPU overhead",
        "clients' CPU/read µs"
    );
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        outln!(
            "{:<9} {:>10.1} {:>11.2}% ± {:>5.2} {:>10.1} {:>11.2}% ± {:>5.2} {:>12.1} {:>11.2}% ± {:>5.2} {:>19.1}",
            r["config"].as_str().unwrap_or_default(),
            f("open_median_us"),
            f("open_overhead_pct"),
            f("open_overhead_ci_pct"),
            f("read_median_us"),
            f("read_overhead_pct"),
            f("read_overhead_ci_pct"),
            f("cpu_per_read_us"),
            f("cpu_overhead_pct"),
            f("cpu_overhead_ci_pct"),
            f("clients_cpu_per_read_us"),
        );
    }
    if !installs.is_empty() {
        outln!(
            "install to first result over {} installs: median {:.2} intervals, max {:.2} (interval {} ms)",
            installs.len(),
            install["median_intervals"].as_f64().unwrap_or(f64::NAN),
            install["max_intervals"].as_f64().unwrap_or(f64::NAN),
            a.interval_ms
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_of_a_known_sample() {
        // Mean 2, sd 1, n 4: half-width t(3) * 1/2.
        let (mean, half) = mean_ci(&[1.0, 2.0, 3.0, 2.0]);
        assert!((mean - 2.0).abs() < 1e-12);
        let sd = (2.0f64 / 3.0).sqrt();
        assert!((half - 3.182 * sd / 2.0).abs() < 1e-9, "{half}");
        assert_eq!(median(vec![3.0, 1.0, 2.0, 10.0]), Some(2.5));
        assert_eq!(median(Vec::new()), None);
    }

    #[test]
    fn the_paper_queries_picked_are_q3_to_q7() {
        let text = paper_q3_to_q7();
        let names: Vec<&str> = text
            .split("\n\n")
            .filter_map(|q| q.split_whitespace().next())
            .collect();
        assert_eq!(names, ["Q3", "Q4", "Q5", "Q6", "Q7"]);
    }
}
