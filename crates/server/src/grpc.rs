//! OTLP/gRPC ingest (`opentelemetry.proto.collector.trace.v1.TraceService/Export` and
//! `opentelemetry.proto.collector.logs.v1.LogsService/Export`), gzip accepted, answered
//! with partial success like the OpenTelemetry Collector.
//!
//! The service is written out here rather than generated: its request is taken as raw
//! bytes (a codec of its own), so that, as over HTTP, its body arrives under the body
//! timeout and the receive budget, takes an in-flight place only once whole, and is decoded
//! by the same code as OTLP/HTTP, off the async workers. A connection carries at most 64
//! streams at once. The token is checked in an interceptor (`crate::auth`).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use causeway_model::codec::otlp::proto::{ExportLogsServiceResponse, ExportTraceServiceResponse};
use prost::bytes::{Buf, Bytes};
use prost::Message as _;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{http, BoxFuture, Service, StdError};
use tonic::server::{Grpc, NamedService, UnaryService};
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use crate::ingest::{take, Batch, Encoding, Outcome, Protocol};
use crate::receive::{Budgeted, Held, Received};
use crate::AppState;

/// What one OTLP service takes: its name, how its messages are decoded and answered.
trait Signal: Send + Sync + 'static {
    const NAME: &'static str;
    const EXPORT: &'static str;
    const PROTOCOL: Protocol;
    type Response: prost::Message + Default + Send + 'static;
    fn decode(body: Bytes) -> Result<Batch, String>;
    fn reply(outcome: &Outcome) -> Self::Response;
}

struct Traces;

impl Signal for Traces {
    const NAME: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
    const EXPORT: &'static str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
    const PROTOCOL: Protocol = Protocol::OtlpGrpc;
    type Response = ExportTraceServiceResponse;
    fn decode(body: Bytes) -> Result<Batch, String> {
        crate::ingest::decode_otlp(body, false, false)
    }
    fn reply(outcome: &Outcome) -> ExportTraceServiceResponse {
        ExportTraceServiceResponse {
            partial_success: outcome.partial_success(),
        }
    }
}

struct Logs;

impl Signal for Logs {
    const NAME: &'static str = "opentelemetry.proto.collector.logs.v1.LogsService";
    const EXPORT: &'static str = "/opentelemetry.proto.collector.logs.v1.LogsService/Export";
    const PROTOCOL: Protocol = Protocol::OtlpLogsGrpc;
    type Response = ExportLogsServiceResponse;
    fn decode(body: Bytes) -> Result<Batch, String> {
        crate::ingest::decode_otlp(body, true, false)
    }
    fn reply(outcome: &Outcome) -> ExportLogsServiceResponse {
        ExportLogsServiceResponse {
            partial_success: outcome.logs_partial_success(),
        }
    }
}

/// Requests one gRPC connection has open at once.
const MAX_STREAMS_PER_CONNECTION: u32 = 64;

/// Takes the request message as its bytes and writes the response message.
struct RawCodec<S>(std::marker::PhantomData<S>);

struct RawDecoder;

struct ResponseEncoder<S>(std::marker::PhantomData<S>);

impl<S: Signal> Codec for RawCodec<S> {
    type Encode = S::Response;
    type Decode = Bytes;
    type Encoder = ResponseEncoder<S>;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> ResponseEncoder<S> {
        ResponseEncoder(std::marker::PhantomData)
    }

    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

impl<S: Signal> Encoder for ResponseEncoder<S> {
    type Item = S::Response;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("encoding the response: {e}")))
    }
}

/// The Export method.
struct Export<S> {
    state: Arc<AppState>,
    signal: std::marker::PhantomData<S>,
}

impl<S: Signal> UnaryService<Bytes> for Export<S> {
    type Response = S::Response;
    type Future = BoxFuture<Response<S::Response>, Status>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let state = self.state.clone();
        Box::pin(async move {
            let message = request.into_inner();
            // The body's frames gave their bytes back when tonic dropped it; the message
            // holds them again until it is stored.
            let mut held = Held::default();
            state
                .ingest_receiving
                .grow(&mut held, message.len())
                .map_err(|r| state.refused(r))?;
            let received = Received {
                bytes: message,
                held,
            };
            let outcome = take(
                &state,
                S::PROTOCOL,
                received,
                // tonic has already undone the message's compression.
                Encoding::Identity,
                S::decode,
            )
            .await?;
            Ok(Response::new(S::reply(&outcome)))
        })
    }
}

/// An OTLP service (`TraceService`, `LogsService`): routes Export, answers UNIMPLEMENTED
/// to anything else.
struct Collector<S> {
    state: Arc<AppState>,
    signal: std::marker::PhantomData<S>,
}

impl<S> Clone for Collector<S> {
    fn clone(&self) -> Self {
        Collector {
            state: self.state.clone(),
            signal: std::marker::PhantomData,
        }
    }
}

impl<S: Signal> NamedService for Collector<S> {
    const NAME: &'static str = S::NAME;
}

impl<S: Signal, B> Service<http::Request<B>> for Collector<S>
where
    B: tonic::codegen::Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let state = self.state.clone();
        if req.uri().path() != S::EXPORT {
            let path = req.uri().path().to_owned();
            return Box::pin(async move {
                Ok(Status::unimplemented(format!("no method {path}")).into_http())
            });
        }
        // The message arrives under the body timeout, its frames held of the budget.
        let req = req.map(|body| Budgeted::new(body, state.clone()));
        Box::pin(async move {
            let limit = state.config.limits.max_body_bytes;
            let mut grpc = Grpc::new(RawCodec::<S>(std::marker::PhantomData))
                .apply_compression_config(
                    {
                        let mut accept = tonic::codec::EnabledCompressionEncodings::default();
                        accept.enable(CompressionEncoding::Gzip);
                        accept
                    },
                    tonic::codec::EnabledCompressionEncodings::default(),
                )
                .apply_max_message_size_config(Some(limit), None);
            let export = Export::<S> {
                state: state.clone(),
                signal: std::marker::PhantomData,
            };
            Ok(grpc.unary(export, req).await)
        })
    }
}

pub(crate) async fn serve(
    state: Arc<AppState>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let token = state.config.token().map(str::to_string);
    let check = move |req: Request<()>| {
        let header = req.metadata().get("authorization").map(|v| v.as_bytes());
        if crate::auth::allowed(token.as_deref(), header) {
            Ok(req)
        } else {
            Err(Status::unauthenticated("missing or invalid access token"))
        }
    };
    let traces = Collector::<Traces> {
        state: state.clone(),
        signal: std::marker::PhantomData,
    };
    let logs = Collector::<Logs> {
        state: state.clone(),
        signal: std::marker::PhantomData,
    };
    let incoming = crate::listen::incoming(listener, state);
    let result = tonic::transport::Server::builder()
        // Each stream's message is bounded by the body limit and the receive budget;
        // this bounds how many one connection opens at once.
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION)
        .add_service(InterceptedService::new(traces, check.clone()))
        .add_service(InterceptedService::new(logs, check))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    if let Err(e) = result {
        tracing::error!(error = %e, "OTLP/gRPC listener failed");
    }
}
