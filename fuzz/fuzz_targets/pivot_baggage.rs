//! Pivot baggage from a header (base64url text) or as bytes decodes or is refused,
//! never panics; what decodes encodes to bytes that decode to the same baggage.
#![no_main]

use causeway_pivot::wire::{decode, decode_text, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = decode_text(text);
    }
    if let Ok(b) = decode(data) {
        let again = decode(&encode(&b, usize::MAX)).expect("encoded baggage decodes");
        assert_eq!(again, b);
    }
});
