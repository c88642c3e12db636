//! Causeway is one layer among others: next to `tracing_subscriber::fmt` both see every
//! span and event, sampled or not.

mod common;

use std::sync::{Arc, Mutex};

use causeway::model::Span;
use causeway::{Config, Sampler};
use common::{Buffer, Collect};
use tracing_subscriber::layer::SubscriberExt;

fn run(sampler: Sampler) -> (String, Vec<Span>) {
    let out = Buffer::default();
    let spans = Arc::new(Mutex::new(Vec::new()));
    let (layer, guard) = causeway::layer(
        Config::new("fmt-too")
            .with_sampler(sampler)
            .with_sink(Collect(spans.clone())),
    )
    .unwrap();
    let writer = out.clone();
    let fmt = tracing_subscriber::fmt::layer()
        .with_ansi(false)
        .with_writer(move || writer.clone());
    let subscriber = tracing_subscriber::registry().with(layer).with(fmt);
    tracing::subscriber::with_default(subscriber, || {
        let _req = tracing::info_span!("request", user = "alice").entered();
        let _db = tracing::info_span!("query", table = "items").entered();
        tracing::info!(rows = 3, "fetched rows");
    });
    drop(guard);
    let text = out.text();
    let spans = spans.lock().unwrap().clone();
    (text, spans)
}

#[test]
fn both_layers_see_a_sampled_request() {
    let (text, spans) = run(Sampler::Always);
    assert!(text.contains("fetched rows"), "{text}");
    assert!(
        text.contains("request{user=\"alice\"}:query{table=\"items\"}"),
        "{text}"
    );
    assert_eq!(spans.len(), 2);
    let query = spans.iter().find(|s| s.name == "query").unwrap();
    assert_eq!(query.events[0].name, "fetched rows");
}

#[test]
fn fmt_still_sees_every_span_of_an_unsampled_request() {
    let (text, spans) = run(Sampler::Never);
    assert!(spans.is_empty());
    assert!(
        text.contains("request{user=\"alice\"}:query{table=\"items\"}: "),
        "{text}"
    );
    assert!(text.contains("rows=3"), "{text}");
}
