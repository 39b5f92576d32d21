//! Tests of the allocation strategies: Akka's published expectations (golden cases from
//! `LeastShardAllocationStrategySpec`, `LeastShardAllocationStrategyRandomizedSpec`,
//! `ConsistentHashingShardAllocationStrategySpec`, `ExternalShardAllocationStrategySpec`) plus
//! properties over random views.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use proptest::prelude::*;

use super::*;
use crate::hash::murmur2;

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Member `n`, first incarnation.
fn m(n: u64) -> MemberId {
    MemberId::new(n, 1)
}

fn set(shards: impl IntoIterator<Item = u32>) -> BTreeSet<ShardId> {
    shards.into_iter().map(ShardId).collect()
}

fn none() -> BTreeSet<ShardId> {
    BTreeSet::new()
}

/// Regions on members `1..=counts.len()` (Up, same version), holding shards numbered `1..`
/// region by region, as Akka's `createAllocations` numbers "001", "002", ...
fn view_of(counts: &[usize]) -> AllocationView {
    let mut next = 1;
    let regions = counts
        .iter()
        .enumerate()
        .map(|(i, &count)| {
            let shards = (next..next + count as u32).map(ShardId).collect();
            next += count as u32;
            RegionAllocation::new(m(i as u64 + 1), shards)
        })
        .collect();
    AllocationView::new(regions)
}

/// Shard counts per region, in view order (A, B, C, ...).
fn counts(view: &AllocationView) -> Vec<usize> {
    view.regions.iter().map(|r| r.shards.len()).collect()
}

fn sorted_counts(view: &AllocationView) -> Vec<usize> {
    let mut counts = counts(view);
    counts.sort_unstable();
    counts
}

/// Every allocated shard, sorted (the multiset of the table).
fn all_shards(view: &AllocationView) -> Vec<ShardId> {
    let mut shards: Vec<_> = view
        .regions
        .iter()
        .flat_map(|r| r.shards.iter().copied())
        .collect();
    shards.sort_unstable();
    shards
}

fn allocated(view: &AllocationView) -> BTreeSet<ShardId> {
    all_shards(view).into_iter().collect()
}

fn home_of(view: &AllocationView, shard: ShardId) -> Option<MemberId> {
    view.regions
        .iter()
        .find(|r| r.shards.contains(&shard))
        .map(|r| r.region)
}

/// Akka's `afterRebalance`: removes the rebalanced shards from their regions, then re-allocates
/// them in shard order through `allocate_shard` (the former home asks), appending each to the
/// chosen region.
fn after_rebalance(
    strategy: &mut dyn AllocationStrategy,
    view: &AllocationView,
    rebalanced: &BTreeSet<ShardId>,
) -> AllocationView {
    let mut next = view.clone();
    let mut former = BTreeMap::new();
    for region in &mut next.regions {
        Arc::make_mut(&mut region.shards).retain(|shard| {
            let moving = rebalanced.contains(shard);
            if moving {
                former.insert(*shard, region.region);
            }
            !moving
        });
    }
    for &shard in rebalanced {
        let requester = former[&shard];
        let home = strategy
            .allocate_shard(requester, shard, &next)
            .expect("a region");
        let region = next
            .regions
            .iter_mut()
            .find(|r| r.region == home)
            .expect("home in view");
        Arc::make_mut(&mut region.shards).push(shard);
    }
    next
}

/// Akka's strategy "without limits".
fn least() -> LeastShardStrategy {
    LeastShardStrategy::new(1000, 1.0)
}

/// One round on `view` with a least-shard strategy: asserts the result, returns the new table.
fn round(
    strategy: &mut LeastShardStrategy,
    view: &AllocationView,
    expected: BTreeSet<ShardId>,
) -> AllocationView {
    let result = strategy.rebalance(view, &none());
    assert_eq!(result, expected, "rebalance of {:?}", counts(view));
    after_rebalance(strategy, view, &result)
}

// ---------------------------------------------------------------------------------------------
// LeastShardStrategy: LeastShardAllocationStrategySpec, case by case
// ---------------------------------------------------------------------------------------------

#[test]
fn least_allocates_to_region_with_least_shards() {
    let view = view_of(&[1, 1, 0]);
    assert_eq!(least().allocate_shard(m(1), ShardId(3), &view), Some(m(3)));
}

#[test]
fn least_allocate_on_empty_view_is_none() {
    assert_eq!(
        least().allocate_shard(m(1), ShardId(1), &AllocationView::default()),
        None
    );
}

#[test]
fn least_rebalances_1_2_0() {
    let after = round(&mut least(), &view_of(&[1, 2, 0]), set([2]));
    assert_eq!(counts(&after), [1, 1, 1]);
}

#[test]
fn least_rebalances_2_0_0() {
    let after = round(&mut least(), &view_of(&[2, 0, 0]), set([1]));
    assert_eq!(counts(&after), [1, 1, 0]);
}

#[test]
fn least_does_not_rebalance_1_1_0() {
    assert_eq!(least().rebalance(&view_of(&[1, 1, 0]), &none()), none());
}

#[test]
fn least_rebalances_3_0_0() {
    let after = round(&mut least(), &view_of(&[3, 0, 0]), set([1, 2]));
    assert_eq!(counts(&after), [1, 1, 1]);
}

#[test]
fn least_rebalances_4_4_0() {
    let after = round(&mut least(), &view_of(&[4, 4, 0]), set([1, 5]));
    assert_eq!(counts(&after), [3, 3, 2]);
}

#[test]
fn least_rebalances_4_4_2_in_phase_2() {
    let after = round(&mut least(), &view_of(&[4, 4, 2]), set([1]));
    assert_eq!(counts(&after), [3, 4, 3]);
}

#[test]
fn least_rebalances_5_5_0_in_two_rounds() {
    let mut strategy = least();
    let after1 = round(&mut strategy, &view_of(&[5, 5, 0]), set([1, 6]));
    assert_eq!(counts(&after1), [4, 4, 2]);
    // Phase 2 finds the difference of 2.
    let after2 = round(&mut strategy, &after1, set([2]));
    assert_eq!(counts(&after2), [3, 4, 3]);
    assert_eq!(strategy.rebalance(&after2, &none()), none());
}

/// Akka names it "[50, 50, 0]" but builds `createAllocations(aCount = 50, cCount = 50)`.
#[test]
fn least_rebalances_50_0_50_in_two_rounds() {
    let mut strategy = least();
    let view = view_of(&[50, 0, 50]);
    let after1 = round(&mut strategy, &view, set((1..=16).chain(51..=66)));
    assert_eq!(counts(&after1), [34, 32, 34]);
    let after2 = round(&mut strategy, &after1, set([17]));
    assert_eq!(sorted_counts(&after2), [33, 33, 34]);
    assert_eq!(strategy.rebalance(&after2, &none()), none());
}

#[test]
fn least_respects_absolute_limit() {
    let mut strategy = LeastShardStrategy::new(3, 1.0);
    let after = round(&mut strategy, &view_of(&[1, 9, 0]), set([2, 3, 4]));
    assert_eq!(counts(&after), [2, 6, 2]);
}

#[test]
fn least_respects_relative_limit() {
    let mut strategy = LeastShardStrategy::new(5, 0.3);
    let after = round(&mut strategy, &view_of(&[1, 9, 0]), set([2, 3, 4]));
    assert_eq!(counts(&after), [2, 6, 2]);
}

#[test]
fn least_limit_formula() {
    let strategy = LeastShardStrategy::new(20, 0.1);
    assert_eq!(strategy.limit(0), 1);
    assert_eq!(strategy.limit(9), 1);
    assert_eq!(strategy.limit(10), 1);
    assert_eq!(strategy.limit(29), 2);
    assert_eq!(strategy.limit(1000), 20);
    assert_eq!(LeastShardStrategy::new(0, 1.0).limit(50), 1);
    assert_eq!(LeastShardStrategy::new(7, f64::NAN).limit(50), 1);
}

#[test]
fn least_does_not_rebalance_when_in_progress() {
    let view = view_of(&[10, 0, 0]);
    assert_eq!(least().rebalance(&view, &set([2, 3])), none());
    // Even a shard the view does not hold blocks the next round: one round at a time.
    assert_eq!(least().rebalance(&view, &set([99])), none());
    assert_eq!(least().rebalance(&view, &none()).len(), 6);
}

/// Akka's "prefer least shards, latest version, non downed, leaving or exiting nodes".
#[test]
fn least_prefers_fewest_shards_newest_version_not_leaving() {
    let region = |node, version: AppVersion, status, shards: &[u32]| RegionAllocation {
        region: m(node),
        shards: shards
            .iter()
            .copied()
            .map(ShardId)
            .collect::<Vec<_>>()
            .into(),
        status,
        app_version: version,
        up_number: 0,
    };
    let old = AppVersion(1, 0, 0);
    let new = AppVersion(1, 0, 1);
    let view = AllocationView::new(vec![
        region(1, old, MemberStatus::Up, &[]),      // old app version
        region(2, old, MemberStatus::Leaving, &[]), // leaving
        region(3, new, MemberStatus::Up, &[]),      // fewest, newest, up
        region(4, new, MemberStatus::Up, &[1]),     // newest, up
        region(5, new, MemberStatus::Up, &[2, 3]),  // most shards, up
    ]);
    let order: Vec<_> = view.by_suitability().iter().map(|r| r.region).collect();
    assert_eq!(order, [m(3), m(4), m(5), m(1), m(2)]);
    assert_eq!(least().allocate_shard(m(1), ShardId(9), &view), Some(m(3)));

    // A newer version wins over fewer shards; Up wins over Leaving with fewer shards.
    let view = AllocationView::new(vec![
        region(1, old, MemberStatus::Up, &[]),
        region(2, new, MemberStatus::Up, &[1, 2, 3]),
    ]);
    assert_eq!(least().allocate_shard(m(1), ShardId(9), &view), Some(m(2)));
    let view = AllocationView::new(vec![
        region(1, old, MemberStatus::Leaving, &[]),
        region(2, old, MemberStatus::Up, &[1, 2, 3]),
    ]);
    assert_eq!(least().allocate_shard(m(1), ShardId(9), &view), Some(m(2)));
    // Equal shard counts: the older member (lower up-number) wins.
    let mut view = view_of(&[1, 1]);
    view.regions[0].up_number = 5;
    view.regions[1].up_number = 2;
    assert_eq!(least().allocate_shard(m(1), ShardId(9), &view), Some(m(2)));
}

fn not_a_good_time() -> Vec<(&'static str, AllocationView)> {
    let mut mixed = view_of(&[5, 5, 0]);
    mixed.regions[1].app_version = AppVersion(1, 0, 1);
    let mut unreachable = view_of(&[5, 5, 0]);
    unreachable.any_unreachable = true;
    let mut joining = view_of(&[5, 5, 0]);
    joining.any_joining = true;
    vec![
        ("rolling update", mixed),
        ("unreachable", unreachable),
        ("joining", joining),
    ]
}

#[test]
fn least_does_not_rebalance_when_not_a_good_time() {
    for (why, view) in not_a_good_time() {
        for in_progress in [none(), set([1, 2]), set([1, 2, 51, 52])] {
            assert_eq!(least().rebalance(&view, &in_progress), none(), "{why}");
        }
    }
    assert_eq!(
        least().rebalance(&AllocationView::default(), &none()),
        none()
    );
}

/// A leaving region is last in suitability order, so with a limit its shards are taken last
/// (Akka iterates the sorted entries most suitable first).
#[test]
fn least_phase_1_walks_regions_most_suitable_first() {
    let mut view = view_of(&[6, 6, 0, 0]);
    view.regions[0].status = MemberStatus::Leaving;
    let mut strategy = LeastShardStrategy::new(2, 1.0);
    // optimal = ⌈12 / 3 Up regions⌉ = 4: A (leaving) offers 1, 2; B offers 7, 8; B comes first.
    assert_eq!(strategy.rebalance(&view, &none()), set([7, 8]));
}

/// A Leaving region is not room for shards (allocation never picks it while an Up region
/// exists), so it does not lower `optimal`: counting it made every round move shards off the
/// Up region and straight back (allocation fuzz target, regression).
#[test]
fn least_does_not_count_leaving_regions_as_room() {
    let mut view = view_of(&[0, 6]);
    view.regions[0].status = MemberStatus::Leaving;
    let mut strategy = LeastShardStrategy::new(10, 1.0);
    assert_eq!(strategy.rebalance(&view, &none()), none());
    // The shards a Leaving region holds still count, and are moved off it when over optimal.
    let mut view = view_of(&[6, 0, 0]);
    view.regions[0].status = MemberStatus::Leaving;
    assert_eq!(strategy.rebalance(&view, &none()), set([1, 2, 3]));
    // Every region leaving: they are all the room there is.
    let mut view = view_of(&[6, 0]);
    view.regions[0].status = MemberStatus::Leaving;
    view.regions[1].status = MemberStatus::Leaving;
    assert_eq!(strategy.rebalance(&view, &none()), set([1, 2, 3]));
}

// ---------------------------------------------------------------------------------------------
// LeastShardStrategy: LeastShardAllocationStrategyRandomizedSpec as properties
// ---------------------------------------------------------------------------------------------

/// Runs rounds until max − min ≤ 1, checking each round; returns the rounds needed.
fn converge(strategy: &mut LeastShardStrategy, counts: &[usize], max_rounds: usize) -> usize {
    let mut view = view_of(counts);
    let shards = all_shards(&view);
    for round in 1..=max_rounds {
        let result = strategy.rebalance(&view, &none());
        assert!(
            result.is_subset(&allocated(&view)),
            "round {round}: {result:?} not allocated"
        );
        assert!(
            result.len() <= strategy.limit(shards.len()),
            "round {round}: over the limit"
        );
        view = after_rebalance(strategy, &view, &result);
        assert_eq!(
            all_shards(&view),
            shards,
            "round {round}: shards not conserved"
        );
        let per_region = self::counts(&view);
        let (min, max) = (
            per_region.iter().min().unwrap(),
            per_region.iter().max().unwrap(),
        );
        if max - min <= 1 {
            // Balanced: the next round moves nothing.
            assert_eq!(
                strategy.rebalance(&view, &none()),
                none(),
                "balanced {per_region:?}"
            );
            return round;
        }
    }
    panic!(
        "{counts:?} not balanced in {max_rounds} rounds: {:?}",
        self::counts(&view)
    );
}

proptest! {
    #[test]
    fn least_converges_20_regions_20_shards_in_2_rounds(
        counts in prop::collection::vec(0usize..=20, 1..=20),
    ) {
        converge(&mut LeastShardStrategy::new(100_000, 1.0), &counts, 2);
    }

    #[test]
    fn least_converges_5_regions_100_shards_in_2_rounds(
        counts in prop::collection::vec(0usize..100, 1..=5),
    ) {
        converge(&mut LeastShardStrategy::new(100_000, 1.0), &counts, 2);
    }

    #[test]
    fn least_converges_with_random_limits_in_20_rounds(
        counts in prop::collection::vec(0usize..=20, 1..=20),
        absolute in 6u32..=12,
        relative in 0.05f64..1.0,
    ) {
        converge(&mut LeastShardStrategy::new(absolute, relative), &counts, 20);
    }

    #[test]
    fn least_never_rebalances_during_a_round(
        counts in prop::collection::vec(0usize..=20, 1..=20),
        in_progress in prop::collection::btree_set(0u32..500, 1..5),
    ) {
        let view = view_of(&counts);
        let in_progress = in_progress.into_iter().map(ShardId).collect();
        prop_assert_eq!(least().rebalance(&view, &in_progress), none());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]

    #[test]
    fn least_converges_20_regions_200_shards_in_5_rounds(
        counts in prop::collection::vec(0usize..200, 1..=20),
    ) {
        converge(&mut LeastShardStrategy::new(100_000, 1.0), &counts, 5);
    }

    #[test]
    fn least_converges_100_regions_1000_shards_in_5_rounds(
        counts in prop::collection::vec(0usize..1000, 1..=100),
    ) {
        converge(&mut LeastShardStrategy::new(100_000, 1.0), &counts, 5);
    }
}

// ---------------------------------------------------------------------------------------------
// ConsistentHashingStrategy
// ---------------------------------------------------------------------------------------------

fn empty_regions(nodes: &[u64]) -> AllocationView {
    AllocationView::new(
        nodes
            .iter()
            .map(|&n| RegionAllocation::new(m(n), vec![]))
            .collect(),
    )
}

/// Where `strategy` puts each of `shards` in `view`.
fn homes(
    strategy: &mut dyn AllocationStrategy,
    view: &AllocationView,
    shards: impl IntoIterator<Item = u32>,
) -> BTreeMap<ShardId, MemberId> {
    shards
        .into_iter()
        .map(|s| {
            (
                ShardId(s),
                strategy
                    .allocate_shard(m(99), ShardId(s), view)
                    .expect("a home"),
            )
        })
        .collect()
}

/// Allocates `shards` one by one into `view` (appending), as a coordinator would.
fn allocate_all(
    strategy: &mut dyn AllocationStrategy,
    mut view: AllocationView,
    shards: impl IntoIterator<Item = u32>,
) -> AllocationView {
    for shard in shards.into_iter().map(ShardId) {
        let requester = view.regions[0].region;
        let home = strategy
            .allocate_shard(requester, shard, &view)
            .expect("a home");
        let region = view.regions.iter_mut().find(|r| r.region == home);
        Arc::make_mut(&mut region.expect("in view").shards).push(shard);
    }
    view
}

/// Pins the ring scheme documented in the module: byte strings and hash function.
#[test]
fn hashing_ring_scheme_is_pinned() {
    assert_eq!(
        ConsistentHashingStrategy::shard_position(ShardId(42)),
        murmur2(b"42")
    );
    assert_eq!(
        ConsistentHashingStrategy::vnode_position(MemberId::new(3, 9), 7),
        murmur2(b"3-7")
    );
    // The owner is the lowest vnode at or after the shard's position, wrapping around.
    let view = empty_regions(&[1, 2, 3]);
    let mut points: Vec<(u32, MemberId)> = (1..=3)
        .flat_map(|n| {
            (0..ConsistentHashingStrategy::VIRTUAL_NODES)
                .map(move |v| (murmur2(format!("{n}-{v}").as_bytes()), m(n)))
        })
        .collect();
    points.sort();
    let mut strategy = ConsistentHashingStrategy::new(0);
    for shard in 0..200 {
        let position = murmur2(shard.to_string().as_bytes());
        let expected = points
            .iter()
            .find(|(p, _)| *p >= position)
            .unwrap_or(&points[0])
            .1;
        assert_eq!(
            strategy.owner(ShardId(shard), &view),
            Some(expected),
            "shard {shard}"
        );
    }
    // Golden homes of shards 0..12 over nodes 1, 2, 3.
    let golden: Vec<u64> = (0..12)
        .map(|s| strategy.owner(ShardId(s), &view).unwrap().node.0)
        .collect();
    assert_eq!(golden, GOLDEN_HOMES);
}

const GOLDEN_HOMES: [u64; 12] = [1, 2, 3, 3, 3, 3, 3, 1, 3, 1, 3, 2];

#[test]
fn hashing_spreads_shards_over_all_regions() {
    let view = empty_regions(&[1, 2, 3, 4]);
    let homes = homes(&mut ConsistentHashingStrategy::new(0), &view, 0..400);
    let used: BTreeSet<_> = homes.values().copied().collect();
    assert_eq!(used.len(), 4);
    assert_eq!(
        ConsistentHashingStrategy::new(0).allocate_shard(m(1), ShardId(1), &empty_regions(&[])),
        None
    );
}

#[test]
fn hashing_ignores_incarnation_and_keeps_newest_of_a_node() {
    let mut strategy = ConsistentHashingStrategy::new(0);
    let before = homes(&mut strategy, &empty_regions(&[1, 2, 3]), 0..100);
    // Node 2 restarted: same positions, so the new incarnation gets exactly its old shards.
    let mut restarted = empty_regions(&[1, 2, 3]);
    restarted.regions[1].region = MemberId::new(2, 2);
    let after = homes(&mut strategy, &restarted, 0..100);
    for (shard, home) in &before {
        let expected = if home.node.0 == 2 {
            MemberId::new(2, 2)
        } else {
            *home
        };
        assert_eq!(after[shard], expected);
    }
    // Both incarnations present: the newest takes the node's shards.
    restarted
        .regions
        .insert(1, RegionAllocation::new(m(2), vec![]));
    assert_eq!(homes(&mut strategy, &restarted, 0..100), after);
}

#[test]
fn hashing_allocates_to_mostly_same_regions_when_node_removed() {
    let mut strategy = ConsistentHashingStrategy::new(0);
    let before = homes(&mut strategy, &empty_regions(&[1, 2, 3]), 0..300);
    let after = homes(&mut strategy, &empty_regions(&[1, 2]), 0..300);
    let mut moved = 0;
    for (shard, home) in &before {
        if *home == m(3) {
            assert_ne!(after[shard], m(3));
            moved += 1;
        } else {
            assert_eq!(
                after[shard], *home,
                "{shard:?} moved although its region stayed"
            );
        }
    }
    assert!(moved > 0);
}

#[test]
fn hashing_allocates_to_mostly_same_regions_when_node_added() {
    let mut strategy = ConsistentHashingStrategy::new(0);
    let before = homes(&mut strategy, &empty_regions(&[1, 2, 3]), 0..300);
    let after = homes(&mut strategy, &empty_regions(&[1, 2, 3, 4]), 0..300);
    let mut moved = 0;
    for (shard, home) in &before {
        if after[shard] != *home {
            assert_eq!(
                after[shard],
                m(4),
                "{shard:?} moved, but not to the new region"
            );
            moved += 1;
        }
    }
    assert!(moved > 0);
}

#[test]
fn hashing_rebalances_only_on_node_change() {
    let mut strategy = ConsistentHashingStrategy::new(0);
    let view = allocate_all(&mut strategy, empty_regions(&[1, 2, 3]), 0..100);
    assert_eq!(strategy.rebalance(&view, &none()), none());

    // Region 4 joins: exactly the shards now hashed to it move.
    let mut grown = view.clone();
    grown.regions.push(RegionAllocation::new(m(4), vec![]));
    let expected: BTreeSet<_> = homes(&mut strategy, &grown, 0..100)
        .into_iter()
        .filter(|(_, h)| *h == m(4))
        .map(|(s, _)| s)
        .collect();
    assert!(!expected.is_empty());
    let result = strategy.rebalance(&grown, &none());
    assert_eq!(result, expected);
    let settled = after_rebalance(&mut strategy, &grown, &result);
    assert_eq!(strategy.rebalance(&settled, &none()), none());
    assert_eq!(all_shards(&settled), all_shards(&view));

    // Region 3 leaves (its shards are deallocated with it): nothing else moves.
    let mut shrunk = view;
    shrunk.regions.pop();
    assert_eq!(strategy.rebalance(&shrunk, &none()), none());
}

/// Akka's "not rebalance more than limit" and "not rebalance those that are in progress".
#[test]
fn hashing_respects_limit_and_in_progress() {
    let mut view = empty_regions(&[1, 2, 3, 4]);
    view.regions[0].shards = (0..40).map(ShardId).collect::<Vec<_>>().into();
    let misplaced: Vec<ShardId> = view.regions[0]
        .shards
        .iter()
        .copied()
        .filter(|&s| ConsistentHashingStrategy::new(0).owner(s, &view) != Some(m(1)))
        .collect();
    assert!(misplaced.len() > 4);
    let mut strategy = ConsistentHashingStrategy::new(2);
    let first: BTreeSet<_> = misplaced[..2].iter().copied().collect();
    assert_eq!(strategy.rebalance(&view, &none()), first);
    let second: BTreeSet<_> = misplaced[2..4].iter().copied().collect();
    assert_eq!(strategy.rebalance(&view, &first), second);
    let all: BTreeSet<_> = misplaced.iter().copied().collect();
    assert_eq!(
        ConsistentHashingStrategy::new(0).rebalance(&view, &none()),
        all
    );
    assert_eq!(
        ConsistentHashingStrategy::new(0).rebalance(&view, &all),
        none()
    );
}

/// Akka walks regions sorted by address, so with a limit the lowest member's misplaced shards go
/// first, whatever order the view lists them in.
#[test]
fn hashing_rebalance_walks_regions_in_member_id_order() {
    let mut view = empty_regions(&[2, 1, 3, 4]);
    view.regions[0].shards = (0..20).map(ShardId).collect::<Vec<_>>().into();
    view.regions[1].shards = (20..40).map(ShardId).collect::<Vec<_>>().into();
    let first_misplaced = |strategy: &mut ConsistentHashingStrategy, region: usize| {
        let holder = view.regions[region].region;
        view.regions[region]
            .shards
            .iter()
            .copied()
            .find(|&s| strategy.owner(s, &view) != Some(holder))
            .expect("a misplaced shard")
    };
    let mut strategy = ConsistentHashingStrategy::new(1);
    let expected = first_misplaced(&mut strategy, 1);
    assert_eq!(
        strategy.rebalance(&view, &none()),
        BTreeSet::from([expected])
    );
    // The first misplaced shard of member 2 is not chosen although member 2 is listed first.
    assert_ne!(first_misplaced(&mut strategy, 0), expected);
}

#[test]
fn hashing_does_not_rebalance_when_not_a_good_time() {
    for (why, mut view) in not_a_good_time() {
        view.regions.push(RegionAllocation::new(m(4), vec![]));
        assert_eq!(
            ConsistentHashingStrategy::new(0).rebalance(&view, &none()),
            none(),
            "{why}"
        );
        // The same table in a healthy cluster does rebalance.
        let mut healthy = AllocationView::new(view.regions);
        for r in &mut healthy.regions {
            r.app_version = AppVersion::default();
        }
        assert!(
            !ConsistentHashingStrategy::new(0)
                .rebalance(&healthy, &none())
                .is_empty(),
            "{why}"
        );
    }
}

proptest! {
    #[test]
    fn hashing_is_stable_under_membership_change(
        nodes in prop::collection::btree_set(1u64..50, 2..8),
        extra in 50u64..60,
        shards in prop::collection::btree_set(0u32..2000, 1..200),
    ) {
        let nodes: Vec<u64> = nodes.into_iter().collect();
        let mut strategy = ConsistentHashingStrategy::new(0);
        let base = homes(&mut strategy, &empty_regions(&nodes), shards.iter().copied());
        // Remove the first node: only its shards change home.
        let removed = homes(&mut strategy, &empty_regions(&nodes[1..]), shards.iter().copied());
        for (shard, home) in &base {
            if *home == m(nodes[0]) {
                prop_assert_ne!(removed[shard], m(nodes[0]));
            } else {
                prop_assert_eq!(removed[shard], *home);
            }
        }
        // Add a node: only shards moving to it change home.
        let mut grown = nodes;
        grown.push(extra);
        let added = homes(&mut strategy, &empty_regions(&grown), shards.iter().copied());
        for (shard, home) in &base {
            prop_assert!(added[shard] == *home || added[shard] == m(extra));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// ExternalStrategy
// ---------------------------------------------------------------------------------------------

fn external(desired: &[(u32, u64)]) -> ExternalStrategy {
    let mut strategy = ExternalStrategy::new();
    for &(shard, node) in desired {
        strategy.set_desired_location(ShardId(shard), NodeId(node));
    }
    strategy
}

#[test]
fn external_allocates_to_desired_node() {
    let view = view_of(&[1, 1, 0]);
    let mut strategy = external(&[(7, 3), (8, 9)]);
    assert_eq!(strategy.desired_location(ShardId(7)), Some(NodeId(3)));
    assert_eq!(strategy.allocate_shard(m(1), ShardId(7), &view), Some(m(3)));
    // The newest incarnation of the desired node.
    let mut two = view.clone();
    two.regions
        .push(RegionAllocation::new(MemberId::new(3, 4), vec![]));
    assert_eq!(
        strategy.allocate_shard(m(1), ShardId(7), &two),
        Some(MemberId::new(3, 4))
    );
    // Desired node without a region, or no desired node: the requester.
    assert_eq!(strategy.allocate_shard(m(2), ShardId(8), &view), Some(m(2)));
    assert_eq!(strategy.allocate_shard(m(1), ShardId(9), &view), Some(m(1)));
    // Requester not in the view: the most suitable region.
    assert_eq!(strategy.allocate_shard(m(5), ShardId(9), &view), Some(m(3)));
    assert_eq!(
        strategy.allocate_shard(m(1), ShardId(7), &AllocationView::default()),
        None
    );
    // A later desired location replaces the earlier one.
    strategy.set_desired_location(ShardId(7), NodeId(2));
    assert_eq!(strategy.allocate_shard(m(1), ShardId(7), &view), Some(m(2)));
}

#[test]
fn external_rebalances_only_misplaced_shards_with_present_desired_nodes() {
    // A: 1, 2, 3; B: 4, 5; C: 6.
    let view = view_of(&[3, 2, 1]);
    let mut strategy = external(&[
        (1, 1),  // already home
        (2, 3),  // misplaced → C
        (3, 9),  // desired node absent: ignored
        (4, 1),  // misplaced → A
        (6, 2),  // misplaced → B, but in progress below
        (10, 2), // not allocated: ignored
    ]);
    assert_eq!(strategy.rebalance(&view, &none()), set([2, 4, 6]));
    assert_eq!(strategy.rebalance(&view, &set([6])), set([2, 4]));
    let after = after_rebalance(&mut strategy, &view, &set([2, 4, 6]));
    assert_eq!(home_of(&after, ShardId(2)), Some(m(3)));
    assert_eq!(home_of(&after, ShardId(4)), Some(m(1)));
    assert_eq!(home_of(&after, ShardId(6)), Some(m(2)));
    assert_eq!(strategy.rebalance(&after, &none()), none());
    // Node 9 appears: shard 3 now moves there.
    let mut grown = after;
    grown.regions.push(RegionAllocation::new(m(9), vec![]));
    assert_eq!(strategy.rebalance(&grown, &none()), set([3]));
    assert_eq!(ExternalStrategy::new().rebalance(&grown, &none()), none());
}

/// Akka's external strategy never consults `isAGoodTimeToRebalance`.
#[test]
fn external_ignores_rebalance_timing_like_akka() {
    for (why, view) in not_a_good_time() {
        assert_eq!(
            external(&[(1, 3)]).rebalance(&view, &none()),
            set([1]),
            "{why}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Every strategy through `strategy_for`
// ---------------------------------------------------------------------------------------------

fn arb_config() -> impl Strategy<Value = AllocationStrategyConfig> {
    prop_oneof![
        (0u32..30, 0.0f64..1.5).prop_map(|(absolute_limit, relative_limit)| {
            AllocationStrategyConfig::LeastShard {
                absolute_limit,
                relative_limit,
            }
        }),
        (0u32..5).prop_map(|rebalance_limit| {
            AllocationStrategyConfig::ConsistentHashing { rebalance_limit }
        }),
        Just(AllocationStrategyConfig::External),
    ]
}

fn arb_view() -> impl Strategy<Value = AllocationView> {
    let region = (1u64..=6, 1u64..=2, any::<bool>(), 0u32..=1, 0u64..=3);
    (
        prop::collection::vec(region, 0..=6),
        prop::collection::vec(any::<prop::sample::Index>(), 0..=40),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(regions, homes, any_unreachable, any_joining)| {
            let mut regions: Vec<RegionAllocation> = regions
                .into_iter()
                .map(
                    |(node, incarnation, leaving, minor, up_number)| RegionAllocation {
                        region: MemberId::new(node, incarnation),
                        shards: Arc::default(),
                        status: if leaving {
                            MemberStatus::Leaving
                        } else {
                            MemberStatus::Up
                        },
                        app_version: AppVersion(1, minor, 0),
                        up_number,
                    },
                )
                .collect();
            regions.sort_by_key(|r| r.region);
            regions.dedup_by_key(|r| r.region);
            if !regions.is_empty() {
                for (i, home) in homes.iter().enumerate() {
                    let len = regions.len();
                    Arc::make_mut(&mut regions[home.index(len)].shards).push(ShardId(i as u32 * 3));
                }
            }
            AllocationView {
                regions,
                any_unreachable,
                any_joining,
            }
        })
}

proptest! {
    #[test]
    fn every_strategy_answers_within_the_view(
        config in arb_config(),
        view in arb_view(),
        desired in prop::collection::vec((0u32..130, 1u64..=8), 0..20),
        in_progress in prop::collection::btree_set(0u32..130, 0..10),
        requester in (1u64..=8, 1u64..=2),
        shard in 0u32..130,
    ) {
        let mut strategy = strategy_for(&config);
        for (shard, node) in desired {
            strategy.set_desired_location(ShardId(shard), NodeId(node));
        }
        let requester = MemberId::new(requester.0, requester.1);
        let home = strategy.allocate_shard(requester, ShardId(shard), &view);
        prop_assert_eq!(home.is_some(), !view.regions.is_empty());
        if let Some(home) = home {
            prop_assert!(view.regions.iter().any(|r| r.region == home), "{home} not in view");
        }
        let in_progress: BTreeSet<ShardId> = in_progress.into_iter().map(ShardId).collect();
        let result = strategy.rebalance(&view, &in_progress);
        prop_assert!(result.is_subset(&allocated(&view)), "{result:?} not allocated");
        prop_assert!(result.is_disjoint(&in_progress), "{result:?} already in progress");
        // Pure: the same question gets the same answer.
        prop_assert_eq!(strategy.rebalance(&view, &in_progress), result);
    }
}
