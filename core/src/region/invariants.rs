//! The region's internal invariants, checked after every drain in debug and simulator builds
//! ([`crate::Node::check_invariants`]).

use crate::region::Region;

impl Region {
    /// The buffer budget in use equals the letters buffered (by the region, and by its shards
    /// for stopping entities and starts being written), and only hosted shards have timers.
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
        Ok(())
    }
}
