//! Where inferred paths spend their time (WAP5 §5.2): each node's delay, from a message's
//! receipt to the send it caused (one clock, so no offset in it), with a histogram; each
//! link's network delay, receipt minus send (two clocks: it holds their offset); and each
//! pair of hosts' clock offset, estimated by assuming the network delay is the same both
//! ways (Paxson), from the means and from the minima of the two directions:
//! `(D_ab - D_ba) / 2`.
//!
//! Node delays go into a histogram of powers of two from 1 µs; link delays keep their
//! mean and minimum. Delays run from causes (WAP5's sense), by message index
//! ([`delays_by_index`]); the UI's Inferred page reads them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::link::Assignment;
use crate::reconcile::{Message, MessageIndex};

/// Histogram bucket bounds: powers of two from 1 µs to about 17 s (upper bounds, ns).
const BUCKETS: usize = 25;

fn bucket(ns: i64) -> usize {
    let us = (ns.max(0) as u64 / 1_000).max(1);
    (63 - us.leading_zeros() as usize).min(BUCKETS - 1)
}

/// A node's delays.
#[derive(Clone, Debug, Default, Serialize)]
pub struct NodeDelay {
    /// The node, as messages name it (`program[pid]@host` for a captured process).
    pub node: String,
    /// Delays measured: messages it sent whose assigned cause it had received.
    pub count: u64,
    /// The mean delay from a cause's receipt to the send it caused (ns).
    pub mean_ns: f64,
    /// Counts per bucket: bucket `k` holds delays from `2^k` up to `2^(k+1)` µs (the first
    /// also shorter ones, the last also longer ones).
    pub histogram: Vec<u64>,
}

/// A link's network delays (receipt minus send, on two clocks).
#[derive(Clone, Debug, Default, Serialize)]
pub struct LinkDelay {
    /// The sending node.
    pub src: String,
    /// The receiving node.
    pub dst: String,
    /// Messages on the link with both their send and receive times.
    pub count: u64,
    /// The mean of receipt minus send (ns; it holds the clocks' offset).
    pub mean_ns: f64,
    /// The smallest receipt minus send (ns).
    pub min_ns: i64,
}

/// The clock offset of host `b` relative to host `a` (`b`'s clock minus `a`'s).
#[derive(Clone, Debug, Serialize)]
pub struct ClockOffset {
    /// One host (the first of the two in name order).
    pub a: String,
    /// The other host, whose clock is measured against `a`'s.
    pub b: String,
    /// From the mean network delays of the two directions.
    pub offset_ns: f64,
    /// From their minima (less disturbed by queueing).
    pub offset_min_ns: f64,
    /// Messages each way.
    pub a_to_b: u64,
    /// Messages from `b` to `a` (`a_to_b`: from `a` to `b`).
    pub b_to_a: u64,
}

/// Where the inferred paths spend their time: in nodes, on links, and the hosts' clock offsets.
#[derive(Debug, Default, Serialize)]
pub struct Delays {
    /// Each node's delays, in node name order.
    pub nodes: Vec<NodeDelay>,
    /// Each link's network delays, in (sender, receiver) name order.
    pub links: Vec<LinkDelay>,
    /// Each pair of hosts' clock offset (pairs with messages both ways).
    pub clock_offsets: Vec<ClockOffset>,
}

/// A node's host: after the `@` of `program[pid]@host`, else the node itself.
fn host(node: &str) -> &str {
    node.rsplit_once("]@").map_or(node, |(_, h)| h)
}

/// The delays along the messages' assigned causes.
pub fn delays(messages: &[Message], assignments: &[Assignment]) -> Delays {
    let index = MessageIndex::of(messages);
    let mut causes = vec![None; messages.len()];
    for a in assignments {
        if let (Some(c), Some(p)) = (
            index.get(&a.id),
            a.cause.as_ref().and_then(|p| index.get(p)),
        ) {
            causes[c] = Some(p as u32);
        }
    }
    delays_by_index(messages, &causes)
}

/// The delays along the messages' causes: `causes[i]` is the index of message `i`'s.
pub fn delays_by_index(messages: &[Message], causes: &[Option<u32>]) -> Delays {
    let mut nodes: BTreeMap<&str, NodeDelay> = BTreeMap::new();
    for (c, cause) in causes.iter().enumerate() {
        let Some(p) = cause.map(|p| p as usize) else {
            continue;
        };
        if c >= messages.len() || p >= messages.len() {
            continue;
        }
        let (child, parent) = (&messages[c], &messages[p]);
        // Both on the node's clock: the cause's receipt and the effect's send there.
        let (Some(sent), Some(received)) = (child.send_ns.get(), parent.recv_ns.get()) else {
            continue;
        };
        if child.src != parent.dst {
            continue;
        }
        let d = nodes.entry(&*child.src).or_insert_with(|| NodeDelay {
            node: child.src.to_string(),
            histogram: vec![0; BUCKETS],
            ..NodeDelay::default()
        });
        let delay = sent - received;
        d.count += 1;
        d.mean_ns += (delay as f64 - d.mean_ns) / d.count as f64;
        d.histogram[bucket(delay)] += 1;
    }
    let mut links: BTreeMap<(&str, &str), LinkDelay> = BTreeMap::new();
    for m in messages {
        let (Some(sent), Some(received)) = (m.send_ns.get(), m.recv_ns.get()) else {
            continue;
        };
        let l = links.entry((&m.src, &m.dst)).or_insert_with(|| LinkDelay {
            src: m.src.to_string(),
            dst: m.dst.to_string(),
            min_ns: i64::MAX,
            ..LinkDelay::default()
        });
        let delay = received - sent;
        l.count += 1;
        l.mean_ns += (delay as f64 - l.mean_ns) / l.count as f64;
        l.min_ns = l.min_ns.min(delay);
    }
    // Per host pair, both directions pooled over their links.
    let mut hosts: BTreeMap<(&str, &str), (f64, i64, u64)> = BTreeMap::new();
    for l in links.values() {
        let e = hosts
            .entry((host(&l.src), host(&l.dst)))
            .or_insert((0.0, i64::MAX, 0));
        e.0 += l.mean_ns * l.count as f64;
        e.1 = e.1.min(l.min_ns);
        e.2 += l.count;
    }
    let mut clock_offsets = Vec::new();
    for (&(a, b), &(sum_ab, min_ab, n_ab)) in &hosts {
        if a >= b {
            continue;
        }
        let Some(&(sum_ba, min_ba, n_ba)) = hosts.get(&(b, a)) else {
            continue;
        };
        // a→b measures delay + θ, b→a measures delay − θ (θ = b's clock − a's).
        let (mean_ab, mean_ba) = (sum_ab / n_ab as f64, sum_ba / n_ba as f64);
        clock_offsets.push(ClockOffset {
            a: a.to_string(),
            b: b.to_string(),
            offset_ns: (mean_ab - mean_ba) / 2.0,
            offset_min_ns: (min_ab as f64 - min_ba as f64) / 2.0,
            a_to_b: n_ab,
            b_to_a: n_ba,
        });
    }
    Delays {
        nodes: nodes.into_values().collect(),
        links: links.into_values().collect(),
        clock_offsets,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::MessageId;

    fn msg(id: i64, src: &str, dst: &str, send: Option<i64>, recv: Option<i64>) -> Message {
        Message {
            id: MessageId::Int(id),
            src: src.into(),
            src_ep: "".into(),
            dst: dst.into(),
            dst_ep: "".into(),
            send_ns: send.into(),
            recv_ns: recv.into(),
            bytes: 1,
        }
    }

    #[test]
    fn an_offset_between_two_hosts_is_recovered_from_symmetric_delays() {
        // b's clock runs 5 ms ahead; the network takes 1 ms each way; b works 2 ms.
        let (net, skew, work) = (1_000_000i64, 5_000_000i64, 2_000_000i64);
        let mut messages = Vec::new();
        let mut assignments = Vec::new();
        for k in 0..10i64 {
            let t = k * 100_000_000;
            let call = msg(2 * k + 1, "x[1]@a", "y[2]@b", Some(t), Some(t + net + skew));
            let reply = msg(
                2 * k + 2,
                "y[2]@b",
                "x[1]@a",
                Some(t + net + skew + work),
                Some(t + 2 * net + work),
            );
            assignments.push(Assignment {
                id: call.id.clone(),
                trace: k as u64,
                parent: None,
                cause: None,
                probability: 1.0,
            });
            assignments.push(Assignment {
                id: reply.id.clone(),
                trace: k as u64,
                parent: Some(call.id.clone()),
                cause: Some(call.id.clone()),
                probability: 1.0,
            });
            messages.push(call);
            messages.push(reply);
        }
        let d = delays(&messages, &assignments);
        let offset = &d.clock_offsets[0];
        assert_eq!((offset.a.as_str(), offset.b.as_str()), ("a", "b"));
        assert_eq!(offset.offset_ns, skew as f64);
        assert_eq!(offset.offset_min_ns, skew as f64);
        let node = d
            .nodes
            .iter()
            .find(|n| n.node == "y[2]@b")
            .expect("b's node");
        assert_eq!((node.count, node.mean_ns), (10, work as f64));
        assert_eq!(node.histogram[bucket(work)], 10);
        // Raw network delays hold the offset: +6 ms one way, -4 ms the other.
        let ab = d.links.iter().find(|l| l.src == "x[1]@a").expect("a→b");
        assert_eq!(ab.mean_ns, (net + skew) as f64);
    }

    #[test]
    fn buckets_are_powers_of_two_microseconds() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1_999), 0);
        assert_eq!(bucket(2_000), 1);
        assert_eq!(bucket(1_000_000), 9);
        assert_eq!(bucket(i64::MAX), BUCKETS - 1);
    }
}
