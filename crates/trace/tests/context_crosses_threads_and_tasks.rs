//! Context follows the request across threads, pools and async tasks.

use causeway::testing::Recorder;
use causeway::SpanExt;
use tracing::Instrument;

#[test]
fn a_thread_started_with_the_helper_joins_the_callers_trace() {
    let rec = Recorder::new();
    rec.in_scope(|| {
        let _root = tracing::info_span!("root").entered();
        let job = causeway::in_current_span(|| {
            let _s = tracing::info_span!("on another thread").entered();
        });
        std::thread::spawn(job).join().unwrap();
    });
    let traces = rec.traces();
    assert_eq!(traces.len(), 1);
    let t = &traces[0];
    assert_eq!(t.spans.len(), 2);
    let root = &t.spans[t.roots[0]];
    let other = t
        .spans
        .iter()
        .find(|s| s.name == "on another thread")
        .unwrap();
    assert_eq!(other.parent_id, Some(root.span_id));
    assert_ne!(
        other.execution_unit, root.execution_unit,
        "Pip threads differ"
    );
}

#[test]
fn spans_in_spawned_tasks_on_a_multi_thread_runtime_keep_their_parents() {
    let rec = Recorder::new();
    let dispatch = rec.dispatch();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .on_thread_start(move || {
            // Worker threads need the dispatcher too (a global one needs no such step).
            std::mem::forget(tracing::dispatcher::set_default(&dispatch));
        })
        .enable_all()
        .build()
        .unwrap();
    rec.in_scope(|| {
        rt.block_on(async {
            let root = tracing::info_span!("request");
            let mut handles = Vec::new();
            for i in 0..8 {
                let span = tracing::info_span!(parent: &root, "task", i);
                handles.push(tokio::spawn(
                    async move {
                        tokio::task::yield_now().await;
                        let _inner = tracing::info_span!("inner").entered();
                    }
                    .instrument(span),
                ));
            }
            for h in handles {
                h.await.unwrap();
            }
            drop(root);
        })
    });
    drop(rt);
    let traces = rec.traces();
    assert_eq!(traces.len(), 1, "{traces:#?}");
    let t = &traces[0];
    assert_eq!(t.spans.len(), 17);
    assert_eq!(t.roots.len(), 1);
    for (i, s) in t.spans.iter().enumerate() {
        match s.name.as_str() {
            "task" => assert_eq!(t.spans[t.parent[i].unwrap()].name, "request"),
            "inner" => assert_eq!(t.spans[t.parent[i].unwrap()].name, "task"),
            _ => assert_eq!(s.name, "request"),
        }
    }
}

#[test]
fn baggage_is_inherited_by_children_and_injected() {
    let rec = Recorder::new();
    rec.in_scope(|| {
        let root = tracing::info_span!("root");
        root.set_baggage("tenant", "acme");
        let _g = root.enter();
        let _child = tracing::info_span!("child").entered();
        let mut h = http::HeaderMap::new();
        causeway::inject(&mut h);
        assert_eq!(h["baggage"], "tenant=acme");
        assert_eq!(
            tracing::Span::current().baggage().unwrap().get("tenant"),
            Some("acme")
        );
    });
}
