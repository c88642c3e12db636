//! The exclusive subscriber: Causeway's own `tracing::Subscriber`, with no
//! `tracing_subscriber::Registry` underneath (see docs/decisions/003). It is what `init`
//! installs by default (`Config::mode`, `CAUSEWAY_MODE`); the other mode is
//! `crate::layer`, on a Registry (docs/decisions/001). Both record the same `SpanRecord`s
//! (`crate::record`) and write the same spans.
//!
//! Spans live in [`slots`]; a span is made in its slot and finished where it lies. Each
//! thread keeps its free slots and the ids of the spans it has entered (its current-span
//! stack). The entered spans of every subscriber on a thread are one plain thread-local
//! stack, each entry tagged with its subscriber, so entering and leaving costs no lookup of
//! per-subscriber state; a span entered again does not become current again, as on the
//! Registry.
//!
//! A span of an unsampled trace below its local root gets no slot at all: its id is an
//! *alias*, its nearest recorded ancestor's id with bit 63 set, so creating, entering,
//! leaving and dropping it touches nothing shared, and no lock is taken to learn that it is
//! unsampled (the sampling mark sits beside the slot's lock). An alias still carries the
//! trace's context (its children, `SpanExt::context` and `inject` find it through the
//! ancestor); what is set on it alone (baggage, a remote parent) is not kept.
//!
//! A recorded child holds a reference to its recorded parent, as the Registry's spans do,
//! so a parent closes (and takes its end time) only after its last child: work spawned
//! from a request and still running when its handler returns keeps the request's span
//! open, in both modes alike.
//!
//! Callsites outside `Config::targets` get `Interest::never`. `tracepoints` enables and
//! disables sets of callsites at run time, the hook for Pivot Tracing's queries. `inner`
//! forwards to an inner subscriber (a Registry with `fmt`, say) the callsites it wants; a
//! span only the inner subscriber wants is transparent, and its children see its parent.

mod inner;
mod slots;
mod tracepoints;

pub use tracepoints::{TracepointId, Tracepoints};

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use thread_local::ThreadLocal;
use tracing_core::span::{Attributes, Current, Id, Record};
use tracing_core::{Event, Interest, LevelFilter, Metadata};
use tracing_subscriber::filter::Targets;

use crate::clock::now_raw;
use crate::pivot::ProbeKind;
use crate::record::{Recording, SpanRecord};
use inner::Inner;
use slots::{FreeList, Live, Marks, Slots};

/// Bit 63 of an id: the span is an unsampled child with no slot of its own; the other
/// bits are its nearest recorded ancestor's id.
const ALIAS: u64 = 1 << 63;

/// Tells subscribers apart in [`STACK`]; never reused.
static NEXT_SUBSCRIBER: AtomicU64 = AtomicU64::new(1);

thread_local! {
    // The spans entered on this thread, innermost last, each with the subscriber that
    // made it. One plain thread-local for every subscriber (there is almost always one),
    // so that entering and leaving a span costs no lookup of per-subscriber state.
    static STACK: RefCell<Vec<Entered>> = const { RefCell::new(Vec::new()) };
}

/// A span entered on this thread.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Entered {
    subscriber: u64,
    id: u64,
    /// Entered again while already entered: as with the Registry, it does not become
    /// the current span again.
    again: bool,
}

#[derive(Default)]
struct ThreadState {
    free: RefCell<FreeList>,
}

/// Causeway's exclusive `tracing` subscriber: the cheapest way to record `tracing` spans
/// (no Registry, no per-span allocation). Other layers cannot sit on it; to keep a log
/// output, use [`crate::layer`] on a Registry instead. Build it with [`crate::subscriber`].
pub struct CausewaySubscriber {
    id: u64,
    recording: Arc<Recording>,
    targets: Option<Targets>,
    slots: Slots,
    threads: ThreadLocal<ThreadState>,
    inner: Option<Inner>,
    tracepoints: Tracepoints,
}

/// Where a new span's context comes from.
enum Parent {
    /// A new trace, or the remote parent `with_remote_parent` left.
    Root,
    /// A recorded span of a sampled trace (its id, now referenced by the child).
    Sampled(crate::record::Inherited, u64),
    /// A span of an unsampled trace: the new span is an alias of this id.
    Unsampled(u64),
}

impl CausewaySubscriber {
    pub(crate) fn new(recording: Arc<Recording>, targets: Option<Targets>) -> CausewaySubscriber {
        CausewaySubscriber {
            id: NEXT_SUBSCRIBER.fetch_add(1, Ordering::Relaxed),
            recording,
            targets,
            slots: Slots::new(),
            threads: ThreadLocal::new(),
            inner: None,
            tracepoints: Tracepoints::default(),
        }
    }

    /// Also hands `inner` (for example `tracing_subscriber::registry().with(fmt::layer())`,
    /// to keep a log output) the spans and events it is interested in. Callsites only
    /// Causeway wants cost what they cost without it; those only `inner` wants are not
    /// recorded by Causeway (their children see through them to their parent).
    pub fn with_inner(
        mut self,
        inner: impl tracing_core::Subscriber + Send + Sync + 'static,
    ) -> Self {
        self.inner = Some(Inner::new(inner));
        self
    }

    /// The callsites recorded beyond the configured targets, to change at run time.
    pub fn tracepoints(&self) -> Tracepoints {
        self.tracepoints.clone()
    }

    /// Whether Causeway sees this callsite: traced, or read by an installed query.
    fn records(&self, metadata: &Metadata<'_>) -> bool {
        self.traced(metadata) || self.queried(metadata)
    }

    /// Whether the targets or an enabled tracepoint put this callsite in traces (a
    /// callsite only a query reads runs its advice and nothing else).
    fn traced(&self, metadata: &Metadata<'_>) -> bool {
        self.targets
            .as_ref()
            .is_none_or(|t| t.would_enable(metadata.target(), metadata.level()))
            || self.tracepoints.matches(metadata)
    }

    /// Whether an installed Pivot Tracing query has advice at this callsite.
    fn queried(&self, metadata: &Metadata<'_>) -> bool {
        self.recording.pivot.hooks(metadata).is_some()
    }

    /// Runs `f` on the Pivot Tracing runtime and the bag of span `id` (an alias's is its
    /// recorded ancestor's).
    #[cfg(feature = "pivot")]
    pub(crate) fn with_bag<R>(
        &self,
        id: &Id,
        f: impl FnOnce(&crate::pivot::Runtime, &mut Option<Arc<crate::pivot::Bags>>) -> R,
    ) -> Option<R> {
        self.slots.with(id.into_u64() & !ALIAS, |l| {
            f(&self.recording.pivot, &mut l.record.bag)
        })
    }

    /// The id a child of span `p` takes as its parent: a transparent span's own parent.
    fn seen_through(&self, p: u64) -> Option<u64> {
        if p & ALIAS != 0 || self.inner.is_none() {
            return Some(p);
        }
        self.slots.see_through(p).unwrap_or(Some(p))
    }

    /// The inner subscriber's id of span `id` (none for an alias).
    fn inner_id(&self, id: u64) -> Option<u64> {
        if id & ALIAS != 0 {
            return None;
        }
        self.slots.inner(id)
    }

    fn thread(&self) -> &ThreadState {
        self.threads.get_or_default()
    }

    /// The innermost span this subscriber made that is entered on this thread.
    fn current(&self) -> Option<u64> {
        STACK
            .try_with(|s| {
                s.borrow()
                    .iter()
                    .rev()
                    .find(|e| e.subscriber == self.id && !e.again)
                    .map(|e| e.id)
            })
            .ok()
            .flatten()
    }

    fn parent(&self, parent: Option<u64>) -> Parent {
        let Some(p) = parent.and_then(|p| self.seen_through(p)) else {
            return Parent::Root;
        };
        if p & ALIAS != 0 {
            return Parent::Unsampled(p);
        }
        if self.slots.is_unsampled(p) {
            return Parent::Unsampled(p | ALIAS);
        }
        match self.slots.with(p, |l| {
            l.record
                .is_sampled()
                .then(|| l.record.inherited())
                .ok_or(p | ALIAS)
        }) {
            Some(Ok(inherited)) if self.slots.clone_ref(p) => Parent::Sampled(inherited, p),
            Some(Ok(_)) => Parent::Root,
            Some(Err(alias)) => Parent::Unsampled(alias),
            // The parent has closed (or the id is not ours): start afresh.
            None => Parent::Root,
        }
    }

    /// A span only the inner subscriber wants: a slot that holds its inner id and sends
    /// its children on to its parent; Causeway records nothing of it.
    fn transparent_span(
        &self,
        attrs: &Attributes<'_>,
        parent: Option<u64>,
        inner: Option<u64>,
    ) -> Id {
        let see_through = parent.and_then(|p| self.seen_through(p)).unwrap_or(0);
        let marks = Marks {
            inner,
            see_through: Some(see_through),
        };
        let inserted = self
            .slots
            .insert(&mut self.thread().free.borrow_mut(), marks, || Live {
                record: SpanRecord::transparent(attrs.metadata().name()),
                metadata: attrs.metadata(),
                parent: None,
            });
        Id::from_u64(inserted.unwrap_or(ALIAS))
    }

    /// Runs `f` on the record of span `id`. An alias gets a record made for the call, a
    /// child of its recorded ancestor with a span id of its own, which is not kept.
    pub(crate) fn with_record<R>(
        &self,
        id: &Id,
        f: impl FnOnce(&mut SpanRecord) -> R,
    ) -> Option<R> {
        let id = id.into_u64();
        if id & ALIAS != 0 {
            return self.slots.with(id & !ALIAS, |l| {
                let mut r = SpanRecord::unsampled_child(&l.record, l.metadata.name());
                f(&mut r)
            });
        }
        self.slots.with(id, |l| f(&mut l.record))
    }
}

impl tracing_core::Subscriber for CausewaySubscriber {
    // Whether a callsite is recorded is decided once per callsite (and again when
    // `tracing_core::callsite::rebuild_interest_cache` runs): `never` makes it free.
    fn register_callsite(&self, metadata: &'static Metadata<'static>) -> Interest {
        self.recording.pivot.register(metadata);
        let ours = self.records(metadata);
        match &self.inner {
            _ if ours => Interest::always(),
            Some(inner) => inner.register_callsite(metadata),
            None => Interest::never(),
        }
    }

    fn on_register_dispatch(&self, subscriber: &tracing_core::Dispatch) {
        self.recording.pivot.set_dispatch(subscriber);
    }

    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        self.records(metadata) || self.inner.as_ref().is_some_and(|i| i.wants(metadata))
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        let ours = match &self.targets {
            // An enabled tracepoint or a query's callsite may be at any level (enabling
            // or installing one rebuilds the hint).
            Some(_) if self.tracepoints.any() || self.recording.pivot.active() => {
                LevelFilter::TRACE
            }
            Some(t) => {
                tracing_subscriber::layer::Filter::<tracing_subscriber::Registry>::max_level_hint(t)
                    .unwrap_or(LevelFilter::TRACE)
            }
            None => LevelFilter::TRACE,
        };
        Some(match &self.inner {
            Some(inner) => ours.max(inner.max_level()),
            None => ours,
        })
    }

    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let explicit = attrs.parent().map(Id::into_u64);
        let parent = match explicit {
            Some(p) => Some(p),
            None if attrs.is_contextual() => self.current(),
            None => None,
        };
        let forward = self
            .inner
            .as_ref()
            .filter(|i| i.wants(attrs.metadata()))
            .map(|i| i.new_span(attrs, explicit.and_then(|p| self.inner_id(p))));
        if forward.is_some() && !self.records(attrs.metadata()) {
            return self.transparent_span(attrs, parent, forward);
        }
        let (inherited, parent) = match self.parent(parent) {
            // A span only the inner subscriber knows by its own id needs a slot for it,
            // and so does one whose close, entry or fields a query's advice reads. It
            // holds its ancestor open, to merge its bag into it on close.
            Parent::Unsampled(alias) if forward.is_some() || self.queried(attrs.metadata()) => {
                let ancestor = alias & !ALIAS;
                match self.slots.with(ancestor, |l| l.record.inherited()) {
                    Some(inherited) => {
                        let held = self.slots.clone_ref(ancestor).then_some(ancestor);
                        (Some(inherited), held)
                    }
                    None => (None, None),
                }
            }
            Parent::Unsampled(alias) => return Id::from_u64(alias),
            Parent::Sampled(p, id) => (Some(p), Some(id)),
            Parent::Root => (None, None),
        };
        let start = now_raw();
        let marks = Marks {
            inner: forward,
            see_through: None,
        };
        let inserted = self
            .slots
            .insert(&mut self.thread().free.borrow_mut(), marks, || Live {
                record: self.recording.new_record(inherited, attrs, start),
                metadata: attrs.metadata(),
                parent,
            });
        match inserted {
            Some(id) => Id::from_u64(id),
            // Every slot taken (millions of open spans): the span is not recorded, and
            // gives back the reference it took on its parent.
            None => {
                if let Some(p) = parent {
                    self.try_close(Id::from_u64(p));
                }
                Id::from_u64(ALIAS)
            }
        }
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let id = span.into_u64();
        if let Some(inner) = &self.inner {
            if let Some(inner_id) = self.inner_id(id) {
                inner.record(inner_id, values);
            }
        }
        if id & ALIAS != 0 {
            return;
        }
        self.slots.with(id, |l| {
            if let Some(d) = l.record.data.as_mut() {
                d.record_values(values);
            }
            if let Some(t) = l.record.tracepoint.as_mut() {
                t.record(values);
            }
        });
    }

    fn record_follows_from(&self, span: &Id, follows: &Id) {
        let (id, other) = (span.into_u64(), follows.into_u64());
        if let Some(inner) = &self.inner {
            if let (Some(a), Some(b)) = (self.inner_id(id), self.inner_id(other)) {
                inner.record_follows_from(a, b);
            }
        }
        if id & ALIAS != 0 {
            return;
        }
        let Some((trace_id, span_id)) =
            self.with_record(&Id::from_u64(other), |r| (r.trace_id, r.span_id))
        else {
            return;
        };
        self.slots.with(id, |l| {
            if let Some(d) = l.record.data.as_mut() {
                d.add_link(trace_id, span_id);
            }
        });
    }

    fn event(&self, event: &Event<'_>) {
        if let Some(inner) = self.inner.as_ref().filter(|i| i.wants(event.metadata())) {
            inner.event(event);
            if !self.records(event.metadata()) {
                return;
            }
        }
        let parent = match event.parent() {
            Some(p) => Some(p.into_u64()),
            None if event.is_contextual() => self.current(),
            None => None,
        };
        let parent = parent.and_then(|p| self.seen_through(p));
        // Only an event a query has advice at takes its span's lock for the bag.
        let hooks = self.recording.pivot.hooks(event.metadata());
        if let Some(hooks) = &hooks {
            let fired = parent.and_then(|p| {
                self.slots.with(p & !ALIAS, |l| {
                    self.recording
                        .pivot_event(hooks, event, Some(&mut l.record))
                })
            });
            if fired.is_none() {
                self.recording.pivot_event(hooks, event, None);
            }
        }
        let Some(id) = parent.filter(|p| p & ALIAS == 0) else {
            return;
        };
        // An event enabled only for a query's advice stays out of the trace (without
        // advice here, the interest cache let it through because it is traced).
        if hooks.is_some() && !self.traced(event.metadata()) {
            return;
        }
        self.slots.with(id, |l| {
            if let Some(d) = l.record.data.as_mut() {
                d.record_event(event);
            }
        });
    }

    fn enter(&self, span: &Id) {
        let id = span.into_u64();
        let _ = STACK.try_with(|s| {
            let mut stack = s.borrow_mut();
            // Aliases share their ancestor's id, so whether one counts as entered again
            // changes nothing the stack answers: they skip the search.
            let again =
                id & ALIAS == 0 && stack.iter().any(|e| e.subscriber == self.id && e.id == id);
            stack.push(Entered {
                subscriber: self.id,
                id,
                again,
            });
        });
        if let Some(inner) = &self.inner {
            if let Some(inner_id) = self.inner_id(id) {
                inner.enter(inner_id);
            }
        }
        if self.recording.cpu_time && id & ALIAS == 0 {
            self.slots.with(id, |l| {
                if let Some(d) = l.record.data.as_mut() {
                    d.enter_cpu();
                }
            });
        }
        if self.recording.pivot.active() && id & ALIAS == 0 {
            self.slots.with(id, |l| {
                self.recording
                    .pivot_moment(&mut l.record, ProbeKind::SpanEnter)
            });
        }
    }

    fn exit(&self, span: &Id) {
        let id = span.into_u64();
        let _ = STACK.try_with(|s| {
            let mut stack = s.borrow_mut();
            // Almost always the innermost span leaves.
            if stack
                .last()
                .is_some_and(|e| e.subscriber == self.id && e.id == id)
            {
                stack.pop();
            } else if let Some(at) = stack
                .iter()
                .rposition(|e| e.subscriber == self.id && e.id == id)
            {
                stack.remove(at);
            }
        });
        if let Some(inner) = &self.inner {
            if let Some(inner_id) = self.inner_id(id) {
                inner.exit(inner_id);
            }
        }
        if self.recording.cpu_time && id & ALIAS == 0 {
            self.slots.with(id, |l| {
                if let Some(d) = l.record.data.as_mut() {
                    d.exit_cpu();
                }
            });
        }
        if self.recording.pivot.active() && id & ALIAS == 0 {
            self.slots.with(id, |l| {
                self.recording
                    .pivot_moment(&mut l.record, ProbeKind::SpanExit)
            });
        }
    }

    fn clone_span(&self, span: &Id) -> Id {
        let id = span.into_u64();
        if id & ALIAS == 0 {
            self.slots.clone_ref(id);
            if let Some(inner) = &self.inner {
                if let Some(inner_id) = self.inner_id(id) {
                    inner.clone_span(inner_id);
                }
            }
        }
        span.clone()
    }

    fn try_close(&self, span: Id) -> bool {
        if let Some(inner) = &self.inner {
            if Inner::is_closing() {
                // The inner subscriber closing one of its own spans' parents.
                return inner.try_close(span);
            }
        }
        let id = span.into_u64();
        if id & ALIAS != 0 {
            return false;
        }
        if let Some(inner) = &self.inner {
            if let Some(inner_id) = self.inner_id(id) {
                inner.try_close(Id::from_u64(inner_id));
            }
        }
        let thread = self.thread();
        let mut next = Some(id);
        let mut closed = false;
        // A closing span drops its reference to its parent, which may close it in turn:
        // a loop, not recursion, however deep the chain.
        while let Some(id) = next.take() {
            let closing = self
                .slots
                .release(id, &mut thread.free.borrow_mut(), |live| {
                    self.recording.finish(&mut live.record);
                    (live.parent, live.record.bag.take())
                });
            let Some((parent, bag)) = closing else { break };
            if let (Some(p), Some(bag)) = (parent, bag) {
                self.slots
                    .with(p, |l| crate::pivot::merge_bag(&mut l.record.bag, Some(bag)));
            }
            closed = true;
            next = parent;
        }
        closed
    }

    fn current_span(&self) -> Current {
        let Some(id) = self.current() else {
            return Current::none();
        };
        match self.slots.metadata(id & !ALIAS) {
            Some(metadata) => Current::new(Id::from_u64(id), metadata),
            None => Current::none(),
        }
    }
}
