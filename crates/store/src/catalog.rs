//! The services, and the operations of each, that `services()` and `operations()` list:
//! held in memory, and bounded in the bytes of names they hold, so that spans with ever
//! new names cannot grow the lists (and every answer listing them) without end. Spans
//! whose names find no room are stored and searchable as ever; they are counted. The
//! carriers of log records (`causeway_model::logs`) and parent links
//! (`causeway_model::parent_links`) name their service, not an operation.

use std::collections::{BTreeMap, BTreeSet};

pub(crate) struct Catalog {
    names: BTreeMap<String, BTreeSet<String>>,
    bytes: usize,
    max_bytes: usize,
    /// Spans whose service or operation found no room.
    pub(crate) refused: u64,
}

impl Catalog {
    pub(crate) fn new(max_bytes: usize) -> Catalog {
        Catalog {
            names: BTreeMap::new(),
            bytes: 0,
            max_bytes,
            refused: 0,
        }
    }

    /// Whether `service` and its `operation` are listed.
    pub(crate) fn knows(&self, service: &str, operation: &str) -> bool {
        self.names
            .get(service)
            .is_some_and(|ops| ops.contains(operation))
    }

    /// Lists `operation` of `service`, if there is room.
    pub(crate) fn add(&mut self, service: &str, operation: &str) {
        if self.knows(service, operation) {
            return;
        }
        let cost = operation.len()
            + if self.names.contains_key(service) {
                0
            } else {
                service.len()
            };
        if self.bytes + cost > self.max_bytes {
            self.refused += 1;
            return;
        }
        self.bytes += cost;
        self.names
            .entry(service.to_string())
            .or_default()
            .insert(operation.to_string());
    }

    pub(crate) fn services(&self) -> Vec<String> {
        self.names.keys().cloned().collect()
    }

    /// The operations of `service`; log-record carriers and parent links are not one.
    pub(crate) fn operations(&self, service: &str) -> Vec<String> {
        self.names
            .get(service)
            .map(|ops| {
                ops.iter()
                    .filter(|o| {
                        o.as_str() != causeway_model::logs::LOG_RECORDS
                            && o.as_str() != causeway_model::parent_links::PARENT_LINK
                            && o.as_str() != causeway_model::parent_links::TRACE_LINK
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_past_the_bound_are_counted_not_listed() {
        let mut c = Catalog::new(20);
        c.add("web", "GET /a");
        c.add("web", "GET /a");
        c.add("web", "GET /b");
        assert_eq!(c.operations("web"), ["GET /a", "GET /b"]);
        // 15 bytes held; "db" + "SELECT" would make 23.
        c.add("db", "SELECT");
        assert_eq!(c.services(), ["web"]);
        assert_eq!(c.refused, 1);
        c.add("web", "PUT");
        assert_eq!(c.operations("web"), ["GET /a", "GET /b", "PUT"]);
    }
}
