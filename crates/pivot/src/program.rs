//! Advice lowered for running: slots by index instead of by name, and one function that
//! runs it when a request reaches its tracepoint.

use std::collections::HashMap;
use std::sync::Arc;

use causeway_model::TraceId;

use crate::aggregate::Aggregator;
use crate::bag::{BagKey, Baggage, Hlc};
use crate::compile::{Advice, End, Plan, Step};
use crate::lang::ast::{AggFn, Expr, Temporal};
use crate::value::{self, Value};

/// Tuples one advice invocation may produce by joining bags; the rest are counted, not
/// processed (a request whose bags hold many tuples must not stall its thread).
pub const MAX_FANOUT: usize = 256;

/// An expression over slots.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// A constant.
    Lit(Value),
    /// A slot of the tuple.
    Slot(usize),
    /// `Not`.
    Not(Box<Op>),
    /// `-`.
    Neg(Box<Op>),
    /// A binary operator.
    Bin(crate::lang::ast::BinOp, Box<Op>, Box<Op>),
    /// `In (...)`.
    In(Box<Op>, Vec<Op>),
}

/// A tuple's values by slot: owned, or borrowed from the hit and the bags.
pub trait Columns {
    /// The value in slot `i` (`Null` past the end).
    fn column(&self, i: usize) -> &Value;
}

impl Columns for [Value] {
    fn column(&self, i: usize) -> &Value {
        self.get(i).unwrap_or(&NULL)
    }
}

impl Columns for [&Value] {
    fn column(&self, i: usize) -> &Value {
        self.get(i).copied().unwrap_or(&NULL)
    }
}

impl Op {
    /// The value of the expression for `tuple`. Recursion is bounded by the parser's
    /// nesting limit.
    pub fn eval<T: Columns + ?Sized>(&self, tuple: &T) -> Value {
        match self {
            Op::Lit(v) => v.clone(),
            Op::Slot(i) => tuple.column(*i).clone(),
            Op::Not(a) => value::not(&a.eval(tuple)),
            Op::Neg(a) => value::negate(&a.eval(tuple)),
            Op::Bin(op, a, b) => value::binary(*op, &a.eval(tuple), &b.eval(tuple)),
            Op::In(a, items) => {
                let v = a.eval(tuple);
                if matches!(v, Value::Null) {
                    return Value::Null;
                }
                Value::Bool(items.iter().any(|i| v.same(&i.eval(tuple))))
            }
        }
    }
}

/// What one advice does, slots by index.
#[derive(Debug, Clone)]
pub struct Program {
    /// The tracepoint it runs at.
    pub tracepoint: String,
    /// Exports read, into slots 0..
    pub observe: Vec<String>,
    /// Bags joined: the bag and the slots its columns fill.
    pub unpack: Vec<(BagKey, Vec<usize>)>,
    /// Let (`Some(slot)`) and Where (`None`) steps.
    pub steps: Vec<(Option<usize>, Op)>,
    /// PACK or EMIT.
    pub end: ProgramEnd,
    /// Slots in a tuple.
    pub width: usize,
}

/// How a program ends.
#[derive(Debug, Clone)]
pub enum ProgramEnd {
    /// Into a bag.
    Pack {
        /// The bag.
        key: BagKey,
        /// Which tuples it keeps.
        mode: Temporal,
        /// The slots packed, in order.
        slots: Vec<usize>,
    },
    /// Into the query's aggregator.
    Emit {
        /// Group keys (for a query without GroupBy or aggregates, the selected values).
        keys: Vec<Op>,
        /// The aggregates' arguments (`Null` for COUNT).
        args: Vec<Op>,
        /// Some key or argument is an expression to compute, not a slot or a constant.
        computes: bool,
    },
}

/// A query's programs and the aggregates its emits feed.
#[derive(Debug, Clone)]
pub struct Lowered {
    /// One per advice.
    pub programs: Vec<Program>,
    /// The aggregate functions, in Select order.
    pub funcs: Vec<AggFn>,
}

/// Lowers a plan for query `query_id`.
pub fn lower(plan: &Plan, query_id: u32) -> Lowered {
    let bag_index: HashMap<&str, u16> = plan
        .advice
        .iter()
        .enumerate()
        .map(|(i, a)| (a.var.as_str(), i as u16))
        .collect();
    let key = |var: &str| BagKey {
        query: query_id,
        bag: bag_index.get(var).copied().unwrap_or(u16::MAX),
    };
    let mut funcs = Vec::new();
    let programs = plan
        .advice
        .iter()
        .map(|a| lower_advice(a, &key, &mut funcs))
        .collect();
    Lowered { programs, funcs }
}

/// The slots of one advice's tuples, by name: the observed exports first, then unpacked
/// columns and Let names as they are met.
struct Slots(Vec<String>);

impl Slots {
    fn index(&mut self, name: &str) -> usize {
        match self.0.iter().position(|s| s == name) {
            Some(i) => i,
            None => {
                self.0.push(name.to_string());
                self.0.len() - 1
            }
        }
    }

    fn lower(&mut self, e: &Expr) -> Op {
        match e {
            Expr::Lit(l, _) => Op::Lit(Value::from(l)),
            Expr::Ref(n) => Op::Slot(self.index(&n.text)),
            Expr::Not(a, _) => Op::Not(Box::new(self.lower(a))),
            Expr::Neg(a, _) => Op::Neg(Box::new(self.lower(a))),
            Expr::Bin(op, a, b, _) => {
                Op::Bin(*op, Box::new(self.lower(a)), Box::new(self.lower(b)))
            }
            Expr::In(a, items, _) => Op::In(
                Box::new(self.lower(a)),
                items.iter().map(|i| self.lower(i)).collect(),
            ),
        }
    }
}

fn lower_advice(a: &Advice, key: &dyn Fn(&str) -> BagKey, funcs: &mut Vec<AggFn>) -> Program {
    let mut slots = Slots(a.observe.clone());
    let unpack = a
        .unpack
        .iter()
        .map(|u| {
            let cols = u.slots.iter().map(|s| slots.index(s)).collect();
            (key(&u.bag), cols)
        })
        .collect();
    let steps = a
        .steps
        .iter()
        .map(|s| match s {
            Step::Let(name, e) => {
                let op = slots.lower(e);
                (Some(slots.index(name)), op)
            }
            Step::Filter(e) => (None, slots.lower(e)),
        })
        .collect();
    let end = match &a.end {
        End::Pack {
            bag,
            mode,
            slots: packed,
        } => ProgramEnd::Pack {
            key: key(bag),
            mode: *mode,
            slots: packed.iter().map(|s| slots.index(s)).collect(),
        },
        End::Emit { keys, aggs, values } => {
            let keys: Vec<Op> = keys.iter().chain(values).map(|e| slots.lower(e)).collect();
            funcs.extend(aggs.iter().map(|(f, _)| *f));
            let args: Vec<Op> = aggs
                .iter()
                .map(|(_, arg)| {
                    arg.as_ref()
                        .map_or(Op::Lit(Value::Null), |e| slots.lower(e))
                })
                .collect();
            let computes = keys
                .iter()
                .chain(&args)
                .any(|op| !matches!(op, Op::Slot(_) | Op::Lit(_)));
            ProgramEnd::Emit {
                keys,
                args,
                computes,
            }
        }
    };
    Program {
        tracepoint: a.tracepoint.clone(),
        observe: a.observe.clone(),
        unpack,
        steps,
        end,
        width: slots.0.len(),
    }
}

/// One export's values at a hit: one, or one per element of an exploded field.
#[derive(Debug, Clone)]
pub enum Observed {
    /// A single value.
    One(Value),
    /// One tuple per element (shared by the advice of one hit that read the field).
    Many(Arc<[Value]>),
}

/// What running advice needs besides the request's bags.
pub struct Context<'a> {
    /// Stamps for temporal packs.
    pub clock: &'a mut Hlc,
    /// The time now, in nanoseconds.
    pub now: u64,
    /// Unique ids for stamps' origins and bag segments.
    pub ids: &'a mut dyn FnMut() -> u64,
    /// Tuples not processed because a join produced more than [`MAX_FANOUT`].
    pub dropped: &'a mut u64,
    /// The trace of the hit, when it is sampled (kept as an example of the groups its
    /// emits feed).
    pub example: Option<TraceId>,
}

impl Program {
    /// Runs the advice for one hit: `observed` in the order of [`Program::observe`]. The
    /// request's bags are shared until a PACK changes them (then copied if shared).
    pub fn run(
        &self,
        observed: &[Observed],
        baggage: &mut Option<Arc<Baggage>>,
        aggregator: &mut Aggregator,
        cx: &mut Context<'_>,
    ) {
        // Tuples are built in this thread's reused buffers: a hit allocates only for
        // what it keeps (a new group, a packed tuple).
        if self.pack_exploded(observed, baggage, cx) {
            return;
        }
        let mut run = |s: &mut Scratch| {
            if !self.run_borrowed(s, observed, baggage, aggregator, cx) {
                self.run_in(s, observed, baggage, aggregator, cx);
            }
        };
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut shared) => run(&mut shared),
            // Advice run from advice on this thread (a tracepoint inside a subscriber).
            Err(_) => run(&mut Scratch::default()),
        })
    }

    fn run_in(
        &self,
        s: &mut Scratch,
        observed: &[Observed],
        baggage: &mut Option<Arc<Baggage>>,
        aggregator: &mut Aggregator,
        cx: &mut Context<'_>,
    ) {
        let mut tuples = std::mem::take(&mut s.tuples);
        let first = s.row(self.width);
        tuples.push((first, 1));
        for (slot, o) in observed.iter().enumerate().take(self.observe.len()) {
            match o {
                Observed::One(v) => tuples.iter_mut().for_each(|(t, _)| t[slot] = v.clone()),
                Observed::Many(vs) => {
                    let rows: Vec<(&[Value], u64)> =
                        vs.iter().map(|v| (std::slice::from_ref(v), 1)).collect();
                    self.product(s, &mut tuples, &[slot], &rows, cx);
                }
            }
        }
        for (key, cols) in &self.unpack {
            let rows = baggage
                .as_deref()
                .map(|b| b.unpack(*key))
                .unwrap_or_default();
            self.product(s, &mut tuples, cols, &rows, cx);
        }
        for (target, op) in &self.steps {
            match target {
                Some(slot) => tuples
                    .iter_mut()
                    .for_each(|(t, _)| t[*slot] = op.eval(t.as_slice())),
                None => {
                    // Kept tuples stay in order (a temporal pack stamps them in turn).
                    let mut kept = 0;
                    for i in 0..tuples.len() {
                        if op.eval(tuples[i].0.as_slice()).is_true() {
                            tuples.swap(kept, i);
                            kept += 1;
                        }
                    }
                    for (row, _) in tuples.drain(kept..) {
                        s.keep(row);
                    }
                }
            }
        }
        if let ProgramEnd::Pack {
            key,
            mode: Temporal::All,
            slots,
        } = &self.end
        {
            // One pack for all of them: an exploded field gives dozens.
            let rows = tuples.iter().map(|(t, w)| (t.as_slice(), *w));
            pack_grouped(*key, slots, rows, baggage, cx);
        } else {
            let mut computed = std::mem::take(&mut s.computed);
            for (t, w) in &tuples {
                self.finish(t.as_slice(), *w, baggage, aggregator, &mut computed, cx);
            }
            s.computed = computed;
        }
        for (row, _) in tuples.drain(..) {
            s.keep(row);
        }
        s.tuples = tuples;
    }

    /// Packs a field exploded into many values (a list of replicas, dozens of elements)
    /// without building a tuple per element: each packed tuple is read from the hit's
    /// values in place. Only for advice that joins nothing, has no Let or Where steps
    /// and explodes one field; false, and nothing done, for any other.
    fn pack_exploded(
        &self,
        observed: &[Observed],
        baggage: &mut Option<Arc<Baggage>>,
        cx: &mut Context<'_>,
    ) -> bool {
        let ProgramEnd::Pack {
            key,
            mode: Temporal::All,
            slots,
        } = &self.end
        else {
            return false;
        };
        if !self.unpack.is_empty() || !self.steps.is_empty() || self.width > INLINE_COLUMNS {
            return false;
        }
        let mut row: [&Value; INLINE_COLUMNS] = [&NULL; INLINE_COLUMNS];
        let mut many = None;
        for (slot, o) in observed.iter().take(self.observe.len()).enumerate() {
            match o {
                Observed::One(v) => row[slot] = v,
                Observed::Many(vs) if many.is_none() => many = Some((slot, vs)),
                Observed::Many(_) => return false,
            }
        }
        let Some((at, values)) = many else {
            return false;
        };
        if values.is_empty() {
            return true;
        }
        let tuples = values.iter().map(|v| {
            let packed = slots.iter().map(move |&s| {
                if s == at {
                    v
                } else {
                    row.get(s).copied().unwrap_or(&NULL)
                }
            });
            (packed, 1)
        });
        Arc::make_mut(baggage.get_or_insert_with(Default::default))
            .pack_grouped(*key, tuples, cx.ids);
        true
    }

    /// Runs advice without Let steps or exploded exports on tuples of borrowed values
    /// (no clone, no reference count touched): the observed values and each joined
    /// bag's tuples in turn. False, and nothing done, for advice it does not cover.
    fn run_borrowed(
        &self,
        s: &mut Scratch,
        observed: &[Observed],
        baggage: &mut Option<Arc<Baggage>>,
        aggregator: &mut Aggregator,
        cx: &mut Context<'_>,
    ) -> bool {
        let packs_what_it_reads =
            matches!(self.end, ProgramEnd::Pack { .. }) && !self.unpack.is_empty();
        if self.width > INLINE_COLUMNS
            || packs_what_it_reads
            || self.steps.iter().any(|(target, _)| target.is_some())
            || observed.iter().any(|o| matches!(o, Observed::Many(_)))
        {
            return false;
        }
        let mut row: [&Value; INLINE_COLUMNS] = [&NULL; INLINE_COLUMNS];
        for (slot, o) in row.iter_mut().zip(observed.iter().take(self.observe.len())) {
            if let Observed::One(v) = o {
                *slot = v;
            }
        }
        if self.unpack.is_empty() {
            let row = &row[..self.width];
            if self.keeps(row) {
                self.finish(row, 1, baggage, aggregator, &mut s.computed, cx);
            }
            return true;
        }
        let computed = &mut s.computed;
        let mut joined = 0;
        let mut emit = |row: &[&Value], weight: u64, cx: &mut Context<'_>| {
            if joined == MAX_FANOUT {
                *cx.dropped = cx.dropped.saturating_add(1);
                return;
            }
            joined += 1;
            if self.keeps(row) {
                self.finish(row, weight, &mut None, aggregator, computed, cx);
            }
        };
        self.join_borrowed(baggage.as_deref(), 0, &mut row, 1, &mut emit, cx);
        true
    }

    /// Joins the tuples of bag `self.unpack[at]` and those after it into `row`.
    /// Recursion is as deep as the advice's joins (bounded by the compiler).
    fn join_borrowed<'v, F: FnMut(&[&Value], u64, &mut Context<'_>)>(
        &self,
        bags: Option<&'v Baggage>,
        at: usize,
        row: &mut [&'v Value; INLINE_COLUMNS],
        weight: u64,
        emit: &mut F,
        cx: &mut Context<'_>,
    ) {
        let Some((key, cols)) = self.unpack.get(at) else {
            emit(&row[..self.width], weight, cx);
            return;
        };
        let Some(bags) = bags else { return };
        // `for_each`, not `for`: the nested iterators run as one loop each.
        bags.tuples(*key).for_each(|(values, w)| {
            for (slot, v) in cols.iter().zip(values) {
                if let Some(r) = row.get_mut(*slot) {
                    *r = v;
                }
            }
            let w = weight.saturating_mul(w);
            self.join_borrowed(Some(bags), at + 1, row, w, emit, cx);
        });
    }

    /// Whether every Where step keeps the tuple.
    fn keeps<T: Columns + ?Sized>(&self, row: &T) -> bool {
        self.steps.iter().all(|(_, op)| op.eval(row).is_true())
    }

    /// PACKs or EMITs one tuple (`computed` holds emitted values an expression makes).
    fn finish<T: Columns + ?Sized>(
        &self,
        row: &T,
        weight: u64,
        baggage: &mut Option<Arc<Baggage>>,
        aggregator: &mut Aggregator,
        computed: &mut Vec<Value>,
        cx: &mut Context<'_>,
    ) {
        match &self.end {
            ProgramEnd::Pack { key, mode, slots } => {
                let (first, n) = match mode {
                    Temporal::All => {
                        let rows = std::iter::once((row, weight));
                        return pack_grouped(*key, slots, rows, baggage, cx);
                    }
                    Temporal::First(n) => (true, *n),
                    Temporal::MostRecent(n) => (false, *n),
                };
                let baggage = Arc::make_mut(baggage.get_or_insert_with(Default::default));
                let values = slots.iter().map(|s| row.column(*s).clone());
                let ts = cx.clock.stamp(cx.now);
                baggage.pack_temporal(*key, first, n, ts, (cx.ids)(), values);
            }
            ProgramEnd::Emit {
                keys,
                args,
                computes,
            } => {
                computed.clear();
                if *computes {
                    let ops = keys.iter().chain(args);
                    computed.extend(
                        ops.filter(|op| op.direct(row).is_none())
                            .map(|op| op.eval(row)),
                    );
                }
                emit(row, weight, keys, args, computed, aggregator, cx.example)
            }
        }
    }

    /// Every tuple joined with every row (values for `cols`, weight), weights
    /// multiplied, at most [`MAX_FANOUT`] results; replaces `tuples`.
    fn product(
        &self,
        s: &mut Scratch,
        tuples: &mut Vec<(Vec<Value>, u64)>,
        cols: &[usize],
        rows: &[(&[Value], u64)],
        cx: &mut Context<'_>,
    ) {
        let mut out = std::mem::take(&mut s.joined);
        for (t, tw) in tuples.iter() {
            for (vals, rw) in rows {
                if out.len() == MAX_FANOUT {
                    *cx.dropped = cx.dropped.saturating_add(1);
                    continue;
                }
                let mut joined = s.spare.pop().unwrap_or_default();
                joined.clone_from(t);
                for (slot, v) in cols.iter().zip(vals.iter()) {
                    joined[*slot] = v.clone();
                }
                out.push((joined, tw.saturating_mul(*rw)));
            }
        }
        for (row, _) in tuples.drain(..) {
            s.keep(row);
        }
        std::mem::swap(tuples, &mut out);
        s.joined = out;
    }
}

/// Packs `slots` of each row, its weight times, into grouped bag `key` (no bag is made
/// for no rows).
fn pack_grouped<'r, T: Columns + ?Sized + 'r>(
    key: BagKey,
    slots: &[usize],
    rows: impl ExactSizeIterator<Item = (&'r T, u64)>,
    baggage: &mut Option<Arc<Baggage>>,
    cx: &mut Context<'_>,
) {
    if rows.len() == 0 {
        return;
    }
    let baggage = Arc::make_mut(baggage.get_or_insert_with(Default::default));
    let tuples = rows.map(|(row, w)| (slots.iter().map(move |s| row.column(*s)), w));
    baggage.pack_grouped(key, tuples, cx.ids);
}

/// Values emits borrow when there is nothing to compute: a null for a missing slot.
static NULL: Value = Value::Null;

/// Group keys and aggregate arguments emitted at most without a heap buffer.
const INLINE_COLUMNS: usize = 16;

impl Op {
    /// The value without computing it: a slot's or a constant.
    fn direct<'a, T: Columns + ?Sized>(&'a self, tuple: &'a T) -> Option<&'a Value> {
        match self {
            Op::Slot(i) => Some(tuple.column(*i)),
            Op::Lit(v) => Some(v),
            _ => None,
        }
    }
}

/// Adds one tuple to the aggregator: its group key and aggregate arguments borrowed from
/// the tuple where they are plain columns (no clone, no reference count touched), the
/// others taken in turn from `computed`.
fn emit<T: Columns + ?Sized>(
    tuple: &T,
    weight: u64,
    keys: &[Op],
    args: &[Op],
    computed: &[Value],
    aggregator: &mut Aggregator,
    example: Option<TraceId>,
) {
    let ops = || keys.iter().chain(args);
    let mut next = computed.iter();
    let n = keys.len() + args.len();
    let mut inline: [&Value; INLINE_COLUMNS] = [&NULL; INLINE_COLUMNS];
    let mut heap: Vec<&Value> = Vec::new();
    let refs: &mut [&Value] = if n <= INLINE_COLUMNS {
        &mut inline[..n]
    } else {
        heap.resize(n, &NULL);
        &mut heap
    };
    for (slot, op) in refs.iter_mut().zip(ops()) {
        *slot = op.direct(tuple).or_else(|| next.next()).unwrap_or(&NULL);
    }
    let (key, values) = refs.split_at(keys.len());
    aggregator.add_borrowed(key, values, weight, example);
}

/// Buffers a thread reuses from hit to hit.
#[derive(Default)]
struct Scratch {
    tuples: Vec<(Vec<Value>, u64)>,
    joined: Vec<(Vec<Value>, u64)>,
    spare: Vec<Vec<Value>>,
    /// Emitted values an expression computed.
    computed: Vec<Value>,
}

/// Rows kept for reuse at most (a join's fan-out, and one more).
const SPARE_ROWS: usize = MAX_FANOUT + 1;

impl Scratch {
    /// A row of `width` nulls.
    fn row(&mut self, width: usize) -> Vec<Value> {
        let mut r = self.spare.pop().unwrap_or_default();
        r.clear();
        r.resize(width, Value::Null);
        r
    }

    /// Keeps a row for reuse (its values dropped now, not held until reused).
    fn keep(&mut self, mut row: Vec<Value>) {
        if self.spare.len() < SPARE_ROWS {
            row.clear();
            self.spare.push(row);
        }
    }
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}
