//! The expectation parser refuses nesting past its limit with a position, and never
//! overflows its stack, however deep the input nests (up to 1 MiB of it). Random bytes
//! rarely nest deeply, so the input picks a construct and a depth and the text is built.
#![no_main]

use causeway_expect::lang::parse;
use libfuzzer_sys::fuzz_target;

#[path = "common/nesting.rs"]
mod nesting;

/// Ways to nest: text before the repeated part, the opener, the closer, text after.
const NESTINGS: [nesting::Nesting; 16] = [
    ("assert(", "-", "", "1 > 0);"),
    ("assert(", "(", ")", "1 > 0);"),
    ("assert(", "!", "", "1 > 0);"),
    ("assert(1", " + 1", "", " > 0);"),
    ("assert(2", " ** 2", "", " > 0);"),
    ("assert(1", " in {1, 1", "}", ");"),
    ("assert(1", " in {=1", "}", ");"),
    ("validator V { thread t(*, 1) { notice(", "!", "", "\"x\"); } }"),
    ("validator V { thread t(*, 1) { repeat 1", " * 1", "", " task(\"x\"); } }"),
    ("validator V { thread t(*, 1) { $z = ", "(", ")", "1; } }"),
    ("validator S : ", "!(", ")", "A;"),
    ("validator S : A", " && A", "", ";"),
    ("validator S : A", " -> A", "", ";"),
    ("validator V { thread t(*, 1) ", "{", "}", "task(\"x\");"),
    ("validator V { thread t(*, 1) { ", "maybe ", "", "task(\"x\"); }"),
    ("validator V { thread t(*, 1) { ", "repeat 2 { task(\"a\") ", "}", "task(\"x\"); }"),
];

fuzz_target!(|data: &[u8]| {
    let Some(text) = nesting::nested_text(data, &NESTINGS) else {
        return;
    };
    match parse(&text) {
        Ok(file) => {
            let printed = file.to_string();
            // The printer brackets a whole expression (a constant few levels, never one
            // per level: `printed_deep_nesting_parses_again` holds it to that), so text
            // at the very limit may print past it; that is the only refusal allowed.
            if let Err(e) = parse(&printed) {
                assert!(e.found.contains("nested more than"), "printed text fails: {e}");
            }
        }
        Err(e) => {
            assert!(e.line >= 1 && e.col >= 1, "{e}");
        }
    }
});
