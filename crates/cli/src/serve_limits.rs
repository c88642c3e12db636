//! `causeway serve`'s limits: what one client, or a few, may take of the server
//! (connections, time, memory, the size of what is stored and answered). Each flag sets
//! one field of [`causeway_server::Limits`]; the defaults are the library's.

use std::time::Duration;

use causeway_server::{ConnectionLimits, Limits, PivotLimits, SpanLimits};
use causeway_store::sql::SqlLimits;
use clap::Args;

/// A size in bytes: a count, or with a unit (`64KiB`, `16MiB`, `1GiB`; `K`, `M`, `G` and
/// `KB`, `MB`, `GB` are the same powers of 1024).
pub fn parse_bytes(text: &str) -> Result<usize, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: usize = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size (a count of bytes, or 64KiB, 16MiB, 1GiB)"))?;
    let scale: usize = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is too large"))
}

fn bytes(n: usize) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{}GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}KiB", n >> 10),
        n => n.to_string(),
    }
}

/// A size flag's value: read by [`parse_bytes`], shown with its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub usize);

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&bytes(self.0))
    }
}

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Size, String> {
        parse_bytes(s).map(Size)
    }
}

fn secs(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

fn defaults() -> Limits {
    Limits::default()
}

/// The limits, as `serve`'s flags.
#[derive(Args)]
#[command(next_help_heading = "Limits (what one client, or a few, may take)")]
pub struct LimitArgs {
    /// Connections the query API holds at once; more are answered 503 and closed.
    #[arg(long, default_value_t = ConnectionLimits::default().max_query)]
    max_connections: usize,
    /// Connections each ingest listener (OTLP/HTTP, OTLP/gRPC) holds at once.
    #[arg(long, default_value_t = ConnectionLimits::default().max_ingest)]
    max_ingest_connections: usize,
    /// How long an HTTP request's headers may take to arrive; also how long a kept-alive
    /// connection waits for its next request.
    #[arg(long, default_value_t = secs(ConnectionLimits::default().header_timeout))]
    header_timeout: String,
    /// A connection on which nothing moved for this long (and no request is being
    /// answered) is closed.
    #[arg(long, default_value_t = secs(ConnectionLimits::default().idle_timeout))]
    idle_timeout: String,
    /// How long a request body may take to arrive; past it the answer is 408.
    #[arg(long, default_value_t = secs(defaults().body_timeout))]
    body_timeout: String,
    /// Largest request body, after decompression (413 past it).
    #[arg(long, default_value_t = Size(defaults().max_body_bytes))]
    max_body: Size,
    /// Bytes of ingest bodies held at once, from their first byte until stored; a body
    /// that finds no room is answered 429.
    #[arg(long, default_value_t = Size(defaults().max_receiving_bytes))]
    max_receiving_bytes: Size,
    /// Bytes of query API request bodies held at once.
    #[arg(long, default_value_t = Size(defaults().max_query_receiving_bytes))]
    max_query_receiving_bytes: Size,
    /// Ingest requests decoded and stored at once (a body still arriving holds none);
    /// more are answered 429.
    #[arg(long, default_value_t = defaults().max_inflight)]
    max_inflight: usize,
    /// Span, service and host names are cut to this.
    #[arg(long, default_value_t = Size(SpanLimits::default().max_name_bytes))]
    max_name_bytes: Size,
    /// Attribute keys are cut to this.
    #[arg(long, default_value_t = Size(SpanLimits::default().max_key_bytes))]
    max_key_bytes: Size,
    /// An attribute value, with all it nests, is cut to this (also event names and
    /// status messages).
    #[arg(long, default_value_t = Size(SpanLimits::default().max_value_bytes))]
    max_attribute_bytes: Size,
    /// Attributes kept per span; the rest are dropped and counted.
    #[arg(long, default_value_t = SpanLimits::default().max_attributes)]
    max_span_attributes: usize,
    /// Events kept per span; the rest are dropped and counted.
    #[arg(long, default_value_t = SpanLimits::default().max_events)]
    max_span_events: usize,
    /// Links (and messages) kept per span.
    #[arg(long, default_value_t = SpanLimits::default().max_links)]
    max_span_links: usize,
    /// Attributes kept per event and per link.
    #[arg(long, default_value_t = SpanLimits::default().max_nested_attributes)]
    max_event_attributes: usize,
    /// Bytes of names the service and operation lists hold; spans with names past it
    /// are stored and searchable, not listed (and counted).
    #[arg(long, default_value_t = Size(causeway_store::StoreOptions::default().max_catalog_bytes))]
    max_catalog_bytes: Size,
    /// Requests that read across the store (searches, analyses, checks, exports) run at
    /// once; more wait for a place until their time limit.
    #[arg(long, default_value_t = defaults().max_scans)]
    max_scans: usize,
    /// Bytes of capture records held for the joins (`/v1/captures`: a window and its
    /// context, across every agent's logs); a piece that finds them full is answered 503.
    #[arg(long, default_value_t = Size(defaults().max_capture_bytes))]
    max_capture_bytes: Size,
    /// Capture logs held at once; a new one past it is answered 503.
    #[arg(long, default_value_t = defaults().max_capture_logs)]
    max_capture_logs: usize,
    /// How long such a request may take, waiting for its place included; past it the
    /// answer is 503 (no place came free) or 408 (out of time).
    #[arg(long, default_value_t = secs(defaults().query_timeout))]
    query_timeout: String,
    /// Most traces one search answers (a larger `limit` is refused).
    #[arg(long, default_value_t = defaults().max_search_limit)]
    max_search_limit: usize,
    /// Most spans one answer of whole traces (a Jaeger search) holds; traces past it
    /// are left out and counted.
    #[arg(long, default_value_t = defaults().max_answer_spans)]
    max_answer_spans: usize,
    /// How long a SQL query may run; past it the answer is 408 and the query stops.
    #[arg(long, default_value_t = secs(SqlLimits::default().timeout))]
    sql_timeout: String,
    /// Memory SQL may use, all queries running together: their joins, sorts and groups
    /// draw on it; a batch an operator hands on may hold an eighth, a value a 32nd.
    #[arg(long, default_value_t = Size(SqlLimits::default().max_memory))]
    sql_memory: Size,
    /// Rows a SQL query returns at most; more are cut and the answer says so.
    #[arg(long, default_value_t = SqlLimits::default().max_rows)]
    sql_rows: usize,
    /// Bytes of rows (as JSON) a SQL query returns at most; more are cut and the answer
    /// says so.
    #[arg(long, default_value_t = Size(SqlLimits::default().max_result_bytes))]
    sql_result_bytes: Size,
    /// Pivot Tracing queries installed at once.
    #[arg(long, default_value_t = PivotLimits::default().max_queries)]
    pivot_max_queries: usize,
    /// Pivot Tracing tracepoint definitions kept.
    #[arg(long, default_value_t = PivotLimits::default().max_definitions)]
    pivot_max_definitions: usize,
    /// Processes the Pivot Tracing hub serves at once.
    #[arg(long, default_value_t = PivotLimits::default().max_processes)]
    pivot_max_processes: usize,
    /// A process not heard from for this long is forgotten, with its callsites.
    #[arg(long, default_value_t = secs(PivotLimits::default().process_expiry))]
    pivot_process_expiry: String,
    /// Callsites the hub keeps over every process.
    #[arg(long, default_value_t = PivotLimits::default().max_callsites)]
    pivot_max_callsites: usize,
    /// Callsites the hub keeps of one process.
    #[arg(long, default_value_t = PivotLimits::default().max_callsites_per_process)]
    pivot_max_callsites_per_process: usize,
}

fn duration(flag: &str, text: &str) -> anyhow::Result<Duration> {
    text.parse::<humantime::Duration>()
        .map(Into::into)
        .map_err(|e| anyhow::anyhow!("--{flag} {text:?}: {e} (expected a duration like 30s)"))
}

impl LimitArgs {
    /// Bytes of names the store's service and operation lists hold.
    pub fn catalog_bytes(&self) -> usize {
        self.max_catalog_bytes.0
    }

    /// The limits these flags set.
    pub fn limits(&self) -> anyhow::Result<Limits> {
        Ok(Limits {
            connections: ConnectionLimits {
                max_query: self.max_connections.max(1),
                max_ingest: self.max_ingest_connections.max(1),
                header_timeout: duration("header-timeout", &self.header_timeout)?,
                idle_timeout: duration("idle-timeout", &self.idle_timeout)?,
            },
            body_timeout: duration("body-timeout", &self.body_timeout)?,
            max_body_bytes: self.max_body.0,
            max_receiving_bytes: self.max_receiving_bytes.0,
            max_query_receiving_bytes: self.max_query_receiving_bytes.0,
            max_inflight: self.max_inflight.max(1),
            spans: SpanLimits {
                max_name_bytes: self.max_name_bytes.0,
                max_key_bytes: self.max_key_bytes.0,
                max_value_bytes: self.max_attribute_bytes.0,
                max_attributes: self.max_span_attributes,
                max_events: self.max_span_events,
                max_links: self.max_span_links,
                max_nested_attributes: self.max_event_attributes,
            },
            max_scans: self.max_scans.max(1),
            max_capture_bytes: self.max_capture_bytes.0,
            max_capture_logs: self.max_capture_logs.max(1),
            query_timeout: duration("query-timeout", &self.query_timeout)?,
            max_search_limit: self.max_search_limit.max(1),
            max_answer_spans: self.max_answer_spans.max(1),
            sql: SqlLimits {
                timeout: duration("sql-timeout", &self.sql_timeout)?,
                max_memory: self.sql_memory.0,
                max_rows: self.sql_rows.max(1),
                max_result_bytes: self.sql_result_bytes.0,
            },
            pivot: PivotLimits {
                max_queries: self.pivot_max_queries,
                max_definitions: self.pivot_max_definitions,
                max_processes: self.pivot_max_processes,
                process_expiry: duration("pivot-process-expiry", &self.pivot_process_expiry)?,
                max_callsites: self.pivot_max_callsites,
                max_callsites_per_process: self.pivot_max_callsites_per_process,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_with_or_without_units() {
        assert_eq!(parse_bytes("1048576"), Ok(1 << 20));
        assert_eq!(parse_bytes("64KiB"), Ok(64 << 10));
        assert_eq!(parse_bytes("16MiB"), Ok(16 << 20));
        assert_eq!(parse_bytes("16m"), Ok(16 << 20));
        assert_eq!(parse_bytes("1GiB"), Ok(1 << 30));
        assert!(parse_bytes("16 parsecs").unwrap_err().contains("unit"));
        assert!(parse_bytes("").is_err());
        assert!(parse_bytes("99999999999999999999GiB").is_err());
        for n in [1, 1000, 1 << 10, 3 << 20, 5 << 30] {
            assert_eq!(parse_bytes(&bytes(n)), Ok(n), "{n}");
        }
    }
}
