//! Log streams of any bytes are cut into windows and stitched across them without a
//! panic: every line is new in exactly one window, and every new line gets a request.
#![no_main]

use causeway_logflow::corpus::Corpus;
use causeway_logflow::drain::Options;
use causeway_logflow::window::{Numbering, Stream, WindowOptions, Windows};
use causeway_logflow::{ids, links, stitch};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte splits the rest into two streams (two nodes), the second sizes
    // the windows.
    let (split, rest) = data.split_first().unwrap_or((&0, &[]));
    let (size, rest) = rest.split_first().unwrap_or((&0, &[]));
    let at = (*split as usize * rest.len()) / 256;
    let stream = |name: &str, bytes: &[u8]| Stream {
        name: name.into(),
        reader: Box::new(std::io::Cursor::new(bytes.to_vec())),
    };
    let mut windows = Windows::new(
        vec![stream("a.log", &rest[..at]), stream("b.log", &rest[at..])],
        None,
        WindowOptions {
            max_bytes: 64 + 64 * usize::from(*size),
            overlap_ns: 1_000_000_000,
        },
    );
    let mut numbering = Numbering::default();
    let mut new_lines = [0usize; 2];
    while let Some(window) = windows.next_window() {
        let corpus = Corpus::read_numbered(
            &window.files,
            &window.first_lines,
            Options::default(),
            None,
            None,
        );
        let ranked = ids::rank(&corpus);
        let links = links::learn(&corpus, &links::LinkOptions::default());
        let given = numbering.given(&window, &corpus);
        let options = stitch::StitchOptions::default();
        let requests = stitch::stitch_after(&corpus, &ranked, &links, &options, &given);
        let (numbered, _) = numbering.number(&window, &corpus, &requests);
        for (line, request) in corpus.lines.iter().zip(&numbered) {
            let new = !window.context(line.file, line.number);
            assert_eq!(request.is_some(), new, "{}:{}", line.file, line.number);
            if new {
                new_lines[line.file as usize] += 1 + line.continued.len();
            }
        }
    }
    // Every non-empty line, once (a line with no time before any with one stands alone).
    let lines = |bytes: &[u8]| {
        bytes
            .split(|&b| b == b'\n')
            .filter(|l| !l.strip_suffix(b"\r").unwrap_or(l).is_empty())
            .count()
    };
    assert_eq!(new_lines, [lines(&rest[..at]), lines(&rest[at..])]);
});
