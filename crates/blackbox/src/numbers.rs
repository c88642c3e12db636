//! Names as numbers: linking indexes its tables by node and by endpoint, and millions of
//! messages name a few million endpoints. Nodes and endpoints are numbered once, for the
//! fixed endpoints (`crate::roles`) and for the connections.

use foldhash::HashMap;

use crate::reconcile::{Message, Name};

/// Each message's sender and receiver (nodes, or endpoints) as numbers, and the names
/// by number (in order of first appearance: senders first).
pub(crate) struct Numbered {
    pub(crate) src: Vec<u32>,
    pub(crate) dst: Vec<u32>,
    pub(crate) names: Vec<Name>,
}

impl Numbered {
    /// The numbers of the names `ends` gives each message: (sender's, receiver's).
    pub(crate) fn of(messages: &[Message], ends: impl Fn(&Message) -> (Name, Name)) -> Numbered {
        let mut numbers: HashMap<Name, u32> = HashMap::default();
        let mut names: Vec<Name> = Vec::new();
        let mut number = |name: Name| -> u32 {
            *numbers.entry(name).or_insert_with(|| {
                names.push(name);
                (names.len() - 1) as u32
            })
        };
        let src = messages.iter().map(|m| number(ends(m).0)).collect();
        let dst = messages.iter().map(|m| number(ends(m).1)).collect();
        Numbered { src, dst, names }
    }

    /// The messages' nodes.
    pub(crate) fn nodes(messages: &[Message]) -> Numbered {
        Numbered::of(messages, |m| (m.src, m.dst))
    }

    /// The messages' endpoints.
    pub(crate) fn endpoints(messages: &[Message]) -> Numbered {
        Numbered::of(messages, |m| (m.src_ep, m.dst_ep))
    }
}
