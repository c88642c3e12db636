//! Zipkin JSON bodies from the network never panic the decoder.
#![no_main]

use causeway_model::codec::zipkin;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(d) = zipkin::decode_json(data) {
        let _ = zipkin::encode_json(&d.spans);
    }
});
