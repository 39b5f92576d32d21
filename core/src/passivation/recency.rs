//! Entities in order of their latest access.

use std::collections::BTreeMap;

use crate::id::EntityId;

/// Entities ordered by their latest access: a tick per access, the oldest first.
#[derive(Debug, Default)]
pub(super) struct Recency {
    by_tick: BTreeMap<u64, EntityId>,
    ticks: BTreeMap<EntityId, u64>,
    next_tick: u64,
}

impl Recency {
    pub(super) fn len(&self) -> usize {
        self.ticks.len()
    }

    pub(super) fn contains(&self, id: &EntityId) -> bool {
        self.ticks.contains_key(id)
    }

    /// `id` accessed now: it becomes the newest.
    pub(super) fn touch(&mut self, id: &EntityId) {
        self.remove(id);
        self.push_newest(id.clone());
    }

    /// Adds `id` as the newest (it must not be present).
    pub(super) fn push_newest(&mut self, id: EntityId) {
        let tick = self.next_tick;
        self.next_tick += 1;
        self.by_tick.insert(tick, id.clone());
        self.ticks.insert(id, tick);
    }

    pub(super) fn remove(&mut self, id: &EntityId) {
        if let Some(tick) = self.ticks.remove(id) {
            self.by_tick.remove(&tick);
        }
    }

    /// The entity accessed longest ago, left in place.
    pub(super) fn oldest(&self) -> Option<&EntityId> {
        self.by_tick.first_key_value().map(|(_, id)| id)
    }

    pub(super) fn pop_oldest(&mut self) -> Option<EntityId> {
        let (_, id) = self.by_tick.pop_first()?;
        self.ticks.remove(&id);
        Some(id)
    }

    pub(super) fn pop_newest(&mut self) -> Option<EntityId> {
        let (_, id) = self.by_tick.pop_last()?;
        self.ticks.remove(&id);
        Some(id)
    }
}
