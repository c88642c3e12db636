//! Per node, the messages into it by receive time and out of it by send time: where a
//! message's candidate causes are found.

use crate::connections::Connections;
use crate::rows::Rows;

use super::graph::Graph;

/// Per node, (time, message) sorted by time: receipts into it, sends out of it.
pub(super) struct Timelines {
    into: Rows<(i64, u32)>,
    out_of: Rows<(i64, u32)>,
}

impl Timelines {
    pub(super) fn of(graph: &Graph<'_>) -> Timelines {
        let messages = graph.messages;
        let nodes = graph.nodes.names.len();
        let mut into = Rows::grouped(nodes, || {
            messages
                .iter()
                .enumerate()
                .filter_map(|(i, m)| Some((graph.dst(i) as usize, (m.recv_ns.get()?, i as u32))))
        });
        let mut out_of = Rows::grouped(nodes, || {
            messages
                .iter()
                .enumerate()
                .filter_map(|(i, m)| Some((graph.src(i) as usize, (m.send_ns.get()?, i as u32))))
        });
        for node in 0..nodes {
            into.row_mut(node).sort_unstable();
            out_of.row_mut(node).sort_unstable();
        }
        Timelines { into, out_of }
    }

    /// Message `i`'s candidate causes into `found`: (cause, delay), the latest first, at
    /// most `max`, none more than `limit_ns` before it. A captured sender's are the
    /// messages into it before the send (in the connections mode, only those its
    /// connections allow). An uncaptured sender's is only a message its receiver sent it
    /// on the same connection (endpoints reversed) before the receipt, both on the
    /// receiver's clock: A→B→A. A new connection from outside (a client) has no cause,
    /// and in the connections mode neither has a request an uncaptured sender makes to a
    /// server's fixed port: a client that keeps its connection alive asks anew, its next
    /// request is not caused by the last answer.
    pub(super) fn candidates(
        &self,
        graph: &Graph<'_>,
        connections: &Connections,
        i: usize,
        limit_ns: i64,
        max: usize,
        found: &mut Vec<(u32, i64)>,
    ) {
        found.clear();
        let messages = graph.messages;
        let m = &messages[i];
        let (list, t, reply) = match (m.send_ns.get(), m.recv_ns.get()) {
            (Some(t), _) => (self.into.row(graph.src(i) as usize), t, false),
            (None, Some(t)) => (self.out_of.row(graph.dst(i) as usize), t, true),
            (None, None) => return,
        };
        let by_connections = graph.by_connections();
        if reply && by_connections && connections.is_request(i) {
            return;
        }
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
                p.src_ep == m.dst_ep
                    && p.dst_ep == m.src_ep
                    && graph.dst(j as usize) == graph.src(i)
            } else {
                !by_connections || connections.allows(messages, i, j as usize)
            };
            if matches {
                found.push((j, t - at));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::tests::{msg, servers_listening, two_requests};
    use crate::link::{LinkOptions, Mode};

    fn candidates_of(
        messages: &[crate::reconcile::Message],
        o: &LinkOptions,
        i: usize,
        limit_ns: i64,
        max: usize,
    ) -> Vec<(u32, i64)> {
        let (graph, connections) = Graph::of(messages, Mode::Faithful, o);
        let mut found = Vec::new();
        Timelines::of(&graph).candidates(&graph, &connections, i, limit_ns, max, &mut found);
        found
    }

    #[test]
    fn a_sends_candidates_are_the_receipts_before_it_latest_first_within_the_limit() {
        let (messages, o) = (two_requests(), servers_listening());
        // The front end's answer (index 3, at 4 ms) follows the back end's reply (3.1 ms)
        // and the client's request (0 ms).
        assert_eq!(
            candidates_of(&messages, &o, 3, 10_000_000, 8),
            vec![(2, 900_000), (0, 4_000_000)]
        );
        assert_eq!(
            candidates_of(&messages, &o, 3, 10_000_000, 1),
            vec![(2, 900_000)]
        );
        assert_eq!(
            candidates_of(&messages, &o, 3, 1_000_000, 8),
            vec![(2, 900_000)]
        );
        // The second request's answer, a second later: within 2 s, the first request's
        // receipts at the front end are candidates too, the latest first.
        assert_eq!(
            candidates_of(&messages, &o, 7, 2_000_000_000, 8),
            vec![
                (6, 900_000),
                (4, 4_000_000),
                (2, 1_000_900_000),
                (0, 1_004_000_000)
            ]
        );
        assert_eq!(candidates_of(&messages, &o, 7, 1_000_000_000, 8).len(), 2);
    }

    #[test]
    fn an_uncaptured_senders_cause_is_a_call_on_the_same_connection_reversed() {
        let messages = vec![
            // front calls an uncaptured store on two connections...
            msg(
                1,
                "front",
                "10.0.0.1:5001",
                "store",
                "10.0.0.3:70",
                Some(1_000),
                None,
            ),
            msg(
                2,
                "front",
                "10.0.0.1:5002",
                "store",
                "10.0.0.3:70",
                Some(2_000),
                None,
            ),
            // ... and the store's reply on the first is seen only where it arrives.
            msg(
                3,
                "store",
                "10.0.0.3:70",
                "front",
                "10.0.0.1:5001",
                None,
                Some(5_000),
            ),
        ];
        let o = LinkOptions::default();
        assert_eq!(
            candidates_of(&messages, &o, 2, 1_000_000, 8),
            vec![(0, 4_000)]
        );
        // A message with neither time has no candidates.
        let mut lost = messages.clone();
        lost[2].recv_ns = None.into();
        assert_eq!(candidates_of(&lost, &o, 2, 1_000_000, 8), vec![]);
    }

    #[test]
    fn an_uncaptured_clients_next_request_on_a_kept_alive_connection_has_no_cause() {
        // An uncaptured client asks front twice on one connection: the answer to the
        // first came back on it before the second.
        let messages = vec![
            msg(
                1,
                "CLIENT",
                "10.0.0.9:40000",
                "front",
                "10.0.0.1:80",
                None,
                Some(0),
            ),
            msg(
                2,
                "front",
                "10.0.0.1:80",
                "CLIENT",
                "10.0.0.9:40000",
                Some(1_000),
                None,
            ),
            msg(
                3,
                "CLIENT",
                "10.0.0.9:40000",
                "front",
                "10.0.0.1:80",
                None,
                Some(2_000),
            ),
        ];
        let o = servers_listening();
        let candidates = |mode: Mode| {
            let (graph, connections) = Graph::of(&messages, mode, &o);
            let mut found = Vec::new();
            Timelines::of(&graph).candidates(&graph, &connections, 2, 1_000_000, 8, &mut found);
            found
        };
        assert_eq!(candidates(Mode::Connections), vec![]);
        // WAP5 as published takes the answer for its cause (A→B→A).
        assert_eq!(candidates(Mode::Faithful), vec![(1, 1_000)]);
    }
}
