//! Context injection for tonic clients. [`TraceInterceptor`] writes the current span's
//! context into each call's metadata (the current span is the parent); for a client span
//! per call, wrap the channel in [`crate::middleware::tower::ClientTraceLayer`] (feature
//! `tower`) instead.

use crate::propagation::{Injector, SpanContext};

struct Metadata<'a>(&'a mut tonic::metadata::MetadataMap);

impl Injector for Metadata<'_> {
    fn set(&mut self, name: &str, value: String) {
        if let (Ok(k), Ok(v)) = (
            tonic::metadata::MetadataKey::from_bytes(name.as_bytes()),
            value.parse(),
        ) {
            self.0.insert(k, v);
        }
    }
}

/// A tonic interceptor that injects the current span's W3C context.
#[derive(Debug, Clone, Copy, Default)]
pub struct TraceInterceptor;

impl tonic::service::Interceptor for TraceInterceptor {
    fn call(&mut self, mut req: tonic::Request<()>) -> Result<tonic::Request<()>, tonic::Status> {
        crate::context::inject(&mut Metadata(req.metadata_mut()));
        Ok(req)
    }
}

/// Writes a given context into gRPC metadata.
pub fn inject_metadata(ctx: &SpanContext, metadata: &mut tonic::metadata::MetadataMap) {
    crate::propagation::inject_context(ctx, None, &mut Metadata(metadata));
}
