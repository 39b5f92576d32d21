//! Akka's least-shard allocation strategy, newer algorithm (Akka ≥ 2.6.10,
//! `internal/LeastShardAllocationStrategy.scala`).
//!
//! *Allocate*: the most suitable region ([`AllocationView::most_suitable`]): Up before leaving,
//! newest app version, fewest shards, oldest member.
//!
//! *Rebalance*, one round at a time (nothing while a handoff is in progress) and only at a good
//! time ([`AllocationView::is_good_time_to_rebalance`]). With `N` shards over `R` regions,
//! `optimal = ⌈N / R⌉` and `limit = max(1, min(⌊relative × N⌋, absolute))`:
//! 1. from every region above `optimal`, in suitability order, take its oldest-allocated shards
//!    down to `optimal`; return the first `limit` of them if any;
//! 2. otherwise (fixing rounding) if some regions hold fewer than `optimal − 1`, take the oldest
//!    shard of each region at or above `optimal`, at most `min(below, limit)` of them, where
//!    `below = Σ max(0, optimal − 1 − size)`.
//!
//! Moved shards are re-allocated one by one through `allocate`, which is what balances them.

use std::collections::BTreeSet;

use crate::allocation::{AllocationStrategy, AllocationView};
use crate::id::{MemberId, ShardId};

/// The default allocation strategy.
#[derive(Clone, Debug)]
pub struct LeastShardStrategy {
    absolute_limit: u32,
    relative_limit: f64,
}

impl LeastShardStrategy {
    /// At most `min(absolute_limit, relative_limit × total shards)` shards (and at least one)
    /// move per rebalance round.
    pub fn new(absolute_limit: u32, relative_limit: f64) -> Self {
        Self {
            absolute_limit,
            relative_limit,
        }
    }

    /// Most shards one round may move when `total` shards are allocated.
    pub fn limit(&self, total: usize) -> usize {
        // Truncation is intended: Akka's `(relativeLimit * numberOfShards).toInt`.
        let relative = (self.relative_limit * total as f64) as usize;
        relative.min(self.absolute_limit as usize).max(1)
    }
}

impl AllocationStrategy for LeastShardStrategy {
    fn allocate_shard(
        &mut self,
        _requester: MemberId,
        _shard: ShardId,
        view: &AllocationView,
    ) -> Option<MemberId> {
        view.most_suitable().map(|r| r.region)
    }

    fn rebalance(
        &mut self,
        view: &AllocationView,
        in_progress: &BTreeSet<ShardId>,
    ) -> BTreeSet<ShardId> {
        if !in_progress.is_empty() || !view.is_good_time_to_rebalance() {
            return BTreeSet::new();
        }
        let regions = view.by_suitability();
        let total = view.total_shards();
        let optimal = total.div_ceil(regions.len());
        let limit = self.limit(total);

        let phase1: Vec<ShardId> = regions
            .iter()
            .filter(|r| r.shards.len() > optimal)
            .flat_map(|r| r.shards[..r.shards.len() - optimal].iter().copied())
            .collect();
        if !phase1.is_empty() {
            return phase1.into_iter().take(limit).collect();
        }

        let below_optimal: usize = regions
            .iter()
            .map(|r| (optimal.saturating_sub(1)).saturating_sub(r.shards.len()))
            .sum();
        if below_optimal == 0 {
            return BTreeSet::new();
        }
        regions
            .iter()
            .filter(|r| r.shards.len() >= optimal)
            .filter_map(|r| r.shards.first().copied())
            .take(below_optimal.min(limit))
            .collect()
    }
}
