//! A map kept as a vector sorted by key, holding its first entry in place. A request
//! carries a handful of bags (one per query and packing variable) and a bag a segment or
//! two: a tree map would allocate a node for each, and make PACK into a fresh bag, or a
//! copy of a request's bags, cost an allocation per map.

use smallvec::SmallVec;

/// Entries sorted by key, each key once.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SmallMap<K, V>(SmallVec<[(K, V); 1]>);

impl<K, V> Default for SmallMap<K, V> {
    fn default() -> Self {
        SmallMap(SmallVec::new())
    }
}

impl<K: Ord + Copy, V> SmallMap<K, V> {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    fn find(&self, key: &K) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.cmp(key))
    }

    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }

    pub(crate) fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        self.find(key).ok().map(|i| &mut self.0[i].1)
    }

    /// The value of `key`, made by `make` when there is none.
    pub(crate) fn get_or_insert_with(&mut self, key: K, make: impl FnOnce() -> V) -> &mut V {
        let i = match self.find(&key) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (key, make()));
                i
            }
        };
        &mut self.0[i].1
    }

    /// Puts `value` under `key`, giving back the value it replaces.
    pub(crate) fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    /// The entries in key order.
    pub(crate) fn iter(&self) -> <&Self as IntoIterator>::IntoIter {
        self.into_iter()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.0.iter().map(|(_, v)| v)
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.0.iter_mut().map(|(_, v)| v)
    }
}

impl<K: Ord + Copy, V> FromIterator<(K, V)> for SmallMap<K, V> {
    /// Entries in any order; of a key given twice, the last stands.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        let mut map = SmallMap::default();
        for (k, v) in entries {
            map.insert(k, v);
        }
        map
    }
}

impl<'a, K, V> IntoIterator for &'a SmallMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stay_sorted_and_unique() {
        let mut m: SmallMap<(u32, u16), &str> = SmallMap::default();
        for (k, v) in [((3, 0), "a"), ((1, 2), "b"), ((1, 0), "c"), ((2, 0), "d")] {
            assert!(m.insert(k, v).is_none());
        }
        assert_eq!(m.insert((1, 2), "e"), Some("b"));
        m.get_or_insert_with((0, 9), || "f");
        m.get_or_insert_with((2, 0), || unreachable!("key (2, 0) is there"));
        let keys: Vec<(u32, u16)> = m.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, [(0, 9), (1, 0), (1, 2), (2, 0), (3, 0)]);
        assert_eq!(m.len(), 5);
        assert!(m.get(&(1, 1)).is_none() && m.get(&(1, 2)) == Some(&"e"));
        let collected: SmallMap<u64, u8> = [(5, 1), (2, 2), (5, 3)].into_iter().collect();
        assert_eq!(
            collected.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(),
            [(2, 2), (5, 3)]
        );
    }
}
