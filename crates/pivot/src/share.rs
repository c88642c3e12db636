//! Bags shared between queries: two queries whose advice packs the same tuples at the
//! same tracepoint (the paper's Q4 to Q7 all pack `st.host` at `StressTest.DoNextOp`) use
//! one bag, so a request carries, encodes and decodes those tuples once, and each
//! process runs that pack once per hit.
//!
//! The hub decides, when it installs a query: a pack whose advice is identical to one an
//! installed query already has (same tracepoint definition, exports, joined bags,
//! filters and packed columns) gets that query's bag key; any other pack keeps its own,
//! `(query id, advice index)`. The keys travel with the query to every process
//! ([`crate::protocol::Order::bags`]), so processes agree on them however they print
//! advice. A process from before shared bags ignores the keys and packs into bags of its
//! own: joins between it and newer processes then find nothing (every process of a
//! system is to run a version that reads `Order::bags`). Query ids are never reused, so
//! a key stays unique after its first query is uninstalled; the hub keeps each query's
//! keys across restarts. A process runs a shared pack once per hit, at the first hook
//! with that key at a callsite.

use std::collections::HashMap;

use crate::bag::BagKey;
use crate::compile::{Catalog, Plan};
use crate::lang::ast::{Item, Script};
use crate::lang::print_script;
use crate::program::{lower, ProgramEnd};

/// The bag keys given out so far, by what their packs do.
#[derive(Debug, Default, Clone)]
pub struct Sharing {
    by_signature: HashMap<String, BagKey>,
}

impl Sharing {
    /// The bag key of each advice of `plan`, installed as query `id`: a pack identical
    /// to one installed before gets its key.
    pub fn assign(&mut self, plan: &Plan, catalog: &Catalog, id: u32) -> Vec<BagKey> {
        self.walk(plan, catalog, id, None)
    }

    /// Remembers the keys a query was given (a query restored after a restart), for
    /// later queries to share.
    pub fn remember(&mut self, plan: &Plan, catalog: &Catalog, id: u32, keys: &[BagKey]) {
        self.walk(plan, catalog, id, Some(keys));
    }

    fn walk(
        &mut self,
        plan: &Plan,
        catalog: &Catalog,
        id: u32,
        given: Option<&[BagKey]>,
    ) -> Vec<BagKey> {
        let lowered = lower(plan, id, &[]);
        let mut keys: Vec<BagKey> = Vec::with_capacity(plan.advice.len());
        // Advice comes children first: the bags an advice unpacks have their keys.
        for (i, (advice, program)) in plan.advice.iter().zip(&lowered.programs).enumerate() {
            let own = given.and_then(|g| g.get(i).copied()).unwrap_or(BagKey {
                query: id,
                bag: i as u16,
            });
            let key = match &program.end {
                ProgramEnd::Pack { mode, slots, .. } => {
                    let definition = catalog.tracepoint(&advice.tracepoint).map(|t| {
                        print_script(&Script {
                            items: vec![Item::Tracepoint(t.clone())],
                        })
                    });
                    // What the advice reads and does, with its variable's name left out
                    // and each bag it joins by its (shared) key.
                    let exports: Vec<&str> = program
                        .observe
                        .iter()
                        .map(|o| o.split_once('.').map_or(o.as_str(), |(_, e)| e))
                        .collect();
                    let unpack: Vec<(Option<BagKey>, &Vec<usize>)> = program
                        .unpack
                        .iter()
                        .map(|(k, cols)| (keys.get(usize::from(k.bag)).copied(), cols))
                        .collect();
                    let signature = format!(
                        "{}\n{definition:?}\n{exports:?}\n{unpack:?}\n{:?}\n{mode:?} {slots:?} {}",
                        advice.tracepoint, program.steps, program.width
                    );
                    match given {
                        Some(_) => {
                            self.by_signature.entry(signature).or_insert(own);
                            own
                        }
                        None => *self.by_signature.entry(signature).or_insert(own),
                    }
                }
                ProgramEnd::Emit { .. } => own,
            };
            keys.push(key);
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::compile;
    use crate::lang::ast::Item;
    use crate::lang::parse;

    const SCRIPT: &str = r#"
Tracepoint Op = span(name = "op")
Tracepoint Lookup = span.close(name = "lookup") Export src, replicas = explode(replicas, ",")
Tracepoint Read = span(name = "read")

Q4 = From l In Lookup Join st In Op On st -> l GroupBy st.host, l.src Select st.host, l.src, COUNT
Q5 = From getloc In Lookup Join st In Op On st -> getloc GroupBy st.host, getloc.replicas
     Select st.host, getloc.replicas, COUNT
Q7 = From r In Read Join l In Lookup On l -> r Join st In Op On st -> l Where st.host != r.host
     GroupBy r.host, l.replicas Select r.host, l.replicas, COUNT
Q7b = From r In Read Join l In Lookup On l -> r Join st In Op On st -> l Where st.host != r.host
      GroupBy r.host Select r.host, COUNT
Qf = From l In Lookup Join st In First(Op) On st -> l Select COUNT
"#;

    fn plans() -> (Catalog, Vec<Plan>) {
        let script = parse(SCRIPT).unwrap();
        let mut catalog = Catalog::default();
        catalog.add(&script);
        let plans = script
            .items
            .iter()
            .filter_map(|i| match i {
                Item::Query(q) => Some(compile(&q.query, &catalog).unwrap()),
                Item::Tracepoint(_) => None,
            })
            .collect();
        (catalog, plans)
    }

    /// The key of the advice of variable `var`.
    fn key_of(plan: &Plan, keys: &[BagKey], var: &str) -> BagKey {
        let i = plan.advice.iter().position(|a| a.var == var).unwrap();
        keys[i]
    }

    #[test]
    fn identical_packs_share_a_bag_and_others_keep_their_own() {
        let (catalog, plans) = plans();
        let mut sharing = Sharing::default();
        let keys: Vec<Vec<BagKey>> = plans
            .iter()
            .enumerate()
            .map(|(i, p)| sharing.assign(p, &catalog, 10 + i as u32))
            .collect();
        let st = |q: usize| key_of(&plans[q], &keys[q], "st");
        // `st.host` packed at Op, whatever the variable is called: one bag for all.
        assert_eq!(st(1), st(0));
        assert_eq!(st(2), st(0));
        assert_eq!(st(3), st(0));
        assert_eq!(st(0), BagKey { query: 10, bag: 0 });
        // Q7b needs only st.host from Lookup (projection is pushed down): its bag there
        // is not Q7's (replicas, st.host).
        assert_ne!(
            key_of(&plans[3], &keys[3], "l"),
            key_of(&plans[2], &keys[2], "l")
        );
        // First(Op) keeps the first tuple only: a bag of its own.
        assert_ne!(key_of(&plans[4], &keys[4], "st"), st(0));
        // A restarted hub that remembers Q4's keys gives Q5 the same.
        let mut again = Sharing::default();
        again.remember(&plans[0], &catalog, 10, &keys[0]);
        let q5 = again.assign(&plans[1], &catalog, 99);
        assert_eq!(key_of(&plans[1], &q5, "st"), st(0));
    }
}
