//! A structured log line nested as deep as the fuzzer asks (JSON objects and arrays, a
//! collector's prefix before them, up to 1 MiB on one line) is read without a panic or a
//! deep stack: as a structured line when it parses, else as text; and a file of such lines
//! is mined and counted, on one line each and pretty-printed over many. Random bytes
//! rarely nest deeply, so the text is built.
#![no_main]

use causeway_logflow::corpus::Corpus;
use causeway_logflow::drain::Options;
use causeway_logflow::{header, structured};
use libfuzzer_sys::fuzz_target;

#[path = "common/nesting.rs"]
mod nesting;

const NESTINGS: [nesting::Nesting; 6] = [
    (r#"{"msg":"x","a":"#, r#"{"b":"#, "}", "}"),
    (r#"{"msg":"x","a":"#, "[", "]", "}"),
    (r#"2022-08-23T13:28:10Z stdout F {"message":"y","fields":"#, r#"{"k":["#, "]}", "}"),
    (r#"{"fields":"#, r#"{"fields":"#, "}", "}"),
    ("level=info msg=\"", "{\\\"", "\\\"}", "\""),
    (r#"{"msg":"#, r#"{"msg":"#, "}", "}"),
];

fuzz_target!(|data: &[u8]| {
    let Some(text) = nesting::nested_text(data, &NESTINGS) else {
        return;
    };
    // One line: a line feed the fuzzer put in the middle would make two.
    let text = text.replace('\n', " ");
    if structured::parse(&text).is_none() {
        let _ = header::parse(&text);
    }
    let files = [("a.log".to_string(), format!("{text}\n{text}\n").into_bytes())];
    let corpus = Corpus::read(&files, Options::default());
    assert_eq!(corpus.counts.lines, 2);
    let formats = &corpus.counts.formats["a.log"];
    assert_eq!(formats.lines, 2);
    // The same pretty-printed over lines, as an object's value: read whole when it is
    // JSON within the limit, else line by line; every line counted either way.
    let pretty = format!(
        "{{\n  \"msg\": \"x\",\n  \"a\": {}\n}}\n",
        text.replace(',', ",\n")
    );
    let files = [("p.log".to_string(), pretty.clone().into_bytes())];
    let corpus = Corpus::read(&files, Options::default());
    let lines = pretty.lines().filter(|l| !l.is_empty()).count();
    assert_eq!(corpus.counts.lines, lines);
    assert_eq!(corpus.counts.formats["p.log"].lines, lines);
});
