//! What the simulator makes of a node's events: the checks each one is owed (replies,
//! allocation gates, region statistics, graceful stalls), the coverage markers, and the faults
//! membership decides (a member downed or removed after leaving).

use std::collections::BTreeSet;

use shoal_core::{EntityId, Event, MemberId, NodeId, ShardId};

use crate::check::Property;
use crate::events::Ev;
use crate::nemesis::Fault;
use crate::trace::TraceEvent;

use super::Simulator;

/// What a coordinator decided in one driver call, judged after it on the view it decided on.
#[derive(Debug, Default)]
pub(super) struct Decided {
    /// Rebalance rounds.
    pub(super) rounds: Vec<Vec<ShardId>>,
    /// Handoffs abandoned, with the regions they waited for.
    pub(super) abandoned: Vec<(ShardId, Vec<MemberId>)>,
}

impl Simulator {
    /// Handles `event` of node `n` (member `member`); rebalance rounds and abandoned handoffs
    /// are collected in `decided`, to be judged once the call's effects are through, on the
    /// view they were decided on.
    pub(super) fn node_event(
        &mut self,
        n: NodeId,
        member: MemberId,
        event: Event,
        decided: &mut Decided,
    ) {
        if let Some(truth) = &mut self.truth {
            truth.observe(self.now, member, &event);
        }
        match event {
            Event::ShardFenced { .. } => {
                self.mark("a shard instance was fenced and stopped");
            }
            Event::CoordinatorUnanswered {
                coordinator,
                registered,
                attempts,
                buffered,
                ..
            } => {
                self.mark("a region warned that its coordinator does not answer");
                let warning = super::unanswered::Warning {
                    coordinator,
                    registered,
                    attempts,
                    buffered,
                };
                self.check_coordinator_warning(n, member, warning);
            }
            Event::RememberedIdsMisfiled {
                shard, entities, ..
            } => {
                // The store refiles ids atomically when the shard count changes, and fences
                // every instance that loaded before: no load may find an id filed elsewhere.
                let detail = format!("{shard} loaded ids that map to other shards: {entities:?}");
                self.check
                    .fail(self.now, Property::Remembering, member, detail);
            }
            Event::DeadLetter {
                entity,
                payload,
                reason,
                ..
            } => {
                self.dead_letters += 1;
                if reason == shoal_core::DeadLetterReason::BufferFull {
                    self.mark("a full buffer dead-lettered a message");
                }
                self.log(|| TraceEvent::DeadLetter {
                    member: member.to_string(),
                    entity: entity.to_string(),
                    reason: format!("{reason:?}"),
                });
                if let Some(payload) = payload {
                    self.reliable_refused(member, &entity, &payload);
                    self.check.dead_letter(&entity, &payload, reason);
                }
            }
            Event::MembershipChanged => {
                // Decided before this view change: the view they were decided on is gone.
                decided.rounds.clear();
                decided.abandoned.clear();
                self.coordinator_view_changed(n);
                if let Some(node) = self.nodes.get_mut(&n) {
                    let status = node.driver.node().view().status(member);
                    let before = std::mem::replace(&mut node.own_status, status);
                    if before != status {
                        self.own_statuses_changed += 1;
                        if status == Some(shoal_core::MemberStatus::Down) {
                            node.status_before_down = before;
                        }
                    }
                }
                if self.tracing() {
                    let members = self
                        .nodes
                        .get(&n)
                        .map(|node| crate::trace::view_entries(node.driver.node().view()))
                        .unwrap_or_default();
                    self.log(|| TraceEvent::View {
                        member: member.to_string(),
                        version: None,
                        members,
                    });
                }
            }
            Event::LeftCluster { downed } => self.left_cluster(n, downed),
            Event::AppMessage { payload, .. } => {
                if self.reliable_confirmed(member, &payload) {
                    return;
                }
                if let Some(detail) = self.asks.arrived(member, &payload) {
                    self.check
                        .fail(self.now, Property::AskReply, member, detail);
                }
            }
            Event::AppDeadLetter {
                to,
                payload,
                reason,
            } => {
                self.log(|| TraceEvent::ReplyDeadLettered {
                    member: member.to_string(),
                    reason: format!("{reason:?}"),
                });
                self.mark("an ask's reply was dead-lettered");
                self.asks.dead_lettered(&payload);
                if reason == shoal_core::DeadLetterReason::MemberGone {
                    self.check_gone(n, member, to);
                }
            }
            Event::Reply { request, result } if self.requests.is_ours(request) => {
                self.request_answered(member, request, &result);
            }
            Event::AllocationWaiting { gate, shards, .. } => {
                self.allocation_waiting(member, &gate, &shards);
            }
            Event::ShardStopped { shard, .. } => {
                let stall = self.stalls.shard_stopped(self.now, shard, member);
                self.stall(stall);
            }
            Event::ShardStarted { shard, .. } => {
                let stall = self.stalls.shard_started(self.now, shard, member);
                self.stall(stall);
            }
            Event::RegionStopped { .. } => {
                let stall = self.stalls.region_stopped(self.now, member);
                self.stall(stall);
            }
            Event::CoordinatorStarted { .. } | Event::CoordinatorStopped { .. } => {
                self.stalls.coordinator_changed();
            }
            Event::Rebalance { shards, .. } => decided.rounds.push(shards),
            Event::RegionRegistered { .. } => self.coordinator_counts_reset(n),
            Event::HandoffAbandoned {
                shard, waiting_for, ..
            } => {
                self.mark("a handoff whose acknowledgements timed out was abandoned");
                decided.abandoned.push((shard, waiting_for));
            }
            // Replies to the simulator's own commands (request 0), store failures
            // and events of a newer core (they are non-exhaustive): nothing to check.
            _ => {}
        }
    }

    /// Node `n` is out of the cluster (real membership). Downed: its entities are stopped and
    /// the process must restart as a new incarnation; removed after leaving: it exits once the
    /// others have learned of the removal.
    fn left_cluster(&mut self, n: NodeId, downed: bool) {
        let member = self
            .nodes
            .get(&n)
            .map_or_else(|| n.to_string(), |node| node.id.to_string());
        self.log(|| TraceEvent::LeftCluster { member, downed });
        if downed {
            self.judge_downing(n);
            self.stalls.fault(self.now);
            let at = self.now + self.nemesis.downed(n);
            self.schedule(at, Ev::Fault(Fault::Restart(n)));
        } else {
            let at = self.now + self.nemesis.left_cluster(n);
            self.schedule(at, Ev::Fault(Fault::Exit(n)));
        }
    }

    /// `member` (on node `n`) dead-lettered a reply to `to` as gone. An asker whose process
    /// runs, that no newer incarnation replaced and that `member`'s view neither marks Down
    /// nor lists as removed is not gone: its reply must reach it (a new incarnation of an
    /// asker while its node's old one is still known, say).
    fn check_gone(&mut self, n: NodeId, member: MemberId, to: MemberId) {
        let Some(node) = self.nodes.get(&n).filter(|_| self.is_running(to)) else {
            return;
        };
        let view = node.driver.node().view();
        let gone = view.status(to) == Some(shoal_core::MemberStatus::Down)
            || view.removed().contains(&to)
            || !self.is_member(to);
        if !gone {
            let detail = format!(
                "{member} dead-lettered a reply to {to} as gone, but {to} runs and is a member"
            );
            self.check
                .fail(self.now, Property::AskReply, member, detail);
        }
    }

    /// A client request was answered by `member`.
    fn request_answered(
        &mut self,
        member: MemberId,
        request: shoal_core::RequestId,
        result: &Result<shoal_core::Reply, shoal_core::CommandError>,
    ) {
        self.log(|| TraceEvent::Answered {
            member: member.to_string(),
            request: request.to_string(),
            result: format!("{result:?}"),
        });
        let stopped = (self.nodes.get(&member.node)).is_some_and(|n| n.region_terminated(&self.ty));
        let timeouts = crate::requests::Timeouts::of(&self.settings, stopped);
        let asked = self.requests.sent_at(request);
        if let Err(detail) = self
            .requests
            .answer(self.now, timeouts, member, request, result)
        {
            self.check
                .fail(self.now, Property::CommandReply, member, detail);
        }
        match result {
            // Started here: it runs here now (an acknowledgement from another member is
            // checked when it leaves that member).
            Ok(shoal_core::Reply::EntityStarted { entity, region, .. }) => {
                if let Some(r) = &mut self.remembering {
                    r.start_answered(entity);
                }
                if *region == member {
                    self.check_started_at(member, entity);
                }
                self.mark("an entity started on request was acknowledged");
            }
            // Answered from the shard hosted here: exactly what runs here now (a remote
            // answer was true when the home region gave it, and may be stale on arrival).
            Ok(shoal_core::Reply::EntityLocation {
                entity,
                region: Some(region),
                alive,
                ..
            }) if *region == member => {
                if *alive != self.check.is_live(member, entity) {
                    let detail = format!(
                        "{member} located {entity} here, alive: {alive}, but it {} run here",
                        if *alive { "does not" } else { "does" }
                    );
                    self.check
                        .fail(self.now, Property::CommandReply, entity, detail);
                }
                self.mark(if *alive {
                    "a location query found its entity running locally"
                } else {
                    "a location query found its entity's shard here, the entity not running"
                });
            }
            Ok(shoal_core::Reply::EntityLocation { alive: true, .. }) => {
                self.mark("a location query found its entity running on another member");
            }
            Ok(shoal_core::Reply::ShardRegionState { shards }) => {
                self.check_region_state(member, shards);
            }
            Ok(shoal_core::Reply::Explanation(explanation)) => {
                if let Some(asked) = asked {
                    self.check_explanation(member, asked, explanation);
                }
            }
            Ok(shoal_core::Reply::ClusterShardingStats { failed, .. }) => {
                self.mark(if failed.is_empty() {
                    "statistics from every region"
                } else {
                    "statistics gave up on a region"
                });
            }
            _ => {}
        }
    }

    /// The coordinator on `member` says requests for `shards` wait on its gate: they must,
    /// and the gate must name what it waits for.
    fn allocation_waiting(
        &mut self,
        member: MemberId,
        gate: &shoal_core::AllocationGate,
        shards: &[ShardId],
    ) {
        self.log(|| TraceEvent::AllocationWaits {
            member: member.to_string(),
            gate: format!("{gate:?}"),
            shards: format!("{shards:?}"),
        });
        let waits_for_nothing = gate.unregistered.is_empty()
            && gate.recently_removed.is_empty()
            && gate.registered >= gate.needed
            && !gate.store_pending
            && !gate.lease_pending;
        let needed = self.opts.cluster.min_registered_regions;
        if gate.open || shards.is_empty() || waits_for_nothing || gate.needed as usize != needed {
            let detail = format!(
                "{member} reported allocation waiting with the gate {gate:?} for shards {shards:?}"
            );
            self.check
                .fail(self.now, Property::EventReport, member, detail);
        }
        if !gate.unregistered.is_empty() {
            self.mark("allocation waited for a member that had not registered");
        }
        if !gate.recently_removed.is_empty() {
            self.mark("allocation waited out a recent removal");
        }
        if gate.registered < gate.needed {
            self.mark("allocation waited for enough regions to register");
        }
        if gate.store_pending {
            self.mark("allocation waited for the remember store's list of shards");
        }
        if gate.lease_pending {
            self.mark("allocation waited for the coordinator's lease");
        }
    }

    /// `region` reports `(shard, live entities)` for the shards it hosts: exactly what runs
    /// there now.
    pub(super) fn check_region_stats(&mut self, region: MemberId, shards: &[(ShardId, u32)]) {
        for &(shard, reported) in shards {
            let running = (self.workload.entity_ids().iter())
                .filter(|e| shoal_core::shard_of(e, self.shards) == shard)
                .filter(|e| self.check.is_live(region, e))
                .count();
            if running != reported as usize {
                let detail = format!(
                    "{region} reports {reported} entities in {shard}, but {running} run there"
                );
                self.check
                    .fail(self.now, Property::CommandReply, region, detail);
            }
        }
    }

    /// `region` lists the shards it hosts with their live entities: only entities that run
    /// there, each under the shard it maps to, and every one running there that it has not
    /// told to stop (a region that terminates its shards, downed, lists none while their
    /// entities finish stopping).
    fn check_region_state(&mut self, region: MemberId, shards: &[(ShardId, Vec<EntityId>)]) {
        let running: BTreeSet<&EntityId> = (self.workload.entity_ids().iter())
            .filter(|e| self.check.is_live(region, e))
            .collect();
        let staying = (running.iter()).filter(|e| !self.host.stop_requested(region, e));
        let listed: BTreeSet<&EntityId> = shards.iter().flat_map(|(_, ids)| ids).collect();
        let misfiled: Vec<&EntityId> = (shards.iter())
            .flat_map(|(shard, ids)| {
                let shards = self.shards;
                ids.iter()
                    .filter(move |e| shoal_core::shard_of(e, shards) != *shard)
            })
            .collect();
        let unlisted = staying.clone().any(|e| !listed.contains(e));
        if !listed.is_subset(&running) || unlisted || !misfiled.is_empty() {
            let detail = format!(
                "{region} lists {listed:?} as its live entities ({misfiled:?} under another \
                 shard), but {running:?} run there"
            );
            self.check
                .fail(self.now, Property::CommandReply, region, detail);
        }
        if !listed.is_empty() {
            self.mark("a region's state listed its live entities");
        }
    }

    /// `member` asks its coordinator where `shard` lives: never while it hosts the shard
    /// itself (its messages wait for the shard's handoff, not for a home).
    pub(super) fn check_home_asked(&mut self, member: MemberId, shard: ShardId) {
        let Some(node) = self.nodes.get(&member.node).filter(|n| n.id == member) else {
            return;
        };
        if node.driver.node().hosted_shards(&self.ty).contains(&shard) {
            let detail = format!("{member} asked where {shard} lives while hosting it");
            self.check
                .fail(self.now, Property::CoreInvariant, member, detail);
        }
    }

    /// `member` says `entity` runs there: it must.
    pub(super) fn check_started_at(&mut self, member: MemberId, entity: &EntityId) {
        self.entity_active(member, entity);
        if !self.check.is_live(member, entity) {
            let detail =
                format!("{member} acknowledged {entity} started, but it does not run there");
            self.check
                .fail(self.now, Property::CommandReply, entity, detail);
        }
    }

    /// Records a graceful operation that overran its bound.
    pub(super) fn stall(&mut self, stall: Option<crate::stall::Stall>) {
        if let Some(stall) = stall {
            self.check.fail(
                self.now,
                Property::GracefulStall,
                stall.subject,
                stall.detail,
            );
        }
    }
}
