//! The W3C header parsers never panic, and what they accept they write back in a form
//! they accept again.
#![no_main]

use causeway::propagation::{parse_traceparent, Baggage, TraceState};
use causeway::message::MessageToken;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Some((t, sp, f)) = parse_traceparent(s) {
        let again = format!("00-{t}-{sp}-{f:02x}");
        assert!(parse_traceparent(&again).is_some());
    }
    let ts = TraceState::parse(s.split('\n'));
    if !ts.is_empty() {
        let again = TraceState::parse([ts.header().as_str()]);
        assert!(!again.is_empty());
    }
    let b = Baggage::parse([s]);
    let header = b.header();
    // Re-encoding can grow values (percent-encoding); within the size limit it is exact.
    if header.len() < 8000 {
        assert_eq!(Baggage::parse([header.as_str()]), b);
    }
    let _ = MessageToken::decode(s);
});
