//! Which listed node holds which shard, learned from the cluster's own description, so
//! that a trace's reads go to the one shard that holds it and a bulk scan streams from
//! every shard at once. This is ClickHouse's own routing (the `Distributed` table's
//! selector) done in the client; it works on every version, 18.16 included, where
//! `optimize_skip_unused_shards` does not exist.
//!
//! At open, `system.clusters` gives the shards and their weights, and each listed node says
//! which shard it is (`is_local`). When every shard has a listed node, the client selects
//! as the `Distributed` engine does (the key modulo the total weight, each shard as many
//! slots as its weight): trace by id asks only the shard that holds the trace (its local
//! table, by primary key), and the bulk scan opens one stream per shard. Otherwise (a shard
//! not listed, a node down at open, or a `span_rows` whose `engine_full` shows another
//! sharding key, as an older build made it) reads go through the `Distributed` table.
//! Search and its summaries always use the `Distributed` tables, which already ask every
//! shard at once.

use causeway_model::TraceId;
use causeway_store::StoreError;

use crate::http::Client;
use crate::literals::quote;
use crate::rowbinary::RowReader;
use crate::schema::SHARDING_KEY;

/// The cluster's shards and the nodes of the store URL that hold each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardMap {
    /// For each shard in the cluster's order, the listed nodes that are its replicas.
    nodes: Vec<Vec<String>>,
    /// The shard of each slot: the sharding key modulo the total weight picks a slot,
    /// each shard having as many slots as its weight (as the `Distributed` engine does).
    slots: Vec<usize>,
}

impl ShardMap {
    /// Learns the map of `cluster`; `None` when a shard has no node in the store URL, a
    /// listed node did not answer, or the span table is sharded by another key than the
    /// one the map computes (reads then go through the `Distributed` table).
    pub fn learn(client: &Client, cluster: &str) -> Result<Option<ShardMap>, StoreError> {
        let answer = client.run(&format!(
            "SELECT engine_full FROM system.tables WHERE database = {} \
             AND name = 'span_rows' FORMAT RowBinary",
            quote(&client.endpoint().database)
        ))?;
        let engine = RowReader::new(&answer[..])
            .text("engine_full")
            .map_err(bad_answer)?;
        if !engine.contains(SHARDING_KEY) {
            tracing::warn!(
                %engine,
                "not routing reads by shard: the span table is sharded by another key \
                 (made by an earlier build); reads go through the Distributed table"
            );
            return Ok(None);
        }
        let answer = client.run(&format!(
            "SELECT toUInt64(shard_num), toUInt64(any(shard_weight)) FROM system.clusters \
             WHERE cluster = {} GROUP BY shard_num ORDER BY shard_num FORMAT RowBinary",
            quote(cluster)
        ))?;
        let mut shards = Vec::new();
        let mut rows = RowReader::new(&answer[..]);
        while !rows.at_end().map_err(bad_answer)? {
            let number = rows.u64("shard_num").map_err(bad_answer)?;
            let weight = rows.u64("shard_weight").map_err(bad_answer)?;
            shards.push((number, weight));
        }
        let mut nodes = vec![Vec::new(); shards.len()];
        for node in &client.endpoint().nodes {
            let answer = match client.run_on(
                node,
                &format!(
                    "SELECT toUInt64(shard_num) FROM system.clusters \
                     WHERE cluster = {} AND is_local FORMAT RowBinary",
                    quote(cluster)
                ),
            ) {
                Ok(answer) => answer,
                Err(e) => {
                    tracing::warn!(%node, error = %e, "not routing reads by shard: a node did not answer");
                    return Ok(None);
                }
            };
            let mut rows = RowReader::new(&answer[..]);
            while !rows.at_end().map_err(bad_answer)? {
                let number = rows.u64("shard_num").map_err(bad_answer)?;
                if let Some(i) = shards.iter().position(|&(n, _)| n == number) {
                    nodes[i].push(node.clone());
                }
            }
        }
        if nodes.iter().any(Vec::is_empty) {
            tracing::info!(
                cluster,
                "not routing reads by shard: a shard has no node in the store URL"
            );
            return Ok(None);
        }
        let weights: Vec<u64> = shards.iter().map(|&(_, w)| w).collect();
        Ok(ShardMap::new(nodes, &weights))
    }

    /// The map of shards with `nodes` and `weights`, in the cluster's order; `None` when
    /// no shard has weight (or the weights are implausibly large).
    fn new(nodes: Vec<Vec<String>>, weights: &[u64]) -> Option<ShardMap> {
        let total: u64 = weights.iter().sum();
        if total == 0 || total > 1 << 16 {
            return None;
        }
        let slots = weights
            .iter()
            .enumerate()
            .flat_map(|(shard, &w)| std::iter::repeat_n(shard, w as usize))
            .collect();
        Some(ShardMap { nodes, slots })
    }

    /// The shard that holds `trace`'s spans.
    pub fn shard_of(&self, trace: TraceId) -> usize {
        let id = trace.get().to_be_bytes();
        let mut low = [0u8; 8];
        low.copy_from_slice(&id[8..]);
        let key = u64::from_le_bytes(low);
        self.slots[(key % self.slots.len() as u64) as usize]
    }

    /// The listed nodes of shard `i`.
    pub fn nodes(&self, shard: usize) -> &[String] {
        &self.nodes[shard]
    }

    /// Every shard's nodes, in the cluster's order.
    pub fn shards(&self) -> impl Iterator<Item = &[String]> {
        self.nodes.iter().map(Vec::as_slice)
    }
}

fn bad_answer(e: std::io::Error) -> StoreError {
    StoreError::Remote {
        node: "(cluster)".into(),
        reason: format!("reading the cluster's description: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(weights: &[u64]) -> ShardMap {
        let nodes = (0..weights.len())
            .map(|i| vec![format!("n{i}:8123")])
            .collect();
        ShardMap::new(nodes, weights).unwrap()
    }

    fn id_with_low_bytes(low: u64) -> TraceId {
        TraceId::new((0xdead_beef_u128 << 64) | u128::from(u64::from_le_bytes(low.to_be_bytes())))
            .unwrap()
    }

    #[test]
    fn the_low_half_of_the_id_read_little_endian_picks_the_slot() {
        let m = map(&[1, 1, 1]);
        // Bytes 8..16 of the id, read little-endian, are the key.
        assert_eq!(m.shard_of(id_with_low_bytes(7)), 1);
        assert_eq!(m.shard_of(id_with_low_bytes(9)), 0);
        assert_eq!(m.shard_of(id_with_low_bytes(11)), 2);
    }

    #[test]
    fn a_heavier_shard_takes_more_slots_in_order() {
        let m = map(&[1, 3]);
        let shards: Vec<usize> = (0..8).map(|k| m.shard_of(id_with_low_bytes(k))).collect();
        assert_eq!(shards, [0, 1, 1, 1, 0, 1, 1, 1]);
        assert!(ShardMap::new(vec![vec![]], &[0]).is_none());
    }
}
