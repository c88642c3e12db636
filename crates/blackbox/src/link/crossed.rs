//! Requests whose calls crossed: two requests of one kind a moment apart at a server, and
//! the calls of one given to the other. Weighing scores each call alone, by its delay since
//! the request, and an exponential delay favours the later request for every call: both
//! requests' writes go to the later one, and the earlier has none. Yet a server answers a
//! request soon after the last answer it waited for (a quorum of writes, a publish), makes
//! the calls nearly every request of its kind makes, and never sends a request's calls
//! after answering it: each request's answer tells whose calls were whose.
//!
//! So, after weighing, for each pair of requests of one kind that a server held at once,
//! their calls are divided between them again, by local search from weighing's division
//! (moving one call, or exchanging all, while that scores better). A division scores, over
//! what each request's handling sent (its calls, and the calls made after their answers):
//! the delay of its first call since the request and of the others since the first (a
//! server sends a request's calls together), the answer's delay since the last answer
//! received for it (each against its kind's mean, as weighing scores delays), each call
//! answered after its request had been (as likely as its kind's calls were), each call
//! beyond or short of its kind's quota (`slots::Quotas`, as weighing scores one beyond),
//! and a call sent before its request came or after it was answered ruled out. A call
//! moves from one request to the other by exchanging the two requests' probabilities in
//! its row, so that what follows reads the division as weighing's own.
//!
//! Before the pairs, a request that made none of the calls its kind always makes (it worked
//! long before calling, and weighing gave its calls to a request that came just before
//! them) is divided with the one later request, of up to [`PAIRED_STARVED`] that arrived
//! while it was open, whose division gains most; there any call may move, as weighing may
//! have pruned the starved request from its candidates.

use foldhash::HashMap;

use crate::rows::Rows;

use super::causes::CauseTable;
use super::graph::Kind;
use super::weigh::{Learned, Weigher, OVER_QUOTA};

/// Later requests each request is paired with, of those that arrived while it was open.
const PAIRED: usize = 8;

/// Later requests a request that made none of its calls is paired with (see
/// [`Scorer::divide_starved`]).
const PAIRED_STARVED: usize = 64;

/// The most calls two requests may have for their division to be searched.
const DIVIDED_MOST: usize = 24;

/// Calls followed in the handling below one call.
const HANDLING_MOST: usize = 32;

/// How much likelier a division must be to be taken (a log ratio): not a rounding error.
const BETTER: f64 = 1e-6;

/// A request as scoring reads it.
struct Owner {
    kind: Kind,
    arrived: i64,
    answered: i64,
    /// The mean delay of its answer's kind.
    answer_mean: f64,
}

/// What one call, with the calls made after its answer, adds to a request's score: the
/// calls answered late, and the latest answer back before the request's; and what its
/// delay is scored by (with the request's other calls).
#[derive(Clone, Copy)]
struct Part {
    score: f64,
    last: i64,
    /// When the call was sent, and its kind's mean delay.
    sent: i64,
    mean: f64,
}

/// A division of two requests' calls `own`: which went to the first (`was`), which go
/// to it now (`to_a`), and how much likelier that is (a log ratio).
struct Division {
    gain: f64,
    own: Vec<u32>,
    was: Vec<bool>,
    to_a: Vec<bool>,
}

/// What scoring divisions reads.
struct Scorer<'a, 'w> {
    weigher: &'a Weigher<'w>,
    /// Messages by their most likely cause.
    effects: Rows<u32>,
    /// The quotas and calls answered late, as weighing's last round learned them.
    learned: &'a Learned<'w>,
    /// Requests whose calls were divided again: their calls now.
    divided: HashMap<u32, Vec<u32>>,
}

/// Divides again the calls of requests that crossed (see the module), in `causes`, by
/// what weighing's last round `learned`.
pub(super) fn uncross(weigher: &Weigher<'_>, causes: &mut CauseTable, learned: &Learned<'_>) {
    let messages = weigher.graph.messages;
    let known = causes.most_likely_all();
    let n = messages.len();
    let effects = Rows::grouped(n, || {
        (0..n as u32).filter_map(|i| Some((known.get(i as usize)? as usize, i)))
    });
    drop(known);
    let mut scorer = Scorer {
        weigher,
        effects,
        learned,
        divided: HashMap::default(),
    };
    let c = weigher.connections;
    let mut servers: Vec<u32> = c.servers().collect();
    servers.sort_unstable();
    for server in servers {
        let requests = c.requests_of(server);
        for (k, &(_, a)) in requests.iter().enumerate() {
            scorer.divide_starved(causes, a, &requests[k + 1..]);
        }
        for (k, &(_, a)) in requests.iter().enumerate() {
            let Some(answered) = c.answered_at(messages, a as usize) else {
                continue;
            };
            for &(_, b) in requests[k + 1..]
                .iter()
                .take_while(|(arrived, _)| *arrived < answered)
                .take(PAIRED)
            {
                scorer.divide(causes, a, b);
            }
        }
    }
}

impl Scorer<'_, '_> {
    /// Request `r`'s own calls: caused by it, as weighing found or as divided again.
    fn direct(&self, r: u32) -> Vec<u32> {
        if let Some(calls) = self.divided.get(&r) {
            return calls.clone();
        }
        let c = self.weigher.connections;
        self.effects
            .row(r as usize)
            .iter()
            .copied()
            .filter(|&m| c.answers(m).is_none())
            .collect()
    }

    /// Call `call` and the calls its server made after its answer, and after theirs.
    fn below(&self, call: u32) -> Vec<u32> {
        let c = self.weigher.connections;
        let mut calls = vec![call];
        let mut next = 0;
        while next < calls.len() && calls.len() < HANDLING_MOST {
            if let Some(answer) = c.call_answer(calls[next] as usize) {
                let row = self.effects.row(answer as usize);
                calls.extend(row.iter().copied().filter(|&m| c.answers(m).is_none()));
            }
            next += 1;
        }
        calls
    }

    /// Request `r` as scoring reads it; `None` when its arrival or answer was not seen.
    fn owner(&self, r: u32) -> Option<Owner> {
        let w = self.weigher;
        let messages = w.graph.messages;
        let answer = w.connections.answered_by(r as usize)?;
        Some(Owner {
            kind: w.kinds.of_message(r as usize),
            arrived: messages[r as usize].recv_ns.get()?,
            answered: messages[answer as usize].send_ns.get()?,
            answer_mean: w.delays.mean(w.kinds.of_message(answer as usize)),
        })
    }

    /// What call `call`, and the calls `below` it, add to the score of request `r` making
    /// it; `None` where `r` cannot have (sent before it came, or any sent after it was
    /// answered).
    fn part(&self, r: &Owner, call: u32, below: &[u32]) -> Option<Part> {
        let w = self.weigher;
        let (messages, c) = (w.graph.messages, w.connections);
        let kind = |m: u32| w.kinds.of_message(m as usize) as usize;
        let sent = messages[call as usize].send_ns.get()?;
        if sent < r.arrived {
            return None;
        }
        let mut part = Part {
            score: 0.0,
            last: r.arrived,
            sent,
            mean: w.delays.mean(kind(call) as u32),
        };
        for &m in below {
            let sent = messages[m as usize].send_ns.get();
            if sent.is_some_and(|s| s > r.answered) {
                return None;
            }
            let back = c
                .call_answer(m as usize)
                .and_then(|a| messages[a as usize].recv_ns.get());
            match back {
                Some(back) if back <= r.answered => part.last = part.last.max(back),
                Some(_) => part.score += self.learned.late.get(kind(m)).copied().unwrap_or(0.0),
                None => {}
            }
        }
        Some(part)
    }

    /// The log likelihood of request `r` making the calls `calls` (indices into `own`,
    /// each with its part); `None` where it cannot.
    fn score(
        &self,
        r: &Owner,
        own: &[u32],
        parts: &[Option<Part>],
        calls: &[usize],
    ) -> Option<f64> {
        let kind = |m: u32| self.weigher.kinds.of_message(m as usize);
        let mut score = 0.0;
        let mut last = r.arrived;
        let mut made: Vec<(u32, usize)> = Vec::new();
        // A request sends its calls together: the first call's delay counts since the
        // request came, the others' since the first (were each counted since the
        // request, two requests' calls could be exchanged at no cost).
        let first = calls
            .iter()
            .filter_map(|&k| parts[k])
            .map(|p| p.sent)
            .min()
            .unwrap_or(r.arrived);
        for &k in calls {
            let part = parts[k]?;
            score += part.score;
            score -= if part.sent == first {
                (first - r.arrived) as f64 / part.mean
            } else {
                (part.sent - first) as f64 / part.mean
            };
            last = last.max(part.last);
            match made.iter_mut().find(|(of, _)| *of == kind(own[k])) {
                Some(m) => m.1 += 1,
                None => made.push((kind(own[k]), 1)),
            }
        }
        if let Some(quotas) = &self.learned.quotas {
            for &(call_kind, n) in &made {
                if let Some((quota, _)) = quotas.quota(r.kind, call_kind) {
                    score += n.saturating_sub(quota as usize) as f64 * OVER_QUOTA;
                }
            }
            // A request short of the calls every request of its kind makes, exactly.
            for (call_kind, quota) in quotas.exact(r.kind) {
                let n = made.iter().find(|m| m.0 == call_kind).map_or(0, |m| m.1);
                score += (quota as usize).saturating_sub(n) as f64 * OVER_QUOTA;
            }
        }
        Some(score - (r.answered - last) as f64 / r.answer_mean)
    }

    /// The log likelihood of requests `a` and `b` with the calls `own` divided as `to_a`
    /// says (each call's part for either in `parts`); minus infinity where it cannot be.
    fn division(
        &self,
        (a, b): (&Owner, &Owner),
        own: &[u32],
        parts: &[Vec<Option<Part>>; 2],
        to_a: &[bool],
    ) -> f64 {
        let (of_a, of_b): (Vec<usize>, Vec<usize>) = (0..own.len()).partition(|&k| to_a[k]);
        match (
            self.score(a, own, &parts[0], &of_a),
            self.score(b, own, &parts[1], &of_b),
        ) {
            (Some(x), Some(y)) => x + y,
            _ => f64::NEG_INFINITY,
        }
    }

    /// Whether request `r` made none of the calls every request of its kind makes.
    fn starved(&self, r: u32) -> bool {
        let kind = self.weigher.kinds.of_message(r as usize);
        let calls_always = self
            .learned
            .quotas
            .as_ref()
            .is_some_and(|q| q.exact(kind).next().is_some());
        calls_always && self.direct(r).is_empty()
    }

    /// Divides again the calls of request `a`, when it made none of its calls, with the
    /// one of the requests `later` that arrived while it was open whose division with
    /// it gains most. Such a request worked a long while before it called: weighing,
    /// which favours short delays, gave its calls to a request that arrived shortly
    /// before them, and need not have counted `a` among their candidate causes at all;
    /// so here any call may move to it. Only the best division is taken: taking one
    /// call of another request that a moment after `a` arrived already gains.
    fn divide_starved(&mut self, causes: &mut CauseTable, a: u32, later: &[(i64, u32)]) {
        let messages = self.weigher.graph.messages;
        let Some(answered) = self.weigher.connections.answered_at(messages, a as usize) else {
            return;
        };
        if !self.starved(a) {
            return;
        }
        let open = later.partition_point(|(arrived, _)| *arrived < answered);
        let best = later[..open]
            .iter()
            .rev()
            .take(PAIRED_STARVED)
            .filter_map(|&(_, b)| Some((b, self.best_division(causes, a, b, true)?)))
            .max_by(|x, y| x.1.gain.total_cmp(&y.1.gain));
        if let Some((b, division)) = best {
            self.take(causes, a, b, division);
        }
    }

    /// Divides the calls of requests `a` and `b` (of one kind) again, in `causes`.
    fn divide(&mut self, causes: &mut CauseTable, a: u32, b: u32) {
        if let Some(division) = self.best_division(causes, a, b, false) {
            self.take(causes, a, b, division);
        }
    }

    /// Takes `division` of requests `a` and `b`'s calls, in `causes`.
    fn take(&mut self, causes: &mut CauseTable, a: u32, b: u32, division: Division) {
        let Division { own, was, to_a, .. } = division;
        for k in (0..own.len()).filter(|&k| to_a[k] != was[k]) {
            causes.exchange(own[k], a, b);
        }
        let calls_of = |to: bool| -> Vec<u32> {
            (0..own.len())
                .filter(|&k| to_a[k] == to)
                .map(|k| own[k])
                .collect()
        };
        self.divided.insert(a, calls_of(true));
        self.divided.insert(b, calls_of(false));
    }

    /// The likeliest division of the calls of requests `a` and `b` (of one kind) that
    /// local search finds, if likelier than the present one; a call moves only between
    /// requests among its candidate causes in `causes`, unless `to_any`.
    fn best_division(&self, causes: &CauseTable, a: u32, b: u32, to_any: bool) -> Option<Division> {
        let kind = |m: u32| self.weigher.kinds.of_message(m as usize);
        if kind(a) != kind(b) {
            return None;
        }
        let (of_a, of_b) = (self.direct(a), self.direct(b));
        let own: Vec<u32> = of_a.iter().chain(&of_b).copied().collect();
        if own.is_empty() || own.len() > DIVIDED_MOST {
            return None;
        }
        let movable: Vec<bool> = own
            .iter()
            .map(|&m| to_any || (causes.has(m, a) && causes.has(m, b)))
            .collect();
        if !movable.contains(&true) {
            return None;
        }
        let (Some(owner_a), Some(owner_b)) = (self.owner(a), self.owner(b)) else {
            return None;
        };
        let below: Vec<Vec<u32>> = own.iter().map(|&m| self.below(m)).collect();
        let parts = [&owner_a, &owner_b].map(|r| {
            (0..own.len())
                .map(|k| self.part(r, own[k], &below[k]))
                .collect::<Vec<_>>()
        });
        drop(below);
        let owners = (&owner_a, &owner_b);
        let was: Vec<bool> = (0..own.len()).map(|k| k < of_a.len()).collect();
        let mut to_a = was.clone();
        let mut best = self.division(owners, &own, &parts, &to_a);
        // Steepest ascent: each step moves one call, exchanges two of one kind, or
        // exchanges every movable call.
        for _ in 0..2 * own.len() {
            let mut step: Option<(f64, Vec<bool>)> = None;
            let mut consider = |tried: Vec<bool>, this: &Self| {
                let score = this.division(owners, &own, &parts, &tried);
                if score > best + BETTER && step.as_ref().is_none_or(|(s, _)| score > *s) {
                    step = Some((score, tried));
                }
            };
            for k in (0..own.len()).filter(|&k| movable[k]) {
                let mut tried = to_a.clone();
                tried[k] = !tried[k];
                consider(tried, self);
            }
            // Two calls of one kind exchanged: moving either alone puts a request over
            // its quota, and the other short.
            for k in (0..own.len()).filter(|&k| movable[k] && to_a[k]) {
                for l in (0..own.len()).filter(|&l| movable[l] && !to_a[l]) {
                    if kind(own[k]) == kind(own[l]) {
                        let mut tried = to_a.clone();
                        tried[k] = false;
                        tried[l] = true;
                        consider(tried, self);
                    }
                }
            }
            let all: Vec<bool> = (0..own.len()).map(|k| to_a[k] != movable[k]).collect();
            consider(all, self);
            match step {
                Some((score, tried)) => {
                    best = score;
                    to_a = tried;
                }
                None => break,
            }
        }
        if to_a == was {
            return None;
        }
        let gain = best - self.division(owners, &own, &parts, &was);
        Some(Division {
            gain,
            own,
            was,
            to_a,
        })
    }
}

#[cfg(test)]
mod tests {
    use foldhash::HashMap;

    use super::Scorer;
    use crate::link::causes::CauseTable;
    use crate::link::graph::{Graph, Kinds};
    use crate::link::tests::{listening_on, msg};
    use crate::link::timelines::Timelines;
    use crate::link::weigh::{MeanDelays, Weigher};
    use crate::link::{link, Mode};
    use crate::reconcile::Message;
    use crate::rows::Rows;

    /// One order: its request, its three writes (one per replica, sent together), the
    /// publish after two writes were answered, and the answer after the publish's.
    struct Order {
        request: usize,
        writes: [usize; 3],
        publish: usize,
    }

    /// An order arriving at `t` (µs) that validates for `validating` µs; the replicas
    /// answer after `disk` µs each.
    fn order(
        messages: &mut Vec<Message>,
        port: &mut u32,
        t: i64,
        validating: i64,
        disk: [i64; 3],
    ) -> Order {
        let us = 1_000;
        let mut push = |src: &str,
                        src_ep: &str,
                        dst: &str,
                        dst_ep: &str,
                        send: Option<i64>,
                        recv: Option<i64>| {
            let id = messages.len() as i64 + 1;
            messages.push(msg(
                id,
                src,
                src_ep,
                dst,
                dst_ep,
                send.map(|t| t * us),
                recv.map(|t| t * us),
            ));
            messages.len() - 1
        };
        *port += 10;
        let client = format!("10.0.0.9:{port}");
        let own = |k: u32| format!("10.0.0.1:{}", *port + k);
        let request = push("CLIENT", &client, "orders", "10.0.0.1:80", None, Some(t));
        let replicas = ["disk-1", "disk-2", "disk-3"];
        let mut answered = [0i64; 3];
        let writes = [0usize, 1, 2].map(|k| {
            let (sent, dst_ep) = (t + validating + 50 * k as i64, format!("10.0.1.{k}:90"));
            let write = push(
                "orders",
                &own(k as u32),
                replicas[k],
                &dst_ep,
                Some(sent),
                Some(sent + 20),
            );
            answered[k] = sent + disk[k];
            push(
                replicas[k],
                &dst_ep,
                "orders",
                &own(k as u32),
                Some(answered[k] - 20),
                Some(answered[k]),
            );
            write
        });
        answered.sort_unstable();
        let published = answered[1] + 80;
        let publish = push(
            "orders",
            &own(3),
            "queue",
            "10.0.2.1:91",
            Some(published),
            Some(published + 30),
        );
        push(
            "queue",
            "10.0.2.1:91",
            "orders",
            &own(3),
            Some(published + 150),
            Some(published + 180),
        );
        push(
            "orders",
            "10.0.0.1:80",
            "CLIENT",
            &client,
            Some(published + 240),
            None,
        );
        Order {
            request,
            writes,
            publish,
        }
    }

    /// Orders alone, to teach the delays, the quotas and which calls are waited for.
    fn orders_alone(messages: &mut Vec<Message>, port: &mut u32) {
        for k in 0..60i64 {
            let disk = [
                4_000 + 37 * (k % 11),
                4_200 + 53 * (k % 7),
                9_000 + 41 * (k % 13),
            ];
            order(messages, port, k * 50_000, 1_000 + 31 * (k % 60), disk);
        }
    }

    fn orders_options() -> crate::link::LinkOptions {
        listening_on(&[
            ("orders", 80),
            ("disk-1", 90),
            ("disk-2", 90),
            ("disk-3", 90),
            ("queue", 91),
        ])
    }

    /// Weighing's causes of `messages` (orders), changed by `prepare`, and a division
    /// scorer reading them, for `test`.
    fn with_scorer(
        messages: &[Message],
        prepare: impl FnOnce(&mut CauseTable),
        test: impl FnOnce(&mut Scorer<'_, '_>, &mut CauseTable),
    ) {
        let options = orders_options();
        let (graph, connections) = Graph::of(messages, Mode::Connections, &options);
        let timelines = Timelines::of(&graph);
        let kinds = Kinds::of(&graph, &connections);
        let (delays, first_candidates) =
            MeanDelays::measure(&graph, &connections, &timelines, &kinds);
        let weigher = Weigher::of(&graph, &connections, &timelines, &kinds, &delays);
        let (mut causes, learned) = weigher.causes(first_candidates);
        prepare(&mut causes);
        let known = causes.most_likely_all();
        let n = messages.len();
        let mut scorer = Scorer {
            weigher: &weigher,
            effects: Rows::grouped(n, || {
                (0..n as u32).filter_map(|i| Some((known.get(i as usize)? as usize, i)))
            }),
            learned: &learned,
            divided: HashMap::default(),
        };
        test(&mut scorer, &mut causes);
    }

    /// An order to make: when it arrives (µs after the orders alone), how long it
    /// validates, and how long each replica takes to answer (µs).
    type Checkout = (i64, i64, [i64; 3]);

    /// Orders alone, then two more.
    fn two_orders(first: Checkout, second: Checkout) -> (Vec<Message>, Order, Order) {
        let mut messages = Vec::new();
        let mut port = 5000;
        orders_alone(&mut messages, &mut port);
        let t = 60 * 50_000;
        let [first, second] = [first, second].map(|(at, validating, disk)| {
            order(&mut messages, &mut port, t + at, validating, disk)
        });
        (messages, first, second)
    }

    /// The second arrives before the first writes, and writes 2.4 ms after it.
    fn two_orders_crossing() -> (Vec<Message>, Order, Order) {
        two_orders(
            (0, 3_300, [4_600, 4_750, 9_975]),
            (2_000, 3_700, [4_525, 4_890, 9_640]),
        )
    }

    #[test]
    fn a_division_keeping_each_orders_writes_together_scores_above_one_exchanging_two() {
        let (messages, first, second) = two_orders_crossing();
        with_scorer(
            &messages,
            |_| {},
            |scorer, _| {
                let (a, b) = (first.request as u32, second.request as u32);
                let owners = (&scorer.owner(a).expect("a"), &scorer.owner(b).expect("b"));
                let own: Vec<u32> = first
                    .writes
                    .iter()
                    .chain(&second.writes)
                    .map(|&w| w as u32)
                    .collect();
                let parts = [owners.0, owners.1].map(|r| {
                    own.iter()
                        .map(|&m| scorer.part(r, m, &scorer.below(m)))
                        .collect::<Vec<_>>()
                });
                let as_sent = scorer.division(
                    owners,
                    &own,
                    &parts,
                    &[true, true, true, false, false, false],
                );
                // Their writes to the third replica exchanged: each order still writes once
                // to each replica, and the calls' delays since their requests add up the same.
                let exchanged = scorer.division(
                    owners,
                    &own,
                    &parts,
                    &[true, true, false, false, false, true],
                );
                assert!(as_sent > exchanged + 1.0, "{as_sent} against {exchanged}");
            },
        );
    }

    #[test]
    fn two_writes_of_one_kind_exchanged_between_two_orders_are_exchanged_back() {
        let (messages, first, second) = two_orders_crossing();
        let (a, b) = (first.request as u32, second.request as u32);
        let (w1, w2) = (first.writes[2] as u32, second.writes[2] as u32);
        // Each order's write to the third replica given to the other.
        let exchange = |causes: &mut CauseTable| {
            for (w, other) in [(w1, b), (w2, a)] {
                if causes.most_likely(w) != Some(other) {
                    causes.exchange(w, a, b);
                }
            }
        };
        with_scorer(&messages, exchange, |scorer, causes| {
            assert_eq!(
                (causes.most_likely(w1), causes.most_likely(w2)),
                (Some(b), Some(a))
            );
            // Moving either alone leaves an order with two writes to one replica.
            scorer.divide(causes, a, b);
            assert_eq!(
                (causes.most_likely(w1), causes.most_likely(w2)),
                (Some(a), Some(b))
            );
        });
    }

    /// Linked, each of `orders`' writes and publish hangs under its own order.
    fn assert_each_order_placed_its_own_calls(messages: &[Message], orders: [&Order; 2]) {
        let linked = link(messages, Mode::Connections, &orders_options());
        let parent = |i: usize| linked.placements[i].parent.map(|p| p as usize);
        for o in orders {
            assert_eq!(o.writes.map(parent), [Some(o.request); 3]);
            assert_eq!(parent(o.publish), Some(o.request));
        }
    }

    #[test]
    fn an_order_that_validated_long_before_writing_gets_its_writes_back() {
        // The first validates 30 ms, twenty times the others; the second comes 29 ms
        // after it and validates 1 ms, so both write at once. By their delays since
        // their orders all six writes are the second's, and the first made none.
        let (messages, first, second) = two_orders(
            (0, 30_000, [4_600, 4_750, 9_975]),
            (29_000, 1_000, [4_525, 4_890, 9_640]),
        );
        assert_each_order_placed_its_own_calls(&messages, [&first, &second]);
    }

    #[test]
    fn the_calls_of_two_orders_a_moment_apart_go_to_the_order_answered_after_them() {
        // Two at once: the first validates 3.2 ms, the second, 2 ms later, 1.5 ms; each
        // order's publish follows its own writes' answers, and its answer the publish's.
        let (messages, first, second) = two_orders(
            (0, 3_245, [4_600, 4_750, 4_975]),
            (1_994, 1_525, [5_525, 6_890, 7_640]),
        );
        assert_each_order_placed_its_own_calls(&messages, [&first, &second]);
    }
}
