//! External allocation (Akka's `ExternalShardAllocationStrategy`): the application decides where
//! shards live ([`crate::Command::SetShardLocation`]). A shard goes to the region on its desired
//! node when that node has a region, otherwise to the region that asked for it. Rebalancing
//! moves allocated shards whose desired node has a region and is not where they are; desired
//! nodes without a region are ignored until one appears.

use std::collections::{BTreeMap, BTreeSet};

use crate::allocation::{AllocationStrategy, AllocationView};
use crate::id::{MemberId, NodeId, ShardId};

/// Application-directed allocation.
#[derive(Clone, Debug, Default)]
pub struct ExternalStrategy {
    desired: BTreeMap<ShardId, NodeId>,
}

impl ExternalStrategy {
    /// The region of `view` on `node`, if any.
    fn region_on(view: &AllocationView, node: NodeId) -> Option<MemberId> {
        view.regions
            .iter()
            .map(|r| r.region)
            .find(|r| r.node == node)
    }
}

impl AllocationStrategy for ExternalStrategy {
    fn allocate_shard(
        &mut self,
        requester: MemberId,
        shard: ShardId,
        view: &AllocationView,
    ) -> Option<MemberId> {
        let desired = self
            .desired
            .get(&shard)
            .and_then(|node| Self::region_on(view, *node));
        let requester = view
            .regions
            .iter()
            .any(|r| r.region == requester)
            .then_some(requester);
        desired
            .or(requester)
            .or_else(|| view.most_suitable().map(|r| r.region))
    }

    fn rebalance(
        &mut self,
        view: &AllocationView,
        in_progress: &BTreeSet<ShardId>,
    ) -> BTreeSet<ShardId> {
        view.regions
            .iter()
            .flat_map(|r| r.shards.iter().map(move |s| (r.region, *s)))
            .filter(|(region, shard)| {
                !in_progress.contains(shard)
                    && self
                        .desired
                        .get(shard)
                        .and_then(|node| Self::region_on(view, *node))
                        .is_some_and(|target| target != *region)
            })
            .map(|(_, shard)| shard)
            .collect()
    }

    fn set_desired_location(&mut self, shard: ShardId, node: NodeId) {
        self.desired.insert(shard, node);
    }
}
