//! Jaeger JSON (as its query API answers and its UI downloads) never panics the decoder,
//! and what it accepts survives being written again.
#![no_main]

use causeway_model::codec::jaeger;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = jaeger::decode_json(data) {
        let again = jaeger::decode_json(&jaeger::encode_json(&d.spans)).expect("written JSON reads");
        assert_eq!(again.spans.len(), d.spans.len());
    }
});
