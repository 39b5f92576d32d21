//! Random operation sequences over the lossless in-test network. Without loss, crashes or
//! partitions every message must be delivered exactly once, in per-sender order, across
//! rebalancing, graceful shutdown and passivation; an entity never runs in two places.

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use shoal_core::{Command, EntityType, MemberStatus};
use support::{StopPolicy, TestCluster, config, type_config};

#[derive(Clone, Debug)]
enum Op {
    Tell { from: usize, entity: u8 },
    Advance { millis: u32 },
    AddNode,
    ShutDown { node: usize },
    Passivate { entity: u8 },
    CompleteStops,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..8usize, 0..24u8).prop_map(|(from, entity)| Op::Tell { from, entity }),
        3 => (1..15_000u32).prop_map(|millis| Op::Advance { millis }),
        1 => Just(Op::AddNode),
        1 => (0..8usize).prop_map(|node| Op::ShutDown { node }),
        2 => (0..24u8).prop_map(|entity| Op::Passivate { entity }),
        2 => Just(Op::CompleteStops),
    ]
}

// Compact constructors for regression cases (as printed by proptest, shortened).
#[allow(non_snake_case)]
fn T(from: usize, entity: u8) -> Op {
    Op::Tell { from, entity }
}
#[allow(non_snake_case)]
fn A(millis: u32) -> Op {
    Op::Advance { millis }
}
#[allow(non_snake_case)]
fn S(node: usize) -> Op {
    Op::ShutDown { node }
}
#[allow(non_snake_case)]
fn P(entity: u8) -> Op {
    Op::Passivate { entity }
}

fn run(ops: Vec<Op>, manual_stops: bool) {
    let mut c = TestCluster::with_nodes(2, 8);
    c.trace_network = std::env::var_os("TRACE_NETWORK").is_some();
    c.stop_policy = if manual_stops {
        StopPolicy::Manual
    } else {
        StopPolicy::Immediate
    };
    let mut next_node = 3;
    let mut leaving: Vec<u64> = Vec::new();
    let mut removed: Vec<u64> = Vec::new();
    let mut sent: BTreeMap<(String, u64), u64> = BTreeMap::new();
    let counter = EntityType::new(support::TYPE);
    for op in ops {
        let active: Vec<u64> = c
            .running()
            .into_iter()
            .filter(|n| !leaving.contains(n))
            .collect();
        match op {
            Op::Tell { from, entity } => {
                let from = active[from % active.len()];
                let entity = format!("e{entity}");
                let seq = sent.entry((entity.clone(), from)).or_default();
                c.tell(from, &entity, &format!("n{from}:{seq}"));
                *seq += 1;
            }
            Op::Advance { millis } => c.advance(Duration::from_millis(u64::from(millis))),
            Op::AddNode if next_node <= 6 => {
                c.add_node(config(next_node, type_config(8)));
                next_node += 1;
                c.publish_view();
            }
            Op::AddNode => {}
            Op::ShutDown { node } if active.len() > 1 => {
                let node = active[node % active.len()];
                leaving.push(node);
                c.command(node, Command::GracefulShutdown { entity_type: None });
            }
            Op::ShutDown { .. } => {}
            Op::Passivate { entity } => {
                let entity = format!("e{entity}");
                if let Some((n, _)) = c.alive.iter().find(|(_, e)| *e == entity).cloned() {
                    c.passivate(n.0, &entity);
                }
            }
            Op::CompleteStops => c.complete_stops(),
        }
        c.settle();
        // Members whose region finished shutting down leave the cluster.
        for n in leaving.clone() {
            if c.node(n).is_region_stopped(&counter) && !removed.contains(&n) {
                removed.push(n);
                c.member_mut(n).status = MemberStatus::Leaving;
                c.publish_view();
                c.remove_member(n);
                c.publish_view();
                c.settle();
            }
        }
    }
    // Heal: let every stop complete and every timer run.
    c.stop_policy = StopPolicy::Immediate;
    for _ in 0..10 {
        c.complete_stops();
        c.advance(Duration::from_secs(15));
    }
    assert_eq!(
        c.dead_letters(),
        0,
        "no message may be dropped in a run without faults"
    );
    for ((entity, from), count) in sent {
        let from_sender: Vec<String> = c
            .inbox(&entity)
            .into_iter()
            .map(|(_, p)| p)
            .filter(|p| p.starts_with(&format!("n{from}:")))
            .collect();
        let expected: Vec<String> = (0..count).map(|i| format!("n{from}:{i}")).collect();
        assert_eq!(
            from_sender,
            expected,
            "{entity} from n{from}: exactly once, in order; trace:\n{}",
            c.trace.join("\n")
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn exactly_once_in_order_without_faults(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, false);
    }

    #[test]
    fn exactly_once_in_order_with_slow_stops(ops in prop::collection::vec(op(), 1..120)) {
        run(ops, true);
    }
}

/// Graceful shutdown of the coordinator's node while another node is leaving.
#[test]
fn regression_leaving_coordinator_node() {
    use Op::*;
    let ops = vec![
        AddNode,
        AddNode,
        ShutDown { node: 1 },
        Tell { from: 0, entity: 0 },
        ShutDown { node: 3 },
        Tell { from: 0, entity: 0 },
        CompleteStops,
        ShutDown { node: 2 },
        Tell { from: 0, entity: 3 },
    ];
    run(ops, true);
}

/// Repeated graceful shutdowns while an entity's stop is slow.
#[test]
fn regression_shutdowns_with_slow_stops() {
    #[rustfmt::skip]
    let ops = vec![
        T(0, 11), T(0, 0), S(0), T(0, 0), T(0, 0), T(0, 0), T(0, 0), T(0, 0), S(0),
        A(989), T(0, 0), A(9665), S(0), A(7444), A(4640), A(4597), A(14277),
        A(4868), T(0, 19), A(13520), T(0, 0), T(0, 19), S(0),
    ];
    run(ops, true);
}

/// A passivating entity whose shard is handed off twice while a node leaves.
#[test]
fn regression_passivation_during_handoff() {
    use Op::AddNode;
    run(
        vec![
            T(0, 0),
            T(0, 0),
            S(1),
            AddNode,
            P(0),
            T(5, 0),
            S(2),
            T(0, 0),
            T(0, 0),
        ],
        true,
    );
}
