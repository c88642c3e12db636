//! What an installed query is made of, on both ends: the hub checks a query against its
//! tracepoint definitions and sends each process one self-contained script (the
//! definitions it uses, then the query, at most 64 KiB); a process compiles that script to
//! its advice (`load`).

use causeway_model::source::{Pos, SyntaxError};

use crate::bag::BagKey;
use crate::compile::{compile, Catalog, Plan};
use crate::lang::ast::{Item, QueryDef, Script};
use crate::lang::{parse, print_query, print_script};
use crate::program::{lower, Lowered};

/// Longest query text accepted, in bytes (the API refuses more before parsing).
pub const MAX_QUERY_BYTES: usize = 64 << 10;

/// A query checked against the tracepoint definitions, ready to install.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// Its name, when the text named it (`Q3 = From ...`).
    pub name: Option<String>,
    /// The query as printed back (its canonical text).
    pub query: String,
    /// The tracepoint definitions and named queries it uses, then the query: what every
    /// process compiles.
    pub script: String,
    /// The advice.
    pub plan: Plan,
    /// The query as parsed, to use as a source later when it is named.
    pub definition: QueryDef,
}

/// The query to install: the last in `script`; the ones before it must be named, as
/// definitions it may use as sources.
fn one_query(script: &Script) -> Result<&QueryDef, SyntaxError> {
    let queries: Vec<&QueryDef> = script
        .items
        .iter()
        .filter_map(|i| match i {
            Item::Query(q) => Some(q),
            Item::Tracepoint(_) => None,
        })
        .collect();
    let Some((last, before)) = queries.split_last() else {
        return Err(SyntaxError::new(
            Pos { line: 1, col: 1 },
            "no query",
            "one query (`From x In TRACEPOINT ... Select ...`)",
        ));
    };
    if let Some(unnamed) = before.iter().find(|q| q.name.is_none()) {
        return Err(SyntaxError::new(
            unnamed.query.pos,
            "an unnamed query before the last",
            "one query per install, after the named queries it uses (`Q3 = From ...`)",
        ));
    }
    Ok(last)
}

/// Parses `text` (tracepoint definitions and named queries, then the query to install),
/// checks it against `known` and the definitions in `text` itself, and compiles it.
pub fn prepare(text: &str, known: &Catalog) -> Result<Prepared, SyntaxError> {
    if text.len() > MAX_QUERY_BYTES {
        return Err(SyntaxError::new(
            Pos { line: 1, col: 1 },
            &format!("{} bytes", text.len()),
            &format!("a query of at most {MAX_QUERY_BYTES} bytes"),
        ));
    }
    let script = parse(text)?;
    let mut catalog = known.clone();
    catalog.add(&script);
    let def = one_query(&script)?;
    let plan = compile(&def.query, &catalog)?;
    let mut used: Vec<Item> = Vec::new();
    for a in &plan.advice {
        let already = used
            .iter()
            .any(|i| matches!(i, Item::Tracepoint(t) if t.name.text == a.tracepoint));
        if let (false, Some(t)) = (already, catalog.tracepoint(&a.tracepoint)) {
            used.push(Item::Tracepoint(t.clone()));
        }
    }
    for name in &plan.named {
        if let Some(q) = catalog.query(name) {
            used.push(Item::Query(q.clone()));
        }
    }
    used.push(Item::Query(def.clone()));
    Ok(Prepared {
        name: def.name.as_ref().map(|n| n.text.clone()),
        query: print_query(def),
        script: print_script(&Script { items: used }),
        plan,
        definition: def.clone(),
    })
}

/// A query as a process runs it: its advice and the definitions of its tracepoints.
#[derive(Debug, Clone)]
pub struct Loaded {
    /// The advice, lowered for query `id`.
    pub lowered: Lowered,
    /// The tracepoint definitions the advice runs at.
    pub catalog: Catalog,
    /// The result columns.
    pub columns: Vec<String>,
    /// The advice before lowering.
    pub plan: Plan,
}

/// Compiles a script made by [`prepare`] for query `id`, its advice packing into the
/// bags `bags` names (see [`crate::share`]; empty: each into its own).
pub fn load(script: &str, id: u32, bags: &[BagKey]) -> Result<Loaded, SyntaxError> {
    let parsed = parse(script)?;
    let mut catalog = Catalog::default();
    catalog.add(&parsed);
    let def = one_query(&parsed)?;
    let plan = compile(&def.query, &catalog)?;
    Ok(Loaded {
        lowered: lower(&plan, id, bags),
        columns: plan.columns.clone(),
        plan,
        catalog,
    })
}
