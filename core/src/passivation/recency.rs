//! Entities in order of their latest access.

use std::collections::BTreeMap;

use crate::id::EntityId;

/// No slot: the end of the list.
const NIL: u32 = u32::MAX;

/// Entities ordered by their latest access, the oldest first: a doubly linked list in a slab,
/// indexed by id, so that an access costs one ordered-map lookup and a few slot writes.
#[derive(Debug)]
pub(super) struct Recency {
    /// Each entity's slot.
    index: BTreeMap<EntityId, u32>,
    slots: Vec<Slot>,
    /// Slots of removed entities, reused first.
    free: Vec<u32>,
    /// The oldest entity's slot, and the newest's.
    oldest: u32,
    newest: u32,
}

#[derive(Debug)]
struct Slot {
    id: Option<EntityId>,
    /// The next older entity's slot, and the next newer one's.
    older: u32,
    newer: u32,
}

impl Default for Recency {
    fn default() -> Self {
        Self {
            index: BTreeMap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            oldest: NIL,
            newest: NIL,
        }
    }
}

impl Recency {
    pub(super) fn len(&self) -> usize {
        self.index.len()
    }

    pub(super) fn contains(&self, id: &EntityId) -> bool {
        self.index.contains_key(id)
    }

    /// `id` accessed now, if listed (then it becomes the newest): whether it was.
    pub(super) fn touch_existing(&mut self, id: &EntityId) -> bool {
        let Some(&slot) = self.index.get(id) else {
            return false;
        };
        self.unlink(slot);
        self.link_newest(slot);
        true
    }

    /// Adds `id` as the newest (it must not be present).
    pub(super) fn push_newest(&mut self, id: EntityId) {
        debug_assert!(!self.contains(&id), "{id} is listed already");
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot as usize].id = Some(id.clone());
                slot
            }
            None => {
                let slot = u32::try_from(self.slots.len()).expect("fewer than 2^32 entities");
                self.slots.push(Slot {
                    id: Some(id.clone()),
                    older: NIL,
                    newer: NIL,
                });
                slot
            }
        };
        self.index.insert(id, slot);
        self.link_newest(slot);
    }

    /// Takes `id` out of the list: whether it was listed.
    pub(super) fn remove(&mut self, id: &EntityId) -> bool {
        let Some(slot) = self.index.remove(id) else {
            return false;
        };
        self.release(slot);
        true
    }

    /// The entity accessed longest ago, left in place.
    pub(super) fn oldest(&self) -> Option<&EntityId> {
        self.slots.get(self.oldest as usize)?.id.as_ref()
    }

    pub(super) fn pop_oldest(&mut self) -> Option<EntityId> {
        self.pop(self.oldest)
    }

    pub(super) fn pop_newest(&mut self) -> Option<EntityId> {
        self.pop(self.newest)
    }

    /// Takes the entity in `slot` (`NIL`: none) out of the list and the index.
    fn pop(&mut self, slot: u32) -> Option<EntityId> {
        let id = self.slots.get_mut(slot as usize)?.id.clone()?;
        self.index.remove(&id);
        self.release(slot);
        Some(id)
    }

    /// Unlinks `slot` and keeps it for reuse.
    fn release(&mut self, slot: u32) {
        self.unlink(slot);
        self.slots[slot as usize].id = None;
        self.free.push(slot);
    }

    fn unlink(&mut self, slot: u32) {
        let Slot { older, newer, .. } = self.slots[slot as usize];
        match older {
            NIL => self.oldest = newer,
            older => self.slots[older as usize].newer = newer,
        }
        match newer {
            NIL => self.newest = older,
            newer => self.slots[newer as usize].older = older,
        }
    }

    fn link_newest(&mut self, slot: u32) {
        let previous = self.newest;
        let entry = &mut self.slots[slot as usize];
        (entry.older, entry.newer) = (previous, NIL);
        match previous {
            NIL => self.oldest = slot,
            previous => self.slots[previous as usize].newer = slot,
        }
        self.newest = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(r: &Recency) -> Vec<String> {
        let mut order = Vec::new();
        let mut slot = r.oldest;
        while slot != NIL {
            let entry = &r.slots[slot as usize];
            order.push(
                entry
                    .id
                    .as_ref()
                    .expect("a listed slot")
                    .as_str()
                    .to_owned(),
            );
            slot = entry.newer;
        }
        order
    }

    #[test]
    fn the_list_keeps_access_order_through_touches_removals_and_reused_slots() {
        let mut r = Recency::default();
        for name in ["a", "b", "c", "d"] {
            r.push_newest(EntityId::new(name));
        }
        assert!(r.touch_existing(&EntityId::new("b")));
        assert!(!r.touch_existing(&EntityId::new("z")));
        r.remove(&EntityId::new("c"));
        assert_eq!(ids(&r), ["a", "d", "b"]);
        assert_eq!(r.pop_oldest().as_ref().map(EntityId::as_str), Some("a"));
        assert_eq!(r.pop_newest().as_ref().map(EntityId::as_str), Some("b"));
        r.push_newest(EntityId::new("e"));
        assert!(r.touch_existing(&EntityId::new("d")));
        assert_eq!(ids(&r), ["e", "d"]);
        assert_eq!(r.oldest().map(EntityId::as_str), Some("e"));
        assert_eq!((r.len(), r.slots.len()), (2, 4), "freed slots are reused");
        r.remove(&EntityId::new("e"));
        r.remove(&EntityId::new("d"));
        assert_eq!((r.pop_oldest(), r.oldest(), r.len()), (None, None, 0));
    }
}
