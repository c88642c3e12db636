//! Reading Jaeger's JSON: the envelope, a bare trace or a list of traces; each trace's
//! processes, then its spans, a span that cannot be read rejected alone with its path.

use super::*;

fn malformed(e: serde_json::Error) -> JaegerError {
    JaegerError {
        path: format!("line {} column {}", e.line(), e.column()),
        reason: format!("invalid Jaeger JSON: {}", crate::codec::json_message(&e)),
    }
}

/// Decodes Jaeger JSON: the query API's envelope, a bare trace or a list of traces.
/// Malformed JSON is an error with line and column; a span that cannot be read is
/// rejected alone, naming the field by its path.
pub fn decode_json(body: &[u8]) -> Result<Decoded, JaegerError> {
    let first = body.iter().find(|b| !b.is_ascii_whitespace());
    if first == Some(&b'[') {
        let traces: Vec<JaegerTrace> = serde_json::from_slice(body).map_err(malformed)?;
        let mut out = Decoded::default();
        for (i, t) in traces.iter().enumerate() {
            decode_trace(t, &format!("[{i}]"), &mut out);
        }
        return Ok(out);
    }
    let top: TopObject = serde_json::from_slice(body).map_err(malformed)?;
    let mut out = Decoded::default();
    match top.data {
        Some(data) => {
            let traces = data.unwrap_or_default();
            if traces.is_empty() {
                if let Some(errors) = jaeger_errors(top.errors.as_ref()) {
                    return Err(JaegerError {
                        path: "errors".into(),
                        reason: format!("the document holds Jaeger's errors, not traces: {errors}"),
                    });
                }
            }
            for (i, t) in traces.iter().enumerate() {
                decode_trace(t, &format!("data[{i}]"), &mut out);
            }
        }
        None if top.spans.is_some() || top.trace_id.is_some() => {
            let trace = JaegerTrace {
                trace_id: top.trace_id,
                spans: top.spans.unwrap_or_default(),
                processes: top.processes,
                warnings: None,
            };
            decode_trace(&trace, "", &mut out);
        }
        None => {
            return Err(JaegerError {
                path: "body".into(),
                reason: "not Jaeger JSON: expected {\"data\": [traces]}, a trace \
                         {\"traceID\", \"spans\", \"processes\"} or a list of traces"
                    .into(),
            })
        }
    }
    Ok(out)
}

/// The messages of a non-empty `errors` list, joined.
fn jaeger_errors(errors: Option<&serde_json::Value>) -> Option<String> {
    let list = errors?.as_array().filter(|l| !l.is_empty())?;
    Some(
        list.iter()
            .map(|e| match e.get("msg").and_then(|m| m.as_str()) {
                Some(m) => m.to_string(),
                None => e.to_string(),
            })
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// A process, read.
struct ProcessInfo {
    service: Arc<str>,
    host: Arc<str>,
    pid: u32,
    extra: Vec<KeyValue>,
}

fn decode_process(p: &Process, at: &str) -> Result<ProcessInfo, JaegerError> {
    let mut info = ProcessInfo {
        service: Arc::from(p.service_name.as_str()),
        host: Arc::from(""),
        pid: 0,
        extra: Vec::new(),
    };
    let (mut hostname, mut host_name) = (None, None);
    for (i, t) in p.tags.iter().enumerate() {
        let v = tag_value(t).map_err(|(field, reason)| JaegerError {
            path: join(at, &format!("tags[{i}].{field}")),
            reason,
        })?;
        match (t.key.as_str(), &v) {
            (TAG_HOSTNAME, Value::Str(h)) if hostname.is_none() => hostname = Some(h.clone()),
            (TAG_HOST_NAME, Value::Str(h)) if host_name.is_none() => host_name = Some(h.clone()),
            (TAG_PID | TAG_PID_SHORT, Value::I64(pid)) if info.pid == 0 && *pid > 0 => {
                match u32::try_from(*pid) {
                    Ok(pid) => info.pid = pid,
                    Err(_) => info.extra.push(KeyValue::new(t.key.as_str(), v)),
                }
            }
            _ => info.extra.push(KeyValue::new(t.key.as_str(), v)),
        }
    }
    // `hostname` is what Jaeger's clients write; `host.name` what OpenTelemetry's do.
    // Whichever is not the host stays an attribute.
    match (hostname, host_name) {
        (Some(h), other) => {
            info.host = Arc::from(h.as_str());
            if let Some(o) = other {
                info.extra.push(KeyValue::new(TAG_HOST_NAME, o));
            }
        }
        (None, Some(h)) => info.host = Arc::from(h.as_str()),
        (None, None) => {}
    }
    Ok(info)
}

fn decode_trace(t: &JaegerTrace, at: &str, out: &mut Decoded) {
    let processes: HashMap<&str, Result<ProcessInfo, JaegerError>> = t
        .processes
        .iter()
        .map(|(k, p)| {
            let path = join(at, &format!("processes.{k}"));
            (k.as_str(), decode_process(p, &path))
        })
        .collect();
    for (i, s) in t.spans.iter().enumerate() {
        let span_at = join(at, &format!("spans[{i}]"));
        match decode_span(s, t, at, &span_at, &processes) {
            Ok(span) => out.spans.push(span),
            Err(e) => out.rejected.push(e),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RefKind {
    ChildOf,
    FollowsFrom,
}

fn decode_span(
    s: &JaegerSpan,
    t: &JaegerTrace,
    trace_at: &str,
    at: &str,
    processes: &HashMap<&str, Result<ProcessInfo, JaegerError>>,
) -> Result<Span, JaegerError> {
    let err = |field: &str, reason: String| JaegerError {
        path: join(at, field),
        reason,
    };
    let (trace_text, trace_path) = match s.trace_id.as_deref().filter(|t| !t.is_empty()) {
        Some(id) => (id, join(at, "traceID")),
        None => match t.trace_id.as_deref().filter(|t| !t.is_empty()) {
            Some(id) => (id, join(trace_at, "traceID")),
            None => ("", join(at, "traceID")),
        },
    };
    let trace_id = parse_trace_id(trace_text).map_err(|e| JaegerError {
        path: trace_path,
        reason: e.to_string(),
    })?;
    let span_id = parse_span_id(&s.span_id).map_err(|e| err("spanID", e.to_string()))?;

    let mut refs = Vec::with_capacity(s.references.len());
    for (k, r) in s.references.iter().enumerate() {
        let kind = if r.ref_type.eq_ignore_ascii_case(CHILD_OF_REF) {
            RefKind::ChildOf
        } else if r.ref_type.eq_ignore_ascii_case(FOLLOWS_FROM_REF) {
            RefKind::FollowsFrom
        } else {
            return Err(err(
                &format!("references[{k}].refType"),
                format!(
                    "unknown reference type {:?}: expected CHILD_OF or FOLLOWS_FROM",
                    cut(&r.ref_type)
                ),
            ));
        };
        let ref_trace = match r.trace_id.as_deref().filter(|t| !t.is_empty()) {
            Some(id) => parse_trace_id(id)
                .map_err(|e| err(&format!("references[{k}].traceID"), e.to_string()))?,
            None => trace_id,
        };
        let ref_span = parse_span_id(&r.span_id)
            .map_err(|e| err(&format!("references[{k}].spanID"), e.to_string()))?;
        refs.push((kind, ref_trace, ref_span));
    }
    let in_trace = |kind: RefKind| {
        refs.iter()
            .position(|&(k, t, s)| k == kind && t == trace_id && s != span_id)
    };
    let parent_ref = in_trace(RefKind::ChildOf).or_else(|| in_trace(RefKind::FollowsFrom));
    let mut parent_id = parent_ref.map(|i| refs[i].2);
    if parent_id.is_none() {
        if let Some(p) = s.parent_span_id.as_deref().filter(|p| !p.is_empty()) {
            parent_id = match parse_span_id(p) {
                Ok(p) => Some(p).filter(|p| *p != span_id),
                // Old documents write a root's parent as zeros.
                Err(IdError::Zero { .. }) => None,
                Err(e) => return Err(err("parentSpanID", e.to_string())),
            };
        }
    }

    let start = s.start_time.saturating_mul(1000);
    let end = start.saturating_add(s.duration.saturating_mul(1000));
    let mut span = Span::new(
        trace_id,
        span_id,
        parent_id,
        s.operation_name.clone(),
        "",
        start,
        end,
    );
    span.source = Source::Imported;

    // The trace's process the span names, else the one embedded in it.
    let own;
    let info: Option<&ProcessInfo> = match (
        s.process_id.as_deref().filter(|p| !p.is_empty()),
        &s.process,
    ) {
        (Some(key), embedded) => match (processes.get(key), embedded) {
            (Some(Ok(info)), _) => Some(info),
            (Some(Err(e)), _) => return Err(e.clone()),
            (None, Some(p)) => {
                own = decode_process(p, &join(at, "process"))?;
                Some(&own)
            }
            (None, None) => {
                return Err(err(
                    "processID",
                    format!("process {:?} is not among the trace's processes", cut(key)),
                ))
            }
        },
        (None, Some(p)) => {
            own = decode_process(p, &join(at, "process"))?;
            Some(&own)
        }
        (None, None) => None,
    };
    match info {
        Some(info) => {
            span.service = info.service.clone();
            span.host = info.host.clone();
            span.pid = info.pid;
        }
        None => span.service = Arc::from(UNKNOWN_SERVICE),
    }

    let mut error_tag = false;
    let mut status_code: Option<Status> = None;
    let mut description: Option<String> = None;
    for (i, tag) in s.tags.iter().enumerate() {
        let v =
            tag_value(tag).map_err(|(field, reason)| err(&format!("tags[{i}].{field}"), reason))?;
        match (tag.key.as_str(), &v) {
            (TAG_KIND, Value::Str(k)) if SpanKind::parse(k).is_some() => {
                span.kind = SpanKind::parse(k).unwrap_or_default()
            }
            (TAG_ERROR, Value::Bool(b)) => error_tag |= *b,
            (TAG_ERROR, Value::Str(b)) if b == "true" || b == "false" => error_tag |= b == "true",
            (TAG_STATUS_CODE, Value::Str(c)) if c.eq_ignore_ascii_case("ok") => {
                status_code = Some(Status::Ok)
            }
            (TAG_STATUS_CODE, Value::Str(c)) if c.eq_ignore_ascii_case("error") => {
                status_code = Some(Status::Error(String::new()))
            }
            (TAG_STATUS_CODE, Value::Str(c)) if c.eq_ignore_ascii_case("unset") => {}
            (TAG_STATUS_DESCRIPTION, Value::Str(d)) if description.is_none() => {
                description = Some(d.clone())
            }
            (TAG_FORMAT, _) => {}
            (ATTR_THREAD, Value::I64(t)) => span.execution_unit = *t as u64,
            (ATTR_PROBABILITY, Value::F64(p)) => span.sampling_probability = *p,
            (ATTR_CPU, Value::I64(c)) => span.cpu_time = Some(*c as u64),
            (ATTR_SOURCE, Value::Str(src)) if Source::from_text(src).is_some() => {
                span.source = Source::from_text(src).unwrap_or_default()
            }
            (TAG_TRACE_STATE, Value::Str(ts)) if span.trace_state.is_empty() => {
                span.trace_state = ts.clone()
            }
            _ => span.attributes.push(KeyValue {
                key: tag.key.clone(),
                value: v,
            }),
        }
    }
    span.status = if error_tag || matches!(status_code, Some(Status::Error(_))) {
        Status::Error(description.take().unwrap_or_default())
    } else {
        status_code.unwrap_or_default()
    };
    // A description without an error status is not the status's: keep it.
    if let Some(d) = description {
        span.attributes
            .push(KeyValue::new(TAG_STATUS_DESCRIPTION, d));
    }
    if let Some(info) = info {
        span.attributes.extend(info.extra.iter().cloned());
    }

    for (li, log) in s.logs.iter().enumerate() {
        let mut name = None;
        let mut attributes = Vec::with_capacity(log.fields.len());
        for (fi, f) in log.fields.iter().enumerate() {
            let v = tag_value(f).map_err(|(field, reason)| {
                err(&format!("logs[{li}].fields[{fi}].{field}"), reason)
            })?;
            match v {
                Value::Str(n) if f.key == LOG_EVENT && name.is_none() => name = Some(n),
                v => attributes.push(KeyValue {
                    key: f.key.clone(),
                    value: v,
                }),
            }
        }
        let time = log.timestamp.saturating_mul(1000);
        let direction = match name.as_deref() {
            Some(EVENT_SEND) => Some(Direction::Send),
            Some(EVENT_RECV) => Some(Direction::Recv),
            _ => None,
        };
        if let Some(direction) = direction {
            let Some(msg) = crate::codec::otlp::message_of(direction, time, &attributes) else {
                return Err(err(
                    &format!("logs[{li}].fields"),
                    format!("{} log without an int64 {MSG_ID}", name.unwrap_or_default()),
                ));
            };
            span.messages.push(msg);
            continue;
        }
        span.events.push(Event {
            time,
            name: name.unwrap_or_else(|| LOG_DEFAULT_NAME.to_string()),
            attributes,
        });
    }

    let child_of_parent = parent_ref.filter(|&i| refs[i].0 == RefKind::ChildOf);
    for (k, &(kind, ref_trace, ref_span)) in refs.iter().enumerate() {
        if Some(k) == child_of_parent {
            continue;
        }
        // A parent the span is a child of is not also followed from: such a link would
        // make the parent's wait for it read as no wait.
        if child_of_parent.is_some()
            && kind == RefKind::FollowsFrom
            && ref_trace == trace_id
            && Some(ref_span) == parent_id
        {
            continue;
        }
        span.links.push(Link {
            trace_id: ref_trace,
            span_id: ref_span,
            attributes: vec![KeyValue::new(
                REF_TYPE,
                match kind {
                    RefKind::ChildOf => CHILD_OF,
                    RefKind::FollowsFrom => FOLLOWS_FROM,
                },
            )],
        });
    }
    Ok(span)
}

/// A JSON value, cut for an error message.
fn shown(v: &serde_json::Value) -> String {
    let text = v.to_string();
    if text.chars().count() > 64 {
        format!("{}...", cut(&text))
    } else {
        text
    }
}

/// A tag's typed value; on error, the field at fault (`type` or `value`) and why.
pub(super) fn tag_value(t: &Tag) -> Result<Value, (&'static str, String)> {
    use serde_json::Value as J;
    let v = &t.value;
    let key = cut(&t.key);
    let wrong = |ty: &str, what: &str| ("value", format!("{ty} tag {key:?}: {} {what}", shown(v)));
    let Some(ty) = t.value_type.as_deref().filter(|t| !t.is_empty()) else {
        // Untyped: the JSON value's own type.
        return Ok(match v {
            J::String(s) => Value::Str(s.clone()),
            J::Bool(b) => Value::Bool(*b),
            J::Number(n) => match n.as_i64() {
                Some(i) => Value::I64(i),
                None => Value::F64(n.as_f64().unwrap_or(f64::NAN)),
            },
            J::Array(_) | J::Object(_) => Value::Str(v.to_string()),
            J::Null => return Err(wrong("untyped", "is not a value")),
        });
    };
    match ty.to_ascii_lowercase().as_str() {
        "string" => match v {
            J::String(s) => Ok(Value::Str(s.clone())),
            _ => Err(wrong("string", "is not a string")),
        },
        "bool" => match v {
            J::Bool(b) => Ok(Value::Bool(*b)),
            J::String(s) if s == "true" || s == "false" => Ok(Value::Bool(s == "true")),
            _ => Err(wrong("bool", "is not true or false")),
        },
        "int64" => match v {
            J::Number(n) => n
                .as_i64()
                .map(Value::I64)
                .ok_or_else(|| wrong("int64", "is not a 64-bit integer")),
            J::String(s) => s
                .trim()
                .parse::<i64>()
                .map(Value::I64)
                .map_err(|_| wrong("int64", "is not a decimal 64-bit integer")),
            _ => Err(wrong("int64", "is not an integer")),
        },
        "float64" => match v {
            J::Number(n) => n
                .as_f64()
                .map(Value::F64)
                .ok_or_else(|| wrong("float64", "is not a number")),
            J::String(s) => s
                .trim()
                .parse::<f64>()
                .map(Value::F64)
                .map_err(|_| wrong("float64", "is not a number")),
            _ => Err(wrong("float64", "is not a number")),
        },
        "binary" => match v {
            J::String(s) => base64::engine::general_purpose::STANDARD
                .decode(s)
                .map(Value::Bytes)
                .map_err(|e| wrong("binary", &format!("is not base64 ({e})"))),
            _ => Err(wrong("binary", "is not a base64 string")),
        },
        _ => Err((
            "type",
            format!(
                "tag {key:?}: unknown type {:?} (string, bool, int64, float64 or binary)",
                cut(ty)
            ),
        )),
    }
}
