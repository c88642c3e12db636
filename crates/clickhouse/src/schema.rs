//! The tables, created and upgraded by numbered migrations that every node records.
//!
//! Each node keeps its own `schema_versions` (TinyLog); a migration's statements are all
//! `IF NOT EXISTS`, so one cut short runs again from its start. Without ZooKeeper a
//! ClickHouse cluster has no distributed DDL, so the statements go to every node the URL
//! lists; then `cluster('NAME', system, tables)` must show `span_rows_local` on every node of
//! the cluster, else the error says which count is missing and to list every node. The
//! schema is at version 4 (`VERSION`):
//!
//! - `span_rows_local`: `ReplacingMergeTree`, `PARTITION BY day`, `ORDER BY (trace_id,
//!   span_id, digest)`, `index_granularity = 1024`, so a read by trace id decompresses one
//!   or two granules of payloads (1 024 rows each, not the default 8 192). Columns: `day`,
//!   `trace_id FixedString(16)`, `span_id` and `parent_id` `FixedString(8)` (big-endian, so
//!   `hex` gives the ids' text; a parent of zeros is none), `digest` (the CRC-32 and length
//!   of the payload), `start`, `duration`, `service`, `name`, `host`, `pid`, `kind`, `status`
//!   (0 unset, 1 ok, 2 error), `status_message`, `source`, `attr_keys`/`attr_values` (the
//!   span's, its events' and its links' attributes as text: 18.16 has no Map), and `payload`
//!   (the whole span as its native record's payload).
//! - `span_rows`: `Distributed(NAME, DB, span_rows_local,
//!   reinterpretAsUInt64(substring(trace_id, 9, 8)))`: a trace's spans share a shard, picked
//!   by the id's low 8 bytes read little-endian (random in every id scheme, 64-bit ids
//!   included), a key the client computes too (`crate::shards`).
//! - `spans`: a view over `span_rows FINAL` (duplicates collapsed at read) with the embedded
//!   store's SQL column names: hex ids, `operation`, `kind` and `status_code` as words,
//!   `start_time` in seconds (`toDateTime`; 18.16 has no DateTime64) and `start_ns`,
//!   `attribute_keys`/`attribute_values`.
//! - `operations_local` / `operations`: (day, service, name), `ReplacingMergeTree`, sharded
//!   by service; the service and operation lists read it, not the spans.
//! - `span_index_local` / `span_index` (from version 2): each span's `day`, `service`,
//!   `name`, `start`, `duration`, `host`, `status` and `trace_id`, `MergeTree`,
//!   `PARTITION BY day`, `ORDER BY (service, name, start)`: a search that names a service
//!   reads one range of it instead of every span (Jaeger's ClickHouse plugin keeps the same
//!   kind of index).
//! - `attr_index_local` / `attr_index` (from version 2): `(day, key, value, trace_id)` from
//!   an `ARRAY JOIN` of the two attribute arrays, values up to 128 bytes,
//!   `ReplacingMergeTree`, `ORDER BY (key, value, trace_id)` (a trace once per key and value
//!   after merges): which traces have an attribute, a range away. Its view
//!   (`attr_index_filler_distinct`, version 4) groups each insert block by `(day, key,
//!   value, trace_id)`, so it writes a row per distinct attribute of a trace in the block,
//!   not one per attribute of each span: a fifth to a sixth of the rows, and sustained
//!   ingest of 57-65 K spans/s where one row per attribute gave 38-44 K. Version 4 creates
//!   that view before it drops version 2's (`attr_index_filler`), so no insert on the way
//!   misses both.
//! - `trace_starts_local` / `trace_starts` (from version 2): `(day, trace_id, first
//!   AggregateFunction(min, UInt64))`, `AggregatingMergeTree`, `ORDER BY trace_id`: each
//!   trace's first start, one row per trace and insert block until merged
//!   (`minMerge(first)` at read). Searches rank by it and scans select by it, so neither
//!   groups every span by trace.
//! - `operation_spans_local` / `operation_spans` (from version 3): `(day, service, name,
//!   spans AggregateFunction(count), first AggregateFunction(min, UInt64), last
//!   AggregateFunction(max, UInt64))`, `AggregatingMergeTree`, `ORDER BY (service, name)`:
//!   how many spans an operation has a day and over what time, which sizes the range of
//!   `span_index` a search by service reads (`crate::search`).
//!
//! The four derived tables are filled by materialized views on each node's
//! `span_rows_local` (`<table>_filler`: a row reaches them with its insert, on the shard
//! that took it), and the migration that adds one fills it from the spans already stored
//! (`INSERT ... SELECT`). None minds a batch shipped twice or a migration run twice for what
//! it answers: an index row twice names the same trace, the least start is the same however
//! often it is seen, and a span counted twice in `operation_spans` only widens the range
//! read. All of this runs on 18.16 (`TO` views, `-State`/`-Merge` combinators). On one
//! server (no `cluster=`) `spans`, `operations` and the derived tables are the MergeTree
//! tables themselves.

use causeway_store::StoreError;

use crate::endpoint::Endpoint;
use crate::http::Client;
use crate::rowbinary::RowReader;

/// The schema version this code reads and writes.
pub const VERSION: u32 = 4;

/// The names queries use.
#[derive(Debug, Clone)]
pub struct Tables {
    /// Every span's row; the `Distributed` table on a cluster.
    pub rows: String,
    /// The table each node keeps its own rows in (the same as `rows` on one server).
    pub rows_local: String,
    /// (service, span name) pairs seen, by day.
    pub operations: String,
    /// Its table on each node.
    pub operations_local: String,
    /// Each span's searchable columns and trace id, ordered by (service, name, start):
    /// what a search by service reads instead of the span table.
    pub span_index: String,
    /// Its table on each node.
    pub span_index_local: String,
    /// The traces that have each attribute (key and value as text), by (key, value).
    pub attr_index: String,
    /// Its table on each node.
    pub attr_index_local: String,
    /// Each trace's first start, merged from every batch of its spans.
    pub trace_starts: String,
    /// Its table on each node.
    pub trace_starts_local: String,
    /// Per (service, span name) and day: how many spans, the first and last start; what
    /// a search by service reads to choose the time range of the span index to read.
    pub operation_spans: String,
    /// Its table on each node.
    pub operation_spans_local: String,
}

impl Tables {
    /// The tables of `endpoint`'s database.
    pub fn of(endpoint: &Endpoint) -> Tables {
        let db = &endpoint.database;
        let local = if endpoint.cluster.is_some() {
            "_local"
        } else {
            ""
        };
        Tables {
            rows: format!("{db}.span_rows"),
            rows_local: format!("{db}.span_rows{local}"),
            operations: format!("{db}.operations"),
            operations_local: format!("{db}.operations{local}"),
            span_index: format!("{db}.span_index"),
            span_index_local: format!("{db}.span_index{local}"),
            attr_index: format!("{db}.attr_index"),
            attr_index_local: format!("{db}.attr_index{local}"),
            trace_starts: format!("{db}.trace_starts"),
            trace_starts_local: format!("{db}.trace_starts{local}"),
            operation_spans: format!("{db}.operation_spans"),
            operation_spans_local: format!("{db}.operation_spans{local}"),
        }
    }

    /// The names, without the database, of the tables each node keeps partitioned by
    /// day: the span table first, then what is derived from spans.
    pub fn by_day_local(&self) -> [&str; 6] {
        [
            &self.rows_local,
            &self.span_index_local,
            &self.attr_index_local,
            &self.trace_starts_local,
            &self.operation_spans_local,
            &self.operations_local,
        ]
        .map(|t| t.split_once('.').map_or(t.as_str(), |(_, name)| name))
    }
}

/// The columns of the span rows. `payload` holds the whole span (the native record's
/// payload); the others are what searches and SQL read. Ids are big-endian bytes (hex of
/// them is the ids' text), a parent of zeros is none. Attributes are two parallel arrays
/// of keys and values as text (ClickHouse 18.16 has no Map type), the span's own then
/// its events' and links'. `digest` tells apart spans that share an id but differ
/// (Zipkin's shared client and server spans), so the table's key is unique per distinct
/// span: a batch shipped twice collapses on merge and is told apart on read.
const SPAN_COLUMNS: &str = "day Date, trace_id FixedString(16), span_id FixedString(8), \
    digest UInt64, parent_id FixedString(8), start UInt64, duration UInt64, \
    service String, name String, host String, pid UInt32, kind UInt8, status UInt8, \
    status_message String, source String, attr_keys Array(String), \
    attr_values Array(String), payload String";

/// The `spans` view SQL queries read: the embedded store's column names where ClickHouse
/// 18.16 can give them, merged rows only.
fn spans_view(db: &str) -> String {
    format!(
        "CREATE VIEW IF NOT EXISTS {db}.spans AS SELECT \
         lower(hex(trace_id)) AS trace_id, lower(hex(span_id)) AS span_id, \
         if(parent_id = unhex('0000000000000000'), NULL, lower(hex(parent_id))) AS parent_id, \
         service, name AS operation, \
         transform(kind, [0, 1, 2, 3, 4], \
         ['internal', 'server', 'client', 'producer', 'consumer'], '') AS kind, \
         host, pid, toDateTime(intDiv(start, 1000000000)) AS start_time, start AS start_ns, \
         duration AS duration_ns, \
         transform(status, [0, 1, 2], ['unset', 'ok', 'error'], '') AS status_code, \
         status_message, attr_keys AS attribute_keys, attr_values AS attribute_values, \
         source FROM {db}.span_rows FINAL"
    )
}

/// A table derived from the span rows, on each node: filled by a materialized view on
/// the node's span table (so a row reaches it with its insert, on the shard that took
/// it), and by the migration that makes it from the spans stored before. None minds a
/// batch shipped twice: an index row twice names the same trace, and the least start is
/// the same however often it is seen.
struct Derived {
    /// The schema version that adds it.
    version: u32,
    name: &'static str,
    columns: &'static str,
    engine: &'static str,
    /// The columns selected from a span row.
    select: &'static str,
    /// What follows `FROM span_rows`.
    rest: &'static str,
    /// The `Distributed` table's sharding key (only the views write, each on its node).
    sharding: &'static str,
}

impl Derived {
    fn select(&self, rows: &str) -> String {
        format!("SELECT {} FROM {rows}{}", self.select, self.rest)
    }
}

/// The longest attribute value `attr_index` holds; a search for a longer one reads the
/// span table.
pub const INDEXED_VALUE_MAX: usize = 128;

/// The derived tables, by the version that adds them.
const DERIVED: [Derived; 4] = [
    // What a search can ask of a span besides its attributes, by (service, name, start).
    Derived {
        version: 2,
        name: "span_index",
        columns: "day Date, service String, name String, start UInt64, duration UInt64, \
                  host String, status UInt8, trace_id FixedString(16)",
        engine: "MergeTree() PARTITION BY day ORDER BY (service, name, start)",
        select: "day, service, name, start, duration, host, status, trace_id",
        rest: "",
        sharding: SHARDING_KEY,
    },
    // The traces that have an attribute, by (key, value); a trace once per merge.
    Derived {
        version: 2,
        name: "attr_index",
        columns: "day Date, key String, value String, trace_id FixedString(16)",
        engine: "ReplacingMergeTree() PARTITION BY day ORDER BY (key, value, trace_id)",
        select: "day, key, value, trace_id",
        // The bound is INDEXED_VALUE_MAX.
        rest: " ARRAY JOIN attr_keys AS key, attr_values AS value WHERE length(value) <= 128",
        sharding: SHARDING_KEY,
    },
    // Each trace's first start, one row per trace and insert block until merged.
    Derived {
        version: 2,
        name: "trace_starts",
        columns: "day Date, trace_id FixedString(16), first AggregateFunction(min, UInt64)",
        engine: "AggregatingMergeTree() PARTITION BY day ORDER BY trace_id",
        select: "day, trace_id, minState(start) AS first",
        rest: " GROUP BY day, trace_id",
        sharding: SHARDING_KEY,
    },
    // How many spans each operation has a day, and over what time: a search by service
    // reads the span index from the newest back over the range that should hold the
    // spans it needs. (A batch shipped twice counts twice: it only guides the range.)
    Derived {
        version: 3,
        name: "operation_spans",
        columns: "day Date, service String, name String, spans AggregateFunction(count), \
                  first AggregateFunction(min, UInt64), last AggregateFunction(max, UInt64)",
        engine: "AggregatingMergeTree() PARTITION BY day ORDER BY (service, name)",
        select: "day, service, name, countState() AS spans, minState(start) AS first, \
                 maxState(start) AS last",
        rest: " GROUP BY day, service, name",
        sharding: "cityHash64(service)",
    },
];

const OPERATION_COLUMNS: &str = "day Date, service String, name String";

/// The statements of migration `version`, for every node.
fn statements(version: u32, endpoint: &Endpoint) -> Vec<String> {
    let db = &endpoint.database;
    let t = Tables::of(endpoint);
    match version {
        1 => {
            let mut s = vec![
                // A trace is read by id from its few granules: small ones, so that a
                // trace's read decompresses about a thousand payloads, not 8 192.
                format!(
                    "CREATE TABLE IF NOT EXISTS {} ({SPAN_COLUMNS}) \
                     ENGINE = ReplacingMergeTree() PARTITION BY day \
                     ORDER BY (trace_id, span_id, digest) SETTINGS index_granularity = 1024",
                    t.rows_local
                ),
                format!(
                    "CREATE TABLE IF NOT EXISTS {} ({OPERATION_COLUMNS}) \
                     ENGINE = ReplacingMergeTree() PARTITION BY day ORDER BY (service, name)",
                    t.operations_local
                ),
            ];
            if let Some(cluster) = &endpoint.cluster {
                // Spans by trace id, so that a trace's spans share a shard; operations by
                // service.
                s.push(format!(
                    "CREATE TABLE IF NOT EXISTS {} AS {} \
                     ENGINE = Distributed({cluster}, {db}, span_rows_local, {SHARDING_KEY})",
                    t.rows, t.rows_local
                ));
                s.push(format!(
                    "CREATE TABLE IF NOT EXISTS {0} AS {0}_local \
                     ENGINE = Distributed({cluster}, {db}, operations_local, cityHash64(service))",
                    t.operations
                ));
            }
            s.push(spans_view(db));
            s
        }
        // Searches read a range of an index table instead of every span, and rank traces
        // by a per-trace start instead of grouping every span by trace (2); a search by
        // service reads only the newest range of the span index that it needs (3).
        2 | 3 => {
            let mut s = Vec::new();
            let suffix = if endpoint.cluster.is_some() {
                "_local"
            } else {
                ""
            };
            for d in DERIVED.iter().filter(|d| d.version == version) {
                let local = format!("{db}.{}{suffix}", d.name);
                s.push(format!(
                    "CREATE TABLE IF NOT EXISTS {local} ({}) ENGINE = {}",
                    d.columns, d.engine
                ));
                s.push(format!(
                    "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.{}_filler TO {local} AS {}",
                    d.name,
                    d.select(&t.rows_local)
                ));
                if let Some(cluster) = &endpoint.cluster {
                    s.push(format!(
                        "CREATE TABLE IF NOT EXISTS {db}.{0} AS {local} ENGINE = \
                         Distributed({cluster}, {db}, {0}{suffix}, {1})",
                        d.name, d.sharding
                    ));
                }
                // The spans stored before. A migration cut short and run again adds rows a
                // second time, which no derived table minds.
                s.push(format!("INSERT INTO {local} {}", d.select(&t.rows_local)));
            }
            s
        }
        // The attribute index's view writes one row per distinct key, value and trace of
        // an insert block instead of one per attribute of each span (about a quarter of
        // the rows here), which ClickHouse's merges otherwise collapse later. The new view
        // starts before the old one goes, so no insert misses both; one taken by both
        // writes rows twice, which the index collapses.
        4 => {
            let attrs = DERIVED
                .iter()
                .find(|d| d.name == "attr_index")
                .expect("the attribute index is derived");
            vec![
                format!(
                    "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.attr_index_filler_distinct \
                     TO {} AS {} GROUP BY day, key, value, trace_id",
                    t.attr_index_local,
                    attrs.select(&t.rows_local)
                ),
                format!("DROP TABLE IF EXISTS {db}.attr_index_filler"),
            ]
        }
        _ => Vec::new(),
    }
}

/// What a migration did on one node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NodeMigration {
    /// The node, `host:port`.
    pub node: String,
    /// Its schema version before.
    pub from: u32,
    /// Its schema version after.
    pub to: u32,
}

/// Brings every node of `client`'s endpoint to [`VERSION`]; checks that every shard of
/// the cluster has the tables.
pub fn migrate(client: &Client) -> Result<Vec<NodeMigration>, StoreError> {
    migrate_to(client, VERSION)
}

/// Brings every node to version `target`.
pub(crate) fn migrate_to(client: &Client, target: u32) -> Result<Vec<NodeMigration>, StoreError> {
    let endpoint = client.endpoint();
    let db = &endpoint.database;
    let mut report = Vec::new();
    for node in &endpoint.nodes {
        client.run_on(node, &format!("CREATE DATABASE IF NOT EXISTS {db}"))?;
        client.run_on(
            node,
            &format!(
                "CREATE TABLE IF NOT EXISTS {db}.schema_versions \
                 (version UInt32, applied DateTime DEFAULT now()) ENGINE = TinyLog"
            ),
        )?;
        let from = node_version(client, node)?;
        if from > VERSION {
            return Err(StoreError::Remote {
                node: node.clone(),
                reason: format!(
                    "its schema is version {from}, newer than this causeway's {VERSION}; \
                     upgrade causeway"
                ),
            });
        }
        for version in from + 1..=target {
            for sql in statements(version, endpoint) {
                client.run_on(node, &sql)?;
            }
            client.run_on(
                node,
                &format!("INSERT INTO {db}.schema_versions (version) VALUES ({version})"),
            )?;
        }
        report.push(NodeMigration {
            node: node.clone(),
            from,
            to: target.max(from),
        });
    }
    if let Some(cluster) = &endpoint.cluster {
        check_every_shard(client, cluster)?;
    }
    Ok(report)
}

/// The span table's sharding key: the trace id's low 8 bytes, read little-endian, which
/// [`crate::shards::ShardMap`] computes too to send a trace's reads to its one shard.
/// (Trace ids are random there in every id scheme we take, 64-bit ones included.)
pub const SHARDING_KEY: &str = "reinterpretAsUInt64(substring(trace_id, 9, 8))";

/// Drops the endpoint's database, with every span in it, on every node.
pub fn drop_database(client: &Client) -> Result<(), StoreError> {
    let endpoint = client.endpoint();
    for node in &endpoint.nodes {
        client.run_on(
            node,
            &format!("DROP DATABASE IF EXISTS {}", endpoint.database),
        )?;
    }
    Ok(())
}

/// The schema version of the first node that answers; 0 when it has none.
pub fn version(client: &Client) -> Result<u32, StoreError> {
    let db = &client.endpoint().database;
    let answer = client.run(&format!(
        "SELECT toUInt64(count()) FROM system.tables \
         WHERE database = '{db}' AND name = 'schema_versions' FORMAT RowBinary"
    ))?;
    if read_u64(&answer, "count")? == 0 {
        return Ok(0);
    }
    let answer = client.run(&format!(
        "SELECT toUInt64(max(version)) FROM {db}.schema_versions FORMAT RowBinary"
    ))?;
    Ok(read_u64(&answer, "version")? as u32)
}

fn node_version(client: &Client, node: &str) -> Result<u32, StoreError> {
    let db = &client.endpoint().database;
    let answer = client.run_on(
        node,
        &format!("SELECT toUInt64(max(version)) FROM {db}.schema_versions FORMAT RowBinary"),
    )?;
    Ok(read_u64(&answer, "version")? as u32)
}

fn check_every_shard(client: &Client, cluster: &str) -> Result<(), StoreError> {
    let db = &client.endpoint().database;
    let answer = client.run(&format!(
        "SELECT toUInt64(count()) FROM system.clusters WHERE cluster = '{cluster}' \
         FORMAT RowBinary"
    ))?;
    let nodes = read_u64(&answer, "count")?;
    if nodes == 0 {
        return Err(StoreError::Remote {
            node: client.endpoint().nodes.join(","),
            reason: format!("no cluster {cluster:?} in the server's remote_servers"),
        });
    }
    let answer = client.run(&format!(
        "SELECT toUInt64(count()) FROM cluster('{cluster}', system, tables) \
         WHERE database = '{db}' AND name = 'span_rows_local' FORMAT RowBinary"
    ))?;
    let with_tables = read_u64(&answer, "count")?;
    if with_tables < nodes {
        return Err(StoreError::Remote {
            node: client.endpoint().nodes.join(","),
            reason: format!(
                "{} of cluster {cluster:?}'s {nodes} nodes have no {db}.span_rows_local: list \
                 every node's HTTP address in the store URL (host:port,host:port) so that \
                 the schema is created on each",
                nodes - with_tables
            ),
        });
    }
    Ok(())
}

pub(crate) fn read_u64(answer: &[u8], column: &'static str) -> Result<u64, StoreError> {
    RowReader::new(answer)
        .u64(column)
        .map_err(|e| StoreError::Remote {
            node: String::new(),
            reason: e.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_attribute_index_holds_values_up_to_the_bound_searches_assume() {
        let attrs = DERIVED.iter().find(|d| d.name == "attr_index").unwrap();
        assert!(attrs
            .rest
            .ends_with(&format!("length(value) <= {INDEXED_VALUE_MAX}")));
    }
}
