//! The analysis commands: critical path, trace statistics, dependencies, patterns and
//! comparison. Each asks the query API and prints a table, or the API's JSON.

use anyhow::{Context, Result};
use clap::Args;
use serde_json::Value;

use crate::client::enc;
use crate::print::{cell, duration, table};
use crate::Remote;

/// A time window: `--start`/`--end`, or `--lookback` before `--end` (default: now).
#[derive(Args, Clone)]
pub struct WindowArgs {
    /// Window start: Unix nanoseconds or RFC 3339 (default: everything stored).
    #[arg(long)]
    pub(crate) start: Option<String>,
    /// Window end: Unix nanoseconds or RFC 3339.
    #[arg(long)]
    pub(crate) end: Option<String>,
    /// The window's length before its end, e.g. `15m` or `1h` (instead of --start).
    #[arg(long, conflicts_with = "start")]
    pub(crate) lookback: Option<String>,
}

impl WindowArgs {
    fn query(&self) -> Vec<String> {
        [
            ("start", &self.start),
            ("end", &self.end),
            ("lookback", &self.lookback),
        ]
        .iter()
        .filter_map(|(k, v)| v.as_ref().map(|v| format!("{k}={}", enc(v))))
        .collect()
    }
}

/// Where to ask, and how to print the answer.
#[derive(Args)]
pub struct Answer {
    /// Print the API's JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) remote: Remote,
}

/// One trace's analysis.
#[derive(Args)]
pub struct TraceAnalysisArgs {
    /// Trace id: 32 hex digits, or 16 for a 64-bit id.
    id: String,
    #[command(flatten)]
    out: Answer,
}

#[derive(Args)]
pub struct DepsArgs {
    #[command(flatten)]
    window: WindowArgs,
    #[command(flatten)]
    out: Answer,
}

#[derive(Args)]
pub struct PatternsArgs {
    /// Show this pattern (`p` and 16 hex digits) with its graph and latency histogram.
    id: Option<String>,
    /// Only patterns of traces that pass through this service.
    #[arg(long)]
    service: Option<String>,
    /// Order: count, total (traces x latency) or tail (p99).
    #[arg(long, default_value = "count")]
    sort: String,
    /// Most patterns to list.
    #[arg(long, default_value_t = 20)]
    limit: usize,
    #[command(flatten)]
    window: WindowArgs,
    #[command(flatten)]
    out: Answer,
}

#[derive(Args)]
pub struct CompareArgs {
    /// A trace id or a pattern id.
    a: String,
    /// The other trace id or pattern id.
    b: String,
    /// Show rows that did not change too.
    #[arg(long)]
    all: bool,
    #[command(flatten)]
    window: WindowArgs,
    #[command(flatten)]
    out: Answer,
}

fn ns(v: &Value) -> String {
    v.as_u64().map_or_else(|| cell(v), duration)
}

fn signed_ns(v: &Value) -> String {
    match v.as_i64() {
        Some(x) if x < 0 => format!("-{}", duration(x.unsigned_abs())),
        Some(x) => format!("+{}", duration(x as u64)),
        None => cell(v),
    }
}

fn offsets(v: &Value) -> String {
    let shifted: Vec<String> = v["clockOffsets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|o| o["offsetNs"].as_i64() != Some(0))
        .map(|o| format!("{} {}", cell(&o["host"]), signed_ns(&o["offsetNs"])))
        .collect();
    if shifted.is_empty() {
        String::new()
    } else {
        format!("clock skew corrected: {}\n", shifted.join(", "))
    }
}

pub(crate) fn print_json(v: &Value) -> Result<()> {
    outln!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

pub fn critical_path(a: TraceAnalysisArgs) -> Result<()> {
    let client = a.out.remote.client();
    let id = enc(&a.id);
    let path = client.get(&format!("/api/traces/{id}/critical-path"))?;
    if a.out.json {
        return print_json(&path);
    }
    let trace = client.get(&format!("/api/traces/{id}?adjust=skew"))?;
    let spans: std::collections::HashMap<&str, &Value> = trace["spans"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| Some((s["span_id"].as_str()?, s)))
        .collect();
    let total = path["durationNs"].as_u64().unwrap_or(0);
    let sections = path["sections"].as_array().cloned().unwrap_or_default();
    let first = sections
        .first()
        .and_then(|s| s["start"].as_u64())
        .unwrap_or(0);
    let share = |d: u64| format!("{:.1}%", 100.0 * d as f64 / total.max(1) as f64);
    let mut rows = Vec::new();
    // Time on the path per span, to name the biggest contributors.
    let mut by_span: Vec<(String, u64)> = Vec::new();
    for s in &sections {
        let (start, end) = (
            s["start"].as_u64().unwrap_or(0),
            s["end"].as_u64().unwrap_or(0),
        );
        let sid = s["spanId"].as_str().unwrap_or("");
        let span = spans.get(sid);
        let name = span.map_or_else(
            || sid.to_string(),
            |sp| format!("{} {}", cell(&sp["service"]), cell(&sp["name"])),
        );
        rows.push(vec![
            format!("+{}", duration(start - first.min(start))),
            duration(end.saturating_sub(start)),
            share(end.saturating_sub(start)),
            name.clone(),
            sid.to_string(),
        ]);
        match by_span.iter_mut().find(|(n, _)| *n == name) {
            Some((_, d)) => *d += end.saturating_sub(start),
            None => by_span.push((name, end.saturating_sub(start))),
        }
    }
    outln!(
        "critical path of trace {}: {} in {} sections",
        a.id,
        duration(total),
        sections.len()
    );
    out!("{}", offsets(&path));
    let header = ["at", "length", "share", "span", "span id"].map(String::from);
    out!("{}", table(&header, &rows));
    by_span.sort_by_key(|x| std::cmp::Reverse(x.1));
    outln!("\nmost time on the path:");
    let top: Vec<Vec<String>> = by_span
        .iter()
        .take(5)
        .map(|(n, d)| vec![duration(*d), share(*d), n.clone()])
        .collect();
    out!(
        "{}",
        table(&["time", "share", "span"].map(String::from), &top)
    );
    Ok(())
}

pub fn stats(a: TraceAnalysisArgs) -> Result<()> {
    let v = a
        .out
        .remote
        .client()
        .get(&format!("/api/traces/{}/stats", enc(&a.id)))?;
    if a.out.json {
        return print_json(&v);
    }
    outln!("trace {}: {} spans", a.id, cell(&v["spans"]));
    out!("{}", offsets(&v));
    let totals = |key: &str, with_op: bool| -> Vec<Vec<String>> {
        v[key]
            .as_array()
            .into_iter()
            .flatten()
            .map(|t| {
                let mut name = cell(&t["service"]);
                if with_op {
                    name = format!("{name} {}", cell(&t["operation"]));
                }
                vec![
                    name,
                    cell(&t["count"]),
                    cell(&t["errors"]),
                    ns(&t["totalNs"]),
                    ns(&t["selfNs"]),
                ]
            })
            .collect()
    };
    let header = ["service", "spans", "errors", "total", "self"].map(String::from);
    out!("\n{}", table(&header, &totals("services", false)));
    let mut header = header.clone();
    header[0] = "operation".into();
    out!("\n{}", table(&header, &totals("operations", true)));
    let rpcs: Vec<Vec<String>> = v["rpcs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            vec![
                format!(
                    "{} -> {} {}",
                    cell(&r["clientService"]),
                    cell(&r["serverService"]),
                    cell(&r["operation"])
                ),
                ns(&r["clientNs"]),
                ns(&r["serverNs"]),
                ns(&r["networkNs"]),
                signed_ns(&r["requestNs"]),
                signed_ns(&r["responseNs"]),
            ]
        })
        .collect();
    if !rpcs.is_empty() {
        let header =
            ["rpc", "client", "server", "network", "request", "response"].map(String::from);
        out!("\n{}", table(&header, &rpcs));
    }
    Ok(())
}

pub fn deps(a: DepsArgs) -> Result<()> {
    let q = a.window.query().join("&");
    let v = a
        .out
        .remote
        .client()
        .get(&format!("/api/dependencies?{q}"))?;
    if a.out.json {
        return print_json(&v);
    }
    let edges = v["edges"].as_array().cloned().unwrap_or_default();
    outln!(
        "{} edges between {} services over {} traces",
        edges.len(),
        v["nodes"].as_array().map_or(0, Vec::len),
        cell(&v["traces"])
    );
    if edges.is_empty() {
        return Ok(());
    }
    let rows: Vec<Vec<String>> = edges
        .iter()
        .map(|e| {
            vec![
                format!("{} -> {}", cell(&e["caller"]), cell(&e["callee"])),
                cell(&e["kind"]),
                cell(&e["calls"]),
                cell(&e["errors"]),
                ns(&e["latency"]["p50"]),
                ns(&e["latency"]["p90"]),
                ns(&e["latency"]["p99"]),
            ]
        })
        .collect();
    let header = ["edge", "kind", "calls", "errors", "p50", "p90", "p99"].map(String::from);
    out!("{}", table(&header, &rows));
    Ok(())
}

pub fn patterns(a: PatternsArgs) -> Result<()> {
    let mut q = a.window.query();
    let client = a.out.remote.client();
    if let Some(id) = &a.id {
        let v = client.get(&format!("/api/patterns/{}?{}", enc(id), q.join("&")))?;
        if a.out.json {
            return print_json(&v);
        }
        return print_pattern(&v);
    }
    q.push(format!("sort={}", enc(&a.sort)));
    q.push(format!("limit={}", a.limit));
    if let Some(s) = &a.service {
        q.push(format!("service={}", enc(s)));
    }
    let v = client.get(&format!("/api/patterns?{}", q.join("&")))?;
    if a.out.json {
        return print_json(&v);
    }
    let list = v["patterns"].as_array().cloned().unwrap_or_default();
    outln!(
        "{} traces in {} patterns shown{}",
        cell(&v["traces"]),
        list.len(),
        match v["untrackedTraces"].as_u64() {
            Some(n) if n > 0 => format!(" ({n} traces of shapes past the memory bound)"),
            _ => String::new(),
        }
    );
    if list.is_empty() {
        return Ok(());
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|p| {
            vec![
                cell(&p["id"]),
                cell(&p["count"]),
                cell(&p["errors"]),
                ns(&p["latency"]["p50"]),
                ns(&p["latency"]["p99"]),
                cell(&p["spans"]),
                format!("{} {}", cell(&p["rootService"]), cell(&p["rootOperation"])),
            ]
        })
        .collect();
    let header = ["pattern", "traces", "errors", "p50", "p99", "spans", "root"].map(String::from);
    out!("{}", table(&header, &rows));
    Ok(())
}

fn print_pattern(v: &Value) -> Result<()> {
    outln!(
        "pattern {}: {} traces, {} with errors, {} spans each; latency p50 {} p90 {} p99 {}",
        cell(&v["id"]),
        cell(&v["count"]),
        cell(&v["errors"]),
        cell(&v["spans"]),
        ns(&v["latency"]["p50"]),
        ns(&v["latency"]["p90"]),
        ns(&v["latency"]["p99"]),
    );
    let nodes = v["nodes"].as_array().context("the pattern has no nodes")?;
    // Depth-first with indentation, from the breadth-first list and its parent links.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if let Some(p) = n["parent"].as_u64() {
            if let Some(c) = children.get_mut(p as usize) {
                c.push(i);
            }
        }
    }
    let mut rows = Vec::new();
    let mut stack = vec![(0usize, 0usize)];
    while let Some((i, depth)) = stack.pop() {
        let n = &nodes[i];
        let count = n["count"].as_u64().unwrap_or(1);
        rows.push(vec![
            format!(
                "{}{} {}{}",
                "  ".repeat(depth),
                cell(&n["service"]),
                cell(&n["operation"]),
                if count > 1 {
                    format!(" x{count}")
                } else {
                    String::new()
                }
            ),
            ns(&n["meanDurationNs"]),
            ns(&n["meanSelfNs"]),
            n.get("meanStartOffsetNs").map_or(String::new(), signed_ns),
            n.get("meanNetworkNs").map_or(String::new(), ns),
        ]);
        for &c in children[i].iter().rev() {
            stack.push((c, depth + 1));
        }
    }
    let header = ["span", "mean", "self", "start after parent", "network"].map(String::from);
    out!("\n{}", table(&header, &rows));
    let buckets: Vec<Vec<String>> = v["histogram"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|b| {
            let examples: Vec<String> = b["examples"]
                .as_array()
                .into_iter()
                .flatten()
                .map(cell)
                .collect();
            vec![
                format!("{}..{}", ns(&b["lowNs"]), ns(&b["highNs"])),
                cell(&b["count"]),
                examples.join(" "),
            ]
        })
        .collect();
    out!(
        "\n{}",
        table(
            &["latency", "traces", "examples"].map(String::from),
            &buckets
        )
    );
    Ok(())
}

pub fn compare(a: CompareArgs) -> Result<()> {
    let mut q = a.window.query();
    q.push(format!("a={}", enc(&a.a)));
    q.push(format!("b={}", enc(&a.b)));
    let v = a
        .out
        .remote
        .client()
        .get(&format!("/api/compare?{}", q.join("&")))?;
    if a.out.json {
        return print_json(&v);
    }
    outln!(
        "A {} ({})  vs  B {} ({}): {} missing in B, {} extra in B, {} slower, {} faster",
        cell(&v["a"]),
        ns(&v["latencyANs"]),
        cell(&v["b"]),
        ns(&v["latencyBNs"]),
        cell(&v["missing"]),
        cell(&v["extra"]),
        cell(&v["slower"]),
        cell(&v["faster"]),
    );
    let side = |s: &Value| {
        if s.is_null() {
            "-".to_string()
        } else {
            let count = s["count"].as_f64().unwrap_or(0.0);
            if (count - 1.0).abs() < 1e-9 {
                ns(&s["meanNs"])
            } else {
                format!("{} x{:.1}", ns(&s["meanNs"]), count)
            }
        }
    };
    let rows: Vec<Vec<String>> = v["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| a.all || r["change"] != "same")
        .map(|r| {
            vec![
                format!(
                    "{}{} {}",
                    "  ".repeat(r["depth"].as_u64().unwrap_or(0) as usize),
                    cell(&r["service"]),
                    cell(&r["operation"])
                ),
                side(&r["a"]),
                side(&r["b"]),
                if r["a"].is_null() || r["b"].is_null() {
                    String::new()
                } else {
                    signed_ns(&r["deltaNs"])
                },
                cell(&r["change"]),
            ]
        })
        .collect();
    if rows.is_empty() {
        outln!("no differences");
        return Ok(());
    }
    out!(
        "\n{}",
        table(
            &["span", "A", "B", "delta", "change"].map(String::from),
            &rows
        )
    );
    Ok(())
}
