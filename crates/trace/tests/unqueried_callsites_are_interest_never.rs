//! In both modes, a callsite outside the configured targets that no installed query
//! reads is `Interest::never` (`tracing` skips it without asking the subscriber); a query
//! that reads it makes it `always`, and uninstalling the query makes it `never` again.
//! The level hint follows: the targets' level, `TRACE` only while a query is installed.

use causeway::Mode;
use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::Metadata;
use tracing_subscriber::filter::Targets;

const QUERY: &str = r#"
Tracepoint Lookup = span(target = "cache", name = "lookup") Export bytes
From l In Lookup GroupBy l.procName Select l.procName, SUM(l.bytes)
"#;

/// The callsite the query reads: a `trace` span under an `info` filter.
fn lookup() -> &'static Metadata<'static> {
    tracing::trace_span!(target: "cache", "lookup", bytes = 1u64)
        .metadata()
        .expect("made under a subscriber that wants it")
}

/// A callsite nothing reads, outside the targets too.
fn noise() -> &'static Metadata<'static> {
    tracing::trace_span!(target: "cache", "noise")
        .metadata()
        .expect("made under a subscriber that wants it")
}

fn interest(d: &tracing::Dispatch, meta: &'static Metadata<'static>) -> &'static str {
    let i: Interest = d.register_callsite(meta);
    if i.is_never() {
        "never"
    } else if i.is_always() {
        "always"
    } else {
        "sometimes"
    }
}

#[test]
fn only_a_query_lifts_a_callsite_outside_the_targets_out_of_never() {
    let prepared = causeway_pivot::install::prepare(QUERY, &Default::default()).unwrap();
    // The callsites' metadata, from spans a subscriber that wants everything made (gone
    // before Causeway's dispatchers are made, so the level check is theirs alone).
    let (lookup, noise) =
        tracing::subscriber::with_default(tracing_subscriber::registry(), || (lookup(), noise()));
    for mode in [Mode::Exclusive, Mode::Layer] {
        let config = causeway::testing::config("interest")
            .with_mode(mode)
            .with_targets("shop=info".parse::<Targets>().unwrap());
        let (dispatch, guard) = causeway::dispatch(config).unwrap();
        let pivot = guard.pivot();
        // The level `tracing` checks first, over every live dispatcher (this one only).
        let hint = |_: &tracing::Dispatch| Some(LevelFilter::current());

        assert_eq!(interest(&dispatch, lookup), "never", "{mode:?}");
        assert_eq!(interest(&dispatch, noise), "never", "{mode:?}");
        assert_eq!(hint(&dispatch), Some(LevelFilter::INFO), "{mode:?}");

        pivot.install(3, &prepared.script).unwrap();
        assert_eq!(interest(&dispatch, lookup), "always", "{mode:?}");
        assert_eq!(interest(&dispatch, noise), "never", "{mode:?}");
        assert_eq!(hint(&dispatch), Some(LevelFilter::TRACE), "{mode:?}");

        assert!(pivot.uninstall(3));
        assert_eq!(interest(&dispatch, lookup), "never", "{mode:?}");
        assert_eq!(hint(&dispatch), Some(LevelFilter::INFO), "{mode:?}");
    }
}
