//! OTLP/gRPC ingest (`opentelemetry.proto.collector.trace.v1.TraceService/Export`), gzip
//! accepted, answered with partial success like the OpenTelemetry Collector.

use std::future::Future;
use std::sync::Arc;

use causeway_model::codec::otlp;
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use tonic::codec::CompressionEncoding;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status};

use crate::ingest::{take, Outcome, Protocol};
use crate::AppState;

struct OtlpGrpc {
    state: Arc<AppState>,
}

#[tonic::async_trait]
impl TraceService for OtlpGrpc {
    async fn export(
        &self,
        request: Request<ExportTraceServiceRequest>,
    ) -> Result<Response<ExportTraceServiceResponse>, Status> {
        let decoded = otlp::decode_request(request.get_ref());
        let outcome = Outcome::rejecting(&decoded.rejected);
        let outcome = take(
            &self.state,
            Protocol::OtlpGrpc,
            decoded.spans,
            None,
            outcome,
        )
        .await?;
        Ok(Response::new(ExportTraceServiceResponse {
            partial_success: outcome.partial_success(),
        }))
    }
}

pub(crate) async fn serve(
    state: Arc<AppState>,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let token = state.config.token.clone();
    let limit = state.config.max_body_bytes;
    let check = move |req: Request<()>| {
        let header = req.metadata().get("authorization").map(|v| v.as_bytes());
        if crate::auth::allowed(token.as_deref(), header) {
            Ok(req)
        } else {
            Err(Status::unauthenticated("missing or invalid access token"))
        }
    };
    let service = TraceServiceServer::new(OtlpGrpc { state })
        .accept_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(limit);
    let result = tonic::transport::Server::builder()
        .add_service(InterceptedService::new(service, check))
        .serve_with_incoming_shutdown(TcpIncoming::from(listener), shutdown)
        .await;
    if let Err(e) = result {
        tracing::error!(error = %e, "OTLP/gRPC listener failed");
    }
}
