//! The Pivot query parser refuses nesting past its limit with a position and never
//! overflows its stack, however deep the input nests (up to 1 MiB of it). The input picks
//! a construct and a depth and the text is built, as random bytes rarely nest deeply.
#![no_main]

use causeway_pivot::lang::{parse, print_script};
use libfuzzer_sys::fuzz_target;

#[path = "common/nesting.rs"]
mod nesting;

/// Ways to nest: text before the repeated part, the opener, the closer, text after.
const NESTINGS: [nesting::Nesting; 8] = [
    ("From x In A Where ", "(", ")", "x.a Select x.a"),
    ("From x In A Where ", "Not ", "", "x.a Select x.a"),
    ("From x In A Where ", "- ", "", "x.a Select x.a"),
    ("From x In A Where ", "!", "", "x.a Select x.a"),
    ("From x In A Where x.a", " + 1", "", " Select x.a"),
    ("From x In A Where x.a", " Or x.b", "", " Select x.a"),
    ("From x In A Where x.a", " In (1, x.a", ")", " Select x.a"),
    ("From x In A Select SUM(", "(", ")", "x.a)"),
];

fuzz_target!(|data: &[u8]| {
    let Some(text) = nesting::nested_text(data, &NESTINGS) else {
        return;
    };
    match parse(&text) {
        Ok(script) => {
            parse(&print_script(&script)).expect("printed text parses");
        }
        Err(e) => assert!(e.line >= 1 && e.col >= 1, "{e}"),
    }
});
