//! The OpenTelemetry Rust SDK can deadlock when its provider is shut down on a
//! current-thread tokio runtime (its issues #2715 and #3176). Causeway's writer is a
//! plain thread and every wait is bounded, so dropping the guard there returns, having
//! flushed.

use std::sync::mpsc;
use std::time::Duration;

use causeway::sinks::segment;

#[test]
fn dropping_the_guard_inside_a_current_thread_runtime_flushes_and_returns() {
    let dir = std::env::temp_dir().join(format!("causeway-guard-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (done_tx, done_rx) = mpsc::channel();
    let run_dir = dir.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            // An exporter to a port nobody listens on, next to the span log.
            let config = causeway::testing::config("current-thread")
                .with_span_log_dir(&run_dir)
                .with_otlp_endpoint("http://127.0.0.1:9");
            let (dispatch, guard) = causeway::dispatch(config).unwrap();
            let _default = tracing::dispatcher::set_default(&dispatch);
            for i in 0..100 {
                let span = tracing::info_span!("request", i);
                async {
                    tokio::task::yield_now().await;
                    tracing::info!("handled");
                }
                .instrument_in(span)
                .await;
            }
            drop(guard);
        });
        done_tx.send(()).unwrap();
    });
    done_rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the guard returned on a current-thread runtime");
    let proc_dir = std::fs::read_dir(&dir)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let read = segment::read_dir(&proc_dir).unwrap();
    assert!(read.problems.is_empty(), "{:?}", read.problems);
    assert_eq!(read.spans.len(), 100, "every span was flushed on drop");
    assert!(read.spans.iter().all(|s| s.events.len() == 1));
    let _ = std::fs::remove_dir_all(&dir);
}

trait InstrumentIn: std::future::Future + Sized {
    fn instrument_in(self, span: tracing::Span) -> tracing::instrument::Instrumented<Self> {
        tracing::Instrument::instrument(self, span)
    }
}
impl<F: std::future::Future> InstrumentIn for F {}
