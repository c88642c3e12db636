//! `GET /api/export`: the spans of a window in one of the formats ingest reads, streamed;
//! `GET /api/traces/{id}/export`: one trace, as the UI's download, whole.
//! The scan runs in a scan's place and within the query time limit, and hands the body
//! on in chunks as the client reads it: a few chunks are held at once, whatever the size
//! of the store. A failure before the first byte is answered with its status; one after
//! it (the time limit, the client gone) ends the body unfinished, so it cannot be taken
//! for whole.
//!
//! The scan fills 1 MiB chunks (the format's opening in the first, its closing in the last;
//! native records and protobuf requests concatenate, JSON items are joined by commas) and
//! hands each to the response through a channel of four, waiting for the client within the
//! deadline. The first chunk decides the status; a failure after it aborts the chunked
//! transfer.

use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{RawQuery, State};
use axum::http::{header, HeaderValue};
use axum::response::Response;
use causeway_model::codec::{jaeger, native, otlp, zipkin};
use causeway_model::{Span, Trace};
use causeway_store::Fields;
use futures_util::StreamExt as _;
use prost::Message;
use tokio::sync::mpsc;

use crate::params::{pairs, param, parse_trace_id, window_param};
use crate::work::blocking;
use crate::{ApiError, AppState};

/// A chunk is handed on once it holds this much.
const CHUNK_BYTES: usize = 1 << 20;
/// Chunks waiting for the client at most.
const CHUNKS_HELD: usize = 4;

/// Export formats.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Format {
    Native,
    OtlpJson,
    OtlpProtobuf,
    Zipkin,
    Jaeger,
}

impl Format {
    fn parse(name: &str) -> Result<Format, ApiError> {
        Ok(match name {
            "native" => Format::Native,
            "otlp-json" => Format::OtlpJson,
            "otlp-protobuf" | "otlp" => Format::OtlpProtobuf,
            "zipkin" => Format::Zipkin,
            "jaeger" | "jaeger-json" => Format::Jaeger,
            other => {
                return Err(ApiError::BadRequest(format!(
                    "parameter format: unknown format {:?} (native, otlp-json, otlp-protobuf, zipkin, jaeger)",
                    crate::error::clip(other)
                )))
            }
        })
    }

    fn content_type(self) -> &'static str {
        match self {
            Format::Native => crate::NATIVE_CONTENT_TYPE,
            Format::OtlpProtobuf => "application/x-protobuf",
            Format::OtlpJson | Format::Zipkin | Format::Jaeger => "application/json",
        }
    }

    /// The file name's extension of a download in this format.
    fn extension(self) -> &'static str {
        match self {
            Format::Native => "causeway",
            Format::OtlpProtobuf => "pb",
            Format::OtlpJson | Format::Zipkin | Format::Jaeger => "json",
        }
    }

    /// What the body starts with.
    fn opening(self) -> &'static [u8] {
        match self {
            Format::Native | Format::OtlpProtobuf => b"",
            Format::OtlpJson => b"{\"resourceSpans\":[",
            Format::Zipkin => b"[",
            Format::Jaeger => b"{\"data\":[",
        }
    }

    /// What the body ends with.
    fn closing(self) -> &'static [u8] {
        match self {
            Format::Native | Format::OtlpProtobuf => b"",
            Format::OtlpJson => b"]}",
            Format::Zipkin => b"]",
            Format::Jaeger => b"],\"total\":0,\"limit\":0,\"offset\":0,\"errors\":null}",
        }
    }

    /// Appends one trace's spans, as the next items of the body. Each piece of the
    /// formats is valid on its own and concatenates to the whole: native records follow
    /// each other, protobuf requests merge, JSON items are separated by commas.
    fn append(self, spans: &[Span], first: bool, out: &mut Vec<u8>) {
        let mut first = first;
        let mut separate = |out: &mut Vec<u8>| {
            if !std::mem::replace(&mut first, false) {
                out.push(b',');
            }
        };
        // Serializing plain structs to a Vec cannot fail.
        match self {
            Format::Native => out.extend_from_slice(&native::encode_all(spans)),
            Format::OtlpProtobuf => otlp::encode_request(spans).encode(out).unwrap_or(()),
            Format::OtlpJson => {
                for r in otlp::encode_request(spans).resource_spans {
                    separate(out);
                    let _ = serde_json::to_writer(&mut *out, &r);
                }
            }
            Format::Zipkin => {
                let list = zipkin::encode_json(spans);
                // `[a,b]`: the items without the brackets.
                if list.len() > 2 {
                    separate(out);
                    out.extend_from_slice(&list[1..list.len() - 1]);
                }
            }
            Format::Jaeger => {
                for t in jaeger::encode_traces(spans) {
                    separate(out);
                    let _ = serde_json::to_writer(&mut *out, &t);
                }
            }
        }
    }
}

/// What the scan hands the body: a chunk, or why it stopped.
enum Piece {
    Data(Bytes),
    Failed(ApiError),
}

/// The body being made: the chunk filling up, and whether an item was written yet.
struct Chunker {
    format: Format,
    chunk: Vec<u8>,
    items: u64,
}

impl Chunker {
    /// Adds a trace; the chunk to hand on, once full.
    fn add(&mut self, trace: &Trace) -> Option<Vec<u8>> {
        let before = self.chunk.len();
        self.format
            .append(&trace.spans, self.items == 0, &mut self.chunk);
        if self.chunk.len() > before {
            self.items += 1;
        }
        (self.chunk.len() >= CHUNK_BYTES).then(|| std::mem::take(&mut self.chunk))
    }
}

pub(crate) async fn export(
    State(state): State<Arc<AppState>>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let params = pairs(query)?;
    let format = Format::parse(param(&params, "format").unwrap_or("native"))?;
    let window = window_param(&params)?;
    let service = param(&params, "service").map(str::to_string);
    let (tx, mut rx) = mpsc::channel::<Piece>(CHUNKS_HELD);
    let store = state.store.clone();
    let runtime = tokio::runtime::Handle::current();
    let scans = state.clone();
    tokio::spawn(async move {
        let sender = tx.clone();
        let scanned = scans
            .scans
            .run(move |deadline| {
                // Hands a chunk on, waiting for the client within the time limit; Break
                // when it cannot (the client left, or is too slow).
                let hand_on = |data: Vec<u8>| -> ControlFlow<()> {
                    let wait = deadline.remaining().max(Duration::from_millis(1));
                    // Scan threads are not the runtime's: the timer is made inside it.
                    let sent = runtime.block_on(async {
                        let piece = Piece::Data(Bytes::from(data));
                        tokio::time::timeout(wait, sender.send(piece)).await
                    });
                    match sent {
                        Ok(Ok(())) => ControlFlow::Continue(()),
                        _ => ControlFlow::Break(()),
                    }
                };
                // The opening waits in the first chunk: a scan that fails before a chunk
                // is full is answered with its status.
                let chunker = Mutex::new(Chunker {
                    format,
                    chunk: format.opening().to_vec(),
                    items: 0,
                });
                let stopped = std::sync::atomic::AtomicBool::new(false);
                store.scan_fields(window, &Fields::All, &|t| {
                    let wanted = service
                        .as_deref()
                        .is_none_or(|s| t.spans.iter().any(|sp| &*sp.service == s));
                    if wanted {
                        let full = chunker.lock().unwrap_or_else(|p| p.into_inner()).add(&t);
                        if let Some(chunk) = full {
                            if hand_on(chunk).is_break() {
                                stopped.store(true, std::sync::atomic::Ordering::Relaxed);
                                return ControlFlow::Break(());
                            }
                        }
                    }
                    deadline.check()
                })?;
                if stopped.load(std::sync::atomic::Ordering::Relaxed) {
                    return Ok(());
                }
                let mut last = chunker
                    .into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .chunk;
                last.extend_from_slice(format.closing());
                // A deadline passed in the scan is answered by `run`, not by a closing.
                if !deadline.passed() {
                    let _ = hand_on(last);
                }
                Ok(())
            })
            .await;
        if let Err(e) = scanned {
            let _ = tx.send(Piece::Failed(e)).await;
        }
    });
    // The first piece decides the status: a first chunk, or why there is none.
    let first = match rx.recv().await {
        Some(Piece::Data(d)) => d,
        Some(Piece::Failed(e)) => return Err(e),
        None => {
            return Err(ApiError::Internal(
                "the export ended before it began".into(),
            ))
        }
    };
    let rest = futures_util::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await? {
            Piece::Data(d) => Some((Ok(d), rx)),
            Piece::Failed(e) => {
                tracing::warn!(error = %e, "export cut short");
                Some((Err(std::io::Error::other(e.to_string())), rx))
            }
        }
    });
    let body =
        futures_util::stream::once(async move { Ok::<_, std::io::Error>(first) }).chain(rest);
    let mut resp = Response::new(Body::from_stream(body));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    Ok(resp)
}

/// One trace as stored (raw times, the sources joined as the trace page shows them), in a
/// format ingest reads, as a file to save: `format` is `jaeger` (Jaeger UI's download,
/// the default) or any of the export's. The trace is already bounded by what the store
/// holds for one trace, so it is answered whole.
pub(crate) async fn trace_export(
    State(state): State<Arc<AppState>>,
    axum::extract::Path(id): axum::extract::Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let id = parse_trace_id(&id)?;
    let params = pairs(query)?;
    let format = Format::parse(param(&params, "format").unwrap_or("jaeger"))?;
    let store = state.store.clone();
    let body = blocking(move || {
        let Some(t) = causeway_store::linked::joined_trace(&*store, id)? else {
            return Err(ApiError::NotFound(format!("trace {id} not found")));
        };
        let mut body = format.opening().to_vec();
        format.append(&t.spans, true, &mut body);
        body.extend_from_slice(format.closing());
        Ok(body)
    })
    .await?;
    let mut resp = Response::new(Body::from(body));
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    let file = format!("attachment; filename=\"trace-{id}.{}\"", format.extension());
    if let Ok(v) = HeaderValue::from_str(&file) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::{SpanId, TraceId};

    fn trace(n: u128) -> Trace {
        let spans: Vec<Span> = (1..=3)
            .map(|i| {
                let mut s = Span::new(
                    TraceId::new(n).unwrap(),
                    SpanId::new(i).unwrap(),
                    (i > 1).then(|| SpanId::new(1).unwrap()),
                    format!("op-{i}"),
                    if i == 3 { "db" } else { "web" },
                    1_000 + i,
                    2_000 + i,
                );
                s.attributes
                    .push(causeway_model::KeyValue::new("k", format!("v{n}")));
                s
            })
            .collect();
        Trace::assemble(TraceId::new(n).unwrap(), spans)
    }

    /// The pieces of `traces`, joined as a client reads them.
    fn streamed(format: Format, traces: &[Trace]) -> Vec<u8> {
        let mut c = Chunker {
            format,
            chunk: format.opening().to_vec(),
            items: 0,
        };
        let mut out = Vec::new();
        for t in traces {
            if let Some(full) = c.add(t) {
                out.extend(full);
            }
        }
        out.extend(c.chunk);
        out.extend_from_slice(format.closing());
        out
    }

    #[test]
    fn a_streamed_body_decodes_to_every_span_in_each_format() {
        let traces: Vec<Trace> = (1..=4).map(trace).collect();
        let mut all: Vec<Span> = traces.iter().flat_map(|t| t.spans.clone()).collect();
        all.sort_by_key(|s| (s.trace_id, s.span_id));
        let ids = |mut spans: Vec<Span>| {
            spans.sort_by_key(|s| (s.trace_id, s.span_id));
            spans
                .iter()
                .map(|s| (s.trace_id, s.span_id, s.name.clone(), s.service.to_string()))
                .collect::<Vec<_>>()
        };
        let want = ids(all);
        let body = streamed(Format::Native, &traces);
        assert_eq!(ids(native::decode_stream(&body).spans), want);
        let body = streamed(Format::OtlpProtobuf, &traces);
        assert_eq!(ids(otlp::decode_protobuf(&body).unwrap().spans), want);
        let body = streamed(Format::OtlpJson, &traces);
        assert_eq!(ids(otlp::decode_json(&body).unwrap().spans), want);
        let body = streamed(Format::Zipkin, &traces);
        assert_eq!(ids(zipkin::decode_json(&body).unwrap().spans), want);
        let body = streamed(Format::Jaeger, &traces);
        assert_eq!(ids(jaeger::decode_json(&body).unwrap().spans), want);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["data"].as_array().unwrap().len(), 4);
        // No trace at all: still a whole document.
        for format in [Format::OtlpJson, Format::Zipkin, Format::Jaeger] {
            let body = streamed(format, &[]);
            let _: serde_json::Value = serde_json::from_slice(&body).unwrap();
        }
    }
}
