//! Jaeger's HTTP query API under `/jaeger/api/`, in Jaeger's JSON, so Grafana's Jaeger data
//! source (URL `http://host:7070/jaeger`) and Jaeger's own UI read Causeway unchanged:
//! services, operations, trace search, traces by id and the dependency graph.
//!
//! Every answer is Jaeger's envelope `{"data", "total", "limit", "offset", "errors"}`,
//! errors too (`data` null, `errors` `[{"code", "msg"}]`, with the HTTP status). Times are
//! Unix microseconds (milliseconds for dependencies), durations Go's (`1.2ms`, `1h30m`), as
//! Jaeger reads them. Traces are answered with clock skew corrected, as Jaeger's adjusters
//! do, unless `raw=true`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use causeway_analysis::deps::{Dependencies, PEER_KEYS};
use causeway_model::codec::jaeger::{self, Envelope, JaegerTrace};
use causeway_model::{Span, SpanKind, Trace, TraceId};
use causeway_store::{Fields, SearchQuery, TimeWindow};
use serde::Serialize;

use crate::error::RETRY_AFTER_SECS;
use crate::params::pairs;
use crate::scans::scan_fields_into;
use crate::work::blocking;
use crate::{ApiError, AppState};

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/jaeger/api/services", get(services))
        .route(
            "/jaeger/api/services/{service}/operations",
            get(service_operations),
        )
        .route("/jaeger/api/operations", get(operations))
        .route("/jaeger/api/traces", get(traces))
        .route("/jaeger/api/traces/{trace_id}", get(trace))
        .route("/jaeger/api/dependencies", get(dependencies))
}

/// Jaeger's default number of traces a search returns.
const DEFAULT_LIMIT: usize = 100;
/// Jaeger's default search window: the last two days.
const DEFAULT_LOOKBACK_US: u64 = 2 * 86_400 * 1_000_000;
/// Jaeger's default dependency window: the last day.
const DEFAULT_DEPENDENCY_LOOKBACK_MS: u64 = 86_400 * 1_000;

/// A failure, answered in Jaeger's envelope with its HTTP status.
pub(crate) struct Failure(ApiError);

impl From<ApiError> for Failure {
    fn from(e: ApiError) -> Self {
        Failure(e)
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        let e = self.0;
        if let ApiError::Internal(m) = &e {
            tracing::error!(error = %m, "request failed");
        }
        let status = e.status();
        let body = Envelope {
            data: (),
            total: 0,
            limit: 0,
            offset: 0,
            errors: Some(vec![
                serde_json::json!({ "code": status.as_u16(), "msg": e.to_string() }),
            ]),
        };
        let mut resp = (status, Json(body)).into_response();
        match e {
            ApiError::TooManyRequests(_) | ApiError::Unavailable(_) => {
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
            }
            ApiError::Unauthorized => {
                resp.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            _ => {}
        }
        resp
    }
}

type Answer<T> = Result<Json<Envelope<T>>, Failure>;

fn counted<T>(list: Vec<T>) -> Json<Envelope<Vec<T>>> {
    let mut e = Envelope::of(list);
    e.total = e.data.len();
    Json(e)
}

fn bad(message: String) -> Failure {
    Failure(ApiError::BadRequest(message))
}

fn unparsable(param: &str, e: impl std::fmt::Display) -> Failure {
    bad(format!("unable to parse param '{param}': {e}"))
}

/// The first non-empty value of a query parameter.
fn first<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    crate::params::param(params, name)
}

fn integer(params: &[(String, String)], name: &str) -> Result<Option<u64>, Failure> {
    first(params, name)
        .map(|v| {
            v.trim()
                .parse::<u64>()
                .map_err(|_| unparsable(name, format!("{v:?} is not a non-negative integer")))
        })
        .transpose()
}

fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Reads a duration as Go's `time.ParseDuration` does (`300ms`, `1.5h`, `1h30m`, `2us`,
/// `0`), in nanoseconds. Negative durations are refused: no span lasts less than nothing.
pub(crate) fn parse_go_duration(text: &str) -> Result<u64, String> {
    let invalid = || format!("time: invalid duration {text:?}");
    let mut s = text.strip_prefix('+').unwrap_or(text);
    if s.starts_with('-') {
        return Err(format!("duration {text:?} is negative"));
    }
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !s.is_empty() {
        let int_len = s.bytes().take_while(u8::is_ascii_digit).count();
        let (int, rest) = s.split_at(int_len);
        let (frac, rest) = match rest.strip_prefix('.') {
            Some(r) => {
                let n = r.bytes().take_while(u8::is_ascii_digit).count();
                r.split_at(n)
            }
            None => ("", rest),
        };
        if int.is_empty() && frac.is_empty() {
            return Err(invalid());
        }
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| *c == '.' || c.is_ascii_digit())
            .map_or(rest.len(), |(i, _)| i);
        let (unit, rest) = rest.split_at(unit_len);
        let scale: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            "" => return Err(format!("time: missing unit in duration {text:?}")),
            other => return Err(format!("time: unknown unit {other:?} in duration {text:?}")),
        };
        let too_long = || format!("duration {text:?} is out of range");
        // At most 39 digits fit a u128; more are out of range for any unit.
        if int.len() > 30 {
            return Err(too_long());
        }
        let whole: u128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| invalid())?
        };
        let mut part = whole.checked_mul(scale).ok_or_else(too_long)?;
        // The fraction's digits beyond a nanosecond's are cut, as Go cuts them.
        let mut unit_of_digit = scale;
        for d in frac.bytes() {
            unit_of_digit /= 10;
            if unit_of_digit == 0 {
                break;
            }
            part = part
                .checked_add(u128::from(d - b'0') * unit_of_digit)
                .ok_or_else(too_long)?;
        }
        total = total.checked_add(part).ok_or_else(too_long)?;
        s = rest;
    }
    u64::try_from(total).map_err(|_| format!("duration {text:?} is out of range"))
}

fn duration(params: &[(String, String)], name: &str) -> Result<Option<u64>, Failure> {
    first(params, name)
        .map(|v| parse_go_duration(v.trim()).map_err(|e| unparsable(name, e)))
        .transpose()
}

fn parse_trace_id(text: &str) -> Result<TraceId, Failure> {
    jaeger::parse_trace_id(text.trim()).map_err(|e| bad(format!("cannot parse traceID param: {e}")))
}

/// Whether `raw=true` asks for the stored times, not the skew-corrected ones.
fn raw(params: &[(String, String)]) -> Result<bool, Failure> {
    match first(params, "raw") {
        None => Ok(false),
        Some(v) => match v.to_ascii_lowercase().as_str() {
            "true" | "1" | "t" => Ok(true),
            "false" | "0" | "f" => Ok(false),
            _ => Err(unparsable("raw", format!("{v:?} is not true or false"))),
        },
    }
}

/// The spans of a trace as Jaeger answers them: skew-corrected unless `raw`.
fn spans_of(t: Trace, raw: bool) -> Vec<Span> {
    if raw {
        t.spans
    } else {
        causeway_analysis::skew::correct_owned(t).trace.spans
    }
}

async fn services(State(state): State<Arc<AppState>>) -> Answer<Vec<String>> {
    let store = state.store.clone();
    let list = blocking(move || Ok(store.services()?)).await?;
    Ok(counted(list))
}

async fn service_operations(
    State(state): State<Arc<AppState>>,
    Path(service): Path<String>,
) -> Answer<Vec<String>> {
    let store = state.store.clone();
    let list = blocking(move || Ok(store.operations(&service)?)).await?;
    Ok(counted(list))
}

/// An operation with the kind of span it names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
struct Operation {
    name: String,
    span_kind: String,
}

/// Operations of a service with their span kinds. The store's catalog has the names but
/// not the kinds, so the kinds are read from a scan of every stored trace (structure
/// only), under the same slots and time limit as the other scans.
async fn operations(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Answer<Vec<Operation>> {
    let params = pairs(query)?;
    let service = first(&params, "service")
        .ok_or_else(|| bad("parameter 'service' is required".into()))?
        .to_string();
    let kind = match first(&params, "spanKind") {
        None => None,
        Some(k) => Some(SpanKind::parse(k).ok_or_else(|| {
            unparsable(
                "spanKind",
                format!("{k:?} is not server, client, producer, consumer or internal"),
            )
        })?),
    };
    let store = state.store.clone();
    let list = state
        .scans
        .run(move |deadline| {
            let (seen, _) = scan_fields_into(
                &*store,
                deadline,
                TimeWindow::ALL,
                &Fields::Structure {
                    attributes: Vec::new(),
                },
                BTreeSet::<(String, &'static str)>::new,
                |set, t| {
                    for s in &t.spans {
                        if *s.service == *service && kind.is_none_or(|k| k == s.kind) {
                            set.insert((s.name.clone(), s.kind.as_str()));
                        }
                    }
                },
                |a, b| a.extend(b),
            )?;
            let mut list: Vec<Operation> = seen
                .iter()
                .map(|(name, k)| Operation {
                    name: name.clone(),
                    span_kind: k.to_string(),
                })
                .collect();
            if kind.is_none() {
                // Names the catalog has that no stored span shows a kind for.
                let named: BTreeSet<&str> = seen.iter().map(|(n, _)| n.as_str()).collect();
                for name in store.operations(&service)? {
                    if !named.contains(name.as_str()) {
                        list.push(Operation {
                            name,
                            span_kind: String::new(),
                        });
                    }
                }
            }
            list.sort();
            Ok(list)
        })
        .await?;
    Ok(counted(list))
}

/// Reads Jaeger's trace search parameters; `limit` is cut to `most`.
fn search_query(params: &[(String, String)], most: usize) -> Result<SearchQuery, Failure> {
    let service =
        first(params, "service").ok_or_else(|| bad("parameter 'service' is required".into()))?;
    let mut q = SearchQuery {
        service: Some(service.to_string()),
        operation: first(params, "operation").map(str::to_string),
        limit: DEFAULT_LIMIT.min(most),
        ..SearchQuery::default()
    };
    if let Some(limit) = integer(params, "limit")? {
        if limit > 0 {
            // At most the server's most (Jaeger's UI asks at most 1 500).
            q.limit = usize::try_from(limit).unwrap_or(usize::MAX).min(most);
        }
    }
    let end = integer(params, "end")?.unwrap_or_else(now_us);
    let start = integer(params, "start")?.unwrap_or(end.saturating_sub(DEFAULT_LOOKBACK_US));
    if start > end {
        return Err(bad(format!("'start' ({start}) is after 'end' ({end})")));
    }
    // Both ends are whole microseconds, the end included.
    q.window = Some(TimeWindow {
        start: start.saturating_mul(1000),
        end: end.saturating_add(1).saturating_mul(1000),
    });
    q.min_duration = duration(params, "minDuration")?;
    q.max_duration = duration(params, "maxDuration")?;
    if let (Some(min), Some(max)) = (q.min_duration, q.max_duration) {
        if max < min {
            return Err(bad(
                "'maxDuration' should be greater than 'minDuration'".into()
            ));
        }
    }
    for (k, v) in params {
        if v.is_empty() {
            continue;
        }
        match k.as_str() {
            "tag" => {
                let (key, value) = v.split_once(':').ok_or_else(|| {
                    bad(format!(
                        "malformed 'tag' parameter, expecting key:value, received: {v}"
                    ))
                })?;
                q.tags.push((key.to_string(), value.to_string()));
            }
            "tags" => {
                let map: BTreeMap<String, serde_json::Value> =
                    serde_json::from_str(v).map_err(|e| {
                        bad(format!(
                            "malformed 'tags' parameter, cannot unmarshal JSON: {e}"
                        ))
                    })?;
                for (key, value) in map {
                    let text = match value {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    };
                    q.tags.push((key, text));
                }
            }
            _ => {}
        }
    }
    Ok(q)
}

/// One trace that `traceID` named and is not stored.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Missing {
    msg: &'static str,
    #[serde(rename = "traceID")]
    trace_id: String,
}

/// Trace search: traces with a span that meets every condition, most recent first, each
/// whole. With `traceID` (repeatable), those traces instead, the rest of the query aside,
/// and the ones not stored listed in `errors`.
async fn traces(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Answer<Vec<JaegerTrace>> {
    let params = pairs(query)?;
    let raw = raw(&params)?;
    let ids: Vec<TraceId> = params
        .iter()
        .filter(|(k, v)| k == "traceID" && !v.is_empty())
        .map(|(_, v)| parse_trace_id(v))
        .collect::<Result<_, _>>()?;
    let store = state.store.clone();
    if !ids.is_empty() {
        let (found, missing) = blocking(move || {
            let (mut found, mut missing) = (Vec::new(), Vec::new());
            for id in ids {
                match causeway_store::linked::joined_trace(&*store, id)? {
                    Some(t) => found.extend(spans_of(t, raw)),
                    None => missing.push(Missing {
                        msg: "trace not found",
                        trace_id: id.to_string(),
                    }),
                }
            }
            Ok((jaeger::encode_traces(&found), missing))
        })
        .await?;
        let mut answer = Envelope::of(found);
        if !missing.is_empty() {
            answer.errors = Some(
                missing
                    .iter()
                    .filter_map(|m| serde_json::to_value(m).ok())
                    .collect(),
            );
        }
        return Ok(Json(answer));
    }
    let limits = &state.config.limits;
    let q = search_query(&params, limits.max_search_limit)?;
    let max_spans = limits.max_answer_spans;
    let (found, left_out) = state
        .scans
        .run(move |deadline| {
            let mut spans = Vec::new();
            let mut left_out = 0usize;
            for summary in store.search_until(&q, &|| deadline.check())? {
                if deadline.check().is_break() {
                    break;
                }
                // The answer holds whole traces, up to the most spans it may.
                if spans.len() + summary.span_count > max_spans {
                    left_out += 1;
                    continue;
                }
                // A trace dropped by retention between the two reads is left out.
                if let Some(t) = causeway_store::linked::joined_trace(&*store, summary.trace_id)? {
                    spans.extend(spans_of(t, raw));
                }
            }
            Ok((jaeger::encode_traces(&spans), left_out))
        })
        .await?;
    let mut answer = Envelope::of(found);
    if left_out > 0 {
        answer.errors = Some(vec![serde_json::json!({
            "code": 413,
            "msg": format!(
                "{left_out} matching traces left out: an answer holds at most {max_spans} \
                 spans (--max-answer-spans); narrow the search or lower its limit"
            ),
        })]);
    }
    Ok(Json(answer))
}

async fn trace(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Answer<Vec<JaegerTrace>> {
    let params = pairs(query)?;
    let raw = raw(&params)?;
    let id = parse_trace_id(&id)?;
    let store = state.store.clone();
    let found = blocking(
        move || match causeway_store::linked::joined_trace(&*store, id)? {
            Some(t) => Ok(jaeger::encode_traces(&spans_of(t, raw))),
            None => Err(ApiError::NotFound("trace not found".into())),
        },
    )
    .await?;
    Ok(Json(Envelope::of(found)))
}

/// One edge of Jaeger's dependency graph.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
struct DependencyLink {
    parent: String,
    child: String,
    call_count: u64,
}

/// Who called whom how often over the window ending at `endTs` and `lookback` long (both
/// milliseconds), from the same graph as `/api/dependencies`; RPC and messaging edges
/// between two services are one link, as Jaeger has them.
async fn dependencies(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Answer<Vec<DependencyLink>> {
    let params = pairs(query)?;
    let end_ms = integer(&params, "endTs")?.unwrap_or_else(|| now_us() / 1000);
    let lookback_ms = integer(&params, "lookback")?.unwrap_or(DEFAULT_DEPENDENCY_LOOKBACK_MS);
    let service = first(&params, "service").map(str::to_string);
    let ms = 1_000_000u64;
    let window = TimeWindow {
        start: end_ms.saturating_sub(lookback_ms).saturating_mul(ms),
        end: end_ms.saturating_add(1).saturating_mul(ms),
    };
    let store = state.store.clone();
    let deps = state
        .scans
        .run(move |deadline| {
            scan_fields_into(
                &*store,
                deadline,
                window,
                &Fields::Structure {
                    attributes: PEER_KEYS.map(String::from).to_vec(),
                },
                Dependencies::default,
                |d, t| d.add(t),
                Dependencies::merge,
            )
        })
        .await?
        .0;
    let mut links: BTreeMap<(String, String), u64> = BTreeMap::new();
    for e in deps.graph().edges {
        if service
            .as_deref()
            .is_some_and(|s| s != e.caller && s != e.callee)
        {
            continue;
        }
        *links.entry((e.caller, e.callee)).or_default() += e.calls;
    }
    let list = links
        .into_iter()
        .map(|((parent, child), call_count)| DependencyLink {
            parent,
            child,
            call_count,
        })
        .collect();
    Ok(Json(Envelope::of(list)))
}

#[cfg(test)]
mod tests {
    use super::parse_go_duration;

    #[test]
    fn durations_are_read_as_go_reads_them() {
        let ms = 1_000_000;
        for (text, ns) in [
            ("0", 0),
            ("1.2ms", 1_200_000),
            ("500us", 500_000),
            ("500µs", 500_000),
            ("1s", 1_000_000_000),
            ("1h30m", 90 * 60 * 1000 * ms),
            ("+5ns", 5),
            (".5s", 500 * ms),
            ("1.s", 1000 * ms),
            ("1.0000000001s", 1_000_000_000),
            ("2m3.5s", 123_500 * ms),
        ] {
            assert_eq!(parse_go_duration(text), Ok(ns), "{text}");
        }
        for (text, error) in [
            ("", "invalid duration"),
            ("abc", "invalid duration"),
            ("1", "missing unit"),
            ("1.5", "missing unit"),
            ("5 ms", "unknown unit \" ms\""),
            ("3d", "unknown unit \"d\""),
            ("-1s", "negative"),
            (".s", "invalid duration"),
            ("99999999999h", "out of range"),
            ("9999999999999999999999999999999999h", "out of range"),
        ] {
            let e = parse_go_duration(text).unwrap_err();
            assert!(e.contains(error), "{text}: {e}");
        }
    }
}
