//! Capture logs of any bytes, arriving in any pieces (resent, out of order, past a gap),
//! are held and inferred a window at a time without a panic; what is held stays within
//! the bytes fed, and a log found unreadable is named.
#![no_main]

use std::path::Path;

use causeway_blackbox::format::MAGIC;
use causeway_blackbox::infer::Options;
use causeway_blackbox::tail::CaptureTail;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Byte pairs first: each piece's log, its start and its end (as shares of the log);
    // then the two logs' bytes, each after the header so most reach the records.
    let (pieces, rest) = data.split_at(data.len().min(16));
    let half = rest.len() / 2;
    let logs: [Vec<u8>; 2] = [
        [&MAGIC[..], &rest[..half]].concat(),
        [&MAGIC[..], &rest[half..]].concat(),
    ];
    let names = [Path::new("a/1.sockcap"), Path::new("b/2.sockcap")];
    let mut tail = CaptureTail::new(vec![], vec![], Options::default(), 0);
    let mut fed = 0usize;
    for (i, piece) in pieces.chunks(2).enumerate() {
        let which = i % 2;
        let log = &logs[which];
        let share = |b: u8| (usize::from(b) * log.len()) / 255;
        let from = share(piece[0]);
        let to = share(*piece.get(1).unwrap_or(&255)).max(from);
        let _ = tail.feed(names[which], None, from as u64, &log[from..to]);
        fed += to - from;
        if i % 3 == 2 {
            let _ = tail.settle(i as u64);
        }
    }
    for (name, log) in names.iter().zip(&logs) {
        let _ = tail.feed(name, None, 0, log);
        fed += log.len();
    }
    assert!(tail.held_bytes() <= fed + 2 * MAGIC.len());
    let _ = tail.settle(u64::MAX);
    for (name, why) in tail.damaged() {
        assert!(!why.is_empty(), "{}", name.display());
    }
});
