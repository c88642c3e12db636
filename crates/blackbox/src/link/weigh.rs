//! Steps 1 and 2 of linking: the mean causal delay of each kind of message, then each
//! message's candidate causes weighed by their delays against that mean, beside being
//! spontaneous.

use crate::connections::Connections;
use crate::slots::Quotas;

use super::causes::{CauseTable, Follows};
use super::graph::{Graph, Kind, Kinds};
use super::timelines::Timelines;
use super::Mode;

/// Rounds of linking again with the causes found before (the connections mode).
const REFINEMENTS: usize = 2;

/// Whether message `j` may be message `i`'s cause (weighed on several threads).
type Eligible<'a> = dyn Fn(usize, u32) -> bool + Sync + 'a;

/// The log prior of message `j` causing message `i`.
type Prior<'a> = dyn Fn(usize, u32) -> f64 + Sync + 'a;

/// How a round weighs causes.
struct Rules<'a> {
    /// Which causes may be.
    eligible: &'a Eligible<'a>,
    prior: &'a Prior<'a>,
    /// Whether a cause had had its quota of the effect's kind (`slots::Quotas`): it
    /// scores `OVER_QUOTA` more, and an open request that had not is taken first.
    over_quota: &'a Eligible<'a>,
    /// Whether a cause had made fewer of the effect's kind than nearly every cause of
    /// its kind makes, exactly.
    owes: &'a Eligible<'a>,
}

impl Rules<'_> {
    /// WAP5's: every candidate, by its delay against its kind's mean.
    fn plain() -> Rules<'static> {
        Rules {
            eligible: &|_, _| true,
            prior: &|_, _| 0.0,
            over_quota: &|_, _| false,
            owes: &|_, _| false,
        }
    }
}

/// The log prior of a cause that had had its quota of the effect's kind: at most one
/// cause in 20 exceeds it.
pub(super) const OVER_QUOTA: f64 = -2.995_732_273_553_991; // ln(1/20)

/// How likely a cause must be for its effect to count towards its quota.
const QUOTA_CERTAIN: f32 = 0.9;

/// The mean causal delay per kind of message (ns): the time from the latest message into
/// its sender to its send, within the window.
pub(super) struct MeanDelays {
    /// Per kind: (sum of delays, messages counted).
    sums: Vec<(f64, u64)>,
}

/// A delay no mean goes below (ns): a mean of 0 would make every later cause impossible.
const MIN_MEAN_NS: f64 = 1_000.0;

impl MeanDelays {
    /// Step 1: each message's latest candidate cause (none: spontaneous, not counted),
    /// found on every core and summed in message order. In the connections mode the
    /// (message, latest candidate) pairs are returned too: they give the first prior.
    pub(super) fn measure(
        graph: &Graph<'_>,
        connections: &Connections,
        timelines: &Timelines,
        kinds: &Kinds,
    ) -> (MeanDelays, Vec<(u32, u32)>) {
        let latest = crate::parallel::map_ranges(graph.messages.len(), |range| {
            let mut found = Vec::new();
            range
                .filter(|&i| !graph.starts_path(i))
                .filter_map(|i| {
                    let window = graph.options.window_ns;
                    timelines.candidates(graph, connections, i, window, 1, &mut found);
                    found.first().map(|&(j, delay)| (i as u32, j, delay))
                })
                .collect::<Vec<_>>()
        });
        let mut sums: Vec<(f64, u64)> = vec![(0.0, 0); kinds.pairs.len()];
        let mut first_candidates: Vec<(u32, u32)> = Vec::new();
        for &(i, j, delay) in latest.iter().flatten() {
            if graph.by_connections() {
                first_candidates.push((i, j));
            }
            let e = &mut sums[kinds.of_message(i as usize) as usize];
            e.0 += delay as f64;
            e.1 += 1;
        }
        (MeanDelays { sums }, first_candidates)
    }

    /// The mean delay of messages of kind `kind` (ns), at least a microsecond.
    pub(super) fn mean(&self, kind: Kind) -> f64 {
        match self.sums.get(kind as usize) {
            Some(&(sum, count)) if count > 0 => (sum / count as f64).max(MIN_MEAN_NS),
            _ => MIN_MEAN_NS,
        }
    }

    /// (kind, mean delay) of each node pair with a delay measured, its kinds together
    /// (`of_pair`: each kind's first of its pair, which stands for the pair).
    pub(super) fn measured(&self, of_pair: &[Kind]) -> Vec<(Kind, f64)> {
        let mut by_pair: std::collections::BTreeMap<Kind, (f64, u64)> = Default::default();
        for (kind, &(sum, count)) in self.sums.iter().enumerate() {
            if count > 0 {
                let e = by_pair.entry(of_pair[kind]).or_default();
                e.0 += sum;
                e.1 += count;
            }
        }
        by_pair
            .into_iter()
            .map(|(kind, (sum, count))| (kind, sum / count as f64))
            .collect()
    }
}

/// What the last round of weighing learned from the causes found before it, for what
/// follows weighing to read.
#[derive(Default)]
pub(super) struct Learned<'a> {
    /// The quotas (without their counts: `made` counts nothing), if learned.
    pub(super) quotas: Option<Quotas<'a>>,
    /// Per kind of call, the log of the share answered after their request was
    /// (`answered_late`).
    pub(super) late: Vec<f64>,
}

/// Buffers one thread reuses from message to message.
#[derive(Default)]
struct Scratch {
    found: Vec<(u32, i64)>,
    scores: Vec<f64>,
    weighed: Vec<(u32, f32)>,
}

/// Step 2: what weighing a message's causes reads.
pub(super) struct Weigher<'a> {
    pub(super) graph: &'a Graph<'a>,
    pub(super) connections: &'a Connections,
    pub(super) timelines: &'a Timelines,
    pub(super) kinds: &'a Kinds,
    pub(super) delays: &'a MeanDelays,
}

impl<'a> Weigher<'a> {
    pub(super) fn of(
        graph: &'a Graph<'a>,
        connections: &'a Connections,
        timelines: &'a Timelines,
        kinds: &'a Kinds,
        delays: &'a MeanDelays,
    ) -> Weigher<'a> {
        Weigher {
            graph,
            connections,
            timelines,
            kinds,
            delays,
        }
    }

    /// Every message's causes as the mode weighs them. The connections mode also weighs
    /// a cause by how often its kind of message causes the effect's kind (a server that
    /// has had its answer from `geo` does not call `geo` again for that request; the
    /// request that just came in does), first from `first_candidates`, then, in rounds,
    /// from the causes found: a cause must lead back, through the calls its node made, to
    /// a request still open, and for an answer to its own request; a call whose answer
    /// came back after that request was answered scores the share of its kind that did
    /// (servers wait for most calls); and a cause that had already made the most effects
    /// of the call's kind that nearly every cause of its kind makes (`slots::Quotas`)
    /// scores one in twenty. Returns what the last round learned too.
    pub(super) fn causes(&self, first_candidates: Vec<(u32, u32)>) -> (CauseTable, Learned<'a>) {
        let kind = |i: usize| self.kinds.of_message(i);
        if !self.graph.by_connections() {
            return (self.weigh_all(&Rules::plain()), Learned::default());
        }
        // The first candidates stay until the first causes are made: freed before, their
        // room went to tables the rounds below keep, and the peak at CoDeeN's scale grew
        // by 35 MB (BENCHMARKS.md).
        let mut causes = {
            let follows = Follows::of(
                self.kinds.pairs.len(),
                first_candidates
                    .iter()
                    .map(|&(i, j)| (kind(j as usize), kind(i as usize))),
            );
            self.weigh_all(&Rules {
                prior: &|i, j| follows.prior(kind(j as usize), kind(i)),
                ..Rules::plain()
            })
        };
        drop(first_candidates);
        let (messages, c) = (self.graph.messages, self.connections);
        let mut learned = Learned::default();
        for _ in 0..REFINEMENTS {
            let known = causes.most_likely_all();
            // A quota is filled by effects whose cause is all but certain: of two requests
            // a moment apart, which made which call is a coin toss, and neither had it.
            let certain =
                (self.graph.options.learn_slots).then(|| causes.likely_all(QUOTA_CERTAIN));
            // The old causes go before the new are made: both at once would double the
            // largest table linking keeps.
            drop(causes);
            let sent = |k: usize| messages[k].send_ns.get();
            let quotas = certain.map(|c| Quotas::learn(&c, self.kinds.by_message(), sent));
            let follows = Follows::of(
                self.kinds.pairs.len(),
                (0..messages.len()).filter_map(|i| Some((kind(known.get(i)? as usize), kind(i)))),
            );
            let late = self.answered_late(&known);
            let made = |i: usize, j: u32| {
                let (q, at) = quotas.as_ref().zip(sent(i))?;
                q.made(j, kind(i), at, sent)
            };
            causes = self.weigh_all(&Rules {
                eligible: &|i, j| c.consistent(messages, &known, i, j as usize),
                prior: &|i, j| {
                    let answered_late =
                        c.answered_in_time(messages, &known, i, j as usize) == Some(false);
                    follows.prior(kind(j as usize), kind(i))
                        + if answered_late {
                            late[kind(i) as usize]
                        } else {
                            0.0
                        }
                },
                over_quota: &|i, j| made(i, j).is_some_and(|m| m.full()),
                owes: &|i, j| made(i, j).is_some_and(|m| m.owes()),
            });
            learned = Learned {
                quotas: quotas.map(Quotas::without_counts),
                late,
            };
        }
        (causes, learned)
    }

    /// Per kind of message, the log of the share of calls of that kind (by the causes
    /// `known`) whose answer came back after the request behind them had been answered
    /// (smoothed): near 0 for calls a server sends and leaves, or of which it waits for
    /// some (a write to three replicas answered after two), very negative for calls it
    /// waits for, where a cause whose request was answered first is another request's.
    fn answered_late(&self, known: &crate::rows::Indices) -> Vec<f64> {
        let mut tally: Vec<(u64, u64)> = vec![(0, 0); self.kinds.pairs.len()];
        for i in 0..self.graph.messages.len() {
            let Some(j) = known.get(i) else { continue };
            if let Some(in_time) =
                self.connections
                    .answered_in_time(self.graph.messages, known, i, j as usize)
            {
                let t = &mut tally[self.kinds.of_message(i) as usize];
                t.0 += u64::from(!in_time);
                t.1 += 1;
            }
        }
        tally
            .into_iter()
            .map(|(late, of)| ((late as f64 + 0.5) / (of as f64 + 1.0)).ln())
            .collect()
    }

    /// Every message's causes, of those `eligible` allows, scored with `prior`;
    /// messages are independent, so each thread weighs a range of them.
    fn weigh_all(&self, rules: &Rules<'_>) -> CauseTable {
        let weigh_range = |range: std::ops::Range<usize>| {
            let mut scratch = Scratch::default();
            let mut table = CauseTable::with_capacity(range.len());
            for i in range {
                let spontaneous = self.weigh(i, rules, &mut scratch);
                table.push(&scratch.weighed, spontaneous);
            }
            table
        };
        let mut parts =
            crate::parallel::map_ranges(self.graph.messages.len(), weigh_range).into_iter();
        let mut table = parts.next().unwrap_or_else(|| CauseTable::with_capacity(0));
        for part in parts {
            table.append(part);
        }
        table.shrink_to_fit();
        table
    }

    /// Message `i`'s candidate causes weighed into `scratch.weighed`: each scores
    /// `exp(-delay / mean + prior)` and being spontaneous `exp(-y)`, normalised. Returns
    /// the probability that it is spontaneous.
    fn weigh(&self, i: usize, rules: &Rules<'_>, scratch: &mut Scratch) -> f32 {
        let (graph, o) = (self.graph, self.graph.options);
        let Scratch {
            found,
            scores,
            weighed,
        } = scratch;
        weighed.clear();
        if graph.mode == Mode::Greedy {
            self.timelines
                .candidates(graph, self.connections, i, o.window_ns, 1, found);
            weighed.extend(found.iter().map(|&(j, _)| (j, 1.0)));
            return if weighed.is_empty() { 1.0 } else { 0.0 };
        }
        if graph.starts_path(i) {
            return 1.0;
        }
        let d = self.delays.mean(self.kinds.of_message(i));
        // Scores below a thousandth of being spontaneous change nothing: the window
        // shrinks to where they start.
        let limit = ((o.spontaneous_factor + 7.0) * d).min(o.window_ns as f64) as i64;
        self.timelines
            .candidates(graph, self.connections, i, limit, o.max_candidates, found);
        let Rules {
            eligible,
            prior,
            over_quota,
            owes,
        } = rules;
        found.retain(|(j, _)| eligible(i, *j));
        let mut spontaneous_weight = (-o.spontaneous_factor).exp();
        let mut owing = None;
        if let (true, Some(sent)) = (graph.by_connections(), graph.messages[i].send_ns.get()) {
            let c = self.connections;
            // A server handling a request does not send on its own: the latest request
            // still unanswered is a cause however long ago it came.
            let open_request = |within_quota: bool| {
                c.open_request(graph.messages, graph.src(i), sent, o.window_ns, |j| {
                    c.allows(graph.messages, i, j)
                        && eligible(i, j as u32)
                        && !(within_quota && over_quota(i, j as u32))
                })
            };
            let open = open_request(true).or_else(|| open_request(false));
            if let Some((j, arrived)) = open {
                spontaneous_weight = 0.0;
                if !found.iter().any(|(k, _)| *k == j) {
                    found.push((j, sent - arrived));
                }
                // A request that has yet to make the calls of this kind that nearly every
                // one makes (it worked a while before them) is their cause rather than a
                // request that had made its own.
                if owes(i, j) {
                    owing = Some(j);
                    found.retain(|(k, _)| !over_quota(i, *k));
                }
            }
        }
        if let (true, None, Some(received)) = (
            graph.by_connections(),
            graph.messages[i].send_ns.get(),
            graph.messages[i].recv_ns.get(),
        ) {
            // An answer from an uncaptured server is caused by the call it answers on its
            // connection (the latest sent on it), however slow the server was; earlier
            // calls on a kept-alive connection were answered before.
            let call = self.connections.asked_by(i as u32);
            if let Some(j) = call.filter(|&j| eligible(i, j)) {
                spontaneous_weight = 0.0;
                let sent = graph.messages[j as usize].send_ns.get().unwrap_or(received);
                found.clear();
                found.push((j, received - sent));
            }
        }
        // Scores as logarithms, scaled by the best before exponentiating: a cause long
        // before its effect must not underflow to 0/0.
        scores.clear();
        scores.extend(found.iter().map(|(j, delay)| {
            let quota = if over_quota(i, *j) { OVER_QUOTA } else { 0.0 };
            let mut waited = *delay as f64 / d;
            if owing == Some(*j) {
                // Its silence counts no more against it than sending on its own would.
                waited = waited.min(o.spontaneous_factor);
            }
            -waited + prior(i, *j) + quota
        }));
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::tests::{servers_listening, two_requests};
    use crate::link::LinkOptions;
    use crate::reconcile::Message;

    /// A message's causes and its probability of being spontaneous.
    type Weighed = (Vec<(u32, f32)>, f64);

    /// Each message's (causes, spontaneous) as `mode` weighs them, and the mean delay of
    /// each message's kind.
    fn weighed(messages: &[Message], mode: Mode, o: &LinkOptions) -> (Vec<Weighed>, Vec<f64>) {
        let (graph, connections) = Graph::of(messages, mode, o);
        let timelines = Timelines::of(&graph);
        let kinds = Kinds::of(&graph, &connections);
        let (delays, first) = MeanDelays::measure(&graph, &connections, &timelines, &kinds);
        let table = Weigher::of(&graph, &connections, &timelines, &kinds, &delays)
            .causes(first)
            .0;
        let each = (0..messages.len() as u32)
            .map(|i| (table.parents(i).to_vec(), table.spontaneous(i)))
            .collect();
        let means = (0..messages.len())
            .map(|i| delays.mean(kinds.of_message(i)))
            .collect();
        (each, means)
    }

    #[test]
    fn the_mean_delay_of_a_kind_is_of_its_latest_causes_and_at_least_a_microsecond() {
        let (_, means) = weighed(&two_requests(), Mode::Faithful, &servers_listening());
        // front→back: 1 ms after the request, in both; back→front: 1.9 ms after the call;
        // front→client: 0.9 ms after the reply; client→front: no cause, no mean.
        assert_eq!(means[1], 1_000_000.0);
        assert_eq!(means[2], 1_900_000.0);
        assert_eq!(means[3], 900_000.0);
        assert_eq!(means[0], MIN_MEAN_NS);
    }

    #[test]
    fn causes_score_by_their_delay_against_the_mean_beside_being_spontaneous() {
        let (each, _) = weighed(&two_requests(), Mode::Faithful, &servers_listening());
        for (i, (causes, spontaneous)) in each.iter().enumerate() {
            let total: f64 = causes.iter().map(|(_, p)| f64::from(*p)).sum::<f64>() + spontaneous;
            assert!((total - 1.0).abs() < 1e-5, "message {i}: {total}");
        }
        // The client's request has no cause.
        assert_eq!(each[0], (vec![], 1.0));
        // The call, one mean after the request: e^-1 against being spontaneous's e^-4.
        let (causes, _) = &each[1];
        let expected = 1.0 / (1.0 + (-3.0f64).exp());
        assert_eq!(causes.len(), 1);
        assert!((f64::from(causes[0].1) - expected).abs() < 1e-6);
        // The answer: the reply 0.9 ms before it weighs more than the request 4 ms before.
        let (causes, _) = &each[3];
        let p = |j: u32| causes.iter().find(|(k, _)| *k == j).map(|(_, p)| *p);
        assert!(p(2) > p(0), "{causes:?}");
        assert!(p(0).is_some());
    }

    #[test]
    fn the_greedy_baseline_takes_the_latest_candidate_for_certain() {
        let (each, _) = weighed(&two_requests(), Mode::Greedy, &servers_listening());
        assert_eq!(each[3], (vec![(2, 1.0)], 0.0));
        assert_eq!(each[0], (vec![], 1.0));
    }
}
