//! HTTP and gRPC middleware, each behind its cargo feature.

#[cfg(any(feature = "tower", feature = "reqwest"))]
pub mod endpoints;
#[cfg(feature = "reqwest")]
pub mod reqwest;
#[cfg(feature = "tonic")]
pub mod tonic;
#[cfg(feature = "tower")]
pub mod tower;
