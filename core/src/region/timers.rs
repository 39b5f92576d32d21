//! The next deadline of every hosted shard, indexed by time, so the region answers
//! `poll_timeout` and finds due shards without visiting every shard on every input.

use std::collections::{BTreeMap, BTreeSet};

use crate::id::ShardId;
use crate::time::Instant;

#[derive(Debug, Default)]
pub(crate) struct ShardTimers {
    by_time: BTreeSet<(Instant, ShardId)>,
    of: BTreeMap<ShardId, Instant>,
}

impl ShardTimers {
    /// Records `shard`'s next deadline (`None`: it has none, or it is gone).
    pub(crate) fn set(&mut self, shard: ShardId, at: Option<Instant>) {
        if self.of.get(&shard).copied() == at {
            return;
        }
        if let Some(old) = self.of.remove(&shard) {
            self.by_time.remove(&(old, shard));
        }
        if let Some(at) = at {
            self.of.insert(shard, at);
            self.by_time.insert((at, shard));
        }
    }

    pub(crate) fn next(&self) -> Option<Instant> {
        self.by_time.first().map(|(at, _)| *at)
    }

    /// Shards whose deadline is at or before `now`.
    pub(crate) fn due(&self, now: Instant) -> Vec<ShardId> {
        self.by_time
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, s)| *s)
            .collect()
    }

    pub(crate) fn clear(&mut self) {
        self.by_time.clear();
        self.of.clear();
    }
}
