//! Callsites outside the configured targets cost nothing until a tracepoint enables them
//! at run time; then they are recorded, and once disabled they cost nothing again.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use causeway::model::Span;
use causeway::{Config, SpanSink};
use tracing_subscriber::filter::Targets;

static FORMATTED: AtomicUsize = AtomicUsize::new(0);

/// A field value that counts how often it is formatted.
struct Counted;

impl fmt::Debug for Counted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        FORMATTED.fetch_add(1, Ordering::Relaxed);
        f.write_str("counted")
    }
}

struct Collect(Arc<Mutex<Vec<Span>>>);

impl SpanSink for Collect {
    fn write(&mut self, spans: &[Span]) {
        self.0.lock().unwrap().extend_from_slice(spans);
    }
    fn flush(&mut self) {}
}

fn request() {
    let _r = tracing::info_span!(target: "shop", "request").entered();
    let _c = tracing::trace_span!(target: "cache", "lookup", key = ?Counted).entered();
    tracing::trace!(target: "cache", value = ?Counted, "miss");
}

#[test]
fn a_tracepoint_enables_callsites_and_disabling_it_makes_them_free_again() {
    let spans = Arc::new(Mutex::new(Vec::new()));
    let config = Config::new("tracepoints").with_targets("shop=info".parse::<Targets>().unwrap());
    let (subscriber, guard) =
        causeway::subscriber_with_sinks(config, vec![Box::new(Collect(spans.clone()))]).unwrap();
    let tracepoints = subscriber.tracepoints();
    let names = |spans: &Arc<Mutex<Vec<Span>>>| -> Vec<String> {
        assert!(guard.flush());
        let names = spans
            .lock()
            .unwrap()
            .iter()
            .map(|s| s.name.clone())
            .collect();
        spans.lock().unwrap().clear();
        names
    };
    tracing::subscriber::with_default(subscriber, || {
        request();
        assert_eq!(FORMATTED.load(Ordering::Relaxed), 0);
        assert_eq!(names(&spans), ["request"]);

        let cache = tracepoints.enable(|m| m.target() == "cache");
        request();
        assert_eq!(FORMATTED.load(Ordering::Relaxed), 2);
        let mut got = names(&spans);
        got.sort();
        assert_eq!(got, ["lookup", "request"]);

        assert!(tracepoints.disable(cache));
        assert!(!tracepoints.disable(cache));
        request();
        assert_eq!(FORMATTED.load(Ordering::Relaxed), 2);
        assert_eq!(names(&spans), ["request"]);
    });
}
