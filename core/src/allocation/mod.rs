//! Shard allocation strategies: pure policy, no timers, no effects.
//!
//! The coordinator asks a strategy where a new shard goes ([`AllocationStrategy::allocate_shard`])
//! and, every `rebalance_interval`, which shards should move ([`AllocationStrategy::rebalance`]).
//! Shards chosen for rebalance are handed off and then re-allocated one by one through
//! `allocate_shard`, which is what balances them. The coordinator only offers *active* regions:
//! registered, hosting, not shutting down and not being removed.

mod consistent_hashing;
mod external;
mod least_shard;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use crate::config::AllocationStrategyConfig;
use crate::id::{AppVersion, MemberId, NodeId, ShardId};
use crate::members::MemberStatus;

pub use consistent_hashing::ConsistentHashingStrategy;
pub use external::ExternalStrategy;
pub use least_shard::LeastShardStrategy;

/// One region as a strategy sees it.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct RegionAllocation {
    /// The region's member.
    pub region: MemberId,
    /// Shards allocated to it, oldest allocation first. Shared with the coordinator's table,
    /// so building a view for every allocation copies no shard list (a table of 100,000
    /// shards would otherwise be copied per allocation).
    pub shards: Arc<Vec<ShardId>>,
    /// Its member's status (Leaving/Exiting regions are the last choice).
    pub status: MemberStatus,
    /// Its member's application version (newer is preferred).
    pub app_version: AppVersion,
    /// Its member's up-number (older is preferred on ties).
    pub up_number: u64,
}

impl RegionAllocation {
    /// An Up region with default version and up-number 0; convenient in tests.
    pub fn new(region: MemberId, shards: Vec<ShardId>) -> Self {
        Self {
            region,
            shards: Arc::new(shards),
            status: MemberStatus::Up,
            app_version: AppVersion::default(),
            up_number: 0,
        }
    }
}

/// The allocation table plus the cluster facts that gate rebalancing.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
pub struct AllocationView {
    /// Active regions, in member-id order.
    pub regions: Vec<RegionAllocation>,
    /// Some member is unreachable: a handoff would wait for its ack, so do not rebalance.
    pub any_unreachable: bool,
    /// Some member is joining: wait for it before moving shards.
    pub any_joining: bool,
}

impl AllocationView {
    /// A view of these regions in a healthy cluster.
    pub fn new(regions: Vec<RegionAllocation>) -> Self {
        Self {
            regions,
            any_unreachable: false,
            any_joining: false,
        }
    }

    /// Akka's `isAGoodTimeToRebalance`: some region exists, all regions run the same app
    /// version (no rolling update in progress), no member is unreachable and none is joining.
    pub fn is_good_time_to_rebalance(&self) -> bool {
        let Some(first) = self.regions.first() else {
            return false;
        };
        !self.any_unreachable
            && !self.any_joining
            && self
                .regions
                .iter()
                .all(|r| r.app_version == first.app_version)
    }

    /// Regions sorted by Akka's `ShardSuitabilityOrdering`, most suitable first: not leaving
    /// before leaving, newer app version first, fewer shards first, older (lower up-number)
    /// first, then member id.
    pub fn by_suitability(&self) -> Vec<&RegionAllocation> {
        let mut regions: Vec<_> = self.regions.iter().collect();
        regions.sort_by(|a, b| suitability(a, b));
        regions
    }

    /// The most suitable region for a new shard, if any.
    pub fn most_suitable(&self) -> Option<&RegionAllocation> {
        self.regions.iter().min_by(|a, b| suitability(a, b))
    }

    /// Total shards allocated across the view.
    pub fn total_shards(&self) -> usize {
        self.regions.iter().map(|r| r.shards.len()).sum()
    }
}

/// `ShardSuitabilityOrdering`: `Less` means `a` is the better home.
fn suitability(a: &RegionAllocation, b: &RegionAllocation) -> Ordering {
    let leaving = |r: &RegionAllocation| r.status != MemberStatus::Up;
    leaving(a)
        .cmp(&leaving(b))
        .then_with(|| b.app_version.cmp(&a.app_version))
        .then_with(|| a.shards.len().cmp(&b.shards.len()))
        .then_with(|| a.up_number.cmp(&b.up_number))
        .then_with(|| a.region.cmp(&b.region))
}

/// A shard allocation policy. Implementations are pure: same inputs, same answers.
pub trait AllocationStrategy: fmt::Debug + Send {
    /// Chooses the home of a new `shard` among `view.regions` (`requester` asked first).
    /// Returns `None` when no region is suitable; the request is retried later.
    fn allocate_shard(
        &mut self,
        requester: MemberId,
        shard: ShardId,
        view: &AllocationView,
    ) -> Option<MemberId>;

    /// Chooses shards to move now. `in_progress` holds shards already being handed off.
    /// Every returned shard is currently allocated in `view`.
    fn rebalance(
        &mut self,
        view: &AllocationView,
        in_progress: &BTreeSet<ShardId>,
    ) -> BTreeSet<ShardId>;

    /// Records an application-chosen home for `shard`; only the external strategy uses it.
    fn set_desired_location(&mut self, _shard: ShardId, _node: NodeId) {}
}

/// Builds the strategy a config names.
pub fn strategy_for(config: &AllocationStrategyConfig) -> Box<dyn AllocationStrategy> {
    match *config {
        AllocationStrategyConfig::LeastShard {
            absolute_limit,
            relative_limit,
        } => Box::new(LeastShardStrategy::new(absolute_limit, relative_limit)),
        AllocationStrategyConfig::ConsistentHashing { rebalance_limit } => {
            Box::new(ConsistentHashingStrategy::new(rebalance_limit))
        }
        AllocationStrategyConfig::External => Box::new(ExternalStrategy::default()),
    }
}
