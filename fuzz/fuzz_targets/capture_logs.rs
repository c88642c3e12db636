//! A capture log of any bytes is read up to its damage and never panics; every record
//! read re-encodes to the bytes it was read from.
#![no_main]

use causeway_blackbox::format::{Reader, MAGIC};
use causeway_blackbox::logs::summarize;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Most inputs get the header, so the fuzzer spends its time on records.
    let mut log = MAGIC.to_vec();
    log.extend_from_slice(data);
    let mut reader = Reader::new(&log);
    let mut at = MAGIC.len();
    let mut buf = vec![0u8; 1 << 17];
    for record in reader.by_ref() {
        let n = record.encode(&mut buf).expect("a record read back fits");
        assert_eq!(&buf[..n], &log[at..at + n], "{record:?}");
        at += n;
    }
    assert_eq!(reader.offset() as usize, log.len());
    if let Some(d) = reader.damage() {
        assert_eq!(d.offset as usize, at);
    }
    let _ = summarize(std::path::Path::new("fuzz.sockcap"), data);
});
