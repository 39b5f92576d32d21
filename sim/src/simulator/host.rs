//! The simulator carries out entity effects with the entity host: starts are checked,
//! deliveries recorded, stops take a while (graceful ones may be ignored until forced, and
//! forced ones take a while too), some entities passivate themselves or stop on their own; the
//! entity contract is checked on every effect and report (`shoal_core::EntityLedger`: one start
//! per incarnation, no delivery to an entity the node told to stop, no stop of an entity that
//! is not running).

use std::time::Duration;

use shoal_core::{EntityEffect, EntityId, Input, MemberId, PassivationCause, Payload, StopReason};

use crate::check::Property;
use crate::entity_host::{Life, StopPlan};
use crate::events::Ev;
use crate::idleness::Passivated;
use crate::trace::TraceEvent;

use super::Simulator;

/// How a letter reached its entity.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(super) enum Via {
    /// The node delivered it (`EntityEffect::Deliver`).
    Node,
    /// A client sent it on its member's direct route.
    Direct,
}

impl Simulator {
    /// A workload message delivered to `member`'s incarnation of `entity`: checked against
    /// its sender's stream, and answered (a persistent entity answers once the message's event
    /// is written).
    fn deliver_workload(&mut self, member: MemberId, entity: &EntityId, payload: Payload) {
        self.check.deliver(self.now, member, entity, &payload);
        let delay = self.host.reply_delay();
        let ask = delay.map(|_| payload);
        if let (Some(delay), Some(payload)) =
            (delay, self.persistent_handed(member, entity, ask, None))
        {
            let reply = Ev::Reply {
                member,
                entity: entity.clone(),
                payload,
            };
            self.schedule(self.now + delay, reply);
        }
    }

    /// Carries out `effect` of `member`'s node.
    pub(crate) fn entity(&mut self, member: MemberId, effect: EntityEffect) {
        self.direct_effect(member, &effect);
        let breach = (self.nodes.get_mut(&member.node))
            .filter(|node| node.id == member)
            .and_then(|node| node.ledger.effect(&effect).err());
        if let Some(breach) = breach {
            // Named by the entity, as every entity property is, so explaining it follows the
            // entity's life.
            let entity = match &effect {
                EntityEffect::Start { entity, .. }
                | EntityEffect::Deliver { entity, .. }
                | EntityEffect::Stop { entity, .. } => entity.clone(),
            };
            let detail = format!("{member}: {breach}");
            self.check
                .fail(self.now, Property::HostContract, &entity, detail);
        }
        match effect {
            EntityEffect::Start {
                entity,
                shard,
                epoch,
                lease_token,
                ..
            } => {
                self.log(|| TraceEvent::EntityStarted {
                    member: member.to_string(),
                    entity: entity.to_string(),
                    shard: shard.to_string(),
                });
                if let Some(reason) = self.host.raced_stop(member, &entity) {
                    self.mark(
                        "a stopped entity restarted at once for messages that raced its stop",
                    );
                    if matches!(reason, Some(StopReason::Passivation(_))) {
                        self.mark("passivation raced a delivery");
                    }
                }
                self.check.start(self.now, member, &entity);
                self.check_lease_holder(member, &entity);
                self.remembered_starting(member, &entity);
                self.remembered_started(&entity);
                self.entity_active(member, &entity);
                self.host.started(member, entity.clone(), self.check.starts);
                self.persistent_started(member, &entity, (shard, epoch, lease_token));
            }
            EntityEffect::Deliver {
                entity, payload, ..
            } => {
                self.hand_over(member, entity, payload, Via::Node);
            }
            EntityEffect::Stop { entity, reason, .. } => {
                self.log(|| TraceEvent::StopRequested {
                    member: member.to_string(),
                    entity: entity.to_string(),
                    reason: format!("{reason:?}"),
                });
                // A stop of an entity that does not run broke the contract (checked above).
                let Some(key) = self.host.running(member, &entity) else {
                    return;
                };
                if let StopReason::Passivation(cause) = reason {
                    let dormant = cause == PassivationCause::Limit;
                    self.remembered_passivating(key.clone(), dormant);
                    self.check_passivation(member, &entity, cause);
                }
                self.idleness.ended(member, &entity);
                match self.host.plan_stop(&key, reason) {
                    StopPlan::Ignored => {}
                    StopPlan::After {
                        delay,
                        was_ignoring,
                    } => {
                        if was_ignoring {
                            self.mark("an entity that ignored its stop was forced");
                        }
                        self.stop_after(key, Some(reason), delay);
                    }
                }
            }
        }
    }

    /// Hands `payload` to `member`'s running incarnation of `entity`, delivered `via` its
    /// node or a direct route. A full mailbox refuses it: the node hears of it (a dead
    /// letter), and a direct letter is given back to go through the node instead.
    pub(super) fn hand_over(
        &mut self,
        member: MemberId,
        entity: EntityId,
        payload: Payload,
        via: Via,
    ) -> Option<Payload> {
        let persisting_full = self.persistent_mailbox_full(member, &entity);
        let full = persisting_full || self.host.mailbox_full(self.now, member, &entity);
        if full && via == Via::Direct {
            self.mark("a full mailbox sent a direct letter through the node");
            return Some(payload);
        }
        self.check_lease_holder(member, &entity);
        if self.tracer.wants_all() {
            self.log(|| TraceEvent::Delivered {
                member: member.to_string(),
                entity: entity.to_string(),
                message: crate::check::describe(&payload),
            });
        }
        // Compared with what the node counts as delivered, which a direct letter bypasses.
        if let Some(node) = self
            .nodes
            .get_mut(&member.node)
            .filter(|_| via == Via::Node)
        {
            node.letters_delivered += 1;
        }
        self.remembered_delivered(&entity, &payload);
        self.entity_active(member, &entity);
        if full {
            if persisting_full {
                self.mark("a persistent entity's full mailbox refused a message");
            }
            self.mark("a full mailbox refused a message");
            self.check.refused(self.now, member, &entity);
            let input = Box::new(Input::MailboxFull {
                entity_type: self.ty.clone(),
                entity,
                payload,
            });
            self.schedule(self.now, Ev::Refused { member, input });
            return None;
        }
        if let Some(delivery) = crate::delivering::Reliable::decode(&payload) {
            self.reliable_delivered(member, &entity, delivery);
        } else {
            self.deliver_workload(member, &entity, payload);
        }
        if self.host.stops_on_its_own() {
            self.stop_on_its_own(member, &entity);
        }
        if let Some(delay) = self.host.passivates() {
            self.schedule(self.now + delay, Ev::Passivate { member, entity });
        }
        None
    }

    /// A store fenced the running incarnation of `entity`'s write: it ends by itself a little
    /// later (unless a stop is under way already, which ends it).
    pub(super) fn stop_fenced(&mut self, member: MemberId, entity: &EntityId) {
        if let Some((key, delay)) = self.host.stop_by_itself(member, entity) {
            self.stop_after(key, None, delay);
        }
    }

    /// The running incarnation of `entity` ends by itself a little later (it was not asked to).
    fn stop_on_its_own(&mut self, member: MemberId, entity: &EntityId) {
        if let Some((key, delay)) = self.host.stop_by_itself(member, entity) {
            self.mark("an entity stopped on its own");
            self.stop_after(key, None, delay);
        }
    }

    /// The incarnation `key` names terminates after `delay`; `reason` is the stop the node
    /// asked for (`None`: it stops on its own).
    fn stop_after(&mut self, key: Life, reason: Option<StopReason>, delay: Duration) {
        let (member, entity, incarnation) = key.clone();
        self.host.stopping(key, reason);
        let stopped = Ev::EntityStopped {
            member,
            entity,
            incarnation,
        };
        self.schedule(self.now + delay, stopped);
    }

    /// The incarnation `key` terminated: the checker and remembering learn of it, and its node
    /// is told (a paused process cannot finish stopping its entities until it resumes).
    pub(crate) fn entity_terminated(&mut self, key: Life) {
        let (member, entity, incarnation) = key;
        let paused = self
            .nodes
            .get(&member.node)
            .is_some_and(|n| n.id == member && n.is_paused());
        if paused {
            let again = Ev::EntityStopped {
                member,
                entity,
                incarnation,
            };
            return self.schedule(self.now + Duration::from_millis(50), again);
        }
        let key = (member, entity, incarnation);
        let Some(reason) = self.host.terminated(&key) else {
            return;
        };
        self.remembered_stopped(&key);
        self.persistent_ended(&key);
        self.reliable_ended(&key);
        let (member, entity, _) = key;
        self.idleness.ended(member, &entity);
        self.log(|| TraceEvent::EntityStopped {
            member: member.to_string(),
            entity: entity.to_string(),
        });
        self.check.stopped(member, &entity);
        let entity_type = self.ty.clone();
        let reported = (self.nodes.get_mut(&member.node))
            .filter(|node| node.id == member)
            .map(|node| node.ledger.stopped(&entity_type, &entity));
        if let Some(Err(breach)) = reported {
            let detail = format!("{member}: {breach}");
            self.check
                .fail(self.now, Property::HostContract, &entity, detail);
        }
        self.host.reporting(Some((member, entity.clone(), reason)));
        self.input_to(
            member,
            Input::EntityStopped {
                entity_type,
                entity,
            },
        );
        self.host.reporting(None);
    }

    /// `entity` on `member` was active (started, or handed a message or a `StartEntity`).
    pub(super) fn entity_active(&mut self, member: MemberId, entity: &EntityId) {
        self.idleness.active(self.now, member, entity);
    }

    /// `member` passivates `entity` for `cause`: one that asked, one idle long enough, or
    /// one the limit chose in a run with a limit.
    fn check_passivation(&mut self, member: MemberId, entity: &EntityId, cause: PassivationCause) {
        if cause == PassivationCause::Limit {
            if self.opts.cluster.active_entity_limit.is_none() {
                let detail = format!("{member} passivated {entity} for a limit it does not have");
                self.check
                    .fail(self.now, Property::Passivation, entity, detail);
            }
            return self.mark("a node passivated an entity over its active-entity limit");
        }
        match self.idleness.passivated(self.now, member, entity, cause) {
            Passivated::Asked => {}
            Passivated::Unasked => {
                let detail = format!("{member} passivated {entity} as asked, unasked");
                self.check
                    .fail(self.now, Property::Passivation, entity, detail);
            }
            Passivated::Unexpected => {
                let detail = format!("{member} passivated remembered {entity} for idleness");
                self.check
                    .fail(self.now, Property::Passivation, entity, detail);
            }
            Passivated::Idle => self.mark("a node passivated an idle entity"),
            Passivated::Early(idle) => {
                let detail = format!(
                    "{member} passivated {entity} for idleness after {:.3}s without activity",
                    idle.as_secs_f64()
                );
                self.check
                    .fail(self.now, Property::Passivation, entity, detail);
            }
        }
    }

    /// Under an active-entity limit, the entities `member` runs and has not asked to stop are
    /// at most its region's limit (or one per hosted shard, if it hosts more shards than
    /// that), whatever just happened: a newcomer's start comes after its victims' stops, and
    /// a lowered limit's victims are asked to stop at once.
    pub(super) fn check_entity_limit(&mut self, n: shoal_core::NodeId, member: MemberId) {
        if self.opts.cluster.active_entity_limit.is_none() {
            return;
        }
        let Some(node) = self.nodes.get(&n).filter(|node| node.id == member) else {
            return;
        };
        let core = node.driver.node();
        let Some(limit) = core.active_entity_limit(&self.ty) else {
            return;
        };
        let running = node.ledger.running(&self.ty);
        let most = limit.max(core.hosted_shards(&self.ty).len());
        if running > most {
            let detail = format!("{member} runs {running} entities, over its limit {most}");
            self.check
                .fail(self.now, Property::Passivation, member, detail);
        }
    }
}
