//! Search: the traces with a span that meets every condition of a query, the latest to
//! start first.
//!
//! Which table answers depends on the query: with a tag the attribute index names the
//! traces to look in; with a service, the span index by (service, name, start) holds the
//! spans; otherwise every span is read. Traces are ranked by `trace_starts`.
//!
//! The ranking is `SELECT trace_id, minMerge(first) FROM trace_starts WHERE trace_id IN
//! (SELECT trace_id FROM <spans> WHERE <condition>) GROUP BY trace_id ORDER BY ... DESC
//! LIMIT n`, where `<spans>` is: with a tag the index holds (any but `error=true`, which an
//! error status meets too; a value up to 128 bytes), `span_rows_local` restricted to the
//! traces `attr_index_local` names for it (`trace_id` leads the primary key, so only their
//! granules are read), every condition then checked on each span (tags through
//! `arrayExists` over the two arrays); with a service and no tag, a range of
//! `span_index_local`; otherwise every span of `span_rows_local`. The derived tables are
//! also limited to the window's days.
//!
//! A search with a service and no tag ranks only the traces of its newest matching spans
//! (`newest_by_span_start`): `operation_spans` gives the operation's (or service's) span
//! count and first and last start in the window, from which a floor is chosen that should
//! leave twice the limit of spans after it were they spread evenly (doubled again for
//! unevenness), and the ranking above runs on the matching spans of `span_index_local` at
//! or after the floor, a range of its key. (18.16 cannot read a key range backwards, so
//! `ORDER BY start DESC LIMIT n` would read all of a popular operation's rows.) A trace none
//! of them names has no matching span after the floor, so it starts before it: once `limit`
//! ranked traces start at or after the floor they are the answer; else the range grows
//! fourfold (a host, duration or error condition thins the matches, or they come long after
//! their traces start) until it holds every matching span. The traces found are then loaded
//! whole and summarised.

use causeway_model::TraceId;
use causeway_store::{SearchQuery, StoreError, TimeWindow};

use crate::http::Client;
use crate::literals::{answer_error, quote, NS_PER_DAY};
use crate::rowbinary::RowReader;
use crate::schema;
use crate::schema::Tables;

/// The ids of the `q.effective_limit()` traces that match `q` and started last, latest
/// first (ties by the greater id).
pub(crate) fn newest_matching(
    client: &Client,
    tables: &Tables,
    q: &SearchQuery,
) -> Result<Vec<TraceId>, StoreError> {
    if q.service.is_some() && q.tags.is_empty() {
        return newest_by_span_start(client, tables, q);
    }
    let t = tables;
    let condition = search_condition(q);
    // The spans that match, each node's own: by a range of the attribute index and then
    // the few traces it names, or by every span.
    let matching = match indexed_tag(q) {
        Some((key, value)) => format!(
            "SELECT trace_id FROM {} WHERE trace_id IN (SELECT trace_id FROM {} \
             WHERE key = {} AND value = {} AND {}) AND {condition}",
            t.rows_local,
            t.attr_index_local,
            quote(key),
            quote(value),
            days_condition(q.window)
        ),
        None => format!("SELECT trace_id FROM {} WHERE {condition}", t.rows_local),
    };
    Ok(newest_of(client, tables, &matching, q.effective_limit())?
        .into_iter()
        .map(|(id, _)| id)
        .collect())
}

/// The `limit` traces that the spans `matching` selects (on each node, of its own
/// tables) name and that started last, with their starts, latest first.
fn newest_of(
    client: &Client,
    tables: &Tables,
    matching: &str,
    limit: usize,
) -> Result<Vec<(TraceId, u64)>, StoreError> {
    let answer = client.run(&format!(
        "SELECT trace_id, minMerge(first) AS first FROM {} WHERE trace_id IN ({matching}) \
         GROUP BY trace_id ORDER BY first DESC, trace_id DESC LIMIT {limit} FORMAT RowBinary",
        tables.trace_starts,
    ))?;
    ids_and_starts(&answer)
}

/// The newest traces by the span index, read from its latest matching spans back.
///
/// `operation_spans` tells how many spans the service (and operation) has and over what
/// time; a round ranks the traces named by the matching spans that start at or after a
/// floor chosen to leave about twice `limit` of them (a range of the index's key). A
/// trace none of them names has no matching span after the floor, so it starts before
/// it: once `limit` of the ranked traces start at or after the floor, they are the
/// answer. Otherwise the range grows fourfold (a host, duration or error condition thins
/// the spans out, or they come long after their traces start), until it holds every
/// matching span.
fn newest_by_span_start(
    client: &Client,
    tables: &Tables,
    q: &SearchQuery,
) -> Result<Vec<TraceId>, StoreError> {
    let limit = q.effective_limit();
    let days = days_condition(q.window);
    let Some(range) = operation_range(client, tables, q, &days)? else {
        return Ok(Vec::new());
    };
    let condition = format!("{} AND {days}", search_condition(q));
    // At least a nanosecond, so that it grows.
    let mut width = range.width_for(limit.saturating_mul(2)).max(1);
    loop {
        let floor = range.last.saturating_sub(width).max(range.first);
        let matching = format!(
            "SELECT trace_id FROM {} WHERE {condition} AND start >= {floor}",
            tables.span_index_local
        );
        let traces = newest_of(client, tables, &matching, limit)?;
        let every_span_seen = floor <= range.first;
        if every_span_seen || traces.get(limit - 1).is_some_and(|&(_, s)| s >= floor) {
            return Ok(traces.into_iter().map(|(id, _)| id).collect());
        }
        width = width.saturating_mul(4);
    }
}

/// What `operation_spans` says of the spans a search by service may match.
struct OperationRange {
    spans: u64,
    /// The first and last start, within the query's window.
    first: u64,
    last: u64,
}

impl OperationRange {
    /// The time back from the last start that holds about `n` spans if they were spread
    /// evenly, doubled for the unevenness.
    fn width_for(&self, n: usize) -> u64 {
        let span = (self.last - self.first) as f64 + 1.0;
        let share = n as f64 / self.spans.max(1) as f64;
        (span * share * 2.0).min(u64::MAX as f64) as u64
    }
}

/// The service's (and operation's) spans and their first and last start within `q`'s
/// window; none when it has no span there.
fn operation_range(
    client: &Client,
    tables: &Tables,
    q: &SearchQuery,
    days: &str,
) -> Result<Option<OperationRange>, StoreError> {
    let mut condition = vec![days.to_string()];
    if let Some(s) = &q.service {
        condition.push(format!("service = {}", quote(s)));
    }
    if let Some(s) = &q.operation {
        condition.push(format!("name = {}", quote(s)));
    }
    let answer = client.run(&format!(
        "SELECT toUInt64(countMerge(spans)), minMerge(first), maxMerge(last) FROM {} \
         WHERE {} FORMAT RowBinary",
        tables.operation_spans,
        condition.join(" AND ")
    ))?;
    let mut r = RowReader::new(&answer[..]);
    let spans = r.u64("spans").map_err(answer_error)?;
    let mut first = r.u64("first").map_err(answer_error)?;
    let mut last = r.u64("last").map_err(answer_error)?;
    if let Some(w) = q.window {
        first = first.max(w.start);
        last = last.min(w.end.saturating_sub(1));
    }
    Ok((spans > 0 && first <= last).then_some(OperationRange { spans, first, last }))
}

/// Rows of a trace id and a time.
fn ids_and_starts(answer: &[u8]) -> Result<Vec<(TraceId, u64)>, StoreError> {
    let mut r = RowReader::new(answer);
    let mut rows = Vec::new();
    while !r.at_end().map_err(answer_error)? {
        let id = r.fixed16("trace_id").map_err(answer_error)?;
        let time = r.u64("start").map_err(answer_error)?;
        rows.extend(TraceId::new(u128::from_be_bytes(id)).map(|id| (id, time)));
    }
    Ok(rows)
}

/// The SQL condition a span must meet to match `q`.
fn search_condition(q: &SearchQuery) -> String {
    let mut all = vec!["1".to_string()];
    if let Some(s) = &q.service {
        all.push(format!("service = {}", quote(s)));
    }
    if let Some(s) = &q.operation {
        all.push(format!("name = {}", quote(s)));
    }
    if let Some(s) = &q.host {
        all.push(format!("host = {}", quote(s)));
    }
    if let Some(d) = q.min_duration {
        all.push(format!("duration >= {d}"));
    }
    if let Some(d) = q.max_duration {
        all.push(format!("duration <= {d}"));
    }
    if q.error {
        all.push("status = 2".into());
    }
    if let Some(kind) = &q.source {
        // Inferred spans' source carries their confidence (`inferred:0.75`).
        all.push(format!(
            "(source = {kind} OR startsWith(source, {prefix})) AND name NOT IN ({}, {}, {})",
            quote(causeway_model::logs::LOG_RECORDS),
            quote(causeway_model::parent_links::PARENT_LINK),
            quote(causeway_model::parent_links::TRACE_LINK),
            kind = quote(kind),
            prefix = quote(&format!("{kind}:")),
        ));
    }
    if let Some(w) = q.window {
        all.push(format!("start >= {} AND start < {}", w.start, w.end));
    }
    for (key, value) in &q.tags {
        let tag = format!(
            "arrayExists((k, v) -> k = {} AND v = {}, attr_keys, attr_values)",
            quote(key),
            quote(value)
        );
        all.push(if key == "error" && value == "true" {
            format!("(status = 2 OR {tag})")
        } else {
            tag
        });
    }
    all.join(" AND ")
}

/// A tag of `q` that the attribute index can answer: any but `error=true` (which an error
/// status meets too), with a value short enough to be indexed.
fn indexed_tag(q: &SearchQuery) -> Option<(&str, &str)> {
    q.tags
        .iter()
        .find(|(k, v)| !(k == "error" && v == "true") && v.len() <= schema::INDEXED_VALUE_MAX)
        .map(|(k, v)| (k.as_str(), v.as_str()))
}

/// The condition on a derived table's `day` that keeps the days of `window`, or none.
fn days_condition(window: Option<TimeWindow>) -> String {
    let mut all = vec!["1".to_string()];
    if let Some(w) = window {
        // Dates beyond ClickHouse's (past 2105) are no bound.
        let day = |ns: u64| Some(ns / NS_PER_DAY).filter(|&d| d < u64::from(u16::MAX));
        if let Some(first) = day(w.start).filter(|&d| d > 0) {
            all.push(format!("day >= toDate('1970-01-01') + {first}"));
        }
        if let Some(last) = day(w.end.saturating_sub(1)) {
            all.push(format!("day <= toDate('1970-01-01') + {last}"));
        }
    }
    all.join(" AND ")
}
