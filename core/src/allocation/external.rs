//! Placeholder; being written.
use crate::allocation::{AllocationStrategy, AllocationView};
use crate::id::{MemberId, ShardId};
use std::collections::BTreeSet;

/// Placeholder.
#[derive(Debug, Default)]
pub struct ExternalStrategy;

impl AllocationStrategy for ExternalStrategy {
    fn allocate_shard(
        &mut self,
        r: MemberId,
        _s: ShardId,
        _view: &AllocationView,
    ) -> Option<MemberId> {
        Some(r)
    }
    fn rebalance(&mut self, _v: &AllocationView, _i: &BTreeSet<ShardId>) -> BTreeSet<ShardId> {
        BTreeSet::new()
    }
}
