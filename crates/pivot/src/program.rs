//! Advice lowered for running: slots by index instead of by name, and one function that
//! runs it when a request reaches its tracepoint.
//!
//! `Program::run` joins by cross product, applies the steps, and packs or emits. Every path
//! makes at most 256 tuples a hit (`MAX_FANOUT`); the rest are counted from the bags' sizes,
//! not made, so a request whose bags hold many tuples cannot stall its thread.
//!
//! Advice without Let steps (Q1-Q7 all) runs on tuples of borrowed values: a row of up to
//! 16 references to the hit's values, each element of an exploded field and each joined
//! bag's tuples in turn (`Walk`: nested loops, no clone, no reference count touched),
//! filtered and emitted by reference; a pack that joins bags collects its tuples (owned)
//! and packs them after the walk. A pack of one exploded field with no join or step reads
//! each tuple from the hit in place (`pack_exploded`). Other advice builds owned tuples in
//! per-thread buffers reused between hits. An emit whose keys and arguments are all columns
//! or constants (`computes` false, decided when lowering) borrows them all. Either way a hit
//! allocates only for what it keeps: a new group, a new bag.

use std::collections::HashMap;
use std::sync::Arc;

use causeway_model::TraceId;
use smallvec::SmallVec;

use crate::aggregate::Aggregator;
use crate::bag::{BagKey, Bags, Hlc, InlineValues};
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

/// Lowers a plan for query `query_id`. Advice `i` packs into bag `shared[i]` when
/// given (a bag shared with another query, see [`crate::share`]), else into its own,
/// `(query_id, i)`.
pub fn lower(plan: &Plan, query_id: u32, shared: &[BagKey]) -> Lowered {
    let bag_index: HashMap<&str, u16> = plan
        .advice
        .iter()
        .enumerate()
        .map(|(i, a)| (a.var.as_str(), i as u16))
        .collect();
    let key = |var: &str| {
        let i = bag_index.get(var).copied().unwrap_or(u16::MAX);
        shared.get(usize::from(i)).copied().unwrap_or(BagKey {
            query: query_id,
            bag: i,
        })
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
        baggage: &mut Option<Arc<Bags>>,
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
        baggage: &mut Option<Arc<Bags>>,
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
        baggage: &mut Option<Arc<Bags>>,
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
        let (row, many) = self.borrowed_row(observed);
        let [(at, values)] = many.as_slice() else {
            return false;
        };
        let at = *at;
        if values.is_empty() {
            return true;
        }
        // At most MAX_FANOUT tuples from one hit, as from any join; the rest counted.
        let dropped = values.len().saturating_sub(MAX_FANOUT);
        *cx.dropped = cx.dropped.saturating_add(dropped as u64);
        let tuples = values.iter().take(MAX_FANOUT).map(|v| {
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

    /// Runs advice without Let steps on tuples of borrowed values (no clone, no
    /// reference count touched): the observed values, each element of an exploded field
    /// and each joined bag's tuples in turn. A pack that reads bags collects what it
    /// packs (owned) and packs it after the walk. False, and nothing done, for advice it
    /// does not cover.
    fn run_borrowed(
        &self,
        s: &mut Scratch,
        observed: &[Observed],
        baggage: &mut Option<Arc<Bags>>,
        aggregator: &mut Aggregator,
        cx: &mut Context<'_>,
    ) -> bool {
        if self.width > INLINE_COLUMNS || self.steps.iter().any(|(target, _)| target.is_some()) {
            return false;
        }
        // Built here, not by `borrowed_row`: returning the row costs an OBSERVE+EMIT a
        // sixth more (46 -> 54 ns in the advice bench).
        let mut row: Row<'_> = [&NULL; INLINE_COLUMNS];
        let mut many: Exploded<'_> = SmallVec::new();
        for (slot, o) in observed.iter().take(self.observe.len()).enumerate() {
            match o {
                Observed::One(v) => row[slot] = v,
                Observed::Many(vs) => many.push((slot, vs)),
            }
        }
        if many.is_empty() && self.unpack.is_empty() {
            let row = &row[..self.width];
            if self.keeps(row) {
                self.finish(row, 1, baggage, aggregator, &mut s.computed, cx);
            }
            return true;
        }
        let walk = Walk {
            program: self,
            many: &many,
            bags: baggage.as_deref(),
        };
        if let ProgramEnd::Pack { slots, .. } = &self.end {
            // The bags are read while walking: what is packed waits in `s.packed`.
            let mut packed = std::mem::take(&mut s.packed);
            packed.clear();
            walk.each(&mut row, cx, &mut |row, weight, _| {
                if self.keeps(row) {
                    let values = slots.iter().map(|&i| row.column(i).clone()).collect();
                    packed.push((values, weight));
                }
            });
            self.pack_projected(&packed, baggage, cx);
            packed.clear();
            s.packed = packed;
            return true;
        }
        let computed = &mut s.computed;
        walk.each(&mut row, cx, &mut |row, weight, cx| {
            if self.keeps(row) {
                self.finish(row, weight, &mut None, aggregator, computed, cx);
            }
        });
        true
    }

    /// A row of the hit's single values, by slot, and the exploded fields' elements with
    /// their slots.
    fn borrowed_row<'o>(&self, observed: &'o [Observed]) -> (Row<'o>, Exploded<'o>) {
        let mut row: [&Value; INLINE_COLUMNS] = [&NULL; INLINE_COLUMNS];
        let mut many = SmallVec::new();
        for (slot, o) in observed.iter().take(self.observe.len()).enumerate() {
            match o {
                // In bounds: the observed exports are the first slots, and callers
                // take only advice of at most INLINE_COLUMNS slots.
                Observed::One(v) => row[slot] = v,
                Observed::Many(vs) => many.push((slot, &vs[..])),
            }
        }
        (row, many)
    }

    /// Packs tuples already projected to the packed slots: with their weights in one call
    /// into a grouped bag, stamped one by one into a temporal one.
    fn pack_projected(
        &self,
        packed: &[(InlineValues, u64)],
        baggage: &mut Option<Arc<Bags>>,
        cx: &mut Context<'_>,
    ) {
        let ProgramEnd::Pack { key, mode, .. } = &self.end else {
            return;
        };
        if packed.is_empty() {
            return;
        }
        let baggage = Arc::make_mut(baggage.get_or_insert_with(Default::default));
        let (first, n) = match mode {
            Temporal::All => {
                let tuples = packed.iter().map(|(values, w)| (values.iter(), *w));
                return baggage.pack_grouped(*key, tuples, cx.ids);
            }
            Temporal::First(n) => (true, *n),
            Temporal::MostRecent(n) => (false, *n),
        };
        // A temporal bag keeps stamped tuples, not counts: one each, as `finish` packs.
        for (values, _) in packed {
            pack_stamped(baggage, *key, (first, n), values.iter().cloned(), cx);
        }
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
        baggage: &mut Option<Arc<Bags>>,
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
                pack_stamped(baggage, *key, (first, n), values, cx);
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
    baggage: &mut Option<Arc<Bags>>,
    cx: &mut Context<'_>,
) {
    if rows.len() == 0 {
        return;
    }
    let baggage = Arc::make_mut(baggage.get_or_insert_with(Default::default));
    let tuples = rows.map(|(row, w)| (slots.iter().map(move |s| row.column(*s)), w));
    baggage.pack_grouped(key, tuples, cx.ids);
}

/// A tuple's values by slot, borrowed.
type Row<'a> = [&'a Value; INLINE_COLUMNS];

/// The exploded fields of a hit: their slots and elements.
type Exploded<'a> = SmallVec<[(usize, &'a [Value]); 2]>;

/// Packs one tuple into a `First(n)` (`first`) or `MostRecent(n)` bag, stamped now.
fn pack_stamped(
    baggage: &mut Bags,
    key: BagKey,
    (first, n): (bool, u32),
    values: impl IntoIterator<Item = Value>,
    cx: &mut Context<'_>,
) {
    let ts = cx.clock.stamp(cx.now);
    baggage.pack_temporal(key, first, n, ts, (cx.ids)(), values);
}

/// What a borrowed run walks: the elements of each exploded field, then each joined
/// bag's tuples.
struct Walk<'a> {
    program: &'a Program,
    many: &'a [(usize, &'a [Value])],
    bags: Option<&'a Bags>,
}

impl<'a> Walk<'a> {
    /// Calls `f` with every row, [`MAX_FANOUT`] at most (a request whose bags hold many
    /// tuples must not stall its thread): the rows past it are not made, only counted.
    fn each<F: FnMut(&[&Value], u64, &mut Context<'_>)>(
        &self,
        row: &mut [&'a Value; INLINE_COLUMNS],
        cx: &mut Context<'_>,
        f: &mut F,
    ) {
        let mut left = MAX_FANOUT;
        self.rows(0, row, 1, cx, &mut left, f);
        if left == 0 {
            // Counted only when the cap was reached: a second pass over the bags.
            let dropped = self.total().saturating_sub(MAX_FANOUT);
            *cx.dropped = cx.dropped.saturating_add(dropped as u64);
        }
    }

    /// How many rows the whole walk would make.
    fn total(&self) -> usize {
        let elements = self
            .many
            .iter()
            .fold(1usize, |n, (_, values)| n.saturating_mul(values.len()));
        self.program.unpack.iter().fold(elements, |n, (key, _)| {
            n.saturating_mul(self.bags.map_or(0, |b| b.tuples(*key).count()))
        })
    }

    /// Calls `f` with rows, dimension `at` and those after it filled into `row`, while
    /// `left` lasts. Recursion is as deep as the advice's exploded fields and joins
    /// (bounded by the compiler).
    fn rows<F: FnMut(&[&Value], u64, &mut Context<'_>)>(
        &self,
        at: usize,
        row: &mut [&'a Value; INLINE_COLUMNS],
        weight: u64,
        cx: &mut Context<'_>,
        left: &mut usize,
        f: &mut F,
    ) {
        if let Some((slot, values)) = self.many.get(at) {
            for v in values.iter() {
                if *left == 0 {
                    return;
                }
                if let Some(r) = row.get_mut(*slot) {
                    *r = v;
                }
                self.rows(at + 1, row, weight, cx, left, f);
            }
            return;
        }
        let Some((key, cols)) = self.program.unpack.get(at - self.many.len()) else {
            if *left > 0 {
                *left -= 1;
                f(&row[..self.program.width], weight, cx);
            }
            return;
        };
        let Some(bags) = self.bags else { return };
        // `try_for_each`, not `for`: the nested iterators over bags and segments run as
        // one loop each.
        let _ = bags.tuples(*key).try_for_each(|(values, w)| {
            if *left == 0 {
                return std::ops::ControlFlow::Break(());
            }
            for (slot, v) in cols.iter().zip(values) {
                if let Some(r) = row.get_mut(*slot) {
                    *r = v;
                }
            }
            self.rows(at + 1, row, weight.saturating_mul(w), cx, left, f);
            std::ops::ControlFlow::Continue(())
        });
    }
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
    /// Tuples a borrowed run packs once it is done reading the bags.
    packed: Vec<(InlineValues, u64)>,
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
