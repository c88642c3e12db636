//! Span overhead on the application's thread, side by side in one run: `tracing` with no
//! subscriber, a subscriber that does nothing (the price of the `tracing` macros), the
//! Registry with a layer that does nothing, Causeway unsampled and sampled spans and an
//! event on a sampled span (`causeway_*`: the exclusive subscriber; `causeway_layer_*`:
//! the Layer on the Registry), and `tracing-opentelemetry` over `opentelemetry_sdk`
//! (batch processor, no-op exporter).
//!
//! `cargo bench --bench overhead` writes the medians (ns per operation) to
//! `target/causeway-bench/overhead.json`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use causeway::model::Span;
use causeway::{Config, Mode, Sampler, SpanSink};
use criterion::Criterion;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter};
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

const CASES: [&str; 13] = [
    "bare_tracing_span",
    "dispatch_floor_span",
    "registry_noop_layer_span",
    "causeway_layer_unsampled_span",
    "causeway_layer_sampled_span",
    "causeway_unsampled_span",
    "causeway_sampled_span",
    "causeway_sampled_event",
    "causeway_unsampled_root_span",
    "causeway_sampled_root_span",
    "otel_sampled_span",
    "otel_unsampled_span",
    "otel_sampled_root_span",
];

/// A sink that drops spans: the cost measured ends at the hand-off to the writer.
struct Discard;
impl SpanSink for Discard {
    fn write(&mut self, spans: &[Span]) {
        std::hint::black_box(spans.len());
    }
    fn flush(&mut self) {}
}

#[derive(Debug)]
struct NoopExporter;
impl SpanExporter for NoopExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        std::hint::black_box(batch.len());
        Ok(())
    }
}

fn causeway(mode: Mode, sampler: Sampler) -> (Dispatch, causeway::Guard) {
    let config = Config::new("bench")
        .with_mode(mode)
        .with_sampler(sampler)
        .with_queue_spans(1 << 20);
    causeway::dispatch_with_sinks(config, vec![Box::new(Discard)]).unwrap()
}

/// A subscriber that does nothing and hands out one constant id: what is left is the
/// cost of the `tracing` macros and the dispatch itself.
struct Floor;
impl tracing::Subscriber for Floor {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

fn otel(sampler: opentelemetry_sdk::trace::Sampler) -> (Dispatch, SdkTracerProvider) {
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(NoopExporter).build())
        .with_sampler(sampler)
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("bench"));
    (
        Dispatch::new(tracing_subscriber::registry().with(layer)),
        provider,
    )
}

/// Creates, enters, exits and closes a span with one field. Unless `root`, inside an
/// entered parent (a span within a request, the common case, where the sampling
/// decision is inherited); with `root`, each span starts a trace (ids and a decision).
fn span_case(c: &mut Criterion, name: &str, dispatch: &Dispatch, root: bool) {
    tracing::dispatcher::with_default(dispatch, || {
        let parent = if root {
            tracing::Span::none()
        } else {
            tracing::info_span!("parent")
        };
        let _p = parent.enter();
        c.benchmark_group("overhead").bench_function(name, |b| {
            b.iter(|| {
                let span = tracing::info_span!("request", id = 7);
                let _entered = span.enter();
            })
        });
    });
}

fn benches(c: &mut Criterion) {
    let none = Dispatch::new(tracing::subscriber::NoSubscriber::default());
    span_case(c, "bare_tracing_span", &none, false);
    let noop = Dispatch::new(
        tracing_subscriber::registry().with(tracing_subscriber::layer::Identity::new()),
    );
    span_case(c, "registry_noop_layer_span", &noop, false);
    span_case(c, "dispatch_floor_span", &Dispatch::new(Floor), false);

    let (d, guard) = causeway(Mode::Layer, Sampler::Never);
    span_case(c, "causeway_layer_unsampled_span", &d, false);
    drop(guard);
    let (d, guard) = causeway(Mode::Layer, Sampler::Always);
    span_case(c, "causeway_layer_sampled_span", &d, false);
    drop(guard);

    let (d, guard) = causeway(Mode::Exclusive, Sampler::Never);
    span_case(c, "causeway_unsampled_span", &d, false);
    span_case(c, "causeway_unsampled_root_span", &d, true);
    drop(guard);

    let (d, guard) = causeway(Mode::Exclusive, Sampler::Always);
    span_case(c, "causeway_sampled_span", &d, false);
    span_case(c, "causeway_sampled_root_span", &d, true);
    // Events: a fresh span every 100 events keeps them under the annotation cap, so
    // every event is really recorded; only the events are timed.
    tracing::dispatcher::with_default(&d, || {
        c.benchmark_group("overhead")
            .bench_function("causeway_sampled_event", |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut left = iters;
                    while left > 0 {
                        let n = left.min(100);
                        let span = tracing::info_span!("request");
                        let _e = span.enter();
                        let t0 = Instant::now();
                        for _ in 0..n {
                            tracing::info!("cache miss");
                        }
                        total += t0.elapsed();
                        left -= n;
                    }
                    total
                })
            });
    });
    let stats = guard.stats();
    drop(guard);
    eprintln!("causeway pipeline: {stats:?}");

    let (d, provider) = otel(opentelemetry_sdk::trace::Sampler::AlwaysOn);
    span_case(c, "otel_sampled_span", &d, false);
    span_case(c, "otel_sampled_root_span", &d, true);
    let _ = provider.shutdown();
    // ParentBased(AlwaysOff): the children of an unsampled root are unsampled too.
    let (d, provider) = otel(opentelemetry_sdk::trace::Sampler::ParentBased(Box::new(
        opentelemetry_sdk::trace::Sampler::AlwaysOff,
    )));
    span_case(c, "otel_unsampled_span", &d, false);
    let _ = provider.shutdown();
}

/// The cargo target directory, from the bench executable's path (target/release/deps/..).
fn target_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(d);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    exe.ancestors()
        .nth(3)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"))
}

fn write_medians() {
    let target = target_dir();
    let mut medians = BTreeMap::new();
    for case in CASES {
        let path = target
            .join("criterion/overhead")
            .join(case)
            .join("new/estimates.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        if let Some(m) = v["median"]["point_estimate"].as_f64() {
            medians.insert(case, (m * 100.0).round() / 100.0);
        }
    }
    let out = target.join("causeway-bench");
    let _ = std::fs::create_dir_all(&out);
    let json = serde_json::to_string_pretty(&medians).unwrap_or_default();
    match std::fs::write(out.join("overhead.json"), &json) {
        Ok(()) => eprintln!(
            "medians (ns/op) written to {}:\n{json}",
            out.join("overhead.json").display()
        ),
        Err(e) => eprintln!("cannot write {}: {e}", out.display()),
    }
}

fn main() {
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .configure_from_args();
    benches(&mut c);
    c.final_summary();
    write_medians();
}
