//! Query-parameter parsing shared by the API's endpoints: a trace id, `limit`, the time
//! window (`start`, `end`, `lookback`), the search parameters (Jaeger's names), and the
//! error that names a parameter.

use crate::now_ns;
use causeway_model::TraceId;
use causeway_store::{parse_duration, parse_time, SearchQuery, TimeWindow};

use crate::ApiError;

/// A trace id from a path or a parameter.
pub(crate) fn parse_trace_id(text: &str) -> Result<TraceId, ApiError> {
    TraceId::parse(text).map_err(|e| ApiError::BadRequest(format!("{e}")))
}

/// The first non-empty value of a query parameter.
pub(crate) fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, v)| k == name && !v.is_empty())
        .map(|(_, v)| v.as_str())
}

/// The `limit` parameter: a count, `default` when not given.
pub(crate) fn limit_param(params: &[(String, String)], default: usize) -> Result<usize, ApiError> {
    param(params, "limit")
        .map_or(Ok(default), str::parse)
        .map_err(|_| bad("limit", "is not a count".into()))
}

/// A count parameter: `default` when not given, at most `most`.
pub(crate) fn count_param(
    params: &[(String, String)],
    name: &str,
    default: usize,
    most: usize,
) -> Result<usize, ApiError> {
    let n: usize = param(params, name)
        .map_or(Ok(default), str::parse)
        .map_err(|_| bad(name, "is not a count".into()))?;
    if n > most {
        return Err(bad(name, format!("{n} is over the most, {most}")));
    }
    Ok(n)
}

/// A kind of source (`instrumented`, `imported`, `inferred`, `logs`) in parameter `name`.
pub(crate) fn source_kind(name: &str, v: &str) -> Result<String, ApiError> {
    if !causeway_model::Source::KINDS.contains(&v) {
        return Err(bad(
            name,
            format!(
                "{v:?} is not a source: {}",
                causeway_model::Source::KINDS.join(", ")
            ),
        ));
    }
    Ok(v.to_string())
}

/// `adjust`: `skew` to correct clock skew, `none` (or not given) to keep recorded times.
pub(crate) fn adjust_param(params: &[(String, String)]) -> Result<bool, ApiError> {
    match params.iter().find(|(k, _)| k == "adjust") {
        None => Ok(false),
        Some((_, v)) if v == "skew" => Ok(true),
        Some((_, v)) if v == "none" || v.is_empty() => Ok(false),
        Some((k, v)) => Err(bad(k, format!("{v:?} is not skew or none"))),
    }
}

/// The time window of `start` and `end` (Unix ns or RFC 3339), or `lookback` (a duration
/// such as `1h`) before `end` (default now); everything when none is given.
pub(crate) fn window_param(params: &[(String, String)]) -> Result<TimeWindow, ApiError> {
    let get = |name: &str| param(params, name);
    let time = |name: &str| {
        get(name)
            .map(|v| parse_time(v).map_err(|e| bad(name, e)))
            .transpose()
    };
    // One reading of the clock: a lookback window is exactly as long as asked.
    let now = now_ns();
    let end = time("end")?;
    let start = match (time("start")?, get("lookback")) {
        (Some(start), _) => start,
        (None, Some(lookback)) => {
            let span = parse_duration(lookback).map_err(|e| bad("lookback", e))?;
            end.unwrap_or(now).saturating_sub(span)
        }
        (None, None) => 0,
    };
    let end = end.unwrap_or(if get("lookback").is_some() {
        now
    } else {
        u64::MAX
    });
    if start > end {
        return Err(ApiError::BadRequest(format!(
            "start {start} is after end {end}"
        )));
    }
    Ok(TimeWindow { start, end })
}

/// A query string as name-value pairs, in order.
pub(crate) fn pairs(query: Option<String>) -> Result<Vec<(String, String)>, ApiError> {
    serde_urlencoded::from_str(query.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::BadRequest(format!("invalid query string: {e}")))
}

/// A bad request naming the parameter at fault.
pub(crate) fn bad(param: &str, e: String) -> ApiError {
    ApiError::BadRequest(format!("parameter {param}: {e}"))
}

/// Reads the search parameters (Jaeger's names; `tags` repeatable as `key=value`, or a
/// JSON object as Jaeger's UI sends).
pub(crate) fn search_query(params: &[(String, String)]) -> Result<SearchQuery, ApiError> {
    let mut q = SearchQuery::default();
    for (k, v) in params {
        if v.is_empty() {
            continue;
        }
        match k.as_str() {
            "service" => q.service = Some(v.clone()),
            "operation" => q.operation = Some(v.clone()),
            "host" => q.host = Some(v.clone()),
            "tags" | "tag" => {
                if v.trim_start().starts_with('{') {
                    let map: std::collections::BTreeMap<String, serde_json::Value> =
                        serde_json::from_str(v).map_err(|e| bad(k, e.to_string()))?;
                    for (key, val) in map {
                        let text = match val {
                            serde_json::Value::String(s) => s,
                            other => other.to_string(),
                        };
                        q.tags.push((key, text));
                    }
                } else {
                    for tag in v.split_whitespace() {
                        let (key, val) = tag
                            .split_once('=')
                            .ok_or_else(|| bad(k, format!("{tag:?} is not key=value")))?;
                        q.tags.push((key.to_string(), val.to_string()));
                    }
                }
            }
            "minDuration" => q.min_duration = Some(parse_duration(v).map_err(|e| bad(k, e))?),
            "traceMinDuration" => {
                q.trace_min_duration = Some(parse_duration(v).map_err(|e| bad(k, e))?)
            }
            "traceMaxDuration" => {
                q.trace_max_duration = Some(parse_duration(v).map_err(|e| bad(k, e))?)
            }
            "maxDuration" => q.max_duration = Some(parse_duration(v).map_err(|e| bad(k, e))?),
            "error" => {
                q.error = v
                    .parse()
                    .map_err(|_| bad(k, format!("{v:?} is not true or false")))?
            }
            "source" => q.source = Some(source_kind(k, v)?),
            "limit" => {
                q.limit = v
                    .parse()
                    .map_err(|_| bad(k, format!("{v:?} is not a count")))?
            }
            _ => {}
        }
    }
    // `start`, `end` and `lookback`, read as every windowed request reads them.
    if ["start", "end", "lookback"]
        .iter()
        .any(|name| param(params, name).is_some())
    {
        q.window = Some(window_param(params)?);
    }
    Ok(q)
}
