//! A message through a queue carries its sender's context; the receiver's work joins the
//! sender's trace, and both ends record the message (Pip's send and receive).

use causeway::message::{self, MessageToken};
use causeway::model::{Direction, PathEvent, PathView};
use causeway::testing::Recorder;

#[test]
fn a_queued_message_links_producer_and_consumer() {
    let rec = Recorder::new();
    let dispatch = rec.dispatch();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let consumer = std::thread::spawn(move || {
        tracing::dispatcher::with_default(&dispatch, || {
            let wire = rx.recv().unwrap();
            let token = MessageToken::decode(&wire).expect("a valid token");
            let span = tracing::info_span!("consume", otel.kind = "consumer");
            message::receive(&span, &token, Some("jobs"), Some(42));
            let _g = span.enter();
            let _work = tracing::info_span!("handle job").entered();
        })
    });
    rec.in_scope(|| {
        let _root = tracing::info_span!("enqueue request").entered();
        let producer = tracing::info_span!("produce", otel.kind = "producer");
        let token = message::send(&producer, Some("jobs"), Some(42)).unwrap();
        drop(producer);
        tx.send(token.encode()).unwrap();
    });
    consumer.join().unwrap();
    let traces = rec.traces();
    assert_eq!(traces.len(), 1, "one trace across the queue");
    let t = &traces[0];
    assert_eq!(t.spans.len(), 4);
    assert_eq!(t.roots.len(), 1);
    let produce = t.spans.iter().find(|s| s.name == "produce").unwrap();
    let consume = t.spans.iter().find(|s| s.name == "consume").unwrap();
    assert_eq!(consume.parent_id, Some(produce.span_id));
    assert_eq!(produce.messages.len(), 1);
    assert_eq!(consume.messages.len(), 1);
    assert_eq!(produce.messages[0].direction, Direction::Send);
    assert_eq!(consume.messages[0].direction, Direction::Recv);
    assert_eq!(produce.messages[0].id, consume.messages[0].id);
    assert_eq!(consume.messages[0].size, Some(42));
    // Pip's view: the send is in the producer's thread, the receive in the consumer's.
    let view = PathView::from_trace(t);
    assert_eq!(view.threads.len(), 2);
    let sends: usize = view.threads[0]
        .events
        .iter()
        .filter(|e| matches!(e, PathEvent::Send { .. }))
        .count();
    let recvs: usize = view.threads[1]
        .events
        .iter()
        .filter(|e| matches!(e, PathEvent::Recv { .. }))
        .count();
    assert_eq!((sends, recvs), (1, 1));
}

#[test]
fn a_receiver_inside_another_trace_is_linked_instead() {
    let rec = Recorder::new();
    rec.in_scope(|| {
        let token = {
            let p = tracing::info_span!("produce");
            message::send(&p, None, None).unwrap()
        };
        let _loop = tracing::info_span!("poll loop").entered();
        let span = tracing::info_span!("consume");
        message::receive(&span, &token, None, None);
        drop(span);
    });
    let spans = rec.spans();
    let produce = spans.iter().find(|s| s.name == "produce").unwrap();
    let consume = spans.iter().find(|s| s.name == "consume").unwrap();
    assert_ne!(consume.trace_id, produce.trace_id);
    assert_eq!(consume.links[0].span_id, produce.span_id);
    assert_eq!(consume.messages[0].id, produce.messages[0].id);
}
