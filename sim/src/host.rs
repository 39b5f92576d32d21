//! The simulated host's entities: starts are checked, deliveries recorded, stops take a while
//! (graceful ones may be ignored until forced, and forced ones take a while too), some entities
//! passivate themselves or stop on their own; the drive contract is checked (no delivery to an
//! entity the node told to stop, no stop of an entity that is not running).

use std::time::Duration;

use shoal_core::{EntityEffect, EntityId, Input, MemberId, StopReason};

use crate::check::Property;
use crate::trace::TraceEvent;
use crate::world::{Ev, World};

impl World {
    /// The host runs entities: starts are checked, deliveries recorded, stops take a while
    /// (graceful ones may be ignored until forced), and some entities passivate themselves.
    pub(crate) fn entity(&mut self, member: MemberId, effect: EntityEffect) {
        match effect {
            EntityEffect::Start { entity, shard, .. } => {
                self.log(|| TraceEvent::EntityStarted {
                    member: member.to_string(),
                    entity: entity.to_string(),
                    shard: shard.to_string(),
                });
                let raced = match &self.reporting_stop {
                    Some((m, e, reason)) if *m == member && *e == entity => Some(*reason),
                    _ => None,
                };
                if let Some(reason) = raced {
                    self.mark(
                        "a stopped entity restarted at once for messages that raced its stop",
                    );
                    if reason == Some(StopReason::Passivation) {
                        self.mark("passivation raced a delivery");
                    }
                }
                self.check.start(self.now, member, &entity);
                self.remembered_started(&entity);
                self.incarnations
                    .insert((member, entity), self.check.starts);
            }
            EntityEffect::Deliver {
                entity, payload, ..
            } => {
                if self.trace_all {
                    self.log(|| TraceEvent::Delivered {
                        member: member.to_string(),
                        entity: entity.to_string(),
                        message: crate::check::describe(&payload),
                    });
                }
                if self.stop_requested(member, &entity) {
                    let detail = format!("{member} delivered to {entity} after stopping it");
                    self.check
                        .fail(self.now, Property::HostContract, &entity, detail);
                }
                if self.mailbox_full(member, &entity) {
                    self.mark("a full mailbox refused a message");
                    self.check.refused(self.now, member, &entity);
                    let input = Box::new(Input::MailboxFull {
                        entity_type: self.ty.clone(),
                        entity,
                        payload,
                    });
                    return self.schedule(self.now, Ev::Refused { member, input });
                }
                self.check.deliver(self.now, member, &entity, &payload);
                if self.opts.asks > 0.0 && self.rng_replies.chance(self.opts.asks) {
                    let (least, most) = (Duration::from_millis(1), Duration::from_millis(20));
                    let delay = self.rng_replies.duration(least, most);
                    let reply = Ev::Reply {
                        member,
                        entity: entity.clone(),
                        payload: payload.clone(),
                    };
                    self.schedule(self.now + delay, reply);
                }
                let self_stop = self.opts.faults.self_stop;
                if self_stop > 0.0 && self.rng_host.chance(self_stop) {
                    self.stop_on_its_own(member, &entity);
                }
                let passivate = self.opts.faults.passivate;
                if passivate > 0.0 && self.rng_entities.chance(passivate) {
                    let delay = self
                        .rng_entities
                        .duration(Duration::from_millis(1), Duration::from_secs(2));
                    self.schedule(self.now + delay, Ev::Passivate { member, entity });
                }
            }
            EntityEffect::Stop { entity, reason, .. } => {
                self.log(|| TraceEvent::StopRequested {
                    member: member.to_string(),
                    entity: entity.to_string(),
                    reason: format!("{reason:?}"),
                });
                let Some(key) = self.running(member, &entity) else {
                    let detail = format!("{member} stopped {entity}, which does not run there");
                    return self
                        .check
                        .fail(self.now, Property::HostContract, &entity, detail);
                };
                if reason == StopReason::Passivation {
                    self.remembered_passivating(key.clone());
                }
                let delay = match reason {
                    StopReason::Forced => {
                        if self.ignored_stops.remove(&key) {
                            self.mark("an entity that ignored its stop was forced");
                        }
                        let slowest = self.opts.faults.forced_stop;
                        if slowest > Duration::from_millis(1) {
                            self.rng_host.duration(Duration::from_millis(1), slowest)
                        } else {
                            slowest
                        }
                    }
                    _ if self.rng_entities.chance(self.opts.faults.ignore_stop) => {
                        self.ignored_stops.insert(key);
                        return;
                    }
                    _ => self
                        .rng_entities
                        .duration(Duration::from_millis(1), self.opts.faults.slow_stop),
                };
                self.stop_after(key, Some(reason), delay);
            }
        }
    }

    /// The key of `member`'s running incarnation of `entity`, if one runs.
    fn running(&self, member: MemberId, entity: &EntityId) -> Option<(MemberId, EntityId, u64)> {
        let incarnation = *self.incarnations.get(&(member, entity.clone()))?;
        Some((member, entity.clone(), incarnation))
    }

    /// Whether the node told the host to stop `member`'s running incarnation of `entity`.
    fn stop_requested(&self, member: MemberId, entity: &EntityId) -> bool {
        let Some(key) = self.running(member, entity) else {
            return false;
        };
        self.ignored_stops.contains(&key)
            || self.pending_stops.get(&key).is_some_and(Option::is_some)
    }

    /// Whether `entity`'s mailbox on `member` is full; if not, it takes one more message.
    fn mailbox_full(&mut self, member: MemberId, entity: &EntityId) -> bool {
        let Some(mailbox) = self.opts.mailbox else {
            return false;
        };
        let now = self.now;
        let through = self
            .mailboxes
            .entry((member, entity.clone()))
            .or_insert(now);
        // Messages not yet handled, the one in hand included.
        let backlog = (through.saturating_duration_since(now).as_nanos())
            .div_ceil(mailbox.service.as_nanos());
        if backlog >= u128::from(mailbox.capacity) {
            return true;
        }
        *through = (*through).max(now) + mailbox.service;
        false
    }

    /// The running incarnation of `entity` ends by itself a little later (it was not asked to).
    fn stop_on_its_own(&mut self, member: MemberId, entity: &EntityId) {
        let Some(key) = self.running(member, entity) else {
            return;
        };
        if self.pending_stops.contains_key(&key) || self.ignored_stops.contains(&key) {
            return;
        }
        self.mark("an entity stopped on its own");
        let delay = self
            .rng_host
            .duration(Duration::from_millis(1), Duration::from_secs(1));
        self.stop_after(key, None, delay);
    }

    /// The incarnation `key` names terminates after `delay`; `reason` is the stop the node
    /// asked for (`None`: it stops on its own).
    fn stop_after(
        &mut self,
        key: (MemberId, EntityId, u64),
        reason: Option<StopReason>,
        delay: Duration,
    ) {
        let (member, entity, incarnation) = key.clone();
        self.pending_stops.insert(key, reason);
        let stopped = Ev::EntityStopped {
            member,
            entity,
            incarnation,
        };
        self.schedule(self.now + delay, stopped);
    }
}
