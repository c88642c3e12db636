//! What joining sources costs per span: inferred paths joined to the instrumented traces
//! of the same requests (`causeway_blackbox::join::join`), and a trace read with the log
//! records and parent links that arrived apart from its spans (`Trace::assemble`).

use causeway_blackbox::join::join;
use causeway_model::logs::{log_event, LOG_RECORDS, UNPLACED};
use causeway_model::parent_links::parent_link;
use causeway_model::{attributes, KeyValue, Source, Span, SpanId, SpanKind, Trace, TraceId};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};

const MS: u64 = 1_000_000;

fn span(
    trace: u128,
    id: u64,
    parent: Option<u64>,
    kind: SpanKind,
    pid: u32,
    (start, end): (u64, u64),
) -> Span {
    let mut s = Span::new(
        TraceId::new(trace).expect("nonzero"),
        SpanId::new(id).expect("nonzero"),
        parent.and_then(SpanId::new),
        "op",
        "svc",
        start,
        end,
    );
    s.kind = kind;
    s.host = "h".into();
    s.pid = pid;
    s
}

fn inferred(mut s: Span, peer: String, local: String) -> Span {
    s.source = Source::Inferred { confidence: 0.9 };
    s.attributes
        .push(KeyValue::new(attributes::NET_SOCK_PEER_ADDR, peer));
    s.attributes
        .push(KeyValue::new(attributes::NET_SOCK_HOST_ADDR, local));
    s
}

/// `n` requests 1 ms apart, each curl -> nginx (captured) -> api (instrumented and
/// captured) -> cache (captured), on keep-alive connections from a pool of 8: five
/// inferred spans and two instrumented ones a request.
fn requests(n: u64) -> (Vec<Span>, Vec<Span>) {
    let (mut inferred_spans, mut instrumented) = (Vec::new(), Vec::new());
    for r in 0..n {
        let at = 1_000_000 * MS + r * MS;
        let (trace, base) = (u128::from(r) + 1, r * 100 + 1);
        let conn = 51_000 + r % 8;
        let t = |a: u64, b: u64| (at + a * MS / 10, at + b * MS / 10);
        let endpoints = |peer: String, local: String| (peer, local);
        let hops = [
            (
                0,
                None,
                SpanKind::Server,
                10,
                t(0, 10),
                endpoints("127.0.0.1:50000".into(), "127.0.0.1:80".into()),
            ),
            (
                1,
                Some(0),
                SpanKind::Client,
                10,
                t(1, 9),
                endpoints("127.0.0.1:8080".into(), format!("127.0.0.1:{conn}")),
            ),
            (
                2,
                Some(1),
                SpanKind::Server,
                20,
                t(1, 9),
                endpoints(format!("127.0.0.1:{conn}"), "127.0.0.1:8080".into()),
            ),
            (
                3,
                Some(2),
                SpanKind::Client,
                20,
                t(3, 5),
                endpoints("127.0.0.1:6379".into(), "127.0.0.1:40000".into()),
            ),
            (
                4,
                Some(3),
                SpanKind::Server,
                30,
                t(3, 5),
                endpoints("127.0.0.1:40000".into(), "127.0.0.1:6379".into()),
            ),
        ];
        for (id, parent, kind, pid, times, (peer, local)) in hops {
            let s = span(trace, base + id, parent.map(|p| base + p), kind, pid, times);
            inferred_spans.push(inferred(s, peer, local));
        }
        let (s, e) = t(1, 9);
        let instrumented_trace = trace + (1 << 100);
        let mut server = span(
            instrumented_trace,
            base + 50,
            None,
            SpanKind::Server,
            20,
            (s + 10_000, e - 10_000),
        );
        server
            .attributes
            .push(KeyValue::new("network.peer.port", conn as i64));
        server
            .attributes
            .push(KeyValue::new("network.local.port", 8080i64));
        let (s, e) = t(3, 5);
        let mut client = span(
            instrumented_trace,
            base + 51,
            Some(base + 50),
            SpanKind::Client,
            20,
            (s - 10_000, e + 10_000),
        );
        client
            .attributes
            .push(KeyValue::new("server.port", 6379i64));
        instrumented.extend([server, client]);
    }
    (inferred_spans, instrumented)
}

fn joining(c: &mut Criterion) {
    let mut g = c.benchmark_group("join");
    let (inferred_spans, instrumented) = requests(10_000);
    let check = join(inferred_spans.clone(), &instrumented);
    assert_eq!(check.report.joined, 10_000, "{:?}", check.report);
    g.throughput(Throughput::Elements(inferred_spans.len() as u64));
    g.sample_size(10);
    g.bench_function("join_50k_inferred_spans_to_20k_instrumented", |b| {
        b.iter_batched(
            || inferred_spans.clone(),
            |spans| join(spans, &instrumented),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

/// A 60-span trace, and the same with 30 log records on 10 carriers (half naming their
/// span, half only the trace) and a parent link.
fn reading(c: &mut Criterion) {
    let mut g = c.benchmark_group("assemble");
    let trace = 7u128;
    let mut spans: Vec<Span> = (1..=60u64)
        .map(|i| {
            span(
                trace,
                i,
                (i > 1).then_some(i / 2),
                SpanKind::Internal,
                1,
                (i * MS, i * MS + 10 * MS),
            )
        })
        .collect();
    spans[0].parent_id = None;
    let mut with_logs = spans.clone();
    for c in 1..=10u64 {
        let named = c % 2 == 0;
        let id = if named { c * 5 } else { 1_000 + c };
        let mut carrier = span(
            trace,
            id,
            None,
            SpanKind::Internal,
            1,
            (c * 5 * MS, c * 5 * MS),
        );
        carrier.name = LOG_RECORDS.into();
        carrier.source = Source::Logs;
        if !named {
            carrier.attributes.push(KeyValue::new(UNPLACED, true));
        }
        carrier.events = (0..3)
            .map(|k| log_event(c * 5 * MS + k, format!("line {k}"), Some("INFO"), vec![]))
            .collect();
        with_logs.push(carrier);
    }
    let proxy = span(trace, 999, None, SpanKind::Client, 2, (0, 80 * MS));
    let (root, proxy_id) = (
        SpanId::new(1).expect("nonzero"),
        SpanId::new(999).expect("nonzero"),
    );
    with_logs.push(parent_link(&proxy, root, proxy_id));
    with_logs.push(proxy);
    let id = TraceId::new(trace).expect("nonzero");
    let placed = Trace::assemble(id, with_logs.clone());
    assert_eq!(
        placed.spans.iter().map(|s| s.events.len()).sum::<usize>(),
        30
    );
    assert_eq!(placed.roots.len(), 1);
    g.throughput(Throughput::Elements(60));
    g.bench_function("assemble_60_spans", |b| {
        b.iter_batched(
            || spans.clone(),
            |s| Trace::assemble(id, s),
            BatchSize::SmallInput,
        )
    });
    g.bench_function(
        "assemble_60_spans_with_30_log_records_and_a_parent_link",
        |b| {
            b.iter_batched(
                || with_logs.clone(),
                |s| Trace::assemble(id, s),
                BatchSize::SmallInput,
            )
        },
    );
    g.finish();
}

criterion_group!(benches, joining, reading);
criterion_main!(benches);
