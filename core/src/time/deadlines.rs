//! Deadlines keyed by id and indexed by time, so a machine answers `poll_timeout` and finds
//! what is due without visiting every key on every input (the region's shard timers, the
//! coordinator's unacknowledged allocations: both can hold 100,000 keys).

use std::collections::{BTreeMap, BTreeSet};

use crate::time::Instant;

/// One optional deadline per key.
#[derive(Debug)]
pub(crate) struct Deadlines<K> {
    by_time: BTreeSet<(Instant, K)>,
    of: BTreeMap<K, Instant>,
}

impl<K> Default for Deadlines<K> {
    fn default() -> Self {
        Self {
            by_time: BTreeSet::new(),
            of: BTreeMap::new(),
        }
    }
}

impl<K: Copy + Ord> Deadlines<K> {
    /// Records `key`'s deadline (`None`: it has none, or it is gone).
    pub(crate) fn set(&mut self, key: K, at: Option<Instant>) {
        if self.of.get(&key).copied() == at {
            return;
        }
        self.remove(key);
        if let Some(at) = at {
            self.of.insert(key, at);
            self.by_time.insert((at, key));
        }
    }

    /// Forgets `key`'s deadline, returning it.
    pub(crate) fn remove(&mut self, key: K) -> Option<Instant> {
        let old = self.of.remove(&key)?;
        self.by_time.remove(&(old, key));
        Some(old)
    }

    /// Whether `key` has a deadline.
    pub(crate) fn contains_key(&self, key: &K) -> bool {
        self.of.contains_key(key)
    }

    /// Every key with a deadline, in key order.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &K> + '_ {
        self.of.keys()
    }

    /// The earliest deadline.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.by_time.first().map(|(at, _)| *at)
    }

    /// Keys whose deadline is at or before `now`, earliest first.
    pub(crate) fn due(&self, now: Instant) -> Vec<K> {
        self.by_time
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, k)| *k)
            .collect()
    }

    /// Forgets every deadline.
    pub(crate) fn clear(&mut self) {
        self.by_time.clear();
        self.of.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Option<Instant> {
        Some(Instant::from_millis(ms))
    }

    #[test]
    fn next_and_due_follow_time_not_keys() {
        let mut d = Deadlines::default();
        d.set(3u32, at(10));
        d.set(1, at(30));
        d.set(2, at(20));
        assert_eq!(d.next(), at(10));
        assert_eq!(d.due(Instant::from_millis(20)), vec![3, 2]);
        assert_eq!(d.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3]);
    }

    #[test]
    fn moving_or_clearing_a_deadline_leaves_no_stale_entry() {
        let mut d = Deadlines::default();
        d.set(1u32, at(10));
        d.set(1, at(50));
        assert_eq!(d.next(), at(50), "the old deadline must be gone");
        assert!(d.due(Instant::from_millis(10)).is_empty());
        d.set(1, None);
        assert!(!d.contains_key(&1));
        assert_eq!(d.next(), None);
        d.set(2, at(5));
        assert_eq!(d.remove(2), at(5));
        assert_eq!(d.remove(2), None);
        d.set(3, at(7));
        d.clear();
        assert_eq!((d.next(), d.contains_key(&3)), (None, false));
    }
}
