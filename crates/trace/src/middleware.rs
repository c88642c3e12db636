//! HTTP and gRPC middleware, each behind its cargo feature.
