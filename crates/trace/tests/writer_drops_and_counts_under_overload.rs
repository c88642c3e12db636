//! A slow or stalled sink never blocks the application: a thread's lane to the writer
//! drops what it has no room for and counts it, and every recorded span is either
//! written or counted as dropped.

use std::time::Duration;

use causeway::model::Span;
use causeway::SpanSink;

struct SlowSink;

impl SpanSink for SlowSink {
    fn write(&mut self, _spans: &[Span]) {
        std::thread::sleep(Duration::from_millis(20));
    }
    fn flush(&mut self) {}
}

#[test]
fn overload_drops_and_counts_instead_of_blocking() {
    let config = causeway::testing::config("overload").with_queue_spans(512);
    let (dispatch, guard) = causeway::dispatch(config.with_sink(SlowSink)).unwrap();
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

/// A sink that blocks in its first write until the gate opens: a writer stalled for good.
struct Stalled(std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>);

impl SpanSink for Stalled {
    fn write(&mut self, _spans: &[Span]) {
        let (open, changed) = &*self.0;
        let mut open = open.lock().unwrap();
        while !*open {
            open = changed.wait(open).unwrap();
        }
    }
    fn flush(&mut self) {}
}

#[test]
fn a_stalled_writer_costs_spans_counted_never_a_blocked_thread() {
    let gate = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let config = causeway::testing::config("stalled").with_queue_spans(256);
    let (dispatch, guard) = causeway::dispatch(config.with_sink(Stalled(gate.clone()))).unwrap();
    tracing::dispatcher::with_default(&dispatch, || {
        for i in 0..20_000 {
            let _s = tracing::info_span!("stuck", i).entered();
        }
    });
    let stuck = guard.stats();
    assert_eq!(stuck.recorded, 20_000);
    // Only what the lane holds (256 spans' worth) and what the writer took before it
    // stalled can still be written; everything else is dropped and counted.
    assert!(stuck.dropped >= 20_000 - 2 * 1024, "{stuck:?}");
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    assert!(guard.flush());
    let s = guard.stats();
    assert_eq!(s.dropped, stuck.dropped, "{s:?}");
    assert_eq!(s.written + s.dropped, s.recorded, "{s:?}");
}
