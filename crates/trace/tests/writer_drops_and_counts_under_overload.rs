//! A slow sink never blocks the application: the bounded queue drops whole batches and
//! counts them, and every recorded span is either written or counted as dropped.

use std::time::Duration;

use causeway::model::Span;
use causeway::{Config, SpanSink};

struct SlowSink;

impl SpanSink for SlowSink {
    fn write(&mut self, _spans: &[Span]) {
        std::thread::sleep(Duration::from_millis(20));
    }
    fn flush(&mut self) {}
}

#[test]
fn overload_drops_and_counts_instead_of_blocking() {
    let config = Config::new("overload").with_queue_spans(512);
    let (dispatch, guard) =
        causeway::dispatch_with_sinks(config, vec![Box::new(SlowSink)]).unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        for _ in 0..50_000 {
            let _s = tracing::info_span!("burst").entered();
        }
    });
    assert!(guard.flush());
    let s = guard.stats();
    assert_eq!(s.recorded, 50_000);
    assert!(s.dropped > 0, "{s:?}");
    assert_eq!(s.written + s.dropped, s.recorded, "{s:?}");
}
