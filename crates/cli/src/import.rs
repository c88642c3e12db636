//! `causeway import`: files of spans in any supported format, sent to a collector in native
//! batches, with a progress bar.

use std::path::PathBuf;

use anyhow::{anyhow, Context, Result};
use causeway_model::codec::{self, jaeger, native, otlp, zipkin, Format};
use causeway_model::Span;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};

use crate::client::Client;

#[derive(Args)]
pub struct ImportArgs {
    /// Files of OTLP JSON, OTLP protobuf, Zipkin v2 JSON, Jaeger JSON or native records.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// The collector's ingest address (as for `agent`, `infer` and `logs`; `--ingest`
    /// is an older name for it).
    #[arg(long, alias = "ingest", default_value = "http://127.0.0.1:4318")]
    collector: String,
    /// Access token, if the collector requires one.
    #[arg(long, env = "CAUSEWAY_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Print the counts as JSON.
    #[arg(long)]
    json: bool,
}

/// Decodes one file, naming the format it was read as.
pub fn decode(bytes: &[u8]) -> Result<(Format, Vec<Span>, Vec<String>)> {
    let format = codec::detect(bytes);
    let (spans, problems) = match format {
        Format::Native => {
            let d = native::decode_stream(bytes);
            (d.spans, d.problems.iter().map(|p| p.to_string()).collect())
        }
        Format::OtlpJson => {
            let d = otlp::decode_json(bytes).map_err(|e| anyhow!("{e}"))?;
            (d.spans, d.rejected.iter().map(|p| p.to_string()).collect())
        }
        Format::OtlpProtobuf => {
            let d = otlp::decode_protobuf(bytes).map_err(|e| anyhow!("{e}"))?;
            (d.spans, d.rejected.iter().map(|p| p.to_string()).collect())
        }
        Format::ZipkinJson => {
            let d = zipkin::decode_json(bytes).map_err(|e| anyhow!("{e}"))?;
            (d.spans, d.rejected.iter().map(|p| p.to_string()).collect())
        }
        Format::JaegerJson => {
            let d = jaeger::decode_json(bytes).map_err(|e| anyhow!("{e}"))?;
            (d.spans, d.rejected.iter().map(|p| p.to_string()).collect())
        }
    };
    Ok((format, spans, problems))
}

const BATCH: usize = 5_000;

/// Sends spans to a collector's native ingest in batches; the spans it accepted and
/// rejected. Its error messages go to `on_error`.
pub(crate) fn send_spans(
    client: &Client,
    spans: &[Span],
    mut on_error: impl FnMut(&str),
) -> Result<(usize, usize)> {
    let (mut sent, mut refused) = (0, 0);
    for chunk in spans.chunks(BATCH) {
        let body = native::encode_all(chunk);
        let v = client.post("/v1/native", causeway_server::NATIVE_CONTENT_TYPE, &body)?;
        sent += v["accepted"].as_u64().unwrap_or(0) as usize;
        refused += v["rejected"].as_u64().unwrap_or(0) as usize;
        for e in v["errors"].as_array().into_iter().flatten() {
            on_error(e.as_str().unwrap_or_default());
        }
    }
    Ok((sent, refused))
}

pub fn run(a: ImportArgs) -> Result<()> {
    let client = Client::new(&a.collector, a.token.clone());
    let total: u64 = a
        .files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let bar = ProgressBar::new(total).with_style(
        ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let (mut spans_sent, mut rejected, mut failed) = (0usize, 0usize, 0usize);
    for file in &a.files {
        let name = file.display().to_string();
        let result = (|| -> Result<(usize, usize)> {
            let bytes = std::fs::read(file).with_context(|| format!("reading {name}"))?;
            let (format, spans, problems) = decode(&bytes).with_context(|| name.clone())?;
            for p in &problems {
                bar.suspend(|| eprintln!("{name}: skipped: {p}"));
            }
            let (sent, refused) = send_spans(&client, &spans, |e| {
                bar.suspend(|| eprintln!("{name}: {e}"));
            })
            .with_context(|| format!("sending {name}"))?;
            let refused = refused + problems.len();
            bar.set_message(format!("{name}: {sent} spans ({format:?})"));
            bar.inc(bytes.len() as u64);
            Ok((sent, refused))
        })();
        match result {
            Ok((s, r)) => {
                spans_sent += s;
                rejected += r;
            }
            Err(e) => {
                failed += 1;
                bar.suspend(|| eprintln!("error: {e:#}"));
            }
        }
    }
    bar.finish_and_clear();
    if a.json {
        outln!(
            "{}",
            serde_json::json!({ "files": a.files.len(), "failed": failed, "spans": spans_sent, "rejected": rejected })
        );
    } else {
        outln!(
            "imported {spans_sent} spans from {} files ({rejected} rejected, {failed} files failed)",
            a.files.len() - failed
        );
    }
    if failed > 0 {
        return Err(anyhow!(
            "{failed} of {} files could not be imported",
            a.files.len()
        ));
    }
    Ok(())
}
