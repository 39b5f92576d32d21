//! Where a region believes each shard is hosted, in a table indexed by shard id: routing looks
//! a home up for every message to a shard this region does not host, and a map's search there
//! walked two or three tree nodes, each a cache miss in a busy process. Ids are below the
//! type's `number_of_shards` (the node refuses frames naming others), so the table grows to at
//! most that, one member id per slot.

use crate::id::{MemberId, ShardId};

/// Known shard homes by shard id.
#[derive(Debug, Default)]
pub(crate) struct HomeTable {
    slots: Vec<Option<MemberId>>,
}

impl HomeTable {
    /// Where `shard` is hosted, if known.
    pub(crate) fn get(&self, shard: &ShardId) -> Option<&MemberId> {
        self.slots.get(shard.0 as usize)?.as_ref()
    }

    /// Records that `shard` is hosted on `home`.
    pub(crate) fn insert(&mut self, shard: ShardId, home: MemberId) {
        let index = shard.0 as usize;
        if index >= self.slots.len() {
            self.slots.resize(index + 1, None);
        }
        self.slots[index] = Some(home);
    }

    /// Forgets where `shard` is hosted.
    pub(crate) fn remove(&mut self, shard: &ShardId) -> Option<MemberId> {
        self.slots.get_mut(shard.0 as usize)?.take()
    }

    /// The known homes, by ascending shard id.
    pub(crate) fn values(&self) -> impl Iterator<Item = &MemberId> + '_ {
        self.slots.iter().flatten()
    }

    /// Forgets every home.
    pub(crate) fn clear(&mut self) {
        self.slots.clear();
    }

    /// Keeps only the homes `keep` accepts.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&MemberId) -> bool) {
        for slot in &mut self.slots {
            if slot.as_ref().is_some_and(|home| !keep(home)) {
                *slot = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_forgets_and_filters_homes_by_shard() {
        let (a, b) = (MemberId::new(1, 1), MemberId::new(2, 1));
        let mut homes = HomeTable::default();
        assert_eq!(homes.get(&ShardId(5)), None, "beyond the table is unknown");
        homes.insert(ShardId(5), a);
        homes.insert(ShardId(2), b);
        homes.insert(ShardId(9), a);
        assert_eq!(homes.get(&ShardId(5)), Some(&a));
        assert_eq!(homes.get(&ShardId(2)), Some(&b));
        assert_eq!(homes.get(&ShardId(3)), None);
        homes.insert(ShardId(5), b);
        assert_eq!(
            homes.get(&ShardId(5)),
            Some(&b),
            "a newer home replaces the old"
        );
        assert_eq!(homes.remove(&ShardId(5)), Some(b));
        assert_eq!(homes.remove(&ShardId(5)), None);
        assert_eq!(homes.remove(&ShardId(1_000)), None);
        assert_eq!(homes.values().collect::<Vec<_>>(), [&b, &a], "by shard id");
        homes.retain(|home| *home != a);
        assert_eq!(homes.get(&ShardId(9)), None, "a's homes dropped");
        assert_eq!(homes.get(&ShardId(2)), Some(&b), "b's kept");
        homes.clear();
        assert_eq!(homes.values().count(), 0);
        assert_eq!(homes.get(&ShardId(2)), None);
    }
}
