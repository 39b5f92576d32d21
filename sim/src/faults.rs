//! Fault injection: crashes and restarts, partitions and heals, connection breaks, and the
//! downing decisions the membership oracle takes after `stable-after` of unchanged connectivity.

use std::collections::BTreeSet;
use std::time::Duration;

use shoal_core::{Incarnation, NodeId};

use crate::options::MembershipMode;
use crate::schedule::{Act, Schedule, resolve};
use crate::trace::TraceEvent;
use crate::world::{Ev, World};

/// Connectivity must stay unchanged this long before the oracle downs anyone (Akka's SBR
/// `stable-after`, shortened for simulation).
pub(crate) const STABLE_AFTER: Duration = Duration::from_secs(7);

/// Something the fault machinery schedules: a planned action, or a consequence of one.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum Fault {
    /// A planned action of the run's [`Schedule`](crate::Schedule) fires.
    Act(Act),
    /// Restart a crashed or downed node as a new incarnation.
    Restart(NodeId),
    /// Remove every partition.
    Heal,
    /// The downing decision for connectivity epoch `n` (skipped if connectivity changed since).
    Decide(u64),
    /// Checks whether a leaving member's region has stopped; if so it is removed and exits.
    LeaveDone(NodeId),
    /// A member that left exits, once every member has seen it removed.
    Exit(NodeId),
    /// A paused node runs again.
    Resume(NodeId),
}

/// Applies `fault` to the world.
pub(crate) fn apply(w: &mut World, fault: Fault) {
    match fault {
        Fault::Act(act) => act_on(w, act),
        Fault::Restart(node) => restart(w, node),
        Fault::Heal => heal(w),
        Fault::Decide(epoch) => {
            if epoch == w.topology_epoch {
                decide(w);
            }
        }
        Fault::LeaveDone(node) => leave_done(w, node),
        Fault::Exit(node) => {
            if w.left.contains(&node) {
                w.kill(node);
                if w.opts.faults.rejoin_after_leave {
                    w.left.remove(&node);
                    w.crashed.insert(node);
                    w.rejoining.insert(node);
                    let at = w.now
                        + w.rng_faults
                            .duration(Duration::from_secs(1), Duration::from_secs(5));
                    w.schedule(at, Ev::Fault(Fault::Restart(node)));
                }
            }
        }
        Fault::Resume(node) => {
            if w.resume(node) {
                w.stalls.fault(w.now);
                topology_changed(w);
            }
        }
    }
}

/// Carries out one planned action (see [`schedule`](crate::schedule) for how targets resolve).
fn act_on(w: &mut World, act: Act) {
    let running: Vec<NodeId> = w.nodes.keys().copied().collect();
    match act {
        Act::Crash {
            node,
            restart_after,
        } => {
            if let Some(victim) = resolve(&running, node).filter(|_| running.len() > 1) {
                crash(w, victim, restart_after);
            }
        }
        Act::CrashOldest { restart_after } => {
            let oldest = w.oldest_up();
            if let Some(oldest) = oldest.filter(|_| running.len() > 1) {
                if w.nodes.get(&oldest.node).is_some_and(|n| n.id == oldest) {
                    crash(w, oldest.node, restart_after);
                }
            }
        }
        Act::Partition {
            side,
            one_way,
            heal_after,
        } => {
            let (a, b): (Vec<NodeId>, Vec<NodeId>) = running.iter().partition(|n| side.contains(n));
            if w.net.partitioned() || a.is_empty() || b.is_empty() {
                return;
            }
            // One-way: the rest still hears `side`, but `side` hears nothing from the rest.
            w.net.block(&a, &b);
            if !one_way {
                w.net.block(&b, &a);
            }
            let names = |side: &[NodeId]| side.iter().map(ToString::to_string).collect();
            w.log(|| TraceEvent::Partitioned {
                side: names(&a),
                rest: names(&b),
                one_way,
            });
            w.stalls.fault(w.now);
            let minority = if a.len() <= b.len() { &a } else { &b };
            if w.oldest_up().is_some_and(|o| minority.contains(&o.node)) {
                w.mark("the coordinator's node cut off on the smaller side of a partition");
            }
            topology_changed(w);
            w.schedule(w.now + heal_after, Ev::Fault(Fault::Heal));
        }
        Act::Break { a, b } => {
            if let (Some(a), Some(b)) = (resolve(&running, a), resolve(&running, b)) {
                if a != b {
                    w.log(|| TraceEvent::ConnectionBroken {
                        a: a.to_string(),
                        b: b.to_string(),
                    });
                    w.net.break_connection(a, b);
                    w.stalls.fault(w.now);
                }
            }
        }
        Act::Leave { node, by } => {
            let members: Vec<NodeId> = w.up_members().into_iter().map(|m| m.node).collect();
            if let Some(node) = resolve(&members, node).filter(|_| members.len() > 2) {
                let by = by.and_then(|b| resolve(&members, b)).filter(|b| *b != node);
                leave(w, node, by);
            }
        }
        Act::Heal => heal(w),
        Act::Down { node, by } => {
            // An operator's command: the core's membership only (the oracle has none).
            let members: Vec<NodeId> = w.up_members().into_iter().map(|m| m.node).collect();
            let target = resolve(&running, node).filter(|_| members.len() > 2);
            let by = resolve(&members, by);
            if let (Some(node), Some(by), MembershipMode::Real) = (target, by, w.opts.membership) {
                down(w, node, by);
            }
        }
        Act::Join => {
            // A new address: never one a crashed or departed node used.
            let next = w.last_incarnation.keys().map(|n| n.0).max().unwrap_or(0) + 1;
            if next <= w.opts.max_nodes {
                if !w.crashed.is_empty() || !w.downed.is_empty() {
                    w.mark("a node joined while another was down");
                }
                w.start_node(NodeId(next), Incarnation(1));
                let everyone: BTreeSet<NodeId> = w.nodes.keys().copied().collect();
                w.publish(&everyone, w.oracle.view());
            }
        }
        Act::Clog { node, peer, lasts } => {
            let Some(node) = resolve(&running, node) else {
                return;
            };
            let until = w.now + lasts;
            // The clog ends by itself: a fault from now until then.
            w.stalls.fault(until);
            let peer = peer.and_then(|p| resolve(&running, p));
            match peer {
                Some(peer) if peer != node => w.net.clog_link(node, peer, until),
                Some(_) => return,
                None => w.net.clog_node(node, until),
            }
            w.log(|| TraceEvent::Clogged {
                node: node.to_string(),
                peer: peer.map(|p| p.to_string()),
                until_ns: until.as_nanos(),
            });
            w.mark("messages held by a clog");
        }
        Act::Pause { node, lasts } => {
            let Some(node) = resolve(&running, node) else {
                return;
            };
            if w.pause(node) {
                w.stalls.fault(w.now);
                topology_changed(w);
                w.schedule(w.now + lasts, Ev::Fault(Fault::Resume(node)));
            }
        }
    }
}

/// Crashes `node` (its process and entities are gone) and restarts it after `restart_after`.
fn crash(w: &mut World, node: NodeId, restart_after: Duration) {
    w.stalls.fault(w.now);
    if let Some(member) = w.nodes.get(&node).map(|n| n.id) {
        w.log(|| TraceEvent::Crashed {
            member: member.to_string(),
        });
    }
    w.kill(node);
    w.crashed_or_downed = true;
    w.crashed.insert(node);
    topology_changed(w);
    w.schedule(w.now + restart_after, Ev::Fault(Fault::Restart(node)));
}

/// A member starts leaving: it is marked Leaving and its regions shut down gracefully. With
/// the real membership the node does all of it (`Command::Leave`, or `Command::LeaveMember`
/// on the member at `by`) and reports when it is removed (`Event::LeftCluster`).
fn leave(w: &mut World, node: NodeId, by: Option<NodeId>) {
    let Some(member) = w.nodes.get(&node).map(|n| n.id) else {
        return;
    };
    w.stalls.shutdown_began(w.now, member);
    if w.opts.membership == MembershipMode::Real {
        let (to, command) = match by {
            Some(by) => {
                w.mark("a member was asked to leave by another");
                (by, shoal_core::Command::LeaveMember { member })
            }
            None => (node, shoal_core::Command::Leave),
        };
        let leave = shoal_core::Input::Command {
            request: shoal_core::RequestId(0),
            command,
        };
        return w.input(to, leave);
    }
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

/// An operator on `by` downs the member at `node`: it stops its entities when it hears it,
/// and restarts as a new incarnation (`Event::LeftCluster { downed: true }`).
fn down(w: &mut World, node: NodeId, by: NodeId) {
    let Some(member) = w.nodes.get(&node).map(|n| n.id) else {
        return;
    };
    w.stalls.fault(w.now);
    w.crashed_or_downed = true;
    w.mark("an operator downed a member");
    let down = shoal_core::Input::Command {
        request: shoal_core::RequestId(0),
        command: shoal_core::Command::Down { member },
    };
    w.input(by, down);
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
    // has seen the removal (views take at most the detection delay to arrive), and after what
    // they forwarded before that has reached it to be routed on (messages take at most about
    // 2 s, the latency's long tail).
    w.left.insert(node);
    let exit = w.now + w.opts.detection_delay + Duration::from_secs(3);
    w.schedule(exit, Ev::Fault(Fault::Exit(node)));
}

/// Heals every partition; downed members restart soon after (a downed member must restart).
pub(crate) fn heal(w: &mut World) {
    if !w.net.partitioned() {
        return;
    }
    w.net.heal();
    w.log(|| TraceEvent::Healed);
    w.stalls.fault(w.now);
    topology_changed(w);
}

/// Restarts `node` as its next incarnation if it is crashed or downed.
pub(crate) fn restart(w: &mut World, node: NodeId) {
    if !w.crashed.remove(&node) && !w.downed.remove(&node) {
        return;
    }
    // A member that left gracefully comes back as a new incarnation: not a fault. A crashed
    // or downed one rejoining sends its old incarnation Down: one.
    if !w.rejoining.remove(&node) {
        w.stalls.fault(w.now);
    }
    if w.opts.membership == MembershipMode::Oracle && w.oracle.is_empty() {
        // The whole cluster downed itself: a node can only form a new cluster once the old
        // members are gone (an operator restarts them all), or both would run entities.
        let old: Vec<NodeId> = std::mem::take(&mut w.downed).into_iter().collect();
        for n in old {
            w.kill(n);
            w.crashed.insert(n);
        }
    }
    w.kill(node);
    let incarnation = w.last_incarnation.get(&node).map_or(1, |last| last + 1);
    w.start_node(node, Incarnation(incarnation));
    let everyone: BTreeSet<NodeId> = w.nodes.keys().copied().collect();
    w.publish(&everyone, w.oracle.view());
}

/// Connectivity changed: downing is decided after `stable-after` without further change, and
/// failure detection tells every node who is now unreachable (from anyone, as gossip spreads it).
fn topology_changed(w: &mut World) {
    w.topology_epoch += 1;
    if w.opts.membership == MembershipMode::Real {
        return;
    }
    let epoch = w.topology_epoch;
    w.schedule(w.now + STABLE_AFTER, Ev::Fault(Fault::Decide(epoch)));
    publish_reachability(w);
}

fn publish_reachability(w: &mut World) {
    let unreachable = w.unreachable();
    if w.oracle.set_unreachable(&unreachable) {
        let everyone: BTreeSet<NodeId> = w.nodes.keys().copied().collect();
        w.publish(&everyone, w.oracle.view());
    }
}

/// Groups running members by connectivity and lets the oracle down the losers.
fn decide(w: &mut World) {
    let members: Vec<NodeId> = w
        .nodes
        .values()
        .filter(|n| w.oracle.is_member(n.id) && !n.is_paused())
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
    w.log(|| TraceEvent::DowningDecided {
        sides: format!("{sides:?}"),
        downed: decision.downed.iter().map(ToString::to_string).collect(),
    });
    for (to, view) in decision.views {
        w.publish(&to, view);
    }
    for member in decision.downed {
        w.stalls.fault(w.now);
        w.crashed_or_downed = true;
        if w.nodes.get(&member.node).is_some_and(|n| n.id == member) {
            w.downed.insert(member.node);
            let at = w.now
                + w.rng_faults
                    .duration(Duration::from_secs(5), Duration::from_secs(30));
            w.schedule(at, Ev::Fault(Fault::Restart(member.node)));
        }
    }
    w.no_survivors |= decision.no_survivors;
    // Members unreachable only from the downed ones are reachable again.
    publish_reachability(w);
}

/// Schedules every action of `schedule`.
pub(crate) fn schedule_actions(w: &mut World, schedule: &Schedule) {
    for action in &schedule.0 {
        let at = shoal_core::Instant::ZERO + action.at;
        w.schedule(at, Ev::Fault(Fault::Act(action.act.clone())));
    }
}
