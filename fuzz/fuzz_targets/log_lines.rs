//! Log files of any bytes are read, their log points mined, their identifiers ranked and
//! their lines stitched without a panic; every line read gets a request. A line's header
//! read with what the line before it was found to be is the one read anew. Lines that name
//! a trace become log records without a panic. A JSON object still being written at the
//! end is found at a line's start.
#![no_main]

use causeway_logflow::context::LogRecords;
use causeway_logflow::corpus::Corpus;
use causeway_logflow::drain::Options;
use causeway_logflow::{header, ids, links, stitch, structured};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The first byte splits the rest into two files (two nodes).
    let (split, rest) = data.split_first().unwrap_or((&0, &[]));
    let at = (*split as usize * rest.len()) / 256;
    let files = [
        ("a.log".to_string(), rest[..at].to_vec()),
        ("b.log".to_string(), rest[at..].to_vec()),
    ];
    let mut memo = header::LayoutMemo::default();
    let mut records = LogRecords::default();
    for (n, line) in String::from_utf8_lossy(rest).lines().enumerate() {
        assert_eq!(header::parse_with(line, &mut memo), header::parse(line));
        records.read_line("a.log", n as u32 + 1, line);
    }
    let kept: usize = records.take_carriers().iter().map(|c| c.events.len()).sum();
    assert_eq!(kept + records.untimed, records.lines);
    // A JSON object still being written begins at a line's start, if anywhere.
    if let Some(at) = structured::unclosed_pretty_json(rest, 1 << 14) {
        assert!(at == 0 || rest[at - 1] == b'\n');
    }
    let corpus = Corpus::read(&files, Options::default());
    let ranked = ids::rank(&corpus);
    let links = links::learn(&corpus, &links::LinkOptions::default());
    let requests = stitch::stitch(&corpus, &ranked, &links, &stitch::StitchOptions::default());
    assert_eq!(requests.len(), corpus.lines.len());
    assert!(requests.iter().all(|&r| (r as usize) < corpus.lines.len()));
    for line in &corpus.lines {
        let template = &corpus.miner.templates()[line.template as usize];
        let _ = template.text();
        // A line has a value at each of its log point's parameters.
        let point = &corpus.points()[line.point as usize];
        assert_eq!(point.template, line.template);
        assert_eq!(
            corpus.point_shape(line.point).parameters(),
            line.values.len()
        );
    }
});
