//! Matcher throughput on one core: a 2-of-3 quorum read path against the FAB-style
//! recognizer, a 60-event thread against a repeat/xor pattern, and the worst case of
//! nested futures that almost match (ends undecided at the step budget).

use causeway_expect::check::Checker;
use causeway_expect::lang::parse;
use causeway_expect::path::Path;
use causeway_expect::program::Params;
use causeway_model::{Direction, Event, Message, Span, SpanId, Trace, TraceId};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

const MS: u64 = 1_000_000;

fn span(id: u64, parent: Option<u64>, host: &str, name: &str, start: u64, end: u64) -> Span {
    let mut s = Span::new(
        TraceId::new(1).unwrap(),
        SpanId::new(id).unwrap(),
        parent.and_then(SpanId::new),
        name,
        host,
        start,
        end,
    );
    s.host = host.into();
    s.pid = 1;
    s
}

fn msg(s: &mut Span, direction: Direction, id: u64, time: u64) {
    s.messages.push(Message {
        direction,
        id,
        time,
        peer: None,
        size: Some(4096),
    });
}

fn quorum_path() -> Path {
    let mut read = span(1, None, "coord", "read", 0, 40 * MS);
    let mut spans = Vec::new();
    for d in 0..3u64 {
        msg(&mut read, Direction::Send, 10 + d, MS + d);
        let mut srv = span(
            2 + d,
            Some(1),
            &format!("disk-{d}"),
            "read block",
            2 * MS + d,
            10 * MS + d * 5 * MS,
        );
        msg(&mut srv, Direction::Recv, 10 + d, 2 * MS + d);
        msg(&mut srv, Direction::Send, 20 + d, 10 * MS + d * 5 * MS - 1);
        msg(
            &mut read,
            Direction::Recv,
            20 + d,
            10 * MS + d * 5 * MS + if d == 2 { 15 * MS } else { 0 },
        );
        spans.push(srv);
    }
    read.events.push(Event {
        time: 22 * MS,
        name: "replied".into(),
        attributes: vec![],
    });
    spans.push(read);
    Path::of(&Trace::assemble(TraceId::new(1).unwrap(), spans))
}

const QUORUM: &str = r#"
validator QuorumRead {
  thread Coordinator("coord", 1) {
    task("read") {
      repeat 3 send(Peer);
      repeat 2 recv(Peer);
      future recv(Peer);
      notice("replied");
    }
  }
  thread Peer(m/^disk-\d$/, 3) { task("read block") { recv(Coordinator); send(Coordinator); } }
}"#;

fn long_path(n: u64) -> Path {
    let mut root = span(1, None, "h", "root", 0, 10_000 * MS);
    let mut spans = Vec::new();
    for i in 0..n {
        if i % 3 == 0 {
            spans.push(span(
                2 + i,
                Some(1),
                "h",
                "step",
                i * 10 * MS,
                i * 10 * MS + MS,
            ));
        } else {
            root.events.push(Event {
                time: i * 10 * MS,
                name: format!("n{}", i % 2),
                attributes: vec![],
            });
        }
    }
    spans.push(root);
    Path::of(&Trace::assemble(TraceId::new(1).unwrap(), spans))
}

const LOOP: &str = r#"
validator Loop { thread T(*, 1) { task("root") {
  repeat between 0 and 100 xor {
    branch: task("step");
    branch: notice(m/^n\d$/);
  }
} } }"#;

const NESTED_FUTURES: &str = r#"
validator Nested { thread T(*, 1) { task("root") {
  repeat between 0 and 40 { maybe notice(*); future { maybe notice(*); future notice(*); } }
  notice("never");
} } }"#;

fn checker(text: &str) -> Checker {
    Checker::new(&parse(text).unwrap(), Params::new()).unwrap()
}

fn matcher(c: &mut Criterion) {
    let mut g = c.benchmark_group("matcher");
    g.throughput(Throughput::Elements(1));
    // Building the path view (threads, pairing, metrics) of a 61-span trace.
    let wide = {
        let mut spans = vec![span(1, None, "h", "root", 0, 1_000 * MS)];
        for i in 0..30u64 {
            let mut c = span(
                2 + 2 * i,
                Some(1),
                "h",
                "call",
                i * 10 * MS,
                i * 10 * MS + 5 * MS,
            );
            c.kind = causeway_model::SpanKind::Client;
            let mut s = span(
                3 + 2 * i,
                Some(2 + 2 * i),
                &format!("d{}", i % 3),
                "serve",
                i * 10 * MS + MS,
                i * 10 * MS + 4 * MS,
            );
            s.kind = causeway_model::SpanKind::Server;
            s.events.push(Event {
                time: i * 10 * MS + 2 * MS,
                name: "hit".into(),
                attributes: vec![],
            });
            spans.push(c);
            spans.push(s);
        }
        Trace::assemble(TraceId::new(1).unwrap(), spans)
    };
    g.bench_function("path view of a 61-span trace", |b| {
        b.iter(|| Path::of(&wide))
    });
    let (path, q) = (quorum_path(), checker(QUORUM));
    assert!(q.check(&path).0.expected);
    g.bench_function("quorum read path (4 threads, 24 events)", |b| {
        b.iter(|| q.check(&path))
    });
    let (path, l) = (long_path(60), checker(LOOP));
    assert!(l.check(&path).0.expected);
    g.bench_function("60-event thread, repeat of xor", |b| {
        b.iter(|| l.check(&path))
    });
    let path = long_path(24);
    let n = checker(NESTED_FUTURES);
    let (r, _) = n.check(&path);
    assert!(!r.expected);
    g.sample_size(10);
    g.bench_function("nested futures worst case (to the 2M-step budget)", |b| {
        b.iter(|| n.check(&path))
    });
    g.finish();
}

criterion_group!(benches, matcher);
criterion_main!(benches);
