//! Ingest over HTTP: OTLP (`/v1/traces`, and `/v1/logs` whose records go to their spans
//! through carriers, see `causeway_model::logs`; protobuf or JSON, optionally gzipped), Zipkin v2
//! JSON (`/api/v2/spans`), Jaeger's JSON (`/v1/jaeger`) and native record batches
//! (`/v1/native`). Answers as the OpenTelemetry Collector does: 200 with partial success,
//! 400 naming the problem, 413, 415, and 429/503 with `Retry-After` when shedding load.
//!
//! Every ingest path, gRPC's too, ends in `take`: in one trip to the blocking pool it undoes
//! gzip, decodes and screens the body (`crate::screen`), then appends the spans to the store.
//! A native batch with no damaged record that screening did not change is written to the WAL
//! byte for byte; everything else is re-encoded as native records. Rejected spans are counted
//! where they are rejected, for `partialSuccess` and `/metrics`. OTLP answers 200 with
//! `partialSuccess` (protobuf or JSON, as asked); Zipkin answers 202 and native 200 with
//! `{accepted, rejected, errors}`. At most 10 messages are listed, then "and N more".

use std::io::Read;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use causeway_model::codec::otlp::proto::{
    ExportLogsPartialSuccess, ExportLogsServiceResponse, ExportTracePartialSuccess,
    ExportTraceServiceResponse,
};
use causeway_model::codec::{jaeger, native, otlp, zipkin};
use causeway_model::Span;

use crate::metrics::add;
use crate::receive::{receive, Budget, Held, Received, Rules};
use crate::{ApiError, AppState};

/// The content type of a native batch.
pub const NATIVE_CONTENT_TYPE: &str = "application/x-causeway-native";

/// Rejection messages kept per response; the rest are counted.
const MESSAGES_KEPT: usize = 10;

#[derive(Clone, Copy)]
pub(crate) enum Protocol {
    OtlpGrpc = 0,
    OtlpHttp = 1,
    Zipkin = 2,
    Native = 3,
    Jaeger = 4,
    OtlpLogsGrpc = 5,
    OtlpLogsHttp = 6,
}

impl Protocol {
    /// Whether the protocol's batches are log records (on carriers) rather than spans.
    fn carries_log_records(self) -> bool {
        matches!(self, Protocol::OtlpLogsGrpc | Protocol::OtlpLogsHttp)
    }
}

/// What happened to a batch that was taken.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub accepted: usize,
    pub rejected: usize,
    /// The first problems, each naming the span or field.
    pub messages: Vec<String>,
    /// Problems beyond those kept.
    pub more: usize,
}

impl Outcome {
    /// An outcome that starts with the decoder's rejections.
    pub fn rejecting<E: std::fmt::Display>(rejected: &[E]) -> Outcome {
        let mut o = Outcome {
            rejected: rejected.len(),
            ..Outcome::default()
        };
        for r in rejected {
            o.note(r.to_string());
        }
        o
    }

    /// OTLP's partial success, when anything was rejected or changed.
    pub fn partial_success(&self) -> Option<ExportTracePartialSuccess> {
        self.rejected_and_message()
            .map(|(rejected, message)| ExportTracePartialSuccess {
                rejected_spans: rejected,
                error_message: message,
            })
    }

    /// OTLP's partial success for a logs request: the records rejected, and why.
    pub fn logs_partial_success(&self) -> Option<ExportLogsPartialSuccess> {
        self.rejected_and_message()
            .map(|(rejected, message)| ExportLogsPartialSuccess {
                rejected_log_records: rejected,
                error_message: message,
            })
    }

    fn rejected_and_message(&self) -> Option<(i64, String)> {
        (self.rejected > 0 || !self.messages.is_empty())
            .then(|| (self.rejected as i64, self.message()))
    }

    pub fn note(&mut self, message: String) {
        if self.messages.len() < MESSAGES_KEPT {
            self.messages.push(message);
        } else {
            self.more += 1;
        }
    }

    /// The problems as one line.
    pub fn message(&self) -> String {
        let mut m = self.messages.join("; ");
        if self.more > 0 {
            m.push_str(&format!("; and {} more", self.more));
        }
        m
    }
}

pub(crate) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/traces", post(otlp_http))
        .route("/v1/logs", post(otlp_logs_http))
        .route("/api/v2/spans", post(zipkin_http))
        .route("/v1/jaeger", post(jaeger_http))
        .route("/v1/native", post(native_http))
        .merge(crate::logflows::ingest_routes())
        .merge(crate::captures::ingest_routes())
        .layer(axum::extract::DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::require_token,
        ))
        .fallback(crate::json_errors::not_found)
        .layer(axum::middleware::from_fn(crate::json_errors::as_json))
        .with_state(state)
}

/// What a decoder made of a body.
pub(crate) struct Batch {
    pub spans: Vec<Span>,
    /// The decoder's rejections, then screening's.
    pub outcome: Outcome,
    /// The body itself, for a native batch: written to the WAL as received unless
    /// screening changed it.
    pub records: Option<Bytes>,
}

impl Batch {
    /// Spans a decoder read, with the ones it rejected.
    pub fn decoded<E: std::fmt::Display>(spans: Vec<Span>, rejected: &[E]) -> Batch {
        Batch {
            outcome: Outcome::rejecting(rejected),
            spans,
            records: None,
        }
    }
}

/// Decodes (undoing the content encoding) and screens a received body off the async
/// workers, then appends its spans, durable before this returns. The body keeps its bytes
/// of the receive budget (and takes its decompressed bytes too) until the store answers;
/// the request's place among those in flight is taken here, once the body is whole.
pub(crate) async fn take(
    state: &Arc<AppState>,
    protocol: Protocol,
    received: Received,
    encoding: Encoding,
    decode: impl FnOnce(Bytes) -> Result<Batch, String> + Send + 'static,
) -> Result<Outcome, ApiError> {
    let _permit = crate::receive::admit(state)?;
    let limit = state.config.limits.max_body_bytes;
    let app = state.clone();
    // One trip to the blocking pool: decode, screen, append.
    let done = crate::work::blocking(move || {
        let Received { bytes, mut held } = received;
        Ok(encoding
            .undo(bytes, limit, &app.ingest_receiving, &mut held)
            .and_then(|body| {
                let mut batch = decode(body).map_err(Unusable::Malformed)?;
                let limits = &app.config.limits.spans;
                let changed = limits.screen(&mut batch.spans, &mut batch.outcome);
                // What the sender counts: spans, or the log records on the carriers.
                let n = if protocol.carries_log_records() {
                    batch.spans.iter().map(|c| c.events.len()).sum()
                } else {
                    batch.spans.len()
                };
                let appended = match batch.records {
                    _ if batch.spans.is_empty() => Ok(()),
                    // A native batch goes to the WAL as received unless screening changed it.
                    Some(r) if !changed && batch.outcome.rejected == 0 => {
                        app.store.append_records(&r, batch.spans)
                    }
                    _ => app.store.append(batch.spans),
                };
                Ok((batch.outcome, n, appended))
            }))
    })
    .await?;
    let m = &state.metrics;
    let (mut outcome, n, appended) = match done {
        Ok(done) => done,
        Err(Unusable::TooLarge) => {
            add(&m.refused_too_large, 1);
            return Err(ApiError::PayloadTooLarge(format!(
                "request body is over the {limit}-byte limit once decompressed"
            )));
        }
        Err(Unusable::Malformed(message)) => {
            add(&m.refused_malformed, 1);
            return Err(ApiError::BadRequest(message));
        }
        Err(Unusable::NotReceived(refusal)) => return Err(state.refused(refusal)),
    };
    add(&m.rejected[protocol as usize], outcome.rejected);
    if let Err(e) = appended {
        if matches!(e, causeway_store::StoreError::Busy) {
            add(&m.refused_busy, 1);
        }
        return Err(e.into());
    }
    if n == 0 {
        return Ok(outcome);
    }
    add(&m.accepted[protocol as usize], n);
    outcome.accepted = n;
    Ok(outcome)
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// Why a body was refused once read.
pub(crate) enum Unusable {
    /// Over the size limit once decompressed.
    TooLarge,
    /// Not what its content type says; the message names what and where.
    Malformed(String),
    /// Its decompressed bytes do not fit in the receive budget.
    NotReceived(crate::receive::Refusal),
}

/// A body's content encoding.
#[derive(Clone, Copy)]
pub(crate) enum Encoding {
    Identity,
    Gzip,
}

impl Encoding {
    /// The `Content-Encoding` header's; 415 for one that is not read here.
    fn of(headers: &HeaderMap) -> Result<Encoding, ApiError> {
        let encoding = headers
            .get(header::CONTENT_ENCODING)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("identity")
            .trim()
            .to_ascii_lowercase();
        match encoding.as_str() {
            "" | "identity" => Ok(Encoding::Identity),
            "gzip" => Ok(Encoding::Gzip),
            other => Err(ApiError::UnsupportedMediaType(format!(
                "unsupported content encoding {other:?}: send identity or gzip"
            ))),
        }
    }

    /// The body decompressed, at most `limit` bytes, its bytes held of `budget`.
    fn undo(
        self,
        raw: Bytes,
        limit: usize,
        budget: &Budget,
        held: &mut Held,
    ) -> Result<Bytes, Unusable> {
        match self {
            Encoding::Identity => Ok(raw),
            Encoding::Gzip => {
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(&raw[..])
                    .take(limit as u64 + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| Unusable::Malformed(format!("invalid gzip body: {e}")))?;
                if out.len() > limit {
                    return Err(Unusable::TooLarge);
                }
                budget
                    .grow(held, out.len())
                    .map_err(Unusable::NotReceived)?;
                Ok(Bytes::from(out))
            }
        }
    }
}

/// Receives an ingest body whole, under the ingest rules (size, time, budget).
async fn read_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
) -> Result<Received, ApiError> {
    let limits = &state.config.limits;
    let rules = Rules {
        limit: limits.max_body_bytes,
        timeout: limits.body_timeout,
        budget: &state.ingest_receiving,
    };
    receive(headers, body, rules)
        .await
        .map_err(|r| state.refused(r))
}

async fn otlp_http(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (outcome, json) = otlp_body(&state, &headers, body, Protocol::OtlpHttp).await?;
    let reply = ExportTraceServiceResponse {
        partial_success: outcome.partial_success(),
    };
    Ok(otlp_reply(json, reply))
}

async fn otlp_logs_http(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let (outcome, json) = otlp_body(&state, &headers, body, Protocol::OtlpLogsHttp).await?;
    let reply = ExportLogsServiceResponse {
        partial_success: outcome.logs_partial_success(),
    };
    Ok(otlp_reply(json, reply))
}

/// An OTLP/HTTP body of spans or logs (`protocol`), read, judged by content type and taken;
/// with whether it was JSON, which the answer is in too.
async fn otlp_body(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    body: Body,
    protocol: Protocol,
) -> Result<(Outcome, bool), ApiError> {
    // Read before the content type is judged, so a refused request leaves the
    // connection clean for the client's next one.
    let body = read_body(state, headers, body).await?;
    let ct = content_type(headers);
    let path = if protocol.carries_log_records() {
        "/v1/logs"
    } else {
        "/v1/traces"
    };
    let json = match ct.as_str() {
        "application/x-protobuf" | "application/protobuf" => false,
        "application/json" => true,
        other => {
            return Err(ApiError::UnsupportedMediaType(format!(
                "unsupported content type {other:?} for {path}: send application/x-protobuf or application/json"
            )))
        }
    };
    let encoding = Encoding::of(headers)?;
    let logs = protocol.carries_log_records();
    let decode = move |body| decode_otlp(body, logs, json);
    let outcome = take(state, protocol, body, encoding, decode).await?;
    Ok((outcome, json))
}

/// OTLP's answer, as JSON or protobuf as the request was.
fn otlp_reply<M: prost::Message + serde::Serialize>(json: bool, reply: M) -> Response {
    if json {
        axum::Json(reply).into_response()
    } else {
        let mut resp = Response::new(Body::from(reply.encode_to_vec()));
        resp.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/x-protobuf"),
        );
        resp
    }
}

/// An OTLP body of spans, or of log records (`logs`), protobuf or JSON (`json`), as `take`
/// runs it.
pub(crate) fn decode_otlp(body: Bytes, logs: bool, json: bool) -> Result<Batch, String> {
    let (spans, rejected) = match (logs, json) {
        (false, false) => otlp::decode_protobuf(&body).map(|d| (d.spans, d.rejected)),
        (false, true) => otlp::decode_json(&body).map(|d| (d.spans, d.rejected)),
        (true, false) => otlp::logs::decode_logs_protobuf(&body).map(|d| (d.carriers, d.rejected)),
        (true, true) => otlp::logs::decode_logs_json(&body).map(|d| (d.carriers, d.rejected)),
    }
    .map_err(|e| e.to_string())?;
    Ok(Batch::decoded(spans, &rejected))
}

fn summary(outcome: &Outcome) -> serde_json::Value {
    serde_json::json!({
        "accepted": outcome.accepted,
        "rejected": outcome.rejected,
        "errors": outcome.messages,
    })
}

/// A JSON span list by `protocol` at `path`: read, judged by content type, decoded and
/// taken as every ingest path is.
async fn json_spans(
    state: &Arc<AppState>,
    headers: &HeaderMap,
    body: Body,
    (protocol, path, format): (Protocol, &str, &str),
    decode: fn(Bytes) -> Result<Batch, String>,
) -> Result<Outcome, ApiError> {
    // Read before the content type is judged, so a refused request leaves the
    // connection clean for the client's next one.
    let body = read_body(state, headers, body).await?;
    let ct = content_type(headers);
    if !matches!(ct.as_str(), "application/json" | "") {
        return Err(ApiError::UnsupportedMediaType(format!(
            "unsupported content type {ct:?} for {path}: send application/json ({format})"
        )));
    }
    let encoding = Encoding::of(headers)?;
    take(state, protocol, body, encoding, decode).await
}

async fn zipkin_http(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let outcome = json_spans(
        &state,
        &headers,
        body,
        (Protocol::Zipkin, "/api/v2/spans", "Zipkin v2"),
        |body| {
            let d = zipkin::decode_json(&body).map_err(|e| e.to_string())?;
            Ok(Batch::decoded(d.spans, &d.rejected))
        },
    )
    .await?;
    Ok((StatusCode::ACCEPTED, axum::Json(summary(&outcome))).into_response())
}

/// Jaeger's JSON, as its query API answers and its UI downloads it. (Jaeger's collector
/// takes Thrift at `/api/traces`; this is not that.)
async fn jaeger_http(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let outcome = json_spans(
        &state,
        &headers,
        body,
        (Protocol::Jaeger, "/v1/jaeger", "Jaeger's JSON"),
        |body| {
            let d = jaeger::decode_json(&body).map_err(|e| e.to_string())?;
            Ok(Batch::decoded(d.spans, &d.rejected))
        },
    )
    .await?;
    Ok(axum::Json(summary(&outcome)).into_response())
}

async fn native_http(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    // Read before the content type is judged, so a refused request leaves the
    // connection clean for the client's next one.
    let body = read_body(&state, &headers, body).await?;
    let ct = content_type(&headers);
    if !matches!(
        ct.as_str(),
        NATIVE_CONTENT_TYPE | "application/octet-stream"
    ) {
        return Err(ApiError::UnsupportedMediaType(format!(
            "unsupported content type {ct:?} for /v1/native: send {NATIVE_CONTENT_TYPE}"
        )));
    }
    let encoding = Encoding::of(&headers)?;
    let outcome = take(&state, Protocol::Native, body, encoding, |body| {
        let decoded = native::decode_stream(&body);
        if decoded.spans.is_empty() && !decoded.problems.is_empty() {
            return Err(format!("invalid native batch: {}", decoded.problems[0]));
        }
        let problems: Vec<String> = decoded
            .problems
            .iter()
            .map(|p| format!("native batch: {p}"))
            .collect();
        Ok(Batch {
            outcome: Outcome::rejecting(&problems),
            spans: decoded.spans,
            records: Some(body),
        })
    })
    .await?;
    Ok(axum::Json(summary(&outcome)).into_response())
}
