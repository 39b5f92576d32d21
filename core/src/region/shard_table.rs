//! The shards a region hosts, by shard id ([`ByShard`]: routing looks a shard up on every
//! message), each boxed so that a slot is one pointer; iteration is in id order.

use crate::id::ShardId;
use crate::region::by_shard::ByShard;
use crate::region::shard::Shard;

#[derive(Debug, Default)]
pub(crate) struct ShardTable {
    slots: ByShard<Box<Shard>>,
}

impl ShardTable {
    pub(crate) fn get(&self, id: &ShardId) -> Option<&Shard> {
        self.slots.get(id).map(|shard| &**shard)
    }

    pub(crate) fn get_mut(&mut self, id: &ShardId) -> Option<&mut Shard> {
        self.slots.get_mut(id).map(|shard| &mut **shard)
    }

    pub(crate) fn contains_key(&self, id: &ShardId) -> bool {
        self.get(id).is_some()
    }

    pub(crate) fn insert(&mut self, id: ShardId, shard: Shard) {
        self.slots.insert(id, Box::new(shard));
    }

    pub(crate) fn remove(&mut self, id: &ShardId) -> Option<Shard> {
        self.slots.remove(id).map(|shard| *shard)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Hosted shard ids, ascending.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &ShardId> + '_ {
        self.iter().map(|(id, _)| id)
    }

    /// Hosted shards, by ascending id.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut Shard> + '_ {
        self.slots.values_mut().map(|shard| &mut **shard)
    }

    /// Hosted shards with their ids, by ascending id.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&ShardId, &Shard)> + '_ {
        self.slots.values().map(|shard| (shard.id_ref(), &**shard))
    }

    /// Whether the table's count matches the shards it holds.
    pub(crate) fn count_is_exact(&self) -> bool {
        self.slots.count_is_exact()
    }

    pub(crate) fn clear(&mut self) {
        self.slots.clear();
    }
}

impl std::ops::Index<&ShardId> for ShardTable {
    type Output = Shard;

    fn index(&self, id: &ShardId) -> &Shard {
        self.get(id).expect("a hosted shard")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::id::EntityType;
    use crate::id::Epoch;
    use crate::region::shard::ShardSettings;
    use crate::time::Instant;

    fn shard(id: u32) -> Shard {
        let settings = ShardSettings {
            stop_timeout: Duration::from_secs(10),
            handoff_stop_timeout: Duration::from_secs(55),
            idle_after: None,
            limit_policy: None,
        };
        Shard::new(
            (ShardId(id), Epoch(0)),
            EntityType::new("t"),
            settings,
            Instant::ZERO,
        )
    }

    #[test]
    fn holds_shards_by_id_and_lists_them_in_id_order() {
        let mut table = ShardTable::default();
        assert!(table.is_empty());
        for id in [7, 2, 40] {
            table.insert(ShardId(id), shard(id));
        }
        table.insert(ShardId(2), shard(2));
        let ids: Vec<u32> = table.keys().map(|s| s.0).collect();
        assert_eq!(ids, vec![2, 7, 40]);
        assert!(table.contains_key(&ShardId(40)));
        assert!(table.get(&ShardId(3)).is_none());
        assert!(
            table.get(&ShardId(1_000)).is_none(),
            "beyond the table is absent"
        );
        assert_eq!(table[&ShardId(7)].id_ref(), &ShardId(7));
        assert_eq!(
            table.remove(&ShardId(7)).map(|s| *s.id_ref()),
            Some(ShardId(7))
        );
        assert!(table.remove(&ShardId(7)).is_none());
        assert_eq!(table.values_mut().count(), 2);
        table.remove(&ShardId(2));
        table.remove(&ShardId(40));
        assert!(
            table.is_empty(),
            "the count follows inserts, replacements and removals"
        );
        table.insert(ShardId(1), shard(1));
        table.clear();
        assert!(table.is_empty() && table.get(&ShardId(1)).is_none());
    }
}
