//! Stitched requests as traces (source: logs): a span per segment (a node's, or a
//! thread's, lines of one request), from its first line to its last, named by its first
//! line's log point, with an event per line (its number in its file, and its log point
//! as `log.point`); the request's first segment is the root and the others hang under it.
//! A span is named by a log point, never by a line's values, which would make a name per
//! request. An event's message is the line as printed after its prefix, run on through
//! the lines that continue it (a stack trace's frames), up to 64 KiB: the corpus keeps
//! where each line's message is in its file, 8 bytes a line, or the message itself when it
//! is not the file's bytes (lossy or JSON); its attributes are `log.line` and `log.point`.
//! Where lines of the request print a request id (a variable named as one, such as a
//! frontend's `http.req.id`), every span of the request carries it, under its name.
//!
//! Trace ids mix the request number into their high half and a per-run salt into the
//! low. A request's span ids share their high 40 bits (the request number mixed with the
//! salt) and number its segments from 1 in the low 24, so that a block stores them in
//! about 2 bytes, not 8.

use causeway_model::{attributes, Event, KeyValue, Source, Span, SpanId, SpanKind, TraceId};
use foldhash::HashMap;

use crate::corpus::Corpus;
use crate::flows::{FlowLine, Flows, Request};

/// Characters of a log point's text kept as a span's name.
const NAME_CHARS: usize = 80;

/// A file's service name: its file name without directories and extension.
pub(crate) fn service(file: &str) -> &str {
    let name = file.rsplit('/').next().unwrap_or(file);
    name.split_once('.').map_or(name, |(stem, _)| stem)
}

/// splitmix64's finalizer: a bijection that spreads nearby numbers apart.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The spans of the requests of one corpus, read from `files` (`requests` gives each
/// line's), as [`request_spans`] makes them.
pub fn spans(
    corpus: &Corpus,
    files: &[(String, Vec<u8>)],
    requests: &[u32],
    salt: u64,
) -> Vec<Span> {
    let (flows, closed) = Flows::whole(corpus, files, requests, true);
    closed
        .iter()
        .flat_map(|r| request_spans(&flows, r, salt))
        .collect()
}

/// The spans of `request`, whose lines `flows` holds with their text; ids are salted
/// with `salt`, so that two runs over the same logs make distinct traces. Lines with no
/// time are left out.
pub fn request_spans(flows: &Flows, request: &Request, salt: u64) -> Vec<Span> {
    // Segments: (file, thread) -> lines, in time order.
    type Key = (u32, Option<u32>);
    let mut segments: HashMap<Key, Vec<&FlowLine>> = HashMap::default();
    for line in &request.lines {
        if line.time_ns.is_some() {
            segments
                .entry((line.file, line.thread))
                .or_default()
                .push(line);
        }
    }
    let time = |line: &FlowLine| line.time_ns.unwrap_or(0).max(0) as u64;
    let mut keys: Vec<(Key, u64)> = segments
        .iter()
        .map(|(k, lines)| (*k, lines.iter().map(|l| time(l)).min().unwrap_or(0)))
        .collect();
    keys.sort_by_key(|&((f, t), start)| (start, f, t));
    // The request's number mixed into the high half, so that ids differ at once (the UI
    // shows their first digits).
    let Some(trace_id) =
        TraceId::new((u128::from(mix(salt ^ u64::from(request.id))) << 64) | u128::from(salt))
    else {
        return Vec::new();
    };
    // The request id some of its lines print (a frontend's), on every span of the
    // request, so that searching for it finds the other services' lines too; none when
    // the request holds two (two requests stitched as one).
    let mut ids = request.lines.iter().filter_map(|l| l.request_id.as_deref());
    let request_id = ids
        .next()
        .filter(|first| ids.all(|id| id == *first))
        .map(|(name, value)| KeyValue::new(name.to_string(), value.to_string()));
    let mut root: Option<SpanId> = None;
    let mut out = Vec::with_capacity(keys.len());
    // A request's segments share their ids' high 40 bits, spread apart per request, and
    // are numbered from 1 in the low 24: unique per request up to 2^24 - 1 segments, and
    // a block holding a request's spans side by side stores their ids in 3 bytes, not 8.
    let request_bits = mix(salt.rotate_left(32) ^ u64::from(request.id)) & !0xFF_FFFF;
    for (n, (key, _)) in keys.into_iter().enumerate().take(0xFF_FFFF) {
        let Some(span_id) = SpanId::new(request_bits | (n as u64 + 1)) else {
            continue;
        };
        let mut lines = segments.remove(&key).unwrap_or_default();
        lines.sort_by_key(|l| (time(l), l.number));
        let (Some(&first), Some(&last)) = (lines.first(), lines.last()) else {
            continue;
        };
        let (file, thread) = key;
        let parent = root;
        root.get_or_insert(span_id);
        // The log point, not the line: span names are what operations are listed by,
        // and a line's values would make an operation of every request.
        let name: String = flows.point(first.point).chars().take(NAME_CHARS).collect();
        let file_name = flows.files.get(file as usize).map_or("", String::as_str);
        let mut span = Span::new(
            trace_id,
            span_id,
            parent,
            name,
            service(file_name),
            time(first),
            time(last),
        );
        span.kind = if parent.is_none() {
            SpanKind::Server
        } else {
            SpanKind::Internal
        };
        span.source = Source::Logs;
        span.attributes
            .push(KeyValue::new(attributes::LOG_FILE, file_name));
        if let Some(thread) = thread.and_then(|t| flows.thread(t)) {
            span.attributes
                .push(KeyValue::new(attributes::THREAD_NAME, thread));
        }
        span.attributes.extend(request_id.clone());
        span.events = lines
            .iter()
            .map(|l| Event {
                time: time(l),
                name: l.text.to_string(),
                attributes: vec![
                    KeyValue::new(attributes::LOG_LINE, i64::from(l.number)),
                    KeyValue::new(attributes::LOG_POINT, flows.point(l.point)),
                ],
            })
            .collect();
        out.push(span);
    }
    out
}

/// A [`Sink`](crate::Sink) that keeps the requests stitching closes as spans, made by
/// [`request_spans`] with `salt` (stitching must keep lines: `Options::keep_lines`).
pub struct RequestSpans {
    /// The spans of the requests closed so far.
    pub spans: Vec<Span>,
    salt: u64,
}

impl RequestSpans {
    /// No spans yet; ids salted with `salt`.
    pub fn new(salt: u64) -> RequestSpans {
        RequestSpans {
            spans: Vec::new(),
            salt,
        }
    }
}

impl crate::Sink for RequestSpans {
    type Error = std::convert::Infallible;

    fn warning(&mut self, _: &str) {}

    fn line(&mut self, _: u32, _: u32, _: u32) -> Result<(), Self::Error> {
        Ok(())
    }

    fn closed(&mut self, flows: &Flows, requests: &[Request]) -> Result<(), Self::Error> {
        for r in requests {
            self.spans.extend(request_spans(flows, r, self.salt));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drain::Options;

    #[test]
    fn a_request_is_a_trace_with_a_span_per_node_and_an_event_per_line() {
        let web = "1970-01-01T00:00:01.000Z INFO [main] order 7 received\n\
                   1970-01-01T00:00:01.300Z INFO [main] order 7 done\n";
        let db = "1970-01-01T00:00:01.100Z INFO [pool] wrote order=7\n\
                  \tat db.write(Db.java:12)\n\
                  \tat db.run(Db.java:3)\n";
        // A line that is not UTF-8, and a JSON line: messages that are not the files' bytes.
        let mut pay = b"1970-01-01T00:00:01.150Z INFO [io] charged order 7 \xff\n".to_vec();
        pay.extend_from_slice(
            br#"{"timestamp":"1970-01-01T00:00:01.160Z","thread":"io","message":"receipt sent","order":7}"#,
        );
        pay.extend_from_slice(b"\n\tat pay.Mail.send(Mail.java:40)\n");
        let files = [
            ("logs/web.log".to_string(), web.as_bytes().to_vec()),
            ("logs/db.log".to_string(), db.as_bytes().to_vec()),
            ("logs/pay.log".to_string(), pay),
        ];
        let corpus = Corpus::read(&files, Options::default());
        let spans = spans(&corpus, &files, &[0; 5], 5);
        assert_eq!(spans.len(), 3);
        let (root, child) = (&spans[0], &spans[1]);
        assert_eq!(root.trace_id, child.trace_id);
        assert_eq!(child.parent_id, Some(root.span_id));
        assert_eq!(root.parent_id, None);
        // One request's segments: ids that differ in their low bits only.
        assert_ne!(root.span_id, child.span_id);
        assert_eq!(root.span_id.get() >> 24, child.span_id.get() >> 24);
        assert_eq!(&*root.service, "web");
        assert_eq!(&*child.service, "db");
        assert_eq!(root.source, Source::Logs);
        assert_eq!((root.start, root.end), (1_000_000_000, 1_300_000_000));
        // Named by its first line's log point, not by the line.
        assert_eq!(root.name, "order <NUM> <*>");
        assert_eq!(
            root.events[0].attributes[1],
            KeyValue::new(attributes::LOG_POINT, "order <NUM> <*>")
        );
        let events: Vec<&str> = root.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(events, ["order 7 received", "order 7 done"]);
        // Each event is its line's message as printed, not its log point's rendering
        // (`wrote order = 7`), with the lines that continue it.
        assert_eq!(
            child.events[0].name,
            "wrote order=7\n\tat db.write(Db.java:12)\n\tat db.run(Db.java:3)"
        );
        assert_eq!(
            child.events[0].attributes[1],
            KeyValue::new(attributes::LOG_POINT, "wrote order = <NUM>")
        );
        let events: Vec<&str> = spans[2].events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(
            events,
            [
                "charged order 7 \u{fffd}",
                "receipt sent order=7\n\tat pay.Mail.send(Mail.java:40)"
            ]
        );
        // Another salt, another trace.
        assert_ne!(
            super::spans(&corpus, &files, &[0; 5], 6)[0].trace_id,
            root.trace_id
        );
    }
}
