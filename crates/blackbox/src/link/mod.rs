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
//!
//! Patterns are call trees (`served_tree`: each message under the request it was sent
//! for, as a span would be, so that instances differing only in which of a server's
//! answers came last are one shape), with their count, expected count and largest
//! probability. A root's instances are alternatives for one request: one trace, each
//! message with its parent from its most probable instance; a message two roots'
//! instances took goes to the one whose link to it weighing (and the division of crossed
//! requests' calls) found likelier. [`patterns_of`] gives the patterns of any assignment
//! (the ground truth's too). A placement carries both the
//! `parent` (the request a message was sent for: Dapper's parent) and the `cause`
//! (WAP5's); node delays and clock offsets (`delays`) run from causes. Placements are by
//! message index; [`Linked::assignments`] adds the message ids where they are written.
//!
//! [`link`] runs the steps in order: the messages numbered and their kinds (`graph`; in
//! the connections mode requests of one node pair told apart by size, `sizes`), each node's
//! timelines (`timelines`), step 1 and 2 (`weigh`, into a `causes` table), in the
//! connections mode the calls of requests that crossed divided again (`crossed`), step 3
//! (`instances`), and each message placed (`place`).

mod causes;
mod crossed;
mod graph;
mod instances;
mod place;
mod sizes;
mod timelines;
mod weigh;

use foldhash::{HashMap, HashSet};

use serde::Serialize;

use crate::reconcile::{Message, MessageId, MessageIndex};
pub use crate::shapes::Pattern;
use crate::shapes::{PatternCounts, ShapeNames};
use crate::slots::Slots;

use graph::{Graph, Kinds};
use instances::{served_tree, Instance, Tree};
use timelines::Timelines;
use weigh::{MeanDelays, Weigher};

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
    /// spread over shapes with a call twice or not at all. Weighing, too, learns how
    /// many messages of a kind a message of another kind nearly always causes at most
    /// (`slots::Quotas`), and prefers causes that had not had their quota yet.
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

/// Links `messages` (in any order). Tables are dropped as soon as the next step no
/// longer reads them: at CoDeeN's scale they are most of the memory linking takes.
pub fn link(messages: &[Message], mode: Mode, o: &LinkOptions) -> Linked {
    let (graph, mut connections) = Graph::of(messages, mode, o);
    let timelines = Timelines::of(&graph);
    let mut kinds = Kinds::of(&graph, &connections);
    let (delays, first_candidates) = MeanDelays::measure(&graph, &connections, &timelines, &kinds);
    let weigher = Weigher::of(&graph, &connections, &timelines, &kinds, &delays);
    let (mut causes, learned) = weigher.causes(first_candidates);
    if graph.by_connections() {
        crossed::uncross(&weigher, &mut causes, &learned);
    }
    drop(learned);
    drop(timelines);
    let best_cause = causes.most_likely_all();
    let slots = if graph.by_connections() && o.learn_slots {
        Slots::learn(
            &best_cause,
            kinds.by_message(),
            &kinds.of_pair,
            &kinds.pairs,
        )
    } else {
        Slots::default()
    };
    kinds.forget_messages();
    connections.causes_weighed();
    let n = messages.len();
    let children = causes.children();
    let tree = Tree {
        graph: &graph,
        causes: &causes,
        best_cause: &best_cause,
        children: &children,
        slots: &slots,
        answers: graph.by_connections().then_some(&connections),
    };
    let pattern_names = graph.pattern_names();
    let shape_names = ShapeNames::of(&pattern_names);
    let roots: Vec<u32> = (0..n as u32)
        .filter(|&i| best_cause.get(i as usize).is_none())
        .collect();
    let (mut best, patterns, next_trace) =
        place::place_instances(&tree, &connections, &shape_names, &roots);
    place::place_beside_causes(&mut best, &tree, &connections);
    place::place_alone(&mut best, &causes, next_trace);
    drop((children, causes, best_cause, connections));
    let placements: Vec<Placement> = best.iter().map(|s| s.placement()).collect();
    drop(best);
    let patterns = patterns.into_sorted(&shape_names);
    let mut delays: Vec<(String, String, f64)> = delays
        .measured(&kinds.of_pair)
        .into_iter()
        .map(|(kind, mean)| {
            let (s, d) = kinds.pairs[kind as usize];
            let name = |node| graph.pattern_name(node).to_string();
            (name(s), name(d), mean)
        })
        .collect();
    delays.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    Linked {
        placements,
        patterns,
        delays,
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
    let (graph, connections) = Graph::of(messages, Mode::Connections, o);
    let names = graph.pattern_names();
    let names = ShapeNames::of(&names);
    let nodes = &graph.nodes;
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

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn msg(
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
    pub(super) fn two_requests() -> Vec<Message> {
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
    pub(super) fn listening_on(ports: &[(&str, u16)]) -> LinkOptions {
        LinkOptions {
            listening: ports
                .iter()
                .map(|&(node, port)| (node.to_string(), HashSet::from_iter([port])))
                .collect(),
            ..LinkOptions::default()
        }
    }

    /// What a capture would know: front and back listen on their ports.
    pub(super) fn servers_listening() -> LinkOptions {
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
    fn a_slow_answer_from_an_uncaptured_server_is_still_caused_by_its_call() {
        // front calls an uncaptured database ten times, each on its own connection; it
        // answers in 1 ms, except the last call, which takes 900 ms.
        let mut messages = Vec::new();
        for k in 0..10i64 {
            let front = format!("10.0.0.1:{}", 6000 + k);
            let (sent, took) = (k * 10_000_000, if k == 9 { 900_000_000 } else { 1_000_000 });
            messages.push(msg(
                2 * k + 1,
                "front",
                &front,
                "db",
                "10.0.0.3:5432",
                Some(sent),
                None,
            ));
            messages.push(msg(
                2 * k + 2,
                "db",
                "10.0.0.3:5432",
                "front",
                &front,
                None,
                Some(sent + took),
            ));
        }
        let options = listening_on(&[("db", 5432)]);
        let linked = link(&messages, Mode::Connections, &options);
        assert_eq!(
            assigned(&linked, &messages, 20).parent,
            Some(MessageId::Int(19))
        );
        // As published, WAP5 finds it spontaneous: 900 ms is past its window for a kind
        // whose mean delay is about 1 ms.
        let linked = link(&messages, Mode::Faithful, &options);
        assert_eq!(assigned(&linked, &messages, 20).parent, None);
    }

    #[test]
    fn an_uncaptured_servers_answer_on_a_kept_alive_connection_is_for_the_latest_call() {
        // An uncaptured client asks a captured proxy over one kept-alive connection; the
        // proxy forwards each request to an uncaptured server over another. Most answers
        // take 7 ms; every fourth takes 250 ms and comes after the call before it.
        let mut messages = Vec::new();
        let (client, edge, edge_out, server) = (
            "10.0.0.9:40000",
            "10.0.0.1:80",
            "10.0.0.1:6000",
            "10.0.0.3:8080",
        );
        let ms = 1_000_000i64;
        for k in 0..40i64 {
            let t = k * 300 * ms;
            let took = if k % 4 == 3 { 250 * ms } else { 7 * ms };
            let id = |n: i64| 4 * k + n;
            messages.push(msg(id(1), "CLIENT", client, "edge", edge, None, Some(t)));
            messages.push(msg(
                id(2),
                "edge",
                edge_out,
                "server",
                server,
                Some(t + ms / 10),
                None,
            ));
            messages.push(msg(
                id(3),
                "server",
                server,
                "edge",
                edge_out,
                None,
                Some(t + took),
            ));
            messages.push(msg(
                id(4),
                "edge",
                edge,
                "CLIENT",
                client,
                Some(t + took + ms / 10),
                None,
            ));
        }
        let options = listening_on(&[("edge", 80)]);
        let linked = link(&messages, Mode::Connections, &options);
        for k in 0..40i64 {
            let answer = assigned(&linked, &messages, 4 * k + 3);
            assert_eq!(answer.parent, Some(MessageId::Int(4 * k + 2)), "answer {k}");
            let forwarded = assigned(&linked, &messages, 4 * k + 4);
            assert_eq!(
                forwarded.parent,
                Some(MessageId::Int(4 * k + 1)),
                "request {k}"
            );
        }
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

    /// A request in `reads_then_a_write`, by message index.
    struct ReadsThenAWrite {
        request: usize,
        reads: [usize; 3],
        db_answer: usize,
        write: usize,
    }

    /// Requests from load to web, 10 ms apart; each reads the cache three times (10, 20
    /// and 30 µs after it came), then the db (200 µs), writes the cache 20 µs after the
    /// db answered and answers load. One request in fifty first sleeps 50.05 ms: its reads
    /// come 60 µs after the next request came and made its own. Every fifth request has
    /// a second one arriving while it waits for the db, whose three reads are out and
    /// answered just before the first request's write.
    fn reads_then_a_write() -> (Vec<Message>, LinkOptions, Vec<ReadsThenAWrite>) {
        let us = 1_000;
        let mut messages: Vec<Message> = Vec::new();
        let mut requests = Vec::new();
        let mut port = 5000;
        let mut request = |messages: &mut Vec<Message>, t: i64, slept: i64| {
            let mut push = |src: &str, src_ep: &str, dst: &str, dst_ep: &str, send: i64| {
                let id = messages.len() as i64 + 1;
                let (send, recv) = (Some(send), Some(send + 20 * us));
                messages.push(msg(id, src, src_ep, dst, dst_ep, send, recv));
                messages.len() - 1
            };
            port += 10;
            let client = format!("10.0.0.1:{port}");
            let own = |k: i64| format!("10.0.0.2:{}", port + k);
            let (cache, db) = ("10.0.0.3:11211", "10.0.0.4:5432");
            let request = push("load", &client, "web", "10.0.0.2:80", t - 20 * us);
            let reads = [1, 2, 3].map(|k| {
                let at = t + slept + k * 10 * us;
                let read = push("web", &own(k), "cache", cache, at);
                push("cache", cache, "web", &own(k), at + 80 * us);
                read
            });
            let asked = t + slept + 200 * us;
            push("web", &own(4), "db", db, asked);
            let db_answer = push("db", db, "web", &own(4), asked + 980 * us);
            let write = push("web", &own(5), "cache", cache, asked + 1020 * us);
            push("cache", cache, "web", &own(5), asked + 1100 * us);
            push("web", "10.0.0.2:80", "load", &client, asked + 1200 * us);
            ReadsThenAWrite {
                request,
                reads,
                db_answer,
                write,
            }
        };
        for k in 0..200i64 {
            let t = k * 10_000 * us;
            let slept = if k % 50 == 7 { 50_050 * us } else { 0 };
            requests.push(request(&mut messages, t, slept));
            if k % 5 == 2 {
                requests.push(request(&mut messages, t + 1_050 * us, 0));
            }
        }
        let options = listening_on(&[("web", 80), ("cache", 11211), ("db", 5432)]);
        (messages, options, requests)
    }

    #[test]
    fn a_write_after_a_back_ends_answer_and_a_sleepers_reads_are_not_a_request_just_comes() {
        let (messages, options, requests) = reads_then_a_write();
        let causes = link(&messages, Mode::Connections, &options).causes();
        let cause = |i: usize| causes[i].map(|c| c as usize);
        let writes = requests
            .iter()
            .filter(|r| cause(r.write) == Some(r.db_answer))
            .count();
        assert_eq!(writes, requests.len());
        // Every read is of its own request, the sleepers' too.
        for r in &requests {
            assert_eq!(r.reads.map(cause), [Some(r.request); 3]);
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
