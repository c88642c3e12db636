//! What a query may refer to: the tracepoint definitions and named queries installed,
//! and how many joins a query may have.

use std::collections::HashMap;

use crate::lang::ast::{Item, QueryDef, Script, TracepointDef};

/// Joins a query may have; the join tree is walked by recursion.
pub const MAX_JOINS: usize = 32;

/// The tracepoint definitions and named queries a query may refer to.
#[derive(Debug, Default, Clone)]
pub struct Catalog {
    tracepoints: HashMap<String, TracepointDef>,
    queries: HashMap<String, QueryDef>,
}

impl Catalog {
    /// Adds the tracepoint definitions and named queries of a parsed file; a later
    /// definition of a name replaces an earlier one.
    pub fn add(&mut self, script: &Script) {
        for item in &script.items {
            match item {
                Item::Tracepoint(t) => {
                    self.tracepoints.insert(t.name.text.clone(), t.clone());
                }
                Item::Query(q) => self.add_query(q),
            }
        }
    }

    /// Adds a named query (an unnamed one cannot be referred to).
    pub fn add_query(&mut self, def: &QueryDef) {
        if let Some(name) = &def.name {
            self.queries.insert(name.text.clone(), def.clone());
        }
    }

    /// The definition of a tracepoint.
    pub fn tracepoint(&self, name: &str) -> Option<&TracepointDef> {
        self.tracepoints.get(name)
    }

    /// A named query's definition (as a source, a tracepoint of the same name comes
    /// first).
    pub fn query(&self, name: &str) -> Option<&QueryDef> {
        self.queries.get(name)
    }

    /// Every named query, in no order.
    pub fn queries(&self) -> impl Iterator<Item = &QueryDef> {
        self.queries.values()
    }
}
