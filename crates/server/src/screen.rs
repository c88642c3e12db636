//! Screening spans before they are stored: spans whose times cannot be real are
//! rejected, and what is valid but enormous is cut to the [`SpanLimits`] (names, keys,
//! attribute values with what they nest, and the counts of attributes, events, links and
//! messages), each cut reported, so one client's spans cannot make every later answer
//! huge.
//!
//! Rejected: a zero start, an end before the start, either end more than a day in the
//! future. Cut, by default: names to 1 KiB, keys to 256 B, each attribute value with
//! everything it nests to 64 KiB (a number counts 8 bytes; event names, status messages and
//! tracestate too), 1 000 attributes (the rest counted in `dropped_attributes`), 1 000
//! events (`dropped_events`), 1 000 links and 1 000 messages, 128 attributes per event or
//! link. Events and messages more than a day ahead are dropped.

use crate::now_ns;
use causeway_model::codec::native::MAX_VALUE_DEPTH;
use causeway_model::{KeyValue, Span, Status, Value};

use crate::ingest::Outcome;

const DAY_NS: u64 = 86_400 * 1_000_000_000;

/// Bytes a non-text scalar counts for against a value's limit.
const SCALAR_BYTES: usize = 8;

/// How large a stored span may be. Past a limit, text is cut (on a character boundary)
/// and lists are shortened; the span is kept and the cut reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpanLimits {
    /// Span, service and host names.
    pub max_name_bytes: usize,
    /// Attribute keys.
    pub max_key_bytes: usize,
    /// One attribute value, with every string, byte string and element it nests (a
    /// number counts 8 bytes); also event names, status messages and tracestate.
    pub max_value_bytes: usize,
    /// Attributes of one span (its resource's and scope's included); the rest are
    /// dropped and counted in the span's dropped attributes.
    pub max_attributes: usize,
    /// Events of one span; the rest are dropped and counted in its dropped events.
    pub max_events: usize,
    /// Links of one span, and messages of one span.
    pub max_links: usize,
    /// Attributes of one event or link.
    pub max_nested_attributes: usize,
}

impl Default for SpanLimits {
    fn default() -> Self {
        SpanLimits {
            max_name_bytes: 1024,
            max_key_bytes: 256,
            max_value_bytes: 64 << 10,
            max_attributes: 1000,
            max_events: 1000,
            max_links: 1000,
            max_nested_attributes: 128,
        }
    }
}

/// `s` cut to at most `max` bytes on a character boundary; its length before, if cut.
fn cut(s: &mut String, max: usize) -> Option<usize> {
    if s.len() <= max {
        return None;
    }
    let was = s.len();
    let mut at = max;
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    s.truncate(at);
    Some(was)
}

/// `v` cut to spend at most `budget` bytes (taken off it); true if anything was cut.
fn cut_value(v: &mut Value, budget: &mut usize, depth: usize) -> bool {
    match v {
        Value::Str(s) => {
            let cut = cut(s, *budget).is_some();
            *budget -= s.len();
            cut
        }
        Value::Bytes(b) => {
            let cut = b.len() > *budget;
            b.truncate(*budget);
            *budget -= b.len();
            cut
        }
        Value::Array(items) => {
            let mut changed = false;
            let mut kept = 0;
            for item in items.iter_mut() {
                // Past the decoders' depth nothing is kept; an element needs room (a
                // number all of its 8 bytes).
                let scalar = matches!(item, Value::Bool(_) | Value::I64(_) | Value::F64(_));
                if depth + 1 >= MAX_VALUE_DEPTH
                    || *budget == 0
                    || (scalar && *budget < SCALAR_BYTES)
                {
                    break;
                }
                changed |= cut_value(item, budget, depth + 1);
                kept += 1;
            }
            if kept < items.len() {
                items.truncate(kept);
                changed = true;
            }
            changed
        }
        Value::Bool(_) | Value::I64(_) | Value::F64(_) => {
            *budget = budget.saturating_sub(SCALAR_BYTES);
            false
        }
    }
}

/// The bytes `v` counts for against a value's limit (what it nests within the decoders'
/// depth).
fn value_bytes(v: &Value, depth: usize) -> usize {
    match v {
        Value::Str(s) => s.len(),
        Value::Bytes(b) => b.len(),
        Value::Array(items) if depth + 1 < MAX_VALUE_DEPTH => items
            .iter()
            .map(|i| value_bytes(i, depth + 1))
            .fold(0, usize::saturating_add),
        Value::Array(_) => 0,
        Value::Bool(_) | Value::I64(_) | Value::F64(_) => SCALAR_BYTES,
    }
}

/// Reports of the cuts made to one span, each naming the span and what was cut.
struct Cuts<'a> {
    who: String,
    problems: &'a mut Vec<String>,
}

impl Cuts<'_> {
    fn note(&mut self, what: std::fmt::Arguments<'_>) {
        self.problems.push(format!("{}: {what}", self.who));
    }
}

/// Keeps the first `max` of `items`, noting how many `what` were dropped; that number.
fn keep_first<T>(items: &mut Vec<T>, max: usize, what: &str, cuts: &mut Cuts<'_>) -> u32 {
    if items.len() <= max {
        return 0;
    }
    let over = items.len() - max;
    items.truncate(max);
    cuts.note(format_args!(
        "{over} {what} dropped past the limit of {max}"
    ));
    u32::try_from(over).unwrap_or(u32::MAX)
}

impl SpanLimits {
    /// Rejects spans whose times cannot be real (start 0, end before start, either more
    /// than a day in the future) and cuts the rest to the limits. Every rejection and
    /// cut is noted in `out`. Returns true when a kept span was changed.
    pub(crate) fn screen(&self, spans: &mut Vec<Span>, out: &mut Outcome) -> bool {
        let horizon = now_ns().saturating_add(DAY_NS);
        let mut changed = false;
        let mut problems = Vec::new();
        spans.retain_mut(|s| {
            // Named by ids only: the name itself may be what is too long.
            let who = format!("span {} of trace {}", s.span_id, s.trace_id);
            let problem = if s.start == 0 {
                Some("start time is 0".to_string())
            } else if s.end < s.start {
                Some(format!("ends at {} before it starts at {}", s.end, s.start))
            } else if s.end > horizon {
                Some(format!(
                    "ends at {} ns, more than a day in the future",
                    s.end
                ))
            } else {
                None
            };
            if let Some(p) = problem {
                out.rejected += 1;
                problems.push(format!("{who}: {p}"));
                return false;
            }
            let mut cuts = Cuts {
                who,
                problems: &mut problems,
            };
            changed |= self.cut_span(s, horizon, &mut cuts);
            true
        });
        for p in problems {
            out.note(p);
        }
        changed
    }

    /// Cuts one span to the limits; true if anything was cut.
    fn cut_span(&self, s: &mut Span, horizon: u64, cuts: &mut Cuts<'_>) -> bool {
        let mut changed = false;
        if let Some(was) = cut(&mut s.name, self.max_name_bytes) {
            cuts.note(format_args!(
                "name cut from {was} to {} bytes",
                self.max_name_bytes
            ));
            changed = true;
        }
        for (what, field) in [("service", &mut s.service), ("host", &mut s.host)] {
            if field.len() > self.max_name_bytes {
                let mut text = field.to_string();
                let was = cut(&mut text, self.max_name_bytes).unwrap_or(0);
                *field = text.into();
                cuts.note(format_args!(
                    "{what} name cut from {was} to {} bytes",
                    self.max_name_bytes
                ));
                changed = true;
            }
        }
        if let Status::Error(message) = &mut s.status {
            if let Some(was) = cut(message, self.max_value_bytes) {
                cuts.note(format_args!(
                    "status message cut from {was} to {} bytes",
                    self.max_value_bytes
                ));
                changed = true;
            }
        }
        if s.trace_state.len() > self.max_value_bytes {
            cuts.note(format_args!(
                "tracestate of {} bytes dropped",
                s.trace_state.len()
            ));
            s.trace_state.clear();
            changed = true;
        }
        let over = keep_first(&mut s.attributes, self.max_attributes, "attributes", cuts);
        s.dropped_attributes = s.dropped_attributes.saturating_add(over);
        changed |= over > 0;
        changed |= self.cut_attributes(&mut s.attributes, "", cuts);
        // Events and messages past the horizon would make the span last forever.
        let before = s.events.len();
        s.events.retain(|e| e.time <= horizon);
        let future = before - s.events.len();
        if future > 0 {
            cuts.note(format_args!(
                "{future} events more than a day in the future dropped"
            ));
            changed = true;
        }
        let over = keep_first(&mut s.events, self.max_events, "events", cuts);
        s.dropped_events = s.dropped_events.saturating_add(over);
        changed |= over > 0;
        for (i, e) in s.events.iter_mut().enumerate() {
            if let Some(was) = cut(&mut e.name, self.max_value_bytes) {
                cuts.note(format_args!(
                    "event {i}'s name cut from {was} to {} bytes",
                    self.max_value_bytes
                ));
                changed = true;
            }
            changed |= self.cut_nested(&mut e.attributes, &format!("event {i}'s "), cuts);
        }
        changed |= keep_first(&mut s.links, self.max_links, "links", cuts) > 0;
        for (i, l) in s.links.iter_mut().enumerate() {
            changed |= self.cut_nested(&mut l.attributes, &format!("link {i}'s "), cuts);
        }
        let before = s.messages.len();
        s.messages.retain(|m| m.time <= horizon);
        if s.messages.len() > self.max_links {
            s.messages.truncate(self.max_links);
        }
        if s.messages.len() < before {
            cuts.note(format_args!(
                "{} messages dropped (past the limit of {} or more than a day in the future)",
                before - s.messages.len(),
                self.max_links
            ));
            changed = true;
        }
        for m in &mut s.messages {
            if let Some(peer) = &mut m.peer {
                if let Some(was) = cut(peer, self.max_name_bytes) {
                    cuts.note(format_args!(
                        "a message's peer cut from {was} to {} bytes",
                        self.max_name_bytes
                    ));
                    changed = true;
                }
            }
        }
        changed
    }

    /// An event's or link's attributes: at most [`SpanLimits::max_nested_attributes`].
    fn cut_nested(&self, attrs: &mut Vec<KeyValue>, whose: &str, cuts: &mut Cuts<'_>) -> bool {
        let what = format!("of {whose}attributes");
        let changed = keep_first(attrs, self.max_nested_attributes, &what, cuts) > 0;
        changed | self.cut_attributes(attrs, whose, cuts)
    }

    /// Keys and values cut to their limits.
    fn cut_attributes(&self, attrs: &mut [KeyValue], whose: &str, cuts: &mut Cuts<'_>) -> bool {
        let mut changed = false;
        for kv in attrs {
            if let Some(was) = cut(&mut kv.key, self.max_key_bytes) {
                cuts.note(format_args!(
                    "{whose}attribute key {:?}... cut from {was} to {} bytes",
                    kv.key.chars().take(40).collect::<String>(),
                    self.max_key_bytes
                ));
                changed = true;
            }
            let was = value_bytes(&kv.value, 0);
            let mut budget = self.max_value_bytes;
            if cut_value(&mut kv.value, &mut budget, 0) {
                cuts.note(format_args!(
                    "{whose}attribute {:?} cut from {was} to {} bytes",
                    kv.key, self.max_value_bytes
                ));
                changed = true;
            }
        }
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::{Event, Link, SpanId, TraceId};
    use proptest::prelude::*;

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            ".{0,40}".prop_map(Value::Str),
            proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::Bytes),
            any::<i64>().prop_map(Value::I64),
            any::<bool>().prop_map(Value::Bool),
        ];
        leaf.prop_recursive(5, 48, 8, |inner| {
            proptest::collection::vec(inner, 0..8).prop_map(Value::Array)
        })
    }

    fn attributes(n: usize) -> impl Strategy<Value = Vec<KeyValue>> {
        proptest::collection::vec(
            (".{0,30}", value()).prop_map(|(key, value)| KeyValue { key, value }),
            0..n,
        )
    }

    fn span() -> impl Strategy<Value = Span> {
        (
            ".{0,60}",
            ".{0,30}",
            attributes(30),
            proptest::collection::vec((".{0,50}", attributes(8)), 0..30),
            proptest::collection::vec(attributes(8), 0..12),
        )
            .prop_map(|(name, service, attributes, events, links)| {
                let t = now_ns() - 1_000_000_000;
                let mut s = Span::new(
                    TraceId::new(1).unwrap(),
                    SpanId::new(1).unwrap(),
                    None,
                    name,
                    &service,
                    t,
                    t + 10,
                );
                s.attributes = attributes;
                s.events = events
                    .into_iter()
                    .map(|(name, attributes)| Event {
                        time: t,
                        name,
                        attributes,
                    })
                    .collect();
                s.links = links
                    .into_iter()
                    .map(|attributes| Link {
                        trace_id: TraceId::new(2).unwrap(),
                        span_id: SpanId::new(2).unwrap(),
                        attributes,
                    })
                    .collect();
                s
            })
    }

    /// Small limits, so generated spans pass them often.
    const SMALL: SpanLimits = SpanLimits {
        max_name_bytes: 20,
        max_key_bytes: 10,
        max_value_bytes: 50,
        max_attributes: 10,
        max_events: 8,
        max_links: 4,
        max_nested_attributes: 3,
    };

    proptest! {
        #[test]
        fn a_screened_span_is_within_every_limit_and_screening_again_changes_nothing(
            spans in proptest::collection::vec(span(), 1..4)
        ) {
            let mut spans = spans;
            let mut out = Outcome::default();
            SMALL.screen(&mut spans, &mut out);
            for s in &spans {
                prop_assert!(s.name.len() <= SMALL.max_name_bytes);
                prop_assert!(s.service.len() <= SMALL.max_name_bytes);
                prop_assert!(s.attributes.len() <= SMALL.max_attributes);
                prop_assert!(s.events.len() <= SMALL.max_events);
                prop_assert!(s.links.len() <= SMALL.max_links);
                let nested = s.events.iter().map(|e| &e.attributes)
                    .chain(s.links.iter().map(|l| &l.attributes));
                for attrs in nested {
                    prop_assert!(attrs.len() <= SMALL.max_nested_attributes);
                }
                let all = s.attributes.iter()
                    .chain(s.events.iter().flat_map(|e| &e.attributes))
                    .chain(s.links.iter().flat_map(|l| &l.attributes));
                for kv in all {
                    prop_assert!(kv.key.len() <= SMALL.max_key_bytes);
                    prop_assert!(value_bytes(&kv.value, 0) <= SMALL.max_value_bytes);
                }
            }
            let before = spans.clone();
            let mut again = Outcome::default();
            prop_assert!(!SMALL.screen(&mut spans, &mut again));
            prop_assert_eq!(spans, before);
        }
    }

    #[test]
    fn a_value_is_cut_with_everything_it_nests() {
        let mut budget = 10;
        let mut v = Value::Array(vec![
            Value::Str("abcdef".into()),
            Value::Str("ghijkl".into()),
            Value::Str("mnop".into()),
        ]);
        assert!(cut_value(&mut v, &mut budget, 0));
        assert_eq!(
            v,
            Value::Array(vec![Value::Str("abcdef".into()), Value::Str("ghij".into())])
        );
        let mut budget = 16;
        let mut numbers = Value::Array((0..10).map(Value::I64).collect());
        assert!(cut_value(&mut numbers, &mut budget, 0));
        assert_eq!(numbers, Value::Array(vec![Value::I64(0), Value::I64(1)]));
        let mut budget = 3;
        let mut text = Value::Str("é€".into());
        assert!(cut_value(&mut text, &mut budget, 0));
        assert_eq!(text, Value::Str("é".into()));
    }

    #[test]
    fn a_value_nested_past_the_decoders_depth_is_cut_there() {
        let mut v = Value::Str("x".into());
        for _ in 0..40 {
            v = Value::Array(vec![v]);
        }
        let mut budget = 1 << 20;
        assert!(cut_value(&mut v, &mut budget, 0));
        let mut depth = 0;
        let mut at = &v;
        while let Value::Array(items) = at {
            depth += 1;
            match items.first() {
                Some(inner) => at = inner,
                None => break,
            }
        }
        assert!(depth <= MAX_VALUE_DEPTH, "{depth}");
    }
}
