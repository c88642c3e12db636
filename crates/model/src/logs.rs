//! Log records that belong to spans: a request's log lines shown on the span that wrote
//! them, as Jaeger shows a span's logs.
//!
//! A log record names its trace, and often its span; it may arrive before that span, after
//! it, or without it (the span sampled out or lost). Stores append and never rewrite, so
//! records travel as *carriers*: spans named [`LOG_RECORDS`] with source `logs`, whose
//! events are the records. A carrier has the id of the span its records name; one whose
//! records name no span has an id of its own and [`UNPLACED`] set. [`Trace::assemble`]
//! moves each carrier's records onto their span when it reads a trace: onto the named span,
//! else onto the innermost span of the same service and process whose interval holds the
//! record's time. Records that find no span stay on their carrier, which then shows as a
//! span of its own, so no line is lost.
//!
//! Every such event has [`EVENT_SOURCE`] `logs` and, when the record had one, its `level`.
//!
//! [`Trace::assemble`]: crate::Trace::assemble

use std::sync::Arc;

use crate::span::{Event, KeyValue, Source, Span, Value};
use crate::SpanId;

/// The name of a span that carries log records for another span.
pub const LOG_RECORDS: &str = "causeway.log_records";
/// On a carrier: `true` when its records named no span, so each goes to the span whose
/// interval holds it.
pub const UNPLACED: &str = "causeway.logs.unplaced";
/// On an event: where it came from, when not from the span's own instrumentation.
pub const EVENT_SOURCE: &str = "causeway.source";
/// On an event from a log record: the record's severity (`INFO`, `WARN`, ...).
pub const LEVEL: &str = "level";

impl Span {
    /// Whether this span only carries log records (see [the module](crate::logs)).
    pub fn is_log_carrier(&self) -> bool {
        self.source == Source::Logs && self.name == LOG_RECORDS
    }
}

/// Whether an event came from a log record rather than the span's instrumentation.
pub fn is_log_event(e: &Event) -> bool {
    e.attributes
        .iter()
        .any(|a| a.key == EVENT_SOURCE && a.value == Value::Str("logs".into()))
}

/// The id of the carrier of records that name trace `trace` but no span, written by one
/// process: stable, so that batches of one process share it.
pub fn unplaced_carrier_id(trace: u128, service: &str, host: &str, pid: u32) -> SpanId {
    // FNV-1a: stable across processes and releases, unlike the standard hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(&trace.to_le_bytes());
    eat(service.as_bytes());
    eat(&[0]);
    eat(host.as_bytes());
    eat(&pid.to_le_bytes());
    eat(LOG_RECORDS.as_bytes());
    SpanId::new(h).unwrap_or(SpanId::new(1).expect("one is not zero"))
}

/// Moves the records of the carriers among `spans` onto the spans they belong to, and
/// drops the carriers they emptied. Spans that gained events keep them in time order.
pub(crate) fn place_log_records(spans: &mut Vec<Span>) {
    if !spans.iter().any(Span::is_log_carrier) {
        return;
    }
    let (carriers, mut rest): (Vec<Span>, Vec<Span>) =
        spans.drain(..).partition(Span::is_log_carrier);
    let by_id: foldhash::HashMap<SpanId, usize> = rest
        .iter()
        .enumerate()
        .map(|(i, s)| (s.span_id, i))
        .collect();
    let mut gained = vec![false; rest.len()];
    let mut kept: Vec<Span> = Vec::new();
    for mut carrier in carriers {
        let unplaced = carrier
            .attributes
            .iter()
            .any(|a| a.key == UNPLACED && a.value == Value::Bool(true));
        if !unplaced {
            if let Some(&i) = by_id.get(&carrier.span_id) {
                rest[i].events.append(&mut carrier.events);
                gained[i] = true;
                continue;
            }
        } else {
            let writer = (carrier.service.clone(), carrier.host.clone(), carrier.pid);
            carrier
                .events
                .retain(|e| match holder(&rest, &writer, e.time) {
                    Some(i) => {
                        rest[i].events.push(e.clone());
                        gained[i] = true;
                        false
                    }
                    None => true,
                });
        }
        if carrier.events.is_empty() {
            continue;
        }
        // Records with no span to go to: one carrier per id, all its records.
        match kept.iter_mut().find(|k| k.span_id == carrier.span_id) {
            Some(k) => {
                k.start = k.start.min(carrier.start);
                k.end = k.end.max(carrier.end);
                k.events.append(&mut carrier.events);
                k.events.sort_by_key(|e| e.time);
            }
            None => kept.push(carrier),
        }
    }
    for (s, g) in rest.iter_mut().zip(gained) {
        if g {
            s.events.sort_by_key(|e| e.time);
        }
    }
    rest.extend(kept);
    *spans = rest;
}

/// The innermost span (latest start) of the writer's service and process (service, host,
/// pid; an empty host or zero pid matches any) whose interval holds `time`.
fn holder(spans: &[Span], writer: &(Arc<str>, Arc<str>, u32), time: u64) -> Option<usize> {
    let (service, host, pid) = writer;
    spans
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            s.service == *service
                && (*pid == 0 || s.pid == 0 || s.pid == *pid)
                && (host.is_empty() || s.host.is_empty() || s.host == *host)
                && s.start <= time
                && time <= s.end
        })
        .max_by_key(|(_, s)| (s.start, std::cmp::Reverse(s.end)))
        .map(|(i, _)| i)
}

/// An event for a log record: its body as the name, its severity as [`LEVEL`], its
/// attributes, and [`EVENT_SOURCE`] `logs`.
pub fn log_event(time: u64, body: String, level: Option<&str>, attributes: Vec<KeyValue>) -> Event {
    let mut all = Vec::with_capacity(attributes.len() + 2);
    if let Some(level) = level.filter(|l| !l.is_empty()) {
        all.push(KeyValue::new(LEVEL, level));
    }
    all.extend(attributes);
    all.push(KeyValue::new(EVENT_SOURCE, "logs"));
    Event {
        time,
        name: body,
        attributes: all,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Trace, TraceId};

    fn span(id: u64, parent: Option<u64>, service: &str, start: u64, end: u64) -> Span {
        Span::new(
            TraceId::new(9).unwrap(),
            SpanId::new(id).unwrap(),
            parent.and_then(SpanId::new),
            format!("op{id}"),
            service,
            start,
            end,
        )
    }

    fn carrier(id: SpanId, service: &str, unplaced: bool, times: &[u64]) -> Span {
        let mut c = Span::new(
            TraceId::new(9).unwrap(),
            id,
            None,
            LOG_RECORDS,
            service,
            times[0],
            times[times.len() - 1],
        );
        c.source = Source::Logs;
        if unplaced {
            c.attributes.push(KeyValue::new(UNPLACED, true));
        }
        c.events = times
            .iter()
            .map(|&t| log_event(t, format!("line at {t}"), Some("INFO"), vec![]))
            .collect();
        c
    }

    #[test]
    fn records_naming_a_span_join_it_whichever_arrived_first() {
        let named = carrier(SpanId::new(2).unwrap(), "api", false, &[15, 12]);
        for order in [
            vec![
                span(1, None, "web", 0, 100),
                span(2, Some(1), "api", 10, 50),
                named.clone(),
            ],
            vec![
                named.clone(),
                span(2, Some(1), "api", 10, 50),
                span(1, None, "web", 0, 100),
            ],
        ] {
            let t = Trace::assemble(TraceId::new(9).unwrap(), order);
            assert_eq!(t.spans.len(), 2);
            let s = t.span(SpanId::new(2).unwrap()).unwrap();
            let times: Vec<u64> = s.events.iter().map(|e| e.time).collect();
            assert_eq!(times, [12, 15]);
            assert!(s.events.iter().all(is_log_event));
            assert_eq!(s.events[0].attributes[0], KeyValue::new(LEVEL, "INFO"));
        }
    }

    #[test]
    fn unplaced_records_go_to_the_innermost_span_of_their_service_holding_them() {
        let id = unplaced_carrier_id(9, "api", "", 0);
        let spans = vec![
            span(1, None, "web", 0, 100),
            span(2, Some(1), "api", 10, 80),
            span(3, Some(2), "api", 20, 30),
            carrier(id, "api", true, &[5, 15, 25, 90]),
        ];
        let t = Trace::assemble(TraceId::new(9).unwrap(), spans);
        let times = |id: u64| -> Vec<u64> {
            let s = t.span(SpanId::new(id).unwrap()).unwrap();
            s.events.iter().map(|e| e.time).collect()
        };
        assert_eq!(times(1), Vec::<u64>::new(), "another service's span");
        assert_eq!(times(2), [15]);
        assert_eq!(times(3), [25]);
        // The records no span of the service held stay on their carrier, a span of its own.
        let left = t.span(id).unwrap();
        assert!(left.is_log_carrier());
        assert_eq!(
            left.events.iter().map(|e| e.time).collect::<Vec<_>>(),
            [5, 90]
        );
        assert_eq!(t.spans.len(), 4);
    }

    #[test]
    fn records_of_a_missing_span_stay_one_carrier_and_plain_traces_are_untouched() {
        let id = SpanId::new(7).unwrap();
        let spans = vec![
            span(1, None, "web", 0, 100),
            carrier(id, "api", false, &[40]),
            carrier(id, "api", false, &[30]),
        ];
        let t = Trace::assemble(TraceId::new(9).unwrap(), spans);
        assert_eq!(t.spans.len(), 2);
        let c = t.span(id).unwrap();
        assert_eq!(
            c.events.iter().map(|e| e.time).collect::<Vec<_>>(),
            [30, 40]
        );
        assert_eq!((c.start, c.end), (30, 40));

        let plain = vec![
            span(1, None, "web", 0, 100),
            span(2, Some(1), "api", 10, 50),
        ];
        let t = Trace::assemble(TraceId::new(9).unwrap(), plain.clone());
        assert_eq!(t.spans, plain);
    }

    #[test]
    fn carrier_ids_are_stable_and_distinct_per_process() {
        let a = unplaced_carrier_id(1, "api", "h", 7);
        assert_eq!(a, unplaced_carrier_id(1, "api", "h", 7));
        assert_ne!(a, unplaced_carrier_id(1, "api", "h", 8));
        assert_ne!(a, unplaced_carrier_id(2, "api", "h", 7));
        assert_ne!(a, unplaced_carrier_id(1, "web", "h", 7));
    }

    #[test]
    fn attached_records_change_no_path() {
        let spans = vec![
            span(1, None, "web", 0, 100),
            span(2, Some(1), "api", 10, 50),
        ];
        let mut with = spans.clone();
        with.push(carrier(SpanId::new(2).unwrap(), "api", false, &[20, 30]));
        with.push(carrier(
            unplaced_carrier_id(9, "db", "", 0),
            "db",
            true,
            &[500],
        ));
        let view =
            |spans| crate::PathView::from_trace(&Trace::assemble(TraceId::new(9).unwrap(), spans));
        let (plain, logged) = (view(spans), view(with));
        assert_eq!(
            format!("{:?}", plain.threads),
            format!("{:?}", logged.threads)
        );
        assert_eq!(plain.threads.len(), 2);
    }
}
