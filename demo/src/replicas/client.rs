//! A StressTest client: reads every file `reads` times, one trace per read.

use std::time::{Duration, Instant};

use causeway::middleware::reqwest::TracedRequest;
use causeway::SpanExt;
use tracing::Instrument;

use super::{File, Latencies, Setup, LATENCY_PREFIX};
use crate::BoxError;

pub(super) async fn run(setup: &Setup, host: &str) -> Result<(), BoxError> {
    // The parent says when every process runs the queries: wait for its line.
    wait_for_go().await?;
    if setup.repeat {
        // Live mode reads until the parent closes stdin.
        return tokio::select! {
            r = workload(setup, host) => r.map(|_| ()),
            _ = crate::stopped() => Ok(()),
        };
    }
    let latencies = workload(setup, host).await?;
    if setup.report_latency {
        println!("{LATENCY_PREFIX}{}", serde_json::to_string(&latencies)?);
    }
    Ok(())
}

/// Reads every file `reads` times (in a loop in live mode); the latencies, if asked.
async fn workload(setup: &Setup, host: &str) -> Result<Latencies, BoxError> {
    let http = reqwest::Client::new();
    let files = setup.layout.files();
    let pad = setup.pad();
    let mut latencies = Latencies::default();
    let cpu_before = super::cpu_ns(std::process::id());
    loop {
        for file in &files {
            for _ in 0..setup.layout.reads {
                let op = tracing::info_span!(
                    target: "replicas::client",
                    "do_next_op",
                    src = %file.name,
                    pad = pad.as_deref()
                );
                if let Some((key, value)) = &setup.carried_baggage {
                    op.set_baggage(key, value);
                }
                let started = Instant::now();
                let open = read(&http, setup, host, file).instrument(op).await?;
                if setup.report_latency {
                    latencies.open_ns.push(nanos(open));
                    latencies.read_ns.push(nanos(started.elapsed()));
                }
                if setup.repeat {
                    // Live mode: a steady trickle, not a busy loop.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                } else if setup.pause_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(setup.pause_ms)).await;
                }
            }
        }
        if !setup.repeat {
            let cpu_after = super::cpu_ns(std::process::id());
            latencies.cpu_ns = cpu_before.zip(cpu_after).map(|(b, a)| a.saturating_sub(b));
            return Ok(latencies);
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

async fn wait_for_go() -> Result<(), BoxError> {
    use tokio::io::AsyncBufReadExt;
    let mut line = String::new();
    tokio::io::BufReader::new(tokio::io::stdin())
        .read_line(&mut line)
        .await?;
    if line.trim() != "go" {
        return Err("stdin closed before the go signal".into());
    }
    Ok(())
}

/// One read; how long asking the NameNode took.
async fn read(
    http: &reqwest::Client,
    setup: &Setup,
    host: &str,
    file: &File,
) -> Result<Duration, BoxError> {
    let nn = setup.namenode;
    let asked = Instant::now();
    // File names are `/A-B-C/0`: nothing in them needs escaping in a query string.
    let answer = async {
        http.get(format!(
            "http://{nn}/locations?file={}&client={host}",
            file.name
        ))
        .send_traced()
        .await?
        .error_for_status()?
        .bytes()
        .await
    }
    .instrument(tracing::info_span!(target: "replicas::client", "get_block_locations"))
    .await?;
    let open = asked.elapsed();
    let locations: Vec<String> = serde_json::from_slice(&answer)?;
    let first = locations
        .first()
        .ok_or("the NameNode returned no location")?;
    let dn = setup
        .datanodes
        .get(first)
        .ok_or_else(|| format!("no DataNode on host {first}"))?;
    let size = setup.layout.read_size;
    let bytes = async {
        http.get(format!("http://{dn}/read?file={}&size={size}", file.name))
            .send_traced()
            .await?
            .error_for_status()?
            .bytes()
            .await
    }
    .instrument(tracing::info_span!(target: "replicas::client", "read_block"))
    .await?;
    if bytes.len() != setup.layout.read_size {
        return Err(format!("read {} bytes of {}", bytes.len(), setup.layout.read_size).into());
    }
    Ok(open)
}
