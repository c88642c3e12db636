//! HTTP and gRPC middleware, each behind its cargo feature.

#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "tonic")]
pub mod tonic;
#[cfg(feature = "tower")]
pub mod tower;
