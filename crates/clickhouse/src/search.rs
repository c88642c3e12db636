//! Search: the traces with a span that meets every condition of a query, the latest to
//! start first.
//!
//! Which table answers depends on the query: with a tag the attribute index names the
//! traces to look in; with a service, the span index by (service, name, start) holds the
//! spans; otherwise every span is read. Traces are ranked by `trace_starts`.

use causeway_model::TraceId;
use causeway_store::{SearchQuery, StoreError, TimeWindow};

use crate::rowbinary::RowReader;
use crate::schema;
use crate::store::{answer_error, id_lists, quote, ClickHouseStore, NS_PER_DAY};

/// The ids of the `q.effective_limit()` traces that match `q` and started last, latest
/// first (ties by the greater id).
pub(crate) fn newest_matching(
    store: &ClickHouseStore,
    q: &SearchQuery,
) -> Result<Vec<TraceId>, StoreError> {
    if q.service.is_some() && q.tags.is_empty() {
        if let Some(ids) = newest_by_span_start(store, q)? {
            return Ok(ids);
        }
    }
    let t = &store.tables;
    let condition = search_condition(q);
    let days = days_condition(q.window);
    // The spans that match, each node's own: by a range of the attribute index and then
    // the few traces it names, or by a range of the span index, or by every span.
    let matching = match indexed_tag(q) {
        Some((key, value)) => format!(
            "SELECT trace_id FROM {} WHERE trace_id IN (SELECT trace_id FROM {} \
             WHERE key = {} AND value = {} AND {days}) AND {condition}",
            t.rows_local,
            t.attr_index_local,
            quote(key),
            quote(value)
        ),
        None if q.service.is_some() && q.tags.is_empty() => format!(
            "SELECT trace_id FROM {} WHERE {condition} AND {days}",
            t.span_index_local
        ),
        None => format!("SELECT trace_id FROM {} WHERE {condition}", t.rows_local),
    };
    let answer = store.client.run(&format!(
        "SELECT trace_id, minMerge(first) AS first FROM {} WHERE trace_id IN ({matching}) \
         GROUP BY trace_id ORDER BY first DESC, trace_id DESC LIMIT {} FORMAT RowBinary",
        t.trace_starts,
        q.effective_limit()
    ))?;
    Ok(ids_and_starts(&answer)?
        .into_iter()
        .map(|(id, _)| id)
        .collect())
}

/// The newest traces by the span index read from its latest matching spans back: the
/// latest `n` matching spans name candidate traces, whose starts `trace_starts` gives;
/// a trace not among them starts no later than the earliest of those spans, so once
/// `limit` candidates started after it they are the answer. Otherwise `n` grows, up to a
/// bound past which `None` leaves it to the whole ranking (a service whose matching spans
/// mostly come long after their traces start).
fn newest_by_span_start(
    store: &ClickHouseStore,
    q: &SearchQuery,
) -> Result<Option<Vec<TraceId>>, StoreError> {
    let t = &store.tables;
    let limit = q.effective_limit();
    let condition = format!("{} AND {}", search_condition(q), days_condition(q.window));
    let mut n = limit * 2;
    while n <= limit * 128 {
        let answer = store.client.run(&format!(
            "SELECT trace_id, start FROM {} WHERE {condition} \
             ORDER BY start DESC LIMIT {n} FORMAT RowBinary",
            t.span_index
        ))?;
        let spans = ids_and_starts(&answer)?;
        let every_span_seen = spans.len() < n;
        let Some(&(_, earliest)) = spans.last() else {
            return Ok(Some(Vec::new()));
        };
        let mut ids: Vec<TraceId> = spans.into_iter().map(|(id, _)| id).collect();
        ids.sort_unstable();
        ids.dedup();
        let mut traces = Vec::with_capacity(ids.len());
        for list in id_lists(&ids) {
            let answer = store.client.run(&format!(
                "SELECT trace_id, minMerge(first) AS first FROM {} \
                 WHERE trace_id IN ({list}) GROUP BY trace_id FORMAT RowBinary",
                t.trace_starts
            ))?;
            traces.extend(ids_and_starts(&answer)?);
        }
        traces.sort_unstable_by_key(|&(id, start)| std::cmp::Reverse((start, id)));
        if every_span_seen || traces.get(limit - 1).is_some_and(|&(_, s)| s > earliest) {
            traces.truncate(limit);
            return Ok(Some(traces.into_iter().map(|(id, _)| id).collect()));
        }
        n *= 4;
    }
    Ok(None)
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
