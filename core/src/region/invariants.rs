//! The region's internal invariants, checked after every drain in debug and simulator builds
//! ([`crate::Node::check_invariants`]).

use crate::id::ShardId;
use crate::region::{Lifecycle, Region};

impl Region {
    /// The buffer budget in use equals the letters buffered (by the region, and by its shards
    /// for stopping entities and starts being written); only hosted shards have timers or wait
    /// to start again after a stop; the region buffers nothing for a shard running here; its
    /// tables' counts are exact; no shard runs more entities than its share of the
    /// active-entity limit, and the shares add up to the limit; and it holds nothing once
    /// terminated.
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        let broken = |what: String| {
            Err(format!(
                "region {} of {}: {what}",
                self.me, self.entity_type
            ))
        };
        let in_shards: usize = self.shards.iter().map(|(_, s)| s.buffered_letters()).sum();
        let (used, buffered) = (self.budget.used(), self.buffers.letters() + in_shards);
        if used != buffered {
            return broken(format!(
                "the buffer budget holds {used} letters, the buffers {buffered}"
            ));
        }
        if let Some(shard) = self.timers.keys().find(|s| !self.shards.contains_key(s)) {
            return broken(format!("{shard} has a timer but is not hosted"));
        }
        // A shard's letters wait in the region only until it is hosted here (starting it
        // flushes them), and again once it hands off: a running shard gets them directly.
        let running = |s: &ShardId| self.shards.get(s).is_some_and(|h| !h.is_handing_off());
        if let Some(shard) = self.buffers.shards().iter().find(|s| running(s)) {
            return broken(format!(
                "{shard} runs here but the region buffers letters for it"
            ));
        }
        if let Some(shard) = self
            .start_after_stop
            .keys()
            .find(|s| !self.shards.contains_key(s))
        {
            return broken(format!(
                "{shard} waits to start after a stop but is not hosted"
            ));
        }
        if let Some(broke) = self.check_entity_limit() {
            return broken(broke);
        }
        if !self.shards.count_is_exact() || !self.homes.count_is_exact() {
            return broken("the shard table's or the homes' count is off".into());
        }
        // Downed or removed, the region let go of everything: its entities were stopped and
        // what it held came out as dead letters.
        let holds = !self.shards.is_empty() || !self.buffers.is_empty() || !self.homes.is_empty();
        if self.lifecycle == Lifecycle::Terminated && holds {
            return broken("it terminated but still hosts shards, letters or homes".into());
        }
        Ok(())
    }

    /// With an active-entity limit: each shard runs (not stopping) at most its share, and the
    /// shares add up to the region's limit (one at least per shard).
    fn check_entity_limit(&self) -> Option<String> {
        let limit = self.entity_limit()?;
        let mut shares = 0;
        for (id, shard) in self.shards.iter() {
            let Some(share) = shard.entity_limit() else {
                return Some(format!("{id} has no share of the active-entity limit"));
            };
            let active = shard.active_entity_count();
            if active > share {
                return Some(format!(
                    "{id} runs {active} entities over its share {share}"
                ));
            }
            shares += share;
        }
        let most = limit.max(self.shards.keys().count());
        (shares > most).then(|| format!("the shares add up to {shares}, over the limit {limit}"))
    }
}
