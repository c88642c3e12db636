//! How many spans per second the background writer sustains into segment files: native
//! encoding plus buffered writes of realistic spans (12 attributes, 2 events).
//!
//! `cargo bench --bench writer`

use std::sync::Arc;
use std::time::Duration;

use causeway::model::{Event, KeyValue, Span, SpanId, SpanKind, TraceId};
use causeway::sinks::segment::{self, SegmentWriter};
use causeway::SpanSink;
use criterion::{Criterion, Throughput};

fn realistic(i: u64) -> Span {
    let mut s = Span::new(
        TraceId::new(0x1234_5678_9abc_def0_0000_0000_0000_0000 | ((i / 20) as u128 + 1)).unwrap(),
        SpanId::new(i * 7 + 1).unwrap(),
        SpanId::new(i * 7 + 2),
        [
            "GET /api/items",
            "SELECT items",
            "cache get",
            "POST /api/cart",
        ][(i % 4) as usize],
        "frontend",
        1_700_000_000_000_000_000 + i * 1_000,
        1_700_000_000_000_000_000 + i * 1_000 + 250_000,
    );
    s.kind = SpanKind::Server;
    s.host = Arc::from("web-17");
    s.pid = 4242;
    s.execution_unit = i % 16;
    s.attributes = vec![
        KeyValue::new("http.request.method", "GET"),
        KeyValue::new("http.route", "/api/items/{id}"),
        KeyValue::new("http.response.status_code", 200i64),
        KeyValue::new("url.path", format!("/api/items/{}", i % 1000)),
        KeyValue::new("user.id", format!("u{}", i % 5000)),
        KeyValue::new("net.peer.ip", "10.1.2.3"),
        KeyValue::new("db.system", "postgresql"),
        KeyValue::new("cache.hit", i.is_multiple_of(3)),
        KeyValue::new("retry", (i % 2) as i64),
        KeyValue::new("region", "eu-west-1"),
        KeyValue::new("tenant", format!("t{}", i % 50)),
        KeyValue::new("payload.bytes", (i % 4096) as i64),
    ];
    s.events = vec![
        Event {
            time: s.start + 1_000,
            name: "parsed request".into(),
            attributes: vec![],
        },
        Event {
            time: s.start + 9_000,
            name: "cache miss".into(),
            attributes: vec![KeyValue::new("key", "items:17")],
        },
    ];
    s
}

fn main() {
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let spans: Vec<Span> = (0..256).map(realistic).collect();
    let dir = std::env::temp_dir().join(format!("causeway-writer-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut writer = SegmentWriter::open(&dir, "bench", 1, 8 << 20).unwrap();
    // As `causeway agent` would, delete segments once they are closed, so the figure is
    // the writer's and not the page cache's filling up over gigabytes.
    let proc_dir = writer.dir().to_path_buf();
    let mut batches = 0u64;
    let mut written_bytes = 0u64;
    let mut g = c.benchmark_group("writer");
    g.throughput(Throughput::Elements(spans.len() as u64));
    g.bench_function("segment_files_batch_256", |b| {
        b.iter(|| {
            writer.write(&spans);
            batches += 1;
            if batches.is_multiple_of(64) {
                let files = segment::segment_files(&proc_dir).unwrap_or_default();
                for f in &files[..files.len().saturating_sub(1)] {
                    written_bytes += std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
                    let _ = std::fs::remove_file(f);
                }
            }
        })
    });
    // The CPU part alone (encoding into a reused buffer), to tell it from the I/O.
    let mut buf = Vec::with_capacity(1 << 20);
    g.bench_function("encode_only_batch_256", |b| {
        b.iter(|| {
            buf.clear();
            for s in &spans {
                causeway::model::codec::native::encode(s, &mut buf);
            }
            std::hint::black_box(buf.len());
        })
    });
    g.finish();
    eprintln!(
        "native record bytes per span: {}",
        buf.len() / spans.len().max(1)
    );
    writer.flush();
    eprintln!("segment bytes written (closed segments, deleted as they closed): {written_bytes}");
    let _ = std::fs::remove_dir_all(&dir);
    c.final_summary();
}
