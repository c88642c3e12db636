//! Where each message ends up: in the path instance with its likeliest link (of equals,
//! the most probable), else beside its most likely cause, else in a trace of its own.

use crate::connections::Connections;
use crate::shapes::{PatternCounts, ShapeNames};

use super::causes::CauseTable;
use super::instances::{served_tree, Tree};
use super::Placement;

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
pub(super) struct PackedPlacement {
    trace: u32,
    parent: u32,
    cause: u32,
    probability: f64,
}

impl PackedPlacement {
    pub(super) const EMPTY: PackedPlacement = PackedPlacement {
        trace: 0,
        parent: u32::MAX,
        cause: u32::MAX,
        probability: 0.0,
    };

    /// In trace `trace` (numbered from 1, one per root: fewer than messages) with
    /// `probability`, no parent or cause yet.
    pub(super) fn of(trace: u64, probability: f64) -> PackedPlacement {
        PackedPlacement {
            trace: u32::try_from(trace).unwrap_or(u32::MAX),
            probability,
            ..PackedPlacement::EMPTY
        }
    }

    pub(super) fn with(self, parent: Option<u32>, cause: Option<u32>) -> PackedPlacement {
        PackedPlacement {
            parent: parent.unwrap_or(u32::MAX),
            cause: cause.unwrap_or(u32::MAX),
            ..self
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        self.trace == 0
    }

    pub(super) fn parent(&self) -> Option<u32> {
        (self.parent != u32::MAX).then_some(self.parent)
    }

    pub(super) fn placement(&self) -> Placement {
        Placement {
            trace: u64::from(self.trace),
            parent: self.parent(),
            cause: (self.cause != u32::MAX).then_some(self.cause),
            probability: self.probability,
        }
    }
}

/// Places the messages of every root's path instances: a root's instances are
/// alternatives for one request's path, so they are one trace, each message in it with
/// its parent from its most probable instance (a trace per instance would scatter a
/// request over its alternatives). A message two roots' instances took goes by its link
/// to its cause in each (in the connections mode), then by the instances' probabilities.
/// Counts each instance under its shape. Returns each message's placement (empty where
/// no instance took it), the patterns, and the next trace number.
pub(super) fn place_instances(
    tree: &Tree<'_>,
    connections: &Connections,
    shape_names: &ShapeNames<'_>,
    roots: &[u32],
) -> (Vec<PackedPlacement>, PatternCounts, u64) {
    let graph = tree.graph;
    let mut best: Vec<PackedPlacement> = vec![PackedPlacement::EMPTY; graph.messages.len()];
    // Per message, the probability of its link to its cause in its placement. In the
    // connections mode, instances of two requests that both took a message go by that
    // link first: their own probabilities weigh everything else in two paths, and a
    // request whose own arrival was uncertain would lose every call weighing gave it to
    // an alternative of another. (WAP5's links, on their own, do better by the paths.)
    let mut links: Vec<f32> = vec![0.0; graph.messages.len()];
    let mut patterns = PatternCounts::default();
    let mut next_trace = 1u64;
    // A root's instances, each with its shape, its probability, and its messages with
    // their causes and parents.
    let instances_of = |root: u32| -> Vec<(Vec<u32>, f64, Vec<Placed>)> {
        tree.instances(root)
            .into_iter()
            .map(|(members, probability)| {
                let served = served_tree(&members, graph.messages, connections);
                let shape = shape_names.shape(&served, root, &graph.nodes.src, &graph.nodes.dst);
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
            let trace = next_trace;
            next_trace += 1;
            for (shape, probability, placed) in instances {
                patterns.add(&shape, probability);
                let placed_at = PackedPlacement::of(trace, probability);
                for (m, cause, parent) in placed {
                    let link = link_probability(tree.causes, m, cause);
                    let (slot, best_link) = (&mut best[m as usize], &mut links[m as usize]);
                    let better = if graph.by_connections() && link != *best_link {
                        link > *best_link
                    } else {
                        placed_at.probability > slot.probability
                    };
                    if slot.is_empty() || better {
                        *slot = placed_at.with(parent, cause);
                        *best_link = link;
                    }
                }
            }
        }
    }
    (best, patterns, next_trace)
}

/// The probability of message `m`'s link to `cause` (of being spontaneous, for none).
fn link_probability(causes: &CauseTable, m: u32, cause: Option<u32>) -> f32 {
    match cause {
        Some(j) => causes
            .parents(m)
            .iter()
            .find(|(k, _)| *k == j)
            .map_or(0.0, |(_, q)| *q),
        None => causes.spontaneous(m) as f32,
    }
}

/// Places a message no instance took (its causes all left out, or past a tree's budget)
/// in its most likely cause's trace, in time order so that causes come first, with the
/// request it was sent for as parent and the cause's probability times its link's. One
/// with no likely cause, or whose cause is not placed, stays empty.
pub(super) fn place_beside_causes(
    best: &mut [PackedPlacement],
    tree: &Tree<'_>,
    connections: &Connections,
) {
    let messages = tree.graph.messages;
    let mut order: Vec<u32> = (0..messages.len() as u32).collect();
    order.sort_by_key(|&i| {
        let m = &messages[i as usize];
        m.send_ns.get().or(m.recv_ns.get())
    });
    for i in order {
        let i = i as usize;
        if !best[i].is_empty() {
            continue;
        }
        let Some(p) = tree.best_cause.get(i) else {
            continue;
        };
        let q = tree
            .causes
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
            best[i] = PackedPlacement::of(u64::from(cause.trace), cause.probability * q)
                .with(Some(parent), Some(p));
        }
    }
}

/// Gives each message still unplaced a trace of its own, from `next_trace` on, with its
/// probability of being spontaneous.
pub(super) fn place_alone(best: &mut [PackedPlacement], causes: &CauseTable, mut next_trace: u64) {
    for (i, slot) in best.iter_mut().enumerate() {
        if slot.is_empty() {
            *slot = PackedPlacement::of(next_trace, causes.spontaneous(i as u32));
            next_trace += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::graph::Graph;
    use crate::link::tests::{servers_listening, two_requests};
    use crate::link::Mode;
    use crate::rows::Rows;
    use crate::slots::Slots;

    /// A message's causes as a test gives them: (message, causes, spontaneous).
    type Linked<'a> = (u32, &'a [(u32, f32)], f32);

    /// A table of `n` messages' causes: `links` gives some, every other message is
    /// spontaneous.
    fn table(n: usize, links: &[Linked<'_>]) -> CauseTable {
        let mut causes = CauseTable::with_capacity(n);
        for i in 0..n as u32 {
            match links.iter().find(|(m, _, _)| *m == i) {
                Some((_, parents, spontaneous)) => causes.push(parents, *spontaneous),
                None => causes.push(&[], 1.0),
            }
        }
        causes
    }

    /// `f` run on the tree of `causes` (no slots, no answers).
    fn with_tree<R>(
        graph: &Graph<'_>,
        causes: &CauseTable,
        children: &Rows<u32>,
        f: impl FnOnce(&Tree<'_>) -> R,
    ) -> R {
        let best_cause = causes.most_likely_all();
        let slots = Slots::default();
        f(&Tree {
            graph,
            causes,
            best_cause: &best_cause,
            children,
            slots: &slots,
            answers: None,
        })
    }

    #[test]
    fn a_message_two_requests_paths_took_goes_by_its_link_not_by_the_paths() {
        let messages = two_requests();
        let o = servers_listening();
        let (graph, connections) = Graph::of(&messages, Mode::Connections, &o);
        // Request A (0) made call 1 for certain; request B (4) made call 5, though its
        // own path is unlikely (0.2). Message 6 was B's call's (0.7) rather than A's
        // (0.3): A's path with it (0.9 × 0.3) is likelier than B's (0.2 × 0.7), yet it
        // is B's.
        let causes = table(
            messages.len(),
            &[
                (1, &[(0, 0.9)], 0.1),
                (5, &[(4, 0.2)], 0.1),
                (6, &[(1, 0.3), (5, 0.7)], 0.0),
            ],
        );
        let names = graph.pattern_names();
        let shape_names = ShapeNames::of(&names);
        let best = with_tree(&graph, &causes, &causes.children(), |tree| {
            let roots: Vec<u32> = (0..messages.len() as u32)
                .filter(|&i| tree.best_cause.get(i as usize).is_none())
                .collect();
            place_instances(tree, &connections, &shape_names, &roots).0
        });
        let placed: Vec<Placement> = best.iter().map(|p| p.placement()).collect();
        assert_eq!(placed[6].cause, Some(5));
        assert_eq!(placed[6].trace, placed[4].trace);
        assert_ne!(placed[6].trace, placed[0].trace);
    }

    #[test]
    fn a_message_no_instance_took_joins_its_likeliest_causes_trace_else_one_of_its_own() {
        let messages = two_requests();
        let o = servers_listening();
        let (graph, connections) = Graph::of(&messages, Mode::Faithful, &o);
        // The first request's call caused by its request (p 0.9), its reply by the call
        // (p 0.8); nothing else linked.
        let causes = table(
            messages.len(),
            &[(1, &[(0, 0.9)], 0.1), (2, &[(1, 0.8)], 0.2)],
        );
        let children = Rows::grouped(messages.len(), || [(0, 1u32), (1, 2)].into_iter());
        // Only the first request's root was placed, in trace 1 with probability 0.5.
        let mut best = vec![PackedPlacement::EMPTY; messages.len()];
        best[0] = PackedPlacement::of(1, 0.5);
        with_tree(&graph, &causes, &children, |tree| {
            place_beside_causes(&mut best, tree, &connections)
        });
        let placed: Vec<Placement> = best.iter().map(|p| p.placement()).collect();
        assert_eq!((placed[1].trace, placed[1].cause), (1, Some(0)));
        assert!((placed[1].probability - 0.5 * f64::from(0.9f32)).abs() < 1e-9);
        // Causes come first: the reply follows its call into the trace.
        assert_eq!((placed[2].trace, placed[2].cause), (1, Some(1)));
        assert!(best[3].is_empty());
        place_alone(&mut best, &causes, 2);
        let traces: Vec<u64> = best.iter().map(|p| p.placement().trace).collect();
        assert_eq!(traces, vec![1, 1, 1, 2, 3, 4, 5, 6]);
        assert_eq!(best[3].placement().probability, 1.0);
    }
}
