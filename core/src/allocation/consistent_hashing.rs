//! Akka's consistent-hashing allocation strategy: see [`ConsistentHashingStrategy`].

use std::collections::BTreeSet;

use crate::allocation::{AllocationStrategy, AllocationView};
use crate::hash::murmur2;
use crate::id::{MemberId, ShardId};

/// Akka's `ConsistentHashingShardAllocationStrategy`: shards are placed on a hash ring of the
/// regions' nodes, so the same shard id lands on the same node for every entity type that uses
/// this strategy, and adding or removing a node only moves the shards gained or lost by it.
///
/// # Ring scheme (pinned by tests; changing it moves shards in running clusters)
///
/// All hashes are [`crate::murmur2`] (32-bit, seed `0x9747b28c`) over ASCII byte strings, with
/// the 32-bit result compared as an unsigned number:
///
/// * each region's **node** gets
///   [`VIRTUAL_NODES`](ConsistentHashingStrategy::VIRTUAL_NODES) (10) points on the ring, at
///   `murmur2(format!("{node}-{vnode}"))` for `vnode` in `0..10`, where `{node}` is the decimal
///   [`NodeId`](crate::NodeId) number (e.g. node 3, vnode 7 → `"3-7"`). The incarnation is
///   deliberately left out, like Akka, whose ring holds node addresses without their uid: a
///   restarted node gets its old shards back. When two incarnations of one node are in the view
///   at once, only the newest (highest incarnation) is put on the ring;
/// * a **shard** sits at `murmur2(format!("{shard}"))` with `{shard}` its decimal
///   [`ShardId`] number (e.g. shard 42 → `"42"`);
/// * a shard's owner is the first point clockwise at or after its position (the lowest point
///   `≥` the shard's hash, wrapping to the lowest point overall), as in Akka's
///   `ConsistentHash.nodeFor`. Equal points (a hash collision) are ordered by member id.
///
/// The ring is rebuilt only when the set of region nodes changes.
///
/// * **Allocate**: the ring owner of the shard (`None` when the view is empty).
/// * **Rebalance** (only when [`AllocationView::is_good_time_to_rebalance`]): walking regions in
///   member-id order and each region's shards in allocation order, every shard not in
///   `in_progress` whose ring owner is not the region holding it, up to `rebalance_limit`
///   shards (0 = unlimited). Unlike the least-shard strategy it does not wait for earlier rounds.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct ConsistentHashingStrategy {
    rebalance_limit: u32,
    ring: Ring,
}

impl ConsistentHashingStrategy {
    /// Points each region node gets on the ring (Akka's `virtualNodesFactor`).
    pub const VIRTUAL_NODES: u32 = 10;

    /// A strategy moving at most `rebalance_limit` shards per rebalance round (0 = unlimited).
    pub fn new(rebalance_limit: u32) -> Self {
        Self {
            rebalance_limit,
            ring: Ring::default(),
        }
    }

    /// The ring position of `shard`: `murmur2` of its decimal number.
    pub fn shard_position(shard: ShardId) -> u32 {
        murmur2(shard.0.to_string().as_bytes())
    }

    /// The ring position of virtual node `vnode` of `member`'s node: `murmur2("{node}-{vnode}")`.
    pub fn vnode_position(member: MemberId, vnode: u32) -> u32 {
        murmur2(format!("{}-{}", member.node.0, vnode).as_bytes())
    }

    /// The region of `view` owning `shard` on the ring, `None` if the view is empty.
    pub fn owner(&mut self, shard: ShardId, view: &AllocationView) -> Option<MemberId> {
        self.ring.update(view);
        self.ring.owner(shard)
    }

    fn under_limit(&self, selected: usize) -> bool {
        self.rebalance_limit == 0
            || u32::try_from(selected).is_ok_and(|selected| selected < self.rebalance_limit)
    }
}

impl AllocationStrategy for ConsistentHashingStrategy {
    fn allocate_shard(
        &mut self,
        _requester: MemberId,
        shard: ShardId,
        view: &AllocationView,
    ) -> Option<MemberId> {
        self.owner(shard, view)
    }

    fn rebalance(
        &mut self,
        view: &AllocationView,
        in_progress: &BTreeSet<ShardId>,
    ) -> BTreeSet<ShardId> {
        let mut result = BTreeSet::new();
        if !view.is_good_time_to_rebalance() {
            return result;
        }
        self.ring.update(view);
        let mut regions: Vec<_> = view.regions.iter().collect();
        regions.sort_by_key(|r| r.region);
        for region in regions {
            for &shard in region.shards.iter() {
                if !self.under_limit(result.len()) {
                    return result;
                }
                if !in_progress.contains(&shard) && self.ring.owner(shard) != Some(region.region) {
                    result.insert(shard);
                }
            }
        }
        result
    }
}

/// The hash ring of one set of region nodes.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
struct Ring {
    /// The members on the ring, sorted: the newest incarnation of each region node.
    members: Vec<MemberId>,
    /// `(position, member)` for every virtual node, sorted.
    points: Vec<(u32, MemberId)>,
}

impl Ring {
    /// Rebuilds the ring if the view's region nodes differ from the ones it was built for.
    fn update(&mut self, view: &AllocationView) {
        let mut members: Vec<MemberId> = view.regions.iter().map(|r| r.region).collect();
        members.sort();
        // Keep only the newest incarnation of each node: sorted by (node, incarnation), so the
        // last of each run of equal nodes wins.
        members.reverse();
        members.dedup_by_key(|m| m.node);
        members.reverse();
        if members == self.members {
            return;
        }
        let mut points: Vec<(u32, MemberId)> = members
            .iter()
            .flat_map(|&m| {
                (0..ConsistentHashingStrategy::VIRTUAL_NODES)
                    .map(move |v| (ConsistentHashingStrategy::vnode_position(m, v), m))
            })
            .collect();
        points.sort();
        self.members = members;
        self.points = points;
    }

    /// The first point clockwise at or after the shard's position.
    fn owner(&self, shard: ShardId) -> Option<MemberId> {
        let position = ConsistentHashingStrategy::shard_position(shard);
        let index = self.points.partition_point(|&(p, _)| p < position);
        self.points
            .get(index)
            .or_else(|| self.points.first())
            .map(|&(_, m)| m)
    }
}
