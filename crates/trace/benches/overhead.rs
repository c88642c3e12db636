//! Span overhead on the application's thread, one process per configuration, each with
//! its subscriber installed as the global dispatcher (as applications run it): `tracing`
//! with no subscriber, a subscriber that does nothing (the price of the `tracing` macros),
//! the Registry with a layer that does nothing, Causeway's exclusive subscriber
//! (`causeway_*`) and its Layer on the Registry (`causeway_layer_*`), fastrace (its own
//! span API, `enable` feature on) and `tracing-opentelemetry` over `opentelemetry_sdk`
//! (batch processor, no-op exporter).
//!
//! The `*disabled_event` cases time a `debug!` callsite nothing needs: with no subscriber,
//! under a fmt layer filtered at `info`, and under Causeway with a Pivot Tracing query
//! installed elsewhere (which lifts the level `tracing` checks first, so the callsite's
//! own interest has to say `never`), alone, with the fmt layer as its inner subscriber,
//! and as the Layer on the Registry filtered by the same targets. `causeway_pivot_enabled_event` is the same callsite once a query reads
//! it (OBSERVE+EMIT), to show what the interest saves.
//!
//! `cargo bench --bench overhead [FILTER]` runs every case whose name contains FILTER, in
//! `OVERHEAD_ROUNDS` rounds (default 3) that alternate the cases, and writes the median
//! of the rounds' medians (ns per operation) to `target/causeway-bench/overhead.json`,
//! and each round's figure plus, per library, allocations per span on the application
//! thread, background CPU per span (process CPU minus the application thread's, writer
//! or collector included, flush included) and spans per second from two application
//! threads to `target/causeway-bench/overhead-details.json`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use causeway::model::Span;
use causeway::{Config, Mode, Sampler, SpanSink};
use criterion::Criterion;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{BatchSpanProcessor, SdkTracerProvider, SpanData, SpanExporter};
use tracing::Dispatch;
use tracing_subscriber::layer::SubscriberExt;

/// Counts allocations made on the current thread.
struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counter is a
// const-initialised thread-local `Cell` with no destructor, so touching it never
// allocates or re-enters the allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|a| a.set(a.get() + 1));
        // SAFETY: the caller's contract is passed on as is.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|a| a.set(a.get() + 1));
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

/// The cases, in the order each round runs them.
const CASES: [&str; 26] = [
    "bare_disabled_event",
    "fmt_disabled_event",
    "causeway_pivot_disabled_event",
    "causeway_pivot_fmt_disabled_event",
    "causeway_layer_pivot_disabled_event",
    "causeway_pivot_enabled_event",
    "bare_tracing_span",
    "dispatch_floor_span",
    "registry_noop_layer_span",
    "causeway_sampled_span",
    "causeway_unsampled_span",
    "causeway_unsampled_span_depth_1",
    "causeway_unsampled_span_depth_4",
    "causeway_unsampled_span_depth_16",
    "causeway_sampled_root_span",
    "causeway_unsampled_root_span",
    "causeway_sampled_event",
    "causeway_layer_sampled_span",
    "causeway_layer_unsampled_span",
    "fastrace_span",
    "fastrace_local_span",
    "fastrace_root_span",
    "otel_sampled_span",
    "otel_unsampled_span",
    "otel_sampled_root_span",
    "otel_sampled_event",
];

/// Cases whose allocations, background CPU and two-thread throughput are reported.
fn has_details(case: &str) -> bool {
    matches!(
        case,
        "causeway_sampled_span"
            | "causeway_unsampled_span"
            | "causeway_pivot_enabled_event"
            | "causeway_layer_sampled_span"
            | "fastrace_span"
            | "fastrace_local_span"
            | "otel_sampled_span"
            | "otel_unsampled_span"
    )
}

/// A sink that drops spans: the cost measured ends at the hand-off to the sinks.
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

struct NoopReporter;
impl fastrace::collector::Reporter for NoopReporter {
    fn report(&mut self, spans: Vec<fastrace::collector::SpanRecord>) {
        std::hint::black_box(spans.len());
    }
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

/// Spans (or events) at most per parent: fastrace stops recording past 10 240 spans under
/// one root, so every case re-creates its parent this often (its cost amortised in).
const CHUNK: u64 = 1000;

/// Runs `n <= CHUNK` operations under a fresh parent; the time the operations took.
type Run = fn(u64) -> Duration;

/// One configuration: how to run operations and how to wait for its background work.
struct Bench {
    run: Run,
    flush: Flush,
}

/// Waits for the background work; Causeway's cases also say how many spans were
/// recorded and dropped so far.
type Flush = Box<dyn Fn() -> Option<(u64, u64)>>;

fn timed(n: u64, op: impl Fn()) -> Duration {
    let t0 = Instant::now();
    for _ in 0..n {
        op();
    }
    t0.elapsed()
}

fn tracing_op() {
    let span = tracing::info_span!("request", id = 7);
    let _entered = span.enter();
}

/// `n` spans inside `depth` nested entered parents (0: each span is a root).
fn tracing_spans(n: u64, depth: usize) -> Duration {
    let mut entered: Vec<tracing::span::EnteredSpan> = Vec::with_capacity(depth);
    for _ in 0..depth {
        entered.push(tracing::info_span!("parent").entered());
    }
    let took = timed(n, tracing_op);
    while let Some(innermost) = entered.pop() {
        drop(innermost);
    }
    took
}

fn tracing_events(n: u64) -> Duration {
    // A fresh span every 100 events keeps them under the annotation cap, so every event
    // is really recorded; only the events are timed.
    let mut total = Duration::ZERO;
    let mut left = n;
    while left > 0 {
        let k = left.min(100);
        let span = tracing::info_span!("request");
        let _e = span.enter();
        total += timed(k, || tracing::info!("cache miss"));
        left -= k;
    }
    total
}

/// The tracepoint: a library's `debug!` event with an integer field.
fn tracepoint_events(n: u64) -> Duration {
    timed(
        n,
        || tracing::debug!(target: "storage::disk", delta = std::hint::black_box(8192u64), "read"),
    )
}

fn fastrace_spans(n: u64) -> Duration {
    use fastrace::prelude::*;
    let t0 = Instant::now();
    {
        let root = Span::root("parent", SpanContext::random());
        for _ in 0..n {
            let _s = Span::enter_with_parent("request", &root).with_property(|| ("id", "7"));
        }
    }
    t0.elapsed()
}

fn fastrace_local_spans(n: u64) -> Duration {
    use fastrace::prelude::*;
    let t0 = Instant::now();
    {
        let root = Span::root("parent", SpanContext::random());
        let _g = root.set_local_parent();
        for _ in 0..n {
            let _s = LocalSpan::enter_with_local_parent("request").with_property(|| ("id", "7"));
        }
    }
    t0.elapsed()
}

fn fastrace_roots(n: u64) -> Duration {
    use fastrace::prelude::*;
    timed(n, || {
        let _s = Span::root("request", SpanContext::random()).with_property(|| ("id", "7"));
    })
}

fn install(dispatch: Dispatch) {
    if tracing::dispatcher::set_global_default(dispatch).is_err() {
        eprintln!("a global dispatcher was already set");
        std::process::exit(2);
    }
}

fn causeway(mode: Mode, sampler: Sampler) -> Flush {
    let config = Config::new("bench")
        .with_mode(mode)
        .with_sampler(sampler)
        .with_queue_spans(1 << 20);
    let (dispatch, guard) = match causeway::dispatch(config.with_sink(Discard)) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("cannot start causeway: {e}");
            std::process::exit(2);
        }
    };
    install(dispatch);
    let guard = Arc::new(guard);
    Box::new(move || {
        guard.flush();
        let stats = guard.stats();
        Some((stats.recorded, stats.dropped))
    })
}

/// A Pivot Tracing query on the bench's `debug!` callsite, or on another (an `info!`
/// event of `app::other` nothing runs).
fn pivot_query(on_the_callsite: bool) -> String {
    let (target, level) = if on_the_callsite {
        ("storage::disk", "debug")
    } else {
        ("app::other", "info")
    };
    let text = format!(
        "Tracepoint Read = event(target = \"{target}\", level = \"{level}\", field = \"delta\") \
         Export delta\n\
         From r In Read GroupBy r.host Select r.host, SUM(r.delta)"
    );
    match causeway_pivot::install::prepare(&text, &Default::default()) {
        Ok(p) => p.script,
        Err(e) => {
            eprintln!("{}", e.render("query", &text));
            std::process::exit(2);
        }
    }
}

/// How the Pivot Tracing cases stack Causeway.
#[derive(Clone, Copy, PartialEq)]
enum PivotStack {
    /// The exclusive subscriber alone.
    Alone,
    /// The exclusive subscriber with a fmt layer filtered at `info` as its inner subscriber.
    WithFmt,
    /// The Layer on the Registry, filtered by the same targets.
    Layer,
}

/// Causeway recording `app` at `info`, stacked as `stack`, and a Pivot Tracing query
/// installed.
fn causeway_pivot(stack: PivotStack, on_the_callsite: bool) -> Flush {
    let mode = if stack == PivotStack::Layer {
        Mode::Layer
    } else {
        Mode::Exclusive
    };
    let config = Config::new("bench")
        .with_mode(mode)
        .with_targets("app=info".parse().unwrap_or_default())
        .with_queue_spans(1 << 20);
    let config = config.with_sink(Discard);
    let started = match stack {
        PivotStack::Layer => causeway::dispatch(config),
        _ => causeway::subscriber(config).map(|(subscriber, guard)| {
            let dispatch = if stack == PivotStack::WithFmt {
                Dispatch::new(subscriber.with_inner(fmt_at_info()))
            } else {
                Dispatch::new(subscriber)
            };
            (dispatch, guard)
        }),
    };
    let (dispatch, guard) = match started {
        Ok(s) => s,
        Err(e) => {
            eprintln!("cannot start causeway: {e}");
            std::process::exit(2);
        }
    };
    install(dispatch);
    let pivot = guard.pivot();
    if let Err(e) = pivot.install(1, &pivot_query(on_the_callsite)) {
        eprintln!("cannot install the query: {e}");
        std::process::exit(2);
    }
    let guard = Arc::new(guard);
    Box::new(move || {
        // The query's groups, to show whether its advice ran.
        let groups: usize = pivot
            .take_results()
            .iter()
            .map(|(_, a)| a.rows().len())
            .sum();
        eprintln!("pivot groups since the last flush: {groups}");
        guard.flush();
        let stats = guard.stats();
        Some((stats.recorded, stats.dropped))
    })
}

/// A Registry with a fmt layer (writing nowhere) filtered at `info`.
fn fmt_at_info() -> impl tracing::Subscriber + Send + Sync {
    use tracing_subscriber::Layer as _;
    let fmt = tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_filter(tracing_subscriber::filter::LevelFilter::INFO);
    tracing_subscriber::registry().with(fmt)
}

fn fmt_info() -> Flush {
    install(Dispatch::new(fmt_at_info()));
    nothing()
}

fn otel(sampler: opentelemetry_sdk::trace::Sampler) -> Flush {
    let provider = SdkTracerProvider::builder()
        .with_span_processor(BatchSpanProcessor::builder(NoopExporter).build())
        .with_sampler(sampler)
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("bench"));
    install(Dispatch::new(tracing_subscriber::registry().with(layer)));
    Box::new(move || {
        let _ = provider.force_flush();
        None
    })
}

fn fastrace() -> Flush {
    fastrace::set_reporter(
        NoopReporter,
        fastrace::collector::Config::default().report_interval(Duration::from_millis(100)),
    );
    Box::new(|| {
        fastrace::flush();
        None
    })
}

fn nothing() -> Flush {
    Box::new(|| None)
}

fn bench_for(case: &str) -> Option<Bench> {
    let always = || Sampler::Always;
    let never = || Sampler::Never;
    let (run, flush): (Run, Flush) = match case {
        "bare_disabled_event" => (tracepoint_events, nothing()),
        "fmt_disabled_event" => (tracepoint_events, fmt_info()),
        "causeway_pivot_disabled_event" => {
            (tracepoint_events, causeway_pivot(PivotStack::Alone, false))
        }
        "causeway_pivot_fmt_disabled_event" => (
            tracepoint_events,
            causeway_pivot(PivotStack::WithFmt, false),
        ),
        "causeway_layer_pivot_disabled_event" => {
            (tracepoint_events, causeway_pivot(PivotStack::Layer, false))
        }
        "causeway_pivot_enabled_event" => {
            (tracepoint_events, causeway_pivot(PivotStack::Alone, true))
        }
        "bare_tracing_span" => (|n| tracing_spans(n, 1), nothing()),
        "dispatch_floor_span" => {
            install(Dispatch::new(Floor));
            (|n| tracing_spans(n, 1), nothing())
        }
        "registry_noop_layer_span" => {
            install(Dispatch::new(
                tracing_subscriber::registry().with(tracing_subscriber::layer::Identity::new()),
            ));
            (|n| tracing_spans(n, 1), nothing())
        }
        "causeway_sampled_span" => (|n| tracing_spans(n, 1), causeway(Mode::Exclusive, always())),
        "causeway_unsampled_span" | "causeway_unsampled_span_depth_1" => {
            (|n| tracing_spans(n, 1), causeway(Mode::Exclusive, never()))
        }
        "causeway_unsampled_span_depth_4" => {
            (|n| tracing_spans(n, 4), causeway(Mode::Exclusive, never()))
        }
        "causeway_unsampled_span_depth_16" => {
            (|n| tracing_spans(n, 16), causeway(Mode::Exclusive, never()))
        }
        "causeway_sampled_root_span" => {
            (|n| tracing_spans(n, 0), causeway(Mode::Exclusive, always()))
        }
        "causeway_unsampled_root_span" => {
            (|n| tracing_spans(n, 0), causeway(Mode::Exclusive, never()))
        }
        "causeway_sampled_event" => (tracing_events, causeway(Mode::Exclusive, always())),
        "causeway_layer_sampled_span" => (|n| tracing_spans(n, 1), causeway(Mode::Layer, always())),
        "causeway_layer_unsampled_span" => {
            (|n| tracing_spans(n, 1), causeway(Mode::Layer, never()))
        }
        "fastrace_span" => (fastrace_spans, fastrace()),
        "fastrace_local_span" => (fastrace_local_spans, fastrace()),
        "fastrace_root_span" => (fastrace_roots, fastrace()),
        "otel_sampled_span" => (
            |n| tracing_spans(n, 1),
            otel(opentelemetry_sdk::trace::Sampler::AlwaysOn),
        ),
        "otel_sampled_root_span" => (
            |n| tracing_spans(n, 0),
            otel(opentelemetry_sdk::trace::Sampler::AlwaysOn),
        ),
        "otel_sampled_event" => (
            tracing_events,
            otel(opentelemetry_sdk::trace::Sampler::AlwaysOn),
        ),
        // ParentBased(AlwaysOff): the children of an unsampled root are unsampled too.
        "otel_unsampled_span" => (
            |n| tracing_spans(n, 1),
            otel(opentelemetry_sdk::trace::Sampler::ParentBased(Box::new(
                opentelemetry_sdk::trace::Sampler::AlwaysOff,
            ))),
        ),
        _ => return None,
    };
    Some(Bench { run, flush })
}

/// `n` operations in chunks of at most [`CHUNK`]: the time they took.
fn chunked(run: Run, n: u64) -> Duration {
    let mut total = Duration::ZERO;
    let mut left = n;
    while left > 0 {
        let k = left.min(CHUNK);
        total += run(k);
        left -= k;
    }
    total
}

fn process_cpu_ns() -> u64 {
    // SAFETY: `usage` is a valid, writable rusage that outlives the call.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(usage.ru_utime) + ns(usage.ru_stime)
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec that outlives the call.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Allocations per operation, background CPU per operation and two-thread throughput.
fn details(bench: &Bench) -> serde_json::Value {
    const N: u64 = 200_000;
    chunked(bench.run, 20_000);
    (bench.flush)();
    let before = ALLOCATIONS.with(|a| a.get());
    chunked(bench.run, N);
    let allocations = (ALLOCATIONS.with(|a| a.get()) - before) as f64 / N as f64;

    const CPU_N: u64 = 2_000_000;
    (bench.flush)();
    let (process0, thread0) = (process_cpu_ns(), thread_cpu_ns());
    chunked(bench.run, CPU_N);
    let thread1 = thread_cpu_ns();
    (bench.flush)();
    let process1 = process_cpu_ns();
    let background = (process1 - process0).saturating_sub(thread1 - thread0) as f64 / CPU_N as f64;

    const THREAD_N: u64 = 1_000_000;
    let run = bench.run;
    let before = (bench.flush)();
    let t0 = Instant::now();
    let threads: Vec<_> = (0..2)
        .map(|_| std::thread::spawn(move || chunked(run, THREAD_N)))
        .collect();
    for t in threads {
        let _ = t.join();
    }
    let per_second = 2.0 * THREAD_N as f64 / t0.elapsed().as_secs_f64();
    let after = (bench.flush)();
    let mut out = serde_json::json!({
        "allocations_per_span": (allocations * 1000.0).round() / 1000.0,
        "background_cpu_ns_per_span": (background * 100.0).round() / 100.0,
        "two_thread_spans_per_second": per_second.round(),
    });
    // Two application threads on two cores leave the writer none: what it dropped.
    if let (Some((r0, d0)), Some((r1, d1))) = (before, after) {
        let share = (d1 - d0) as f64 / (r1 - r0).max(1) as f64;
        out["two_thread_dropped_share"] = ((share * 1000.0).round() / 1000.0).into();
    }
    out
}

/// The child process: measures one case and prints its figures as one JSON line.
fn run_case(case: &str) {
    let Some(bench) = bench_for(case) else {
        eprintln!("unknown case {case}");
        std::process::exit(2);
    };
    let mut c = Criterion::default()
        .measurement_time(Duration::from_secs(2))
        .warm_up_time(Duration::from_secs(1))
        .without_plots();
    c.benchmark_group("overhead").bench_function(case, |b| {
        b.iter_custom(|iters| chunked(bench.run, iters));
    });
    let mut out = serde_json::json!({ "case": case, "median_ns": median_of(case) });
    // A dropped span costs less than a recorded one: the timed figure holds for the
    // spans recorded while it was measured, and the drops say how many were not.
    if let Some((recorded, dropped)) = (bench.flush)() {
        out["recorded"] = recorded.into();
        out["dropped"] = dropped.into();
    }
    if has_details(case) {
        out["details"] = details(&bench);
    }
    println!("OVERHEAD {out}");
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

fn median_of(case: &str) -> Option<f64> {
    let home = std::env::var_os("CRITERION_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("criterion"));
    let path = home.join("overhead").join(case).join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"]
        .as_f64()
        .map(|m| (m * 100.0).round() / 100.0)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

fn main() {
    if let Ok(case) = std::env::var("OVERHEAD_CASE") {
        run_case(&case);
        return;
    }
    // `cargo bench` passes `--bench`; the first other argument filters the cases.
    let filter = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .unwrap_or_default();
    let rounds: usize = std::env::var("OVERHEAD_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(3);
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("cannot find the bench executable: {e}");
            std::process::exit(2);
        }
    };
    let cases: Vec<&str> = CASES
        .iter()
        .copied()
        .filter(|c| c.contains(&filter))
        .collect();
    let mut runs: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    let mut details: BTreeMap<&str, Vec<serde_json::Value>> = BTreeMap::new();
    let mut drops: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for round in 1..=rounds {
        for &case in &cases {
            eprintln!("round {round}/{rounds}: {case}");
            let output = Command::new(&exe)
                .env("OVERHEAD_CASE", case)
                .env("CRITERION_HOME", target_dir().join("criterion"))
                .stderr(std::process::Stdio::inherit())
                .output();
            let line = output.as_ref().ok().and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .find_map(|l| l.strip_prefix("OVERHEAD ").map(str::to_owned))
            });
            let Some(v) = line.and_then(|l| serde_json::from_str::<serde_json::Value>(&l).ok())
            else {
                eprintln!("case {case} failed: {output:?}");
                std::process::exit(1);
            };
            if let Some(m) = v["median_ns"].as_f64() {
                runs.entry(case).or_default().push(m);
            }
            if !v["details"].is_null() {
                details.entry(case).or_default().push(v["details"].clone());
            }
            if let (Some(recorded), Some(dropped)) = (v["recorded"].as_u64(), v["dropped"].as_u64())
            {
                drops.entry(case).or_default().push((recorded, dropped));
            }
        }
    }
    let medians: BTreeMap<&str, f64> = runs
        .iter()
        .filter_map(|(c, v)| Some((*c, median(v.clone())?)))
        .collect();
    let out = target_dir().join("causeway-bench");
    let _ = std::fs::create_dir_all(&out);
    let json = serde_json::to_string_pretty(&medians).unwrap_or_default();
    let detail_json = serde_json::to_string_pretty(&serde_json::json!({
        "rounds_ns": runs,
        "details": details,
        "recorded_and_dropped": drops,
    }))
    .unwrap_or_default();
    for (file, text) in [
        ("overhead.json", &json),
        ("overhead-details.json", &detail_json),
    ] {
        if let Err(e) = std::fs::write(out.join(file), text) {
            eprintln!("cannot write {}: {e}", out.join(file).display());
            std::process::exit(1);
        }
    }
    println!("{:<36} ns/op by round", "case");
    for (case, v) in &runs {
        let figures: Vec<String> = v.iter().map(|m| format!("{m:>9.2}")).collect();
        println!("{case:<36} {}", figures.join(" "));
    }
    for (case, d) in &details {
        for (round, d) in d.iter().enumerate() {
            println!("{case:<36} round {} {d}", round + 1);
        }
    }
    for (case, d) in &drops {
        let figures: Vec<String> = d.iter().map(|(r, x)| format!("{x} of {r}")).collect();
        println!("{case:<36} dropped by round: {}", figures.join(", "));
    }
    eprintln!(
        "medians (ns/op) written to {}",
        out.join("overhead.json").display()
    );
}
