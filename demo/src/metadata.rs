//! The metadata service, over gRPC: which replicas hold a block. Written against tonic's
//! runtime directly (what `tonic-build` would generate), so the demo builds without
//! `protoc`.

use std::convert::Infallible;
use std::task::{Context, Poll};

use causeway::middleware::tower::{ClientTraceLayer, Layer, TraceService};
use tonic::codegen::{http, Body, BoxFuture, StdError};
use tonic::transport::Channel;
use tracing::Instrument;

use crate::{millis, BoxError, Role};

/// `Locate`'s request: a block id.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LocateRequest {
    #[prost(uint64, tag = "1")]
    pub block: u64,
}

/// `Locate`'s answer: the replicas holding the block, by service name.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct LocateReply {
    #[prost(string, repeated, tag = "1")]
    pub replicas: Vec<String>,
}

const SERVICE: &str = "causeway.demo.Metadata";
const LOCATE: &str = "/causeway.demo.Metadata/Locate";

/// The server side.
#[derive(Clone, Copy, Default)]
pub(crate) struct MetadataServer;

impl tonic::server::NamedService for MetadataServer {
    const NAME: &'static str = SERVICE;
}

struct Locate;

impl tonic::server::UnaryService<LocateRequest> for Locate {
    type Response = LocateReply;
    type Future = BoxFuture<tonic::Response<LocateReply>, tonic::Status>;

    fn call(&mut self, request: tonic::Request<LocateRequest>) -> Self::Future {
        Box::pin(async move {
            let block = request.into_inner().block;
            let lookup = tracing::info_span!("block map lookup", block);
            async {
                tokio::time::sleep(millis(0.3, 1.5)).await;
            }
            .instrument(lookup)
            .await;
            // The bug under study (HDFS-6268): the replicas come back in the same order
            // for every block, and clients read the first one.
            let replicas = [Role::Storage(1), Role::Storage(2), Role::Storage(3)]
                .iter()
                .map(|r| r.service().to_owned())
                .collect::<Vec<String>>();
            tracing::info!(target: crate::LOG, block, ?replicas, "block located");
            Ok(tonic::Response::new(LocateReply { replicas }))
        })
    }
}

impl<B> tower_service::Service<http::Request<B>> for MetadataServer
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if req.uri().path() == LOCATE {
            return Box::pin(async move {
                let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
                Ok(grpc.unary(Locate, req).await)
            });
        }
        Box::pin(async move {
            Ok(tonic::Status::unimplemented(format!("no method {}", req.uri().path())).into_http())
        })
    }
}

/// A channel to the metadata service at `addr` whose calls are client spans naming it.
pub(crate) fn traced_channel(
    addr: std::net::SocketAddr,
) -> Result<TraceService<Channel>, BoxError> {
    let channel = Channel::from_shared(format!("http://{addr}"))?.connect_lazy();
    Ok(ClientTraceLayer::new()
        .server(addr.to_string().parse()?)
        .layer(channel))
}

/// Asks the metadata service where `block` lives, inside a client span.
pub(crate) async fn locate(
    channel: &TraceService<Channel>,
    block: u64,
) -> Result<Vec<String>, tonic::Status> {
    let mut grpc = tonic::client::Grpc::new(channel.clone());
    grpc.ready()
        .await
        .map_err(|e| tonic::Status::unavailable(format!("metadata not ready: {e}")))?;
    let reply: tonic::Response<LocateReply> = grpc
        .unary(
            tonic::Request::new(LocateRequest { block }),
            http::uri::PathAndQuery::from_static(LOCATE),
            tonic_prost::ProstCodec::default(),
        )
        .await?;
    Ok(reply.into_inner().replicas)
}
