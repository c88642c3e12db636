//! The queries a process runs and what happens at a tracepoint hit: for each callsite,
//! the advice that fires there, the values it observes, and the per-query aggregation of
//! what it emits.
//!
//! The advice at a callsite, by moment (event, span creation, entry, exit, close), is worked
//! out on the callsite's first hit after an install and cached by callsite id; with nothing
//! installed, asking costs one relaxed load. A hit captures only the fields its advice
//! reads (`super::fields`), adds the process-wide exports, and runs the programs, passing
//! the trace id of a sampled span so that each group keeps an example trace. Emitted tuples
//! go to a per-thread aggregator (no lock shared between threads), taken and merged each
//! interval.
//!
//! Installing or uninstalling rebuilds `tracing`'s interest from inside the subscriber's own
//! dispatcher: with one dispatcher in the process `tracing` asks only the calling thread's
//! default, and the agent's thread has none, which would silence every callsite.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use causeway_model::source::SyntaxError;
use causeway_model::TraceId;
use causeway_pivot::aggregate::Aggregator;
use causeway_pivot::bag::{BagKey, Bags, Hlc};
use causeway_pivot::compile::{Catalog, DURATION_EXPORT};
use causeway_pivot::install::load;
use causeway_pivot::lang::ast::{AggFn, ProbeKind, TracepointDef};
use causeway_pivot::matching::{moments, CallsiteFacts};
use causeway_pivot::program::{Context, Observed, Program, ProgramEnd};
use causeway_pivot::protocol::{CallsiteInfo, Counters};
use causeway_pivot::value::Value;
use smallvec::SmallVec;
use thread_local::ThreadLocal;
use tracing_core::callsite::Identifier;
use tracing_core::dispatcher::{Dispatch, WeakDispatch};
use tracing_core::Metadata;

use super::fields::explode;

/// `tracing` metadata, as the probes' matchers see it.
struct Meta<'a>(&'a Metadata<'a>);

impl CallsiteFacts for Meta<'_> {
    fn is_event(&self) -> bool {
        self.0.is_event()
    }
    fn target(&self) -> &str {
        self.0.target()
    }
    fn name(&self) -> &str {
        self.0.name()
    }
    fn level(&self) -> &str {
        self.0.level().as_str()
    }
    fn module(&self) -> Option<&str> {
        self.0.module_path()
    }
    fn file(&self) -> Option<&str> {
        self.0.file()
    }
    fn line(&self) -> Option<u32> {
        self.0.line()
    }
    fn any_field(&self, test: &dyn Fn(&str) -> bool) -> bool {
        self.0.fields().iter().any(|f| test(f.name()))
    }
}

/// The process-wide exports every tracepoint has.
#[derive(Debug, Clone)]
pub(crate) struct ProcessExports {
    pub(crate) host: Value,
    pub(crate) service: Value,
    pub(crate) proc_name: Value,
    pub(crate) pid: Value,
}

/// An installed query.
struct Query {
    id: u32,
    programs: Vec<Program>,
    catalog: Catalog,
    funcs: Vec<AggFn>,
}

/// Where one observed value comes from.
#[derive(Debug, Clone)]
enum Source {
    /// A captured field (its index), maybe exploded.
    Field(usize, Option<Option<String>>),
    Host,
    Service,
    ProcName,
    Pid,
    Thread,
    Timestamp,
    Tracepoint(Value),
    Duration,
    /// An export the callsite does not have.
    Missing,
}

/// One advice that fires at a callsite.
struct Hook {
    query: Arc<Query>,
    program: usize,
    sources: Vec<Source>,
}

/// The fields split so far in a hit: (field, separator, elements).
type Exploded<'h> = SmallVec<[(usize, Option<&'h str>, Arc<[Value]>); 2]>;

/// A hit's captured fields: the few its advice reads are held in place, so capturing
/// them allocates nothing.
pub(crate) type Fields = SmallVec<[Value; 4]>;

/// The advice of one callsite, by moment, and the fields it reads.
pub(crate) struct Hooks {
    by_kind: [Vec<Hook>; 5],
    pub(crate) fields: Vec<&'static str>,
}

fn kind_index(kind: ProbeKind) -> usize {
    match kind {
        ProbeKind::Event => 0,
        ProbeKind::Span => 1,
        ProbeKind::SpanEnter => 2,
        ProbeKind::SpanExit => 3,
        ProbeKind::SpanClose => 4,
    }
}

impl Hooks {
    /// Whether any advice fires at this moment.
    pub(crate) fn fires(&self, kind: ProbeKind) -> bool {
        !self.by_kind[kind_index(kind)].is_empty()
    }

    /// The fields this callsite's advice reads, captured from `values` (a span's
    /// attributes, an event), `Null` where not given.
    pub(crate) fn capture(&self, values: &impl tracing_subscriber::field::RecordFields) -> Fields {
        let mut fields = smallvec::smallvec![Value::Null; self.fields.len()];
        values.record(&mut super::Capture {
            wanted: &self.fields,
            values: &mut fields,
        });
        fields
    }
}

/// One thread's results: each query's aggregator (a few queries: a list is quicker to
/// search than a map), and the observed values of a hit, kept to reuse their buffer.
#[derive(Default)]
struct Results {
    by_query: Vec<(u32, Aggregator)>,
    observed: Vec<Observed>,
}

impl Results {
    fn of(&mut self, query: &Query) -> &mut Aggregator {
        let at = match self.by_query.iter().position(|(id, _)| *id == query.id) {
            Some(at) => at,
            None => {
                self.by_query
                    .push((query.id, Aggregator::new(&query.funcs)));
                self.by_query.len() - 1
            }
        };
        &mut self.by_query[at].1
    }
}

/// The per-callsite advice cache: `None` when nothing fires at the callsite.
type HookCache = HashMap<Identifier, Option<Arc<Hooks>>>;

/// Callsites kept in the catalog at most.
const MAX_CALLSITES: usize = 100_000;

/// The queries a process runs, their results so far, and the callsites it registered.
pub(crate) struct Runtime {
    active: AtomicBool,
    queries: RwLock<Vec<Arc<Query>>>,
    hooks: RwLock<HookCache>,
    /// Per thread, so that hits on different threads never wait for each other.
    results: ThreadLocal<Mutex<Results>>,
    callsites: Mutex<Callsites>,
    clock: Mutex<Hlc>,
    next_id: AtomicU64,
    bags_malformed: AtomicU64,
    bags_overflowed: AtomicU64,
    fanout_dropped: AtomicU64,
    process: ProcessExports,
    dispatch: Mutex<Option<WeakDispatch>>,
}

#[derive(Default)]
struct Callsites {
    seen: HashSet<Identifier>,
    list: Vec<CallsiteInfo>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Runtime {
    pub(crate) fn new(process: ProcessExports, seed: u64) -> Runtime {
        Runtime {
            active: AtomicBool::new(false),
            queries: RwLock::new(Vec::new()),
            hooks: RwLock::new(HashMap::new()),
            results: ThreadLocal::new(),
            callsites: Mutex::new(Callsites::default()),
            clock: Mutex::new(Hlc::default()),
            next_id: AtomicU64::new(seed),
            bags_malformed: AtomicU64::new(0),
            bags_overflowed: AtomicU64::new(0),
            fanout_dropped: AtomicU64::new(0),
            process,
            dispatch: Mutex::new(None),
        }
    }

    /// Whether any query is installed: one load, what every hot path asks first.
    #[inline]
    pub(crate) fn active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    /// Compiles and installs query `id` (replacing an earlier install of that id), its
    /// advice packing into `bags` (shared with other queries; empty: bags of its own),
    /// and rebuilds `tracing`'s interest so that its callsites fire from now on.
    pub(crate) fn install(
        &self,
        id: u32,
        script: &str,
        bags: &[BagKey],
    ) -> Result<(), SyntaxError> {
        let loaded = load(script, id, bags)?;
        let query = Arc::new(Query {
            id,
            programs: loaded.lowered.programs,
            catalog: loaded.catalog,
            funcs: loaded.lowered.funcs,
        });
        {
            let mut queries = self.queries.write().unwrap_or_else(|e| e.into_inner());
            queries.retain(|q| q.id != id);
            queries.push(query);
            self.active.store(true, Ordering::Relaxed);
        }
        self.rebuild();
        Ok(())
    }

    /// Uninstalls query `id`; false if it was not installed. Results not yet taken stay.
    pub(crate) fn uninstall(&self, id: u32) -> bool {
        let removed = {
            let mut queries = self.queries.write().unwrap_or_else(|e| e.into_inner());
            let before = queries.len();
            queries.retain(|q| q.id != id);
            self.active.store(!queries.is_empty(), Ordering::Relaxed);
            queries.len() != before
        };
        if removed {
            self.rebuild();
        }
        removed
    }

    /// The ids of the installed queries.
    pub(crate) fn installed(&self) -> Vec<u32> {
        let queries = self.queries.read().unwrap_or_else(|e| e.into_inner());
        queries.iter().map(|q| q.id).collect()
    }

    fn rebuild(&self) {
        self.hooks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
        // Outside every lock: this calls back into the subscriber for each callsite. With
        // one dispatcher in the process, `tracing` asks only the calling thread's
        // default, which on a thread outside the subscriber's scope (the agent's) is
        // none, and would silence every callsite: so ask from within our own.
        let own = lock(&self.dispatch)
            .as_ref()
            .and_then(WeakDispatch::upgrade);
        match own {
            Some(d) => tracing_core::dispatcher::with_default(
                &d,
                tracing_core::callsite::rebuild_interest_cache,
            ),
            None => tracing_core::callsite::rebuild_interest_cache(),
        }
    }

    /// Remembers the dispatcher this runtime's subscriber is part of.
    pub(crate) fn set_dispatch(&self, dispatch: &Dispatch) {
        *lock(&self.dispatch) = Some(dispatch.downgrade());
    }

    /// Adds a callsite to the catalog (once).
    pub(crate) fn register(&self, meta: &'static Metadata<'static>) {
        let mut c = lock(&self.callsites);
        if c.list.len() >= MAX_CALLSITES || !c.seen.insert(meta.callsite()) {
            return;
        }
        c.list.push(CallsiteInfo {
            kind: if meta.is_event() { "event" } else { "span" }.into(),
            target: meta.target().into(),
            name: meta.name().into(),
            level: meta.level().as_str().into(),
            module: meta.module_path().map(Into::into),
            file: meta.file().map(Into::into),
            line: meta.line(),
            fields: meta.fields().iter().map(|f| f.name().to_owned()).collect(),
        });
    }

    /// The catalog from entry `from` on.
    pub(crate) fn callsites_from(&self, from: usize) -> (Vec<CallsiteInfo>, usize) {
        let c = lock(&self.callsites);
        (
            c.list.get(from..).unwrap_or_default().to_vec(),
            c.list.len(),
        )
    }

    /// The advice at a callsite, worked out on its first hit after an install. Inlined:
    /// every span and event asks, and with nothing installed the answer is one load.
    #[inline]
    pub(crate) fn hooks(&self, meta: &Metadata<'_>) -> Option<Arc<Hooks>> {
        if !self.active() {
            return None;
        }
        self.cached_hooks(meta)
    }

    fn cached_hooks(&self, meta: &Metadata<'_>) -> Option<Arc<Hooks>> {
        let id = meta.callsite();
        if let Some(h) = self
            .hooks
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&id)
        {
            return h.clone();
        }
        let h = self.compute(meta);
        self.hooks
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, h.clone());
        h
    }

    fn compute(&self, meta: &Metadata<'_>) -> Option<Arc<Hooks>> {
        let queries = self
            .queries
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let mut by_kind: [Vec<Hook>; 5] = Default::default();
        let mut fields: Vec<&'static str> = Vec::new();
        // A bag several queries share is packed by the first of them only: the others'
        // advice is the same (see `causeway_pivot::share`).
        let mut packed: Vec<(usize, BagKey)> = Vec::new();
        for q in &queries {
            for (i, p) in q.programs.iter().enumerate() {
                let Some(def) = q.catalog.tracepoint(&p.tracepoint) else {
                    continue;
                };
                for kind in moments(def, &Meta(meta)) {
                    if let ProgramEnd::Pack { key, .. } = &p.end {
                        let at = (kind_index(kind), *key);
                        if packed.contains(&at) {
                            continue;
                        }
                        packed.push(at);
                    }
                    let sources = p
                        .observe
                        .iter()
                        .map(|name| source(name, def, meta, &mut fields))
                        .collect();
                    by_kind[kind_index(kind)].push(Hook {
                        query: q.clone(),
                        program: i,
                        sources,
                    });
                }
            }
        }
        if by_kind.iter().all(Vec::is_empty) {
            return None;
        }
        Some(Arc::new(Hooks { by_kind, fields }))
    }

    /// Runs the advice of moment `kind` at a hit: `fields` captured as
    /// [`Hooks::fields`] lists them, `bag` the request's.
    pub(crate) fn fire(
        &self,
        hooks: &Hooks,
        kind: ProbeKind,
        fields: &[Value],
        duration_ns: Option<u64>,
        bag: &mut Option<Arc<Bags>>,
        example: Option<TraceId>,
    ) {
        let list = &hooks.by_kind[kind_index(kind)];
        if list.is_empty() {
            return;
        }
        let now = crate::clock::now_ns();
        let results = self.results.get_or_default();
        let mut results = lock(results);
        let results = &mut *results;
        let mut clock = lock(&self.clock);
        let mut dropped = 0u64;
        let mut ids = || self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut observed = std::mem::take(&mut results.observed);
        // A field several advice explode is split once per hit.
        let mut exploded: Exploded<'_> = SmallVec::new();
        for h in list {
            observed.clear();
            observed.extend(
                h.sources
                    .iter()
                    .map(|s| self.observe(s, fields, now, duration_ns, &mut exploded)),
            );
            let mut cx = Context {
                clock: &mut clock,
                now,
                ids: &mut ids,
                dropped: &mut dropped,
                example,
            };
            if let Some(p) = h.query.programs.get(h.program) {
                p.run(&observed, bag, results.of(&h.query), &mut cx);
            }
        }
        observed.clear();
        results.observed = observed;
        if dropped > 0 {
            self.fanout_dropped.fetch_add(dropped, Ordering::Relaxed);
        }
    }

    fn observe<'h>(
        &self,
        s: &'h Source,
        fields: &[Value],
        now: u64,
        duration: Option<u64>,
        exploded: &mut Exploded<'h>,
    ) -> Observed {
        let p = &self.process;
        Observed::One(match s {
            Source::Field(i, None) => fields.get(*i).cloned().unwrap_or(Value::Null),
            Source::Field(i, Some(sep)) => {
                let sep = sep.as_deref();
                if let Some((.., values)) = exploded.iter().find(|(f, s, _)| f == i && *s == sep) {
                    return Observed::Many(values.clone());
                }
                let values: Arc<[Value]> =
                    explode(fields.get(*i).unwrap_or(&Value::Null), sep).into();
                exploded.push((*i, sep, values.clone()));
                return Observed::Many(values);
            }
            Source::Host => p.host.clone(),
            Source::Service => p.service.clone(),
            Source::ProcName => p.proc_name.clone(),
            Source::Pid => p.pid.clone(),
            Source::Thread => {
                let t = std::thread::current();
                match t.name() {
                    Some(n) => Value::from(n),
                    None => Value::from(format!("thread-{}", crate::clock::thread_no()).as_str()),
                }
            }
            Source::Timestamp => Value::Int(i64::try_from(now).unwrap_or(i64::MAX)),
            Source::Tracepoint(name) => name.clone(),
            Source::Duration => duration.map_or(Value::Null, |d| {
                Value::Int(i64::try_from(d).unwrap_or(i64::MAX))
            }),
            Source::Missing => Value::Null,
        })
    }

    /// Every query's results since the last call, merged across threads.
    pub(crate) fn take_results(&self) -> Vec<(u32, Aggregator)> {
        let mut merged: HashMap<u32, Aggregator> = HashMap::new();
        for per_thread in self.results.iter() {
            for (id, a) in lock(per_thread).by_query.drain(..) {
                if a.is_empty() {
                    continue;
                }
                match merged.get_mut(&id) {
                    Some(m) => m.merge(&a),
                    None => {
                        merged.insert(id, a);
                    }
                }
            }
        }
        let mut out: Vec<(u32, Aggregator)> = merged.into_iter().collect();
        out.sort_by_key(|(id, _)| *id);
        out
    }

    /// A bag that arrived in a header; a malformed one is counted and dropped.
    pub(crate) fn decode_bag(&self, text: &str) -> Option<Arc<Bags>> {
        match causeway_pivot::wire::decode_text(text) {
            Ok(bag) => {
                lock(&self.clock).observe(bag.max_stamp());
                Some(Arc::new(bag))
            }
            Err(_) => {
                self.bags_malformed.fetch_add(1, Ordering::Relaxed);
                None
            }
        }
    }

    /// A bag as header text, cut to the size limit (counted when cut); none when empty.
    pub(crate) fn encode_bag(&self, bag: &Bags) -> Option<Arc<str>> {
        let (text, cut) =
            causeway_pivot::wire::encode_text_shared(bag, causeway_pivot::wire::MAX_BYTES)?;
        if cut {
            self.bags_overflowed.fetch_add(1, Ordering::Relaxed);
        }
        Some(text)
    }

    /// The drop counters.
    pub(crate) fn counters(&self) -> Counters {
        Counters {
            bags_malformed: self.bags_malformed.load(Ordering::Relaxed),
            bags_overflowed: self.bags_overflowed.load(Ordering::Relaxed),
            fanout_dropped: self.fanout_dropped.load(Ordering::Relaxed),
            // The agent's own.
            batches_dropped: 0,
        }
    }
}

/// Where observed export `name` (`var.export`) comes from at a callsite of `def`.
fn source(
    name: &str,
    def: &TracepointDef,
    meta: &Metadata<'_>,
    fields: &mut Vec<&'static str>,
) -> Source {
    let export = name.split_once('.').map_or(name, |(_, e)| e);
    if let Some(e) = def.exports.iter().find(|e| e.name.text == export) {
        let Some(field) = meta.fields().field(e.field.as_str()) else {
            return Source::Missing;
        };
        let at = match fields.iter().position(|f| *f == field.name()) {
            Some(at) => at,
            None => {
                fields.push(field.name());
                fields.len() - 1
            }
        };
        return Source::Field(at, e.explode.clone());
    }
    match export {
        "host" => Source::Host,
        "service" => Source::Service,
        "procName" => Source::ProcName,
        "pid" => Source::Pid,
        "thread" => Source::Thread,
        "timestamp" => Source::Timestamp,
        "tracepoint" => Source::Tracepoint(Value::from(def.name.text.as_str())),
        DURATION_EXPORT => Source::Duration,
        _ => Source::Missing,
    }
}
