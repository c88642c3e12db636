//! A span closes when its last handle goes and its last recorded child has closed, as
//! on tracing-subscriber's Registry: work spawned from a request that outlives the
//! request's handler keeps the request's span open. Runs in the mode `CAUSEWAY_MODE`
//! names, like the rest of the suite.

use std::sync::mpsc;

use causeway::testing::Recorder;

#[test]
fn a_parent_dropped_first_ends_when_its_last_child_ends() {
    let recorder = Recorder::new();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let worker = recorder.in_scope(|| {
        let request = tracing::info_span!("request");
        let _r = request.enter();
        let write = tracing::info_span!("write");
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        let worker = std::thread::spawn(move || {
            // The write is dropped under the dispatcher: the Registry closes the parent
            // through the thread's current dispatcher.
            tracing::dispatcher::with_default(&dispatch, move || {
                let _w = write.entered();
                release_rx.recv().unwrap();
                tracing::info!("written");
            })
        });
        worker
    });
    // The request's handle is gone; the write still runs.
    release_tx.send(()).unwrap();
    worker.join().unwrap();
    let traces = recorder.traces();
    assert_eq!(traces.len(), 1);
    let by_name = |n: &str| traces[0].spans.iter().find(|s| s.name == n).unwrap();
    let (request, write) = (by_name("request"), by_name("write"));
    assert_eq!(write.parent_id, Some(request.span_id));
    assert_eq!(write.events[0].name, "written");
    assert!(
        request.end >= write.end,
        "request ended at {} before its write at {}",
        request.end,
        write.end
    );
}
