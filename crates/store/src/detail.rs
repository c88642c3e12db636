//! The `detail` column: what a span holds beyond the block's other columns, so the columns
//! plus the detail give back the span exactly without storing anything twice.
//!
//! ```text
//! detail := 0x00 residual   -- ids, names, service, host, pid, times, status, string
//!                              attributes and events come from their columns; the
//!                              residual is a native payload with those cleared,
//!                              non-string attributes keyed by their position (`3`), event
//!                              attributes the `events` column has no value for keyed by
//!                              the event's and their position (`0.3`), message times
//!                              relative to the span's start
//!         | 0x01 payload    -- the whole span (times that do not fit the columns)
//! ```
//!
//! Blocks written before the `events` column kept events in the residual, their times
//! relative to the span's start; they read as before.

use std::sync::Arc;

use causeway_model::codec::native;
use causeway_model::{KeyValue, Span, SpanId, Status, TraceId, Value};

use crate::events::EventColumns;

const RESIDUAL: u8 = 0;
const WHOLE: u8 = 1;

/// True when the columns can carry the span's times exactly.
pub(crate) fn columns_fit(s: &Span) -> bool {
    s.start <= i64::MAX as u64 && s.end >= s.start && s.end - s.start <= i64::MAX as u64
}

/// Appends the detail of `s` to `out`.
pub(crate) fn encode(s: &Span, scratch: &mut Vec<u8>, out: &mut Vec<u8>) {
    scratch.clear();
    if !columns_fit(s) {
        out.push(WHOLE);
        native::encode(s, scratch);
        out.extend_from_slice(&scratch[native::HEADER_LEN..]);
        return;
    }
    let one_trace = TraceId::new(1).expect("1 is not zero");
    let one_span = SpanId::new(1).expect("1 is not zero");
    let mut r = Span::new(one_trace, one_span, None, "", "", 0, 0);
    r.kind = s.kind;
    r.execution_unit = s.execution_unit;
    r.attributes = s
        .attributes
        .iter()
        .enumerate()
        .filter(|(_, kv)| !matches!(kv.value, Value::Str(_)))
        .map(|(i, kv)| KeyValue {
            key: i.to_string(),
            value: kv.value.clone(),
        })
        .collect();
    for (n, e) in s.events.iter().enumerate() {
        for (j, kv) in e.attributes.iter().enumerate() {
            if !crate::events::in_column(&kv.value) {
                r.attributes.push(KeyValue {
                    key: format!("{n}.{j}"),
                    value: kv.value.clone(),
                });
            }
        }
    }
    r.links = s.links.clone();
    r.messages = s
        .messages
        .iter()
        .map(|m| {
            let mut m = m.clone();
            m.time = m.time.wrapping_sub(s.start);
            m
        })
        .collect();
    r.cpu_time = s.cpu_time;
    r.sampling_probability = s.sampling_probability;
    r.dropped_attributes = s.dropped_attributes;
    r.dropped_events = s.dropped_events;
    r.trace_state = s.trace_state.clone();
    r.source = s.source;
    out.push(RESIDUAL);
    native::encode(&r, scratch);
    out.extend_from_slice(&scratch[native::HEADER_LEN..]);
}

/// One row's columns, as read back.
pub(crate) struct Row<'a> {
    pub trace_id: TraceId,
    pub span_id: SpanId,
    pub parent_id: Option<SpanId>,
    pub service: Arc<str>,
    pub operation: &'a str,
    pub host: Arc<str>,
    pub pid: u32,
    pub start: u64,
    pub duration: u64,
    pub status_code: &'a str,
    pub status_message: Option<&'a str>,
    /// Attribute keys and value texts, in order.
    pub attributes: Vec<(&'a str, &'a str)>,
}

/// Rebuilds a span from its row's columns, its detail and its entry of the `events`
/// column (`None` for blocks written before it). Without `keep_attributes`, the row holds
/// no attributes and the span's, its events' and its links' are left empty.
pub(crate) fn decode(
    row: Row<'_>,
    detail: &[u8],
    keep_attributes: bool,
    events: Option<(&EventColumns<'_>, usize)>,
) -> Result<Span, String> {
    let (&tag, payload) = detail.split_first().ok_or("empty detail")?;
    let r = if keep_attributes {
        native::decode_payload(payload)
    } else {
        native::decode_payload_without_attributes(payload)
    }
    .map_err(|e| e.to_string())?;
    match tag {
        WHOLE => return Ok(r),
        RESIDUAL => {}
        other => return Err(format!("unknown detail tag {other}")),
    }
    let start = row.start;
    let status = status_of(&row);
    // Event attributes' values are keyed `event.attribute`, the span's own by position.
    let (mut event_typed, span_typed): (Vec<KeyValue>, Vec<KeyValue>) = r
        .attributes
        .into_iter()
        .partition(|kv| kv.key.contains('.'));
    let mut typed = span_typed.into_iter().peekable();
    let mut attributes = Vec::with_capacity(row.attributes.len());
    for (i, (key, text)) in row.attributes.into_iter().enumerate() {
        let value = match typed.next_if(|kv| kv.key.parse::<usize>() == Ok(i)) {
            Some(kv) => kv.value,
            None => Value::Str(text.to_string()),
        };
        attributes.push(KeyValue {
            key: key.to_string(),
            value,
        });
    }
    if typed.next().is_some() {
        return Err("typed attribute without a column entry".into());
    }
    let events = match events {
        Some((columns, i)) => {
            let events = columns.events(i, start, |n, j| {
                let key = format!("{n}.{j}");
                let at = event_typed.iter().position(|kv| kv.key == key)?;
                Some(event_typed.swap_remove(at).value)
            })?;
            if !event_typed.is_empty() {
                return Err("typed event attribute without a column entry".into());
            }
            events
        }
        None => r
            .events
            .into_iter()
            .map(|mut e| {
                e.time = e.time.wrapping_add(start);
                e
            })
            .collect(),
    };
    let mut span = Span {
        trace_id: row.trace_id,
        span_id: row.span_id,
        parent_id: row.parent_id,
        name: row.operation.to_string(),
        kind: r.kind,
        service: row.service,
        host: row.host,
        pid: row.pid,
        execution_unit: r.execution_unit,
        start,
        end: start + row.duration,
        status,
        attributes,
        events,
        links: r.links,
        messages: r.messages,
        cpu_time: r.cpu_time,
        sampling_probability: r.sampling_probability,
        dropped_attributes: r.dropped_attributes,
        dropped_events: r.dropped_events,
        trace_state: r.trace_state,
        source: r.source,
    };
    for m in &mut span.messages {
        m.time = m.time.wrapping_add(start);
    }
    Ok(span)
}

fn status_of(row: &Row<'_>) -> Status {
    match row.status_code {
        "OK" => Status::Ok,
        "ERROR" => Status::Error(row.status_message.unwrap_or("").to_string()),
        _ => Status::Unset,
    }
}

/// A span from its row's columns alone (every attribute a string, no detail): what a
/// structure-only read gives.
pub(crate) fn from_columns(row: Row<'_>) -> Span {
    let mut s = Span::new(
        row.trace_id,
        row.span_id,
        row.parent_id,
        row.operation,
        "",
        row.start,
        row.start.saturating_add(row.duration),
    );
    s.status = status_of(&row);
    s.service = row.service;
    s.host = row.host;
    s.pid = row.pid;
    s.attributes = row
        .attributes
        .into_iter()
        .map(|(k, v)| KeyValue::new(k, v))
        .collect();
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::to_batch;
    use arrow::array::{Array, AsArray};
    use causeway_model::{Direction, Event, Link, Message, Source};

    fn full_span(start: u64, end: u64) -> Span {
        let mut s = Span::new(
            TraceId::new(0xabc).unwrap(),
            SpanId::new(7).unwrap(),
            SpanId::new(3),
            "op",
            "svc",
            start,
            end,
        );
        s.host = "h".into();
        s.pid = 42;
        s.execution_unit = 9;
        s.status = Status::Error(String::new());
        s.attributes = vec![
            KeyValue::new("a", "1"),
            KeyValue::new("a", 1i64),
            KeyValue::new("f", 2.5),
            KeyValue::new("s", "text"),
            KeyValue::new("arr", Value::Array(vec![Value::Bool(true)])),
        ];
        s.events = vec![
            Event {
                time: start.wrapping_add(5),
                name: "e".into(),
                attributes: vec![KeyValue::new("x", 1i64)],
            },
            Event {
                time: start.wrapping_add(3),
                name: "earlier, and typed every way".into(),
                attributes: vec![
                    KeyValue::new("f", 0.5),
                    KeyValue::new("s", "text"),
                    KeyValue::new("b", true),
                    KeyValue::new("i", -4i64),
                    KeyValue::new("arr", Value::Array(vec![Value::I64(1)])),
                ],
            },
            Event {
                time: start.wrapping_add(9),
                name: String::new(),
                attributes: vec![],
            },
        ];
        s.links = vec![Link {
            trace_id: TraceId::new(9).unwrap(),
            span_id: SpanId::new(9).unwrap(),
            attributes: vec![],
        }];
        s.messages = vec![Message {
            direction: Direction::Send,
            id: 77,
            time: start.wrapping_add(1),
            peer: Some("p".into()),
            size: Some(10),
        }];
        s.cpu_time = Some(123);
        s.sampling_probability = 0.25;
        s.dropped_attributes = 2;
        s.dropped_events = 1;
        s.trace_state = "cw=p:0.25".into();
        s.source = Source::Inferred { confidence: 0.5 };
        s
    }

    /// Through the columns and back, as a block read does.
    fn round_trip(s: &Span) -> Span {
        let batch = to_batch(&[s]).unwrap();
        let text = |n: &str| {
            batch
                .column_by_name(n)
                .unwrap()
                .as_string::<i32>()
                .value(0)
                .to_string()
        };
        let map = batch.column_by_name("attributes").unwrap().as_map();
        let keys = map.keys().as_string::<i32>();
        let values = map.values().as_string::<i32>();
        let attrs: Vec<(&str, &str)> = (0..keys.len())
            .map(|j| (keys.value(j), values.value(j)))
            .collect();
        let msg = batch
            .column_by_name("status_message")
            .unwrap()
            .as_string::<i32>();
        let detail = batch
            .column_by_name("detail")
            .unwrap()
            .as_binary::<i32>()
            .value(0)
            .to_vec();
        let (status, op) = (text("status_code"), text("operation"));
        let row = Row {
            trace_id: s.trace_id,
            span_id: s.span_id,
            parent_id: s.parent_id,
            service: Arc::from(text("service").as_str()),
            operation: &op,
            host: Arc::from(text("host").as_str()),
            pid: s.pid,
            start: s.start.min(i64::MAX as u64),
            duration: s.duration().min(i64::MAX as u64),
            status_code: &status,
            status_message: (!msg.is_null(0)).then(|| msg.value(0)),
            attributes: attrs,
        };
        let events = EventColumns::of(&batch).unwrap();
        decode(row, &detail, true, events.as_ref().map(|e| (e, 0))).unwrap()
    }

    #[test]
    fn every_field_survives_the_columns_and_the_residual() {
        let s = full_span(1_700_000_000_000_000_000, 1_700_000_000_000_100_000);
        assert_eq!(round_trip(&s), s);
    }

    #[test]
    fn a_block_from_before_the_events_column_reads_its_events_from_the_detail() {
        let s = full_span(1_700_000_000_000_000_000, 1_700_000_000_000_100_000);
        let mut without_events = s.clone();
        without_events.events.clear();
        let batch = to_batch(&[&without_events]).unwrap();
        let detail = batch.column_by_name("detail").unwrap().as_binary::<i32>();
        // The residual as such blocks wrote it: events inside, times from the start.
        let (&tag, payload) = detail.value(0).split_first().unwrap();
        assert_eq!(tag, RESIDUAL);
        let mut residual = native::decode_payload(payload).unwrap();
        residual.events = s
            .events
            .iter()
            .map(|e| Event {
                time: e.time - s.start,
                ..e.clone()
            })
            .collect();
        let mut old = vec![RESIDUAL];
        let mut scratch = Vec::new();
        native::encode(&residual, &mut scratch);
        old.extend_from_slice(&scratch[native::HEADER_LEN..]);
        let map = batch.column_by_name("attributes").unwrap().as_map();
        let (keys, values) = (
            map.keys().as_string::<i32>(),
            map.values().as_string::<i32>(),
        );
        let row = Row {
            trace_id: s.trace_id,
            span_id: s.span_id,
            parent_id: s.parent_id,
            service: "svc".into(),
            operation: "op",
            host: "h".into(),
            pid: s.pid,
            start: s.start,
            duration: s.duration(),
            status_code: "ERROR",
            status_message: None,
            attributes: (0..keys.len())
                .map(|j| (keys.value(j), values.value(j)))
                .collect(),
        };
        assert_eq!(decode(row, &old, true, None).unwrap(), s);
    }

    #[test]
    fn times_the_columns_cannot_hold_are_kept_whole() {
        let s = full_span(u64::MAX - 10, u64::MAX);
        assert_eq!(round_trip(&s), s);
        let backwards = full_span(1_000, 500);
        assert_eq!(round_trip(&backwards), backwards);
    }
}
