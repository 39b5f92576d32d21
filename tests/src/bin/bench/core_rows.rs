//! The core's figures: routing, allocation, a rebalance round and memory, each against the
//! least work that does the same job (timed in the same run).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::hint::black_box;
use std::time::{Duration, Instant as WallClock};

use shoal_core::allocation::{
    AllocationStrategy, AllocationView, LeastShardStrategy, RegionAllocation,
};
use shoal_core::{AllocationStrategyConfig, EntityId, MemberId, Payload, ShardId};

use crate::alloc::live_bytes;
use crate::lab::{Lab, one_entity_per_shard};
use crate::table::{Row, Target};

/// Regions the allocation rows spread shards over.
const REGIONS: u64 = 100;
/// Regions that join before the rebalance round.
const JOINING: u64 = 10;

fn ids(n: usize) -> Vec<EntityId> {
    (0..n).map(|i| EntityId::new(format!("user-{i}"))).collect()
}

/// Nanoseconds per message to route `messages` tells to `entities` active entities of shards
/// hosted on the only node; and the baseline: the same `Tell` built, its entity looked up in a
/// hash map and the payload pushed onto (and popped from) its queue.
pub(crate) fn routing(entities: usize, messages: usize) -> (f64, f64) {
    let ids = ids(entities);
    let mut lab = Lab::new(1, 1000, AllocationStrategyConfig::default());
    for e in &ids {
        lab.tell(1, e);
    }
    lab.pump();
    lab.io[0].delivered = 0;
    let start = WallClock::now();
    for i in 0..messages {
        let input = lab.tell_input(&ids[i % entities]);
        lab.drivers[0].handle_input(lab.now, input, &mut lab.io[0]);
    }
    let core = start.elapsed().as_nanos() as f64 / messages as f64;
    assert_eq!(lab.io[0].delivered, messages, "a routed message was lost");

    let mut queues: HashMap<EntityId, VecDeque<Payload>> =
        ids.iter().map(|e| (e.clone(), VecDeque::new())).collect();
    let start = WallClock::now();
    for i in 0..messages {
        let (entity, payload) = (ids[i % entities].clone(), Payload(vec![7; 32]));
        let queue = queues.get_mut(black_box(&entity)).expect("known entity");
        queue.push_back(payload);
        black_box(queue.pop_front());
    }
    let baseline = start.elapsed().as_nanos() as f64 / messages as f64;
    (core, baseline)
}

/// Seconds to allocate `shards` shards over [`REGIONS`] regions through the protocol (a first
/// message to one entity of each, from every node in turn, until each is delivered), and the
/// baseline: the least-shard strategy deciding the same placements on its own. Returns the
/// lab, ready for the rebalance round.
fn allocation(shards: u32) -> (f64, f64, Lab) {
    let entities = one_entity_per_shard(shards);
    let mut lab = Lab::new(REGIONS, shards, AllocationStrategyConfig::default());
    let start = WallClock::now();
    for (i, e) in entities.iter().enumerate() {
        lab.tell(i as u64 % REGIONS + 1, e);
    }
    lab.pump();
    let core = start.elapsed().as_secs_f64();
    let delivered: usize = lab.io.iter().map(|io| io.delivered).sum();
    assert_eq!(delivered, entities.len(), "a first message was lost");
    assert_eq!(lab.hosted().iter().sum::<usize>(), shards as usize);

    let mut view = AllocationView::new(
        (1..=REGIONS)
            .map(|n| RegionAllocation::new(MemberId::new(n, 1), Vec::new()))
            .collect(),
    );
    let mut strategy = LeastShardStrategy::new(20, 0.1);
    let start = WallClock::now();
    for s in 0..shards {
        let requester = MemberId::new(u64::from(s) % REGIONS + 1, 1);
        let home = strategy
            .allocate_shard(requester, ShardId(s), &view)
            .expect("a region");
        let region = view
            .regions
            .iter_mut()
            .find(|r| r.region == home)
            .expect("offered");
        std::sync::Arc::make_mut(&mut region.shards).push(ShardId(s));
    }
    let baseline = start.elapsed().as_secs_f64();
    (core, baseline, lab)
}

/// Seconds for one rebalance round after [`JOINING`] regions join `lab` (from the tick to the
/// moved shards started on their new homes), with the shards it moved; and the baseline: the
/// strategy choosing the shards to move on the same table.
fn rebalance_round(mut lab: Lab) -> (f64, f64, usize) {
    lab.grow(REGIONS + JOINING);
    let table: Vec<RegionAllocation> = (1..=REGIONS + JOINING)
        .map(|n| {
            let shards = lab.drivers[(n - 1) as usize]
                .node()
                .hosted_shards(&lab.entity_type);
            RegionAllocation::new(MemberId::new(n, 1), shards)
        })
        .collect();
    let view = AllocationView::new(table);
    let mut strategy = LeastShardStrategy::new(20, 0.1);
    let start = WallClock::now();
    let chosen = black_box(strategy.rebalance(&view, &BTreeSet::new()));
    let baseline = start.elapsed().as_secs_f64();
    assert!(!chosen.is_empty(), "the strategy moves nothing");

    // The coordinator's rebalance tick: the default interval is 10 s; stepping 10 s at once
    // fires it with every other timer due, as a quiet cluster would.
    let start = WallClock::now();
    lab.advance(Duration::from_secs(10));
    let core = start.elapsed().as_secs_f64();
    let moved: usize = lab.hosted()[REGIONS as usize..].iter().sum();
    assert_eq!(moved, chosen.len(), "the round moved other shards");
    (core, baseline, moved)
}

/// Heap bytes the core holds per idle entity, over `entities` entities that each received one
/// message (their shards already allocated, so only the entities are new).
pub(crate) fn bytes_per_idle_entity(entities: usize) -> f64 {
    let mut lab = Lab::new(1, 1000, AllocationStrategyConfig::default());
    for e in one_entity_per_shard(1000) {
        lab.tell(1, &e);
    }
    lab.pump();
    let ids: Vec<EntityId> = (0..entities)
        .map(|i| EntityId::new(format!("idle-{i}")))
        .collect();
    let before = live_bytes();
    for e in &ids {
        lab.tell(1, e);
    }
    lab.pump();
    let held = live_bytes() - before;
    assert_eq!(lab.io[0].delivered, 1000 + entities);
    held as f64 / entities as f64
}

/// The baseline for the core's bytes per entity: the routing baseline's map (id to an empty
/// queue) over the same ids, whose own bytes are not counted in either.
fn hash_map_bytes_per_entity(entities: usize) -> f64 {
    let ids: Vec<EntityId> = (0..entities)
        .map(|i| EntityId::new(format!("idle-{i}")))
        .collect();
    let before = live_bytes();
    let map: HashMap<EntityId, VecDeque<Payload>> =
        ids.iter().map(|e| (e.clone(), VecDeque::new())).collect();
    let held = live_bytes() - before;
    black_box(map);
    held as f64 / entities as f64
}

/// Heap bytes per message a region buffers while its shard's home is unknown.
fn bytes_per_buffered_message(messages: usize) -> f64 {
    let ids = ids(messages);
    let mut lab = Lab::new(2, 1000, AllocationStrategyConfig::default());
    let before = live_bytes();
    for e in &ids {
        lab.tell(2, e);
    }
    let held = live_bytes() - before;
    assert_eq!(
        lab.drivers[1].node().buffered(&lab.entity_type),
        messages,
        "the messages were not buffered"
    );
    held as f64 / messages as f64
}

/// Every core row.
pub(crate) fn rows(quick: bool) -> Vec<Row> {
    let mut rows = Vec::new();
    let messages = if quick { 200_000 } else { 2_000_000 };
    let (mut core, mut baseline) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..crate::ROUNDS {
        let (c, b) = routing(10_000, messages);
        (core, baseline) = (core.min(c), baseline.min(b));
    }
    rows.push(Row::ratio(
        "core: route a tell to an active entity (10,000 entities, 32 B)",
        format!("{core:.0} ns/msg"),
        format!("hash-map lookup + queue push {baseline:.0} ns/msg"),
        core / baseline,
        Target::AtMost(1.5),
    ));

    let shards = if quick { 10_000 } else { 100_000 };
    let (core, baseline, lab) = allocation(shards);
    rows.push(Row::ratio(
        &format!("core: allocate {shards} shards over {REGIONS} regions (first message each)"),
        format!("{:.0} ms", core * 1e3),
        format!("least-shard strategy alone {:.1} ms", baseline * 1e3),
        core / baseline,
        Target::None,
    ));
    let (core, baseline, moved) = rebalance_round(lab);
    rows.push(Row::ratio(
        &format!("core: one rebalance round after {JOINING} regions join ({moved} shards move)"),
        format!("{:.2} ms", core * 1e3),
        format!("strategy's choice alone {:.3} ms", baseline * 1e3),
        core / baseline,
        Target::None,
    ));

    let entities = if quick { 20_000 } else { 100_000 };
    let per_entity = bytes_per_idle_entity(entities);
    let baseline = hash_map_bytes_per_entity(entities);
    rows.push(Row::ratio(
        &format!("core: heap bytes per idle entity ({entities} entities)"),
        format!("{per_entity:.0} B"),
        format!("hash map of id to empty queue {baseline:.0} B"),
        per_entity / baseline,
        Target::Value("≤ 64 B", per_entity <= 64.0),
    ));
    let per_message = bytes_per_buffered_message(if quick { 20_000 } else { 100_000 });
    rows.push(Row::ratio(
        "core: heap bytes per buffered message (32 B payload, home unknown)",
        format!("{per_message:.0} B"),
        "the payload's 32 B".to_owned(),
        per_message / 32.0,
        Target::None,
    ));
    rows
}

/// Allocation seconds per shard at each size (100 regions), for the shards curve.
pub(crate) fn allocation_curve(sizes: &[u32]) -> Vec<(f64, f64)> {
    sizes
        .iter()
        .map(|&shards| {
            let (core, _, _) = allocation(shards);
            (f64::from(shards), core * 1e6 / f64::from(shards))
        })
        .collect()
}
