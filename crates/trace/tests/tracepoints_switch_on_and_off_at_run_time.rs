//! Callsites outside the configured targets cost nothing until a tracepoint enables them
//! at run time; then they are recorded, and once disabled they cost nothing again.

mod common;

use std::sync::{Arc, Mutex};

use causeway::model::Span;
use common::{Collect, Counted};
use tracing_subscriber::filter::Targets;

fn request() {
    let _r = tracing::info_span!(target: "shop", "request").entered();
    let _c = tracing::trace_span!(target: "cache", "lookup", key = ?Counted).entered();
    tracing::trace!(target: "cache", value = ?Counted, "miss");
}

#[test]
fn a_tracepoint_enables_callsites_and_disabling_it_makes_them_free_again() {
    let spans = Arc::new(Mutex::new(Vec::new()));
    let config = causeway::testing::config("tracepoints")
        .with_targets("shop=info".parse::<Targets>().unwrap());
    let (subscriber, guard) =
        causeway::subscriber(config.with_sink(Collect(spans.clone()))).unwrap();
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
        assert_eq!(common::formatted(), 0);
        assert_eq!(names(&spans), ["request"]);

        let cache = tracepoints.enable(|m| m.target() == "cache");
        request();
        assert_eq!(common::formatted(), 2);
        let mut got = names(&spans);
        got.sort();
        assert_eq!(got, ["lookup", "request"]);

        assert!(tracepoints.disable(cache));
        assert!(!tracepoints.disable(cache));
        request();
        assert_eq!(common::formatted(), 2);
        assert_eq!(names(&spans), ["request"]);
    });
}
