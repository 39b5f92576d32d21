//! Akka's external allocation strategy: see [`ExternalStrategy`].

use std::collections::{BTreeMap, BTreeSet};

use crate::allocation::{AllocationStrategy, AllocationView};
use crate::id::{MemberId, NodeId, ShardId};

/// Akka's `ExternalShardAllocationStrategy`: the application says where each shard should live
/// (Akka's `ExternalShardAllocationClient.updateShardLocation`, here
/// [`AllocationStrategy::set_desired_location`]), and the strategy follows.
///
/// * **Allocate**: the region on the shard's desired node if such a region is in the view (the
///   newest incarnation if several are); otherwise — no desired node, or it hosts no region —
///   the requester, as in Akka. Unlike Akka, which returns the requester even when the
///   coordinator does not know it, a requester absent from the view falls back to the most
///   suitable region, so the answer is always a region of the view (`None` only for an empty
///   view).
/// * **Rebalance**: every allocated shard whose desired node hosts a region of the view and is
///   not the node currently holding it. Desired nodes without a region are ignored (the shard
///   stays where it is until that node shows up), desired locations of unallocated shards are
///   ignored, and there is no limit per round. Like Akka it does **not** consult
///   [`AllocationView::is_good_time_to_rebalance`] and does not wait for earlier rounds; it only
///   leaves out shards already in `in_progress` (Akka's coordinator skips those anyway).
#[derive(Clone, Debug, Default, Eq, PartialEq)]
pub struct ExternalStrategy {
    desired: BTreeMap<ShardId, NodeId>,
}

impl ExternalStrategy {
    /// A strategy with no desired locations yet: every shard goes to its requester.
    pub fn new() -> Self {
        Self::default()
    }

    /// The node `shard` should live on, if the application chose one.
    pub fn desired_location(&self, shard: ShardId) -> Option<NodeId> {
        self.desired.get(&shard).copied()
    }

    /// All desired locations, by shard.
    pub fn desired_locations(&self) -> &BTreeMap<ShardId, NodeId> {
        &self.desired
    }

    /// The region of `view` on `node`: its newest incarnation if several are present.
    fn region_on(view: &AllocationView, node: NodeId) -> Option<MemberId> {
        view.regions
            .iter()
            .map(|r| r.region)
            .filter(|m| m.node == node)
            .max()
    }
}

impl AllocationStrategy for ExternalStrategy {
    fn allocate_shard(
        &mut self,
        requester: MemberId,
        shard: ShardId,
        view: &AllocationView,
    ) -> Option<MemberId> {
        self.desired_location(shard)
            .and_then(|node| Self::region_on(view, node))
            .or_else(|| {
                view.regions
                    .iter()
                    .any(|r| r.region == requester)
                    .then_some(requester)
            })
            .or_else(|| view.most_suitable().map(|r| r.region))
    }

    fn rebalance(
        &mut self,
        view: &AllocationView,
        in_progress: &BTreeSet<ShardId>,
    ) -> BTreeSet<ShardId> {
        let hosting: BTreeSet<NodeId> = view.regions.iter().map(|r| r.region.node).collect();
        view.regions
            .iter()
            .flat_map(|r| r.shards.iter().map(move |&shard| (shard, r.region.node)))
            .filter(|(shard, _)| !in_progress.contains(shard))
            .filter(|&(shard, current)| {
                self.desired_location(shard)
                    .is_some_and(|desired| desired != current && hosting.contains(&desired))
            })
            .map(|(shard, _)| shard)
            .collect()
    }

    fn set_desired_location(&mut self, shard: ShardId, node: NodeId) {
        self.desired.insert(shard, node);
    }
}
