//! The messages as linking reads them: senders and receivers numbered, which nodes are
//! clients, and each message's kind (its node pair, clients as one).

use crate::connections::Connections;
use crate::numbers::Numbered;
use crate::reconcile::Message;
use crate::roles::fixed_numbered;
use crate::slots::KindPair;

use super::sizes::SizeGroups;
use super::{LinkOptions, Mode};

/// A kind of message: its sender and receiver (clients as one), numbered.
pub(super) type Kind = u32;

/// What every step of linking reads about the messages.
pub(super) struct Graph<'a> {
    pub(super) messages: &'a [Message],
    /// Each message's sender and receiver, numbered, and the nodes' names.
    pub(super) nodes: Numbered,
    /// Whether each node is a client (§2.5.1): it never uses a fixed endpoint.
    pub(super) clients: Vec<bool>,
    pub(super) mode: Mode,
    pub(super) options: &'a LinkOptions,
}

impl<'a> Graph<'a> {
    /// The messages numbered, and the requests and answers on their connections (which
    /// every mode draws patterns with; only the connections mode links with them).
    pub(super) fn of(
        messages: &'a [Message],
        mode: Mode,
        options: &'a LinkOptions,
    ) -> (Graph<'a>, Connections) {
        let (nodes, endpoints) = crate::parallel::join(
            || Numbered::nodes(messages),
            || Numbered::endpoints(messages),
        );
        let fixed = fixed_numbered(
            &nodes,
            &endpoints,
            &options.listening,
            options.fixed_port_peers,
        );
        let mut clients = vec![true; nodes.names.len()];
        for &(node, _) in &fixed {
            clients[node as usize] = false;
        }
        let connections = Connections::of(messages, &nodes, &endpoints, &fixed);
        let graph = Graph {
            messages,
            nodes,
            clients,
            mode,
            options,
        };
        (graph, connections)
    }

    /// Message `i`'s sender.
    pub(super) fn src(&self, i: usize) -> u32 {
        self.nodes.src[i]
    }

    /// Message `i`'s receiver.
    pub(super) fn dst(&self, i: usize) -> u32 {
        self.nodes.dst[i]
    }

    pub(super) fn by_connections(&self) -> bool {
        self.mode == Mode::Connections
    }

    /// Whether message `i` starts a path: a captured client's message to a server (an
    /// uncaptured sender's messages are linked A→B→A; between two clients nothing says
    /// which one asks).
    pub(super) fn starts_path(&self, i: usize) -> bool {
        self.mode != Mode::Greedy
            && self.options.clients_start_paths
            && self.clients[self.src(i) as usize]
            && !self.clients[self.dst(i) as usize]
            && self.messages[i].send_ns.get().is_some()
    }

    /// A node as kinds count it: every client one node (§2.5.1), numbered after the
    /// nodes. A client host seen a few times says little on its own, and thousands of
    /// them are many pairs.
    fn aggregate(&self, node: u32) -> u32 {
        if self.clients[node as usize] {
            self.nodes.names.len() as u32
        } else {
            node
        }
    }

    /// Message `m`'s kind as its node pair.
    pub(super) fn kind_pair(&self, m: u32) -> KindPair {
        let m = m as usize;
        (self.aggregate(self.src(m)), self.aggregate(self.dst(m)))
    }

    /// The names patterns use: every client node is CLIENT; the unaggregated names stay
    /// in the assignments.
    pub(super) fn pattern_names(&self) -> Vec<&str> {
        (0..self.nodes.names.len() as u32)
            .map(|node| self.pattern_name(node))
            .collect()
    }

    /// Node `node`'s name in patterns.
    pub(super) fn pattern_name(&self, node: u32) -> &str {
        match self.nodes.names.get(node as usize) {
            Some(_) if self.clients[node as usize] => crate::roles::CLIENT,
            Some(name) => name.as_str(),
            None => crate::roles::CLIENT,
        }
    }
}

/// Each message's kind as a number, and the kinds' node pairs: a kind is a node pair, and
/// for requests their size group within it (`sizes`).
pub(super) struct Kinds {
    /// By message.
    of: Vec<Kind>,
    /// By kind.
    pub(super) pairs: Vec<KindPair>,
    /// By kind, the first kind of its node pair: kinds by node pair alone.
    pub(super) of_pair: Vec<Kind>,
}

impl Kinds {
    /// The kinds of `graph`'s messages, numbered in order of first appearance.
    pub(super) fn of(graph: &Graph<'_>, connections: &Connections) -> Kinds {
        let groups = SizeGroups::of(graph, connections);
        let mut numbers: foldhash::HashMap<(KindPair, u32), Kind> = Default::default();
        let mut first_of_pair: foldhash::HashMap<KindPair, Kind> = Default::default();
        let mut pairs: Vec<KindPair> = Vec::new();
        let mut of_pair: Vec<Kind> = Vec::new();
        let of = (0..graph.messages.len() as u32)
            .map(|i| {
                let pair = graph.kind_pair(i);
                let group = groups.group(graph, connections, i);
                if let Some(&kind) = numbers.get(&(pair, group)) {
                    return kind;
                }
                let kind = pairs.len() as Kind;
                pairs.push(pair);
                of_pair.push(*first_of_pair.entry(pair).or_insert(kind));
                numbers.insert((pair, group), kind);
                kind
            })
            .collect();
        Kinds { of, pairs, of_pair }
    }

    /// Message `i`'s kind.
    pub(super) fn of_message(&self, i: usize) -> Kind {
        self.of[i]
    }

    /// Every message's kind.
    pub(super) fn by_message(&self) -> &[Kind] {
        &self.of
    }

    /// Frees the kinds by message (the pairs stay): what follows weighing needs only
    /// the pairs, and at scale the rest is room for the largest tables.
    pub(super) fn forget_messages(&mut self) {
        self.of = Vec::new();
    }
}
