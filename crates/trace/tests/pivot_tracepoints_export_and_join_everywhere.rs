//! What a tracepoint exports and where its tuples travel, in both subscriber modes:
//! span entry and exit as tracepoints, the default exports every tracepoint has, fields
//! recorded with Debug and Display, `FirstN` and `MostRecentN` joins, and bags that
//! cross threads and tasks (a child span on another thread packs, and its bag comes back
//! to its parent when it closes).

mod common;

use std::time::{SystemTime, UNIX_EPOCH};

use causeway::testing::Recorder;
use causeway::Mode;
use causeway_pivot::value::Value;
use tracing::instrument::WithSubscriber;
use tracing::Instrument;

const TRACEPOINTS: &str = r#"
Tracepoint Entered = span.enter(target = "app", name = "poll")
Tracepoint Exited = span.exit(target = "app", name = "poll")
Tracepoint Tick = event(target = "app", field = "tick") Export kind, shown
Tracepoint Step = event(target = "app", field = "step") Export step
Tracepoint Done = event(target = "app", field = "done")
Tracepoint Op = span(target = "app", name = "op") Export user
Tracepoint Work = span.close(target = "app", name = "work") Export part
"#;

#[derive(Debug)]
enum Kind {
    Slow,
}

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// The rows of query `id` in `results`.
fn rows_of(results: &[(u32, causeway_pivot::aggregate::Aggregator)], id: u32) -> Vec<Vec<Value>> {
    let mut rows: Vec<Vec<Value>> = results
        .iter()
        .filter(|(q, _)| *q == id)
        .flat_map(|(_, a)| a.rows())
        .collect();
    rows.sort_by_key(|r| format!("{r:?}"));
    rows
}

fn strings(rows: &[Vec<Value>]) -> Vec<Vec<String>> {
    rows.iter()
        .map(|r| r.iter().map(Value::to_string).collect())
        .collect()
}

fn run(mode: Mode) {
    let config = causeway::testing::config("svc-a")
        .with_mode(mode)
        .with_process_name("proc-a");
    let rec = Recorder::with_config(config).unwrap();
    let pivot = rec.pivot();
    let queries = [
        "From e In Entered Select COUNT",
        "From e In Exited Select COUNT",
        "From t In Tick GroupBy t.service, t.procName, t.pid, t.tracepoint, t.kind, t.shown \
         Select t.service, t.procName, t.pid, t.tracepoint, t.kind, t.shown, COUNT, \
         MIN(t.timestamp), MAX(t.timestamp)",
        "From t In Tick GroupBy t.thread Select t.thread, COUNT",
        "From d In Done Join s In FirstN(2, Step) On s -> d GroupBy s.step Select s.step, COUNT",
        "From d In Done Join s In MostRecentN(2, Step) On s -> d GroupBy s.step \
         Select s.step, COUNT",
        "From d In Done Join w In Work On w -> d Join op In Op On op -> w \
         GroupBy op.user, w.part Select op.user, w.part, COUNT",
    ];
    for (i, q) in queries.iter().enumerate() {
        common::install(&pivot, i as u32 + 1, TRACEPOINTS, q);
    }
    let before = now_ns();
    rec.in_scope(|| {
        // A span entered and exited three times (as a future's span is, once a poll).
        let poll = tracing::info_span!(target: "app", "poll");
        for _ in 0..3 {
            let _entered = poll.enter();
        }
        drop(poll);
        tracing::info!(target: "app", tick = 1, kind = ?Kind::Slow, shown = %1.5, "tick");
        std::thread::Builder::new()
            .name("ticker".into())
            .spawn(causeway::in_current_span(
                || tracing::info!(target: "app", tick = 2, kind = ?Kind::Slow, shown = %1.5, "tick"),
            ))
            .unwrap()
            .join()
            .unwrap();

        let op = tracing::info_span!(target: "app", "op", user = "u1");
        let _op = op.enter();
        for step in 1..=4 {
            tracing::info!(target: "app", step, "step");
        }
        // A child span on another thread, and one in a task on another runtime's thread:
        // each packs its part, and its bag merges back into the op when it closes.
        std::thread::spawn(causeway::in_current_span(|| {
            let _w = tracing::info_span!(target: "app", "work", part = "thread").entered();
        }))
        .join()
        .unwrap();
        let pool = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        pool.block_on(async {
            tokio::spawn(
                async { tracing::info_span!(target: "app", "work", part = "task").in_scope(|| {}) }
                    .instrument(tracing::Span::current())
                    .with_subscriber(dispatch),
            )
            .await
            .unwrap();
        });
        tracing::info!(target: "app", done = true, "done");
    });
    let after = now_ns();
    let results = pivot.take_results();

    assert_eq!(strings(&rows_of(&results, 1)), [["3"]], "{mode:?}: entries");
    assert_eq!(strings(&rows_of(&results, 2)), [["3"]], "{mode:?}: exits");

    let ticks = rows_of(&results, 3);
    assert_eq!(ticks.len(), 1, "{mode:?}: {ticks:?}");
    let t = &ticks[0];
    assert_eq!(
        strings(&[t[..7].to_vec()]),
        [[
            "svc-a".to_string(),
            "proc-a".to_string(),
            std::process::id().to_string(),
            "Tick".to_string(),
            "Slow".to_string(),
            "1.5".to_string(),
            "2".to_string()
        ]],
        "{mode:?}"
    );
    for stamp in &t[7..] {
        let Value::Int(ns) = stamp else {
            panic!("{mode:?}: a timestamp in nanoseconds, not {stamp:?}")
        };
        assert!((before..=after).contains(ns), "{mode:?}: {ns}");
    }
    let threads: Vec<String> = rows_of(&results, 4)
        .iter()
        .map(|r| r[0].to_string())
        .collect();
    assert_eq!(
        threads.len(),
        2,
        "{mode:?}: two threads ticked: {threads:?}"
    );
    assert!(threads.contains(&"ticker".to_string()), "{threads:?}");

    assert_eq!(
        strings(&rows_of(&results, 5)),
        [["1", "1"], ["2", "1"]],
        "{mode:?}: the first two steps"
    );
    assert_eq!(
        strings(&rows_of(&results, 6)),
        [["3", "1"], ["4", "1"]],
        "{mode:?}: the last two steps"
    );
    assert_eq!(
        strings(&rows_of(&results, 7)),
        [["u1", "task", "1"], ["u1", "thread", "1"]],
        "{mode:?}: parts packed on other threads came back"
    );
}

#[test]
fn exclusive() {
    run(Mode::Exclusive);
}

#[test]
fn layer() {
    run(Mode::Layer);
}
