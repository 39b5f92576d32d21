//! The coordinator's internal invariants, checked after every drain in debug and simulator
//! builds ([`crate::Node::check_invariants`]): the wire cannot show a table that disagrees with
//! itself, since the coordinator still answers.

use crate::coordinator::Coordinator;
use crate::id::ShardId;

impl Coordinator {
    /// The table (shard → region) and the regions' lists (region → shards) are one relation:
    /// every allocated shard is in its region's list once, no list holds a shard allocated
    /// elsewhere or not at all, and shards awaiting an acknowledgement or handed off are
    /// allocated.
    pub(crate) fn check_invariants(&self) -> Result<(), String> {
        let broken = |what: String| {
            Err(format!(
                "coordinator {} of {}: {what}",
                self.me, self.entity_type
            ))
        };
        // Listed shards as bits: every one set is allocated (checked below), so the highest
        // allocated shard bounds them. Checked often: no tree to build.
        let words = self
            .shards
            .keys()
            .next_back()
            .map_or(0, |s| s.0 as usize / 64 + 1);
        let mut listed = vec![0_u64; words];
        let mut count = 0;
        for (region, shards) in &self.regions {
            for shard in shards.iter() {
                let (word, bit) = (shard.0 as usize / 64, 1_u64 << (shard.0 % 64));
                if listed.get(word).is_some_and(|w| w & bit != 0) {
                    return broken(format!("{shard} is listed twice (again under {region})"));
                }
                let owner = self.shards.get(shard);
                if owner != Some(region) {
                    return broken(format!(
                        "{shard} is listed under {region}, allocated to {owner:?}"
                    ));
                }
                listed[word] |= bit;
                count += 1;
            }
        }
        if count != self.shards.len() {
            let is_listed = |s: &ShardId| listed[s.0 as usize / 64] & (1_u64 << (s.0 % 64)) != 0;
            if let Some(shard) = self.shards.keys().find(|s| !is_listed(s)) {
                return broken(format!("{shard} is allocated but in no region's list"));
            }
        }
        if let Some(shard) = self.unacked.keys().find(|s| !self.shards.contains_key(s)) {
            return broken(format!(
                "{shard} awaits an acknowledgement but is not allocated"
            ));
        }
        if let Some(shard) = self.handoffs.keys().find(|s| !self.shards.contains_key(s)) {
            return broken(format!("{shard} is being handed off but is not allocated"));
        }
        Ok(())
    }
}
