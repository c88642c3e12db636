//! Causeway's scale-out store: the [`causeway_store::TraceStore`] trait on a ClickHouse
//! server or cluster, over ClickHouse's HTTP interface.
//!
//! Spans go in as RowBinary rows of a `ReplacingMergeTree` table (behind a `Distributed`
//! table sharded by trace id on a cluster), each row holding the whole span as its native
//! record's payload plus the columns searches filter on. The SQL runs on ClickHouse 18.16
//! (Debian's) and on current releases.
#![warn(missing_docs)]

pub mod endpoint;
pub mod http;
#[cfg(feature = "local-cluster")]
pub mod local_cluster;
pub mod rowbinary;
pub mod schema;
mod search;
pub mod shards;
mod spool;
mod sql;
mod store;

pub use endpoint::{Endpoint, EndpointError};
pub use spool::{ShippingStore, SpoolOptions};
pub use store::{ClickHouseOptions, ClickHouseStore, DiskUsage};
