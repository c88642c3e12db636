//! Pivot Tracing's costs away from the span hot path: advice per hit (OBSERVE+EMIT,
//! OBSERVE+PACK FIRST, UNPACK of 60 tuples + EMIT), the bag's binary and header
//! encodings for 1 and 60 tuples, and the hub's merge of partial results (groups per
//! second, merged alone and decoded from a report's JSON). Before criterion runs, each
//! case's heap allocations per operation are counted and printed.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use causeway_pivot::aggregate::Aggregator;
use causeway_pivot::bag::{Bags, Hlc};
use causeway_pivot::install::{load, prepare};
use causeway_pivot::program::{Context, Lowered, Observed, Program};
use causeway_pivot::protocol::{Group, Report};
use causeway_pivot::value::Value;
use causeway_pivot::wire::{decode, decode_text, encode, encode_text};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's layout goes to the system allocator as given.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System.alloc` with this layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const TRACEPOINTS: &str =
    "Tracepoint Read = event(target = \"app\", field = \"delta\") Export delta\n\
     Tracepoint Op = span(target = \"app\", name = \"op\") Export user";

fn query(text: &str) -> Lowered {
    let full = format!("{TRACEPOINTS}\n{text}");
    let p = prepare(&full, &Default::default()).expect("the bench's query compiles");
    load(&p.script, 1, &[]).expect("loads").lowered
}

fn program<'a>(q: &'a Lowered, tracepoint: &str) -> &'a Program {
    q.programs
        .iter()
        .find(|p| p.tracepoint == tracepoint)
        .expect("a program at the tracepoint")
}

/// Values in the order `p` observes them: integers and strings, as the issue asks.
fn observed(p: &Program) -> Vec<Observed> {
    p.observe
        .iter()
        .map(|name| {
            Observed::One(if name.ends_with(".delta") {
                Value::from(8192i64)
            } else {
                Value::from("client-host-A")
            })
        })
        .collect()
}

struct Hit {
    clock: Hlc,
    next: u64,
    dropped: u64,
}

impl Hit {
    fn run(
        &mut self,
        p: &Program,
        observed: &[Observed],
        bag: &mut Option<Arc<Bags>>,
        agg: &mut Aggregator,
    ) {
        let mut next = self.next;
        let mut ids = || {
            next += 1;
            next
        };
        let mut cx = Context {
            clock: &mut self.clock,
            now: 1_000,
            ids: &mut ids,
            dropped: &mut self.dropped,
            example: None,
        };
        p.run(observed, bag, agg, &mut cx);
        self.next = next;
    }
}

fn hit() -> Hit {
    Hit {
        clock: Hlc::default(),
        next: 0,
        dropped: 0,
    }
}

/// A bag holding `n` distinct `c.user` tuples, as `Op` packs them.
fn bag_of(n: usize) -> Bags {
    let q = query("From r In Read Join c In Op On c -> r GroupBy c.user Select c.user, COUNT");
    let op = program(&q, "Op");
    let mut bag = None;
    let mut agg = Aggregator::new(&q.funcs);
    let mut h = hit();
    for i in 0..n {
        h.run(
            op,
            &[Observed::One(Value::from(format!("user-{i:03}").as_str()))],
            &mut bag,
            &mut agg,
        );
    }
    bag.map(Arc::unwrap_or_clone).unwrap_or_default()
}

/// Allocations per call of `op`, over `n` calls after one to warm up.
fn allocations(n: u64, mut op: impl FnMut()) -> f64 {
    op();
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..n {
        op();
    }
    (ALLOCATIONS.load(Ordering::Relaxed) - before) as f64 / n as f64
}

fn advice(c: &mut Criterion) {
    let emit_q = query("From r In Read GroupBy r.host Select r.host, SUM(r.delta)");
    let emit = program(&emit_q, "Read");
    let emit_obs = observed(emit);
    let first_q = query(
        "From r In Read Join c In First(Op) On c -> r GroupBy c.user Select c.user, SUM(r.delta)",
    );
    let first = program(&first_q, "Op");
    let first_obs = observed(first);
    let unpack_q =
        query("From r In Read Join c In Op On c -> r GroupBy c.user Select c.user, COUNT");
    let unpack = program(&unpack_q, "Read");
    let unpack_obs = observed(unpack);
    let bag60 = Some(Arc::new(bag_of(60)));
    // A field exploded into 60 values, packed at once (the 60-tuple bag of `bench pivot`).
    let pack_many = program(&unpack_q, "Op");
    let many = [Observed::Many(
        (0..60)
            .map(|i| Value::from(format!("pad-tuple-{i:04}").as_str()))
            .collect(),
    )];

    let mut agg = Aggregator::new(&emit_q.funcs);
    let mut h = hit();
    let mut none = None;
    let a_emit = allocations(10_000, || h.run(emit, &emit_obs, &mut none, &mut agg));
    // PACK FIRST into a request's fresh bag (each request starts without one).
    let mut agg_first = Aggregator::new(&first_q.funcs);
    let a_first = allocations(10_000, || {
        let mut bag = None;
        h.run(first, &first_obs, &mut bag, &mut agg_first);
        black_box(bag);
    });
    let mut agg_unpack = Aggregator::new(&unpack_q.funcs);
    let a_unpack = allocations(1_000, || {
        let mut bag = bag60.clone();
        h.run(unpack, &unpack_obs, &mut bag, &mut agg_unpack);
    });
    let mut agg_many = Aggregator::new(&unpack_q.funcs);
    let a_many = allocations(1_000, || {
        let mut bag = None;
        h.run(pack_many, &many, &mut bag, &mut agg_many);
        black_box(bag);
    });
    eprintln!(
        "allocations per hit: observe+emit {a_emit:.1}, observe+pack first {a_first:.1}, \
         unpack 60 + emit {a_unpack:.1}, pack 60 exploded {a_many:.1}"
    );

    let mut g = c.benchmark_group("advice");
    g.bench_function("observe_emit", |b| {
        b.iter(|| h.run(emit, black_box(&emit_obs), &mut none, &mut agg))
    });
    g.bench_function("observe_pack_first", |b| {
        b.iter(|| {
            let mut bag = None;
            h.run(first, black_box(&first_obs), &mut bag, &mut agg_first);
            bag
        })
    });
    g.bench_function("pack_60_exploded", |b| {
        b.iter(|| {
            let mut bag = None;
            h.run(pack_many, black_box(&many), &mut bag, &mut agg_many);
            bag
        })
    });
    g.bench_function("unpack_60_emit", |b| {
        b.iter(|| {
            let mut bag = bag60.clone();
            h.run(unpack, black_box(&unpack_obs), &mut bag, &mut agg_unpack);
        })
    });
    g.finish();
}

fn bag_codec(c: &mut Criterion) {
    let mut g = c.benchmark_group("bag");
    for n in [1usize, 60] {
        let bag = bag_of(n);
        let bytes = encode(&bag, usize::MAX);
        let text = encode_text(&bag, usize::MAX).expect("fits");
        eprintln!(
            "bag of {n} tuples: {} bytes, {} header characters",
            bytes.len(),
            text.len()
        );
        g.bench_function(format!("encode_{n}"), |b| {
            b.iter(|| encode(black_box(&bag), usize::MAX))
        });
        g.bench_function(format!("decode_{n}"), |b| {
            b.iter(|| decode(black_box(&bytes)))
        });
        g.bench_function(format!("encode_text_{n}"), |b| {
            b.iter(|| encode_text(black_box(&bag), usize::MAX))
        });
        g.bench_function(format!("decode_text_{n}"), |b| {
            b.iter(|| decode_text(black_box(&text)))
        });
    }
    g.finish();
}

/// A process's partial result for Q6's shape: (client host, DataNode host) -> COUNT.
fn partial_groups(n: usize) -> Vec<Group> {
    let mut agg = Aggregator::new(&[causeway_pivot::lang::ast::AggFn::Count]);
    for i in 0..n {
        agg.add(
            &[
                Value::from(format!("client-{}", i / 100).as_str()),
                Value::from(format!("dn-{}", i % 100).as_str()),
            ],
            &[Value::Null],
            1,
        );
    }
    Group::all_of(&agg)
}

fn hub_merge(c: &mut Criterion) {
    const GROUPS: usize = 1_000;
    let groups = partial_groups(GROUPS);
    let report = serde_json::json!({
        "process": {"instance": 1, "service": "dn", "host": "A", "proc_name": "DataNode-A", "pid": 1},
        "installed": [1],
        "batches": [{"seq": 1, "at_ms": 1000, "partials": [{"query": 1, "overflow": 0, "groups": groups}]}],
    })
    .to_string();
    eprintln!(
        "a report of {GROUPS} groups: {} bytes of JSON",
        report.len()
    );
    let funcs = [causeway_pivot::lang::ast::AggFn::Count];
    let mut g = c.benchmark_group("hub");
    g.throughput(Throughput::Elements(GROUPS as u64));
    // Into totals that already hold every group, as after the first interval.
    let mut totals = Aggregator::new(&funcs);
    for gr in &groups {
        gr.merge_into(&mut totals);
    }
    g.bench_function("merge_1000_groups", |b| {
        b.iter(|| {
            for gr in &groups {
                gr.merge_into(&mut totals);
            }
        })
    });
    g.bench_function("decode_and_merge_1000_groups", |b| {
        b.iter(|| {
            let r: Report = serde_json::from_str(black_box(&report)).expect("parses");
            for batch in &r.batches {
                for p in &batch.partials {
                    for gr in &p.groups {
                        gr.merge_into(&mut totals);
                    }
                }
            }
        })
    });
    g.finish();
}

criterion_group!(benches, advice, bag_codec, hub_merge);
criterion_main!(benches);
