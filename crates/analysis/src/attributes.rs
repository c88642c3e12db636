//! The attribute keys seen in a window's spans, and the values of one: what the search
//! form offers as the user types (keys first, then the values of the key typed).
//!
//! Bounded whatever the window holds: at most [`MOST_KEYS`] keys and [`MOST_VALUES`]
//! values per key are counted (keys and values met after that are counted as
//! `untracked`), and values longer than [`LONGEST_VALUE`] bytes are not offered (a
//! statement or a payload is not typed into a search box).

use std::collections::HashMap;

use causeway_model::Trace;
use serde::Serialize;

/// Keys counted at most.
pub const MOST_KEYS: usize = 2_000;
/// Values of one key counted at most.
pub const MOST_VALUES: usize = 1_000;
/// The longest value offered, in bytes.
pub const LONGEST_VALUE: usize = 200;

/// A key or a value, with how many spans carry it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Seen {
    /// The key, or the value as text.
    pub text: String,
    /// Spans that carry it.
    pub spans: u64,
}

#[derive(Debug, Default)]
struct KeyCount {
    spans: u64,
    values: HashMap<String, u64>,
}

/// Keys and their values, counted over spans (of one service, when given).
#[derive(Debug, Default)]
pub struct Catalog {
    service: Option<String>,
    key: Option<String>,
    keys: HashMap<String, KeyCount>,
    untracked: u64,
}

/// What the catalog answers: the keys, most common first, or the values of one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Offered {
    /// Keys (no key asked) or the asked key's values, most spans first, then by text.
    pub seen: Vec<Seen>,
    /// Keys or values met past the bounds, not counted.
    pub untracked: u64,
}

impl Catalog {
    /// Counts keys (and, for `key`, its values only) of spans of `service` (any if `None`).
    pub fn new(service: Option<String>, key: Option<String>) -> Catalog {
        Catalog {
            service,
            key,
            ..Catalog::default()
        }
    }

    /// Counts the attributes of one trace's spans.
    pub fn add(&mut self, trace: &Trace) {
        for s in &trace.spans {
            if self
                .service
                .as_deref()
                .is_some_and(|want| *s.service != *want)
            {
                continue;
            }
            for kv in &s.attributes {
                if self.key.as_deref().is_some_and(|k| k != kv.key) {
                    continue;
                }
                self.count(&kv.key, || kv.value.to_string(), 1);
            }
        }
    }

    fn count(&mut self, key: &str, value: impl FnOnce() -> String, spans: u64) {
        if !self.keys.contains_key(key) {
            if self.keys.len() >= MOST_KEYS {
                self.untracked += spans;
                return;
            }
            self.keys.insert(key.to_string(), KeyCount::default());
        }
        let Some(k) = self.keys.get_mut(key) else {
            return;
        };
        k.spans += spans;
        if self.key.is_none() {
            return;
        }
        let v = value();
        if v.len() > LONGEST_VALUE {
            return;
        }
        if let Some(n) = k.values.get_mut(&v) {
            *n += spans;
        } else if k.values.len() < MOST_VALUES {
            k.values.insert(v, spans);
        } else {
            self.untracked += spans;
        }
    }

    /// Folds another shard's counts into these.
    pub fn merge(&mut self, other: Catalog) {
        self.untracked += other.untracked;
        for (key, k) in other.keys {
            if self.key.is_none() {
                self.count(&key, String::new, k.spans);
                continue;
            }
            // The spans are counted with the key's values, one value at a time.
            let mut counted = 0;
            for (value, n) in k.values {
                counted += n;
                self.count(&key, || value, n);
            }
            if let Some(mine) = self.keys.get_mut(&key) {
                mine.spans += k.spans - counted;
            }
        }
    }

    /// The `limit` most common keys, or values of the key asked for.
    pub fn offered(self, limit: usize) -> Offered {
        let mut seen: Vec<Seen> = match &self.key {
            None => self
                .keys
                .into_iter()
                .map(|(text, k)| Seen {
                    text,
                    spans: k.spans,
                })
                .collect(),
            Some(key) => self
                .keys
                .into_iter()
                .filter(|(k, _)| k == key)
                .flat_map(|(_, k)| k.values)
                .map(|(text, spans)| Seen { text, spans })
                .collect(),
        };
        seen.sort_by(|a, b| b.spans.cmp(&a.spans).then_with(|| a.text.cmp(&b.text)));
        seen.truncate(limit);
        Offered {
            seen,
            untracked: self.untracked,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use causeway_model::KeyValue;
    use causeway_testkit::TraceBuilder;

    fn trace(n: u128, region: &str, status: i64) -> Trace {
        let mut b = TraceBuilder::new(n);
        b.root("web", "w", "GET /", 0, 10);
        b.last().attributes = vec![
            KeyValue::new("region", region),
            KeyValue::new("http.status_code", status),
        ];
        b.root("db", "d", "SELECT", 1, 2);
        b.last().attributes = vec![KeyValue::new("db.system", "postgres")];
        b.trace()
    }

    #[test]
    fn keys_then_values_are_offered_most_common_first() {
        let traces: Vec<Trace> = (1..=10u128)
            .map(|n| trace(n, if n <= 7 { "eu" } else { "us" }, 200))
            .collect();
        let mut keys = Catalog::new(None, None);
        let mut values = Catalog::new(None, Some("region".into()));
        let mut web = Catalog::new(Some("web".into()), None);
        for t in &traces {
            keys.add(t);
            values.add(t);
            web.add(t);
        }
        let texts = |o: Offered| {
            o.seen
                .into_iter()
                .map(|s| (s.text, s.spans))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            texts(keys.offered(10)),
            [
                ("db.system".into(), 10),
                ("http.status_code".into(), 10),
                ("region".into(), 10)
            ]
        );
        assert_eq!(
            texts(values.offered(10)),
            [("eu".into(), 7), ("us".into(), 3)]
        );
        assert_eq!(texts(web.offered(1)), [("http.status_code".into(), 10)]);
    }

    #[test]
    fn merged_shards_count_as_one_and_values_stay_bounded() {
        let mut one = Catalog::new(None, Some("region".into()));
        let mut a = Catalog::new(None, Some("region".into()));
        let mut b = Catalog::new(None, Some("region".into()));
        for n in 1..=(MOST_VALUES as u128 + 50) {
            let t = trace(n, &format!("r{n}"), 200);
            one.add(&t);
            if n % 2 == 0 {
                a.add(&t)
            } else {
                b.add(&t)
            }
        }
        let whole = one.offered(5);
        assert_eq!(whole.untracked, 50);
        a.merge(b);
        let merged = a.offered(usize::MAX);
        assert_eq!(merged.seen.len(), MOST_VALUES);
        assert_eq!(merged.untracked, 50);
        assert_eq!(
            merged.seen.iter().map(|s| s.spans).sum::<u64>(),
            MOST_VALUES as u64
        );
    }
}
