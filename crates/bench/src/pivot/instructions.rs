//! `causeway-bench pivot --instructions`: what each configuration costs a read in
//! instructions, every process of the system counted by valgrind's callgrind. Time on a
//! shared VM moves with the host's load; instruction counts do not, so this resolves
//! differences far below what latency runs can.
//!
//! Each configuration runs twice, with `--reads` and twice as many reads of each file;
//! the difference over the reads the second run adds is the cost of a read. Counted on
//! each process's main thread, which runs every request (the replicas' runtimes are
//! single-threaded), inside the runtime only and from the moment the clients start: the
//! span writer's and the agent's threads, start-up and shutdown work by the clock, which
//! valgrind stretches. Queries are installed before the processes start and the agents
//! report every ten minutes, so both runs make the same reports.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use causeway_demo::replicas::Layout;
use serde_json::json;

use super::{queries_of, Config, PivotArgs, PAD_VALUES};
use causeway_cli::client::Client;
use causeway_cli::replicas::{wait_acknowledged, Options, System};

/// The agents' report interval in this mode: longer than any run.
pub(super) const REPORT_INTERVAL: Duration = Duration::from_secs(600);

/// Instructions per process label in one run.
type Counts = BTreeMap<String, u64>;

pub(super) fn measure(
    a: &PivotArgs,
    configs: &[Config],
    layout: &Layout,
    http: &str,
    ingest: SocketAddr,
) -> Result<()> {
    let version = Command::new("valgrind")
        .arg("--version")
        .output()
        .context("--instructions runs every process under valgrind: is it installed?")?;
    if !version.status.success() {
        bail!("valgrind --version failed");
    }
    let client = Client::new(http, None);
    let keep = a.profiles.clone();
    let dir = keep.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("causeway-instructions-{}", std::process::id()))
    });
    let progress = causeway_cli::progress::bar((configs.len() * 2) as u64, "runs under callgrind");
    let mut per_read: Vec<(Config, BTreeMap<&'static str, f64>)> = Vec::new();
    let result = (|| -> Result<()> {
        for &config in configs {
            let mut counts = Vec::new();
            for reads in [a.reads, 2 * a.reads] {
                let layout = Layout {
                    reads,
                    ..layout.clone()
                };
                let out = dir.join(format!("{}-{reads}", config.name()));
                counts.push(count_once(&client, &layout, http, ingest, config, &out)?);
                progress.inc(1);
            }
            // The second run reads each file twice as often: it adds one run's reads.
            let added = layout.requests() as f64;
            per_read.push((config, by_role(&counts[0], &counts[1], added)?));
        }
        Ok(())
    })();
    progress.finish_and_clear();
    if keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result?;
    report(a, layout, &per_read)
}

/// Runs the workload once in `config` with every process under callgrind; instructions
/// per process.
fn count_once(
    client: &Client,
    layout: &Layout,
    http: &str,
    ingest: SocketAddr,
    config: Config,
    out: &Path,
) -> Result<Counts> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    // Installed first: every agent gets the queries with the report it makes at start.
    let queries = queries_of(client, config)?;
    let options = Options {
        hub: (config != Config::Off).then(|| http.to_string()),
        repeat: false,
        report_latency: false,
        pad_values: PAD_VALUES,
        pause_ms: 0,
        program: crate::harness::causeway_exe()?,
        carried_baggage: (config == Config::Bag60).then(super::carried_bag),
        wrap: vec![
            "valgrind".into(),
            "--tool=callgrind".into(),
            "--quiet".into(),
            "--separate-threads=yes".into(),
            // Only inside the runtime: not start-up or shutdown, whose instruction counts
            // vary with time (the clock's calibration, waits for the span writer).
            "--toggle-collect=tokio::runtime::runtime::Runtime::block_on".into(),
            format!("--callgrind-out-file={}/%p.out", out.display()),
        ],
    };
    let started = System::start(layout, ingest, options);
    let outcome = started.and_then(|mut system| {
        let pids = system.pids();
        let ran = (|| {
            if !queries.is_empty() {
                wait_acknowledged(client, system.processes, Duration::from_secs(300))?;
            }
            // The connections' set-up and the acknowledgements are not counted.
            for (label, pid) in &pids {
                callgrind_control("--zero", label, *pid)?;
            }
            system.go()?;
            system.wait_clients()?;
            // The clients' counts end at their exit; the servers' here.
            for (label, pid) in pids.iter().filter(|(l, _)| role(l) != "clients") {
                callgrind_control("--dump", label, *pid)?;
            }
            Ok(())
        })();
        system.stop();
        ran.map(|()| pids)
    });
    let uninstalled: Result<()> = queries
        .iter()
        .try_for_each(|(id, _)| client.delete(&format!("/api/pivot/queries/{id}")));
    // The run's own error first: an uninstall that failed after it says less.
    let pids = outcome?;
    uninstalled?;
    let mut counts = Counts::new();
    for (label, pid) in pids {
        // Thread 1, the main thread: the processes' runtimes are single-threaded, so it
        // runs every request. The span writer's and the agent's threads (their work
        // batched by time, which valgrind stretches) are left out.
        let file = if role(&label) == "clients" {
            out.join(format!("{pid}.out-01"))
        } else {
            out.join(format!("{pid}.out.1-01"))
        };
        counts.insert(label.clone(), total_of(&file, &label)?);
    }
    Ok(counts)
}

/// Zeroes or dumps the counters of a process running under callgrind.
fn callgrind_control(action: &str, label: &str, pid: u32) -> Result<()> {
    let out = Command::new("callgrind_control")
        .arg(action)
        .arg(pid.to_string())
        .output()
        .with_context(|| format!("{label}: running callgrind_control {action}"))?;
    if !out.status.success() {
        bail!(
            "{label}: callgrind_control {action} {pid} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The instruction total of a callgrind output file.
fn total_of(file: &Path, label: &str) -> Result<u64> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("{label}: reading {}", file.display()))?;
    text.lines()
        .find_map(|l| {
            l.strip_prefix("summary:")
                .or_else(|| l.strip_prefix("totals:"))
        })
        .and_then(|v| v.trim().parse::<u64>().ok())
        .with_context(|| format!("{label}: no instruction total in {}", file.display()))
}

/// Which role a process label belongs to.
fn role(label: &str) -> &'static str {
    if label.starts_with("StressTest") {
        "clients"
    } else if label.starts_with("NameNode") {
        "namenode"
    } else {
        "datanodes"
    }
}

/// Instructions per added read, by role and in all.
fn by_role(short: &Counts, long: &Counts, added_reads: f64) -> Result<BTreeMap<&'static str, f64>> {
    let mut out: BTreeMap<&'static str, f64> = BTreeMap::new();
    // Process labels are the same in both runs (pids are not).
    for (label, n) in long {
        let before = short
            .get(label)
            .with_context(|| format!("{label} ran in the longer run only"))?;
        let per_read = (*n as f64 - *before as f64) / added_reads;
        *out.entry(role(label)).or_default() += per_read;
        *out.entry("total").or_default() += per_read;
    }
    Ok(out)
}

fn report(
    a: &PivotArgs,
    layout: &Layout,
    per_read: &[(Config, BTreeMap<&'static str, f64>)],
) -> Result<()> {
    let off = per_read
        .iter()
        .find(|(c, _)| *c == Config::Off)
        .map(|(_, r)| r.clone())
        .context("no `off` run")?;
    let roles = ["clients", "namenode", "datanodes", "total"];
    let rows: Vec<serde_json::Value> = per_read
        .iter()
        .map(|(c, r)| {
            let mut row = json!({ "config": c.name() });
            for role in roles {
                let n = r.get(role).copied().unwrap_or(f64::NAN);
                let base = off.get(role).copied().unwrap_or(f64::NAN);
                row[role] = json!({
                    "instructions_per_read": n,
                    "overhead_pct": 100.0 * (n / base - 1.0),
                });
            }
            row
        })
        .collect();
    let reads = layout.requests();
    if a.json {
        outln!(
            "{}",
            json!({ "reads_added_per_config": reads, "instructions": rows })
        );
        return Ok(());
    }
    outln!(
        "instructions per read under callgrind, on the main thread of every process of the system ({reads} reads added per configuration)"
    );
    outln!(
        "{:<9} {:>22} {:>22} {:>22} {:>22}",
        "config",
        "clients",
        "namenode",
        "datanodes",
        "total"
    );
    for r in &rows {
        let cell = |role: &str| {
            format!(
                "{:>9.0} ({:>+7.2}%)",
                r[role]["instructions_per_read"]
                    .as_f64()
                    .unwrap_or(f64::NAN),
                r[role]["overhead_pct"].as_f64().unwrap_or(f64::NAN)
            )
        };
        outln!(
            "{:<9} {:>22} {:>22} {:>22} {:>22}",
            r["config"].as_str().unwrap_or_default(),
            cell("clients"),
            cell("namenode"),
            cell("datanodes"),
            cell("total")
        );
    }
    Ok(())
}
