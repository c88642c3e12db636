//! OTLP logs (`ExportLogsServiceRequest`, protobuf and JSON) as log records of spans: the
//! records of one process that name one span (or one trace and no span) become one carrier
//! ([`crate::logs`]), placed on their span when the trace is read.
//!
//! An event's name is the record's body (text as it is, other values as their text; the
//! event name when there is no body), with the record's severity as `level` (its text, else
//! the name of its number's range), its attributes and its `event.name`. Its time is the
//! record's time, else its observed time. A record that names no trace is rejected:
//! Causeway keeps the log records of traces only.

use std::collections::BTreeMap;

use super::proto::{ExportLogsServiceRequest, LogRecord};
use super::{any_to_value, attrs_from, id_err, read_json, read_protobuf, resource_info, OtlpError};
use crate::ids::{SpanId, TraceId};
use crate::logs::{log_event, unplaced_carrier_id, LOG_RECORDS, UNPLACED};
use crate::span::{Event, KeyValue, Source, Span, Value};

/// The carriers decoded from one request, the records they hold, and the records rejected.
#[derive(Debug, Default)]
pub struct DecodedLogs {
    /// One carrier per process and span (or trace, for records naming no span).
    pub carriers: Vec<Span>,
    /// Records kept, across the carriers.
    pub records: usize,
    /// Records that were not, each with where and why.
    pub rejected: Vec<OtlpError>,
}

/// Decodes an OTLP/HTTP protobuf logs body. A body that is not a valid message is an
/// error; otherwise invalid records are listed in `rejected` and the rest are kept.
pub fn decode_logs_protobuf(body: &[u8]) -> Result<DecodedLogs, OtlpError> {
    let req: ExportLogsServiceRequest = read_protobuf(body, "OTLP logs protobuf")?;
    Ok(decode_logs_request(&req))
}

/// Decodes an OTLP/JSON logs body, with serde's line and column on a malformed one.
pub fn decode_logs_json(body: &[u8]) -> Result<DecodedLogs, OtlpError> {
    let req: ExportLogsServiceRequest = read_json(body, "OTLP/JSON logs")?;
    Ok(decode_logs_request(&req))
}

/// Decodes every record of a request; invalid records are rejected one by one.
pub fn decode_logs_request(req: &ExportLogsServiceRequest) -> DecodedLogs {
    let mut out = DecodedLogs::default();
    for (ri, rl) in req.resource_logs.iter().enumerate() {
        let info = resource_info(rl.resource.as_ref());
        // This process's records by (trace, span named or none).
        let mut by_span: BTreeMap<(TraceId, Option<SpanId>), Vec<Event>> = BTreeMap::new();
        for (si, sl) in rl.scope_logs.iter().enumerate() {
            for (li, record) in sl.log_records.iter().enumerate() {
                match decode_record(record) {
                    Ok((trace, span, event)) => {
                        by_span.entry((trace, span)).or_default().push(event);
                        out.records += 1;
                    }
                    Err((field, reason)) => out.rejected.push(OtlpError {
                        path: format!(
                            "resourceLogs[{ri}].scopeLogs[{si}].logRecords[{li}].{field}"
                        ),
                        reason,
                    }),
                }
            }
        }
        for ((trace, span), mut events) in by_span {
            events.sort_by_key(|e| e.time);
            let id = span.unwrap_or_else(|| {
                unplaced_carrier_id(trace.get(), &info.service, &info.host, info.pid)
            });
            let (start, end) = (events[0].time, events[events.len() - 1].time);
            let mut carrier = Span::new(trace, id, None, LOG_RECORDS, "", start, end);
            carrier.service = info.service.clone();
            carrier.host = info.host.clone();
            carrier.pid = info.pid;
            carrier.source = Source::Logs;
            if span.is_none() {
                carrier.attributes.push(KeyValue::new(UNPLACED, true));
            }
            carrier.events = events;
            out.carriers.push(carrier);
        }
    }
    out
}

/// A record's trace, span (if it names one) and event; else the field at fault and why.
fn decode_record(r: &LogRecord) -> Result<(TraceId, Option<SpanId>, Event), (String, String)> {
    // OpenTelemetry writes an absent id as zeros as often as it leaves it out.
    let absent = |id: &[u8]| id.iter().all(|b| *b == 0);
    if absent(&r.trace_id) {
        return Err((
            "traceId".into(),
            "the record names no trace; Causeway keeps the log records of traces only".into(),
        ));
    }
    let trace = TraceId::from_bytes(&r.trace_id).map_err(|e| ("traceId".into(), id_err(e)))?;
    let span = if absent(&r.span_id) {
        None
    } else {
        Some(SpanId::from_bytes(&r.span_id).map_err(|e| ("spanId".into(), id_err(e)))?)
    };
    let time = if r.time_unix_nano != 0 {
        r.time_unix_nano
    } else {
        r.observed_time_unix_nano
    };
    if time == 0 {
        return Err((
            "timeUnixNano".into(),
            "the record has neither a time nor an observed time".into(),
        ));
    }
    let body = match r.body.as_ref().and_then(any_to_value) {
        Some(Value::Str(text)) => text,
        Some(other) => other.to_string(),
        None => r.event_name.clone(),
    };
    let level = if r.severity_text.is_empty() {
        severity_name(r.severity_number)
    } else {
        Some(r.severity_text.as_str())
    };
    let mut attributes = attrs_from(&r.attributes);
    if !r.event_name.is_empty() {
        attributes.push(KeyValue::new("event.name", r.event_name.as_str()));
    }
    Ok((trace, span, log_event(time, body, level, attributes)))
}

/// The name of a severity number's range (OpenTelemetry's log data model), if it is in one.
fn severity_name(number: i32) -> Option<&'static str> {
    Some(match number {
        1..=4 => "TRACE",
        5..=8 => "DEBUG",
        9..=12 => "INFO",
        13..=16 => "WARN",
        17..=20 => "ERROR",
        21..=24 => "FATAL",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::super::proto::{Any, AnyValue, Resource, ResourceLogs, ScopeLogs};
    use super::*;
    use proptest::prelude::*;
    use prost::Message as _;

    const JSON: &str = r#"{"resourceLogs":[{"resource":{"attributes":[
        {"key":"service.name","value":{"stringValue":"checkout"}},
        {"key":"process.pid","value":{"intValue":"42"}}]},
      "scopeLogs":[{"logRecords":[
        {"timeUnixNano":"1700000000000000200","severityNumber":"SEVERITY_NUMBER_WARN",
         "body":{"stringValue":"stock low"},"traceId":"5B8EFFF798038103D269B633813FC60C",
         "spanId":"EEE19B7EC3C1B174","attributes":[{"key":"sku","value":{"intValue":"7"}}]},
        {"timeUnixNano":"1700000000000000100","severityText":"Info",
         "body":{"stringValue":"basket read"},"traceId":"5b8efff798038103d269b633813fc60c",
         "spanId":"eee19b7ec3c1b174"},
        {"observedTimeUnixNano":"1700000000000000300","severityNumber":17,
         "body":{"intValue":"5"},"traceId":"5b8efff798038103d269b633813fc60c",
         "spanId":"0000000000000000"},
        {"timeUnixNano":"1700000000000000400","body":{"stringValue":"no trace"},
         "traceId":"00000000000000000000000000000000","spanId":"0000000000000000"},
        {"timeUnixNano":"1700000000000000500","traceId":"5b8e","spanId":"eee19b7ec3c1b174"}
      ]}]}]}"#;

    #[test]
    fn records_become_carriers_of_their_spans_and_the_rest_are_rejected_by_path() {
        let d = decode_logs_json(JSON.as_bytes()).unwrap();
        assert_eq!(d.records, 3);
        let paths: Vec<&str> = d.rejected.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "resourceLogs[0].scopeLogs[0].logRecords[3].traceId",
                "resourceLogs[0].scopeLogs[0].logRecords[4].traceId"
            ]
        );
        assert!(
            d.rejected[0].reason.contains("names no trace"),
            "{:?}",
            d.rejected
        );
        assert_eq!(d.carriers.len(), 2);
        let named = d
            .carriers
            .iter()
            .find(|c| c.span_id.to_string() == "eee19b7ec3c1b174")
            .unwrap();
        assert!(named.is_log_carrier());
        assert_eq!((&*named.service, named.pid), ("checkout", 42));
        let lines: Vec<(&str, u64)> = named
            .events
            .iter()
            .map(|e| (e.name.as_str(), e.time))
            .collect();
        assert_eq!(
            lines,
            [
                ("basket read", 1_700_000_000_000_000_100),
                ("stock low", 1_700_000_000_000_000_200)
            ]
        );
        assert_eq!(
            named.events[0].attributes[0],
            KeyValue::new("level", "Info")
        );
        assert_eq!(
            named.events[1].attributes[0],
            KeyValue::new("level", "WARN")
        );
        assert!(named.events[1]
            .attributes
            .contains(&KeyValue::new("sku", 7i64)));
        let unplaced = d
            .carriers
            .iter()
            .find(|c| c.span_id != named.span_id)
            .unwrap();
        assert!(unplaced.attributes.contains(&KeyValue::new(UNPLACED, true)));
        assert_eq!(unplaced.events[0].name, "5");
        assert_eq!(unplaced.events[0].time, 1_700_000_000_000_000_300);
        assert_eq!(
            unplaced.events[0].attributes[0],
            KeyValue::new("level", "ERROR")
        );
    }

    #[test]
    fn a_body_that_is_not_a_message_is_an_error_naming_where() {
        let e = decode_logs_json(b"{\"resourceLogs\": [ {").unwrap_err();
        assert!(e.path.starts_with("line 1 column"), "{e}");
        let e = decode_logs_protobuf(&[0x0a, 0xff]).unwrap_err();
        assert_eq!(e.path, "body");
    }

    fn record() -> impl Strategy<Value = LogRecord> {
        (
            prop::option::of(any::<[u8; 16]>()),
            prop::option::of(any::<[u8; 8]>()),
            any::<u64>(),
            any::<i32>(),
            ".{0,12}",
        )
            .prop_map(|(trace, span, time, severity, body)| LogRecord {
                trace_id: trace.map(Vec::from).unwrap_or_default(),
                span_id: span.map(Vec::from).unwrap_or_default(),
                time_unix_nano: time,
                severity_number: severity,
                body: Some(AnyValue {
                    value: Some(Any::String(body)),
                }),
                ..LogRecord::default()
            })
    }

    proptest! {
        #[test]
        fn every_record_is_kept_once_or_rejected(records in prop::collection::vec(record(), 0..40)) {
            let req = ExportLogsServiceRequest {
                resource_logs: vec![ResourceLogs {
                    resource: Some(Resource::default()),
                    scope_logs: vec![ScopeLogs { log_records: records.clone(), ..ScopeLogs::default() }],
                    ..ResourceLogs::default()
                }],
            };
            let d = decode_logs_protobuf(&req.encode_to_vec()).unwrap();
            prop_assert_eq!(d.records + d.rejected.len(), records.len());
            let kept: usize = d.carriers.iter().map(|c| c.events.len()).sum();
            prop_assert_eq!(kept, d.records);
            for c in &d.carriers {
                prop_assert!(c.is_log_carrier());
                prop_assert!(c.events.windows(2).all(|w| w[0].time <= w[1].time));
                prop_assert!(c.start <= c.end);
            }
            // Through JSON too, the same records are kept.
            let again = decode_logs_json(&serde_json::to_vec(&req).unwrap()).unwrap();
            prop_assert_eq!(again.records, d.records);
        }
    }
}
