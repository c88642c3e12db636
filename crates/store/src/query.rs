//! What a search asks for and what it answers, and the time and duration syntax of the API.
//!
//! A `SearchQuery` names a service, operation, host, `key=value` tags, duration bounds, an
//! error flag, a window and a limit (20 by default, 10 000 at most). A tag matches the
//! span's attributes (its resource's and scope's among them), an event's or a link's, and
//! the conditions may be met in different places of one span; a trace matches when one of
//! its spans meets every condition.

use causeway_model::{Span, Trace, TraceId};
use serde::Serialize;

/// A half-open window of Unix nanoseconds, `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    /// First nanosecond in the window.
    pub start: u64,
    /// First nanosecond after it.
    pub end: u64,
}

impl TimeWindow {
    /// Every time there is.
    pub const ALL: TimeWindow = TimeWindow {
        start: 0,
        end: u64::MAX,
    };
    /// True when `t` lies in the window.
    pub fn contains(&self, t: u64) -> bool {
        t >= self.start && t < self.end
    }
    /// True when `[start, end]` overlaps the window.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        start < self.end && end >= self.start
    }
}

/// An indexed search: traces with one span that matches every given condition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SearchQuery {
    /// The span's service.
    pub service: Option<String>,
    /// The span's name.
    pub operation: Option<String>,
    /// The span's host.
    pub host: Option<String>,
    /// Attribute equalities, compared on the value's text form. `error=true` also matches
    /// a span whose status is error.
    pub tags: Vec<(String, String)>,
    /// Least span duration, in nanoseconds.
    pub min_duration: Option<u64>,
    /// Greatest span duration, in nanoseconds.
    pub max_duration: Option<u64>,
    /// Only spans that ended in error.
    pub error: bool,
    /// Only spans from this kind of source (one of `Source::KINDS`); log-record carriers
    /// and parent links are no source's spans.
    pub source: Option<String>,
    /// Window the span's start must lie in.
    pub window: Option<TimeWindow>,
    /// Least duration of the whole trace (latest end less earliest start), ns: a condition
    /// on the trace, not on one span, read by the sorted search ([`crate::search_sorted`]).
    pub trace_min_duration: Option<u64>,
    /// Greatest duration of the whole trace, ns, as `trace_min_duration`.
    pub trace_max_duration: Option<u64>,
    /// Most traces to return (0 means the default, 20).
    pub limit: usize,
}

impl SearchQuery {
    /// The limit in force.
    pub fn effective_limit(&self) -> usize {
        match self.limit {
            0 => 20,
            n => n.min(10_000),
        }
    }
    /// True when a trace lasting `duration` ns meets the trace-duration conditions.
    pub fn trace_duration_holds(&self, duration: u64) -> bool {
        self.trace_min_duration.is_none_or(|d| duration >= d)
            && self.trace_max_duration.is_none_or(|d| duration <= d)
    }
    /// True when `span` satisfies every condition on one span.
    pub fn matches(&self, span: &Span) -> bool {
        let eq = |want: &Option<String>, have: &str| want.as_deref().is_none_or(|w| w == have);
        eq(&self.service, &span.service)
            && eq(&self.operation, &span.name)
            && eq(&self.host, &span.host)
            && self.min_duration.is_none_or(|d| span.duration() >= d)
            && self.max_duration.is_none_or(|d| span.duration() <= d)
            && (!self.error || span.is_error())
            && self
                .source
                .as_deref()
                .is_none_or(|kind| span.source.kind() == kind && !span.is_carrier())
            && self.window.is_none_or(|w| w.contains(span.start))
            && self.tags.iter().all(|(k, v)| tag_matches(span, k, v))
    }
}

fn tag_matches(span: &Span, key: &str, want: &str) -> bool {
    if key == "error" && want == "true" && span.is_error() {
        return true;
    }
    searchable_attributes(span).any(|kv| kv.key == key && value_text_eq(&kv.value, want))
}

/// The attributes a tag search looks in: the span's own (its resource's and scope's are
/// among them), then its events' and links'.
pub fn searchable_attributes(span: &Span) -> impl Iterator<Item = &causeway_model::KeyValue> {
    span.attributes.iter().chain(nested_attributes(span))
}

/// The attributes of a span's events and links: search finds a span by them too.
pub(crate) fn nested_attributes(s: &Span) -> impl Iterator<Item = &causeway_model::KeyValue> {
    s.events
        .iter()
        .flat_map(|e| &e.attributes)
        .chain(s.links.iter().flat_map(|l| &l.attributes))
}

/// An attribute value as a tag search compares it: a string as itself, anything else in
/// its text form.
pub fn attribute_text(v: &causeway_model::Value) -> std::borrow::Cow<'_, str> {
    match v.as_str() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(v.to_string()),
    }
}

pub(crate) fn value_text_eq(v: &causeway_model::Value, want: &str) -> bool {
    match v.as_str() {
        Some(s) => s == want,
        None => v.to_string() == want,
    }
}

/// One line of a search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceSummary {
    /// The trace.
    #[serde(serialize_with = "hex")]
    pub trace_id: TraceId,
    /// Service of the earliest root span.
    pub root_service: String,
    /// Name of the earliest root span.
    pub root_operation: String,
    /// Earliest span start, Unix nanoseconds.
    pub start: u64,
    /// Latest span end minus earliest start, nanoseconds.
    pub duration: u64,
    /// Spans stored.
    pub span_count: usize,
    /// Spans that ended in error.
    pub error_count: usize,
    /// Spans per service, by service name.
    pub services: Vec<ServiceCount>,
    /// True while no span of the trace is a true root (every span stored names a parent):
    /// the trace is still arriving, and `root_*` name its earliest span, not its root.
    pub root_missing: bool,
}

/// Spans of one service in a trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServiceCount {
    /// Service name.
    pub name: String,
    /// Its spans.
    pub spans: usize,
}

fn hex<S: serde::Serializer>(id: &TraceId, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(id)
}

impl TraceSummary {
    /// Summarises an assembled trace.
    pub fn of(trace: &Trace) -> TraceSummary {
        let (start, end) = trace.bounds();
        let root = trace.roots.first().map(|&i| &trace.spans[i]);
        let mut services: std::collections::BTreeMap<&str, usize> = Default::default();
        for s in &trace.spans {
            *services.entry(&s.service).or_default() += 1;
        }
        TraceSummary {
            trace_id: trace.trace_id,
            root_service: root.map(|s| s.service.to_string()).unwrap_or_default(),
            root_operation: root.map(|s| s.name.clone()).unwrap_or_default(),
            start,
            duration: end.saturating_sub(start),
            span_count: trace.spans.len(),
            error_count: trace.spans.iter().filter(|s| s.is_error()).count(),
            services: services
                .into_iter()
                .map(|(name, spans)| ServiceCount {
                    name: name.to_string(),
                    spans,
                })
                .collect(),
            root_missing: trace
                .roots
                .iter()
                .all(|&i| trace.spans[i].parent_id.is_some()),
        }
    }
}

/// Reads a time given as Unix nanoseconds or RFC 3339 (`2026-11-22T06:00:00Z`).
pub fn parse_time(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t
            .parse::<u64>()
            .map_err(|_| format!("time {t:?} is out of range for Unix nanoseconds"));
    }
    let at = humantime::parse_rfc3339_weak(t)
        .map_err(|e| format!("invalid time {t:?}: expected Unix nanoseconds or RFC 3339 ({e})"))?;
    let since = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| format!("time {t:?} is before 1970"))?;
    u64::try_from(since.as_nanos()).map_err(|_| format!("time {t:?} is too far in the future"))
}

/// Reads a duration given as nanoseconds (`1500`) or with units (`1.5ms`, `2s`, `250us`).
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {t:?}: expected a number with an optional unit"))?;
    let scale = match unit.trim() {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        other => {
            return Err(format!(
                "invalid duration {t:?}: unknown unit {other:?} (use ns, us, ms, s, m or h)"
            ))
        }
    };
    let v = n * scale;
    if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 {
        return Err(format!("duration {t:?} is out of range"));
    }
    Ok(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn times_are_read_as_nanoseconds_or_rfc3339() {
        assert_eq!(
            parse_time("1700000000000000000"),
            Ok(1_700_000_000_000_000_000)
        );
        assert_eq!(
            parse_time("2023-11-14T22:13:20Z"),
            Ok(1_700_000_000_000_000_000)
        );
        assert_eq!(
            parse_time("2023-11-14T22:13:20.5Z"),
            Ok(1_700_000_000_500_000_000)
        );
        let err = parse_time("yesterday").unwrap_err();
        assert!(err.contains("\"yesterday\""), "{err}");
        assert!(parse_time("99999999999999999999999").is_err());
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("1500"), Ok(1500));
        assert_eq!(parse_duration("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration("2s"), Ok(2_000_000_000));
        assert_eq!(parse_duration("250us"), Ok(250_000));
        assert!(parse_duration("5 parsecs").unwrap_err().contains("parsecs"));
        assert!(parse_duration("").is_err());
    }

    proptest! {
        #[test]
        fn time_parsing_never_panics(s in ".{0,40}") {
            let _ = parse_time(&s);
            let _ = parse_duration(&s);
        }

        #[test]
        fn nanoseconds_round_trip(n in any::<u64>()) {
            prop_assert_eq!(parse_time(&n.to_string()), Ok(n));
        }
    }
}
