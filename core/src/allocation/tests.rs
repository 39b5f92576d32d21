//! Golden cases from Akka's `LeastShardAllocationStrategySpec`,
//! `ConsistentHashingShardAllocationStrategySpec` and `ExternalShardAllocationStrategySpec`, and
//! properties over random layouts.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;
use crate::membership::MemberStatus;

fn region(n: u64) -> MemberId {
    MemberId::new(n, 1)
}

/// Regions A, B, C (members 1, 2, 3) holding `counts` shards, numbered 1.. in allocation
/// order region by region, as Akka's spec numbers "001", "002", ...
fn layout(counts: &[usize]) -> AllocationView {
    let mut next = 1;
    let regions = counts
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let shards = (next..next + count as u32).map(ShardId).collect();
            next += count as u32;
            let mut r = RegionAllocation::new(region(i as u64 + 1), shards);
            r.up_number = i as u64 + 1;
            r
        })
        .collect();
    AllocationView::new(regions)
}

fn ids(shards: &[u32]) -> BTreeSet<ShardId> {
    shards.iter().copied().map(ShardId).collect()
}

fn counts(view: &AllocationView) -> Vec<usize> {
    view.regions.iter().map(|r| r.shards.len()).collect()
}

/// Akka's spec runs the algorithm without limits (`absoluteLimit = 1000, relativeLimit = 1.0`).
fn unlimited() -> LeastShardStrategy {
    LeastShardStrategy::new(1000, 1.0)
}

/// Applies one round: hand off the chosen shards, then re-allocate each through the strategy.
fn apply_round(
    strategy: &mut dyn AllocationStrategy,
    view: &mut AllocationView,
) -> BTreeSet<ShardId> {
    let moved = strategy.rebalance(view, &BTreeSet::new());
    for r in &mut view.regions {
        r.shards.retain(|s| !moved.contains(s));
    }
    for &shard in &moved {
        let home = strategy
            .allocate_shard(region(1), shard, view)
            .expect("some region");
        let target = view
            .regions
            .iter_mut()
            .find(|r| r.region == home)
            .expect("home in view");
        target.shards.push(shard);
    }
    moved
}

#[test]
fn least_shard_golden_cases_from_akka() {
    let cases: [(&[usize], &[u32]); 8] = [
        (&[1, 2, 0], &[2]),
        (&[2, 0, 0], &[1]),
        (&[1, 1, 0], &[]),
        (&[3, 0, 0], &[1, 2]),
        (&[4, 4, 0], &[1, 5]),
        (&[4, 4, 2], &[1]),
        (&[5, 5, 0], &[1, 6]),
        (&[1, 1, 1], &[]),
    ];
    for (layout_counts, expected) in cases {
        let chosen = unlimited().rebalance(&layout(layout_counts), &BTreeSet::new());
        assert_eq!(chosen, ids(expected), "layout {layout_counts:?}");
    }
}

#[test]
fn least_shard_rounds_reach_akkas_layouts() {
    let mut s = unlimited();
    let mut view = layout(&[1, 2, 0]);
    apply_round(&mut s, &mut view);
    assert_eq!(counts(&view), [1, 1, 1]);

    let mut view = layout(&[4, 4, 0]);
    apply_round(&mut s, &mut view);
    assert_eq!(counts(&view), [3, 3, 2]);

    let mut view = layout(&[4, 4, 2]);
    apply_round(&mut s, &mut view);
    assert_eq!(counts(&view), [3, 4, 3]);

    let mut view = layout(&[5, 5, 0]);
    apply_round(&mut s, &mut view);
    assert_eq!(counts(&view), [4, 4, 2]);
    assert_eq!(apply_round(&mut s, &mut view), ids(&[2]));
    assert_eq!(counts(&view), [3, 4, 3]);

    let mut view = layout(&[50, 0, 50]);
    assert_eq!(
        apply_round(&mut s, &mut view).len(),
        32,
        "16 from each full region"
    );
    assert_eq!(sorted_counts(&view), [32, 34, 34]);
    assert_eq!(
        apply_round(&mut s, &mut view).len(),
        1,
        "phase 2 fixes the rounding"
    );
    assert_eq!(sorted_counts(&view), [33, 33, 34]);
}

fn sorted_counts(view: &AllocationView) -> Vec<usize> {
    let mut c = counts(view);
    c.sort_unstable();
    c
}

#[test]
fn least_shard_limits() {
    // Absolute limit 3 on [1, 9, 0]: optimal 4, region B sheds its 3 oldest shards.
    let mut view = layout(&[1, 9, 0]);
    let mut s = LeastShardStrategy::new(3, 1.0);
    assert_eq!(s.rebalance(&view, &BTreeSet::new()), ids(&[2, 3, 4]));
    apply_round(&mut s, &mut view);
    assert_eq!(counts(&view), [2, 6, 2]);
    // Relative limit 0.3 of 10 shards is 3 as well.
    let view = layout(&[1, 9, 0]);
    assert_eq!(
        LeastShardStrategy::new(1000, 0.3).rebalance(&view, &BTreeSet::new()),
        ids(&[2, 3, 4])
    );
    // The limit is never below one shard.
    assert_eq!(LeastShardStrategy::new(20, 0.1).limit(3), 1);
    assert_eq!(LeastShardStrategy::new(20, 0.1).limit(1000), 20);
    assert_eq!(LeastShardStrategy::new(20, 0.1).limit(150), 15);
}

#[test]
fn least_shard_rebalances_one_round_at_a_time() {
    let view = layout(&[3, 0, 0]);
    assert!(unlimited().rebalance(&view, &ids(&[7])).is_empty());
}

#[test]
fn no_rebalance_during_rolling_update_unreachability_or_joining() {
    let base = layout(&[3, 0, 0]);
    let mut mixed = base.clone();
    mixed.regions[1].app_version = AppVersion(1, 0, 1);
    let mut unreachable = base.clone();
    unreachable.any_unreachable = true;
    let mut joining = base.clone();
    joining.any_joining = true;
    for view in [&mixed, &unreachable, &joining] {
        assert!(unlimited().rebalance(view, &BTreeSet::new()).is_empty());
        assert!(
            ConsistentHashingStrategy::new(0)
                .rebalance(view, &BTreeSet::new())
                .is_empty()
        );
    }
    assert!(!unlimited().rebalance(&base, &BTreeSet::new()).is_empty());
    assert!(AllocationView::default().regions.is_empty());
    assert!(
        unlimited()
            .rebalance(&AllocationView::default(), &BTreeSet::new())
            .is_empty()
    );
}

#[test]
fn allocation_prefers_fewer_shards_newer_versions_and_up_members() {
    let mut s = unlimited();
    let view = layout(&[2, 1, 2]);
    assert_eq!(
        s.allocate_shard(region(1), ShardId(99), &view),
        Some(region(2))
    );
    let mut newer = layout(&[2, 1, 2]);
    newer.regions[2].app_version = AppVersion(2, 0, 0);
    assert_eq!(
        s.allocate_shard(region(1), ShardId(99), &newer),
        Some(region(3))
    );
    let mut leaving = layout(&[2, 1, 2]);
    leaving.regions[1].status = MemberStatus::Leaving;
    assert_eq!(
        s.allocate_shard(region(1), ShardId(99), &leaving),
        Some(region(1))
    );
    // Ties on shard count go to the older member.
    assert_eq!(
        s.allocate_shard(region(3), ShardId(99), &layout(&[0, 0, 0])),
        Some(region(1))
    );
    assert_eq!(
        s.allocate_shard(region(1), ShardId(99), &AllocationView::default()),
        None
    );
}

fn ring_view(nodes: &[u64], shards: u32) -> AllocationView {
    let mut s = ConsistentHashingStrategy::new(0);
    let mut view = AllocationView::new(
        nodes
            .iter()
            .map(|&n| RegionAllocation::new(region(n), vec![]))
            .collect(),
    );
    for shard in 0..shards {
        let home = s
            .allocate_shard(region(nodes[0]), ShardId(shard), &view)
            .expect("a region");
        view.regions
            .iter_mut()
            .find(|r| r.region == home)
            .expect("home")
            .shards
            .push(ShardId(shard));
    }
    view
}

fn homes(view: &AllocationView) -> BTreeMap<ShardId, MemberId> {
    view.regions
        .iter()
        .flat_map(|r| r.shards.iter().map(move |s| (*s, r.region)))
        .collect()
}

#[test]
fn consistent_hashing_is_stable_when_regions_leave_or_join() {
    let before = homes(&ring_view(&[1, 2, 3, 4, 5], 200));
    let spread: BTreeSet<MemberId> = before.values().copied().collect();
    assert_eq!(spread.len(), 5, "every region gets shards");
    // Region 3 leaves: only its shards change home.
    let after = homes(&ring_view(&[1, 2, 4, 5], 200));
    for (shard, home) in &before {
        if *home != region(3) {
            assert_eq!(after[shard], *home, "{shard} must not move");
        }
    }
    // Region 6 joins: shards either stay or move to region 6.
    let joined = homes(&ring_view(&[1, 2, 3, 4, 5, 6], 200));
    assert!(joined.iter().any(|(_, h)| *h == region(6)));
    for (shard, home) in &before {
        assert!(
            joined[shard] == *home || joined[shard] == region(6),
            "{shard} moved elsewhere"
        );
    }
}

#[test]
fn consistent_hashing_rebalances_only_misplaced_shards_within_the_limit() {
    let mut view = ring_view(&[1, 2, 3], 60);
    let mut s = ConsistentHashingStrategy::new(0);
    assert!(
        s.rebalance(&view, &BTreeSet::new()).is_empty(),
        "nothing moves without a change"
    );
    view.regions.push(RegionAllocation::new(region(4), vec![]));
    let misplaced = s.rebalance(&view, &BTreeSet::new());
    assert!(!misplaced.is_empty());
    for shard in &misplaced {
        assert_eq!(s.allocate_shard(region(1), *shard, &view), Some(region(4)));
    }
    let limited = ConsistentHashingStrategy::new(2).rebalance(&view, &BTreeSet::new());
    assert_eq!(limited.len(), 2.min(misplaced.len()));
    let first = *misplaced.first().expect("one");
    let without = s.rebalance(&view, &[first].into());
    assert!(
        !without.contains(&first),
        "shards in progress are left alone"
    );
}

#[test]
fn external_strategy_follows_desired_locations() {
    let mut s = ExternalStrategy::default();
    let view = layout(&[1, 1, 0]);
    // No desired location: the requester.
    assert_eq!(
        s.allocate_shard(region(2), ShardId(50), &view),
        Some(region(2))
    );
    s.set_desired_location(ShardId(50), NodeId(3));
    assert_eq!(
        s.allocate_shard(region(2), ShardId(50), &view),
        Some(region(3))
    );
    // A desired node without a region falls back to the requester.
    s.set_desired_location(ShardId(51), NodeId(9));
    assert_eq!(
        s.allocate_shard(region(1), ShardId(51), &view),
        Some(region(1))
    );
    // Rebalance moves shard 1 (on region 1) to node 2; node 9 is ignored.
    s.set_desired_location(ShardId(1), NodeId(2));
    s.set_desired_location(ShardId(2), NodeId(9));
    assert_eq!(s.rebalance(&view, &BTreeSet::new()), ids(&[1]));
    assert!(s.rebalance(&view, &ids(&[1])).is_empty());
}

fn arb_view(max_regions: usize, max_shards: usize) -> impl Strategy<Value = AllocationView> {
    prop::collection::vec(0..=max_shards, 1..=max_regions).prop_map(|c| layout(&c))
}

fn arb_strategy() -> impl Strategy<Value = AllocationStrategyConfig> {
    prop_oneof![
        (1..50u32, 0.01..=1.0f64).prop_map(|(absolute_limit, relative_limit)| {
            AllocationStrategyConfig::LeastShard {
                absolute_limit,
                relative_limit,
            }
        }),
        (0..10u32).prop_map(
            |rebalance_limit| AllocationStrategyConfig::ConsistentHashing { rebalance_limit }
        ),
        Just(AllocationStrategyConfig::External),
    ]
}

proptest! {
    #[test]
    fn least_shard_converges_within_two_rounds(view in arb_view(20, 20)) {
        let mut view = view;
        let before: BTreeSet<ShardId> = homes(&view).into_keys().collect();
        let mut rounds = 0;
        let mut strategy = unlimited();
        while spread(&view) > 1 {
            // Akka's randomized spec: at most 2 rounds without limits.
            apply_round(&mut strategy, &mut view);
            rounds += 1;
            prop_assert!(rounds <= 2, "{:?} after {rounds} rounds", counts(&view));
        }
        let after: BTreeSet<ShardId> = homes(&view).into_keys().collect();
        prop_assert_eq!(before, after, "shards are conserved");
    }

    #[test]
    fn least_shard_with_limits_converges_and_respects_them(
        view in arb_view(20, 20), absolute in 1..30u32, relative in 0.05..=1.0f64,
    ) {
        let mut view = view;
        let mut s = LeastShardStrategy::new(absolute, relative);
        let total = view.total_shards();
        // Each round moves at most `limit` shards, so allow enough rounds to move them all.
        for _ in 0..total.div_ceil(s.limit(total)) + 2 {
            let moved = apply_round(&mut s, &mut view);
            prop_assert!(moved.len() <= s.limit(total));
            prop_assert_eq!(view.total_shards(), total);
        }
        prop_assert!(spread(&view) <= 1, "{:?}", counts(&view));
    }

    #[test]
    fn every_strategy_picks_view_regions_and_allocated_shards(
        view in arb_view(8, 10), config in arb_strategy(), in_progress in prop::collection::btree_set(1..40u32, 0..4),
    ) {
        let mut s = strategy_for(&config);
        let in_progress: BTreeSet<ShardId> = in_progress.into_iter().map(ShardId).collect();
        for node in 1..=9 {
            s.set_desired_location(ShardId(node as u32 * 3), NodeId(node));
        }
        let home = s.allocate_shard(region(1), ShardId(1000), &view);
        prop_assert!(home.is_some_and(|h| view.regions.iter().any(|r| r.region == h)));
        let allocated: BTreeSet<ShardId> = homes(&view).into_keys().collect();
        let moved = s.rebalance(&view, &in_progress);
        prop_assert!(moved.is_subset(&allocated));
        prop_assert!(moved.is_disjoint(&in_progress));
    }
}

#[test]
fn least_shard_converges_for_a_hundred_regions_in_five_rounds() {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(16));
    runner
        .run(&prop::collection::vec(0..=20usize, 100), |c| {
            let mut view = layout(&c);
            let mut s = LeastShardStrategy::new(1000, 1.0);
            for _ in 0..5 {
                apply_round(&mut s, &mut view);
            }
            prop_assert!(spread(&view) <= 1, "{:?}", counts(&view));
            Ok(())
        })
        .expect("converges");
}

fn spread(view: &AllocationView) -> usize {
    let c = counts(view);
    c.iter().max().unwrap_or(&0) - c.iter().min().unwrap_or(&0)
}
