//! OTLP protobuf and JSON bodies from the network, traces and logs, never panic the
//! decoders.
#![no_main]

use causeway_model::codec::otlp;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = otlp::decode_protobuf(data) {
        // What was accepted survives a round trip.
        let again = otlp::decode_protobuf(&otlp::encode_protobuf(&d.spans)).unwrap();
        assert_eq!(again.spans.len(), d.spans.len());
    }
    let _ = otlp::decode_json(data);
    for decoded in [
        otlp::logs::decode_logs_protobuf(data),
        otlp::logs::decode_logs_json(data),
    ]
    .into_iter()
    .flatten()
    {
        // Every record is kept on a carrier or rejected.
        let kept: usize = decoded.carriers.iter().map(|c| c.events.len()).sum();
        assert_eq!(kept, decoded.records);
    }
});
