//! Inferred paths joined to the instrumented traces of the same requests: what a capture
//! saw of a process that also reports spans is already in a trace, and the rest of the path
//! (what uninstrumented processes did, and the proxies in front) belongs in that trace.
//!
//! Instrumented spans are certain anchors. An inferred server span is the instrumented
//! server span of the same process whose connection it came on (`network.peer.port`, and
//! `network.local.port` or `server.port`, against the captured endpoints) and whose time
//! overlaps it, the nearest start first; an inferred client span is the instrumented
//! client span of its process that called the same server port (`server.port` or
//! `network.peer.port`) and was open when the request left. An inferred server span at a
//! receiver that was not captured is the instrumented server span reached on its port from
//! its sender's connection (a proxy under capture in front of an instrumented service).
//! An inferred server span whose
//! caller was not captured is served for the instrumented client span of another process
//! that called its port and was open all the while it ran (the shortest, each call taken
//! once): it hangs under it, and names that call's service as its sender. A process is its
//! pid and host;
//! a host name no capture reported (a service that names its host itself, as the demo's
//! do) is taken to be the captured one with that pid, and a node named by a rule (whose
//! name hides its pid) is the process whose spans report that name as their service.
//!
//! An inferred trace with anchors joins the instrumented traces they are in: its anchored
//! spans are dropped (the instrumented ones tell the same, with certainty), and each other
//! span goes to its own anchor's trace, else to that of the nearest anchored span above it
//! (the request an uninstrumented process served), else to that of the first anchored span
//! below it (a proxy in front), else to its parent's (so two requests that linking put in
//! one path go to their own traces), taking the instrumented span as parent where its
//! inferred parent was anchored. An instrumented span recorded as a root, or with a parent
//! that was never stored (its caller's spans were lost), whose inferred caller was not
//! anchored (a proxy in front, a service whose spans are missing) gets that caller as
//! parent through a parent link (`causeway_model::parent_links`); a recorded parent that
//! is stored is never replaced. Spans placed
//! in an instrumented trace carry `causeway.parent.confidence`, their path's probability,
//! and the service an instrumented span of their process reported; a call to an
//! instrumented server is named by that server's service (`to storage-1`). Inferred traces without
//! an anchor stay traces of their own.
//!
//! An instrumented span recorded as a trace's root, called by a process nobody
//! instrumented that served another instrumented trace's request (an instrumented caller
//! -> that process -> an instrumented service, the process passing no context on), is one
//! request recorded as two traces: the two are linked at that process's call
//! (`causeway_model::parent_links::trace_link`), and reading either reads both. Called by
//! an instrumented process, or with no instrumented request above, a split is two
//! requests that linking put in one path, and they stay apart.

use std::sync::Arc;

use foldhash::{HashMap, HashSet};

use causeway_model::parent_links::{orphan_link, parent_link, trace_link};
use causeway_model::{attributes, KeyValue, Source, Span, SpanId, SpanKind, TraceId, Value};

pub use causeway_model::attributes::PARENT_CONFIDENCE;

/// How close in time (ns) a captured message and an instrumented span's ends must be: the
/// socket call and the span's start or end are a few calls apart on one clock.
const SLACK_NS: u64 = 2_000_000;

/// The same for a server span known by its connection (the client's port and its own):
/// only calls on that one connection compete, and a tracer's clock may be milliseconds
/// off the system's (the `causeway` library slews gaps of up to 10 ms: the demo's queue
/// ran 2.1 ms behind at 120 requests a second).
const CONNECTION_SLACK_NS: u64 = 10_000_000;

/// What joining did.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct JoinReport {
    /// Inferred traces looked at.
    pub inferred_traces: usize,
    /// Of those, joined to an instrumented trace.
    pub joined: usize,
    /// Of those, with anchors in more than one instrumented trace: linking put several
    /// requests in one path, or an uninstrumented process between two instrumented ones
    /// split a request in two; each part went to the trace of its anchors.
    pub split: usize,
    /// Inferred spans an instrumented span stood for.
    pub anchored_spans: usize,
    /// Inferred spans placed in instrumented traces.
    pub placed_spans: usize,
    /// Instrumented roots given an inferred parent.
    pub parent_links: usize,
    /// Inferred roots placed under the instrumented call that sent them (found by the port
    /// it called and its time: its caller was not captured).
    pub callers: usize,
    /// Requests split in two by an uninstrumented process between instrumented ones (it
    /// passed no context on): the lower trace linked to the upper one
    /// (`causeway_model::parent_links::trace_link`).
    pub continued: usize,
}

/// The spans to store, and what was done.
pub struct Joined {
    /// Inferred spans (those of joined traces rewritten into them) and parent links.
    pub spans: Vec<Span>,
    /// Counts.
    pub report: JoinReport,
}

fn port_of(endpoint: &str) -> Option<i64> {
    crate::reconcile::port(endpoint).map(i64::from)
}

fn int(span: &Span, key: &str) -> Option<i64> {
    match span.attribute(key)? {
        Value::I64(v) => Some(*v),
        Value::Str(s) => s.parse().ok(),
        _ => None,
    }
}

fn text<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    span.attribute(key)?.as_str()
}

/// Spans in order of start, found by the time they may overlap.
#[derive(Default)]
struct ByStart<'a> {
    spans: Vec<&'a Span>,
    /// The longest span's duration: how far before a time a span overlapping it may start.
    longest: u64,
}

impl<'a> ByStart<'a> {
    fn push(&mut self, s: &'a Span) {
        self.longest = self.longest.max(s.duration());
        self.spans.push(s);
    }

    /// The spans that may overlap `[from, to]`: those starting by `to` and not so early
    /// that even the longest would end before `from`.
    fn around(&self, from: u64, to: u64) -> impl Iterator<Item = &'a Span> + '_ {
        let end = self.spans.partition_point(|s| s.start <= to);
        let earliest = from.saturating_sub(self.longest);
        self.spans[..end]
            .iter()
            .rev()
            .take_while(move |s| s.start >= earliest)
            .copied()
    }
}

/// The instrumented spans of each process, by start.
struct Anchors<'a> {
    by_pid: HashMap<u32, ByStart<'a>>,
    /// By service, for inferred spans of a node named by a rule (which hides its pid).
    by_service: HashMap<&'a str, ByStart<'a>>,
    /// Instrumented client spans by the server port they called.
    clients_by_port: HashMap<i64, ByStart<'a>>,
    /// Instrumented server spans by the port they were reached on.
    servers_by_port: HashMap<i64, ByStart<'a>>,
    /// The hosts captures ran on.
    captured_hosts: HashSet<Arc<str>>,
}

impl<'a> Anchors<'a> {
    fn new(instrumented: &'a [Span], inferred: &[Span]) -> Anchors<'a> {
        let mut by_pid: HashMap<u32, ByStart> = HashMap::default();
        let mut by_service: HashMap<&str, ByStart> = HashMap::default();
        let mut clients_by_port: HashMap<i64, ByStart> = HashMap::default();
        let mut servers_by_port: HashMap<i64, ByStart> = HashMap::default();
        let mut sorted: Vec<&Span> = instrumented.iter().collect();
        sorted.sort_by_key(|s| s.start);
        for s in sorted {
            if s.pid != 0 {
                by_pid.entry(s.pid).or_default().push(s);
            }
            by_service.entry(&s.service).or_default().push(s);
            if let (SpanKind::Client, Some(port)) = (s.kind, int(s, "server.port")) {
                clients_by_port.entry(port).or_default().push(s);
            }
            let local = int(s, "network.local.port").or(int(s, "server.port"));
            if let (SpanKind::Server, Some(port)) = (s.kind, local) {
                servers_by_port.entry(port).or_default().push(s);
            }
        }
        let captured_hosts = inferred
            .iter()
            .filter(|s| s.pid != 0)
            .map(|s| s.host.clone())
            .collect();
        Anchors {
            by_pid,
            by_service,
            clients_by_port,
            servers_by_port,
            captured_hosts,
        }
    }

    /// Whether the instrumented span `s` ran in the captured process `inferred` ran in.
    /// A node named by a rule (`--name`) has no pid: it is the process whose spans report
    /// that name as their service.
    fn same_process(&self, s: &Span, inferred: &Span) -> bool {
        if inferred.pid == 0 {
            return s.service == inferred.service;
        }
        s.pid == inferred.pid && (s.host == inferred.host || !self.captured_hosts.contains(&s.host))
    }

    /// The instrumented spans of `inferred`'s process that may overlap `[from, to]`.
    fn of<'s>(
        &'s self,
        inferred: &'s Span,
        from: u64,
        to: u64,
    ) -> impl Iterator<Item = &'a Span> + 's {
        let spans = if inferred.pid == 0 {
            self.by_service.get(&*inferred.service)
        } else {
            self.by_pid.get(&inferred.pid)
        };
        spans
            .into_iter()
            .flat_map(move |spans| spans.around(from, to))
            .filter(move |s| self.same_process(s, inferred))
    }

    /// The service an instrumented span of `inferred`'s process reported, if any did.
    fn service_of(&self, inferred: &Span) -> Option<&'a Arc<str>> {
        let spans = self.by_pid.get(&inferred.pid)?;
        let s = spans
            .spans
            .iter()
            .find(|s| self.same_process(s, inferred))?;
        Some(&s.service)
    }

    /// The instrumented client span that sent the request `inferred` (a server span whose
    /// caller was not captured) served: one of another process that called its port and
    /// was open all the while it ran, the shortest not yet taken by another.
    fn caller(&self, inferred: &Span, taken: &HashSet<SpanId>) -> Option<&'a Span> {
        let port = text(inferred, attributes::NET_SOCK_HOST_ADDR).and_then(port_of)?;
        self.clients_by_port
            .get(&port)?
            .around(
                inferred.end.saturating_sub(SLACK_NS),
                inferred.start + SLACK_NS,
            )
            .filter(|c| !self.same_process(c, inferred) && !taken.contains(&c.span_id))
            .filter(|c| c.start <= inferred.start + SLACK_NS && inferred.end <= c.end + SLACK_NS)
            .min_by_key(|c| c.duration())
    }

    /// The instrumented span `inferred` (a server or client span) stands for. A server
    /// span is known by its connection (on which HTTP/2 calls overlap); a client span only
    /// by the port it called; so of calls in parallel one not yet in `anchored` is taken
    /// first (otherwise all would find the nearest).
    fn find(&self, inferred: &Span, anchored: &HashSet<SpanId>) -> Option<&'a Span> {
        let peer = text(inferred, attributes::NET_SOCK_PEER_ADDR).and_then(port_of);
        let local = text(inferred, attributes::NET_SOCK_HOST_ADDR).and_then(port_of);
        let (from, to) = (
            inferred.start.saturating_sub(CONNECTION_SLACK_NS),
            inferred.end + CONNECTION_SLACK_NS,
        );
        if inferred.pid == 0 && inferred.kind == SpanKind::Server {
            // The receiver was not captured (its span is timed on the sender's clock): the
            // instrumented server reached on that port from that connection.
            return self
                .servers_by_port
                .get(&local?)?
                .around(from, to)
                .filter(|s| peer.is_some() && int(s, "network.peer.port") == peer)
                .filter(|s| s.start <= to && from <= s.end)
                .min_by_key(|s| {
                    (
                        anchored.contains(&s.span_id),
                        s.start.abs_diff(inferred.start),
                    )
                });
        }
        let candidates = self.of(inferred, from, to);
        // Both ends: calls to one server from one process in parallel start together and
        // end apart.
        let near = |s: &&Span| s.start.abs_diff(inferred.start) + s.end.abs_diff(inferred.end);
        match inferred.kind {
            SpanKind::Server => candidates
                .filter(|s| s.kind == SpanKind::Server)
                .filter(|s| peer.is_some() && int(s, "network.peer.port") == peer)
                .filter(|s| {
                    let port = int(s, "network.local.port").or(int(s, "server.port"));
                    port.is_none() || local.is_none() || port == local
                })
                .filter(|s| s.start <= to && from <= s.end)
                // Calls on one HTTP/2 connection overlap: each takes its own span.
                .min_by_key(|s| (anchored.contains(&s.span_id), near(s))),
            SpanKind::Client => candidates
                .filter(|s| s.kind == SpanKind::Client)
                .filter(|s| {
                    peer.is_some()
                        && (int(s, "server.port") == peer || int(s, "network.peer.port") == peer)
                })
                .filter(|s| {
                    s.start <= inferred.start + SLACK_NS && inferred.start <= s.end + SLACK_NS
                })
                .min_by_key(|s| (anchored.contains(&s.span_id), near(s))),
            _ => None,
        }
    }
}

/// Joins `inferred` spans (as `crate::traces::spans` makes them) to the `instrumented`
/// spans of the same processes and time.
pub fn join(inferred: Vec<Span>, instrumented: &[Span]) -> Joined {
    let anchors = Anchors::new(instrumented, &inferred);
    let recorded: HashSet<SpanId> = instrumented.iter().map(|s| s.span_id).collect();
    let mut report = JoinReport::default();
    let mut by_trace: HashMap<TraceId, Vec<Span>> = HashMap::default();
    let mut order = Vec::new();
    for s in inferred {
        let spans = by_trace.entry(s.trace_id).or_default();
        if spans.is_empty() {
            order.push(s.trace_id);
        }
        spans.push(s);
    }
    let mut out = Vec::new();
    // Instrumented calls already given a callee, and spans already standing for an
    // inferred one.
    let mut taken: HashSet<SpanId> = HashSet::default();
    let mut anchored: HashSet<SpanId> = HashSet::default();
    for id in order {
        let spans = by_trace.remove(&id).unwrap_or_default();
        report.inferred_traces += 1;
        let found: Vec<Option<&Span>> = spans
            .iter()
            .map(|s| {
                let found = anchors.find(s, &anchored);
                if let Some(a) = found {
                    anchored.insert(a.span_id);
                }
                found
            })
            .collect();
        // A root served for a caller the capture did not see: the instrumented call that
        // sent it, if one did.
        let callers: Vec<Option<&Span>> = spans
            .iter()
            .zip(&found)
            .map(|(s, a)| {
                let uncaught = a.is_none() && s.parent_id.is_none() && s.kind == SpanKind::Server;
                let caller = anchors.caller(s, &taken).filter(|_| uncaught)?;
                taken.insert(caller.span_id);
                Some(caller)
            })
            .collect();
        let mut votes: HashMap<TraceId, usize> = HashMap::default();
        for a in found.iter().chain(&callers).flatten() {
            *votes.entry(a.trace_id).or_default() += 1;
        }
        let Some(majority) = votes
            .iter()
            .max_by_key(|(t, n)| (**n, std::cmp::Reverse(**t)))
            .map(|(t, _)| *t)
        else {
            out.extend(spans);
            continue;
        };
        report.joined += 1;
        report.split += usize::from(votes.len() > 1);
        // Each span's anchor: its trace, and whether context reached it (it was recorded
        // with a parent, so its trace is certainly its request's).
        let anchored: Vec<Option<(TraceId, bool)>> = found
            .iter()
            .zip(&callers)
            .map(|(a, c)| a.or(*c).map(|s| (s.trace_id, s.parent_id.is_some())))
            .collect();
        let target = targets(&spans, &anchored, majority);
        // Each anchored inferred span's instrumented span.
        let stands_for: HashMap<SpanId, &Span> = spans
            .iter()
            .zip(&found)
            .filter_map(|(s, a)| Some((s.span_id, (*a)?)))
            .collect();
        report.anchored_spans += stands_for.len();
        // A kept call whose callee is instrumented is named by the callee's service.
        let callee_of: HashMap<SpanId, &Arc<str>> = spans
            .iter()
            .filter_map(|s| Some((s.parent_id?, &stands_for.get(&s.span_id)?.service)))
            .collect();
        let kept: HashSet<SpanId> = spans
            .iter()
            .filter(|s| !stands_for.contains_key(&s.span_id))
            .map(|s| s.span_id)
            .collect();
        let target_of: HashMap<SpanId, TraceId> = spans
            .iter()
            .zip(&target)
            .map(|(s, t)| (s.span_id, *t))
            .collect();
        let index_of: HashMap<SpanId, usize> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| (s.span_id, i))
            .collect();
        // Span `i` and the spans above it in the path, nearest first.
        let up_from = |i: usize| {
            std::iter::successors(Some(i), |&k| {
                spans[k].parent_id.and_then(|p| index_of.get(&p).copied())
            })
            .take(spans.len())
        };
        // Whether span `i` or one above it in the path is anchored in `trace`: the request
        // above it is that instrumented one's.
        let anchored_above = |i: usize, trace: TraceId| {
            up_from(i).any(|k| found[k].or(callers[k]).map(|a| a.trace_id) == Some(trace))
        };
        for ((s, caller), &target) in spans.iter().zip(&callers).zip(&target) {
            let confidence = match s.source {
                Source::Inferred { confidence } => f64::from(confidence),
                _ => 1.0,
            };
            if let Some(anchor) = stands_for.get(&s.span_id) {
                // A root whose caller only the capture saw: that caller is its parent.
                let caller = s.parent_id.filter(|p| kept.contains(p));
                // Or recorded with a parent never stored (that process's spans were lost).
                let orphan = anchor.parent_id.is_some_and(|p| !recorded.contains(&p));
                let (Some(caller), true) = (caller, anchor.parent_id.is_none() || orphan) else {
                    continue;
                };
                // The links are of the instrumented span: the address the capture knew
                // its process by is no service.
                let mut template = s.clone();
                template.service = anchor.service.clone();
                let caller_trace = target_of.get(&caller).copied();
                if caller_trace == Some(anchor.trace_id) {
                    let mut link = if orphan {
                        orphan_link(&template, anchor.span_id, caller)
                    } else {
                        parent_link(&template, anchor.span_id, caller)
                    };
                    link.trace_id = anchor.trace_id;
                    out.push(link);
                    report.parent_links += 1;
                    continue;
                }
                // Called by a process nobody instrumented, serving an instrumented
                // request, and recorded as a trace's root: that process passed no context
                // on, and the two traces are one request's. (Called by an instrumented
                // process, linking put two requests in one path: they stay apart.)
                let upper = caller_trace
                    .zip(index_of.get(&caller).copied())
                    .filter(|_| !orphan);
                if let Some((upper, at)) = upper {
                    if anchors.service_of(&spans[at]).is_none() && anchored_above(at, upper) {
                        out.extend(trace_link(
                            &template,
                            (upper, caller),
                            (anchor.trace_id, anchor.span_id),
                        ));
                        report.continued += 1;
                    }
                }
                continue;
            }
            let mut placed = s.clone();
            placed.trace_id = target;
            if s.parent_id.and_then(|p| target_of.get(&p)) != Some(&target) {
                // The parent went to another request's trace (an anchored caller found by
                // time alone, where the part below was certain): this part starts here.
                placed.parent_id = None;
            } else if let Some(anchor) = s.parent_id.and_then(|p| stands_for.get(&p)) {
                placed.parent_id = Some(anchor.span_id);
            }
            if let Some(caller) = caller.filter(|c| c.trace_id == target) {
                placed.parent_id = Some(caller.span_id);
                // The sender, which the capture knew only by its address.
                placed
                    .attributes
                    .retain(|a| a.key != attributes::NET_PEER_NAME);
                placed
                    .attributes
                    .push(KeyValue::new(attributes::NET_PEER_NAME, &*caller.service));
                report.callers += 1;
            }
            if let (SpanKind::Client | SpanKind::Producer, Some(callee)) =
                (s.kind, callee_of.get(&s.span_id))
            {
                placed.name = format!("to {callee}");
            }
            if let Some(service) = anchors.service_of(s) {
                placed.service = Arc::clone(service);
            }
            placed
                .attributes
                .push(KeyValue::new(PARENT_CONFIDENCE, confidence));
            out.push(placed);
            report.placed_spans += 1;
        }
    }
    Joined { spans: out, report }
}

/// The trace each span of an inferred trace goes to: its anchor's; else that of the first
/// anchored span below it that context reached (its trace is the request's for certain,
/// where the anchor above was found by time alone); else that of the nearest anchored
/// span above it (the request a process that passed no context on served); else that of
/// the first anchored span below it (a proxy's forwarded request); else its parent's;
/// else `majority`. So where a path holds two traces, each part goes to the trace of the
/// request it served.
fn targets(
    spans: &[Span],
    anchored: &[Option<(TraceId, bool)>],
    majority: TraceId,
) -> Vec<TraceId> {
    let index: HashMap<SpanId, usize> = spans
        .iter()
        .enumerate()
        .map(|(i, s)| (s.span_id, i))
        .collect();
    let parent: Vec<Option<usize>> = spans
        .iter()
        .map(|s| s.parent_id.and_then(|p| index.get(&p).copied()))
        .collect();
    // Children before parents, without recursion (inferred trees can be deep): a span's
    // depth, then spans by depth, deepest first.
    // Each walk up stops at a span whose depth is known, so every span is walked once.
    let mut depth: Vec<Option<usize>> = vec![None; spans.len()];
    let mut walk = Vec::new();
    for i in 0..spans.len() {
        let mut at = Some(i);
        let mut base = 0;
        while let Some(s) = at {
            if let Some(d) = depth[s] {
                base = d + 1;
                break;
            }
            if walk.len() > spans.len() {
                break; // a cycle: no deeper than the spans
            }
            walk.push(s);
            at = parent[s];
        }
        for (k, &s) in walk.iter().rev().enumerate() {
            depth[s].get_or_insert(base + k);
        }
        walk.clear();
    }
    let depth: Vec<usize> = depth.into_iter().map(|d| d.unwrap_or(0)).collect();
    let mut order: Vec<usize> = (0..spans.len()).collect();
    order.sort_by_key(|&i| (std::cmp::Reverse(depth[i]), spans[i].start));
    // Children before parents: the first anchor below, of those `take` accepts.
    let from_below = |out: &mut Vec<Option<TraceId>>, take: &dyn Fn(usize) -> bool| {
        for &i in &order {
            if let (Some(t), Some(p), true) = (out[i], parent[i], take(i)) {
                if out[p].is_none() {
                    out[p] = Some(t);
                }
            }
        }
    };
    // Parents before children: the nearest anchor above.
    let from_above = |out: &mut Vec<Option<TraceId>>| {
        for &i in order.iter().rev() {
            if out[i].is_none() {
                out[i] = parent[i].and_then(|p| out[p]);
            }
        }
    };
    let mut out: Vec<Option<TraceId>> = anchored.iter().map(|a| a.map(|(t, _)| t)).collect();
    // Up from the anchors context reached, and from the spans they gave a trace to.
    let mut certain: Vec<bool> = anchored.iter().map(|a| a.is_some_and(|(_, c)| c)).collect();
    for &i in &order {
        if let (true, Some(p)) = (certain[i], parent[i]) {
            if anchored[p].is_none() {
                certain[p] = true;
            }
        }
    }
    from_below(&mut out, &|i| certain[i]);
    from_above(&mut out);
    from_below(&mut out, &|_| true);
    from_above(&mut out);
    out.into_iter().map(|t| t.unwrap_or(majority)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn span(
        trace: u128,
        id: u64,
        parent: Option<u64>,
        kind: SpanKind,
        host: &str,
        pid: u32,
        (start, end): (u64, u64),
    ) -> Span {
        let mut s = Span::new(
            TraceId::new(trace).unwrap(),
            SpanId::new(id).unwrap(),
            parent.and_then(SpanId::new),
            format!("op{id}"),
            "svc",
            start,
            end,
        );
        s.kind = kind;
        s.host = host.into();
        s.pid = pid;
        s
    }

    fn inferred(mut s: Span, peer: &str, local: &str) -> Span {
        s.source = Source::Inferred { confidence: 0.8 };
        s.attributes
            .push(KeyValue::new(attributes::NET_SOCK_PEER_ADDR, peer));
        s.attributes
            .push(KeyValue::new(attributes::NET_SOCK_HOST_ADDR, local));
        s
    }

    /// curl -> nginx (captured, not instrumented) -> api (instrumented, captured) ->
    /// cache (captured, not instrumented).
    fn request(at: u64, trace: u128, client_port: &str) -> (Vec<Span>, Vec<Span>) {
        let t = |a: u64, b: u64| (at + a * MS, at + b * MS);
        let base = (trace as u64) * 100;
        let inferred_spans = vec![
            inferred(
                span(1, base + 1, None, SpanKind::Server, "h", 10, t(0, 10)),
                "127.0.0.1:50000",
                "127.0.0.1:80",
            ),
            inferred(
                span(
                    1,
                    base + 2,
                    Some(base + 1),
                    SpanKind::Client,
                    "h",
                    10,
                    t(1, 9),
                ),
                "127.0.0.1:8080",
                client_port,
            ),
            inferred(
                span(
                    1,
                    base + 3,
                    Some(base + 2),
                    SpanKind::Server,
                    "h",
                    20,
                    t(1, 9),
                ),
                client_port,
                "127.0.0.1:8080",
            ),
            inferred(
                span(
                    1,
                    base + 4,
                    Some(base + 3),
                    SpanKind::Client,
                    "h",
                    20,
                    t(3, 5),
                ),
                "127.0.0.1:6379",
                "127.0.0.1:40000",
            ),
            inferred(
                span(
                    1,
                    base + 5,
                    Some(base + 4),
                    SpanKind::Server,
                    "h",
                    30,
                    t(3, 5),
                ),
                "127.0.0.1:40000",
                "127.0.0.1:6379",
            ),
        ];
        let mut server = span(
            trace,
            base + 50,
            None,
            SpanKind::Server,
            "h",
            20,
            (at + MS + 10_000, at + 9 * MS - 10_000),
        );
        server.service = "api".into();
        server.attributes.push(KeyValue::new(
            "network.peer.port",
            port_of(client_port).unwrap(),
        ));
        server
            .attributes
            .push(KeyValue::new("network.local.port", 8080i64));
        let mut client = span(
            trace,
            base + 51,
            Some(base + 50),
            SpanKind::Client,
            "h",
            20,
            (at + 3 * MS - 10_000, at + 5 * MS + 10_000),
        );
        client.service = "api".into();
        client
            .attributes
            .push(KeyValue::new("server.port", 6379i64));
        (inferred_spans, vec![server, client])
    }

    /// Two calls from one process to one server, in parallel: each instrumented call
    /// stands for one inferred call and takes its callee, also when the captured nodes
    /// were named by a rule (no pid: the process is the service of that name).
    #[test]
    fn parallel_calls_each_take_their_own_callee_also_from_named_nodes() {
        for named in [false, true] {
            let pid = |p: u32| if named { 0 } else { p };
            let mut root = span(7, 1, None, SpanKind::Server, "h", 20, (0, 20 * MS));
            root.attributes
                .push(KeyValue::new("network.peer.port", 50000i64));
            root.attributes
                .push(KeyValue::new("network.local.port", 8080i64));
            let call = |id: u64, (start, end): (u64, u64)| {
                let mut c = span(7, id, Some(1), SpanKind::Client, "h", 20, (start, end));
                c.attributes.push(KeyValue::new("server.port", 6379i64));
                c
            };
            // Both inferred calls are nearest the first instrumented one.
            let mut instrumented = vec![
                root,
                call(2, (MS, 5 * MS)),
                call(3, (MS + 50_000, 5 * MS + 100_000)),
            ];
            for s in &mut instrumented {
                s.service = "catalog".into();
            }
            let mut spans = vec![inferred(
                span(
                    1,
                    10,
                    None,
                    SpanKind::Server,
                    "h",
                    pid(20),
                    (10_000, 19 * MS),
                ),
                "127.0.0.1:50000",
                "127.0.0.1:8080",
            )];
            for (n, (start, end)) in [
                (MS + 20_000, 5 * MS + 40_000),
                (MS + 10_000, 5 * MS - 10_000),
            ]
            .into_iter()
            .enumerate()
            {
                let n = n as u64;
                let local = format!("127.0.0.1:{}", 40000 + n);
                spans.push(inferred(
                    span(
                        1,
                        11 + 2 * n,
                        Some(10),
                        SpanKind::Client,
                        "h",
                        pid(20),
                        (start, end),
                    ),
                    "127.0.0.1:6379",
                    &local,
                ));
                spans.push(inferred(
                    span(
                        1,
                        12 + 2 * n,
                        Some(11 + 2 * n),
                        SpanKind::Server,
                        "h",
                        pid(30),
                        (start + 10_000, end - 10_000),
                    ),
                    &local,
                    "127.0.0.1:6379",
                ));
            }
            for s in &mut spans {
                s.service = if [12, 14].contains(&s.span_id.get()) {
                    "cache".into()
                } else {
                    "catalog".into()
                };
            }
            let joined = join(spans, &instrumented);
            let callees: Vec<(u128, Option<u64>)> = joined
                .spans
                .iter()
                .filter(|s| &*s.service == "cache")
                .map(|s| (s.trace_id.get(), s.parent_id.map(SpanId::get)))
                .collect();
            assert_eq!(callees.len(), 2, "named: {named}: {callees:?}");
            let mut parents: Vec<Option<u64>> = callees.iter().map(|c| c.1).collect();
            parents.sort();
            assert_eq!(parents, [Some(2), Some(3)], "named: {named}: {callees:?}");
            assert!(
                callees.iter().all(|c| c.0 == 7),
                "named: {named}: {callees:?}"
            );
        }
    }

    #[test]
    fn a_proxy_and_an_uninstrumented_callee_join_the_instrumented_trace() {
        let (mut inferred_spans, mut instrumented) = request(1_000 * MS, 7, "127.0.0.1:51000");
        // A second request on the same connections, later, is another trace.
        let (more, more_instrumented) = request(1_100 * MS, 8, "127.0.0.1:51000");
        for s in &mut inferred_spans {
            s.trace_id = TraceId::new(1).unwrap();
        }
        let mut more = more;
        for s in &mut more {
            s.trace_id = TraceId::new(2).unwrap();
        }
        inferred_spans.extend(more);
        instrumented.extend(more_instrumented);
        let joined = join(inferred_spans, &instrumented);
        assert_eq!(
            joined.report,
            JoinReport {
                inferred_traces: 2,
                joined: 2,
                split: 0,
                anchored_spans: 4,
                placed_spans: 6,
                parent_links: 2,
                callers: 0,
                continued: 0,
            }
        );
        for (trace, base) in [(7u128, 700u64), (8, 800)] {
            let trace_id = TraceId::new(trace).unwrap();
            let mine: Vec<&Span> = joined
                .spans
                .iter()
                .filter(|s| s.trace_id == trace_id)
                .collect();
            let id = |n: u64| SpanId::new(base + n).unwrap();
            let find = |n: u64| {
                mine.iter()
                    .find(|s| s.span_id == id(n) && !s.is_parent_link())
            };
            // nginx's spans and the cache's server span, in the instrumented trace.
            assert!(find(1).is_some() && find(2).is_some() && find(5).is_some());
            // The inferred api spans are gone: the instrumented ones stand for them.
            assert!(find(3).is_none() && find(4).is_none());
            // The cache's server span hangs under api's instrumented client span.
            assert_eq!(find(5).unwrap().parent_id, Some(id(51)));
            assert_eq!(
                find(5).unwrap().attribute(PARENT_CONFIDENCE),
                Some(&Value::F64(0.800000011920929))
            );
            assert_eq!(find(2).unwrap().name, "to api");
            // nginx's client span becomes the parent of api's root.
            let link = mine.iter().find(|s| s.is_parent_link()).unwrap();
            assert_eq!((link.span_id, link.parent_id), (id(50), Some(id(2))));
        }
    }

    #[test]
    fn traces_without_anchors_stay_and_instrumented_services_name_their_processes() {
        let (inferred_spans, instrumented) = request(1_000 * MS, 7, "127.0.0.1:51000");
        // Ten seconds later the captured request overlaps no instrumented span.
        let late: Vec<Span> = inferred_spans
            .iter()
            .cloned()
            .map(|mut s| {
                s.start += 10_000 * MS;
                s.end += 10_000 * MS;
                s
            })
            .collect();
        let joined = join(late.clone(), &instrumented);
        assert_eq!(joined.report.joined, 0);
        assert_eq!(joined.spans, late);

        // A call from the instrumented process that its instrumentation did not see.
        let mut bare = inferred_spans;
        bare.retain(|s| s.pid == 20 || s.pid == 30);
        let mut uninstrumented_call = instrumented.clone();
        uninstrumented_call.retain(|s| s.kind == SpanKind::Server);
        let joined = join(bare, &uninstrumented_call);
        let call = joined
            .spans
            .iter()
            .find(|s| s.kind == SpanKind::Client)
            .unwrap();
        assert_eq!(&*call.service, "api");
        assert_eq!(call.parent_id, Some(SpanId::new(750).unwrap()));
    }

    #[test]
    fn an_uncaptured_callers_instrumented_calls_take_one_callee_each() {
        // catalog (instrumented, not captured) calls the cache (captured, not instrumented)
        // twice at once; each captured request is served for one of the calls.
        let mut calls = Vec::new();
        for (trace, id, (start, end)) in [(9u128, 91u64, (0, 10)), (9, 92, (1, 6))] {
            let mut call = span(
                trace,
                id,
                Some(90),
                SpanKind::Client,
                "h",
                40,
                (start * MS, end * MS),
            );
            call.service = "catalog".into();
            call.attributes.push(KeyValue::new("server.port", 6379i64));
            calls.push(call);
        }
        let served = |trace: u128, id: u64, (start, end): (u64, u64), peer: &str| {
            let s = span(
                trace,
                id,
                None,
                SpanKind::Server,
                "h",
                30,
                (start * MS, end * MS),
            );
            inferred(s, peer, "127.0.0.1:6379")
        };
        let inferred_spans = vec![
            served(1, 11, (2, 5), "127.0.0.1:50001"),
            served(2, 21, (3, 9), "127.0.0.1:50002"),
            // A request at another port is no one's.
            inferred(
                span(3, 31, None, SpanKind::Server, "h", 30, (2 * MS, 3 * MS)),
                "127.0.0.1:50003",
                "127.0.0.1:80",
            ),
        ];
        let joined = join(inferred_spans, &calls);
        assert_eq!((joined.report.joined, joined.report.callers), (2, 2));
        let parent = |id: u64| {
            joined
                .spans
                .iter()
                .find(|s| s.span_id == SpanId::new(id).unwrap())
                .map(|s| (s.trace_id.get(), s.parent_id.map(SpanId::get)))
                .unwrap()
        };
        // The short call holds the short request; the long one the other.
        assert_eq!(parent(11), (9, Some(92)));
        assert_eq!(parent(21), (9, Some(91)));
        assert_eq!(parent(31), (3, None));
        let sender = joined
            .spans
            .iter()
            .find(|s| s.span_id == SpanId::new(11).unwrap());
        assert_eq!(
            sender.and_then(|s| s.attribute(attributes::NET_PEER_NAME)),
            Some(&Value::from("catalog"))
        );
    }

    #[test]
    fn a_captured_proxy_in_front_of_an_uncaptured_instrumented_service_joins_it() {
        // nginx (captured) calls api (instrumented, not captured: its inferred span has no
        // pid and is timed on nginx's clock).
        let nginx = inferred(
            span(1, 1, None, SpanKind::Server, "h", 10, (0, 10 * MS)),
            "127.0.0.1:50000",
            "127.0.0.1:80",
        );
        let call = inferred(
            span(1, 2, Some(1), SpanKind::Client, "h", 10, (MS, 9 * MS)),
            "127.0.0.1:8080",
            "127.0.0.1:51000",
        );
        let api = inferred(
            span(1, 3, Some(2), SpanKind::Server, "", 0, (MS, 9 * MS)),
            "127.0.0.1:51000",
            "127.0.0.1:8080",
        );
        let mut root = span(
            7,
            50,
            None,
            SpanKind::Server,
            "web-1",
            20,
            (MS + 100_000, 9 * MS - 100_000),
        );
        root.service = "api".into();
        root.attributes
            .push(KeyValue::new("network.peer.port", 51000i64));
        root.attributes
            .push(KeyValue::new("network.local.port", 8080i64));
        let joined = join(vec![nginx, call, api], &[root]);
        assert_eq!((joined.report.joined, joined.report.parent_links), (1, 1));
        let link = joined.spans.iter().find(|s| s.is_parent_link()).unwrap();
        assert_eq!(
            (link.span_id.get(), link.parent_id.map(SpanId::get)),
            (50, Some(2))
        );
        // Of the instrumented service, not of the address the capture knew it by.
        assert_eq!(&*link.service, "api");
        let call = joined.spans.iter().find(|s| s.span_id.get() == 2).unwrap();
        assert_eq!((call.trace_id.get(), call.name.as_str()), (7, "to api"));
        assert!(joined.spans.iter().all(|s| s.span_id.get() != 3));
    }

    #[test]
    fn two_requests_linked_into_one_path_go_to_their_own_traces() {
        // The capture linked two requests through the proxy as one path: the proxy's one
        // server span with both forwarded calls under it.
        let proxy = inferred(
            span(1, 1, None, SpanKind::Server, "h", 10, (0, 30 * MS)),
            "127.0.0.1:50000",
            "127.0.0.1:80",
        );
        let mut spans = vec![proxy];
        let mut roots = Vec::new();
        for (n, (start, end), conn) in [
            (0u64, (MS, 9 * MS), 51_000i64),
            (1, (20 * MS, 29 * MS), 51_001),
        ] {
            let call = 10 + n;
            spans.push(inferred(
                span(1, call, Some(1), SpanKind::Client, "h", 10, (start, end)),
                "127.0.0.1:8080",
                &format!("127.0.0.1:{conn}"),
            ));
            spans.push(inferred(
                span(1, 20 + n, Some(call), SpanKind::Server, "", 0, (start, end)),
                &format!("127.0.0.1:{conn}"),
                "127.0.0.1:8080",
            ));
            let mut root = span(
                7 + u128::from(n),
                50 + n,
                None,
                SpanKind::Server,
                "web-1",
                20,
                (start + 100_000, end - 100_000),
            );
            root.attributes
                .push(KeyValue::new("network.peer.port", conn));
            root.attributes
                .push(KeyValue::new("network.local.port", 8080i64));
            roots.push(root);
        }
        let joined = join(spans, &roots);
        assert_eq!((joined.report.split, joined.report.parent_links), (1, 2));
        // Two requests, not one split by the proxy: no instrumented request above it.
        assert_eq!(joined.report.continued, 0);
        let get = |id: u64| {
            joined
                .spans
                .iter()
                .find(|s| s.span_id.get() == id && !s.is_parent_link())
                .unwrap()
        };
        assert_eq!(
            (
                get(1).trace_id.get(),
                get(10).trace_id.get(),
                get(11).trace_id.get()
            ),
            (7, 7, 8)
        );
        assert_eq!(get(10).parent_id.map(SpanId::get), Some(1));
        // The second call starts its trace: its parent went to the first request's.
        assert_eq!(get(11).parent_id, None);
        let links: Vec<(u128, u64, Option<u64>)> = joined
            .spans
            .iter()
            .filter(|s| s.is_parent_link())
            .map(|s| {
                (
                    s.trace_id.get(),
                    s.span_id.get(),
                    s.parent_id.map(SpanId::get),
                )
            })
            .collect();
        assert!(
            links.contains(&(7, 50, Some(10))) && links.contains(&(8, 51, Some(11))),
            "{links:?}"
        );
    }

    #[test]
    fn a_request_split_by_an_uninstrumented_process_is_linked_into_one_trace() {
        split_by_an_uninstrumented_process(false);
        split_by_an_uninstrumented_process(true);
    }

    /// web (instrumented, captured or not) -> mid (captured, no instrumentation) -> store
    /// (instrumented, not captured), store's span recorded in `store_trace` with
    /// `store_parent`: the instrumented spans (web's root and call, store's root) and the
    /// inferred ones.
    fn web_mid_store(
        web_captured: bool,
        (store_trace, store_parent): (u128, Option<u64>),
    ) -> (Vec<Span>, Vec<Span>) {
        let mut web_root = span(7, 1, None, SpanKind::Server, "web-1", 5, (0, 30 * MS));
        web_root.service = "web".into();
        let mut web_call = span(7, 2, Some(1), SpanKind::Client, "web-1", 5, (MS, 25 * MS));
        web_call.service = "web".into();
        web_call
            .attributes
            .push(KeyValue::new("server.port", 9000i64));
        let (at, pid) = ((6 * MS, 18 * MS), 6);
        let mut store_root = span(
            store_trace,
            3,
            store_parent,
            SpanKind::Server,
            "db-1",
            pid,
            at,
        );
        store_root.service = "store".into();
        store_root
            .attributes
            .push(KeyValue::new("network.peer.port", 53_000i64));
        store_root
            .attributes
            .push(KeyValue::new("network.local.port", 8080i64));
        let mid = |id: u64, parent: Option<u64>, kind: SpanKind, at: (u64, u64)| {
            span(1, id, parent, kind, "h", 20, at)
        };
        let mut inferred_spans = vec![
            // mid's server span: its caller is web's call, or was not captured.
            inferred(
                mid(
                    10,
                    web_captured.then_some(9),
                    SpanKind::Server,
                    (2 * MS, 24 * MS),
                ),
                "127.0.0.1:52000",
                "127.0.0.1:9000",
            ),
            inferred(
                mid(11, Some(10), SpanKind::Client, (5 * MS, 19 * MS)),
                "127.0.0.1:8080",
                "127.0.0.1:53000",
            ),
            // store's side, timed on mid's clock: store was not captured.
            inferred(
                span(1, 12, Some(11), SpanKind::Server, "", 0, (5 * MS, 19 * MS)),
                "127.0.0.1:53000",
                "127.0.0.1:8080",
            ),
        ];
        if web_captured {
            // web's call: it stands for the instrumented one.
            inferred_spans.push(inferred(
                span(1, 9, None, SpanKind::Client, "web-1", 5, (2 * MS, 24 * MS)),
                "127.0.0.1:9000",
                "127.0.0.1:52000",
            ));
        }
        (vec![web_root, web_call, store_root], inferred_spans)
    }

    /// [`web_mid_store`], mid passing no context on: two traces of one request.
    fn split_by_an_uninstrumented_process(web_captured: bool) {
        use causeway_model::parent_links::join_linked;
        use causeway_model::Trace;
        let (instrumented, inferred_spans) = web_mid_store(web_captured, (8, None));
        // Had store's span a recorded parent (mid passed the context on), the split would
        // be linking's mistake: no link.
        let mut propagated = instrumented.clone();
        propagated[2].parent_id = SpanId::new(99);
        let mistaken = join(inferred_spans.clone(), &propagated);
        assert_eq!((mistaken.report.split, mistaken.report.continued), (1, 0));
        let joined = join(inferred_spans, &instrumented);
        assert_eq!(joined.report.split, 1);
        assert_eq!(joined.report.continued, 1);
        // Each trace as the store assembles it, then joined as a reader joins them.
        let mut web_trace = instrumented[..2].to_vec();
        let mut store_trace = instrumented[2..].to_vec();
        for s in joined.spans {
            match s.trace_id.get() {
                7 => web_trace.push(s),
                8 => store_trace.push(s),
                other => panic!("a span in trace {other}"),
            }
        }
        let (web, store) = (
            Trace::assemble(TraceId::new(7).unwrap(), web_trace),
            Trace::assemble(TraceId::new(8).unwrap(), store_trace),
        );
        assert_eq!(web.links.len(), 1);
        assert_eq!(store.links.len(), 1);
        assert_eq!(web.links[0].other, TraceId::new(8));
        let one = join_linked(TraceId::new(7).unwrap(), vec![web, store]);
        let chain: Vec<(u64, Option<u64>)> = one
            .spans
            .iter()
            .map(|s| (s.span_id.get(), s.parent_id.map(SpanId::get)))
            .collect();
        assert_eq!(one.roots.len(), 1, "{chain:?}");
        assert_eq!(one.spans[one.roots[0]].span_id.get(), 1);
        // web's call -> mid's server span -> mid's call -> store's root.
        for (child, parent) in [(10, 2), (11, 10), (3, 11)] {
            assert!(chain.contains(&(child, Some(parent))), "{chain:?}");
        }
        assert!(one.spans.iter().all(|s| !s.is_carrier()));
    }

    #[test]
    fn a_span_whose_recorded_parent_was_lost_takes_the_inferred_caller() {
        use causeway_model::Trace;
        // mid's spans were lost, but it passed the context on: store's span names mid's
        // lost call as its parent.
        let (instrumented, inferred_spans) = web_mid_store(false, (7, Some(99)));
        let joined = join(inferred_spans, &instrumented);
        assert_eq!(
            (joined.report.parent_links, joined.report.continued),
            (1, 0)
        );
        let link = joined.spans.iter().find(|s| s.is_parent_link()).unwrap();
        assert_eq!(
            link.attribute(causeway_model::parent_links::ORPHAN),
            Some(&Value::Bool(true))
        );
        let t = Trace::assemble(
            TraceId::new(7).unwrap(),
            [instrumented, joined.spans].concat(),
        );
        assert!(t.orphans.is_empty(), "{:?}", t.orphans);
        assert_eq!(t.roots.len(), 1);
        assert_eq!(
            t.span(SpanId::new(3).unwrap()).unwrap().parent_id,
            SpanId::new(11)
        );
    }
}
