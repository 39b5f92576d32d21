//! Akka's newer least-shard allocation strategy: see [`LeastShardStrategy`].

use std::collections::BTreeSet;

use crate::allocation::{AllocationStrategy, AllocationView, RegionAllocation};
use crate::id::{MemberId, ShardId};
use crate::members::MemberStatus;

/// Akka's newer `LeastShardAllocationStrategy` (Akka ≥ 2.6.10,
/// `akka.cluster.sharding.internal.LeastShardAllocationStrategy`).
///
/// * **Allocate**: the most suitable region by [`AllocationView::most_suitable`] (not leaving,
///   newest app version, fewest shards, oldest, lowest member id).
/// * **Rebalance**: nothing while any rebalance is in progress or when it is not a good time
///   ([`AllocationView::is_good_time_to_rebalance`]). Otherwise, with `N` shards over `R`
///   regions, `optimal = ⌈N / R⌉` and `limit = max(1, min(⌊relative × N⌋, absolute))`:
///   1. iterate the regions in suitability order (most suitable first, exactly as Akka sorts
///      its region entries with `ShardSuitabilityOrdering`) and select, from each region holding
///      more than `optimal`, its `size − optimal` oldest-allocated shards; return the first
///      `limit` of them if any;
///   2. otherwise fix the rounding: if `Σ max(0, (optimal − 1) − size)` is zero return nothing,
///      else select the oldest shard of every region holding at least `optimal` (same order)
///      and return the first `min(that sum, limit)`.
///
/// Unlike Akka, `R` and the phase-2 sum count only the regions allocation fills: the most
/// suitable class (Up regions, unless every region is leaving). Akka counts Leaving regions as
/// room, yet never allocates to them while an Up region exists, so a view holding one made every
/// round move shards off an Up region and straight back (found by the `allocation` fuzz target).
/// Shards a Leaving region holds still count in `N` and may be moved off it.
///
/// The returned shards are handed off and re-allocated one by one through
/// [`AllocationStrategy::allocate_shard`], which sends each to the region with fewest shards:
/// that is what balances the table.
#[derive(Clone, Debug, PartialEq)]
pub struct LeastShardStrategy {
    absolute_limit: u32,
    relative_limit: f64,
}

impl LeastShardStrategy {
    /// A strategy moving at most `max(1, min(⌊relative_limit × total⌋, absolute_limit))`
    /// shards per rebalance round (Akka's `rebalance-absolute-limit` and
    /// `rebalance-relative-limit`).
    pub fn new(absolute_limit: u32, relative_limit: f64) -> Self {
        Self {
            absolute_limit,
            relative_limit,
        }
    }

    /// Most shards one rebalance round may move when `number_of_shards` are allocated: Akka's
    /// `max(1, min((relativeLimit * n).toInt, absoluteLimit))`.
    pub fn limit(&self, number_of_shards: usize) -> usize {
        // `as` truncates toward zero and saturates (NaN → 0), like the JVM's `toInt`.
        let relative = (self.relative_limit * number_of_shards as f64) as usize;
        let absolute = usize::try_from(self.absolute_limit).unwrap_or(usize::MAX);
        relative.min(absolute).max(1)
    }

    /// Phase 1: the oldest shards above `optimal` of each over-full region, first `limit`.
    fn phase1(sorted: &[&RegionAllocation], optimal: usize, limit: usize) -> BTreeSet<ShardId> {
        sorted
            .iter()
            .filter(|r| r.shards.len() > optimal)
            .flat_map(|r| r.shards[..r.shards.len() - optimal].iter().copied())
            .take(limit)
            .collect()
    }

    /// Phase 2: move one shard from full regions while some region of `room` is two or more
    /// below.
    fn phase2(
        sorted: &[&RegionAllocation],
        room: &[&RegionAllocation],
        optimal: usize,
        limit: usize,
    ) -> BTreeSet<ShardId> {
        let count_below_optimal: usize = room
            .iter()
            .map(|r| (optimal - 1).saturating_sub(r.shards.len()))
            .sum();
        if count_below_optimal == 0 {
            return BTreeSet::new();
        }
        sorted
            .iter()
            .filter(|r| r.shards.len() >= optimal)
            .filter_map(|r| r.shards.first().copied())
            .take(count_below_optimal.min(limit))
            .collect()
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
        // One rebalance round at a time.
        if !in_progress.is_empty() || !view.is_good_time_to_rebalance() {
            return BTreeSet::new();
        }
        let sorted = view.by_suitability();
        let number_of_shards = view.total_shards();
        let Some(first) = sorted.first() else {
            return BTreeSet::new();
        };
        // The regions allocation fills: those as suitable as the first by status.
        let room: Vec<&RegionAllocation> = sorted
            .iter()
            .copied()
            .take_while(|r| (r.status == MemberStatus::Up) == (first.status == MemberStatus::Up))
            .collect();
        let number_of_regions = room.len();
        if number_of_shards == 0 {
            return BTreeSet::new();
        }
        let optimal = number_of_shards.div_ceil(number_of_regions);
        let limit = self.limit(number_of_shards);
        let result = Self::phase1(&sorted, optimal, limit);
        if result.is_empty() {
            Self::phase2(&sorted, &room, optimal, limit)
        } else {
            result
        }
    }
}
