//! What a `tracing` program records through the Causeway layer.

use causeway::model::{SpanKind, Status, Value};
use causeway::testing::Recorder;
use causeway::{Sampler, SpanExt};

#[test]
fn fields_become_attributes_and_events_become_span_events() {
    let rec = Recorder::new();
    rec.in_scope(|| {
        let root = tracing::info_span!(
            "checkout",
            user = "alice",
            items = 3u64,
            vip = true,
            total = 9.5,
            late = tracing::field::Empty
        );
        let _g = root.enter();
        root.record("late", "yes");
        tracing::info!(sku = "A-1", qty = 2, "added to basket");
        let child = tracing::info_span!("price", otel.name = "price basket", otel.kind = "client");
        let _c = child.enter();
        tracing::warn!("no discount");
    });
    let traces = rec.traces();
    assert_eq!(traces.len(), 1);
    let t = &traces[0];
    assert_eq!(t.spans.len(), 2);
    let root = &t.spans[t.roots[0]];
    assert_eq!(root.name, "checkout");
    assert_eq!(&*root.service, "test");
    assert_eq!(root.pid, std::process::id());
    assert!(root.execution_unit != 0);
    assert_eq!(root.attribute("user"), Some(&Value::from("alice")));
    assert_eq!(root.attribute("items"), Some(&Value::I64(3)));
    assert_eq!(root.attribute("vip"), Some(&Value::Bool(true)));
    assert_eq!(root.attribute("total"), Some(&Value::F64(9.5)));
    assert_eq!(root.attribute("late"), Some(&Value::from("yes")));
    assert_eq!(root.events.len(), 1);
    assert_eq!(root.events[0].name, "added to basket");
    assert_eq!(root.events[0].attributes[0].key, "sku");
    assert!(root.events[0].time >= root.start && root.events[0].time <= root.end);
    let child = &t.spans[t.children[t.roots[0]][0]];
    assert_eq!(child.name, "price basket");
    assert_eq!(child.kind, SpanKind::Client);
    assert_eq!(child.parent_id, Some(root.span_id));
    assert_eq!(child.trace_id, root.trace_id);
    assert_eq!(child.events[0].name, "no discount");
    assert!(child.start >= root.start && child.end <= root.end);
    assert_eq!(root.sampling_probability, 1.0);
    assert_eq!(root.cpu_time, None, "CPU time is off by default");
}

#[test]
fn error_fields_and_the_span_extension_set_the_status() {
    let rec = Recorder::new();
    rec.in_scope(|| {
        let _a = tracing::info_span!("a", error = true).entered();
        let b = tracing::info_span!(
            "b",
            otel.status_code = "ERROR",
            otel.status_message = "disk full"
        );
        b.in_scope(|| {});
        let c = tracing::info_span!("c");
        c.set_error("timeout");
        drop(c);
        let d = tracing::info_span!("d");
        d.set_ok();
        drop(b);
        drop(d);
    });
    let spans = rec.spans();
    let by = |n: &str| spans.iter().find(|s| s.name == n).unwrap().status.clone();
    assert_eq!(by("a"), Status::Error(String::new()));
    assert_eq!(by("b"), Status::Error("disk full".into()));
    assert_eq!(by("c"), Status::Error("timeout".into()));
    assert_eq!(by("d"), Status::Ok);
}

#[test]
fn the_annotation_cap_counts_what_it_drops_and_never_displaces_structure() {
    let rec =
        Recorder::with_config(causeway::testing::config("capped").with_max_annotations(4)).unwrap();
    rec.in_scope(|| {
        let root = tracing::info_span!("root", a = 1, b = 2, c = 3, otel.kind = "server");
        let _g = root.enter();
        for i in 0..10 {
            tracing::info!(i, "event");
        }
        root.set_error("failed after the cap");
        let _child = tracing::info_span!("child").entered();
    });
    let t = &rec.traces()[0];
    let root = &t.spans[t.roots[0]];
    assert_eq!(root.attributes.len() + root.events.len(), 4);
    assert_eq!(root.attributes.len(), 3);
    assert_eq!(root.dropped_events, 9);
    assert_eq!(root.kind, SpanKind::Server, "structure survives the cap");
    assert_eq!(root.status, Status::Error("failed after the cap".into()));
    assert_eq!(t.spans.len(), 2, "children are structure too");
}

#[test]
fn follows_from_becomes_a_link() {
    let rec = Recorder::new();
    rec.in_scope(|| {
        let a = tracing::info_span!("request a");
        let batch = tracing::info_span!("batch write");
        batch.follows_from(&a);
        drop(batch);
        drop(a);
    });
    let spans = rec.spans();
    let a = spans.iter().find(|s| s.name == "request a").unwrap();
    let batch = spans.iter().find(|s| s.name == "batch write").unwrap();
    assert_eq!(batch.links.len(), 1);
    assert_eq!(batch.links[0].span_id, a.span_id);
    assert_eq!(batch.links[0].trace_id, a.trace_id);
}

#[test]
fn cpu_time_is_recorded_when_asked() {
    let rec = Recorder::with_config(causeway::testing::config("cpu").with_cpu_time(true)).unwrap();
    rec.in_scope(|| {
        let _s = tracing::info_span!("busy").entered();
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
        }
        std::hint::black_box(x);
    });
    let spans = rec.spans();
    let cpu = spans[0].cpu_time.expect("cpu time recorded");
    assert!(cpu > 0);
    assert!(
        cpu <= spans[0].duration() + 1_000_000,
        "cpu {cpu} > wall {}",
        spans[0].duration()
    );
}

#[test]
fn never_sampling_records_nothing_but_still_propagates_context() {
    let rec =
        Recorder::with_config(causeway::testing::config("quiet").with_sampler(Sampler::Never))
            .unwrap();
    let mut headers = http::HeaderMap::new();
    rec.in_scope(|| {
        let _s = tracing::info_span!("request").entered();
        let _c = tracing::info_span!("child").entered();
        assert!(causeway::inject(&mut headers));
    });
    assert!(rec.spans().is_empty());
    let tp = headers["traceparent"].to_str().unwrap();
    assert!(tp.starts_with("00-") && tp.ends_with("-00"), "{tp}");
    assert_eq!(rec.stats().recorded, 0);
}

fn traceparent(value: &str) -> http::HeaderMap {
    let mut h = http::HeaderMap::new();
    h.insert("traceparent", value.parse().unwrap());
    h
}

#[test]
fn children_follow_the_remote_sampling_decision() {
    let rec =
        Recorder::with_config(causeway::testing::config("follower").with_sampler(Sampler::Never))
            .unwrap();
    let sampled = traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    rec.in_scope(|| {
        let extracted = causeway::extract(&sampled);
        let s = causeway::with_remote_parent(&extracted, || {
            tracing::info_span!("server", route = "/a")
        });
        let _g = s.enter();
        let _c = tracing::info_span!("work").entered();
    });
    let spans = rec.spans();
    assert_eq!(
        spans.len(),
        2,
        "the remote parent's sampled flag wins over Never"
    );
    let server = spans.iter().find(|s| s.name == "server").unwrap();
    assert_eq!(
        server.trace_id.to_string(),
        "0af7651916cd43dd8448eb211c80319c"
    );
    assert_eq!(server.parent_id.unwrap().to_string(), "b7ad6b7169203331");
    assert_eq!(server.attribute("route"), Some(&Value::from("/a")));
    let work = spans.iter().find(|s| s.name == "work").unwrap();
    assert_eq!(work.parent_id, Some(server.span_id));

    let rec = Recorder::new(); // Always
    let unsampled = traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00");
    rec.in_scope(|| {
        let s = causeway::with_remote_parent(&causeway::extract(&unsampled), || {
            tracing::info_span!("server")
        });
        let _g = s.enter();
        let _c = tracing::info_span!("work").entered();
    });
    assert!(
        rec.spans().is_empty(),
        "the remote parent's unsampled flag wins over Always"
    );
}

#[test]
fn probability_sampling_records_the_probability_and_carries_it_downstream() {
    let rec = Recorder::with_config(
        causeway::testing::config("p").with_sampler(Sampler::Probability(0.5)),
    )
    .unwrap();
    let mut sent = Vec::new();
    rec.in_scope(|| {
        for _ in 0..400 {
            let _s = tracing::info_span!("root").entered();
            let _c = tracing::info_span!("child").entered();
            let mut h = http::HeaderMap::new();
            causeway::inject(&mut h);
            sent.push(h);
        }
    });
    let traces = rec.traces();
    assert!(
        (120..280).contains(&traces.len()),
        "{} of 400 sampled",
        traces.len()
    );
    assert!(traces.iter().all(|t| t.spans.len() == 2));
    assert!(traces
        .iter()
        .flat_map(|t| &t.spans)
        .all(|s| s.sampling_probability == 0.5));
    // A downstream process records the root's probability, not its own.
    let sampled_header = sent
        .iter()
        .find(|h| h["traceparent"].to_str().unwrap().ends_with("-01"))
        .unwrap();
    assert_eq!(sampled_header["tracestate"], "cw=p:0.5");
    let down = Recorder::new();
    down.in_scope(|| {
        let _s = causeway::with_remote_parent(&causeway::extract(sampled_header), || {
            tracing::info_span!("downstream")
        });
    });
    assert_eq!(down.spans()[0].sampling_probability, 0.5);
}

#[test]
fn adaptive_sampling_holds_the_rate_near_its_target() {
    let rec = Recorder::with_config(
        causeway::testing::config("a").with_sampler(Sampler::Adaptive { per_second: 50.0 }),
    )
    .unwrap();
    rec.in_scope(|| {
        // Far more than 50 roots within the first second: the first window samples all
        // (no rate is known yet), later ones aim at 50/s.
        let t0 = std::time::Instant::now();
        while t0.elapsed() < std::time::Duration::from_millis(2300) {
            let _s = tracing::info_span!("root").entered();
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    });
    let spans = rec.spans();
    let later: Vec<_> = spans
        .iter()
        .filter(|s| s.sampling_probability < 1.0)
        .collect();
    assert!(!later.is_empty(), "the probability came down from 1");
    // Over the windows after the first, about 50 per second were kept.
    let first = spans.iter().map(|s| s.start).min().unwrap();
    let after_first: Vec<_> = spans
        .iter()
        .filter(|s| s.start >= first + 1_100_000_000)
        .collect();
    assert!(
        after_first.len() < 200,
        "{} kept in the last ~1.2 s",
        after_first.len()
    );
    assert!(
        after_first.len() > 10,
        "{} kept in the last ~1.2 s",
        after_first.len()
    );
}

#[test]
fn a_panic_while_creating_a_span_leaves_no_stale_remote_parent() {
    let rec = Recorder::new();
    rec.in_scope(|| {
        let extracted = causeway::extract(&traceparent(
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ));
        let r = std::panic::catch_unwind(|| {
            causeway::with_remote_parent(&extracted, || panic!("handler setup failed"))
        });
        assert!(r.is_err());
        let _next = tracing::info_span!("next request").entered();
    });
    let spans = rec.spans();
    assert_eq!(spans.len(), 1);
    assert_ne!(
        spans[0].trace_id.to_string(),
        "0af7651916cd43dd8448eb211c80319c"
    );
    assert_eq!(spans[0].parent_id, None);
}
