//! A StressTest client: reads every file `reads` times, one trace per read.

use std::time::Duration;

use causeway::middleware::reqwest::TracedRequest;
use tracing::Instrument;

use super::{File, Setup};
use crate::BoxError;

pub(super) async fn run(setup: &Setup, host: &str) -> Result<(), BoxError> {
    // The parent says when every process runs the queries: wait for its line.
    wait_for_go().await?;
    let http = reqwest::Client::new();
    let files = setup.layout.files();
    loop {
        for file in &files {
            for _ in 0..setup.layout.reads {
                let op =
                    tracing::info_span!(target: "replicas::client", "do_next_op", src = %file.name);
                read(&http, setup, host, file).instrument(op).await?;
                if setup.repeat {
                    // Live mode: a steady trickle, not a busy loop.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        if !setup.repeat {
            return Ok(());
        }
    }
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

async fn read(
    http: &reqwest::Client,
    setup: &Setup,
    host: &str,
    file: &File,
) -> Result<(), BoxError> {
    let nn = setup.namenode;
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
    Ok(())
}
