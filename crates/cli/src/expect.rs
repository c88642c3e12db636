//! `causeway expect`: parse expectation files locally; check the paths of a window
//! against them, or list the reconciler's findings, through the query API.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::analyze::{print_json, Answer, WindowArgs};
use crate::print::{cell, table};

#[derive(Subcommand)]
pub enum ExpectCommand {
    /// Check every path of a window against expectation files. Exits 0 only when every
    /// path is expected and every assertion holds.
    Check(CheckArgs),
    /// Check the syntax of expectation files and print them normalized.
    Parse(ParseArgs),
    /// List the reconciler's findings: unpaired messages, reused message ids, tasks
    /// without a proper end.
    Reconcile(ReconcileArgs),
    /// Write recognizers that describe observed paths: a trace, a pattern's traces, or
    /// the traces through a service.
    Generate(GenerateArgs),
}

#[derive(Args)]
pub struct GenerateArgs {
    /// Describe this trace.
    #[arg(long, conflicts_with_all = ["pattern", "service"])]
    trace: Option<String>,
    /// Describe the traces of this pattern (`p` and 16 hex digits).
    #[arg(long, conflicts_with = "service")]
    pattern: Option<String>,
    /// Describe the traces that pass through this service.
    #[arg(long)]
    service: Option<String>,
    /// Add each task's observed REAL_TIME range as a limit.
    #[arg(long)]
    timings: bool,
    /// Write `*` for every thread's host instead of the hosts seen.
    #[arg(long)]
    any_host: bool,
    /// How to write notices: `exact` (each as seen) or `any` (no texts; every task may log
    /// any notices between its other events), for requests whose logs vary.
    #[arg(long, default_value = "exact", value_parser = ["exact", "any"])]
    notices: String,
    /// Most traces to read.
    #[arg(long, default_value_t = 1000)]
    limit: usize,
    /// Write to this file instead of standard output.
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    window: WindowArgs,
    #[command(flatten)]
    out: Answer,
}

/// Which paths, how many to list, where to ask and how to print.
#[derive(Args)]
pub struct Scope {
    /// Only paths with a span of this service.
    #[arg(long)]
    service: Option<String>,
    /// Most paths to list.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    #[command(flatten)]
    window: WindowArgs,
    #[command(flatten)]
    out: Answer,
}

#[derive(Args)]
pub struct CheckArgs {
    /// Expectation files (Pip's language).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// A value for `$NAME` in the files, as NAME=VALUE (repeatable).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    params: Vec<String>,
    #[command(flatten)]
    scope: Scope,
}

#[derive(Args)]
pub struct ParseArgs {
    /// Expectation files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

#[derive(Args)]
pub struct ReconcileArgs {
    #[command(flatten)]
    scope: Scope,
}

pub fn run(c: ExpectCommand) -> Result<()> {
    match c {
        ExpectCommand::Check(a) => check(a),
        ExpectCommand::Parse(a) => parse(a),
        ExpectCommand::Reconcile(a) => reconcile(a),
        ExpectCommand::Generate(a) => generate(a),
    }
}

fn read(path: &PathBuf) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

fn parse(a: ParseArgs) -> Result<()> {
    let mut failed = 0;
    for path in &a.files {
        let text = read(path)?;
        match causeway_expect::lang::parse(&text) {
            Ok(file) => out!("{file}"),
            Err(e) => {
                eprintln!("{}", e.render(&path.display().to_string(), &text));
                failed += 1;
            }
        }
    }
    if failed > 0 {
        bail!("{failed} of {} files do not parse", a.files.len());
    }
    Ok(())
}

fn request(files: &[PathBuf], params: &[String], scope: &Scope) -> Result<Value> {
    let (service, limit, w) = (&scope.service, scope.limit, &scope.window);
    let mut ps = serde_json::Map::new();
    for p in params {
        let (k, v) = p
            .split_once('=')
            .with_context(|| format!("--param {p}: expected NAME=VALUE"))?;
        let v: f64 = v
            .parse()
            .with_context(|| format!("--param {p}: {v:?} is not a number"))?;
        ps.insert(k.trim_start_matches('$').to_string(), json!(v));
    }
    let files = files
        .iter()
        .map(|f| Ok(json!({ "name": f.display().to_string(), "text": read(f)? })))
        .collect::<Result<Vec<_>>>()?;
    Ok(json!({
        "files": files,
        "params": ps,
        "service": service,
        "limit": limit,
        "start": w.start,
        "end": w.end,
        "lookback": w.lookback,
    }))
}

fn post(out: &Answer, body: &Value) -> Result<Value> {
    out.remote.client().post(
        "/api/expect/check",
        "application/json",
        body.to_string().as_bytes(),
    )
}

fn check(a: CheckArgs) -> Result<()> {
    let body = request(&a.files, &a.params, &a.scope)?;
    let r = post(&a.scope.out, &body)?;
    let unexpected = r["unexpected"].as_u64().unwrap_or(0);
    let failed = r["failedAssertions"].as_array().map_or(0, Vec::len);
    if a.scope.out.json {
        print_json(&r)?;
    } else {
        outln!(
            "{} paths: {} expected, {} unexpected{}",
            cell(&r["paths"]),
            cell(&r["expected"]),
            unexpected,
            match r["undecided"].as_u64() {
                Some(n) if n > 0 => format!(" ({n} undecided: a recognizer ran out of steps)"),
                _ => String::new(),
            }
        );
        let rows: Vec<Vec<String>> = r["recognizers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|x| vec![cell(&x["name"]), cell(&x["role"]), cell(&x["matched"])])
            .collect();
        out!(
            "{}",
            table(
                &["recognizer".into(), "role".into(), "paths matched".into()],
                &rows
            )
        );
        for p in r["unexpectedPaths"].as_array().into_iter().flatten() {
            outln!("\nunexpected: trace {}", cell(&p["traceId"]));
            let by: Vec<String> = p["invalidatedBy"]
                .as_array()
                .into_iter()
                .flatten()
                .map(cell)
                .collect();
            if !by.is_empty() {
                outln!("  matches invalidator {}", by.join(", "));
            }
            if let Some(m) = p.get("closest").filter(|m| !m.is_null()) {
                let at = match (m["thread"].as_str(), m["pattern"].as_str()) {
                    (Some(t), Some(pat)) => format!(" in thread {t} as {pat}"),
                    (Some(t), None) => format!(" in thread {t}"),
                    _ => String::new(),
                };
                outln!(
                    "  closest: {} ({:.0}% matched){at}\n  found {}\n  expected {}",
                    cell(&m["recognizer"]),
                    m["closeness"].as_f64().unwrap_or(0.0) * 100.0,
                    cell(&m["found"]),
                    cell(&m["expected"]),
                );
            } else if by.is_empty() {
                outln!("  matches no validator");
            }
            let undecided: Vec<String> = p["undecided"]
                .as_array()
                .into_iter()
                .flatten()
                .map(cell)
                .collect();
            if !undecided.is_empty() {
                outln!("  undecided: {}", undecided.join(", "));
            }
        }
        for f in r["failedAssertions"].as_array().into_iter().flatten() {
            outln!(
                "\nfailed (line {}): {}: {}",
                cell(&f["line"]),
                cell(&f["text"]),
                cell(&f["why"])
            );
        }
    }
    if unexpected > 0 || failed > 0 {
        // The report is the message; the status tells scripts.
        std::process::exit(1);
    }
    Ok(())
}

fn reconcile(a: ReconcileArgs) -> Result<()> {
    let body = request(&[], &[], &a.scope)?;
    let r = post(&a.scope.out, &body)?;
    if a.scope.out.json {
        return print_json(&json!({
            "paths": r["paths"],
            "pathsWithProblems": r["pathsWithProblems"],
            "problems": r["problems"],
        }));
    }
    outln!(
        "{} paths, {} with problems",
        cell(&r["paths"]),
        cell(&r["pathsWithProblems"])
    );
    for p in r["problems"].as_array().into_iter().flatten() {
        outln!("trace {}", cell(&p["traceId"]));
        for x in p["problems"].as_array().into_iter().flatten() {
            let what = match x["kind"].as_str() {
                Some("unpairedSend") => format!(
                    "message {} sent by span {} was never received",
                    cell(&x["message"]),
                    cell(&x["span"])
                ),
                Some("unpairedRecv") => format!(
                    "message {} received by span {} was never sent",
                    cell(&x["message"]),
                    cell(&x["span"])
                ),
                Some("reusedMessageId") => format!(
                    "message id {} is used {} times",
                    cell(&x["message"]),
                    cell(&x["times"])
                ),
                Some("taskWithoutEnd") => format!(
                    "task {} (span {}) has no proper end: {}",
                    cell(&x["name"]),
                    cell(&x["span"]),
                    cell(&x["why"])
                ),
                _ => x.to_string(),
            };
            outln!("  {what}");
        }
    }
    Ok(())
}

fn generate(a: GenerateArgs) -> Result<()> {
    if a.trace.is_none() && a.pattern.is_none() && a.service.is_none() {
        bail!("say what to describe: --trace ID, --pattern ID or --service NAME");
    }
    let body = json!({
        "trace": a.trace,
        "pattern": a.pattern,
        "service": a.service,
        "timings": a.timings,
        "anyHost": a.any_host,
        "notices": a.notices,
        "limit": a.limit,
        "start": a.window.start,
        "end": a.window.end,
        "lookback": a.window.lookback,
    });
    let r = a.out.remote.client().post(
        "/api/expect/generate",
        "application/json",
        body.to_string().as_bytes(),
    )?;
    if a.out.json {
        return print_json(&r);
    }
    let text = format!(
        "// Generated from {} paths by causeway expect generate.\n{}",
        cell(&r["paths"]),
        r["text"].as_str().unwrap_or("")
    );
    match &a.output {
        Some(path) => {
            std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?
        }
        None => out!("{text}"),
    }
    Ok(())
}
