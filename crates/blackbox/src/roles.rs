//! Clients and servers (WAP5 §2.5.1): patterns aggregate the many clients of a system
//! under one name. A port is fixed when its node listens on it (a capture saw the
//! `listen`) or when it talks to at least `min_peers` other endpoints (as DNS's 53 does);
//! otherwise it is ephemeral. A node that uses a fixed port at least once is a server;
//! any other node is a client, and patterns name every client `CLIENT`.

use foldhash::{HashMap, HashSet};
use smallvec::SmallVec;

use crate::numbers::Numbered;
use crate::reconcile::{port, Message, Name};

/// The name patterns give every client node.
pub const CLIENT: &str = "CLIENT";

/// The endpoints (node, `ip:port`) on fixed ports, given the ports each node listens on.
pub fn fixed_endpoints(
    messages: &[Message],
    listening: &HashMap<String, HashSet<u16>>,
    min_peers: usize,
) -> HashSet<(Name, Name)> {
    let (nodes, endpoints) = crate::parallel::join(
        || Numbered::nodes(messages),
        || Numbered::endpoints(messages),
    );
    fixed_numbered(&nodes, &endpoints, listening, min_peers)
        .into_iter()
        .map(|(node, ep)| (nodes.names[node as usize], endpoints.names[ep as usize]))
        .collect()
}

/// [`fixed_endpoints`] by number: (node, endpoint).
pub(crate) fn fixed_numbered(
    nodes: &Numbered,
    endpoints: &Numbered,
    listening: &HashMap<String, HashSet<u16>>,
    min_peers: usize,
) -> HashSet<(u32, u32)> {
    // Each endpoint's distinct peers, counted up to `min_peers` (inline: most endpoints
    // are ephemeral, with one peer).
    let mut peers: Vec<SmallVec<[u32; 3]>> = vec![SmallVec::new(); endpoints.names.len()];
    for (&a, &b) in endpoints.src.iter().zip(&endpoints.dst) {
        for (a, b) in [(a, b), (b, a)] {
            let seen = &mut peers[a as usize];
            if seen.len() < min_peers && !seen.contains(&b) {
                seen.push(b);
            }
        }
    }
    let ports: Vec<Option<&HashSet<u16>>> = nodes
        .names
        .iter()
        .map(|node| listening.get(node.as_str()))
        .collect();
    let mut out = HashSet::default();
    let sides = [(&nodes.src, &endpoints.src), (&nodes.dst, &endpoints.dst)];
    for (node_of, ep_of) in sides {
        for (&node, &ep) in node_of.iter().zip(ep_of.iter()) {
            if out.contains(&(node, ep)) {
                continue;
            }
            let fixed = peers[ep as usize].len() >= min_peers
                || ports[node as usize].is_some_and(|ports| {
                    port(&endpoints.names[ep as usize]).is_some_and(|p| ports.contains(&p))
                });
            if fixed {
                out.insert((node, ep));
            }
        }
    }
    out
}

/// The nodes that are servers, given the ports each node listens on.
pub fn servers(
    messages: &[Message],
    listening: &HashMap<String, HashSet<u16>>,
    min_peers: usize,
) -> HashSet<Name> {
    fixed_endpoints(messages, listening, min_peers)
        .into_iter()
        .map(|(node, _)| node)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reconcile::MessageId;

    fn msg(src: &str, src_ep: &str, dst: &str, dst_ep: &str) -> Message {
        Message {
            id: MessageId::Int(0),
            src: src.into(),
            src_ep: src_ep.into(),
            dst: dst.into(),
            dst_ep: dst_ep.into(),
            send_ns: Some(0).into(),
            recv_ns: Some(0).into(),
            bytes: 1,
        }
    }

    #[test]
    fn a_port_with_many_peers_or_a_listened_port_makes_a_server() {
        let mut messages: Vec<Message> = (0..3)
            .map(|i| {
                msg(
                    &format!("c{i}"),
                    &format!("10.0.0.{i}:4000{i}"),
                    "dns",
                    "10.0.0.9:53",
                )
            })
            .collect();
        // One client of a server nobody else calls: its port is fixed only because the
        // capture saw the server listen on it.
        messages.push(msg("curl", "10.0.0.5:41000", "web", "10.0.0.6:80"));
        let none = HashMap::default();
        let names = |s: HashSet<Name>| -> HashSet<&str> { s.iter().map(|n| n.as_str()).collect() };
        let s = names(servers(&messages, &none, 3));
        assert!(s.contains("dns") && !s.contains("c0") && !s.contains("web"));
        let listening = HashMap::from_iter([("web".to_string(), HashSet::from_iter([80u16]))]);
        let s = names(servers(&messages, &listening, 3));
        assert!(s.contains("web") && !s.contains("curl"));
    }
}
