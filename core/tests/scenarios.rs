//! Effect traces of the seeds' scenarios and the main protocol flows, pinned with insta.
//! Each trace lists, in order, every message that crossed the network, every entity effect
//! and every event, stamped with virtual time.

use std::time::Duration;

use sim::scripted::{Cluster, StopPolicy, config, entity_in_shard, type_config};

use shoal_core::Command;

/// Seeds' Scenario 1: a message for an unknown shard that the coordinator places locally.
#[test]
fn scenario_1_unknown_shard_allocated_to_local_region() {
    let mut c = Cluster::with_nodes(2, 10);
    // The coordinator runs on node 1 (the oldest); give node 1 a shard first so that
    // least-shard places the next new shard on node 2, where the message arrives.
    c.tell(1, &entity_in_shard(0, 10), "M0");
    c.settle();
    c.clear_trace();
    let e1 = entity_in_shard(1, 10);
    c.tell(2, &e1, "M1");
    c.settle();
    c.tell(2, &e1, "M2");
    c.settle();
    assert_eq!(c.inbox(&e1), vec![(2, "M1".into()), (2, "M2".into())]);
    insta::assert_snapshot!(c.trace().join("\n"));
}

/// Seeds' Scenario 2: a message for an unknown shard that lives in a remote region.
#[test]
fn scenario_2_unknown_shard_in_remote_region() {
    let mut c = Cluster::with_nodes(2, 10);
    let e1 = entity_in_shard(1, 10);
    c.tell(1, &e1, "M1");
    c.settle();
    c.clear_trace();
    // Node 1 now hosts one shard, so least-shard places the next one on node 2.
    let e2 = entity_in_shard(2, 10);
    c.tell(1, &e2, "M2");
    c.settle();
    c.tell(1, &e2, "M3");
    c.settle();
    assert_eq!(c.inbox(&e2), vec![(2, "M2".into()), (2, "M3".into())]);
    insta::assert_snapshot!(c.trace().join("\n"));
}

/// Node 1 hosts four shards; node 2 joins; the rebalance tick moves one shard to node 2
/// (limit: max(1, min(10 % of 4, 20)) = 1). Messages sent from both nodes while the shard's
/// entity is stopping are buffered and reach the new incarnation on node 2, in order, once.
#[test]
fn rebalance_handoff_moves_a_shard_without_losing_messages() {
    let mut c = Cluster::with_nodes(1, 4);
    c.one_entity_per_shard(1, 4, "before");
    c.add_node(config(2, type_config(4)));
    c.publish_view();
    c.settle();
    c.set_behaviour(StopPolicy::Manual);
    c.clear_trace();
    c.advance(Duration::from_secs(10));
    // The handoff is waiting for the entity of the moving shard to stop.
    let moving = c
        .trace()
        .iter()
        .find_map(|l| l.strip_prefix("10.000s n1 stop "))
        .map(|l| l.split(' ').next().unwrap().to_owned());
    let moving = moving.expect("one entity is being stopped for the handoff");
    c.tell(1, &moving, "during-1");
    c.tell(2, &moving, "during-2");
    c.settle();
    c.complete_stops();
    c.tell(2, &moving, "after");
    c.settle();
    // Per-sender order: node 1 sent "before" then "during-1"; node 2 "during-2" then "after".
    let inbox = c.inbox(&moving);
    let payloads: Vec<&str> = inbox.iter().map(|(_, p)| p.as_str()).collect();
    let position = |p: &str| payloads.iter().position(|x| *x == p).expect("delivered");
    assert_eq!(payloads.len(), 4, "each message exactly once: {payloads:?}");
    assert!(position("before") < position("during-1"));
    assert!(position("during-2") < position("after"));
    assert_eq!(inbox[0].0, 1, "the first incarnation ran on node 1");
    assert!(
        inbox[1..].iter().all(|(n, _)| *n == 2),
        "after the handoff, node 2"
    );
    assert_eq!(
        c.hosting().values().map(Vec::len).collect::<Vec<_>>(),
        [3, 1]
    );
    assert_eq!(c.dead_letters(), 0);
    insta::assert_snapshot!(c.trace().join("\n"));
}

/// Node 2 shuts its region down gracefully: its shards are handed off to node 1 (not limited by
/// rebalance limits), then the region reports `RegionStopped`.
#[test]
fn graceful_shutdown_hands_off_every_shard() {
    let mut c = Cluster::with_nodes(2, 4);
    let ids = c.one_entity_per_shard(1, 4, "one");
    assert_eq!(
        c.hosting().values().map(Vec::len).collect::<Vec<_>>(),
        [2, 2]
    );
    c.clear_trace();
    c.command(2, Command::GracefulShutdown { entity_type: None });
    c.settle();
    for id in &ids {
        c.tell(1, id, "two");
    }
    c.settle();
    assert_eq!(
        c.hosting().values().map(Vec::len).collect::<Vec<_>>(),
        [4, 0]
    );
    assert!(
        c.node(2)
            .is_region_stopped(&shoal_core::EntityType::new(sim::scripted::TYPE))
    );
    for id in &ids {
        assert_eq!(
            c.inbox(id)
                .iter()
                .map(|(_, p)| p.as_str())
                .collect::<Vec<_>>(),
            ["one", "two"]
        );
    }
    insta::assert_snapshot!(c.trace().join("\n"));
}

/// An entity passivates; messages arriving while it stops are buffered and delivered, in
/// order, to a new incarnation once it has stopped.
#[test]
fn passivation_redelivers_buffered_messages() {
    let mut c = Cluster::with_nodes(1, 4);
    c.tell(1, "a", "m1");
    c.settle();
    c.set_behaviour(StopPolicy::Manual);
    c.clear_trace();
    c.passivate(1, "a");
    c.tell(1, "a", "m2");
    c.tell(1, "a", "m3");
    c.settle();
    assert_eq!(c.inbox("a").len(), 1, "nothing reaches a stopping entity");
    c.complete_stops();
    assert_eq!(
        c.inbox("a")
            .iter()
            .map(|(_, p)| p.as_str())
            .collect::<Vec<_>>(),
        ["m1", "m2", "m3"]
    );
    assert_eq!(c.alive_on(1), ["a"]);
    insta::assert_snapshot!(c.trace().join("\n"));
}

/// The coordinator's node crashes. The new coordinator (node 2) rebuilds its table from the
/// registrations of nodes 2 and 3 and answers for their shards at once; shards that lived on
/// node 1 are unknown to it and are allocated only after `down-removal-margin` (20 s).
#[test]
fn coordinator_failover_rebuilds_table_from_registrations() {
    let mut c = Cluster::with_nodes(3, 6);
    let ids = c.one_entity_per_shard(3, 6, "one");
    let before = c.hosting();
    c.crash(1);
    c.publish_view();
    c.settle();
    let t = shoal_core::EntityType::new(sim::scripted::TYPE);
    let table = c
        .node(2)
        .coordinator_allocations(&t)
        .expect("node 2 runs the coordinator now");
    let rebuilt: Vec<u32> = table.keys().map(|s| s.0).collect();
    let mut expected: Vec<u32> = before[&2].iter().chain(&before[&3]).copied().collect();
    expected.sort_unstable();
    assert_eq!(
        rebuilt, expected,
        "the table holds exactly what nodes 2 and 3 reported"
    );
    c.clear_trace();
    for id in &ids {
        c.tell(3, id, "two");
    }
    c.advance(Duration::from_secs(25));
    for id in &ids {
        let inbox = c.inbox(id);
        assert_eq!(
            inbox.last().map(|(_, p)| p.as_str()),
            Some("two"),
            "{id} got its second message"
        );
    }
    assert_eq!(c.hosting().values().map(Vec::len).sum::<usize>(), 6);
    insta::assert_snapshot!(c.trace().join("\n"));
}
