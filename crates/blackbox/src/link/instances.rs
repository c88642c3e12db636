//! Step 3 of linking: the path instances from a root. Each message a member may have
//! caused is taken (probably-true), left to another path (probably-false) or tried both
//! ways while the tree's budget of try-both decisions lasts; an instance's probability is
//! the product of its choices' probabilities.
//!
//! Instances are built with a heap and a stack, never recursing on the input. The
//! messages the members may have caused are decided in time order (a cause still
//! undecided at the same tick goes first), each as one decision among its causes in the
//! path and "elsewhere": WAP5 multiplies a message's links as if they were independent,
//! which counts a message left out of every link as a path of its own and inflates
//! expected counts. The likeliest cause is taken when its probability is over 0.5, when
//! it is likelier than everything outside the path, or when it is the message's most
//! likely cause; a choice within `try_both_band` of 0.5, or below it, is tried both ways
//! while the budget lasts. An instance takes at most one effect per member for a learned
//! slot (`Partial::filled`), and a member that left one to another path takes the next it
//! may have caused (`Partial::owed`; see `slots`). In the connections mode an instance
//! keeps an answer in the path of the request it answers.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use foldhash::{HashMap, HashSet};

use crate::connections::Connections;
use crate::reconcile::Message;
use crate::rows::{Indices, Rows};
use crate::slots::{KindPair, Slots};

use super::causes::CauseTable;
use super::graph::Graph;

/// A path instance: its messages with their parents (causes first), and its probability.
pub(super) type Instance = (Vec<(u32, Option<u32>)>, f64);

/// What building path instances reads: each message's causes and the messages it may
/// have caused.
pub(super) struct Tree<'a> {
    pub(super) graph: &'a Graph<'a>,
    pub(super) causes: &'a CauseTable,
    pub(super) best_cause: &'a Indices,
    /// The messages each message may have caused.
    pub(super) children: &'a Rows<u32>,
    pub(super) slots: &'a Slots,
    /// In the connections mode, the requests answers answer: an answer is in its
    /// request's path.
    pub(super) answers: Option<&'a Connections>,
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
        let m = &self.graph.messages[m as usize];
        (
            m.send_ns.get().or(m.recv_ns.get()).unwrap_or(0),
            m.recv_ns.get().unwrap_or(i64::MAX),
        )
    }

    fn apply(&self, s: &mut Partial, child: u32, choice: Choice) {
        s.probability *= choice.probability();
        let kind = self.graph.kind_pair(child);
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
                    .contains(&(self.graph.kind_pair(parent), kind))
                {
                    s.filled.push((parent, kind));
                    s.owed.retain(|&o| o != (parent, kind));
                }
            }
            Choice::Leave(j, _) => {
                s.left_out.insert(child);
                if self
                    .slots
                    .exactly_one
                    .contains(&(self.graph.kind_pair(j), kind))
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
        let kind = self.graph.kind_pair(child);
        let filled = |j: u32| {
            s.filled.contains(&(j, kind))
                && self
                    .slots
                    .at_most_one
                    .contains(&(self.graph.kind_pair(j), kind))
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
        let kind = self.graph.kind_pair(child);
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
    pub(super) fn instances(&self, root: u32) -> Vec<Instance> {
        let o = self.graph.options;
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
pub(super) fn served_tree(
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
