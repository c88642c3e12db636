//! Per-trace analyses of a 10 000-span trace: critical path, self times, skew correction,
//! statistics and the trace's shape (pattern id).

use std::sync::Arc;

use causeway_analysis::critical::{critical_path, self_times};
use causeway_analysis::patterns::TraceShape;
use causeway_analysis::skew::correct;
use causeway_analysis::stats::trace_stats;
use causeway_model::{Span, SpanId, SpanKind, Trace, TraceId};
use criterion::{criterion_group, criterion_main, Criterion};

/// A 10K-span request: breadth-first fan-out (1 to 4 calls per server span, each a client
/// span and a server span on another of 50 hosts, children sequential or concurrent),
/// with clocks that disagree by up to a few milliseconds per host.
fn big_trace(n: usize) -> Trace {
    let mut rng = 0x1234_5678_9abc_def0u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // (parent, kind, host)
    let mut nodes: Vec<(Option<usize>, SpanKind, u64)> = vec![(None, SpanKind::Server, 0)];
    let mut frontier = 0;
    while nodes.len() + 2 <= n {
        let caller = frontier;
        frontier += 1;
        if nodes[caller].1 != SpanKind::Server {
            continue;
        }
        for _ in 0..1 + next() % 4 {
            if nodes.len() + 2 > n {
                break;
            }
            let host = nodes[caller].2;
            nodes.push((Some(caller), SpanKind::Client, host));
            nodes.push((Some(nodes.len() - 1), SpanKind::Server, next() % 50));
        }
    }
    let mut children = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if let Some(p) = n.0 {
            children[p].push(i);
        }
    }
    let mut times = vec![(0u64, 0u64); nodes.len()];
    // Lay out from the leaves up: a span lasts its children (sequential or concurrent)
    // plus its own work; then place starts top-down.
    let mut order = vec![0usize];
    let mut k = 0;
    while k < order.len() {
        let i = order[k];
        order.extend(&children[i]);
        k += 1;
    }
    let parallel: Vec<bool> = (0..nodes.len()).map(|_| next() % 2 == 0).collect();
    let mut length = vec![0u64; nodes.len()];
    for &i in order.iter().rev() {
        let kids = children[i].iter().map(|&c| length[c]);
        let inner = if parallel[i] {
            kids.max().unwrap_or(0)
        } else {
            kids.sum()
        };
        length[i] = inner + 10_000 + next() % 1_000_000;
    }
    times[0] = (
        1_700_000_000_000_000_000,
        1_700_000_000_000_000_000 + length[0],
    );
    for &i in &order {
        let mut t = times[i].0 + 5_000;
        for &c in &children[i] {
            times[c] = (t, t + length[c]);
            if !parallel[i] {
                t += length[c];
            }
        }
    }
    let skew: Vec<i64> = (0..50)
        .map(|_| (next() % 8_000_000) as i64 - 4_000_000)
        .collect();
    let trace_id = TraceId::new(0xfeed).unwrap();
    let spans: Vec<Span> = nodes
        .iter()
        .enumerate()
        .map(|(i, &(parent, kind, host))| {
            let shift = skew[host as usize] as i128;
            let at = |t: u64| (t as i128 + shift) as u64;
            let mut s = Span::new(
                trace_id,
                SpanId::new(i as u64 + 1).unwrap(),
                parent.and_then(|p| SpanId::new(p as u64 + 1)),
                format!("op{}", i % 40),
                &format!("service{host}"),
                at(times[i].0),
                at(times[i].1),
            );
            s.kind = kind;
            s.host = Arc::from(format!("host{host}"));
            s
        })
        .collect();
    Trace::assemble(trace_id, spans)
}

fn bench(c: &mut Criterion) {
    // A root and 5 000 client/server pairs.
    let t = big_trace(10_001);
    assert_eq!(t.spans.len(), 10_001);
    let mut g = c.benchmark_group("trace of 10K spans");
    g.bench_function("critical path", |b| b.iter(|| critical_path(&t)));
    g.bench_function("self times", |b| b.iter(|| self_times(&t)));
    g.bench_function("skew correction", |b| b.iter(|| correct(&t)));
    g.bench_function("stats", |b| b.iter(|| trace_stats(&t)));
    g.bench_function("shape (pattern id)", |b| {
        b.iter(|| TraceShape::of(&t).map(|s| s.id))
    });
    g.bench_function("assemble", |b| {
        b.iter_batched(
            || t.spans.clone(),
            |spans| Trace::assemble(t.trace_id, spans),
            criterion::BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
