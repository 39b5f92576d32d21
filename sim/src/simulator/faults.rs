//! The simulator applies faults: crashes and restarts, partitions and heals, connection
//! breaks, clogs, pauses, leaves and downs, and the downing decisions the membership oracle
//! takes after `stable-after` of unchanged connectivity. The nemesis remembers what they did.

use std::collections::BTreeSet;
use std::time::Duration;

use shoal_core::{Incarnation, MemberStatus, NodeId};

use crate::bounds::STABLE_AFTER;
use crate::events::Ev;
use crate::nemesis::Fault;
use crate::options::MembershipMode;
use crate::schedule::{Act, Schedule, resolve};
use crate::trace::TraceEvent;

use super::Simulator;

impl Simulator {
    /// Applies `fault` to the world.
    pub(crate) fn apply_fault(&mut self, fault: Fault) {
        match fault {
            Fault::Act(act) => self.act_on(act),
            Fault::Restart(node) => self.restart(node),
            Fault::Heal => self.heal(),
            Fault::Decide(epoch) => {
                if self.nemesis.is_current(epoch) {
                    self.decide();
                }
            }
            Fault::LeaveDone(node) => self.leave_done(node),
            Fault::Remove(node) => self.remove_exiting(node),
            Fault::Exit(node) => {
                if self.nemesis.has_left(node) {
                    self.kill(node);
                    if self.opts.faults.rejoin_after_leave {
                        let at = self.now + self.nemesis.rejoin_after_exit(node);
                        self.schedule(at, Ev::Fault(Fault::Restart(node)));
                    }
                }
            }
            Fault::Resume(node) => {
                if self.resume(node) {
                    self.stalls.fault(self.now);
                    self.topology_changed();
                }
            }
        }
    }

    /// Carries out one planned action (see [`schedule`](crate::schedule) for how targets resolve).
    fn act_on(&mut self, act: Act) {
        let running: Vec<NodeId> = self.nodes.keys().copied().collect();
        match act {
            Act::Crash {
                node,
                restart_after,
            } => {
                if let Some(victim) = resolve(&running, node).filter(|_| running.len() > 1) {
                    self.crash(victim, restart_after);
                }
            }
            Act::CrashOldest { restart_after } => {
                let oldest = self.oldest_up();
                if let Some(oldest) = oldest.filter(|_| running.len() > 1) {
                    if self.nodes.get(&oldest.node).is_some_and(|n| n.id == oldest) {
                        self.crash(oldest.node, restart_after);
                    }
                }
            }
            Act::Partition {
                side,
                one_way,
                heal_after,
            } => {
                let (a, b): (Vec<NodeId>, Vec<NodeId>) =
                    running.iter().partition(|n| side.contains(n));
                if self.net.partitioned() || a.is_empty() || b.is_empty() {
                    return;
                }
                // One-way: `side` still hears the rest, but the rest hears nothing from `side`.
                self.net.block(&a, &b);
                if !one_way {
                    self.net.block(&b, &a);
                }
                let names = |side: &[NodeId]| side.iter().map(ToString::to_string).collect();
                self.log(|| TraceEvent::Partitioned {
                    side: names(&a),
                    rest: names(&b),
                    one_way,
                });
                self.stalls.fault(self.now);
                let minority = if a.len() <= b.len() { &a } else { &b };
                if self.oldest_up().is_some_and(|o| minority.contains(&o.node)) {
                    self.mark("the coordinator's node cut off on the smaller side of a partition");
                }
                self.topology_changed();
                self.schedule(self.now + heal_after, Ev::Fault(Fault::Heal));
            }
            Act::Break { a, b } => {
                if let (Some(a), Some(b)) = (resolve(&running, a), resolve(&running, b)) {
                    if a != b {
                        self.log(|| TraceEvent::ConnectionBroken {
                            a: a.to_string(),
                            b: b.to_string(),
                        });
                        self.net.break_connection(a, b);
                        self.survival.changed(self.now, false);
                        self.stalls.fault(self.now);
                    }
                }
            }
            Act::Leave { node, by } => {
                let members: Vec<NodeId> = self.up_members().into_iter().map(|m| m.node).collect();
                if let Some(node) = resolve(&members, node).filter(|_| members.len() > 2) {
                    let by = by.and_then(|b| resolve(&members, b)).filter(|b| *b != node);
                    self.leave(node, by);
                }
            }
            Act::Heal => self.heal(),
            Act::Down { node, by } => {
                // An operator's command: the core's membership only (the oracle has none).
                let members: Vec<NodeId> = self.up_members().into_iter().map(|m| m.node).collect();
                let target = resolve(&running, node).filter(|_| members.len() > 2);
                let by = resolve(&members, by);
                if let (Some(node), Some(by), MembershipMode::Real) =
                    (target, by, self.opts.cluster.membership)
                {
                    self.down(node, by);
                }
            }
            Act::Join => {
                // A new address: never one a crashed or departed node used.
                let next = self.last_incarnation.keys().map(|n| n.0).max().unwrap_or(0) + 1;
                if next <= self.opts.cluster.max_nodes {
                    if self.nemesis.any_out() {
                        self.mark("a node joined while another was down");
                    }
                    self.start_node(NodeId(next), Incarnation(1));
                    // A partition blocks only the links that existed: a node joining during
                    // one reaches both sides, and bridges them.
                    self.connectivity_changed();
                    self.publish_to_everyone();
                }
            }
            Act::Clog { node, peer, lasts } => {
                let Some(node) = resolve(&running, node) else {
                    return;
                };
                let until = self.now + lasts;
                // The clog ends by itself: a fault from now until then.
                self.stalls.fault(until);
                let peer = peer.and_then(|p| resolve(&running, p));
                match peer {
                    Some(peer) if peer != node => self.net.clog_link(node, peer, until),
                    Some(_) => return,
                    None => self.net.clog_node(node, until),
                }
                // Held heartbeats make members look unreachable until the clog ends.
                self.survival.changed(self.now, false);
                self.survival.changed(until, false);
                self.log(|| TraceEvent::Clogged {
                    node: node.to_string(),
                    peer: peer.map(|p| p.to_string()),
                    until_ns: until.as_nanos(),
                });
                self.mark("messages held by a clog");
            }
            Act::Pause { node, lasts } => {
                if let Some(node) = resolve(&running, node) {
                    self.pause_for(node, lasts);
                }
            }
            Act::PauseHolder { lasts } => {
                let now = self.now;
                let holder = (self.leasing.as_ref()).and_then(|l| l.a_holder(now));
                let Some(holder) = holder.filter(|&h| self.is_running(h)) else {
                    return;
                };
                if self.pause_for(holder.node, lasts) {
                    let downing = self.leasing.as_ref().and_then(|l| l.downing_holder(now));
                    if downing == Some(holder) {
                        self.mark("the downing lease's holder paused while it held it");
                    } else {
                        self.mark("a shard or coordinator lease's holder paused");
                    }
                }
            }
            Act::FullRestart {
                shards,
                restart_after,
            } => self.full_restart(shards, restart_after),
            Act::StoreOutage { lasts } => {
                if let Some(remembering) = &mut self.remembering {
                    remembering.outage(self.now, lasts);
                    self.mark("the remember store became unavailable for a while");
                }
            }
        }
    }

    /// Pauses `node`'s process for `lasts`, unless it is already paused: whether it paused.
    fn pause_for(&mut self, node: NodeId, lasts: Duration) -> bool {
        if !self.pause(node) {
            return false;
        }
        self.stalls.fault(self.now);
        self.topology_changed();
        self.schedule(self.now + lasts, Ev::Fault(Fault::Resume(node)));
        true
    }

    /// The whole cluster goes down: every process stops (those already out stay out) and all
    /// of them start again after `restart_after`, as a new cluster whose type has `shards`
    /// shards (every node configured alike, as an operator restarting it would).
    fn full_restart(&mut self, shards: u32, restart_after: Duration) {
        let mut nodes: BTreeSet<NodeId> = self.nodes.keys().copied().collect();
        nodes.extend(self.nemesis.out());
        if nodes.is_empty() {
            return;
        }
        self.stalls.fault(self.now);
        for &node in &nodes {
            if let Some(member) = self.kill(node) {
                self.log(|| TraceEvent::Crashed {
                    member: member.to_string(),
                });
            }
        }
        self.nemesis.cluster_down(&nodes);
        if shards != self.shards {
            self.mark("the whole cluster restarted with another number of shards");
        }
        self.shards = shards;
        self.workload.set_shards(shards);
        self.oracle.dissolve();
        self.topology_changed();
        let at = self.now + restart_after;
        for &node in &nodes {
            self.schedule(at, Ev::Fault(Fault::Restart(node)));
        }
        // Their next start bootstraps a new cluster: the first seed may form it.
        self.forming = nodes;
    }

    /// Crashes `node` (its process and entities are gone) and restarts it after `restart_after`.
    fn crash(&mut self, node: NodeId, restart_after: Duration) {
        self.stalls.fault(self.now);
        if let Some(member) = self.nodes.get(&node).map(|n| n.id) {
            self.log(|| TraceEvent::Crashed {
                member: member.to_string(),
            });
        }
        self.kill(node);
        self.nemesis.crashed(node);
        self.topology_changed();
        self.schedule(self.now + restart_after, Ev::Fault(Fault::Restart(node)));
    }

    /// A member starts leaving: it is marked Leaving and its regions shut down gracefully. With
    /// the real membership the node does all of it (`Command::Leave`, or `Command::LeaveMember`
    /// on the member at `by`) and reports when it is removed (`Event::LeftCluster`).
    fn leave(&mut self, node: NodeId, by: Option<NodeId>) {
        let Some(member) = self.nodes.get(&node).map(|n| n.id) else {
            return;
        };
        self.stalls.shutdown_began(self.now, member);
        self.leavers.insert(self.now, member);
        if self.opts.cluster.membership == MembershipMode::Real {
            let (to, command) = match by {
                Some(by) => {
                    self.mark("a member was asked to leave by another");
                    (by, shoal_core::Command::LeaveMember { member })
                }
                None => (node, shoal_core::Command::Leave),
            };
            let leave = shoal_core::Input::Command {
                request: shoal_core::RequestId(0),
                command,
            };
            return self.input(to, leave);
        }
        self.oracle.leaving(node);
        self.publish_to_everyone();
        let shutdown = shoal_core::Command::GracefulShutdown { entity_type: None };
        self.input(
            node,
            shoal_core::Input::Command {
                request: shoal_core::RequestId(0),
                command: shutdown,
            },
        );
        self.schedule(
            self.now + Duration::from_secs(1),
            Ev::Fault(Fault::LeaveDone(node)),
        );
    }

    /// An operator on `by` downs the member at `node`: it stops its entities when it hears it,
    /// and restarts as a new incarnation (`Event::LeftCluster { downed: true }`).
    fn down(&mut self, node: NodeId, by: NodeId) {
        let Some(member) = self.nodes.get(&node).map(|n| n.id) else {
            return;
        };
        self.stalls.fault(self.now);
        self.nemesis.member_lost();
        self.survival.downed_by_operator(member);
        self.mark("an operator downed a member");
        let down = shoal_core::Input::Command {
            request: shoal_core::RequestId(0),
            command: shoal_core::Command::Down { member },
        };
        self.input(by, down);
    }

    /// Once a leaving member's region stopped, it becomes Exiting (and is removed later).
    fn leave_done(&mut self, node: NodeId) {
        let Some(sim) = self.nodes.get(&node) else {
            return;
        };
        if self.oracle.status(sim.id) != Some(MemberStatus::Leaving) {
            return;
        }
        if !sim
            .driver
            .node()
            .is_region_stopped(&shoal_core::EntityType::new(super::TYPE))
        {
            self.schedule(
                self.now + Duration::from_secs(1),
                Ev::Fault(Fault::LeaveDone(node)),
            );
            return;
        }
        // Akka's leader moves a Leaving member whose regions have stopped to Exiting, and
        // removes it once every member has seen that (views take at most the detection delay
        // to arrive). Exiting tells a coordinator that the member's regions stopped, so it
        // waits for their last acknowledgements rather than counting them as given: what
        // they forwarded last may still be on its way (rolling-restart seed 903263 with the
        // oracle, which removed Leaving members directly: a new coordinator moved a shard
        // while a leaving proxy's forwards to its owner were still on a slow link, and they
        // arrived after the owner had stopped it).
        self.oracle.exiting(node);
        self.publish_to_everyone();
        let at = self.now + self.opts.cluster.detection_delay;
        self.schedule(at, Ev::Fault(Fault::Remove(node)));
    }

    /// An Exiting member is removed; its process exits once the others have seen that.
    fn remove_exiting(&mut self, node: NodeId) {
        let Some(id) = self.nodes.get(&node).map(|sim| sim.id) else {
            return;
        };
        if self.oracle.status(id) != Some(MemberStatus::Exiting) {
            return;
        }
        self.oracle.remove(node);
        // The leaver hears it too, as with the real membership: its regions, stopped, then
        // announce that they forward nothing more, which the coordinator awaits (above).
        self.publish_to_everyone();
        // The process exits only after every member has seen the removal, and after what they
        // forwarded before that has reached it (messages take at most about 2 s, the
        // latency's long tail).
        self.nemesis.left(node);
        let exit = self.now + self.opts.cluster.detection_delay + Duration::from_secs(3);
        self.schedule(exit, Ev::Fault(Fault::Exit(node)));
    }

    /// Heals every partition; downed members restart soon after (a downed member must restart).
    pub(crate) fn heal(&mut self) {
        if !self.net.partitioned() {
            return;
        }
        self.net.heal();
        self.log(|| TraceEvent::Healed);
        self.stalls.fault(self.now);
        self.topology_changed();
    }

    /// Restarts `node` as its next incarnation if it is crashed or downed.
    pub(crate) fn restart(&mut self, node: NodeId) {
        // A member that left gracefully comes back as a new incarnation: not a fault. A crashed
        // or downed one rejoining sends its old incarnation Down: one.
        let Some(is_fault) = self.nemesis.take_for_restart(node) else {
            return;
        };
        if is_fault {
            self.stalls.fault(self.now);
        }
        if self.opts.cluster.membership == MembershipMode::Oracle && self.oracle.is_empty() {
            // The whole cluster downed itself: a node can only form a new cluster once the old
            // members are gone (an operator restarts them all), or both would run entities.
            for n in self.nemesis.crash_downed() {
                self.kill(n);
            }
        }
        self.kill(node);
        let incarnation = self.last_incarnation.get(&node).map_or(1, |last| last + 1);
        self.start_node(node, Incarnation(incarnation));
        self.connectivity_changed();
        self.publish_to_everyone();
    }

    /// Connectivity changed: downing is decided after `stable-after` without further change, and
    /// failure detection tells every node who is now unreachable (from anyone, as gossip spreads it).
    fn topology_changed(&mut self) {
        self.connectivity_changed();
        let epoch = self.nemesis.topology_changed();
        if self.opts.cluster.membership == MembershipMode::Real {
            return;
        }
        self.schedule(self.now + STABLE_AFTER, Ev::Fault(Fault::Decide(epoch)));
        self.publish_reachability();
    }

    fn publish_reachability(&mut self) {
        let unreachable = self.unreachable();
        if self.oracle.set_unreachable(&unreachable) {
            self.publish_to_everyone();
        }
    }

    /// Groups running members by connectivity and lets the oracle down the losers.
    fn decide(&mut self) {
        let members: Vec<NodeId> = self
            .nodes
            .values()
            .filter(|n| self.oracle.is_member(n.id) && !n.is_paused())
            .map(|n| n.id.node)
            .collect();
        let mut sides: Vec<BTreeSet<NodeId>> = Vec::new();
        for node in members {
            let connected =
                |side: &BTreeSet<NodeId>| side.iter().all(|other| self.net.connected(node, *other));
            match sides.iter_mut().find(|side| connected(side)) {
                Some(side) => {
                    side.insert(node);
                }
                None => sides.push([node].into()),
            }
        }
        let decision = self.oracle.decide(&sides);
        self.log(|| TraceEvent::DowningDecided {
            sides: format!("{sides:?}"),
            downed: decision.downed.iter().map(ToString::to_string).collect(),
        });
        for (to, view) in decision.views {
            self.publish(&to, view);
        }
        for member in decision.downed {
            self.stalls.fault(self.now);
            self.nemesis.member_lost();
            if self.nodes.get(&member.node).is_some_and(|n| n.id == member) {
                let at = self.now + self.nemesis.downed(member.node);
                self.schedule(at, Ev::Fault(Fault::Restart(member.node)));
            }
        }
        self.nemesis.no_survivors_if(decision.no_survivors);
        // Members unreachable only from the downed ones are reachable again.
        self.publish_reachability();
    }

    /// Schedules every action of `schedule`.
    pub(crate) fn schedule_actions(&mut self, schedule: &Schedule) {
        for action in &schedule.0 {
            let at = shoal_core::Instant::ZERO + action.at;
            self.schedule(at, Ev::Fault(Fault::Act(action.act.clone())));
        }
    }
}
