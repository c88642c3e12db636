//! The Pivot query parser refuses nesting past its limit with a position and never
//! overflows its stack, however deep the input nests (up to 1 MiB of it). The input picks
//! a construct and a depth and the text is built, as random bytes rarely nest deeply.
#![no_main]

use causeway_pivot::lang::{parse, print_script};
use libfuzzer_sys::fuzz_target;

/// Ways to nest: text before the repeated part, the opener, the closer, text after.
const NESTINGS: [(&str, &str, &str, &str); 8] = [
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
    let [which, hi, lo, rest @ ..] = data else { return };
    let (before, open, close, after) = NESTINGS[*which as usize % NESTINGS.len()];
    let max = (1 << 20) / (open.len() + close.len()).max(1);
    let depth = ((*hi as usize) << 8 | *lo as usize) * 8 % max;
    let middle = String::from_utf8_lossy(rest);
    let text = format!(
        "{before}{}{middle}{after}{}",
        open.repeat(depth),
        close.repeat(depth)
    );
    match parse(&text) {
        Ok(script) => {
            parse(&print_script(&script)).expect("printed text parses");
        }
        Err(e) => assert!(e.line >= 1 && e.col >= 1, "{e}"),
    }
});
