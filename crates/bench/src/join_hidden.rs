//! `causeway-bench join-hidden`: the join held to the truth with evidence hidden. The
//! demo runs with every process instrumented and captured (as `infer-demo` runs it); then
//! the spans of some services are dropped, as if those services had no instrumentation,
//! the capture is inferred and joined to the spans left, and the joined traces are held
//! against the full instrumentation: the hidden server spans recovered in their request's
//! trace under the client span that called them, the traces whose structure (each
//! server span's service under its caller's service) is the instrumented one, the inferred
//! traces left over, and the dependency graph's calls per edge.
//!
//! With `--split` the hidden services also pass no context on, as a program nobody
//! instrumented does: each call they made starts a trace of its own (the spans below get
//! a new trace id, the first of them no parent), unless the span is linked to a visible
//! span of its request (the queue's worker, linked to the publish request that enqueued
//! its message): that span, the one context it would have had, becomes its parent. The
//! join must then link each request's traces (`causeway_model::parent_links::trace_link`);
//! a request counts as one trace when reading its traces as the server reads them
//! (`read_linked`) gives all of its spans.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;
use std::time::Instant;

use anyhow::Result;
use causeway_blackbox::infer::{infer, Inputs, Options};
use causeway_blackbox::join::join;
use causeway_model::parent_links::read_linked;
use causeway_model::{Source, Span, SpanId, SpanKind, Trace, TraceId};
use clap::Args;
use serde_json::json;

#[derive(Args)]
pub struct JoinHiddenArgs {
    #[command(flatten)]
    runs: crate::infer_demo::DemoRuns,
    /// The services whose spans are dropped, as if they had no instrumentation.
    #[arg(long, value_delimiter = ',', default_values_t = ["cache".to_string(), "metadata".to_string()])]
    hide: Vec<String>,
    /// The hidden services also pass no context on: what they called starts traces of
    /// its own, which the join must link.
    #[arg(long)]
    split: bool,
    /// Print the results as JSON.
    #[arg(long)]
    json: bool,
    /// Write each request that did not become one trace to this file (JSON lines, one
    /// file per rate: `FILE.RATE`): its instrumented spans, each with the request it is
    /// read in.
    #[arg(long)]
    misses: Option<std::path::PathBuf>,
}

/// Traces assembled from `spans`.
fn traces(spans: Vec<Span>) -> Vec<Trace> {
    let mut by_trace: HashMap<TraceId, Vec<Span>> = HashMap::new();
    for s in spans {
        by_trace.entry(s.trace_id).or_default().push(s);
    }
    by_trace
        .into_iter()
        .map(|(id, spans)| Trace::assemble(id, spans))
        .collect()
}

/// `spans` as they would have been recorded had the `hidden` services passed no context
/// on: each span whose parent is hidden takes as parent the first visible span of its
/// trace it is linked to, if any; else it starts a trace of its own (an id made of its
/// trace's and its own), with the spans below it.
fn split_at_hidden(mut spans: Vec<Span>, hidden: impl Fn(&Span) -> bool) -> Vec<Span> {
    let hidden_ids: HashSet<(TraceId, SpanId)> = spans
        .iter()
        .filter(|s| hidden(s))
        .map(|s| (s.trace_id, s.span_id))
        .collect();
    let visible_ids: HashSet<(TraceId, SpanId)> = spans
        .iter()
        .filter(|s| !hidden(s))
        .map(|s| (s.trace_id, s.span_id))
        .collect();
    for s in &mut spans {
        if !s
            .parent_id
            .is_some_and(|p| hidden_ids.contains(&(s.trace_id, p)))
        {
            continue;
        }
        let linked = s
            .links
            .iter()
            .find(|l| l.trace_id == s.trace_id && visible_ids.contains(&(l.trace_id, l.span_id)));
        if let Some(l) = linked {
            s.parent_id = Some(l.span_id);
        }
    }
    let parent: HashMap<(TraceId, SpanId), SpanId> = spans
        .iter()
        .filter_map(|s| Some(((s.trace_id, s.span_id), s.parent_id?)))
        .collect();
    // A span's trace: that of the nearest span at or above it whose parent is hidden.
    let trace_of = |s: &Span| {
        let mut at = s.span_id;
        for _ in 0..spans.len() {
            match parent.get(&(s.trace_id, at)) {
                Some(&p) if hidden_ids.contains(&(s.trace_id, p)) => {
                    let id = s.trace_id.get().rotate_left(64) ^ u128::from(at.get());
                    return TraceId::new(id).unwrap_or(s.trace_id);
                }
                Some(&p) => at = p,
                None => break,
            }
        }
        s.trace_id
    };
    let split: Vec<(TraceId, bool)> = spans
        .iter()
        .map(|s| {
            let starts = s
                .parent_id
                .is_some_and(|p| hidden_ids.contains(&(s.trace_id, p)));
            (trace_of(s), starts)
        })
        .collect();
    spans
        .into_iter()
        .zip(split)
        .map(|(mut s, (trace, starts))| {
            s.trace_id = trace;
            if starts {
                s.parent_id = None;
            }
            s
        })
        .collect()
}

/// A trace's calls: each server span's service under its caller's (the service of the
/// span above it; none for a root, or for a caller not among `services`: the load
/// generator, captured, is no service of the shop's), sorted.
fn structure(t: &Trace, services: &HashSet<String>) -> Vec<(String, String)> {
    let mut calls: Vec<(String, String)> = t
        .spans
        .iter()
        .enumerate()
        .filter(|(_, s)| s.kind == SpanKind::Server)
        .map(|(i, s)| {
            let caller = t.parent[i]
                .map(|p| &*t.spans[p].service)
                .filter(|c| services.contains(*c))
                .unwrap_or("");
            (caller.to_string(), s.service.to_string())
        })
        .collect();
    calls.sort();
    calls
}

/// A request that did not become one trace: its visible spans in time order, each with
/// the request it is read in.
fn miss(
    t: &Trace,
    hidden: impl Fn(&Span) -> bool,
    read_in: impl Fn(&Span) -> Option<TraceId>,
) -> serde_json::Value {
    let mut spans: Vec<&Span> = t.spans.iter().filter(|s| !hidden(s)).collect();
    spans.sort_by_key(|s| s.start);
    let spans: Vec<_> = spans
        .iter()
        .map(|s| {
            json!({
                "service": &*s.service,
                "name": &*s.name,
                "kind": format!("{:?}", s.kind),
                "start": s.start,
                "read_in": read_in(s).map(|r| r.to_string()),
            })
        })
        .collect();
    json!({"trace": t.trace_id.to_string(), "spans": spans})
}

/// Calls per (caller, callee) over `traces`.
fn dependencies(traces: &[Trace], services: &HashSet<String>) -> BTreeMap<(String, String), u64> {
    let mut deps = BTreeMap::new();
    for t in traces {
        for call in structure(t, services) {
            if !call.0.is_empty() && call.0 != call.1 {
                *deps.entry(call).or_default() += 1;
            }
        }
    }
    deps
}

fn measure(dir: &Path, rate: f64, a: &JoinHiddenArgs) -> Result<serde_json::Value> {
    let collector_ports = crate::infer_demo::run_or_reuse(dir, rate, &a.runs)?;
    let all = crate::stores::stored_spans(&dir.join("store"))?;
    let hidden = |s: &Span| a.hide.iter().any(|h| *h == *s.service);
    let truth = traces(all.clone());
    let services: HashSet<String> = all.iter().map(|s| s.service.to_string()).collect();
    let truth_ids: HashSet<TraceId> = truth.iter().map(|t| t.trace_id).collect();
    let recorded = if a.split {
        split_at_hidden(all, hidden)
    } else {
        all
    };
    let visible: Vec<Span> = recorded.into_iter().filter(|s| !hidden(s)).collect();
    // Where each instrumented span was recorded.
    let recorded_in: HashMap<SpanId, TraceId> =
        visible.iter().map(|s| (s.span_id, s.trace_id)).collect();
    let start = Instant::now();
    let inputs = Inputs {
        capture_dirs: vec![dir.join("capture")],
        node_names: crate::infer_demo::node_names(),
        ..Inputs::default()
    };
    let options = Options {
        ignore_ports: collector_ports.to_vec(),
        ..Options::default()
    };
    let inferred = infer(&inputs, &options, |_| {})?;
    let inferred_at = start.elapsed();
    let joined = join(inferred.spans(0x5eed), &visible);
    let joined_at = start.elapsed() - inferred_at;
    let mut combined = visible;
    combined.extend(joined.spans);
    let found = traces(combined);
    let found_by_id: HashMap<TraceId, &Trace> = found.iter().map(|t| (t.trace_id, t)).collect();
    // Each trace as the server reads it: joined with those linked to it.
    let read = |id: TraceId| -> Option<Trace> {
        let fetch =
            |id| Ok::<_, std::convert::Infallible>(found_by_id.get(&id).map(|t| (*t).clone()));
        let first = found_by_id.get(&id)?;
        read_linked((*first).clone(), causeway_store::linked::MOST_LINKED, fetch).ok()
    };
    let mut request_of: HashMap<TraceId, TraceId> = HashMap::new();
    let mut requests_found: Vec<Trace> = Vec::new();
    for t in &found {
        if t.links.is_empty() {
            request_of.insert(t.trace_id, t.trace_id);
            continue;
        }
        if let Some(r) = read(t.trace_id) {
            request_of.insert(t.trace_id, r.trace_id);
            if !t.continues_another() {
                requests_found.push(r);
            }
        }
    }
    let requests_found: Vec<&Trace> = found
        .iter()
        .filter(|t| t.links.is_empty())
        .chain(&requests_found)
        .collect();
    let requests_by_id: HashMap<TraceId, &Trace> =
        requests_found.iter().map(|t| (t.trace_id, *t)).collect();

    // The hidden server spans, each under its caller's client span: recovered when an
    // inferred server span of that service hangs under the same client span.
    let (mut hidden_calls, mut recovered, mut same_structure, mut requests) = (0, 0, 0, 0);
    let mut one_trace = 0;
    let mut misses = Vec::new();
    let mut per_service: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for t in &truth {
        if !t.spans.iter().any(|s| s.source == Source::Instrumented) {
            continue;
        }
        requests += 1;
        // The requests its recorded spans are read in: one, when the join linked every
        // trace a hidden service split it into.
        let read_in: HashSet<TraceId> = t
            .spans
            .iter()
            .filter(|s| !hidden(s))
            .filter_map(|s| request_of.get(recorded_in.get(&s.span_id)?).copied())
            .collect();
        one_trace += usize::from(read_in.len() == 1);
        if read_in.len() != 1 {
            misses.push(miss(t, hidden, |s| {
                request_of.get(recorded_in.get(&s.span_id)?).copied()
            }));
        }
        let joined = read_in
            .iter()
            .next()
            .filter(|_| read_in.len() == 1)
            .and_then(|id| requests_by_id.get(id));
        same_structure +=
            usize::from(joined.is_some_and(|j| structure(j, &services) == structure(t, &services)));
        for (i, s) in t.spans.iter().enumerate() {
            if !(hidden(s) && s.kind == SpanKind::Server) {
                continue;
            }
            let Some(caller) = t.parent[i].map(|p| &t.spans[p]).filter(|c| !hidden(c)) else {
                continue;
            };
            hidden_calls += 1;
            let under_caller = |j: &&Trace| {
                let caller_id: SpanId = caller.span_id;
                j.spans.iter().any(|x| {
                    x.service == s.service
                        && x.kind == SpanKind::Server
                        && matches!(x.source, Source::Inferred { .. })
                        && x.parent_id == Some(caller_id)
                })
            };
            // In the request the caller's span is read in (the request may have lost
            // another part: a message the capture could not see).
            let holding_caller = recorded_in
                .get(&caller.span_id)
                .and_then(|r| request_of.get(r))
                .and_then(|id| requests_by_id.get(id));
            let got = holding_caller.is_some_and(under_caller);
            recovered += usize::from(got);
            let e = per_service
                .entry(s.service.to_string())
                .or_insert((0usize, 0usize));
            e.0 += 1;
            e.1 += usize::from(got);
        }
    }
    if let Some(file) = &a.misses {
        crate::infer_demo::write_lines(&file.with_extension(format!("{rate}")), &misses)?;
    }
    let stray = requests_found
        .iter()
        .filter(|t| !truth_ids.contains(&t.trace_id))
        .count();
    let requests_found: Vec<Trace> = requests_found.into_iter().cloned().collect();
    let (truth_deps, found_deps) = (
        dependencies(&truth, &services),
        dependencies(&requests_found, &services),
    );
    let mut edges = Vec::new();
    let mut worst: f64 = 0.0;
    for (edge, &n) in &truth_deps {
        let got = found_deps.get(edge).copied().unwrap_or(0);
        let off = (got as f64 - n as f64) / n.max(1) as f64;
        worst = worst.max(off.abs());
        edges.push(json!({"caller": edge.0, "callee": edge.1, "truth": n, "joined": got}));
    }
    let extra: Vec<_> = found_deps
        .iter()
        .filter(|(e, _)| !truth_deps.contains_key(*e))
        .map(|(e, n)| json!({"caller": e.0, "callee": e.1, "joined": n}))
        .collect();
    let share = |n: usize, of: usize| n as f64 / of.max(1) as f64;
    Ok(json!({
        "rate": rate,
        "hidden": a.hide,
        "split": a.split,
        "requests": requests,
        "one_trace": share(one_trace, requests),
        "same_structure": share(same_structure, requests),
        "hidden_calls": hidden_calls,
        "recovered": share(recovered, hidden_calls),
        "recovered_by_service": per_service
            .iter()
            .map(|(service, (calls, got))| (service.clone(), json!({"calls": calls, "recovered": share(*got, *calls)})))
            .collect::<serde_json::Map<_, _>>(),
        "stray_inferred_traces": stray,
        "dependency_edges": edges,
        "extra_edges": extra,
        "worst_edge_error": worst,
        "infer_s": inferred_at.as_secs_f64(),
        "join_s": joined_at.as_secs_f64(),
        "join_report": joined.report,
    }))
}

pub fn run(a: JoinHiddenArgs) -> Result<()> {
    let (_root, dirs) = a.runs.dirs("infer-demo")?;
    let mut rows = Vec::new();
    for (rate, dir) in dirs {
        rows.push(measure(&dir, rate, &a)?);
    }
    if a.json {
        outln!("{}", serde_json::to_string(&rows)?);
        return Ok(());
    }
    outln!(
        "hidden: {}{}",
        a.hide.join(", "),
        if a.split {
            " (passing no context on)"
        } else {
            ""
        }
    );
    outln!(
        "{:>6} {:>8} {:>10} {:>15} {:>12} {:>10} {:>6} {:>11} {:>11}",
        "rate/s",
        "requests",
        "one trace",
        "same structure",
        "hidden calls",
        "recovered",
        "stray",
        "worst edge",
        "extra edges"
    );
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
        outln!(
            "{:>6} {:>8} {:>9.1}% {:>14.1}% {:>12} {:>9.1}% {:>6} {:>10.1}% {:>11}",
            f("rate"),
            f("requests"),
            f("one_trace") * 100.0,
            f("same_structure") * 100.0,
            f("hidden_calls"),
            f("recovered") * 100.0,
            f("stray_inferred_traces"),
            f("worst_edge_error") * 100.0,
            r["extra_edges"].as_array().map_or(0, Vec::len),
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::Link;

    fn span(trace: TraceId, id: u64, parent: Option<u64>, service: &str) -> Span {
        let span_id = |n| SpanId::new(n).expect("nonzero");
        Span::new(trace, span_id(id), parent.map(span_id), "op", service, 0, 1)
    }

    #[test]
    fn a_span_below_a_hidden_one_starts_a_trace_unless_linked_to_a_visible_span() {
        let t = TraceId::new(7).expect("nonzero");
        // frontend(1) -> orders(2, hidden) -> queue publish(3); orders -> worker(4),
        // linked to the publish that enqueued it; orders -> storage(5), linked to nothing.
        let mut worker = span(t, 4, Some(2), "queue");
        worker.links.push(Link {
            trace_id: t,
            span_id: SpanId::new(3).expect("nonzero"),
            attributes: Vec::new(),
        });
        let spans = vec![
            span(t, 1, None, "frontend"),
            span(t, 2, Some(1), "orders"),
            span(t, 3, Some(2), "queue"),
            worker,
            span(t, 5, Some(2), "storage"),
        ];
        let split = split_at_hidden(spans, |s| &*s.service == "orders");
        let by_id = |n: u64| {
            split
                .iter()
                .find(|s| s.span_id.get() == n)
                .expect("span kept")
        };
        let (publish, worker, storage) = (by_id(3), by_id(4), by_id(5));
        assert_eq!(by_id(1).trace_id, t);
        assert_eq!(publish.parent_id, None);
        assert_ne!(publish.trace_id, t);
        assert_eq!(worker.parent_id, Some(publish.span_id));
        assert_eq!(worker.trace_id, publish.trace_id);
        assert_eq!(storage.parent_id, None);
        assert!(storage.trace_id != t && storage.trace_id != publish.trace_id);
    }
}
