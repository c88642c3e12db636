//! `causeway pivot`: Pivot Tracing queries through the hub in `causeway serve`: install
//! and follow them, list and remove them, explain them, and list the tracepoints.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use causeway_pivot::compile::{compile, Catalog};
use causeway_pivot::lang::ast::{Item, Script};
use causeway_pivot::lang::{parse, print_query, print_script};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::analyze::{print_json, Answer};
use crate::client::Client;
use crate::print::{cell, table};

#[derive(Subcommand)]
pub enum PivotCommand {
    /// Install a query and show its results live, refreshed each interval, until Ctrl-C
    /// (or --duration); then uninstall it.
    Run(RunArgs),
    /// Install a query, or every query of a file (its tracepoint definitions first), and
    /// print the ids.
    Install(InstallArgs),
    /// List the installed queries and the processes that acknowledged each.
    List(Answer),
    /// Uninstall a query.
    Uninstall(UninstallArgs),
    /// Print a query's totals.
    Results(ResultsArgs),
    /// List the tracepoint definitions and the callsites processes registered (to write
    /// definitions from); --define adds definitions from a file.
    Tracepoints(TracepointsArgs),
    /// Print the advice a query compiles to, per tracepoint.
    Explain(ExplainArgs),
    /// List the processes that report to the hub: what they run, and what their advice,
    /// baggage and agent dropped (malformed or cut bags, joins past the fan-out cap,
    /// batches of results the hub never took).
    Processes(Answer),
}

/// A query given inline or in a file.
#[derive(Args)]
pub struct QuerySource {
    /// The query text (`From x In TRACEPOINT ... Select ...`).
    query: Option<String>,
    /// Read the query from this file instead.
    #[arg(long, short = 'f', conflicts_with = "query")]
    file: Option<PathBuf>,
}

impl QuerySource {
    fn text(&self) -> Result<String> {
        match (&self.query, &self.file) {
            (Some(q), _) => Ok(q.clone()),
            (None, Some(f)) => {
                std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))
            }
            (None, None) => bail!("give a query, or --file FILE"),
        }
    }
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    source: QuerySource,
    /// Stop after this long (e.g. `30s`); default: until Ctrl-C.
    #[arg(long)]
    duration: Option<humantime::Duration>,
    /// Leave the query installed when stopping.
    #[arg(long)]
    keep: bool,
    #[command(flatten)]
    out: Answer,
}

#[derive(Args)]
pub struct InstallArgs {
    #[command(flatten)]
    source: QuerySource,
    #[command(flatten)]
    out: Answer,
}

#[derive(Args)]
pub struct UninstallArgs {
    /// The query id.
    id: u32,
    #[command(flatten)]
    out: Answer,
}

#[derive(Args)]
pub struct ResultsArgs {
    /// The query id.
    id: u32,
    #[command(flatten)]
    out: Answer,
}

#[derive(Args)]
pub struct TracepointsArgs {
    /// Add the tracepoint definitions in this file first.
    #[arg(long)]
    define: Option<PathBuf>,
    #[command(flatten)]
    out: Answer,
}

#[derive(Args)]
pub struct ExplainArgs {
    #[command(flatten)]
    source: QuerySource,
    #[command(flatten)]
    out: Answer,
}

pub fn run(c: PivotCommand) -> Result<()> {
    match c {
        PivotCommand::Run(a) => run_live(a),
        PivotCommand::Install(a) => install(a),
        PivotCommand::List(a) => list(a),
        PivotCommand::Uninstall(a) => {
            a.out
                .remote
                .client()
                .delete(&format!("/api/pivot/queries/{}", a.id))?;
            if a.out.json {
                print_json(&json!({ "uninstalled": a.id }))
            } else {
                outln!("uninstalled query {}", a.id);
                Ok(())
            }
        }
        PivotCommand::Results(a) => {
            let r = a
                .out
                .remote
                .client()
                .get(&format!("/api/pivot/queries/{}/results", a.id))?;
            if a.out.json {
                print_json(&r)
            } else {
                out!("{}", results_table(&r));
                Ok(())
            }
        }
        PivotCommand::Tracepoints(a) => tracepoints(a),
        PivotCommand::Processes(a) => processes(a),
        PivotCommand::Explain(a) => {
            let text = a.source.text()?;
            let r = a
                .out
                .remote
                .client()
                .post_json("/api/pivot/explain", &json!({ "query": text }))?;
            if a.out.json {
                print_json(&r)
            } else {
                out!("{}", r["explain"].as_str().unwrap_or_default());
                Ok(())
            }
        }
    }
}

/// The tracepoint definitions and named queries the hub knows, as the hub checks a
/// query against them.
fn hub_catalog(client: &Client) -> Result<Catalog> {
    let mut catalog = Catalog::default();
    let known = client.get("/api/pivot/tracepoints")?;
    for d in items(&known["definitions"]) {
        if let Ok(script) = parse(d["text"].as_str().unwrap_or_default()) {
            catalog.add(&script);
        }
    }
    for q in items(&known["namedQueries"]) {
        if let Ok(script) = parse(q["text"].as_str().unwrap_or_default()) {
            catalog.add(&script);
        }
    }
    Ok(catalog)
}

/// The queries of `text` one by one (each as its own text), after sending the hub the
/// file's tracepoint definitions. Each query is first checked here against what the hub
/// knows and the file defines, so an error points into `origin` at its own line and
/// column (the hub sees each query reprinted on its own).
pub fn queries_of(client: &Client, text: &str, origin: &str) -> Result<Vec<String>> {
    let script = parse(text).map_err(|e| anyhow::anyhow!("{}", e.render(origin, text)))?;
    // The file's definitions all go to the hub first; its named queries, in order.
    let mut catalog = hub_catalog(client)?;
    for item in &script.items {
        if let Item::Tracepoint(_) = item {
            catalog.add(&Script {
                items: vec![item.clone()],
            });
        }
    }
    for item in &script.items {
        if let Item::Query(q) = item {
            compile(&q.query, &catalog)
                .map_err(|e| anyhow::anyhow!("{}", e.render(origin, text)))?;
            catalog.add_query(q);
        }
    }
    let definitions: Vec<Item> = script
        .items
        .iter()
        .filter(|i| matches!(i, Item::Tracepoint(_)))
        .cloned()
        .collect();
    if !definitions.is_empty() {
        let text = print_script(&Script { items: definitions });
        client.post_json("/api/pivot/tracepoints", &json!({ "text": text }))?;
    }
    // Each query goes with the named queries before it, which it may use as sources.
    let mut named = String::new();
    let mut queries = Vec::new();
    for item in &script.items {
        if let Item::Query(q) = item {
            let printed = print_query(q);
            queries.push(format!("{named}{printed}"));
            if q.name.is_some() {
                named.push_str(&printed);
                named.push_str("\n\n");
            }
        }
    }
    if queries.is_empty() {
        bail!("{origin}: no query");
    }
    Ok(queries)
}

fn install(a: InstallArgs) -> Result<()> {
    let client = a.out.remote.client();
    let origin = a
        .source
        .file
        .as_ref()
        .map_or("query".to_string(), |f| f.display().to_string());
    let mut installed = Vec::new();
    for q in queries_of(&client, &a.source.text()?, &origin)? {
        installed.push(client.post_json("/api/pivot/queries", &json!({ "query": q }))?);
    }
    if a.out.json {
        return print_json(&json!({ "installed": installed }));
    }
    for r in installed {
        outln!(
            "installed query {}{}",
            r["id"],
            r["name"]
                .as_str()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

fn list(a: Answer) -> Result<()> {
    let r = a.remote.client().get("/api/pivot/queries")?;
    if a.json {
        return print_json(&r);
    }
    let rows: Vec<Vec<String>> = r["queries"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|q| {
            let procs = q["processes"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default();
            let acked = procs.iter().filter(|p| p["acknowledged"] == true).count();
            vec![
                cell(&q["id"]),
                q["name"].as_str().unwrap_or("-").to_string(),
                format!("{acked}/{}", procs.len()),
                q["query"].as_str().unwrap_or_default().replace('\n', " "),
            ]
        })
        .collect();
    let header = ["ID", "NAME", "ACKED", "QUERY"].map(String::from);
    out!("{}", table(&header, &rows));
    Ok(())
}

/// The elements of a JSON array (none for anything else).
pub fn items(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

/// Results (`columns` and `rows`) as a table.
pub fn results_table(r: &Value) -> String {
    let header: Vec<String> = items(&r["columns"]).iter().map(cell).collect();
    let rows: Vec<Vec<String>> = items(&r["rows"])
        .iter()
        .map(|row| items(row).iter().map(cell).collect())
        .collect();
    table(&header, &rows)
}

fn run_live(a: RunArgs) -> Result<()> {
    let client = a.out.remote.client();
    let queries = queries_of(&client, &a.source.text()?, "query")?;
    let [query] = queries.as_slice() else {
        bail!("pivot run takes one query; {} given", queries.len());
    };
    let installed = client.post_json("/api/pivot/queries", &json!({ "query": query }))?;
    let id = installed["id"]
        .as_u64()
        .context("the hub answered without a query id")?;
    let until = a.duration.map(|d| Instant::now() + Duration::from(d));
    let result = crate::runtime()?.block_on(async {
        let mut interval = Duration::from_secs(1);
        loop {
            let r = tokio::task::block_in_place(|| {
                client.get(&format!("/api/pivot/queries/{id}/results"))
            })?;
            interval = r["intervalMs"]
                .as_u64()
                .map_or(interval, Duration::from_millis);
            if a.out.json {
                outln!("{}", json!({ "at": crate::now_ms(), "results": r }));
            } else {
                let acks = tokio::task::block_in_place(|| {
                    client.get(&format!("/api/pivot/queries/{id}"))
                })?;
                let procs = items(&acks["processes"]);
                let acked = procs.iter().filter(|p| p["acknowledged"] == true).count();
                // Clears the screen on a terminal, so the table stays in place.
                if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
                    out!("\x1b[2J\x1b[H");
                }
                outln!(
                    "query {id}, acknowledged by {acked}/{} processes (Ctrl-C to stop)",
                    procs.len()
                );
                out!("{}", results_table(&r));
            }
            let wait = tokio::time::sleep(interval);
            if until.is_some_and(|u| Instant::now() + interval > u) {
                break;
            }
            tokio::select! {
                _ = wait => {}
                _ = crate::stop_requested() => break,
            }
        }
        Ok::<(), anyhow::Error>(())
    });
    if !a.keep {
        client.delete(&format!("/api/pivot/queries/{id}"))?;
    }
    result
}

fn tracepoints(a: TracepointsArgs) -> Result<()> {
    let client = a.out.remote.client();
    if let Some(f) = &a.define {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        client.post_json("/api/pivot/tracepoints", &json!({ "text": text }))?;
    }
    let r = client.get("/api/pivot/tracepoints")?;
    if a.out.json {
        return print_json(&r);
    }
    for d in r["definitions"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        outln!("{}\n", d["text"].as_str().unwrap_or_default());
    }
    let rows: Vec<Vec<String>> = items(&r["callsites"])
        .iter()
        .map(|c| {
            let list = |v: &Value| items(v).iter().map(cell).collect::<Vec<_>>().join(",");
            vec![
                cell(&c["kind"]),
                cell(&c["target"]),
                cell(&c["name"]),
                cell(&c["level"]),
                list(&c["fields"]),
                list(&c["tracepoints"]),
                c["processes"].as_array().map_or(0, Vec::len).to_string(),
            ]
        })
        .collect();
    let header = [
        "KIND",
        "TARGET",
        "NAME",
        "LEVEL",
        "FIELDS",
        "TRACEPOINTS",
        "PROCESSES",
    ]
    .map(String::from);
    out!("{}", table(&header, &rows));
    if let Some(total) = r["total"].as_u64().filter(|&t| t > rows.len() as u64) {
        eprintln!("the first {} of {total} callsites", rows.len());
    }
    Ok(())
}

fn processes(a: Answer) -> Result<()> {
    let r = a.remote.client().get("/api/pivot/processes")?;
    if a.json {
        return print_json(&r);
    }
    let rows: Vec<Vec<String>> = items(&r["processes"])
        .iter()
        .map(|p| {
            let c = &p["counters"];
            vec![
                cell(&p["procName"]),
                cell(&p["host"]),
                cell(&p["pid"]),
                if p["connected"] == true { "yes" } else { "no" }.to_string(),
                items(&p["installed"])
                    .iter()
                    .map(cell)
                    .collect::<Vec<_>>()
                    .join(","),
                items(&p["failed"]).len().to_string(),
                cell(&c["bagsMalformed"]),
                cell(&c["bagsOverflowed"]),
                cell(&c["fanoutDropped"]),
                cell(&c["batchesDropped"]),
            ]
        })
        .collect();
    let header = [
        "PROCESS",
        "HOST",
        "PID",
        "CONNECTED",
        "QUERIES",
        "FAILED",
        "BAGS MALFORMED",
        "BAGS CUT",
        "FANOUT DROPPED",
        "BATCHES DROPPED",
    ]
    .map(String::from);
    out!("{}", table(&header, &rows));
    Ok(())
}
