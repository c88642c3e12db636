//! The checker never panics or hangs: any expectations that compile, against any path
//! built from the input's bytes, end within the step budget.
#![no_main]

use causeway_expect::check::Checker;
use causeway_expect::lang::parse;
use causeway_expect::path::Path;
use causeway_model::{Direction, Event, Message, Span, SpanId, SpanKind, Trace, TraceId};
use libfuzzer_sys::fuzz_target;

/// Spans from 6-byte records: parent index, name, kind, host, a notice, a message.
fn trace(bytes: &[u8]) -> Trace {
    let id = TraceId::new(1).unwrap();
    let mut spans: Vec<Span> = Vec::new();
    for (i, r) in bytes.chunks_exact(6).take(64).enumerate() {
        let start = (i as u64) * 10 + r[4] as u64;
        let end = start + r[5] as u64 * 3;
        let parent = (i > 0 && r[0] % 4 != 0).then(|| SpanId::new(1 + (r[0] as u64 % i as u64)).unwrap());
        let mut s = Span::new(id, SpanId::new(i as u64 + 1).unwrap(), parent, ["a", "b", "c"][r[1] as usize % 3], "svc", start, end);
        s.kind = [SpanKind::Internal, SpanKind::Client, SpanKind::Server, SpanKind::Producer][r[2] as usize % 4];
        s.host = ["h0", "h1", "h2"][r[3] as usize % 3].into();
        if r[4] % 3 == 0 {
            s.events.push(Event { time: start + 1, name: "n".into(), attributes: vec![] });
        }
        if r[5] % 5 == 0 {
            let direction = if r[5] % 2 == 0 { Direction::Send } else { Direction::Recv };
            s.messages.push(Message { direction, id: r[3] as u64 % 4, time: start + 2, peer: None, size: Some(r[0] as u64) });
        }
        spans.push(s);
    }
    Trace::assemble(id, spans)
}

fuzz_target!(|data: &[u8]| {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let Ok(src) = std::str::from_utf8(&data[..split]) else { return };
    let Ok(file) = parse(src) else { return };
    let Ok(checker) = Checker::new(&file, Default::default()) else { return };
    let checker = checker.with_budget(20_000);
    let path = Path::of(&trace(data.get(split + 1..).unwrap_or(&[])));
    let (_, facts) = checker.check(&path);
    let _ = checker.assertions(&[facts]);
});
