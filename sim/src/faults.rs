//! Fault injection: crashes and restarts, partitions and heals, connection breaks, and the
//! downing decisions the membership oracle takes after `stable-after` of unchanged connectivity.

use std::collections::BTreeSet;
use std::time::Duration;

use shoal_core::{Incarnation, NodeId};

use crate::world::{Ev, World};

/// Connectivity must stay unchanged this long before the oracle downs anyone (Akka's SBR
/// `stable-after`, shortened for simulation).
pub(crate) const STABLE_AFTER: Duration = Duration::from_secs(7);

/// One scheduled fault action.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum Fault {
    /// Crash a random running node.
    Crash,
    /// Restart a crashed or downed node as a new incarnation.
    Restart(NodeId),
    /// Split the running members into two sides.
    Partition,
    /// Remove every partition.
    Heal,
    /// Break one random connection (in-flight messages on it are lost).
    Break,
    /// The downing decision for connectivity epoch `n` (skipped if connectivity changed since).
    Decide(u64),
    /// A random member leaves gracefully: its region hands off every shard, then it leaves.
    Leave,
    /// Checks whether a leaving member's region has stopped; if so it is removed and exits.
    LeaveDone(NodeId),
    /// A new node joins (scale out).
    Join,
    /// A member that left exits, once every member has seen it removed.
    Exit(NodeId),
    /// Crash the oldest member (where the coordinators run).
    CrashOldest,
}

/// Applies `fault` to the world.
pub(crate) fn apply(w: &mut World, fault: Fault) {
    match fault {
        Fault::Crash => {
            let running: Vec<NodeId> = w.nodes.keys().copied().collect();
            if running.len() <= 1 {
                return;
            }
            let victim = *w.rng_faults.pick(&running);
            w.kill(victim);
            w.crashed.insert(victim);
            topology_changed(w);
            let again = w.now
                + w.rng_faults
                    .duration(Duration::from_secs(10), Duration::from_secs(40));
            w.schedule(again, Ev::Fault(Fault::Restart(victim)));
        }
        Fault::Restart(node) => restart(w, node),
        Fault::Partition => {
            if w.net.partitioned() {
                return;
            }
            let mut running: Vec<NodeId> = w.nodes.keys().copied().collect();
            if running.len() < 2 {
                return;
            }
            // A random split: shuffle, then cut at a random point.
            for i in (1..running.len()).rev() {
                let j = w.rng_faults.below(i as u64 + 1) as usize;
                running.swap(i, j);
            }
            let cut = w.rng_faults.range(1, running.len() as u64 - 1) as usize;
            let (a, b) = running.split_at(cut);
            // Sometimes one-way: `b` still hears `a` but not the reverse.
            w.net.block(a, b);
            if !w.rng_faults.chance(0.3) {
                w.net.block(b, a);
            }
            topology_changed(w);
            let heal = w.now
                + w.rng_faults
                    .duration(Duration::from_secs(5), Duration::from_secs(60));
            w.schedule(heal, Ev::Fault(Fault::Heal));
        }
        Fault::Heal => heal(w),
        Fault::Break => {
            let running: Vec<NodeId> = w.nodes.keys().copied().collect();
            if running.len() >= 2 {
                let a = *w.rng_faults.pick(&running);
                let b = *w.rng_faults.pick(&running);
                if a != b {
                    w.net.break_connection(a, b);
                }
            }
        }
        Fault::Decide(epoch) => {
            if epoch == w.topology_epoch {
                decide(w);
            }
        }
        Fault::Leave => leave(w),
        Fault::Exit(node) => {
            if w.left.contains(&node) {
                w.kill(node);
                if w.opts.faults.rejoin_after_leave {
                    w.left.remove(&node);
                    w.crashed.insert(node);
                    let at = w.now
                        + w.rng_faults
                            .duration(Duration::from_secs(1), Duration::from_secs(5));
                    w.schedule(at, Ev::Fault(Fault::Restart(node)));
                }
            }
        }
        Fault::CrashOldest => {
            let oldest = w.oracle.view().oldest_up(None);
            if let Some(oldest) = oldest.filter(|_| w.nodes.len() > 1) {
                if w.nodes.get(&oldest.node).is_some_and(|n| n.id == oldest) {
                    w.kill(oldest.node);
                    w.crashed.insert(oldest.node);
                    topology_changed(w);
                    let again = w.now
                        + w.rng_faults
                            .duration(Duration::from_secs(10), Duration::from_secs(40));
                    w.schedule(again, Ev::Fault(Fault::Restart(oldest.node)));
                }
            }
        }
        Fault::LeaveDone(node) => leave_done(w, node),
        Fault::Join => {
            let next = w
                .last_incarnation
                .keys()
                .chain(w.nodes.keys())
                .map(|n| n.0)
                .max()
                .unwrap_or(0)
                + 1;
            if next <= MAX_NODES {
                w.start_node(NodeId(next), Incarnation(1));
                let everyone: BTreeSet<NodeId> = w.nodes.keys().copied().collect();
                w.publish(&everyone, w.oracle.view());
            }
        }
    }
}

/// Scale-out stops adding nodes beyond this.
const MAX_NODES: u64 = 12;

/// A member starts leaving: it is marked Leaving and its regions shut down gracefully.
fn leave(w: &mut World) {
    let members: Vec<NodeId> = w.up_members().into_iter().map(|m| m.node).collect();
    if members.len() <= 2 {
        return;
    }
    let node = *w.rng_faults.pick(&members);
    w.oracle.leaving(node);
    let everyone: BTreeSet<NodeId> = w.nodes.keys().copied().collect();
    w.publish(&everyone, w.oracle.view());
    let shutdown = shoal_core::Command::GracefulShutdown { entity_type: None };
    w.input(
        node,
        shoal_core::Input::Command {
            request: shoal_core::RequestId(0),
            command: shutdown,
        },
    );
    w.schedule(
        w.now + Duration::from_secs(1),
        Ev::Fault(Fault::LeaveDone(node)),
    );
}

/// Once a leaving member's region stopped, it is removed from the cluster and its process exits.
fn leave_done(w: &mut World, node: NodeId) {
    let Some(sim) = w.nodes.get(&node) else {
        return;
    };
    if !w.oracle.is_member(sim.id) {
        return;
    }
    if !sim
        .driver
        .node()
        .is_region_stopped(&shoal_core::EntityType::new(crate::world::TYPE))
    {
        w.schedule(
            w.now + Duration::from_secs(1),
            Ev::Fault(Fault::LeaveDone(node)),
        );
        return;
    }
    w.oracle.remove(node);
    // The leaver learns of its own removal last (it exits then), so it keeps routing meanwhile.
    let others: BTreeSet<NodeId> = w.nodes.keys().copied().filter(|n| *n != node).collect();
    w.publish(&others, w.oracle.view());
    // Like Akka's Exiting -> Removed at convergence: the process exits only after every member
    // has seen the removal, so messages they forwarded before that still reach it and are
    // routed on (views take at most 1 s to arrive, messages at most about 2 s).
    w.left.insert(node);
    w.schedule(w.now + EXIT_AFTER_REMOVAL, Ev::Fault(Fault::Exit(node)));
}

/// How long a removed member keeps running before its process exits.
const EXIT_AFTER_REMOVAL: Duration = Duration::from_secs(4);

/// Heals every partition; downed members restart soon after (a downed member must restart).
pub(crate) fn heal(w: &mut World) {
    if !w.net.partitioned() {
        return;
    }
    w.net.heal();
    topology_changed(w);
}

/// Restarts `node` as its next incarnation if it is crashed or downed.
pub(crate) fn restart(w: &mut World, node: NodeId) {
    if !w.crashed.remove(&node) && !w.downed.remove(&node) {
        return;
    }
    if w.oracle.is_empty() {
        // The whole cluster downed itself: a node can only form a new cluster once the old
        // members are gone (an operator restarts them all), or both would run entities.
        let old: Vec<NodeId> = std::mem::take(&mut w.downed).into_iter().collect();
        for n in old {
            w.kill(n);
            w.crashed.insert(n);
        }
    }
    let previous = w.nodes.get(&node).map(|n| n.id.incarnation.0);
    w.kill(node);
    let incarnation = w.last_incarnation.entry(node).or_insert(1);
    *incarnation = (*incarnation).max(previous.unwrap_or(0)) + 1;
    let incarnation = Incarnation(*incarnation);
    w.start_node(node, incarnation);
    let everyone: BTreeSet<NodeId> = w.nodes.keys().copied().collect();
    w.publish(&everyone, w.oracle.view());
}

fn topology_changed(w: &mut World) {
    w.topology_epoch += 1;
    let epoch = w.topology_epoch;
    w.schedule(w.now + STABLE_AFTER, Ev::Fault(Fault::Decide(epoch)));
}

/// Groups running members by connectivity and lets the oracle down the losers.
fn decide(w: &mut World) {
    let members: Vec<NodeId> = w
        .nodes
        .values()
        .filter(|n| w.oracle.is_member(n.id))
        .map(|n| n.id.node)
        .collect();
    let mut sides: Vec<BTreeSet<NodeId>> = Vec::new();
    for node in members {
        let connected =
            |side: &BTreeSet<NodeId>| side.iter().all(|other| w.net.connected(node, *other));
        match sides.iter_mut().find(|side| connected(side)) {
            Some(side) => {
                side.insert(node);
            }
            None => sides.push([node].into()),
        }
    }
    let decision = w.oracle.decide(&sides);
    w.log(|| format!("decide sides {sides:?} -> downed {:?}", decision.downed));
    for (to, view) in decision.views {
        w.publish(&to, view);
    }
    for member in decision.downed {
        if w.nodes.get(&member.node).is_some_and(|n| n.id == member) {
            w.downed.insert(member.node);
            let at = w.now
                + w.rng_faults
                    .duration(Duration::from_secs(5), Duration::from_secs(30));
            w.schedule(at, Ev::Fault(Fault::Restart(member.node)));
        }
    }
    w.no_survivors |= decision.no_survivors;
}

/// Schedules the next occurrence of each enabled fault kind, until `until`.
pub(crate) fn schedule_faults(w: &mut World, until: shoal_core::Instant) {
    let kinds = [
        (w.opts.faults.crash_every, Fault::Crash),
        (w.opts.faults.partition_every, Fault::Partition),
        (w.opts.faults.break_every, Fault::Break),
        (w.opts.faults.leave_every, Fault::Leave),
        (w.opts.faults.join_every, Fault::Join),
        (w.opts.faults.crash_oldest_every, Fault::CrashOldest),
    ];
    for (every, fault) in kinds {
        let Some(every) = every else { continue };
        let mut at = w.now;
        loop {
            at += w.rng_faults.duration(every / 2, every * 3 / 2);
            if at >= until {
                break;
            }
            w.schedule(at, Ev::Fault(fault.clone()));
        }
    }
}
