//! The Pivot query parser never panics; what it accepts prints to text that parses and
//! prints the same again.
#![no_main]

use causeway_pivot::lang::{parse, print_script};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    match parse(src) {
        Ok(script) => {
            let text = print_script(&script);
            let back = parse(&text).expect("printed text parses");
            assert_eq!(print_script(&back), text);
        }
        Err(e) => {
            assert!(e.line >= 1 && e.col >= 1);
            let _ = e.render("fuzz", src);
        }
    }
});
