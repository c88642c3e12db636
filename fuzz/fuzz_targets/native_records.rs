//! The native record decoder never panics, never reads past its input, and every span it
//! returns encodes back to a record that decodes to the same span.
#![no_main]

use causeway_model::codec::native;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let d = native::decode_stream(data);
    assert!(d.complete <= data.len());
    for span in &d.spans {
        let mut buf = Vec::new();
        native::encode(span, &mut buf);
        let again = native::decode_stream(&buf);
        assert!(again.problems.is_empty());
        assert_eq!(again.spans.len(), 1);
    }
});
