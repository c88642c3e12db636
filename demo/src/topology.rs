//! The demo's roles and where each one listens.

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

/// One process of the demo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// Takes the shop's requests and fans out to the mid tier.
    Frontend,
    /// Product pages: cache, then storage through the metadata service.
    Catalog,
    /// Recommendations: cache, else scoring.
    Recommend,
    /// Orders: a quorum write to the storage replicas, then a message to the queue.
    Orders,
    /// An in-memory cache with expiring entries.
    Cache,
    /// Which replicas hold a block (gRPC).
    Metadata,
    /// Storage replica 1, 2 or 3.
    Storage(u8),
    /// A queue and the worker that consumes it.
    Queue,
}

impl Role {
    /// Every role, one process each.
    pub const ALL: [Role; 10] = [
        Role::Frontend,
        Role::Catalog,
        Role::Recommend,
        Role::Orders,
        Role::Cache,
        Role::Metadata,
        Role::Storage(1),
        Role::Storage(2),
        Role::Storage(3),
        Role::Queue,
    ];

    /// The service name on its spans (and its name on the command line).
    pub fn service(self) -> &'static str {
        match self {
            Role::Frontend => "frontend",
            Role::Catalog => "catalog",
            Role::Recommend => "recommend",
            Role::Orders => "orders",
            Role::Cache => "cache",
            Role::Metadata => "metadata",
            Role::Storage(1) => "storage-1",
            Role::Storage(2) => "storage-2",
            Role::Storage(_) => "storage-3",
            Role::Queue => "queue",
        }
    }

    /// The host it pretends to run on, so that the traces look like a cluster.
    pub fn host(self) -> &'static str {
        match self {
            Role::Frontend => "web-1",
            Role::Catalog | Role::Recommend => "app-1",
            Role::Orders => "app-2",
            Role::Cache => "cache-1",
            Role::Metadata => "meta-1",
            Role::Storage(1) => "disk-1",
            Role::Storage(2) => "disk-2",
            Role::Storage(_) => "disk-3",
            Role::Queue => "mq-1",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.service())
    }
}

/// A role name, address or topology that could not be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TopologyError {
    /// Not one of [`Role::ALL`].
    #[error("unknown demo role {0:?}")]
    UnknownRole(String),
    /// An entry that is not `role=host:port`.
    #[error("topology entry {entry:?}: {reason}")]
    BadEntry {
        /// The entry as given.
        entry: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A role the topology does not place.
    #[error("the topology has no address for {0}")]
    Missing(Role),
}

impl FromStr for Role {
    type Err = TopologyError;
    fn from_str(s: &str) -> Result<Role, TopologyError> {
        Role::ALL
            .into_iter()
            .find(|r| r.service() == s)
            .ok_or_else(|| TopologyError::UnknownRole(s.to_owned()))
    }
}

/// Where every role listens: `frontend=127.0.0.1:41000,catalog=...` in text form.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Topology {
    addrs: BTreeMap<Role, SocketAddr>,
}

impl Topology {
    /// Places `role` at `addr`.
    pub fn insert(&mut self, role: Role, addr: SocketAddr) {
        self.addrs.insert(role, addr);
    }

    /// The address of `role`.
    pub fn addr(&self, role: Role) -> Result<SocketAddr, TopologyError> {
        self.addrs
            .get(&role)
            .copied()
            .ok_or(TopologyError::Missing(role))
    }

    /// Every placed role and its address.
    pub fn iter(&self) -> impl Iterator<Item = (Role, SocketAddr)> + '_ {
        self.addrs.iter().map(|(r, a)| (*r, *a))
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (role, addr)) in self.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{role}={addr}")?;
        }
        Ok(())
    }
}

impl FromStr for Topology {
    type Err = TopologyError;
    fn from_str(s: &str) -> Result<Topology, TopologyError> {
        let mut t = Topology::default();
        for entry in s.split(',').filter(|e| !e.trim().is_empty()) {
            let bad = |reason: String| TopologyError::BadEntry {
                entry: entry.to_owned(),
                reason,
            };
            let (role, addr) = entry
                .split_once('=')
                .ok_or_else(|| bad("expected role=host:port".into()))?;
            let addr = addr.trim().parse().map_err(|e| bad(format!("{e}")))?;
            t.insert(role.trim().parse()?, addr);
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_topology_reads_back_from_its_text() {
        let mut t = Topology::default();
        for (i, role) in Role::ALL.into_iter().enumerate() {
            t.insert(role, SocketAddr::from(([127, 0, 0, 1], 40000 + i as u16)));
        }
        let text = t.to_string();
        assert_eq!(text.parse::<Topology>(), Ok(t));
        assert!(text.starts_with("frontend=127.0.0.1:40000,catalog="));
    }

    #[test]
    fn bad_entries_are_named() {
        assert_eq!(
            "frontend=nowhere"
                .parse::<Topology>()
                .unwrap_err()
                .to_string(),
            "topology entry \"frontend=nowhere\": invalid socket address syntax"
        );
        assert_eq!(
            "web=127.0.0.1:1".parse::<Topology>(),
            Err(TopologyError::UnknownRole("web".into()))
        );
        assert_eq!(
            Topology::default().addr(Role::Cache),
            Err(TopologyError::Missing(Role::Cache))
        );
    }
}
