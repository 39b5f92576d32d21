//! Values kept per shard in a vector indexed by shard id: routing reads a region's hosted shard
//! and a shard's known home for every message, and an index reads one slot where a map's
//! search walked two or three tree nodes (each a cache miss in a busy process). Ids are below
//! the type's `number_of_shards` (the node refuses frames naming others), so a table grows to
//! at most that; iteration is in id order, as a `BTreeMap`'s.

use crate::id::ShardId;

/// Values by shard id.
#[derive(Debug)]
pub(crate) struct ByShard<V> {
    slots: Vec<Option<V>>,
    len: usize,
}

impl<V> Default for ByShard<V> {
    fn default() -> Self {
        Self {
            slots: Vec::new(),
            len: 0,
        }
    }
}

impl<V> ByShard<V> {
    /// The value for `shard`, if any.
    pub(crate) fn get(&self, shard: &ShardId) -> Option<&V> {
        self.slots.get(shard.0 as usize)?.as_ref()
    }

    /// The value for `shard`, if any.
    pub(crate) fn get_mut(&mut self, shard: &ShardId) -> Option<&mut V> {
        self.slots.get_mut(shard.0 as usize)?.as_mut()
    }

    /// Sets the value for `shard` (replacing any).
    pub(crate) fn insert(&mut self, shard: ShardId, value: V) {
        let index = shard.0 as usize;
        if index >= self.slots.len() {
            self.slots.resize_with(index + 1, || None);
        }
        if self.slots[index].replace(value).is_none() {
            self.len += 1;
        }
    }

    /// Takes the value for `shard` out, if any.
    pub(crate) fn remove(&mut self, shard: &ShardId) -> Option<V> {
        let value = self.slots.get_mut(shard.0 as usize)?.take()?;
        self.len -= 1;
        Some(value)
    }

    /// Whether no shard has a value.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the kept count matches the values held (the region's invariants check it).
    pub(crate) fn count_is_exact(&self) -> bool {
        self.len == self.values().count()
    }

    /// The values, by ascending shard id.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> + '_ {
        self.slots.iter().flatten()
    }

    /// The values, by ascending shard id.
    pub(crate) fn values_mut(&mut self) -> impl Iterator<Item = &mut V> + '_ {
        self.slots.iter_mut().flatten()
    }

    /// Keeps only the values `keep` accepts.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&V) -> bool) {
        for slot in &mut self.slots {
            if slot.as_ref().is_some_and(|value| !keep(value)) {
                *slot = None;
                self.len -= 1;
            }
        }
    }

    /// Drops every value.
    pub(crate) fn clear(&mut self) {
        self.slots.clear();
        self.len = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::MemberId;

    #[test]
    fn remembers_forgets_and_filters_values_by_shard() {
        let (a, b) = (MemberId::new(1, 1), MemberId::new(2, 1));
        let mut homes = ByShard::default();
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
        assert!(!homes.is_empty(), "the count follows retain");
        homes.remove(&ShardId(2));
        assert!(homes.is_empty(), "the count follows retain and removals");
        homes.insert(ShardId(2), b);
        homes.clear();
        assert_eq!(homes.values().count(), 0);
        assert_eq!(homes.get(&ShardId(2)), None);
        assert!(homes.is_empty());
    }
}
