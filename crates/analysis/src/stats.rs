//! Where a trace's time went: network vs server time of each RPC, and totals per service
//! and per operation. For each RPC (a client span and the server span it called): the
//! client's and the server's time, the network time between them, and the request and
//! response gaps (server start after client start, client end after server end; signed,
//! since skew may make them negative).

use std::collections::BTreeMap;

use causeway_model::{SpanId, SpanKind, Trace};
use serde::Serialize;

use crate::critical::self_times;

/// One RPC: a client span and the server span it called.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RpcHop {
    /// The client span.
    pub client_span_id: SpanId,
    /// The server span.
    pub server_span_id: SpanId,
    /// The calling service.
    pub client_service: String,
    /// The called service.
    pub server_service: String,
    /// The server span's name.
    pub operation: String,
    /// The client span's duration, ns.
    pub client_ns: u64,
    /// The server span's duration, ns.
    pub server_ns: u64,
    /// Client time not spent in the server (network, queues, serialization), ns.
    pub network_ns: u64,
    /// Server start less client start (the request's way), ns; meaningful on
    /// skew-corrected times.
    pub request_ns: i64,
    /// Client end less server end (the response's way), ns.
    pub response_ns: i64,
}

/// Every RPC of the trace (a server span whose parent is a client span), in span order.
pub fn rpc_hops(trace: &Trace) -> Vec<RpcHop> {
    let mut hops = Vec::new();
    for (c, p) in trace.parent.iter().enumerate() {
        let Some(p) = *p else { continue };
        let (client, server) = (&trace.spans[p], &trace.spans[c]);
        if client.kind != SpanKind::Client || server.kind != SpanKind::Server {
            continue;
        }
        hops.push(RpcHop {
            client_span_id: client.span_id,
            server_span_id: server.span_id,
            client_service: client.service.to_string(),
            server_service: server.service.to_string(),
            operation: server.name.clone(),
            client_ns: client.duration(),
            server_ns: server.duration(),
            network_ns: client.duration().saturating_sub(server.duration()),
            request_ns: signed_gap(client.start, server.start),
            response_ns: signed_gap(server.end, client.end),
        });
    }
    hops
}

fn signed_gap(from: u64, to: u64) -> i64 {
    (to as i128 - from as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

/// Time totals of one service, or one operation of a service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// The service.
    pub service: String,
    /// The operation (span name); absent in per-service totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operation: Option<String>,
    /// Spans.
    pub count: u64,
    /// Spans with an error status.
    pub errors: u64,
    /// Sum of the spans' durations, ns (nested spans of one service count twice).
    pub total_ns: u64,
    /// Sum of the spans' self times, ns: these add up to the trace's busy time.
    pub self_ns: u64,
}

/// A trace's statistics.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceStats {
    /// Spans in the trace.
    pub spans: usize,
    /// Per service, most self time first.
    pub services: Vec<Totals>,
    /// Per (service, operation), most self time first.
    pub operations: Vec<Totals>,
    /// Each RPC's network and server time.
    pub rpcs: Vec<RpcHop>,
}

/// Counts, total time and self time per service and per operation, and the RPC hops.
pub fn trace_stats(trace: &Trace) -> TraceStats {
    let own = self_times(trace);
    let mut by_service: BTreeMap<&str, Totals> = BTreeMap::new();
    let mut by_operation: BTreeMap<(&str, &str), Totals> = BTreeMap::new();
    for (s, &self_ns) in trace.spans.iter().zip(&own) {
        let blank = |operation: Option<&str>| Totals {
            service: s.service.to_string(),
            operation: operation.map(str::to_string),
            count: 0,
            errors: 0,
            total_ns: 0,
            self_ns: 0,
        };
        for t in [
            by_service.entry(&s.service).or_insert_with(|| blank(None)),
            by_operation
                .entry((&s.service, &s.name))
                .or_insert_with(|| blank(Some(&s.name))),
        ] {
            t.count += 1;
            t.errors += u64::from(s.is_error());
            t.total_ns += s.duration();
            t.self_ns += self_ns;
        }
    }
    let most_self = |v: &mut Vec<Totals>| v.sort_by_key(|t| std::cmp::Reverse(t.self_ns));
    let mut services: Vec<Totals> = by_service.into_values().collect();
    let mut operations: Vec<Totals> = by_operation.into_values().collect();
    most_self(&mut services);
    most_self(&mut operations);
    TraceStats {
        spans: trace.spans.len(),
        services,
        operations,
        rpcs: rpc_hops(trace),
    }
}
