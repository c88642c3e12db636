//! The conformance suite the embedded store passes, run on the ClickHouse store over a
//! two-shard cluster. Its inserts are synchronous, so a span is settled once appended;
//! reopening opens the same database again.

use std::sync::{Arc, Mutex, Weak};

use causeway_clickhouse::local_cluster::Cluster;
use causeway_clickhouse::{schema, ClickHouseOptions, ClickHouseStore, Endpoint};
use causeway_store::conformance::Backend;

/// One cluster for the checks that run at the same time: each takes its own database, and
/// the last to finish stops the servers.
fn shared_cluster() -> Arc<Cluster> {
    static SHARED: Mutex<Weak<Cluster>> = Mutex::new(Weak::new());
    let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(cluster) = shared.upgrade() {
        return cluster;
    }
    let cluster = Arc::new(Cluster::start(2));
    *shared = Arc::downgrade(&cluster);
    cluster
}

struct OnCluster(Arc<Cluster>);

fn endpoint(cluster: &Cluster, name: &str) -> Endpoint {
    Endpoint::parse(&cluster.url(&format!("suite_{}", name.replace('-', "_")))).unwrap()
}

impl Backend for OnCluster {
    type Store = ClickHouseStore;
    fn open(&self, name: &str) -> ClickHouseStore {
        let endpoint = endpoint(&self.0, name);
        let store = ClickHouseStore::open(endpoint.clone(), ClickHouseOptions::default()).unwrap();
        // A database left by an earlier run that stopped midway starts empty.
        schema::drop_database(store.client()).unwrap();
        ClickHouseStore::open(endpoint, ClickHouseOptions::default()).unwrap()
    }
    fn settle(&self, _: &ClickHouseStore) {}
    fn reopen(&self, store: ClickHouseStore, name: &str) -> ClickHouseStore {
        drop(store);
        ClickHouseStore::open(endpoint(&self.0, name), ClickHouseOptions::default()).unwrap()
    }
    fn remove(&self, store: ClickHouseStore, _: &str) {
        schema::drop_database(store.client()).unwrap();
    }
}

causeway_store::conformance_tests!(OnCluster(shared_cluster()));
