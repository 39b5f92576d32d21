//! The coordinator's internal invariants, checked after every drain in debug and simulator
//! builds ([`crate::Node::check_invariants`]): the wire cannot show a table that disagrees with
//! itself, since the coordinator still answers.

use std::collections::BTreeSet;

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
        let mut listed = BTreeSet::new();
        for (region, shards) in &self.regions {
            for shard in shards.iter() {
                if !listed.insert(*shard) {
                    return broken(format!("{shard} is listed twice (again under {region})"));
                }
                let owner = self.shards.get(shard);
                if owner != Some(region) {
                    return broken(format!(
                        "{shard} is listed under {region}, allocated to {owner:?}"
                    ));
                }
            }
        }
        let allocated: BTreeSet<ShardId> = self.shards.keys().copied().collect();
        if let Some(shard) = allocated.difference(&listed).next() {
            return broken(format!("{shard} is allocated but in no region's list"));
        }
        if let Some(shard) = self.unacked.keys().find(|s| !allocated.contains(s)) {
            return broken(format!(
                "{shard} awaits an acknowledgement but is not allocated"
            ));
        }
        if let Some(shard) = self.handoffs.keys().find(|s| !allocated.contains(s)) {
            return broken(format!("{shard} is being handed off but is not allocated"));
        }
        Ok(())
    }
}
