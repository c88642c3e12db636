//! Writing Jaeger's JSON: spans grouped into traces with a process per (service, host,
//! pid), parents and links as references, the rest as tags and logs.

use super::*;

/// Encodes spans as Jaeger's query API answers them: `{"data": [trace, ...], "total": 0,
/// "limit": 0, "offset": 0, "errors": null}`.
pub fn encode_json(spans: &[Span]) -> Vec<u8> {
    // Serializing plain structs to a Vec cannot fail.
    serde_json::to_vec(&Envelope::of(encode_traces(spans))).unwrap_or_default()
}

/// An array as JSON, for the string tag that carries it.
pub(super) fn array_json(v: &Value, depth: usize) -> serde_json::Value {
    use serde_json::Value as J;
    match v {
        Value::Str(s) => J::String(s.clone()),
        Value::Bool(b) => J::Bool(*b),
        Value::I64(i) => J::from(*i),
        Value::F64(f) if f.is_finite() => J::from(*f),
        Value::F64(f) => J::String(float_text(*f)),
        Value::Bytes(b) => J::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Value::Array(a) if depth >= MAX_ARRAY_DEPTH => {
            J::String(Value::Array(a.clone()).to_string())
        }
        Value::Array(a) => J::Array(a.iter().map(|v| array_json(v, depth + 1)).collect()),
    }
}

/// A float JSON cannot hold as a number, as text `str::parse` reads back.
fn float_text(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f > 0.0 {
        "inf".into()
    } else {
        "-inf".into()
    }
}

pub(super) fn tag(key: &str, v: &Value) -> Tag {
    use serde_json::Value as J;
    let (ty, value) = match v {
        Value::Str(s) => ("string", J::String(s.clone())),
        Value::Bool(b) => ("bool", J::Bool(*b)),
        Value::I64(i) if i.unsigned_abs() <= MAX_SAFE_INTEGER => ("int64", J::from(*i)),
        Value::I64(i) => ("int64", J::String(i.to_string())),
        Value::F64(f) if f.is_finite() => ("float64", J::from(*f)),
        Value::F64(f) => ("float64", J::String(float_text(*f))),
        Value::Bytes(b) => (
            "binary",
            J::String(base64::engine::general_purpose::STANDARD.encode(b)),
        ),
        Value::Array(_) => ("string", J::String(array_json(v, 0).to_string())),
    };
    Tag {
        key: key.to_string(),
        value_type: Some(ty.to_string()),
        value,
    }
}

/// Groups spans into Jaeger traces, in order of each trace's first span, with one process
/// per (service, host, pid) in each, keyed `p1`, `p2`, ...
pub fn encode_traces(spans: &[Span]) -> Vec<JaegerTrace> {
    let mut order: Vec<TraceId> = Vec::new();
    let mut by_trace: HashMap<TraceId, Vec<&Span>> = HashMap::new();
    for s in spans {
        by_trace
            .entry(s.trace_id)
            .or_insert_with(|| {
                order.push(s.trace_id);
                Vec::new()
            })
            .push(s);
    }
    order
        .into_iter()
        .map(|id| {
            let spans = by_trace.remove(&id).unwrap_or_default();
            encode_trace(id, &spans)
        })
        .collect()
}

fn encode_trace(id: TraceId, spans: &[&Span]) -> JaegerTrace {
    let mut keys: HashMap<(&str, &str, u32), String> = HashMap::new();
    let mut processes = BTreeMap::new();
    let mut out = Vec::with_capacity(spans.len());
    for s in spans {
        let next = keys.len() + 1;
        let key = keys
            .entry((&s.service, &s.host, s.pid))
            .or_insert_with(|| {
                let key = format!("p{next}");
                let mut tags = Vec::new();
                if !s.host.is_empty() {
                    tags.push(tag(TAG_HOSTNAME, &Value::from(&*s.host)));
                }
                if s.pid != 0 {
                    tags.push(tag(TAG_PID, &Value::I64(s.pid as i64)));
                }
                processes.insert(
                    key.clone(),
                    Process {
                        service_name: s.service.to_string(),
                        tags,
                    },
                );
                key
            })
            .clone();
        out.push(encode_span(s, key));
    }
    JaegerTrace {
        trace_id: Some(id.to_string()),
        spans: out,
        processes,
        warnings: None,
    }
}

fn reference(kind: &str, trace_id: TraceId, span_id: SpanId) -> Reference {
    Reference {
        ref_type: kind.to_string(),
        trace_id: Some(trace_id.to_string()),
        span_id: span_id.to_string(),
    }
}

fn encode_span(s: &Span, process_id: String) -> JaegerSpan {
    let mut references = Vec::with_capacity(s.links.len() + 1);
    let mut parent_link = None;
    if let Some(p) = s.parent_id {
        if s.follows_from_parent() {
            references.push(reference(FOLLOWS_FROM_REF, s.trace_id, p));
            // The link that marks the parent as followed-from is the reference itself.
            parent_link = s.links.iter().position(|l| {
                l.span_id == p
                    && l.trace_id == s.trace_id
                    && l.attributes.iter().any(|a| {
                        a.key == REF_TYPE && matches!(&a.value, Value::Str(v) if v == FOLLOWS_FROM)
                    })
            });
        } else {
            references.push(reference(CHILD_OF_REF, s.trace_id, p));
        }
    }
    for (i, l) in s.links.iter().enumerate() {
        if Some(i) == parent_link {
            continue;
        }
        let child_of = l
            .attributes
            .iter()
            .any(|a| a.key == REF_TYPE && matches!(&a.value, Value::Str(v) if v == CHILD_OF));
        let kind = if child_of {
            CHILD_OF_REF
        } else {
            FOLLOWS_FROM_REF
        };
        references.push(reference(kind, l.trace_id, l.span_id));
    }

    let mut tags: Vec<Tag> = s.attributes.iter().map(|a| tag(&a.key, &a.value)).collect();
    if s.execution_unit != 0 {
        tags.push(tag(ATTR_THREAD, &Value::I64(s.execution_unit as i64)));
    }
    if s.sampling_probability != 1.0 {
        tags.push(tag(ATTR_PROBABILITY, &Value::F64(s.sampling_probability)));
    }
    if let Some(c) = s.cpu_time {
        tags.push(tag(ATTR_CPU, &Value::I64(c as i64)));
    }
    if s.source != Source::Imported {
        tags.push(tag(ATTR_SOURCE, &Value::Str(s.source.to_text())));
    }
    if !s.trace_state.is_empty() {
        tags.push(tag(TAG_TRACE_STATE, &Value::from(s.trace_state.as_str())));
    }
    if s.kind != SpanKind::Internal {
        tags.push(tag(TAG_KIND, &Value::from(s.kind.as_str())));
    }
    match &s.status {
        Status::Unset => {}
        Status::Ok => tags.push(tag(TAG_STATUS_CODE, &Value::from("OK"))),
        Status::Error(m) => {
            tags.push(tag(TAG_STATUS_CODE, &Value::from("ERROR")));
            if !m.is_empty() {
                tags.push(tag(TAG_STATUS_DESCRIPTION, &Value::from(m.as_str())));
            }
            tags.push(tag(TAG_ERROR, &Value::Bool(true)));
        }
    }

    let mut logs: Vec<Log> = s
        .events
        .iter()
        .map(|e| {
            let mut fields = Vec::with_capacity(e.attributes.len() + 1);
            fields.push(tag(LOG_EVENT, &Value::from(e.name.as_str())));
            fields.extend(e.attributes.iter().map(|a| tag(&a.key, &a.value)));
            Log {
                timestamp: e.time / 1000,
                fields,
            }
        })
        .collect();
    for m in &s.messages {
        let name = match m.direction {
            Direction::Send => EVENT_SEND,
            Direction::Recv => EVENT_RECV,
        };
        let mut fields = vec![
            tag(LOG_EVENT, &Value::from(name)),
            tag(MSG_ID, &Value::I64(m.id as i64)),
        ];
        if let Some(p) = &m.peer {
            fields.push(tag(MSG_PEER, &Value::from(p.as_str())));
        }
        if let Some(z) = m.size {
            fields.push(tag(MSG_SIZE, &Value::I64(z as i64)));
        }
        logs.push(Log {
            timestamp: m.time / 1000,
            fields,
        });
    }

    let start_us = s.start / 1000;
    JaegerSpan {
        trace_id: Some(s.trace_id.to_string()),
        span_id: s.span_id.to_string(),
        parent_span_id: None,
        flags: Some(1), // sampled: only sampled spans are recorded
        operation_name: s.name.clone(),
        references,
        start_time: start_us,
        // Both ends cut to microseconds, so the end reads back as it was cut.
        duration: (s.end / 1000).saturating_sub(start_us),
        tags,
        logs,
        process_id: Some(process_id),
        process: None,
        warnings: None,
    }
}
