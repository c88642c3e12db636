//! Log lines that name their trace: a W3C `traceparent` (`00-<trace>-<span>-<flags>`), or a
//! trace id and a span id written as a field (`trace_id=…`, `traceId: …`, `"trace.id":
//! "…"`, `span_id=…`, in any case, as OpenTelemetry's log formats and MDC patterns write
//! them). Such a line is a log record of that span (or, with no span id, of the span of its
//! service whose interval holds it): [`LogRecords`] gathers a window's lines into carriers
//! (`causeway_model::logs`), which the trace takes in when it is read. A file's service is
//! its name without directory and extension (`orders.log` is `orders`).

use std::collections::BTreeMap;

use causeway_model::attributes::{LOG_FILE, LOG_LINE};
use causeway_model::logs::{log_event, unplaced_carrier_id, LOG_RECORDS, UNPLACED};
use causeway_model::{Event, KeyValue, Source, Span, SpanId, TraceId};

use crate::header::{self, Level};
use crate::structured;
use crate::window::Window;

/// The trace (and span) a line names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineContext {
    /// The trace.
    pub trace: TraceId,
    /// The span, when the line names one.
    pub span: Option<SpanId>,
}

/// Field names of a trace id and of a span id, lower case, as loggers write them.
const TRACE_KEYS: [&str; 4] = ["trace_id", "traceid", "trace-id", "trace.id"];
const SPAN_KEYS: [&str; 4] = ["span_id", "spanid", "span-id", "span.id"];

/// The hex digits right after `key` at `at` in `text` (past quotes, `=`, `:` and spaces),
/// if `key` starts a word there.
fn value_after<'a>(text: &'a str, at: usize, key: &str) -> Option<&'a str> {
    let bytes = text.as_bytes();
    let word_start = at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
    if !word_start {
        return None;
    }
    let rest = &text[at + key.len()..];
    let skipped = rest
        .bytes()
        .take(6)
        .take_while(|b| matches!(b, b'"' | b'\'' | b'=' | b':' | b' '))
        .count();
    let value = &rest[skipped..];
    let hex = value.bytes().take_while(u8::is_ascii_hexdigit).count();
    let after = value.as_bytes().get(hex);
    (skipped > 0 && after.is_none_or(|b| !b.is_ascii_alphanumeric())).then(|| &value[..hex])
}

/// The first value of one of `keys` in `text` that is `digits` hex digits long.
fn field(text: &str, lower: &str, keys: &[&str], digits: usize) -> Option<String> {
    keys.iter().find_map(|key| {
        lower
            .match_indices(key)
            .filter_map(|(at, _)| value_after(text, at, key))
            .find(|v| v.len() == digits)
            .map(str::to_ascii_lowercase)
    })
}

/// A W3C `traceparent` value anywhere in `text`: its trace id and span id.
fn traceparent(text: &str) -> Option<(String, String)> {
    let b = text.as_bytes();
    text.match_indices("00-").find_map(|(at, _)| {
        let v = b.get(at..at + 55)?;
        let hex = |r: std::ops::Range<usize>| v[r].iter().all(u8::is_ascii_hexdigit);
        let shape = v[35] == b'-' && v[52] == b'-' && hex(3..35) && hex(36..52) && hex(53..55);
        let bounded = at == 0 || !b[at - 1].is_ascii_alphanumeric();
        (shape && bounded).then(|| {
            (
                text[at + 3..at + 35].to_ascii_lowercase(),
                text[at + 36..at + 52].to_ascii_lowercase(),
            )
        })
    })
}

/// The trace and span `line` names, if it names a valid (nonzero) trace id.
pub fn find(line: &str) -> Option<LineContext> {
    if let Some((trace, span)) = traceparent(line) {
        if let Ok(trace) = TraceId::parse(&trace) {
            return Some(LineContext {
                trace,
                span: SpanId::parse(&span).ok(),
            });
        }
    }
    let lower = line.to_ascii_lowercase();
    let trace = TraceId::parse(&field(line, &lower, &TRACE_KEYS, 32)?).ok()?;
    let span = field(line, &lower, &SPAN_KEYS, 16).and_then(|s| SpanId::parse(&s).ok());
    Some(LineContext { trace, span })
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::Trace => "TRACE",
        Level::Debug => "DEBUG",
        Level::Info => "INFO",
        Level::Warn => "WARN",
        Level::Error => "ERROR",
        Level::Fatal => "FATAL",
    }
}

/// The lines of windows that name their trace, gathered into carriers.
#[derive(Default)]
pub struct LogRecords {
    /// Events by (service, trace, span named).
    events: BTreeMap<(String, TraceId, Option<SpanId>), Vec<Event>>,
    /// Lines that named a trace.
    pub lines: usize,
    /// Of those, lines with no time of their own, left out.
    pub untimed: usize,
}

impl LogRecords {
    /// Gathers the new lines of `window` that name a trace.
    pub fn read_window(&mut self, window: &Window) {
        for (f, (name, bytes)) in window.files.iter().enumerate() {
            let first = window.first_lines.get(f).copied().unwrap_or(1);
            let text = String::from_utf8_lossy(bytes);
            for (i, line) in text.lines().enumerate() {
                let number = first + i as u32;
                if window.context(f as u32, number) {
                    continue;
                }
                self.read_line(name, number, line);
            }
        }
    }

    /// Gathers line `number` of file `name`, if it names a trace.
    pub fn read_line(&mut self, name: &str, number: u32, line: &str) {
        // Docker's json-file driver escapes the program's line in its own JSON.
        let unwrapped = structured::docker_json_file(line);
        let (line, wrapper_time) = match &unwrapped {
            Some((line, time)) => (line.as_str(), *time),
            None => (line, None),
        };
        let Some(context) = find(line) else { return };
        self.lines += 1;
        let (time, level, message) = match structured::parse(line) {
            Some(s) => (s.time_ns.or(wrapper_time), s.level, s.message),
            None => {
                let h = header::parse(line);
                (h.time_ns.or(wrapper_time), h.level, h.message.to_string())
            }
        };
        let Some(time) = time.and_then(|t| u64::try_from(t).ok()) else {
            self.untimed += 1;
            return;
        };
        let attributes = vec![
            KeyValue::new(LOG_FILE, name),
            KeyValue::new(LOG_LINE, i64::from(number)),
        ];
        let event = log_event(time, message, level.map(level_name), attributes);
        self.events
            .entry((
                crate::traces::service(name).to_string(),
                context.trace,
                context.span,
            ))
            .or_default()
            .push(event);
    }

    /// The carriers of the lines gathered since the last call.
    pub fn take_carriers(&mut self) -> Vec<Span> {
        std::mem::take(&mut self.events)
            .into_iter()
            .map(|((service, trace, span), mut events)| {
                events.sort_by_key(|e| e.time);
                let id = span.unwrap_or_else(|| unplaced_carrier_id(trace.get(), &service, "", 0));
                let (start, end) = (events[0].time, events[events.len() - 1].time);
                let mut carrier = Span::new(trace, id, None, LOG_RECORDS, &service, start, end);
                carrier.source = Source::Logs;
                if span.is_none() {
                    carrier.attributes.push(KeyValue::new(UNPLACED, true));
                }
                carrier.events = events;
                carrier
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const SPAN: &str = "00f067aa0ba902b7";

    #[test]
    fn the_formats_loggers_write_name_the_trace_and_span() {
        let both = |line: &str| {
            let c = find(line).unwrap_or_else(|| panic!("nothing found in {line}"));
            (c.trace.to_string(), c.span.map(|s| s.to_string()))
        };
        let want = (TRACE.to_string(), Some(SPAN.to_string()));
        for line in [
            format!("2026-11-29T10:00:00Z INFO order placed trace_id={TRACE} span_id={SPAN}"),
            format!(
                "10:00:00.123 [main] WARN  c.s.Orders [traceId={}, spanId={}] slow",
                TRACE.to_uppercase(),
                SPAN
            ),
            format!(
                r#"{{"ts":"2026-11-29T10:00:00Z","msg":"placed","trace.id":"{TRACE}","span.id":"{SPAN}"}}"#
            ),
            format!("GET /cart traceparent: 00-{TRACE}-{SPAN}-01 from 10.0.0.1"),
            format!("trace-id: {TRACE} span-id: {SPAN}"),
            format!("trace_id {TRACE} span_id {SPAN}"),
        ] {
            assert_eq!(both(&line), want, "{line}");
        }
        let trace_only = find(&format!("otel.trace_id={TRACE} done")).unwrap();
        assert_eq!(
            (trace_only.trace.to_string(), trace_only.span),
            (TRACE.to_string(), None)
        );
        // Not ids: the wrong length, zeros, a longer word, a parent's span id alone.
        for line in [
            format!("trace_id={}", &TRACE[..30]),
            "trace_id=00000000000000000000000000000000".to_string(),
            format!("mytrace_id={TRACE}"),
            format!("trace_id={TRACE}ff"),
            "nothing here".to_string(),
        ] {
            assert_eq!(find(&line), None, "{line}");
        }
        let parent = find(&format!("trace_id={TRACE} parent_span_id={SPAN}")).unwrap();
        assert_eq!(parent.span, None);
    }

    #[test]
    fn lines_with_ids_become_carriers_of_their_file_s_service() {
        let mut r = LogRecords::default();
        r.read_line(
            "logs/orders.log",
            7,
            &format!("2026-11-29T10:00:00.5Z WARN quorum slow trace_id={TRACE} span_id={SPAN}"),
        );
        r.read_line(
            "logs/orders.log",
            8,
            &format!("2026-11-29T10:00:00.1Z INFO basket read trace_id={TRACE} span_id={SPAN}"),
        );
        r.read_line(
            "logs/orders.log",
            9,
            &format!("2026-11-29T10:00:00.2Z INFO trace_id={TRACE} only the trace"),
        );
        r.read_line("logs/orders.log", 10, &format!("no time trace_id={TRACE}"));
        r.read_line("logs/orders.log", 11, "2026-11-29T10:00:00.3Z INFO no ids");
        assert_eq!((r.lines, r.untimed), (4, 1));
        let carriers = r.take_carriers();
        assert_eq!(carriers.len(), 2);
        let named = carriers
            .iter()
            .find(|c| c.span_id.to_string() == SPAN)
            .unwrap();
        assert!(named.is_log_carrier());
        assert_eq!(&*named.service, "orders");
        let lines: Vec<&str> = named.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(lines.len(), 2);
        assert!(
            lines[0].contains("basket read") && lines[1].contains("quorum slow"),
            "{lines:?}"
        );
        assert_eq!(
            named.events[1].attributes[0],
            KeyValue::new("level", "WARN")
        );
        assert!(named.events[0]
            .attributes
            .contains(&KeyValue::new(LOG_LINE, 8i64)));
        let unplaced = carriers
            .iter()
            .find(|c| c.span_id.to_string() != SPAN)
            .unwrap();
        assert!(unplaced.attributes.contains(&KeyValue::new(UNPLACED, true)));
        assert!(r.take_carriers().is_empty());
    }

    proptest::proptest! {
        #[test]
        fn ids_between_any_words_are_found_and_no_text_panics(
            before in "[a-z ,.;\\[\\]]{0,24}",
            after in "[a-z ,.;]{0,24}",
            trace in "[0-9a-f]{31}[1-9a-f]",
            span in "[0-9a-f]{15}[1-9a-f]",
            noise in ".{0,80}",
        ) {
            let line = format!("{before} trace_id={trace} span_id={span} {after}");
            let found = find(&line).unwrap();
            proptest::prop_assert_eq!(found.trace.to_string(), trace);
            proptest::prop_assert_eq!(found.span.map(|s| s.to_string()), Some(span));
            let _ = find(&noise);
            let _ = find(&format!("{noise}trace_id={noise}00-{noise}"));
        }
    }
}
