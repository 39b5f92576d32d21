//! Consistent hashing over region addresses (Akka's `ConsistentHashingShardAllocationStrategy`):
//! a shard lives on the region whose node owns its point on a hash ring, so the same shard id of
//! different entity types lands on the same node, and a region joining or leaving only moves the
//! shards that hash to it.
//!
//! The ring: every region's node contributes [`VIRTUAL_NODES`] points at
//! `murmur2("{node}:{i}")` for `i` in `0..VIRTUAL_NODES` (the node's numeric address in decimal;
//! the incarnation is left out so a restarted node keeps its place). A shard's point is
//! `murmur2("{shard}")` (its number in decimal); it belongs to the first ring point at or after
//! it, wrapping around. Ties between equal points go to the lower member id.

use std::collections::{BTreeMap, BTreeSet};

use crate::allocation::{AllocationStrategy, AllocationView};
use crate::hash::murmur2;
use crate::id::{MemberId, ShardId};

/// Points per region on the ring (Akka's `virtualNodesFactor` is 10).
const VIRTUAL_NODES: u32 = 10;

/// Consistent-hashing allocation.
#[derive(Clone, Debug)]
pub struct ConsistentHashingStrategy {
    rebalance_limit: u32,
}

impl ConsistentHashingStrategy {
    /// `rebalance_limit`: most shards moved per round; 0 means unlimited.
    pub fn new(rebalance_limit: u32) -> Self {
        Self { rebalance_limit }
    }
}

/// The ring of one view.
struct Ring(BTreeMap<u32, MemberId>);

impl Ring {
    fn new(view: &AllocationView) -> Self {
        let mut points = BTreeMap::new();
        for region in &view.regions {
            for i in 0..VIRTUAL_NODES {
                let point = murmur2(format!("{}:{i}", region.region.node.0).as_bytes());
                let owner = points.entry(point).or_insert(region.region);
                *owner = (*owner).min(region.region);
            }
        }
        Self(points)
    }

    fn owner(&self, shard: ShardId) -> Option<MemberId> {
        let point = murmur2(shard.0.to_string().as_bytes());
        self.0
            .range(point..)
            .next()
            .or_else(|| self.0.iter().next())
            .map(|(_, r)| *r)
    }
}

impl AllocationStrategy for ConsistentHashingStrategy {
    fn allocate_shard(
        &mut self,
        _requester: MemberId,
        shard: ShardId,
        view: &AllocationView,
    ) -> Option<MemberId> {
        Ring::new(view).owner(shard)
    }

    fn rebalance(
        &mut self,
        view: &AllocationView,
        in_progress: &BTreeSet<ShardId>,
    ) -> BTreeSet<ShardId> {
        if !view.is_good_time_to_rebalance() {
            return BTreeSet::new();
        }
        let ring = Ring::new(view);
        let limit = if self.rebalance_limit == 0 {
            usize::MAX
        } else {
            self.rebalance_limit as usize
        };
        view.regions
            .iter()
            .flat_map(|r| r.shards.iter().map(move |s| (r.region, *s)))
            .filter(|(region, shard)| {
                !in_progress.contains(shard) && ring.owner(*shard) != Some(*region)
            })
            .map(|(_, shard)| shard)
            .take(limit)
            .collect()
    }
}
