//! Random operation sequences over the lossless in-test network. Without crashes every message
//! must be delivered exactly once, in per-sender order, across rebalancing, graceful shutdown and
//! passivation; with crashes and restarts, at most once and in order, and after healing every new
//! message is delivered. An entity never runs in two places (the test host asserts it).

use std::collections::BTreeMap;
use std::time::Duration;

use proptest::prelude::*;
use shoal_core::{Command, Config, EntityType, Incarnation, MemberStatus, NodeId};
use sim::scripted::{Cluster, StopPolicy, config, type_config};

#[derive(Clone, Debug)]
enum Op {
    Tell {
        from: usize,
        entity: u8,
    },
    Advance {
        millis: u32,
    },
    AddNode,
    ShutDown {
        node: usize,
    },
    Passivate {
        entity: u8,
    },
    CompleteStops,
    /// Crash a node (it leaves the view at once); only in runs with faults.
    Crash {
        node: usize,
    },
    /// Restart a crashed node as a new incarnation; only in runs with faults.
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..8usize, 0..24u8).prop_map(|(from, entity)| Op::Tell { from, entity }),
        3 => (1..15_000u32).prop_map(|millis| Op::Advance { millis }),
        1 => Just(Op::AddNode),
        1 => (0..8usize).prop_map(|node| Op::ShutDown { node }),
        2 => (0..24u8).prop_map(|entity| Op::Passivate { entity }),
        2 => Just(Op::CompleteStops),
        1 => (0..8usize).prop_map(|node| Op::Crash { node }),
        1 => Just(Op::Restart),
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
    run_with(ops, manual_stops, false);
}

fn run_with(ops: Vec<Op>, manual_stops: bool, faults: bool) {
    let mut c = Cluster::with_nodes(2, 8);
    c.trace_network(std::env::var_os("TRACE_NETWORK").is_some());
    c.set_behaviour(if manual_stops {
        StopPolicy::Manual
    } else {
        StopPolicy::Immediate
    });
    let mut next_node = 3;
    let mut leaving: Vec<u64> = Vec::new();
    let mut removed: Vec<u64> = Vec::new();
    let mut crashed: Vec<u64> = Vec::new();
    let mut incarnation: BTreeMap<u64, u64> = (1..=6).map(|n| (n, 1)).collect();
    // Per (entity, sender label): messages sent. A label names a node's incarnation.
    let mut sent: BTreeMap<(String, String), u64> = BTreeMap::new();
    let counter = EntityType::new(sim::scripted::TYPE);
    for op in ops {
        let active: Vec<u64> = c
            .running()
            .into_iter()
            .filter(|n| !leaving.contains(n) && !crashed.contains(n))
            .collect();
        match op {
            Op::Tell { from, entity } => {
                let from = active[from % active.len()];
                let entity = format!("e{entity}");
                let label = format!("n{from}.{}", incarnation[&from]);
                let seq = sent.entry((entity.clone(), label.clone())).or_default();
                c.tell(from, &entity, &format!("{label}:{seq}"));
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
                let running = c
                    .alive()
                    .find(|(_, e)| e.as_str() == entity)
                    .map(|(n, _)| n);
                if let Some(n) = running {
                    c.passivate(n, &entity);
                }
            }
            Op::CompleteStops => c.complete_stops(),
            Op::Crash { node } if faults && active.len() > 1 => {
                let node = active[node % active.len()];
                crashed.push(node);
                c.crash(node);
                c.publish_view();
            }
            Op::Restart if faults && !crashed.is_empty() => {
                let node = crashed.remove(0);
                let next = incarnation[&node] + 1;
                incarnation.insert(node, next);
                let mut restarted = Config::new(NodeId(node), Incarnation(next));
                restarted = restarted.with_entity_type(type_config(8));
                c.add_node(restarted);
                c.publish_view();
            }
            Op::Crash { .. } | Op::Restart => {}
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
    c.set_behaviour(StopPolicy::Immediate);
    for _ in 0..10 {
        c.complete_stops();
        c.advance(Duration::from_secs(15));
    }
    if !faults {
        assert_eq!(
            c.dead_letters(),
            0,
            "no message may be dropped in a run without faults"
        );
    }
    for ((entity, label), count) in &sent {
        let prefix = format!("{label}:");
        let from_sender: Vec<u64> = c
            .inbox(entity)
            .into_iter()
            .filter_map(|(_, p)| p.strip_prefix(&prefix).map(|n| n.parse().expect("seq")))
            .collect();
        if faults {
            assert!(
                from_sender.windows(2).all(|w| w[0] < w[1]),
                "{entity} from {label}: at most once, in order: {from_sender:?}; trace:\n{}",
                c.trace().join("\n")
            );
        } else {
            let expected: Vec<u64> = (0..*count).collect();
            assert_eq!(
                from_sender,
                expected,
                "{entity} from {label}: exactly once, in order; trace:\n{}",
                c.trace().join("\n")
            );
        }
    }
    if faults {
        // Liveness: after healing, a new message from every running member reaches every entity.
        let senders: Vec<u64> = c
            .running()
            .into_iter()
            .filter(|n| !removed.contains(n))
            .collect();
        for entity in 0..24 {
            for &from in &senders {
                c.tell(from, &format!("e{entity}"), &format!("final-{from}"));
            }
        }
        c.advance(Duration::from_secs(30));
        for entity in 0..24 {
            for &from in &senders {
                let got = c
                    .inbox(&format!("e{entity}"))
                    .iter()
                    .filter(|(_, p)| *p == format!("final-{from}"))
                    .count();
                assert_eq!(
                    got,
                    1,
                    "e{entity} got final-{from} {got} times; trace:\n{}",
                    c.trace().join("\n")
                );
            }
        }
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

    #[test]
    fn at_most_once_in_order_with_crashes_then_live(ops in prop::collection::vec(op(), 1..120), slow in any::<bool>()) {
        run_with(ops, slow, true);
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
