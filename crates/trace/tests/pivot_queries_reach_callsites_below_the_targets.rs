//! A Pivot Tracing query may read a callsite the configured targets leave out (a `trace`
//! event in a library, under an `info` filter): installing it makes the callsite fire,
//! and uninstalling it makes the callsite free again. Its own process, because the
//! level `tracing` checks first is global.

mod common;

use causeway_pivot::value::Value;
use common::Counted;
use tracing_subscriber::filter::Targets;

const QUERY: &str = r#"
Tracepoint Miss = event(target = "cache", field = "bytes") Export bytes
From m In Miss GroupBy m.procName Select m.procName, SUM(m.bytes)
"#;

fn request() {
    let _r = tracing::info_span!(target: "shop", "request").entered();
    tracing::trace!(target: "cache", bytes = 10u64, value = ?Counted, "miss");
}

#[test]
fn a_query_enables_a_callsite_below_the_targets_and_uninstalling_frees_it() {
    let config = causeway::testing::config("below")
        .with_process_name("below-1")
        .with_targets("shop=info".parse::<Targets>().unwrap());
    let (subscriber, guard) = causeway::subscriber(config).unwrap();
    let pivot = guard.pivot();
    let prepared = causeway_pivot::install::prepare(QUERY, &Default::default()).unwrap();
    tracing::subscriber::with_default(subscriber, || {
        request();
        assert_eq!(common::formatted(), 0, "the trace event is disabled");

        pivot.install(7, &prepared.script).unwrap();
        request();
        request();
        let results = pivot.take_results();
        let rows: Vec<Vec<Value>> = results
            .iter()
            .flat_map(|(_, a)| a.rows())
            .collect::<Vec<_>>();
        assert_eq!(
            rows,
            [vec![Value::from("below-1"), Value::from(20i64)]],
            "{results:?}"
        );
        // The advice reads `bytes`, not `value`: the Debug field is never formatted.
        assert_eq!(common::formatted(), 0);

        assert!(pivot.uninstall(7));
        request();
        assert!(pivot
            .take_results()
            .iter()
            .all(|(_, a)| a.rows().is_empty()));
        assert_eq!(common::formatted(), 0);
    });
}
