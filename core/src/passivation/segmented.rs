//! Segmented least recently used: a probationary and a protected segment.

use super::recency::Recency;
use crate::id::EntityId;

/// Two LRU segments: entities enter probationary; a second access promotes them to protected,
/// which holds at most its share of the limit and demotes its oldest back when it overflows.
#[derive(Debug)]
pub(super) struct Segmented {
    protected_percent: u8,
    probationary: Recency,
    protected: Recency,
}

impl Segmented {
    pub(super) fn new(protected_percent: u8) -> Self {
        Self {
            protected_percent: protected_percent.min(100),
            probationary: Recency::default(),
            protected: Recency::default(),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.probationary.len() + self.protected.len()
    }

    pub(super) fn contains(&self, id: &EntityId) -> bool {
        self.probationary.contains(id) || self.protected.contains(id)
    }

    /// `id` accessed, if active (then promoted, or kept, in protected): whether it was.
    pub(super) fn touch_existing(&mut self, id: &EntityId, limit: usize) -> bool {
        if self.protected.touch_existing(id) {
            return true;
        }
        if !self.probationary.remove(id) {
            return false;
        }
        self.protected.push_newest(id.clone());
        self.fit(limit);
        true
    }

    /// Demotes protected entities beyond its share of `limit` to probationary's newest end.
    pub(super) fn fit(&mut self, limit: usize) {
        let capacity = limit * usize::from(self.protected_percent) / 100;
        while self.protected.len() > capacity {
            match self.protected.pop_oldest() {
                Some(demoted) => self.probationary.push_newest(demoted),
                None => break,
            }
        }
    }

    pub(super) fn remove(&mut self, id: &EntityId) {
        self.probationary.remove(id);
        self.protected.remove(id);
    }

    /// Adds `id` (not active) as probationary's newest.
    pub(super) fn admit(&mut self, id: EntityId) {
        self.probationary.push_newest(id);
    }

    /// The entity [`Segmented::evict`] would take, left in place.
    pub(super) fn next_victim(&self) -> Option<&EntityId> {
        self.probationary
            .oldest()
            .or_else(|| self.protected.oldest())
    }

    /// Probationary's oldest, or protected's when probationary is empty.
    pub(super) fn evict(&mut self) -> Option<EntityId> {
        self.probationary
            .pop_oldest()
            .or_else(|| self.protected.pop_oldest())
    }
}
