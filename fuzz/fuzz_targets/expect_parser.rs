//! The expectation parser never panics; what it accepts prints to text it parses back to
//! the same tree.
#![no_main]

use causeway_expect::lang::ast::Item;
use causeway_expect::lang::parse;
use libfuzzer_sys::fuzz_target;

fn without_lines(mut f: causeway_expect::lang::ast::File) -> causeway_expect::lang::ast::File {
    for item in &mut f.items {
        if let Item::Assert { line, .. } = item {
            *line = 0;
        }
    }
    f
}

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else { return };
    match parse(src) {
        Ok(file) => {
            let text = file.to_string();
            let back = parse(&text).expect("printed text parses");
            assert_eq!(without_lines(back), without_lines(file), "{text}");
        }
        Err(e) => {
            assert!(e.line >= 1 && e.col >= 1);
            let _ = e.render("fuzz", src);
        }
    }
});
