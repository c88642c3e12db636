//! [`TraceStore`] on ClickHouse: spans written as RowBinary rows, every read a query.
//!
//! Append: the rows are posted with `insert_distributed_sync=1` (answered once every shard
//! has its rows), then the batch's distinct operations. A span sent twice has the same key,
//! so merges collapse it, and reads drop identical payloads, as the embedded store drops
//! identical spans.
//!
//! Reads: whole traces come in one query shape, `SELECT trace_id, groupArray(payload) ...
//! WHERE trace_id IN (<ids>) GROUP BY trace_id`, with `distributed_group_by_no_merge=1` on a
//! cluster (each shard groups its own traces; a subquery in `<ids>` runs on each shard
//! against its local tables), streamed and decoded row by row. For a trace by id `<ids>` is
//! the id, and only the shard that holds it is asked when reads are routed by shard
//! (`crate::shards`); for a scan `<ids>` are the traces whose `minMerge(first)` in
//! `trace_starts` lies in the window, one stream per shard, each decoded on its own thread,
//! a `Break` on one stopping all. Search is `crate::search`. The grouping holds every
//! payload it groups until it answers, so past `max_bytes_before_external_group_by` (1 GiB,
//! `ClickHouseOptions::scan_spill_bytes`) a node spills it to its disk: a scan of 1 M traces
//! otherwise exceeds a query's memory limit. A scan's stream has no overall timeout
//! (`Patience::AsLongAsItTakes`: the client's timeout bounds connecting and sending only),
//! since the grouping answers nothing until it is done; the scan's reader stops at the next
//! trace once the server's query time is up, while a grouping still under way runs to its
//! end on ClickHouse (18.16 does not cancel a query when its HTTP client leaves). Every
//! other request is bounded by the client's timeout (60 s). Lists of trace ids go 2 000 to
//! a query, since ClickHouse parses at most 256 KiB of query text by default. Literals are
//! quoted with backslash escapes (control characters as `\xHH`).
//!
//! Retention (`drop_days_before`, run every minute by the spool's thread under
//! `--retention`) drops, on every node the URL lists, the day partitions of
//! `span_rows_local`, `span_index_local`, `attr_index_local`, `trace_starts_local`,
//! `operation_spans_local` and `operations_local` whose last day is before the cutoff's day
//! (`ALTER TABLE ... DROP PARTITION ID`, the id checked to be digits). A day already
//! dropped is a no-op, so several serve processes may all do it. The same statements work on
//! every version: 18.16 has no TTL. `--max-bytes` is refused with `--store`.

use std::io::BufReader;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use causeway_model::codec::native;
use causeway_model::{Span, SpanKind, Status, Trace, TraceId};
use causeway_store::{
    attribute_text, searchable_attributes, Fields, ScanStats, SearchQuery, StoreError, StoreStats,
    TimeWindow, TraceStore, TraceSummary,
};

use crate::endpoint::Endpoint;
use crate::http::{Client, Patience};
use crate::literals::{answer_error, id_lists, quote, NS_PER_DAY};
use crate::rowbinary::{RowReader, RowWriter};
use crate::schema::{self, Tables};
use crate::search;
use crate::shards::ShardMap;

/// How the store talks to the cluster.
#[derive(Debug, Clone)]
pub struct ClickHouseOptions {
    /// Longest a request may take (connect, send, answer).
    pub timeout: Duration,
    /// Bytes a node may hold while it groups a scan's payloads by trace before it spills
    /// the grouping to its disk (ClickHouse's `max_bytes_before_external_group_by`): a
    /// scan groups every span in its window, more than a node's memory for a million
    /// traces.
    pub scan_spill_bytes: u64,
}

impl Default for ClickHouseOptions {
    fn default() -> Self {
        ClickHouseOptions {
            timeout: Duration::from_secs(60),
            scan_spill_bytes: 1 << 30,
        }
    }
}

/// Traces in a ClickHouse server or cluster.
pub struct ClickHouseStore {
    pub(crate) client: Client,
    pub(crate) tables: Tables,
    /// Where each shard is, when the URL lists a node of every shard.
    shards: Option<ShardMap>,
    scan_spill_bytes: u64,
}

impl ClickHouseStore {
    /// Connects, and creates or upgrades the schema on every node the URL lists.
    pub fn open(endpoint: Endpoint, options: ClickHouseOptions) -> Result<Self, StoreError> {
        let client = Client::new(endpoint, options.timeout)?;
        if schema::version(&client)? < schema::VERSION {
            schema::migrate(&client)?;
        }
        let tables = Tables::of(client.endpoint());
        let shards = match &client.endpoint().cluster {
            Some(cluster) => ShardMap::learn(&client, cluster)?,
            None => None,
        };
        Ok(ClickHouseStore {
            client,
            tables,
            shards,
            scan_spill_bytes: options.scan_spill_bytes,
        })
    }

    /// Where each shard is, when reads are routed by shard.
    pub fn shards(&self) -> Option<&ShardMap> {
        self.shards.as_ref()
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        self.client.endpoint()
    }

    /// The HTTP client of the endpoint's nodes.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Spans stored and the bytes on disk of them and of what is derived from them, over
    /// every shard.
    pub fn disk_usage(&self) -> Result<DiskUsage, StoreError> {
        let db = &self.endpoint().database;
        let from = match &self.endpoint().cluster {
            Some(cluster) => format!("cluster('{cluster}', system, parts)"),
            None => "system.parts".to_string(),
        };
        let [rows, span_index, attr_index, starts, operation_spans, _] = self.tables.by_day_local();
        let answer = self.client.run(&format!(
            "SELECT toUInt64(sumIf(rows, table = '{rows}')), toUInt64(sum(bytes_on_disk)) \
             FROM {from} WHERE active AND database = '{db}' AND table IN \
             ('{rows}', '{span_index}', '{attr_index}', '{starts}', '{operation_spans}') \
             FORMAT RowBinary"
        ))?;
        let mut r = RowReader::new(&answer[..]);
        let spans = r.u64("rows").map_err(answer_error)?;
        let bytes = r.u64("bytes_on_disk").map_err(answer_error)?;
        Ok(DiskUsage { spans, bytes })
    }

    /// Drops, on every node the URL lists, the days of spans (and of operations) that
    /// ended before the day of `cutoff_ns`: ClickHouse's day partitions, so retention
    /// costs no rewrite. Returns the partitions dropped.
    pub fn drop_days_before(&self, cutoff_ns: u64) -> Result<usize, StoreError> {
        let db = &self.endpoint().database;
        let tables = self.tables.by_day_local();
        let mut dropped = 0;
        for node in &self.endpoint().nodes {
            let answer = self.client.run_on(
                node,
                &format!(
                    "SELECT DISTINCT table, partition_id FROM system.parts WHERE active \
                     AND database = '{db}' AND table IN ('{}') \
                     AND max_date < toDate('1970-01-01') + {} FORMAT RowBinary",
                    tables.join("', '"),
                    cutoff_ns / NS_PER_DAY
                ),
            )?;
            let mut r = RowReader::new(&answer[..]);
            while !r.at_end().map_err(answer_error)? {
                let table = r.text("table").map_err(answer_error)?;
                let partition = r.text("partition_id").map_err(answer_error)?;
                // Both go into the statement: only our tables and a day's digits.
                if !tables.contains(&table.as_str())
                    || !partition.bytes().all(|b| b.is_ascii_digit())
                {
                    continue;
                }
                self.client.run_on(
                    node,
                    &format!("ALTER TABLE {db}.{table} DROP PARTITION ID '{partition}'"),
                )?;
                dropped += 1;
            }
        }
        Ok(dropped)
    }

    fn select_traces(
        &self,
        ids: &[TraceId],
        fields: &Fields,
        mut each: impl FnMut(Trace),
    ) -> Result<(), StoreError> {
        for list in id_lists(ids) {
            self.grouped(None, &list, Patience::Timeout, fields, &mut |trace| {
                each(trace);
                ControlFlow::Continue(())
            })?;
        }
        Ok(())
    }

    /// Every trace that `ids` names (a list of ids or a query of each node's tables that
    /// selects them), whole, one row per trace: from the one shard whose replicas `shard`
    /// lists, or else from every shard.
    fn grouped(
        &self,
        shard: Option<&[String]>,
        ids: &str,
        patience: Patience,
        fields: &Fields,
        visit: &mut dyn FnMut(Trace) -> ControlFlow<()>,
    ) -> Result<ScanStats, StoreError> {
        let t = &self.tables;
        let spill = format!(
            "max_bytes_before_external_group_by = {}",
            self.scan_spill_bytes
        );
        let (table, settings) = match shard {
            Some(_) => (&t.rows_local, spill),
            // A trace's spans are on one shard, so each shard groups its own and the
            // initiator only concatenates.
            None if self.endpoint().cluster.is_some() => (
                &t.rows,
                format!("{spill}, distributed_group_by_no_merge = 1"),
            ),
            None => (&t.rows, spill),
        };
        let sql = format!(
            "SELECT trace_id, groupArray(payload) FROM {table} WHERE trace_id IN ({ids}) \
             GROUP BY trace_id SETTINGS {settings} FORMAT RowBinary"
        );
        let answer: Box<dyn std::io::Read> = match shard {
            Some(nodes) => Box::new(self.client.stream_on(nodes, &sql, patience)?),
            None => Box::new(self.client.stream(&sql, patience)?),
        };
        let mut rows = RowReader::new(BufReader::with_capacity(1 << 16, answer));
        let mut stats = ScanStats::default();
        let mut payloads: Vec<Vec<u8>> = Vec::new();
        while !rows.at_end().map_err(answer_error)? {
            let id = rows.fixed16("trace_id").map_err(answer_error)?;
            let n = rows.len("payloads").map_err(answer_error)?;
            payloads.resize_with(n, Vec::new);
            for p in payloads.iter_mut() {
                rows.string_into("payload", p).map_err(answer_error)?;
            }
            let Some(id) = TraceId::new(u128::from_be_bytes(id)) else {
                continue;
            };
            let spans = decode_distinct(&mut payloads, fields)?;
            stats.traces += 1;
            stats.spans += spans.len() as u64;
            if visit(Trace::assemble(id, spans)).is_break() {
                break;
            }
        }
        Ok(stats)
    }
}

/// Spans stored and their size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct DiskUsage {
    /// Span rows (a span shipped twice counts twice until ClickHouse merges them).
    pub spans: u64,
    /// Bytes on disk of the active parts of the span table and of the search index and
    /// trace starts derived from it.
    pub bytes: u64,
}

/// The spans of `payloads`, a span stored twice (the same bytes) once.
fn decode_distinct(payloads: &mut [Vec<u8>], fields: &Fields) -> Result<Vec<Span>, StoreError> {
    payloads.sort_unstable();
    let mut spans = Vec::with_capacity(payloads.len());
    for (i, p) in payloads.iter().enumerate() {
        if i > 0 && payloads[i - 1] == *p {
            continue;
        }
        let span = match fields {
            Fields::Paths => native::decode_payload_without_attributes(p),
            _ => native::decode_payload(p),
        }
        .map_err(|e| answer_error(std::io::Error::other(format!("a stored span: {e}"))))?;
        spans.push(span);
    }
    Ok(spans)
}

/// The span table's row for `span` (see `schema::SPAN_COLUMNS`).
fn write_row(span: &Span, payload: &mut Vec<u8>, rows: &mut RowWriter) {
    payload.clear();
    native::encode_payload(span, payload);
    rows.u16((span.start / NS_PER_DAY).min(u64::from(u16::MAX)) as u16);
    rows.fixed(&span.trace_id.get().to_be_bytes());
    rows.fixed(&span.span_id.get().to_be_bytes());
    rows.u64(u64::from(crc32fast::hash(payload)) | (payload.len() as u64) << 32);
    rows.fixed(&span.parent_id.map_or(0, |p| p.get()).to_be_bytes());
    rows.u64(span.start);
    rows.u64(span.duration());
    rows.string(span.service.as_bytes());
    rows.string(span.name.as_bytes());
    rows.string(span.host.as_bytes());
    rows.u32(span.pid);
    rows.u8(kind_number(span.kind));
    let (status, message) = match &span.status {
        Status::Unset => (0, ""),
        Status::Ok => (1, ""),
        Status::Error(m) => (2, m.as_str()),
    };
    rows.u8(status);
    rows.string(message.as_bytes());
    rows.string(span.source.to_text().as_bytes());
    let attributes: Vec<_> = searchable_attributes(span).collect();
    rows.len(attributes.len());
    for kv in &attributes {
        rows.string(kv.key.as_bytes());
    }
    rows.len(attributes.len());
    for kv in &attributes {
        rows.string(attribute_text(&kv.value).as_bytes());
    }
    rows.string(payload);
}

fn kind_number(kind: SpanKind) -> u8 {
    match kind {
        SpanKind::Internal => 0,
        SpanKind::Server => 1,
        SpanKind::Client => 2,
        SpanKind::Producer => 3,
        SpanKind::Consumer => 4,
    }
}

fn read_strings(answer: &[u8]) -> Result<Vec<String>, StoreError> {
    let mut r = RowReader::new(answer);
    let mut out = Vec::new();
    while !r.at_end().map_err(answer_error)? {
        out.push(r.text("name").map_err(answer_error)?);
    }
    Ok(out)
}

/// Services, or operations of one service, listed at most (the first in order).
const MAX_LISTED: usize = 10_000;

impl TraceStore for ClickHouseStore {
    fn append(&self, spans: Vec<Span>) -> Result<(), StoreError> {
        if spans.is_empty() {
            return Ok(());
        }
        let mut rows = RowWriter::default();
        let mut payload = Vec::new();
        let mut operations: Vec<(u16, &str, &str)> = Vec::new();
        for span in &spans {
            write_row(span, &mut payload, &mut rows);
            let day = (span.start / NS_PER_DAY).min(u64::from(u16::MAX)) as u16;
            operations.push((day, &span.service, &span.name));
        }
        // Acknowledged only once every shard has its rows.
        let sync = [("insert_distributed_sync", "1")];
        self.client.insert(
            &format!("INSERT INTO {} FORMAT RowBinary", self.tables.rows),
            &sync,
            rows.bytes,
        )?;
        operations.sort_unstable();
        operations.dedup();
        let mut rows = RowWriter::default();
        for (day, service, name) in operations {
            rows.u16(day);
            rows.string(service.as_bytes());
            rows.string(name.as_bytes());
        }
        self.client.insert(
            &format!("INSERT INTO {} FORMAT RowBinary", self.tables.operations),
            &sync,
            rows.bytes,
        )
    }

    fn trace(&self, id: TraceId) -> Result<Option<Trace>, StoreError> {
        let mut found = None;
        match &self.shards {
            // Only the shard that holds the trace is asked.
            Some(map) => {
                let shard = Some(map.nodes(map.shard_of(id)));
                let id = format!("unhex('{id}')");
                self.grouped(shard, &id, Patience::Timeout, &Fields::All, &mut |t| {
                    found = Some(t);
                    ControlFlow::Continue(())
                })?;
            }
            None => self.select_traces(&[id], &Fields::All, |t| found = Some(t))?,
        }
        Ok(found)
    }

    fn search_until(
        &self,
        query: &SearchQuery,
        stop: &(dyn Fn() -> ControlFlow<()> + Sync),
    ) -> Result<Vec<TraceSummary>, StoreError> {
        let ids = search::newest_matching(&self.client, &self.tables, query)?;
        if stop().is_break() {
            return Ok(Vec::new());
        }
        let mut summaries = Vec::with_capacity(ids.len());
        let mut linked = Vec::new();
        self.select_traces(&ids, &Fields::All, |t| {
            let found_at = ids.iter().position(|&id| id == t.trace_id);
            if t.links.is_empty() {
                summaries.push((found_at, TraceSummary::of(&t)));
            } else {
                linked.push((found_at, t));
            }
        })?;
        // A request split in two traces is listed once, whole, where the first was found.
        for (found_at, t) in linked {
            let request = causeway_store::linked::joined(self, t)?;
            summaries.push((found_at, TraceSummary::of(&request)));
        }
        // In the order the search found them.
        summaries.sort_by_key(|(found_at, _)| *found_at);
        let mut listed = std::collections::HashSet::new();
        Ok(summaries
            .into_iter()
            .map(|(_, s)| s)
            .filter(|s| listed.insert(s.trace_id))
            .collect())
    }

    fn scan_fields(
        &self,
        window: TimeWindow,
        fields: &Fields,
        visit: &(dyn Fn(Trace) -> ControlFlow<()> + Sync),
    ) -> Result<ScanStats, StoreError> {
        let (a, b) = (window.start, window.end);
        // Traces whose first span is in the window.
        let ids = format!(
            "SELECT trace_id FROM {} GROUP BY trace_id \
             HAVING minMerge(first) >= {a} AND minMerge(first) < {b}",
            self.tables.trace_starts_local
        );
        let Some(map) = &self.shards else {
            return self.grouped(None, &ids, Patience::AsLongAsItTakes, fields, &mut |t| {
                visit(t)
            });
        };
        // One stream per shard, each decoded on its own thread; a Break on one stops all.
        let stop = AtomicBool::new(false);
        let (traces, spans) = (AtomicU64::new(0), AtomicU64::new(0));
        let visit_until_stopped = |t: Trace| {
            if stop.load(Ordering::Relaxed) {
                return ControlFlow::Break(());
            }
            traces.fetch_add(1, Ordering::Relaxed);
            spans.fetch_add(t.spans.len() as u64, Ordering::Relaxed);
            let flow = visit(t);
            if flow.is_break() {
                stop.store(true, Ordering::Relaxed);
            }
            flow
        };
        std::thread::scope(|s| {
            let threads: Vec<_> = map
                .shards()
                .map(|nodes| {
                    let (ids, visit) = (&ids, &visit_until_stopped);
                    let patience = Patience::AsLongAsItTakes;
                    s.spawn(move || {
                        self.grouped(Some(nodes), ids, patience, fields, &mut |t| visit(t))
                    })
                })
                .collect();
            threads.into_iter().try_for_each(|t| {
                t.join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
                    .map(drop)
            })
        })?;
        Ok(ScanStats {
            traces: traces.into_inner(),
            spans: spans.into_inner(),
        })
    }

    fn stats(&self) -> StoreStats {
        StoreStats::default()
    }

    fn services(&self) -> Result<Vec<String>, StoreError> {
        read_strings(&self.client.run(&format!(
            "SELECT DISTINCT service FROM {} ORDER BY service LIMIT {MAX_LISTED} FORMAT RowBinary",
            self.tables.operations
        ))?)
    }

    fn operations(&self, service: &str) -> Result<Vec<String>, StoreError> {
        // Log-record carriers and parent links are stored as spans, but are no operation.
        read_strings(&self.client.run(&format!(
            "SELECT DISTINCT name FROM {} WHERE service = {} AND name NOT IN ({}, {}, {}) \
             ORDER BY name LIMIT {MAX_LISTED} FORMAT RowBinary",
            self.tables.operations,
            quote(service),
            quote(causeway_model::logs::LOG_RECORDS),
            quote(causeway_model::parent_links::PARENT_LINK),
            quote(causeway_model::parent_links::TRACE_LINK),
        ))?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_escape_quotes_backslashes_and_controls() {
        assert_eq!(quote("a'b\\c\n\u{0}é"), "'a\\'b\\\\c\\x0a\\x00é'");
    }

    /// A span table sharded by another key than the one the client computes (as an
    /// earlier build made it) is read through the `Distributed` table, not by shard,
    /// and every trace is still found.
    #[test]
    fn a_span_table_sharded_by_another_key_is_not_read_by_shard() {
        let cluster = crate::local_cluster::Cluster::start(2);
        let url = cluster.url("rekeyed");
        let endpoint = Endpoint::parse(&url).unwrap();
        let store = ClickHouseStore::open(endpoint.clone(), ClickHouseOptions::default()).unwrap();
        assert!(store.shards().is_some());
        let t = &store.tables;
        for node in &endpoint.nodes {
            for sql in [
                format!("DROP TABLE {}", t.rows),
                format!(
                    "CREATE TABLE {} AS {} ENGINE = Distributed({}, rekeyed, \
                     span_rows_local, cityHash64(trace_id))",
                    t.rows,
                    t.rows_local,
                    crate::local_cluster::CLUSTER
                ),
            ] {
                store.client.run_on(node, &sql).unwrap();
            }
        }
        let store = ClickHouseStore::open(endpoint, ClickHouseOptions::default()).unwrap();
        assert!(store.shards().is_none());
        let mut g = causeway_testkit::Generator::new(4, 1_700_000_000_000_000_000, 1_000);
        let traces: Vec<Vec<Span>> = (0..40).map(|_| g.trace()).collect();
        store.append(traces.concat()).unwrap();
        for t in &traces {
            let found = store.trace(t[0].trace_id).unwrap().expect("found");
            assert_eq!(found.spans.len(), t.len());
        }
    }

    /// Spans stored before the search index existed are found through it once the
    /// schema is upgraded.
    #[test]
    fn an_upgrade_indexes_the_spans_stored_before_it() {
        use std::collections::BTreeSet;

        let cluster = crate::local_cluster::Cluster::start(2);
        let endpoint = Endpoint::parse(&cluster.url("upgraded")).unwrap();
        let client = Client::new(endpoint.clone(), Duration::from_secs(60)).unwrap();
        schema::migrate_to(&client, 1).unwrap();
        let before = ClickHouseStore {
            tables: Tables::of(&endpoint),
            shards: None,
            client,
            scan_spill_bytes: 1 << 30,
        };
        let mut g = causeway_testkit::Generator::new(3, 1_700_000_000_000_000_000, 1_000);
        let spans: Vec<Span> = (0..60).flat_map(|_| g.trace()).collect();
        before.append(spans.clone()).unwrap();

        let store = ClickHouseStore::open(endpoint, ClickHouseOptions::default()).unwrap();
        assert_eq!(schema::version(store.client()).unwrap(), schema::VERSION);
        // Spans stored after the upgrade reach the indexes through its views.
        let after: Vec<Span> = (0..60).flat_map(|_| g.trace()).collect();
        store.append(after.clone()).unwrap();
        let spans: Vec<Span> = spans.into_iter().chain(after).collect();
        let span = &spans[spans.len() / 2];
        let by_operation = SearchQuery {
            service: Some(span.service.to_string()),
            operation: Some(span.name.to_string()),
            limit: 1000,
            ..SearchQuery::default()
        };
        let attribute = &span.attributes[0];
        let by_attribute = SearchQuery {
            tags: vec![(
                attribute.key.to_string(),
                causeway_store::attribute_text(&attribute.value).into_owned(),
            )],
            limit: 1000,
            ..SearchQuery::default()
        };
        for query in [by_operation, by_attribute] {
            let found: BTreeSet<TraceId> = store
                .search(&query)
                .unwrap()
                .iter()
                .map(|s| s.trace_id)
                .collect();
            let want: BTreeSet<TraceId> = spans
                .iter()
                .filter(|s| query.matches(s))
                .map(|s| s.trace_id)
                .collect();
            assert_eq!(found, want, "{query:?}");
        }
        let scanned = store
            .scan_fields(
                TimeWindow::ALL,
                &Fields::All,
                &|_| ControlFlow::Continue(()),
            )
            .unwrap();
        assert_eq!(scanned.traces, 120);
        assert_eq!(scanned.spans, spans.len() as u64);
    }
}
