//! `causeway-bench`: the benchmark harnesses of BENCHMARKS.md, outside the product binary.
//! They drive the `causeway_cli` library in this process, or the `causeway` binary built
//! beside this one when a benchmark needs processes of its own (the demo, `serve`).

#[macro_use]
extern crate causeway_cli;

mod analyses;
mod capture;
mod echo;
mod harness;
mod hostile;
mod infer;
mod infer_demo;
mod infer_scale;
mod ingest;
mod join_demo;
mod join_hidden;
mod join_nginx;
mod logs;
mod logs_demo;
mod pivot;
mod query;
mod stats;
mod stores;
mod templates;

use anyhow::Result;
use clap::Parser;

// As the causeway binary's: the benchmarks measure its allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Causeway's benchmarks: ingest, queries, analyses, expectations, Pivot Tracing, socket
/// capture, black-box inference and log stitching, each against its peer or its ground
/// truth where one exists (BENCHMARKS.md says which command measured which figure).
#[derive(Parser)]
#[command(name = "causeway-bench", version)]
enum What {
    /// Spans per second into a server, durable, over loopback HTTP.
    Ingest(ingest::IngestArgs),
    /// Latency of trace-by-id and searches over a store of many spans.
    Query(query::QueryArgs),
    /// Time and memory of the dependency graph and execution patterns over many traces.
    Analyses(analyses::AnalysesBenchArgs),
    /// Time to reconcile and check every stored path against recognizers generated from
    /// the most common patterns.
    Expect(analyses::ExpectArgs),
    /// Pivot Tracing on `causeway demo replicas`: request latency overhead per
    /// configuration (interleaved paired runs, 95% confidence intervals) and the time
    /// from installing a query to its first result.
    Pivot(crate::pivot::PivotArgs),
    /// What socket capture adds per intercepted call and to an echo's throughput
    /// (`causeway-bench echo-node` with and without the preload library, interleaved).
    Capture(crate::capture::CaptureBenchArgs),
    /// Accuracy of black-box linking against ground truth (B-cubed F1, exact traces,
    /// right parents), WAP5's and the greedy baseline's, and their time.
    Infer(crate::infer::InferBenchArgs),
    /// Request flows stitched from logs (`causeway logs`), scored against ground truth
    /// (the Nezha TrainTicket logs by default), and their speed.
    Logs(crate::logs::LogsBenchArgs),
    /// Request flows stitched from the demo's own logs (trace ids stripped, kept as the
    /// ground truth), at several loads.
    LogsDemo(crate::logs_demo::LogsDemoArgs),
    /// Log points mined by Drain against the true ones (the macro calls that wrote the
    /// demo's lines, kept by `bench logs-demo --keep`), side by side with Drain3.
    Templates(crate::templates::TemplatesBenchArgs),
    /// Black-box inference on the demo run under capture with its instrumentation on
    /// (the ground truth), at several loads: grouping, parents, patterns, node delays,
    /// injected clock offsets; WAP5's linking and the greedy baseline.
    InferDemo(crate::infer_demo::InferDemoArgs),
    /// One request, one trace, with part of the system uninstrumented: the demo's edge
    /// proxy, captured and joined while the demo runs, against the frontend's
    /// instrumented requests, at several loads.
    JoinDemo(crate::join_demo::JoinDemoArgs),
    /// One request, one trace, with a real program nobody instrumented in front: nginx
    /// under capture before an instrumented storage replica, joined by an agent while
    /// the load runs, at several loads.
    JoinNginx(crate::join_nginx::JoinNginxArgs),
    /// The join held to the truth with evidence hidden: the demo instrumented and
    /// captured whole, the spans of some services dropped, the capture inferred and
    /// joined to the rest, against the full instrumentation, at several loads.
    JoinHidden(crate::join_hidden::JoinHiddenArgs),
    /// Time and peak memory of `causeway infer` on synthetic capture logs shaped like
    /// WAP5's CoDeeN trace (115 proxies, an hour, 4.7M messages).
    InferScale(crate::infer_scale::InferScaleArgs),
    /// A well-behaved client's ingest alone and beside hostile clients (slow senders,
    /// an ingest flood, idle connections, greedy SQL, large exports, huge searches),
    /// with the server's peak memory against a bound.
    Hostile(crate::hostile::HostileArgs),
    /// A loopback echo pair in two processes (measured by `capture`, and the captured
    /// program of the capture tests).
    #[command(hide = true)]
    EchoNode(crate::echo::EchoArgs),
}

fn run(what: What) -> Result<()> {
    match what {
        What::Ingest(a) => ingest::run(a),
        What::Query(a) => query::run(a),
        What::Analyses(a) => analyses::run(a),
        What::Expect(a) => analyses::expect(a),
        What::Pivot(a) => crate::pivot::run(a),
        What::Capture(a) => crate::capture::run(a),
        What::Infer(a) => crate::infer::run(a),
        What::Logs(a) => crate::logs::run(a),
        What::LogsDemo(a) => crate::logs_demo::run(a),
        What::Templates(a) => crate::templates::run(a),
        What::InferDemo(a) => crate::infer_demo::run(a),
        What::JoinDemo(a) => crate::join_demo::run(a),
        What::JoinNginx(a) => crate::join_nginx::run(a),
        What::JoinHidden(a) => crate::join_hidden::run(a),
        What::InferScale(a) => crate::infer_scale::run(a),
        What::Hostile(a) => crate::hostile::run(a),
        What::EchoNode(a) => crate::echo::run(a),
    }
}

fn main() {
    let what = What::parse();
    let filter = tracing_subscriber::EnvFilter::try_from_env("CAUSEWAY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
    if let Err(e) = run(what) {
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}
