//! Message linking (WAP5 §5.1): which message caused which, with a probability, and the
//! causal path instances and patterns that follow.
//!
//! 1. Per pair of nodes B→C, the mean causal delay `d`: for each message B→C, the time
//!    since the latest message into B, within the window `x` (none: spontaneous, not
//!    counted).
//! 2. Each message B→C sent at `t` scores each message into B received at `r` (`t - x <
//!    r <= t`) `exp(-(t - r) / d)`, and being spontaneous `exp(-y)` (a delay of `y d`);
//!    the scores normalised are the link probabilities. A message from a node that was
//!    not captured (no send time) can only be caused by a message to that node from its
//!    receiver (A→B→A), timed on the receiver's clock.
//! 3. From each root (a message most likely spontaneous), path instances: each message a
//!    member may have caused is taken (probably-true), left to another path
//!    (probably-false) or tried both ways (while the tree's budget of try-both decisions
//!    lasts); an instance's probability is the product of its choices' probabilities.
//!    Unlike the paper, a message's links to the path are one choice (it has one cause),
//!    not one each. Instances of the same shape (call tree) form a pattern: its count and
//!    expected count (the sum of the probabilities).
//!
//! The paper leaves open the try-both band, the probably-true/false thresholds, the budget
//! and the roots; they are [`LinkOptions`], with defaults measured on the TraceWeaver
//! fixtures (BENCHMARKS.md).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use foldhash::{HashMap, HashSet};

use serde::Serialize;

use crate::connections::Connections;
use crate::numbers::Numbered;
use crate::reconcile::{Message, MessageId, MessageIndex};
use crate::roles::fixed_numbered;
use crate::rows::{Indices, Rows};
use crate::shapes::{PatternCounts, ShapeNames};
use crate::slots::{KindPair, Slots};

/// Rounds of linking again with the causes found before (the connections mode).
const REFINEMENTS: usize = 2;

/// The linking parameters.
#[derive(Clone, Debug)]
pub struct LinkOptions {
    /// The window `x`: a parent is at most this long before its child (ns).
    pub window_ns: i64,
    /// `y`: being spontaneous scores as a delay of `y` times the pair's mean.
    pub spontaneous_factor: f64,
    /// A link with `p` within this of 0.5 is try-both.
    pub try_both_band: f64,
    /// Try-both decisions per tree (at most 2^budget instances from one root).
    pub budget: u32,
    /// Candidate parents kept per message (the latest ones; older ones score less).
    pub max_candidates: usize,
    /// The ports each node was seen listening on (from captures): fixed for certain.
    pub listening: HashMap<String, HashSet<u16>>,
    /// A port that talks to at least this many other endpoints is fixed.
    pub fixed_port_peers: usize,
    /// Every message a client node (one that never uses a fixed port: a load generator,
    /// a browser) sends to a server starts a path. What a client received last is its answer
    /// to an earlier request, not the cause of its next one. WAP5's clients were not
    /// captured, which has the same effect; the greedy baseline ignores this.
    pub clients_start_paths: bool,
    /// In the connections mode, which kinds of message cause at most one message of
    /// another kind (a server that got its search service's answer calls reservation
    /// once), and which nearly always one, learned from the most likely causes, hold in
    /// every path instance: an instance whose request's one call went to another path
    /// has the other path's. Instances of one request then differ in which messages they
    /// hold more than in their shapes, so that expected counts of patterns are not
    /// spread over shapes with a call twice or not at all.
    pub learn_slots: bool,
}

impl Default for LinkOptions {
    fn default() -> Self {
        LinkOptions {
            window_ns: 2_000_000_000,
            spontaneous_factor: 4.0,
            try_both_band: 0.25,
            budget: 6,
            max_candidates: 32,
            listening: HashMap::default(),
            fixed_port_peers: 3,
            clients_start_paths: true,
            learn_slots: true,
        }
    }
}

/// How causes are chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// WAP5's linking, as above.
    Faithful,
    /// The baseline: each message's parent is the latest message its sender received
    /// before sending it (within the window).
    Greedy,
    /// WAP5's linking told what the capture knows of connections: an answer a server
    /// sends is caused by the request that came on its connection, or by an answer to a
    /// call the server made after that request arrived (see `connections`).
    Connections,
}

/// Where one message ended up: in its most probable path instance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Assignment {
    /// The message's id.
    pub id: MessageId,
    /// The inferred trace (path instance) it belongs to.
    pub trace: u64,
    /// The request it was sent for, as Dapper-style traces give parents (a call's and
    /// an answer's parent is the request its sender was handling): what its span hangs
    /// under.
    pub parent: Option<MessageId>,
    /// The message that caused it (WAP5's sense: the one after which it was sent), in
    /// that instance.
    pub cause: Option<MessageId>,
    /// The instance's probability.
    pub probability: f64,
}

/// Where one message ended up, by message index: [`Assignment`] without the ids (at
/// CoDeeN scale the ids would double the largest table linking leaves).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// The inferred trace.
    pub trace: u64,
    /// The index of the request it was sent for.
    pub parent: Option<u32>,
    /// The index of the message that caused it.
    pub cause: Option<u32>,
    /// The instance's probability.
    pub probability: f64,
}

/// A path pattern: path instances of one shape.
#[derive(Clone, Debug, Serialize)]
pub struct Pattern {
    /// The shape: `src>dst` per message, children in brackets.
    pub shape: String,
    /// Path instances of this shape.
    pub count: u64,
    /// The sum of the instances' probabilities.
    pub expected: f64,
    /// The most probable instance's probability.
    pub max_probability: f64,
}

/// What linking inferred.
#[derive(Debug, Default)]
pub struct Linked {
    /// Each message's placement, in the order of the messages linked.
    pub placements: Vec<Placement>,
    /// The path patterns found, the most expected first.
    pub patterns: Vec<Pattern>,
    /// Mean causal delay per node pair (ns).
    pub delays: Vec<(String, String, f64)>,
}

impl Linked {
    /// Message `i`'s assignment, with message ids (as `--assignments` writes it).
    pub fn assignment(&self, messages: &[Message], i: usize) -> Assignment {
        let id = |m: Option<u32>| m.map(|m| messages[m as usize].id.clone());
        let p = &self.placements[i];
        Assignment {
            id: messages[i].id.clone(),
            trace: p.trace,
            parent: id(p.parent),
            cause: id(p.cause),
            probability: p.probability,
        }
    }

    /// Every message's assignment.
    pub fn assignments(&self, messages: &[Message]) -> Vec<Assignment> {
        (0..self.placements.len())
            .map(|i| self.assignment(messages, i))
            .collect()
    }

    /// Each message's cause, by index.
    pub fn causes(&self) -> Vec<Option<u32>> {
        self.placements.iter().map(|p| p.cause).collect()
    }
}

/// Every message's candidate causes: (cause's index, probability) by message, and its
/// probability of being spontaneous. Probabilities are kept in single precision: millions
/// of messages have several candidates each.
struct CauseTable {
    parents: Rows<(u32, f32)>,
    spontaneous: Vec<f32>,
}

impl CauseTable {
    fn with_capacity(n: usize) -> CauseTable {
        CauseTable {
            parents: Rows::with_capacity(n),
            spontaneous: Vec::with_capacity(n),
        }
    }

    fn push(&mut self, parents: &[(u32, f32)], spontaneous: f32) {
        self.parents.push_row(parents.iter().copied());
        self.spontaneous.push(spontaneous);
    }

    /// Appends `other`'s messages after these.
    fn append(&mut self, other: CauseTable) {
        self.parents.append(other.parents);
        self.spontaneous.extend(other.spontaneous);
    }

    fn parents(&self, i: u32) -> &[(u32, f32)] {
        self.parents.row(i as usize)
    }

    fn spontaneous(&self, i: u32) -> f64 {
        self.spontaneous
            .get(i as usize)
            .copied()
            .map_or(1.0, f64::from)
    }

    fn most_likely(&self, i: u32) -> Option<u32> {
        let spontaneous = self.spontaneous.get(i as usize).copied().unwrap_or(1.0);
        self.parents(i)
            .iter()
            .filter(|(_, p)| *p > spontaneous)
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(i, _)| *i)
    }

    /// Each message's most likely cause.
    fn most_likely_all(&self) -> Indices {
        (0..self.parents.len() as u32)
            .map(|i| self.most_likely(i))
            .collect()
    }
}

impl Numbered {
    /// Whether each node is a client (§2.5.1): it never uses a fixed endpoint.
    fn clients(&self, fixed: &HashSet<(u32, u32)>) -> Vec<bool> {
        let mut clients = vec![true; self.names.len()];
        for &(node, _) in fixed {
            clients[node as usize] = false;
        }
        clients
    }

    /// The names patterns use: every client node is CLIENT; the unaggregated names stay
    /// in the assignments.
    fn pattern_names(&self, clients: &[bool]) -> Vec<&str> {
        self.names
            .iter()
            .zip(clients)
            .map(|(n, &client)| pattern_names_of(n, client))
            .collect()
    }
}

/// A node's name in patterns.
fn pattern_names_of(name: &str, client: bool) -> &str {
    if client {
        crate::roles::CLIENT
    } else {
        name
    }
}

/// The patterns of traces given by `assignments` (the ground truth, or linking's final
/// assignments): one per trace, its probability the largest of its messages'. A trace
/// with several roots (messages whose parent is elsewhere) has them joined with ` + `.
/// Parents may be causes (WAP5's) or the requests messages were sent for (Dapper's, as
/// `link` gives them; finding those again changes nothing): both give the same call
/// trees.
pub fn patterns_of(
    messages: &[Message],
    assignments: &[Assignment],
    o: &LinkOptions,
) -> Vec<Pattern> {
    let (nodes, endpoints) = crate::parallel::join(
        || Numbered::nodes(messages),
        || Numbered::endpoints(messages),
    );
    let fixed = fixed_numbered(&nodes, &endpoints, &o.listening, o.fixed_port_peers);
    let names = nodes.pattern_names(&nodes.clients(&fixed));
    let names = ShapeNames::of(&names);
    let connections = Connections::of(messages, &nodes, &endpoints, &fixed);
    let index = MessageIndex::of(messages);
    let mut traces: HashMap<u64, Instance> = HashMap::default();
    let trace_of: HashMap<u32, u64> = assignments
        .iter()
        .filter_map(|a| Some((index.get(&a.id)? as u32, a.trace)))
        .collect();
    for a in assignments {
        let Some(i) = index.get(&a.id) else { continue };
        let i = i as u32;
        let parent = a
            .parent
            .as_ref()
            .and_then(|p| index.get(p).map(|p| p as u32))
            .filter(|p| trace_of.get(p) == Some(&a.trace));
        let t = traces.entry(a.trace).or_default();
        t.0.push((i, parent));
        t.1 = t.1.max(a.probability);
    }
    let mut patterns = PatternCounts::default();
    for (members, probability) in traces.into_values() {
        let members = served_tree(&causes_first(&members), messages, &connections);
        let roots: Vec<Vec<u32>> = members
            .iter()
            .filter(|(_, p)| p.is_none())
            .map(|&(r, _)| names.shape(&members, r, &nodes.src, &nodes.dst))
            .collect();
        patterns.add(&ShapeNames::joined(roots), probability);
    }
    patterns.into_sorted(&names)
}

/// A trace's messages ordered so that each comes after its parent (those in a cycle,
/// which no parent reaches from a root, are left out).
fn causes_first(members: &[(u32, Option<u32>)]) -> Vec<(u32, Option<u32>)> {
    let mut kids: HashMap<u32, Vec<(u32, Option<u32>)>> = HashMap::default();
    let mut ordered: Vec<(u32, Option<u32>)> = Vec::with_capacity(members.len());
    for &(m, p) in members {
        match p {
            Some(p) => kids.entry(p).or_default().push((m, Some(p))),
            None => ordered.push((m, None)),
        }
    }
    let mut next = 0;
    while let Some(&(m, _)) = ordered.get(next) {
        ordered.extend(kids.remove(&m).unwrap_or_default());
        next += 1;
    }
    ordered
}

/// Links `messages` (in any order).
pub fn link(messages: &[Message], mode: Mode, o: &LinkOptions) -> Linked {
    let (nodes, endpoints) = crate::parallel::join(
        || Numbered::nodes(messages),
        || Numbered::endpoints(messages),
    );
    let (src, dst) = (&nodes.src, &nodes.dst);
    let n = messages.len();
    let fixed = fixed_numbered(&nodes, &endpoints, &o.listening, o.fixed_port_peers);
    let clients = nodes.clients(&fixed);
    // A captured client's message to a server (an uncaptured sender's messages are
    // linked A→B→A; between two clients nothing says which one asks).
    let starts_path = |i: usize| {
        mode != Mode::Greedy
            && o.clients_start_paths
            && clients[src[i] as usize]
            && !clients[dst[i] as usize]
            && messages[i].send_ns.get().is_some()
    };
    // Every mode draws patterns with the requests messages were sent for; only the
    // connections mode links with them.
    let connections = Connections::of(messages, &nodes, &endpoints, &fixed);
    drop((endpoints, fixed));
    let by_connections = mode == Mode::Connections;
    // Per node, the messages into it by receive time, and out of it by send time.
    let nodes_count = nodes.names.len();
    let mut into = Rows::grouped(nodes_count, || {
        messages
            .iter()
            .enumerate()
            .filter_map(|(i, m)| Some((dst[i] as usize, (m.recv_ns.get()?, i as u32))))
    });
    let mut out_of = Rows::grouped(nodes_count, || {
        messages
            .iter()
            .enumerate()
            .filter_map(|(i, m)| Some((src[i] as usize, (m.send_ns.get()?, i as u32))))
    });
    for node in 0..nodes_count {
        into.row_mut(node).sort_unstable();
        out_of.row_mut(node).sort_unstable();
    }
    // Candidates of message i: (parent, delay), the latest first.
    let candidates = |i: usize, limit_ns: i64, max: usize, found: &mut Vec<(u32, i64)>| {
        found.clear();
        let m = &messages[i];
        let (list, t, reply) = match (m.send_ns.get(), m.recv_ns.get()) {
            // Into the sender, before the send.
            (Some(t), _) => (into.row(src[i] as usize), t, false),
            // An uncaptured sender: only a message its receiver sent it on the same
            // connection (endpoints reversed), before the receipt, both on the receiver's
            // clock: A→B→A. A new connection from outside (a client) has no cause.
            (None, Some(t)) => (out_of.row(dst[i] as usize), t, true),
            (None, None) => return,
        };
        let end = list.partition_point(|(at, _)| *at <= t);
        for &(at, j) in list[..end].iter().rev() {
            if t - at > limit_ns || found.len() >= max {
                break;
            }
            if j as usize == i {
                continue;
            }
            let p = &messages[j as usize];
            let matches = if reply {
                p.src_ep == m.dst_ep && p.dst_ep == m.src_ep && dst[j as usize] == src[i]
            } else {
                !by_connections || connections.allows(messages, i, j as usize)
            };
            if matches {
                found.push((j, t - at));
            }
        }
    };
    // Step 1: the mean delay per pair, every client one node (§2.5.1): a client host
    // seen a few times says little on its own, and thousands of them are many pairs.
    let client_node = nodes.names.len() as u32;
    let aggregate = |node: u32| {
        if clients[node as usize] {
            client_node
        } else {
            node
        }
    };
    // Each message's kind (its node pair) as a number, and the pairs.
    let mut kind_numbers: HashMap<(u32, u32), Kind> = HashMap::default();
    let mut kind_pairs: Vec<(u32, u32)> = Vec::new();
    let kinds: Vec<Kind> = (0..n)
        .map(|i| {
            let pair = (aggregate(src[i]), aggregate(dst[i]));
            *kind_numbers.entry(pair).or_insert_with(|| {
                kind_pairs.push(pair);
                (kind_pairs.len() - 1) as Kind
            })
        })
        .collect();
    drop(kind_numbers);
    let pair = |i: usize| kinds[i];
    let mut sums: Vec<(f64, u64)> = vec![(0.0, 0); kind_pairs.len()];
    // Each message's latest candidate and its delay, found on every core and summed in
    // message order; the candidates also give the connections mode its first kinds.
    let latest = crate::parallel::map_ranges(n, |range| {
        let mut found = Vec::new();
        range
            .filter(|&i| !starts_path(i))
            .filter_map(|i| {
                candidates(i, o.window_ns, 1, &mut found);
                found.first().map(|&(j, delay)| (i as u32, j, delay))
            })
            .collect::<Vec<_>>()
    });
    let mut first_candidates: Vec<(u32, u32)> = Vec::new();
    for &(i, j, delay) in latest.iter().flatten() {
        if by_connections {
            first_candidates.push((i, j));
        }
        let e = &mut sums[pair(i as usize) as usize];
        e.0 += delay as f64;
        e.1 += 1;
    }
    drop(latest);
    let mean = |i: usize| -> f64 {
        let (sum, count) = sums[pair(i) as usize];
        if count == 0 {
            1_000.0
        } else {
            (sum / count as f64).max(1_000.0)
        }
    };
    let spontaneous_weight = (-o.spontaneous_factor).exp();
    // Message i's candidate causes weighed into `weighed`; returns the probability
    // that it is spontaneous.
    let weigh = |i: usize,
                 eligible: &Eligible<'_>,
                 prior: &Prior<'_>,
                 found: &mut Vec<(u32, i64)>,
                 scores: &mut Vec<f64>,
                 weighed: &mut Vec<(u32, f32)>|
     -> f32 {
        weighed.clear();
        if mode == Mode::Greedy {
            candidates(i, o.window_ns, 1, found);
            weighed.extend(found.iter().map(|&(j, _)| (j, 1.0)));
            return if weighed.is_empty() { 1.0 } else { 0.0 };
        }
        if starts_path(i) {
            return 1.0;
        }
        let d = mean(i);
        // Scores below a thousandth of being spontaneous change nothing: the window
        // shrinks to where they start.
        let limit = ((o.spontaneous_factor + 7.0) * d).min(o.window_ns as f64) as i64;
        candidates(i, limit, o.max_candidates, found);
        found.retain(|(j, _)| eligible(i, *j));
        let mut spontaneous_weight = spontaneous_weight;
        if let (true, Some(sent)) = (by_connections, messages[i].send_ns.get()) {
            let c = &connections;
            // A server handling a request does not send on its own: the latest request
            // still unanswered is a cause however long ago it came.
            let open = c.open_request(src[i], sent, o.window_ns, |j| {
                c.allows(messages, i, j) && eligible(i, j as u32)
            });
            if let Some((j, arrived)) = open {
                spontaneous_weight = 0.0;
                if !found.iter().any(|(k, _)| *k == j) {
                    found.push((j, sent - arrived));
                }
            }
        }
        // Scores as logarithms, scaled by the best before exponentiating: a cause long
        // before its effect must not underflow to 0/0.
        scores.clear();
        scores.extend(
            found
                .iter()
                .map(|(j, delay)| -(*delay as f64) / d + prior(i, *j)),
        );
        let spontaneous_score = spontaneous_weight.ln();
        let top = scores.iter().copied().fold(spontaneous_score, f64::max);
        if !top.is_finite() {
            return 1.0;
        }
        for x in scores.iter_mut() {
            *x = (*x - top).exp();
        }
        let spontaneous_weight = (spontaneous_score - top).exp();
        let total = spontaneous_weight + scores.iter().sum::<f64>();
        weighed.extend(
            found
                .iter()
                .zip(scores.iter())
                .map(|((j, _), w)| (*j, (w / total) as f32)),
        );
        (spontaneous_weight / total) as f32
    };
    // Step 2: every message's causes, of those `eligible` (i, j) allows; messages are
    // independent, so each thread weighs a range of them.
    let causes_of = |eligible: &Eligible<'_>, prior: &Prior| -> CauseTable {
        let weigh_range = |range: std::ops::Range<usize>| {
            let (mut found, mut scores, mut weighed) = (Vec::new(), Vec::new(), Vec::new());
            let mut table = CauseTable::with_capacity(range.len());
            for i in range {
                let spontaneous = weigh(i, eligible, prior, &mut found, &mut scores, &mut weighed);
                table.push(&weighed, spontaneous);
            }
            table
        };
        let mut parts = crate::parallel::map_ranges(n, weigh_range).into_iter();
        let mut table = parts.next().unwrap_or_else(|| CauseTable::with_capacity(0));
        for part in parts {
            table.append(part);
        }
        table.parents.shrink_to_fit();
        table
    };
    // The connections mode also weighs a cause by how often its kind of message (node
    // pair) causes the effect's kind: a server that has had its answer from `geo` does
    // not call `geo` again for that request; the request that just came in does.
    let mut causes = if by_connections {
        let follows = Follows::of(
            kind_pairs.len(),
            first_candidates
                .iter()
                .map(|&(i, j)| (pair(j as usize), pair(i as usize))),
        );
        causes_of(&|_, _| true, &|i, j| {
            follows.prior(pair(j as usize), pair(i))
        })
    } else {
        causes_of(&|_, _| true, &|_, _| 0.0)
    };
    drop(first_candidates);
    if by_connections {
        let c = &connections;
        // Again, now that causes are known: a cause must lead back, through the calls
        // its node made, to a request still open, and for an answer to its own request.
        for _ in 0..REFINEMENTS {
            let known = causes.most_likely_all();
            // The old causes go before the new are made: both at once would double the
            // largest table linking keeps.
            drop(causes);
            let follows = Follows::of(
                kind_pairs.len(),
                (0..n).filter_map(|i| Some((pair(known.get(i)? as usize), pair(i)))),
            );
            causes = causes_of(
                &|i, j| c.consistent(messages, &known, i, j as usize),
                &|i, j| follows.prior(pair(j as usize), pair(i)),
            );
        }
    }
    // The timelines, the kinds and what weighing alone read are done with: their room
    // goes to the tables that follow.
    drop((into, out_of));
    let best_cause = causes.most_likely_all();
    let slots = if by_connections && o.learn_slots {
        Slots::learn(&best_cause, &kinds, &kind_pairs)
    } else {
        Slots::default()
    };
    drop(kinds);
    let mut connections = connections;
    connections.causes_weighed();
    // The messages each message may have caused.
    let children: Rows<u32> = Rows::grouped(n, || {
        (0..n as u32).flat_map(|c| causes.parents(c).iter().map(move |&(p, _)| (p as usize, c)))
    });
    let tree = Tree {
        messages,
        causes: &causes,
        best_cause: &best_cause,
        children: &children,
        kind: &|m: u32| (aggregate(src[m as usize]), aggregate(dst[m as usize])),
        slots: &slots,
        answers: by_connections.then_some(&connections),
    };
    let pattern_names = nodes.pattern_names(&clients);
    let shape_names = ShapeNames::of(&pattern_names);
    // Step 3: instances from each root.
    let mut best: Vec<Slot> = vec![Slot::EMPTY; n];
    let mut patterns = PatternCounts::default();
    let mut next_trace = 1u64;
    let roots: Vec<u32> = (0..n as u32)
        .filter(|&i| best_cause.get(i as usize).is_none())
        .collect();
    // A root's instances, each with its shape, its probability, and its messages with
    // their causes and parents.
    let instances_of = |root: u32| -> Vec<(Vec<u32>, f64, Vec<Placed>)> {
        tree.instances(root, o)
            .into_iter()
            .map(|(members, probability)| {
                let served = served_tree(&members, messages, &connections);
                let shape = shape_names.shape(&served, root, src, dst);
                let placed = members
                    .iter()
                    .zip(&served)
                    .map(|(&(m, cause), &(_, parent))| (m, cause, parent))
                    .collect();
                (shape, probability, placed)
            })
            .collect()
    };
    // Roots are independent: a block of them at a time is split across the cores, and
    // what they found is applied in root order, as one thread would.
    for block in roots.chunks(ROOTS_PER_BLOCK) {
        let found = crate::parallel::map_chunks(block, |roots| {
            roots.iter().map(|&r| instances_of(r)).collect::<Vec<_>>()
        });
        for instances in found.into_iter().flatten() {
            // A root's instances are alternatives for one request's path: one trace,
            // each message in it with its parent from its most probable instance. (A
            // trace per instance would scatter a request over its alternatives.)
            let trace = next_trace;
            next_trace += 1;
            for (shape, probability, placed) in instances {
                patterns.add(&shape, probability);
                let placed_at = Slot::of(trace, probability);
                for (m, cause, parent) in placed {
                    let slot = &mut best[m as usize];
                    if slot.is_empty() || slot.probability < placed_at.probability {
                        *slot = placed_at.with(parent, cause);
                    }
                }
            }
        }
    }
    // A message no instance took (its causes all left out, or past a tree's budget)
    // joins its most likely cause's instance, in time order so that causes come first;
    // with no likely cause it is a trace of its own.
    let mut order: Vec<u32> = (0..n as u32).collect();
    order.sort_by_key(|&i| {
        let m = &messages[i as usize];
        m.send_ns.get().or(m.recv_ns.get())
    });
    for i in order {
        let i = i as usize;
        if !best[i].is_empty() {
            continue;
        }
        let Some(p) = best_cause.get(i) else {
            continue;
        };
        let q = causes
            .parents(i as u32)
            .iter()
            .find(|(j, _)| *j == p)
            .map_or(0.0, |(_, q)| f64::from(*q));
        let cause = best[p as usize];
        if !cause.is_empty() {
            let in_trace = |r: u32| best[r as usize].trace == cause.trace;
            let parent = connections.request_served(i, p, in_trace, |answer| {
                let call = connections.asked_by(answer)?;
                Some(best[call as usize])
                    .filter(|s| s.trace == cause.trace)
                    .and_then(|s| s.parent())
            });
            best[i] =
                Slot::of(u64::from(cause.trace), cause.probability * q).with(Some(parent), Some(p));
        }
    }
    // The rest are traces of their own. Then what linking kept goes before the
    // placements are made: at scale they are the largest table.
    for (i, slot) in best.iter_mut().enumerate() {
        if slot.is_empty() {
            *slot = Slot::of(next_trace, causes.spontaneous(i as u32));
            next_trace += 1;
        }
    }
    drop((children, causes, best_cause, connections));
    let placements: Vec<Placement> = best.iter().map(|s| s.placement()).collect();
    drop(best);
    let patterns = patterns.into_sorted(&shape_names);
    let name = |node: u32| {
        nodes
            .names
            .get(node as usize)
            .map_or(crate::roles::CLIENT, |n| {
                pattern_names_of(n, clients[node as usize])
            })
            .to_string()
    };
    let mut delays: Vec<(String, String, f64)> = sums
        .iter()
        .zip(&kind_pairs)
        .filter(|((_, c), _)| *c > 0)
        .map(|((sum, c), &(s, d))| (name(s), name(d), sum / *c as f64))
        .collect();
    delays.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    Linked {
        placements,
        patterns,
        delays,
    }
}

/// Whether message `j` may be message `i`'s cause (weighed on several threads).
type Eligible<'a> = dyn Fn(usize, u32) -> bool + Sync + 'a;

/// The log prior of message `j` causing message `i`.
type Prior<'a> = dyn Fn(usize, u32) -> f64 + Sync + 'a;

/// Roots whose instances are found at once (on all cores) before they are applied: the
/// instances wait in memory meanwhile.
const ROOTS_PER_BLOCK: usize = 1 << 14;

/// A message placed in an instance: (message, cause, parent).
type Placed = (u32, Option<u32>, Option<u32>);

/// A message's placement while instances are found: 20 bytes where a [`Placement`]
/// takes 32, as millions of them are alive beside linking's largest tables (packed to 4
/// bytes: it is only ever copied whole). Trace 0 is none yet. The probability stays in
/// double precision: instances of one request differ in the last digits, and single
/// precision made ties of them.
#[derive(Clone, Copy)]
#[repr(C, packed(4))]
struct Slot {
    trace: u32,
    parent: u32,
    cause: u32,
    probability: f64,
}

impl Slot {
    const EMPTY: Slot = Slot {
        trace: 0,
        parent: u32::MAX,
        cause: u32::MAX,
        probability: 0.0,
    };

    /// In trace `trace` (numbered from 1, one per root: fewer than messages) with
    /// `probability`, no parent or cause yet.
    fn of(trace: u64, probability: f64) -> Slot {
        Slot {
            trace: u32::try_from(trace).unwrap_or(u32::MAX),
            probability,
            ..Slot::EMPTY
        }
    }

    fn with(self, parent: Option<u32>, cause: Option<u32>) -> Slot {
        Slot {
            parent: parent.unwrap_or(u32::MAX),
            cause: cause.unwrap_or(u32::MAX),
            ..self
        }
    }

    fn is_empty(&self) -> bool {
        self.trace == 0
    }

    fn parent(&self) -> Option<u32> {
        (self.parent != u32::MAX).then_some(self.parent)
    }

    fn placement(&self) -> Placement {
        Placement {
            trace: u64::from(self.trace),
            parent: self.parent(),
            cause: (self.cause != u32::MAX).then_some(self.cause),
            probability: self.probability,
        }
    }
}

/// A kind of message: its sender and receiver (clients as one), numbered.
type Kind = u32;

/// How often each kind of message caused each kind.
struct Follows {
    /// (cause's kind, effect's kind) → times.
    pairs: HashMap<u64, f64>,
    /// Per effect's kind, the times it had a cause.
    effects: Vec<f64>,
}

impl Follows {
    fn of(kinds: usize, links: impl Iterator<Item = (Kind, Kind)>) -> Follows {
        let mut f = Follows {
            pairs: HashMap::default(),
            effects: vec![0.0; kinds],
        };
        for (cause, effect) in links {
            *f.pairs.entry(Self::key(cause, effect)).or_default() += 1.0;
            f.effects[effect as usize] += 1.0;
        }
        f
    }

    fn key(cause: Kind, effect: Kind) -> u64 {
        (u64::from(cause) << 32) | u64::from(effect)
    }

    /// The log of the share of `effect`'s causes that were of kind `cause` (smoothed: a
    /// kind never seen is unlikely, not impossible).
    fn prior(&self, cause: Kind, effect: Kind) -> f64 {
        let seen = self
            .pairs
            .get(&Self::key(cause, effect))
            .copied()
            .unwrap_or(0.0);
        let all = self.effects.get(effect as usize).copied().unwrap_or(0.0);
        ((seen + 0.5) / (all + 1.0)).ln()
    }
}

/// A path instance: its messages with their parents (causes first), and its probability.
type Instance = (Vec<(u32, Option<u32>)>, f64);

/// What building path instances reads: each message's causes and the messages it may
/// have caused.
struct Tree<'a> {
    messages: &'a [Message],
    causes: &'a CauseTable,
    best_cause: &'a Indices,
    children: &'a Rows<u32>,
    /// A message's kind: its sender and receiver, clients as one.
    kind: &'a (dyn Fn(u32) -> KindPair + Sync),
    slots: &'a Slots,
    /// In the connections mode, the requests answers answer: an answer is in its
    /// request's path.
    answers: Option<&'a Connections>,
}

/// Messages of one instance: a sorted vector (paths are small, and copied at every
/// try-both decision).
#[derive(Clone, Default)]
struct SortedSet(Vec<u32>);

impl SortedSet {
    fn contains(&self, m: u32) -> bool {
        self.0.binary_search(&m).is_ok()
    }

    fn insert(&mut self, m: u32) {
        if let Err(at) = self.0.binary_search(&m) {
            self.0.insert(at, m);
        }
    }
}

/// A message still to decide in an instance: (when, deferred, message).
type Undecided = ((i64, i64), bool, u32);

/// A path instance under construction.
#[derive(Clone)]
struct Partial {
    /// Its messages, each with its parent (the root has none).
    members: Vec<(u32, Option<u32>)>,
    /// The same messages, to test membership in constant time.
    taken: SortedSet,
    /// Messages decided to be in another path.
    left_out: SortedSet,
    /// Messages the members may have caused, still to decide, earliest first.
    frontier: BinaryHeap<Reverse<Undecided>>,
    probability: f64,
    budget: u32,
    /// Members whose one effect of a kind is in the path: (member, effect kind).
    filled: Vec<(u32, KindPair)>,
    /// Members that left an effect of a kind they have exactly one of to another path:
    /// the next such effect they may have caused is theirs.
    owed: Vec<(u32, KindPair)>,
}

/// What becomes of a message in an instance.
#[derive(Clone, Copy)]
enum Choice {
    /// In the path, caused by this member, with this probability.
    Take(u32, f64),
    /// In another path (its cause is elsewhere, or it is spontaneous), with this
    /// probability; the member that was its likeliest cause here.
    Leave(u32, f64),
}

impl Choice {
    fn probability(self) -> f64 {
        match self {
            Choice::Take(_, q) | Choice::Leave(_, q) => q,
        }
    }
}

impl Tree<'_> {
    /// When `m` is decided: at its send, after every message received by then (its
    /// causes), a message received as it is sent (clocks that tick coarsely) included.
    fn time(&self, m: u32) -> (i64, i64) {
        let m = &self.messages[m as usize];
        (
            m.send_ns.get().or(m.recv_ns.get()).unwrap_or(0),
            m.recv_ns.get().unwrap_or(i64::MAX),
        )
    }

    fn apply(&self, s: &mut Partial, child: u32, choice: Choice) {
        s.probability *= choice.probability();
        let kind = (self.kind)(child);
        match choice {
            Choice::Take(parent, _) => {
                s.members.push((child, Some(parent)));
                s.taken.insert(child);
                for &k in self.children.row(child as usize) {
                    s.frontier.push(Reverse((self.time(k), false, k)));
                }
                if self
                    .slots
                    .at_most_one
                    .contains(&((self.kind)(parent), kind))
                {
                    s.filled.push((parent, kind));
                    s.owed.retain(|&o| o != (parent, kind));
                }
            }
            Choice::Leave(j, _) => {
                s.left_out.insert(child);
                if self.slots.exactly_one.contains(&((self.kind)(j), kind))
                    && !s.owed.contains(&(j, kind))
                {
                    s.owed.push((j, kind));
                }
            }
        }
    }

    /// The causes of `child` in the path whose slot for it is open, likeliest first; of
    /// equals, the one `most_likely` picked.
    fn in_path(&self, s: &Partial, child: u32) -> Vec<(u32, f64)> {
        let best = self.best_cause.get(child as usize);
        let kind = (self.kind)(child);
        let filled = |j: u32| {
            s.filled.contains(&(j, kind))
                && self.slots.at_most_one.contains(&((self.kind)(j), kind))
        };
        let mut in_path: Vec<(u32, f64)> = self
            .causes
            .parents(child)
            .iter()
            .filter(|(j, _)| s.taken.contains(*j) && !filled(*j))
            .map(|&(j, q)| (j, f64::from(q)))
            .collect();
        in_path.sort_by(|a, b| {
            b.1.total_cmp(&a.1)
                .then((Some(b.0) == best).cmp(&(Some(a.0) == best)))
        });
        in_path
    }

    /// The likelier way for `child`, and the other one worth trying: a message has one
    /// cause, so its links to the members are one decision, not one each (WAP5 multiplies
    /// them as if independent, which counts a message left out of every link as a path
    /// of its own and makes the expected counts of patterns add up to more than the
    /// requests).
    fn choices(&self, s: &Partial, child: u32) -> Option<(Choice, Choice)> {
        // An answer on a connection is in the path of the request it answers.
        if let Some(r) = self.answers.and_then(|c| c.answers(child)) {
            if !s.taken.contains(r) {
                return None;
            }
        }
        let best = self.best_cause.get(child as usize);
        let in_path = self.in_path(s, child);
        let (j, q) = *in_path.first()?;
        let kind = (self.kind)(child);
        if let Some(&(owed, _)) = in_path.iter().find(|(k, _)| s.owed.contains(&(*k, kind))) {
            return Some((Choice::Take(owed, 1.0), Choice::Leave(j, 0.0)));
        }
        let total: f64 = in_path.iter().map(|(_, q)| q).sum();
        let second = in_path.get(1).copied();
        let leave = Choice::Leave(j, (1.0 - total).max(0.0));
        // The most likely cause of its child is taken even when unlikely, so that every
        // message keeps a cause (the paper's rule); so is a cause likelier than all else.
        if q > 0.5 || q >= leave.probability() || best == Some(j) {
            let other = match second {
                Some((k, r)) if r > leave.probability() => Choice::Take(k, r),
                _ => leave,
            };
            Some((Choice::Take(j, q), other))
        } else {
            Some((leave, Choice::Take(j, q)))
        }
    }

    /// The path instances from `root`: each message a member may have caused is decided
    /// in time order (so that its causes in the path are known), an ambiguous one both
    /// ways while the budget lasts. A loop over a heap, not recursion: the input decides
    /// how deep trees go.
    fn instances(&self, root: u32, o: &LinkOptions) -> Vec<Instance> {
        let mut first = Partial {
            members: vec![(root, None)],
            taken: SortedSet(vec![root]),
            left_out: SortedSet::default(),
            frontier: BinaryHeap::new(),
            probability: 1.0,
            budget: o.budget,
            filled: Vec::new(),
            owed: Vec::new(),
        };
        for &k in self.children.row(root as usize) {
            first.frontier.push(Reverse((self.time(k), false, k)));
        }
        let mut done = Vec::new();
        let mut stack = vec![first];
        while let Some(mut s) = stack.pop() {
            while let Some(Reverse((_, deferred, child))) = s.frontier.pop() {
                if s.taken.contains(child) || s.left_out.contains(child) {
                    continue;
                }
                // A cause still to decide that the path may take goes first, though sent
                // at the same tick (once: causes can tie both ways).
                let undecided = |j: &u32| {
                    !s.taken.contains(*j)
                        && !s.left_out.contains(*j)
                        && self
                            .causes
                            .parents(*j)
                            .iter()
                            .any(|(p, _)| s.taken.contains(*p))
                };
                if !deferred {
                    if let Some(&(j, _)) = self
                        .causes
                        .parents(child)
                        .iter()
                        .find(|(j, _)| undecided(j))
                    {
                        s.frontier.push(Reverse((self.time(j), true, child)));
                        continue;
                    }
                }
                let Some((likelier, other)) = self.choices(&s, child) else {
                    continue;
                };
                let p = likelier.probability();
                if s.budget > 0
                    && other.probability() > 0.0
                    && ((p - 0.5).abs() <= o.try_both_band || p < 0.5)
                {
                    s.budget -= 1;
                    let mut branch = s.clone();
                    self.apply(&mut branch, child, other);
                    stack.push(branch);
                }
                self.apply(&mut s, child, likelier);
            }
            done.push((s.members, s.probability));
        }
        done
    }
}

/// An instance's messages with the requests they were sent for as parents, in place of
/// their causes: a call tree, as spans make it, so that instances that differ only in
/// which of a server's answers came last are one pattern. `members` has causes first.
/// An answer's call is the path's latest message sent on its connection before it (on a
/// multiplexed connection, the latest message sent may be another path's call).
fn served_tree(
    members: &[(u32, Option<u32>)],
    messages: &[Message],
    c: &Connections,
) -> Vec<(u32, Option<u32>)> {
    let in_path: HashSet<u32> = members.iter().map(|(m, _)| *m).collect();
    let mut served: HashMap<u32, Option<u32>> = HashMap::default();
    let mut out: Vec<(u32, Option<u32>)> = Vec::with_capacity(members.len());
    for &(m, cause) in members {
        let call_of = |answer: u32| -> Option<u32> {
            let a = &messages[answer as usize];
            let received = a.recv_ns.get().or(a.send_ns.get())?;
            out.iter()
                .map(|&(k, _)| k)
                .filter(|&k| {
                    let q = &messages[k as usize];
                    q.src_ep == a.dst_ep
                        && q.dst_ep == a.src_ep
                        && q.send_ns
                            .get()
                            .or(q.recv_ns.get())
                            .is_some_and(|t| t <= received)
                })
                .max_by_key(|&k| {
                    messages[k as usize]
                        .send_ns
                        .get()
                        .or(messages[k as usize].recv_ns.get())
                })
        };
        let parent = cause.map(|j| {
            c.request_served(
                m as usize,
                j,
                |r| in_path.contains(&r),
                |answer| served.get(&call_of(answer)?).copied().flatten(),
            )
        });
        served.insert(m, parent);
        out.push((m, parent));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(
        id: i64,
        src: &str,
        src_ep: &str,
        dst: &str,
        dst_ep: &str,
        send: Option<i64>,
        recv: Option<i64>,
    ) -> Message {
        Message {
            id: MessageId::Int(id),
            src: src.into(),
            src_ep: src_ep.into(),
            dst: dst.into(),
            dst_ep: dst_ep.into(),
            send_ns: send.into(),
            recv_ns: recv.into(),
            bytes: 100,
        }
    }

    /// Two requests from an uncaptured client through a front end to a back end, far
    /// apart in time: a client request, the call it makes, the reply to it, the answer.
    fn two_requests() -> Vec<Message> {
        let mut v = Vec::new();
        for (k, t0) in [(0i64, 0i64), (1, 1_000_000_000)] {
            let port = format!("10.0.0.9:{}", 40000 + k);
            let id = |n: i64| 10 * k + n;
            v.push(msg(
                id(1),
                "CLIENT",
                &port,
                "front",
                "10.0.0.1:80",
                None,
                Some(t0),
            ));
            v.push(msg(
                id(2),
                "front",
                "10.0.0.1:5000",
                "back",
                "10.0.0.2:90",
                Some(t0 + 1_000_000),
                Some(t0 + 1_100_000),
            ));
            v.push(msg(
                id(3),
                "back",
                "10.0.0.2:90",
                "front",
                "10.0.0.1:5000",
                Some(t0 + 3_000_000),
                Some(t0 + 3_100_000),
            ));
            v.push(msg(
                id(4),
                "front",
                "10.0.0.1:80",
                "CLIENT",
                &port,
                Some(t0 + 4_000_000),
                None,
            ));
        }
        v
    }

    /// Options knowing that each node listens on its port (as a capture would).
    fn listening_on(ports: &[(&str, u16)]) -> LinkOptions {
        LinkOptions {
            listening: ports
                .iter()
                .map(|&(node, port)| (node.to_string(), HashSet::from_iter([port])))
                .collect(),
            ..LinkOptions::default()
        }
    }

    /// What a capture would know: front and back listen on their ports.
    fn servers_listening() -> LinkOptions {
        listening_on(&[("front", 80), ("back", 90)])
    }

    #[test]
    fn separate_requests_become_separate_traces_with_their_causes() {
        let messages = two_requests();
        for mode in [Mode::Faithful, Mode::Greedy] {
            let linked = link(&messages, mode, &servers_listening());
            let assignments = linked.assignments(&messages);
            let by_id: HashMap<MessageId, &Assignment> =
                assignments.iter().map(|a| (a.id.clone(), a)).collect();
            for k in [0, 10] {
                let a = |n: i64| by_id[&MessageId::Int(k + n)];
                assert_eq!(
                    (&a(1).parent, &a(1).cause),
                    (&None, &None),
                    "{mode:?}: a client's new request has no cause"
                );
                let id = |n: i64| Some(MessageId::Int(k + n));
                assert_eq!(
                    [&a(2).cause, &a(3).cause, &a(4).cause],
                    [&id(1), &id(2), &id(3)],
                    "{mode:?}: each message caused by the one before"
                );
                assert_eq!(
                    [&a(2).parent, &a(3).parent, &a(4).parent],
                    [&id(1), &id(2), &id(1)],
                    "{mode:?}: the call and the answer are for the client's request, \
                     back's answer for the call"
                );
                assert!(
                    (1..=4).all(|n| a(n).trace == a(1).trace),
                    "{mode:?}: one trace per request"
                );
            }
            assert_ne!(
                by_id[&MessageId::Int(1)].trace,
                by_id[&MessageId::Int(11)].trace
            );
        }
        let linked = link(&messages, Mode::Faithful, &servers_listening());
        let top = &linked.patterns[0];
        assert_eq!(
            top.shape,
            // The call tree: front's call and answer are both for the client's request.
            "CLIENT>front[front>CLIENT,front>back[back>front]]"
        );
        assert_eq!(top.count, 2);
        assert!(top.expected > 1.5 && top.expected <= 2.0, "{top:?}");
    }

    #[test]
    fn a_reply_from_an_uncaptured_server_is_caused_by_the_call_on_its_connection() {
        // front calls an uncaptured database twice on two connections; each reply (no
        // send time) is caused by the call on its own connection.
        let messages = vec![
            msg(
                1,
                "front",
                "10.0.0.1:6000",
                "db",
                "10.0.0.3:5432",
                Some(0),
                None,
            ),
            msg(
                2,
                "front",
                "10.0.0.1:6001",
                "db",
                "10.0.0.3:5432",
                Some(100_000),
                None,
            ),
            msg(
                3,
                "db",
                "10.0.0.3:5432",
                "front",
                "10.0.0.1:6000",
                None,
                Some(900_000),
            ),
            msg(
                4,
                "db",
                "10.0.0.3:5432",
                "front",
                "10.0.0.1:6001",
                None,
                Some(1_000_000),
            ),
        ];
        let linked = link(&messages, Mode::Faithful, &LinkOptions::default());
        let parent = |id: i64| assigned(&linked, &messages, id).parent;
        assert_eq!(parent(3), Some(MessageId::Int(1)));
        assert_eq!(parent(4), Some(MessageId::Int(2)));
        let cause = |id: i64| assigned(&linked, &messages, id).cause;
        assert_eq!((cause(3), cause(4)), (parent(3), parent(4)));
    }

    #[test]
    fn an_ambiguous_cause_is_tried_both_ways() {
        // Two messages into B 1 ms apart, then one out of B: both are plausible causes.
        let messages = vec![
            msg(1, "X", "x:1", "B", "b:1", Some(0), Some(0)),
            msg(2, "Y", "y:1", "B", "b:1", Some(1_000_000), Some(1_000_000)),
            msg(3, "B", "b:2", "C", "c:1", Some(2_000_000), Some(2_000_000)),
        ];
        // Every endpoint with a peer counts as fixed: no node is a client here.
        let every_port_fixed = LinkOptions {
            fixed_port_peers: 1,
            ..LinkOptions::default()
        };
        let linked = link(&messages, Mode::Faithful, &every_port_fixed);
        let shapes: Vec<&str> = linked.patterns.iter().map(|p| p.shape.as_str()).collect();
        assert!(shapes.contains(&"Y>B[B>C]"), "{shapes:?}");
        let total: f64 = linked
            .patterns
            .iter()
            .filter(|p| p.shape.starts_with("Y>B"))
            .map(|p| p.expected)
            .sum();
        assert!(
            (total - 1.0).abs() < 1e-9,
            "the instances of one root sum to 1: {total}"
        );
    }

    /// Two overlapping requests into a server `web` (listening on :80) from a captured
    /// load generator: the first calls `db`, and is answered just after the second
    /// arrives. Only the connections tell that the second did not cause that answer.
    fn overlapping_requests() -> (Vec<Message>, LinkOptions) {
        let ms = 1_000_000;
        let messages = vec![
            msg(
                1,
                "load",
                "10.0.0.1:5001",
                "web",
                "10.0.0.2:80",
                Some(0),
                Some(ms),
            ),
            msg(
                2,
                "web",
                "10.0.0.2:6001",
                "db",
                "10.0.0.3:5432",
                Some(2 * ms),
                Some(3 * ms),
            ),
            msg(
                5,
                "db",
                "10.0.0.3:5432",
                "web",
                "10.0.0.2:6001",
                Some(10 * ms),
                Some(11 * ms),
            ),
            msg(
                3,
                "load",
                "10.0.0.1:5002",
                "web",
                "10.0.0.2:80",
                Some(19 * ms),
                Some(20 * ms),
            ),
            msg(
                6,
                "web",
                "10.0.0.2:80",
                "load",
                "10.0.0.1:5001",
                Some(21 * ms),
                Some(22 * ms),
            ),
            msg(
                4,
                "web",
                "10.0.0.2:80",
                "load",
                "10.0.0.1:5002",
                Some(25 * ms),
                Some(26 * ms),
            ),
        ];
        let options = listening_on(&[("web", 80), ("db", 5432)]);
        (messages, options)
    }

    /// The assignment of the message with id `id`.
    fn assigned(linked: &Linked, messages: &[Message], id: i64) -> Assignment {
        let i = messages
            .iter()
            .position(|m| m.id == MessageId::Int(id))
            .expect("a message with that id");
        linked.assignment(messages, i)
    }

    fn causes(linked: &Linked, messages: &[Message]) -> Vec<(MessageId, Option<MessageId>)> {
        linked
            .assignments(messages)
            .iter()
            .map(|a| (a.id.clone(), a.cause.clone()))
            .collect()
    }

    #[test]
    fn connections_tell_which_request_an_answer_is_for() {
        let (messages, options) = overlapping_requests();
        let linked = link(&messages, Mode::Connections, &options);
        let id = MessageId::Int;
        assert_eq!(
            causes(&linked, &messages),
            vec![
                (id(1), None),
                (id(2), Some(id(1))),
                (id(5), Some(id(2))),
                (id(3), None),
                // Not request 3, the latest message into web: 6 answers request 1.
                (id(6), Some(id(5))),
                (id(4), Some(id(3))),
            ]
        );
        let trace = |i: usize| linked.placements[i].trace;
        assert_eq!([trace(1), trace(2), trace(4)], [trace(0); 3]);
        assert_eq!(trace(5), trace(3));
        assert_ne!(trace(3), trace(0));
        // WAP5's linking takes the latest message for the cause.
        let faithful = link(&messages, Mode::Faithful, &options);
        assert_eq!(causes(&faithful, &messages)[4], (id(6), Some(id(3))));
    }

    /// Requests from load to web, each making one call to db, answered, then answered
    /// to load: 100 one after another, then 3 pairs that arrive 50 µs apart, where which
    /// request made which call is a coin toss.
    fn one_call_per_request() -> (Vec<Message>, LinkOptions) {
        let us = 1_000;
        let mut starts: Vec<i64> = (0..100).map(|k| k * 10_000 * us).collect();
        for pair in 0..3 {
            let t = 2_000_000 * us + pair * 10_000 * us;
            starts.extend([t, t + 50 * us]);
        }
        let mut messages = Vec::new();
        for (k, &t) in starts.iter().enumerate() {
            let client = format!("10.0.0.1:{}", 5000 + k);
            let own = format!("10.0.0.2:{}", 6000 + k);
            let hop = |at: i64| (Some(t + at * us), Some(t + at * us + 100 * us));
            for (src, src_ep, dst, dst_ep, (send, recv)) in [
                ("load", client.as_str(), "web", "10.0.0.2:80", hop(0)),
                ("web", own.as_str(), "db", "10.0.0.3:5432", hop(1000)),
                ("db", "10.0.0.3:5432", "web", own.as_str(), hop(2000)),
                ("web", "10.0.0.2:80", "load", client.as_str(), hop(3000)),
            ] {
                let id = messages.len() as i64 + 1;
                messages.push(msg(id, src, src_ep, dst, dst_ep, send, recv));
            }
        }
        (messages, listening_on(&[("web", 80), ("db", 5432)]))
    }

    #[test]
    fn learned_slots_keep_one_call_per_request_in_every_instance() {
        let (messages, options) = one_call_per_request();
        let shape = "CLIENT>web[web>CLIENT,web>db[db>web]]";
        let twice = |linked: &Linked| {
            linked
                .patterns
                .iter()
                .filter(|p| p.shape.matches("web>db").count() > 1)
                .map(|p| p.expected)
                .sum::<f64>()
        };
        let expected = |linked: &Linked| {
            linked
                .patterns
                .iter()
                .find(|p| p.shape == shape)
                .map_or(0.0, |p| p.expected)
        };
        let linked = link(&messages, Mode::Connections, &options);
        // A request's alternatives differ in which call they hold, not in how many.
        assert_eq!(twice(&linked), 0.0);
        let requests = messages.len() as f64 / 4.0;
        assert!(expected(&linked) > 0.98 * requests, "{:?}", linked.patterns);
        // Each message on its own: the ambiguous pairs' instances take both calls or none.
        let independent = LinkOptions {
            learn_slots: false,
            ..options
        };
        let unlearned = link(&messages, Mode::Connections, &independent);
        assert!(twice(&unlearned) > 0.5, "{:?}", unlearned.patterns);
        assert!(
            expected(&unlearned) < 0.98 * requests,
            "{:?}",
            unlearned.patterns
        );
        // Every answer to load is in the trace of the request it answers.
        for linked in [&linked, &unlearned] {
            for (k, request) in messages.iter().enumerate().step_by(4) {
                let answer = &messages[k + 3];
                assert_eq!(answer.dst_ep, request.src_ep);
                assert_eq!(linked.placements[k + 3].trace, linked.placements[k].trace);
            }
        }
    }

    #[test]
    fn patterns_of_given_traces_count_each_shape() {
        let (messages, options) = overlapping_requests();
        let truth = |id: i64, trace: u64, parent: Option<i64>| Assignment {
            id: MessageId::Int(id),
            trace,
            parent: parent.map(MessageId::Int),
            cause: parent.map(MessageId::Int),
            probability: 1.0,
        };
        let given = vec![
            truth(1, 1, None),
            truth(2, 1, Some(1)),
            truth(5, 1, Some(2)),
            truth(6, 1, Some(5)),
            truth(3, 2, None),
            truth(4, 2, Some(3)),
        ];
        let patterns = patterns_of(&messages, &given, &options);
        let shapes: Vec<(&str, u64)> = patterns
            .iter()
            .map(|p| (p.shape.as_str(), p.count))
            .collect();
        assert_eq!(
            shapes,
            vec![
                ("CLIENT>web[web>CLIENT,web>db[db>web]]", 1),
                ("CLIENT>web[web>CLIENT]", 1),
            ]
        );
    }

    #[test]
    fn a_reply_after_parallel_calls_is_one_pattern_whichever_answer_caused_it() {
        // front calls b and c at once; both answer in the same tick as front replies.
        let ms = 1_000_000;
        let messages = vec![
            msg(
                1,
                "CLIENT",
                "10.0.0.9:4000",
                "front",
                "10.0.0.1:80",
                None,
                Some(0),
            ),
            msg(
                2,
                "front",
                "10.0.0.1:6000",
                "b",
                "10.0.0.2:90",
                Some(ms),
                Some(2 * ms),
            ),
            msg(
                3,
                "front",
                "10.0.0.1:6001",
                "c",
                "10.0.0.3:91",
                Some(ms),
                Some(2 * ms),
            ),
            msg(
                4,
                "b",
                "10.0.0.2:90",
                "front",
                "10.0.0.1:6000",
                Some(4 * ms),
                Some(5 * ms),
            ),
            msg(
                5,
                "c",
                "10.0.0.3:91",
                "front",
                "10.0.0.1:6001",
                Some(4 * ms),
                Some(5 * ms),
            ),
            msg(
                6,
                "front",
                "10.0.0.1:80",
                "CLIENT",
                "10.0.0.9:4000",
                Some(5 * ms),
                None,
            ),
        ];
        let options = listening_on(&[("front", 80), ("b", 90), ("c", 91)]);
        let linked = link(&messages, Mode::Faithful, &options);
        // Either answer may have caused the reply: two instances, one call tree, and
        // no instance without the reply (its links are one choice, not two).
        assert_eq!(linked.patterns.len(), 1, "{:?}", linked.patterns);
        let p = &linked.patterns[0];
        assert_eq!(
            p.shape,
            "CLIENT>front[front>CLIENT,front>b[b>front],front>c[c>front]]"
        );
        assert_eq!(p.count, 2);
        // The two instances are equally likely, and the calls' and answers' own doubts
        // (being spontaneous) are all that keeps their sum below 1.
        assert!((p.expected - 2.0 * p.max_probability).abs() < 1e-9, "{p:?}");
        assert!(p.expected > 0.75 && p.expected <= 1.0, "{p:?}");
    }

    /// Requests to `search` (from a captured client) that call `geo`, then `rate`,
    /// then answer; the last two overlap so that `search` gets A's answer from `geo`
    /// just after B's request and just before calling `geo` for B.
    fn search_requests() -> (Vec<Message>, LinkOptions) {
        let us = 1_000;
        let mut v = Vec::new();
        let starts = (0..21).map(|k| k * 100_000 * us).chain([2_001_950 * us]);
        for (k, t) in starts.enumerate() {
            let id = |n: i64| 10 * k as i64 + n;
            let client = format!("10.0.0.1:{}", 5000 + k);
            let to_geo = format!("10.0.0.2:{}", 6000 + k);
            let to_rate = format!("10.0.0.2:{}", 7000 + k);
            let (search, geo, rate) = ("10.0.0.2:9001", "10.0.0.3:9002", "10.0.0.4:9003");
            let at = |from: i64, to: i64| (Some(t + from * us), Some(t + to * us));
            let mut hop = |n, a, a_ep: &str, b, b_ep: &str, (s, r)| {
                v.push(msg(id(n), a, a_ep, b, b_ep, s, r));
            };
            hop(1, "front", &client, "search", search, at(0, 100));
            hop(2, "search", &to_geo, "geo", geo, at(600, 700));
            hop(3, "geo", geo, "search", &to_geo, at(2000, 2150));
            hop(4, "search", &to_rate, "rate", rate, at(2300, 2400));
            hop(5, "rate", rate, "search", &to_rate, at(4000, 4100));
            hop(6, "search", search, "front", &client, at(4500, 4600));
        }
        let options = listening_on(&[("search", 9001), ("geo", 9002), ("rate", 9003)]);
        (v, options)
    }

    #[test]
    fn kinds_of_causes_tell_a_new_request_from_an_answer_for_another() {
        let (messages, options) = search_requests();
        let cause = |linked: &Linked, id: i64| assigned(linked, &messages, id).cause;
        // B's call to geo (212): A's answer from geo (203) came later than B's request
        // (211), so WAP5's delays favour it; but an answer from geo never led to a call
        // to geo.
        let linked = link(&messages, Mode::Connections, &options);
        assert_eq!(cause(&linked, 212), Some(MessageId::Int(211)));
        // And A's call to rate is still caused by A's answer from geo.
        assert_eq!(cause(&linked, 204), Some(MessageId::Int(203)));
        let trace = |id: i64| assigned(&linked, &messages, id).trace;
        for request in [200, 210] {
            assert!(
                (1..=6).all(|n| trace(request + n) == trace(request + 1)),
                "request {request} is one trace"
            );
        }
        assert_ne!(trace(201), trace(211));
    }
}
