//! Least frequently used, optionally with dynamic aging.

use std::collections::{BTreeMap, BTreeSet};

use crate::id::EntityId;

/// An entity's standing: how often it was accessed, its priority and its latest access.
#[derive(Clone, Copy, Debug)]
struct Standing {
    count: u64,
    priority: u64,
    tick: u64,
}

/// Entities by priority (lowest first), the least recently used first among equals.
#[derive(Debug)]
pub(super) struct Frequency {
    dynamic_aging: bool,
    /// With dynamic aging, the priority of the last victim.
    age: u64,
    standings: BTreeMap<EntityId, Standing>,
    order: BTreeSet<(u64, u64, EntityId)>,
    next_tick: u64,
}

impl Frequency {
    pub(super) fn new(dynamic_aging: bool) -> Self {
        Self {
            dynamic_aging,
            age: 0,
            standings: BTreeMap::new(),
            order: BTreeSet::new(),
            next_tick: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.standings.len()
    }

    pub(super) fn contains(&self, id: &EntityId) -> bool {
        self.standings.contains_key(id)
    }

    /// `id` accessed: its count grows by one; its priority is the count, plus the age with
    /// dynamic aging.
    pub(super) fn touch(&mut self, id: &EntityId) {
        if !self.touch_existing(id) {
            let standing = self.next_standing(1);
            self.order
                .insert((standing.priority, standing.tick, id.clone()));
            self.standings.insert(id.clone(), standing);
        }
    }

    /// `id` accessed, if active (then its count and priority grow): whether it was.
    pub(super) fn touch_existing(&mut self, id: &EntityId) -> bool {
        let Some(standing) = self.standings.get(id).copied() else {
            return false;
        };
        let next = self.next_standing(standing.count + 1);
        let mut key = (standing.priority, standing.tick, id.clone());
        self.order.remove(&key);
        (key.0, key.1) = (next.priority, next.tick);
        self.order.insert(key);
        self.standings.insert(id.clone(), next);
        true
    }

    /// The standing of an entity accessed now for the `count`th time.
    fn next_standing(&mut self, count: u64) -> Standing {
        let priority = if self.dynamic_aging {
            count + self.age
        } else {
            count
        };
        let tick = self.next_tick;
        self.next_tick += 1;
        Standing {
            count,
            priority,
            tick,
        }
    }

    pub(super) fn remove(&mut self, id: &EntityId) {
        if let Some(s) = self.standings.remove(id) {
            self.order.remove(&(s.priority, s.tick, id.clone()));
        }
    }

    /// The lowest priority, least recently used among equals; with dynamic aging, its
    /// priority becomes the age.
    pub(super) fn evict(&mut self) -> Option<EntityId> {
        let (priority, _, id) = self.order.pop_first()?;
        self.standings.remove(&id);
        if self.dynamic_aging {
            self.age = priority;
        }
        Some(id)
    }
}
