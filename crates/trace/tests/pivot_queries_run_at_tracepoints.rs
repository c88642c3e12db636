//! Pivot Tracing inside one process: queries installed at run time fire at `tracing`
//! callsites, join through the bags spans carry (a child starts with its parent's bag
//! and merges it back on close), in both subscriber modes, sampled or not.

mod common;

use causeway::testing::Recorder;
use causeway::{Mode, Sampler};
use common::rows_of;

const TRACEPOINTS: &str = r#"
Tracepoint Op = span(target = "app::client", name = "do_next_op")
Tracepoint Read = event(target = "app::server", field = "delta") Export delta
Tracepoint Served = span.close(target = "app::server", name = "serve") Export src
Tracepoint Lookup = span.close(target = "app::server", name = "lookup") Export replicas = explode(replicas, ",")
"#;

fn install(pivot: &causeway::Pivot, id: u32, query: &str) {
    common::install(pivot, id, TRACEPOINTS, query);
}

fn rows(pivot: &causeway::Pivot) -> Vec<(u32, Vec<Vec<String>>)> {
    rows_of(pivot.take_results())
}

fn one_request(file: &str, replicas: &str) {
    let _op = tracing::info_span!(target: "app::client", "do_next_op").entered();
    {
        let serve =
            tracing::info_span!(target: "app::server", "serve", src = tracing::field::Empty)
                .entered();
        serve.record("src", file);
        tracing::info!(target: "app::server", delta = 10i64, "read");
        let _lookup =
            tracing::info_span!(target: "app::server", "lookup", replicas = replicas).entered();
    }
    // After `serve` closed, its bag (with `lookup`'s tuples) is back in the op's.
    tracing::info!(target: "app::server", delta = 1i64, "read after");
}

fn run(mode: Mode, sampler: Sampler) {
    let config = causeway::testing::config("test")
        .with_mode(mode)
        .with_sampler(sampler.clone())
        .with_process_name("proc-1");
    let rec = Recorder::with_config(config).unwrap();
    let pivot = rec.pivot();
    rec.in_scope(|| {
        // Nothing installed: nothing fires.
        one_request("f0", "A");
        assert!(rows(&pivot).is_empty());
        install(
            &pivot,
            1,
            "From r In Read Join op In Op On op -> r GroupBy op.procName \
             Select op.procName, SUM(r.delta)",
        );
        install(
            &pivot,
            2,
            "From s In Served GroupBy s.src Select s.src, COUNT, MIN(s.duration) ",
        );
        install(
            &pivot,
            3,
            "From r In Read Join l In Lookup On l -> r GroupBy l.replicas \
             Select l.replicas, COUNT",
        );
        for _ in 0..3 {
            one_request("f1", "A,B");
        }
        one_request("f2", "C");
        // A read outside any request joins nothing.
        tracing::info!(target: "app::server", delta = 5i64, "stray");
    });
    let results = pivot.take_results();
    // Each group links to a trace that fed it, when traces are sampled.
    let recorded: Vec<_> = rec.spans().iter().map(|s| s.trace_id).collect();
    for (_, a) in &results {
        for (row, example) in a.rows_with_examples() {
            match sampler {
                Sampler::Never => assert_eq!(example, None, "{row:?}"),
                _ => assert!(
                    example.is_some_and(|t| recorded.contains(&t)),
                    "{mode:?} {row:?} {example:?}"
                ),
            }
        }
    }
    let got = rows_of(results);
    assert_eq!(got.len(), 3, "{mode:?} {got:?}");
    assert_eq!(
        got[0],
        (1, vec![vec!["proc-1".to_string(), "44".to_string()]])
    );
    let served = &got[1].1;
    assert_eq!(served.len(), 2, "{served:?}");
    assert_eq!(served[0][..2], ["f1".to_string(), "3".to_string()]);
    assert_eq!(served[1][..2], ["f2".to_string(), "1".to_string()]);
    assert!(served[0][2].parse::<i64>().unwrap() >= 0, "{served:?}");
    // Each request's second read sees its lookup's replicas, one tuple each.
    assert_eq!(
        got[2].1,
        [["A", "3"], ["B", "3"], ["C", "1"]]
            .iter()
            .map(|r| r.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        "{mode:?} {sampler:?}"
    );
    // Uninstalling stops the query.
    assert!(pivot.uninstall(1));
    rec.in_scope(|| one_request("f3", "D"));
    let after: Vec<u32> = rows(&pivot).iter().map(|(id, _)| *id).collect();
    assert_eq!(after, [2, 3]);
    assert_eq!(pivot.installed(), [2, 3]);
}

#[test]
fn exclusive_sampled() {
    run(Mode::Exclusive, Sampler::Always);
}

#[test]
fn exclusive_unsampled() {
    run(Mode::Exclusive, Sampler::Never);
}

#[test]
fn layer_sampled() {
    run(Mode::Layer, Sampler::Always);
}

#[test]
fn layer_unsampled() {
    run(Mode::Layer, Sampler::Never);
}

#[test]
fn the_catalog_lists_registered_callsites() {
    let rec = Recorder::new();
    rec.in_scope(|| tracing::info!(target: "app::catalog", answer = 42, "registered"));
    let callsites = rec.pivot().callsites();
    let c = callsites
        .iter()
        .find(|c| c.target == "app::catalog")
        .expect("the event's callsite is listed");
    assert_eq!(c.kind, "event");
    assert!(c.fields.contains(&"answer".to_string()), "{c:?}");
}

/// The agent installs from its own thread, outside the application's subscriber scope:
/// the callsites must still wake up (with a single dispatcher in the process, `tracing`
/// rebuilds interest from the calling thread's default).
#[test]
fn installs_from_another_thread_take_effect() {
    let config = causeway::testing::config("test").with_sampler(Sampler::Never);
    let rec = Recorder::with_config(config).unwrap();
    let pivot = rec.pivot();
    rec.in_scope(|| one_request("f0", "A"));
    let elsewhere = pivot.clone();
    std::thread::spawn(move || {
        install(
            &elsewhere,
            7,
            "From s In Served GroupBy s.src Select s.src, COUNT",
        );
    })
    .join()
    .unwrap();
    rec.in_scope(|| one_request("f1", "A"));
    assert_eq!(
        rows(&pivot),
        [(7, vec![vec!["f1".to_string(), "1".to_string()]])]
    );
    std::thread::spawn(move || assert!(pivot.uninstall(7)))
        .join()
        .unwrap();
    rec.in_scope(|| one_request("f2", "A"));
    assert!(rows(&rec.pivot()).is_empty());
}
