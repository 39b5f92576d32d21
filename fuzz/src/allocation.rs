//! `allocation`: random region/shard layouts through every allocation strategy, driven the way
//! the coordinator drives them: shards are allocated one by one, then rebalance rounds hand
//! shards off and re-allocate them while regions join, leave and change.
//!
//! * every shard is allocated to exactly one region at all times (shards are conserved);
//! * `allocate_shard` only names regions of the view, and answers for every non-empty view;
//! * `rebalance` only returns allocated shards that are not already in progress, respects the
//!   strategy's per-round limit, and waits for a good time (least-shard, consistent hashing);
//! * in a stable view, rebalancing converges: after a bounded number of rounds it moves
//!   nothing more.

use std::collections::{BTreeMap, BTreeSet};

use arbitrary::{Arbitrary, Unstructured};
use shoal_core::allocation::{AllocationStrategy, AllocationView, RegionAllocation, strategy_for};
use shoal_core::{
    AllocationStrategyConfig, AppVersion, Config, EntityTypeConfig, Incarnation, MemberId,
    MemberStatus, NodeId, ShardId,
};

/// One region of the layout.
#[derive(Arbitrary, Debug)]
struct Region {
    node: u8,
    incarnation: u8,
    leaving: bool,
    app_version: u8,
    up_number: u8,
}

/// A change to the cluster between rounds.
#[derive(Arbitrary, Debug)]
enum Change {
    /// A region joins (empty).
    Join(Region),
    /// A region is removed; its shards are re-allocated.
    Remove(u8),
    /// Rebalancing is gated off or on.
    Gate { unreachable: bool, joining: bool },
    /// The application sets a shard's desired node (external strategy).
    Desire { shard: u16, node: u8 },
    /// A rebalance round completes; shards it chose are re-allocated.
    Round,
}

#[derive(Arbitrary, Debug)]
enum Strategy {
    LeastShard {
        absolute_limit: u8,
        relative_limit: u8,
    },
    ConsistentHashing {
        rebalance_limit: u8,
    },
    External,
}

/// One fuzz input, as `cargo fuzz fmt allocation <artifact>` prints it.
#[derive(Arbitrary, Debug)]
pub struct Layout {
    strategy: Strategy,
    regions: Vec<Region>,
    shards: u8,
    changes: Vec<Change>,
}

impl Strategy {
    fn config(&self) -> AllocationStrategyConfig {
        match *self {
            Self::LeastShard {
                absolute_limit,
                relative_limit,
            } => AllocationStrategyConfig::LeastShard {
                absolute_limit: u32::from(absolute_limit),
                relative_limit: f64::from(relative_limit) / 128.0,
            },
            Self::ConsistentHashing { rebalance_limit } => {
                AllocationStrategyConfig::ConsistentHashing {
                    rebalance_limit: u32::from(rebalance_limit),
                }
            }
            Self::External => AllocationStrategyConfig::External,
        }
    }

    /// Most shards one round may choose, if the strategy limits it.
    fn limit(&self, total: usize) -> Option<usize> {
        match *self {
            Self::LeastShard {
                absolute_limit,
                relative_limit,
            } => {
                let relative = (f64::from(relative_limit) / 128.0 * total as f64) as usize;
                Some(relative.min(usize::from(absolute_limit)).max(1))
            }
            Self::ConsistentHashing { rebalance_limit } => {
                (rebalance_limit > 0).then_some(usize::from(rebalance_limit))
            }
            Self::External => None,
        }
    }

    fn waits_for_good_time(&self) -> bool {
        !matches!(self, Self::External)
    }
}

impl Region {
    fn allocation(&self) -> RegionAllocation {
        RegionAllocation {
            region: MemberId {
                node: NodeId(u64::from(self.node % 16)),
                incarnation: Incarnation(u64::from(self.incarnation % 3)),
            },
            shards: Default::default(),
            status: if self.leaving {
                MemberStatus::Leaving
            } else {
                MemberStatus::Up
            },
            app_version: AppVersion(0, u32::from(self.app_version % 2), 0),
            up_number: u64::from(self.up_number),
        }
    }
}

/// Checks one input's bytes, read as [`Layout`]; panics on a broken property.
pub fn run(data: &[u8]) {
    if let Ok(input) = Layout::arbitrary_take_rest(Unstructured::new(data)) {
        check(input);
    }
}

/// Checks one structured input (what the fuzz target calls); panics on a broken property.
pub fn check(layout: Layout) {
    let config = layout.strategy.config();
    let valid = Config::new(NodeId(0), Incarnation(1))
        .with_entity_type(EntityTypeConfig {
            allocation: config.clone(),
            ..EntityTypeConfig::new("t")
        })
        .validate();
    if valid.is_err() {
        return; // Invalid limits are refused by config validation; nodes never run them.
    }
    let mut table = Table::new(strategy_for(&config), &layout);
    for region in layout.regions.iter().take(12) {
        table.join(region);
    }
    let shards = u32::from(layout.shards % 64);
    for shard in (0..shards).map(ShardId) {
        table.allocate(shard);
    }
    for change in layout.changes.iter().take(64) {
        match change {
            Change::Join(region) => table.join(region),
            Change::Remove(i) => table.remove(usize::from(*i)),
            Change::Gate {
                unreachable,
                joining,
            } => (table.view.any_unreachable, table.view.any_joining) = (*unreachable, *joining),
            Change::Desire { shard, node } => table.strategy.set_desired_location(
                ShardId(u32::from(*shard) % shards.max(1)),
                NodeId(u64::from(node % 16)),
            ),
            Change::Round => {
                table.round();
            }
        }
        table.check_conserved(shards);
    }
    table.check_converges(shards);
}

/// The coordinator's table as the harness keeps it.
struct Table<'a> {
    strategy: Box<dyn AllocationStrategy>,
    layout: &'a Layout,
    view: AllocationView,
    /// Shards waiting for a region (the view was empty when they were allocated).
    unallocated: BTreeSet<ShardId>,
}

impl<'a> Table<'a> {
    fn new(strategy: Box<dyn AllocationStrategy>, layout: &'a Layout) -> Self {
        Self {
            strategy,
            layout,
            view: AllocationView::default(),
            unallocated: BTreeSet::new(),
        }
    }

    fn join(&mut self, region: &Region) {
        let region = region.allocation();
        if self.view.regions.iter().all(|r| r.region != region.region) {
            self.view.regions.push(region);
            self.view.regions.sort_by_key(|r| r.region);
            // Shards that found no home before are retried, as the coordinator does.
            for shard in std::mem::take(&mut self.unallocated) {
                self.allocate(shard);
            }
        }
    }

    fn remove(&mut self, index: usize) {
        if self.view.regions.is_empty() {
            return;
        }
        let removed = self.view.regions.remove(index % self.view.regions.len());
        for shard in removed.shards.iter().copied() {
            self.allocate(shard);
        }
    }

    fn allocate(&mut self, shard: ShardId) {
        let requester = self
            .view
            .regions
            .first()
            .map_or(MemberId::new(99, 1), |r| r.region);
        let chosen = self.strategy.allocate_shard(requester, shard, &self.view);
        let Some(home) = chosen else {
            assert!(
                self.view.regions.is_empty(),
                "no home for {shard} although regions exist: {:?}",
                self.view
            );
            self.unallocated.insert(shard);
            return;
        };
        let region = self
            .view
            .regions
            .iter_mut()
            .find(|r| r.region == home)
            .unwrap_or_else(|| panic!("{shard} allocated to {home}, not a region of the view"));
        std::sync::Arc::make_mut(&mut region.shards).push(shard);
    }

    /// One rebalance round: checks the choice, hands the shards off and re-allocates them.
    /// Returns how many shards moved.
    fn round(&mut self) -> usize {
        let in_progress = BTreeSet::new();
        let chosen = self.strategy.rebalance(&self.view, &in_progress);
        let total = self.view.total_shards();
        if let Some(limit) = self.layout.strategy.limit(total) {
            assert!(
                chosen.len() <= limit,
                "{} shards chosen, limit {limit}: {:?}",
                chosen.len(),
                self.layout.strategy
            );
        }
        if self.layout.strategy.waits_for_good_time() && !self.view.is_good_time_to_rebalance() {
            assert!(chosen.is_empty(), "rebalanced at a bad time: {chosen:?}");
        }
        for &shard in &chosen {
            let region = self
                .view
                .regions
                .iter_mut()
                .find(|r| r.shards.contains(&shard))
                .unwrap_or_else(|| panic!("rebalance chose {shard}, which is not allocated"));
            std::sync::Arc::make_mut(&mut region.shards).retain(|s| *s != shard);
        }
        for &shard in &chosen {
            self.allocate(shard);
        }
        chosen.len()
    }

    fn check_conserved(&self, shards: u32) {
        let mut seen: BTreeMap<ShardId, MemberId> = BTreeMap::new();
        for region in &self.view.regions {
            for &shard in region.shards.iter() {
                if let Some(other) = seen.insert(shard, region.region) {
                    panic!("{shard} allocated to both {other} and {}", region.region);
                }
            }
        }
        for &shard in &self.unallocated {
            assert!(seen.insert(shard, MemberId::new(0, 0)).is_none());
        }
        let expected: Vec<ShardId> = (0..shards).map(ShardId).collect();
        let present: Vec<ShardId> = seen.into_keys().collect();
        assert_eq!(present, expected, "shards lost or invented");
    }

    /// In a stable view at a good time, rebalancing stops moving shards.
    fn check_converges(&mut self, shards: u32) {
        (self.view.any_unreachable, self.view.any_joining) = (false, false);
        // Each round moves at least one shard or none; every strategy needs at most about
        // one round per shard (plus a few for phase changes) to settle.
        let bound = shards as usize + 8;
        for _ in 0..bound {
            if self.round() == 0 {
                self.check_conserved(shards);
                return;
            }
        }
        panic!(
            "rebalancing did not converge in {bound} rounds: {:?} {:?}",
            self.layout.strategy, self.view
        );
    }
}
