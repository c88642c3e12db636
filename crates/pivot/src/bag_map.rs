//! The bags of a request by key: a vector sorted by key, holding its first bag in place.
//! A request carries a handful of bags (one per query and packing variable), and most
//! requests start their baggage with a single pack: a map that allocates for that pack
//! would make PACK cost an allocation on every request.

use smallvec::SmallVec;

use crate::bag::{Bag, BagKey};

/// Bags sorted by key, each key once.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct BagMap(SmallVec<[(BagKey, Bag); 1]>);

impl BagMap {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    fn find(&self, key: &BagKey) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.cmp(key))
    }

    pub(crate) fn get(&self, key: &BagKey) -> Option<&Bag> {
        self.find(key).ok().map(|i| &self.0[i].1)
    }

    pub(crate) fn get_mut(&mut self, key: &BagKey) -> Option<&mut Bag> {
        self.find(key).ok().map(|i| &mut self.0[i].1)
    }

    /// The bag of `key`, made by `make` when there is none.
    pub(crate) fn get_or_insert_with(
        &mut self,
        key: BagKey,
        make: impl FnOnce() -> Bag,
    ) -> &mut Bag {
        let i = match self.find(&key) {
            Ok(i) => i,
            Err(i) => {
                self.0.insert(i, (key, make()));
                i
            }
        };
        &mut self.0[i].1
    }

    /// Puts `bag` under `key`, giving back the bag it replaces.
    pub(crate) fn insert(&mut self, key: BagKey, bag: Bag) -> Option<Bag> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, bag)),
            Err(i) => {
                self.0.insert(i, (key, bag));
                None
            }
        }
    }

    /// The bags in key order.
    pub(crate) fn iter(&self) -> <&BagMap as IntoIterator>::IntoIter {
        self.into_iter()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Bag> {
        self.0.iter().map(|(_, b)| b)
    }

    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut Bag> {
        self.0.iter_mut().map(|(_, b)| b)
    }
}

impl<'a> IntoIterator for &'a BagMap {
    type Item = (&'a BagKey, &'a Bag);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (BagKey, Bag)>,
        fn(&'a (BagKey, Bag)) -> (&'a BagKey, &'a Bag),
    >;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, b)| (k, b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bag::Grouped;

    #[test]
    fn keys_stay_sorted_and_unique() {
        let key = |query, bag| BagKey { query, bag };
        let mut m = BagMap::default();
        for (q, b) in [(3, 0), (1, 2), (1, 0), (2, 0)] {
            assert!(m
                .insert(key(q, b), Bag::Grouped(Grouped::default()))
                .is_none());
        }
        assert!(m
            .insert(key(1, 2), Bag::Grouped(Grouped::default()))
            .is_some());
        m.get_or_insert_with(key(0, 9), || Bag::Grouped(Grouped::default()));
        m.get_or_insert_with(key(2, 0), || unreachable!("key (2, 0) is there"));
        let keys: Vec<(u32, u16)> = m.iter().map(|(k, _)| (k.query, k.bag)).collect();
        assert_eq!(keys, [(0, 9), (1, 0), (1, 2), (2, 0), (3, 0)]);
        assert_eq!(m.len(), 5);
        assert!(m.get(&key(1, 1)).is_none() && m.get(&key(1, 2)).is_some());
    }
}
