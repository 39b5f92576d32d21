//! Placeholder; being written.
use crate::allocation::{AllocationStrategy, AllocationView};
use crate::id::{MemberId, ShardId};
use std::collections::BTreeSet;

/// Placeholder.
#[derive(Debug)]
pub struct LeastShardStrategy;

impl LeastShardStrategy {
    /// Placeholder.
    pub fn new(_a: u32, _b: f64) -> Self {
        Self
    }
}

impl AllocationStrategy for LeastShardStrategy {
    fn allocate_shard(
        &mut self,
        _r: MemberId,
        _s: ShardId,
        view: &AllocationView,
    ) -> Option<MemberId> {
        view.most_suitable().map(|r| r.region)
    }
    fn rebalance(&mut self, _v: &AllocationView, _i: &BTreeSet<ShardId>) -> BTreeSet<ShardId> {
        BTreeSet::new()
    }
}
