//! Causeway's scale-out store: the [`causeway_store::TraceStore`] trait on a ClickHouse
//! server or cluster, over ClickHouse's HTTP interface.
//!
//! Spans go in as RowBinary rows of a `ReplacingMergeTree` table (behind a `Distributed`
//! table sharded by trace id on a cluster), each row holding the whole span as its native
//! record's payload plus the columns searches filter on. The SQL runs on ClickHouse 18.16
//! (Debian's) and on current releases. Why the layout is what it is:
//! `docs/decisions/005-clickhouse-layout-for-18-16.md`.
//!
//! The parts: the URL (`endpoint`), the tables and their migrations (`schema`), the store
//! itself (`store`, with `search` and `shards`), the spool `causeway serve --store` runs
//! (`spool`), SQL (`sql`), the HTTP client (`http`, blocking `ureq`; every statement names
//! `database.table`) and a local cluster for tests (`local_cluster`). They serve
//! `causeway serve --store clickhouse://...`, `causeway demo --store`, `causeway ch migrate`,
//! `causeway ch local-cluster` and `causeway-bench ingest|query|analyses --store`; the
//! benchmarks run on the embedded store, then again in a fresh database of the given
//! cluster (dropped after), printed side by side with ratios, ingest also reporting
//! sustained spans/s (until blocks are written or the spool has shipped).
//!
//! A node that cannot be reached is `StoreError::Remote` with "unreachable", and the next
//! listed node is tried; one that answers with an error returns ClickHouse's message
//! (`HTTP 500: Code: ...`) without trying others.
//!
//! The tests: the embedded store's checks (`causeway_store::conformance`) run here on one
//! two-shard cluster shared by the tests, a database each
//! (`tests/conformance_on_a_two_shard_cluster.rs`). `tests/store_on_a_two_shard_cluster.rs`
//! stores the same generated spans (one batch twice) in a two-shard cluster and in the
//! embedded store and compares trace by id, seven searches, two scans, services and
//! operations, checks that each trace lies on the shard the client computes, and checks
//! SQL: counts with a batch stored twice, each column of a span, the row limit, and
//! refusals of DDL, inserts and bad syntax. `tests/spool_ships_through_outages.rs` kills a
//! shard during ingest (acknowledged into the spool, then busy past the bound), restarts
//! the spool and the shard, and finds every acknowledged span once. The server's
//! OpenTelemetry test runs two servers on one cluster, each answering for the other's
//! spans; the CLI's kill -9 test kills `serve --store` three times during ingest and finds
//! every acknowledged span once, in the API and in the merged table.
#![warn(missing_docs)]

pub mod endpoint;
pub mod http;
mod literals;
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
