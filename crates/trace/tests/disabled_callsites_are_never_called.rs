//! Callsites the configured targets leave out are never handed to the subscriber: their
//! fields are not even formatted, and they record nothing. Runs in the mode
//! `CAUSEWAY_MODE` names, like the rest of the suite.

mod common;

use causeway::testing::Recorder;
use common::Counted;
use tracing_subscriber::filter::Targets;

#[test]
fn spans_and_events_outside_the_targets_are_neither_formatted_nor_recorded() {
    let targets: Targets = "shop=info,shop::noisy=off".parse().unwrap();
    let recorder =
        Recorder::with_config(causeway::testing::config("filtered").with_targets(targets)).unwrap();
    recorder.in_scope(|| {
        let root = tracing::info_span!(target: "shop", "checkout", field = ?Counted);
        let _r = root.enter();
        let formatted_by_a_recorded_span = common::formatted();
        assert_eq!(formatted_by_a_recorded_span, 1);
        for _ in 0..10 {
            let debug = tracing::debug_span!(target: "shop", "too fine", field = ?Counted);
            let _d = debug.enter();
            tracing::debug!(target: "shop", value = ?Counted, "too fine an event");
            let off = tracing::error_span!(target: "shop::noisy", "switched off", field = ?Counted);
            let _o = off.enter();
            tracing::error!(target: "shop::noisy", value = ?Counted, "switched off too");
            tracing::info!(target: "shop", "kept");
        }
        assert_eq!(common::formatted(), formatted_by_a_recorded_span);
    });
    let traces = recorder.traces();
    assert_eq!(traces.len(), 1);
    let spans = &traces[0].spans;
    assert_eq!(spans.len(), 1, "{spans:?}");
    assert_eq!(spans[0].name, "checkout");
    // The events kept are those of the enabled callsite, all on the recorded span.
    assert_eq!(spans[0].events.len(), 10);
    assert!(spans[0].events.iter().all(|e| e.name == "kept"));
}
