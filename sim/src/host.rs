//! The simulated host's entities: starts are checked, deliveries recorded, stops take a while
//! (graceful ones may be ignored until forced), and some entities passivate themselves.

use std::time::Duration;

use shoal_core::{EntityEffect, MemberId, StopReason};

use crate::world::{Ev, World};

impl World {
    /// The host runs entities: starts are checked, deliveries recorded, stops take a while
    /// (graceful ones may be ignored until forced), and some entities passivate themselves.
    pub(crate) fn entity(&mut self, member: MemberId, effect: EntityEffect) {
        match effect {
            EntityEffect::Start { entity, shard, .. } => {
                self.log(|| format!("{member} start {entity} ({shard})"));
                let raced = match &self.reporting_stop {
                    Some((m, e, reason)) if *m == member && *e == entity => Some(*reason),
                    _ => None,
                };
                if let Some(reason) = raced {
                    self.mark(
                        "a stopped entity restarted at once for messages that raced its stop",
                    );
                    if reason == StopReason::Passivation {
                        self.mark("passivation raced a delivery");
                    }
                }
                self.check.start(self.now, member, &entity);
                self.incarnations
                    .insert((member, entity), self.check.starts);
            }
            EntityEffect::Deliver {
                entity, payload, ..
            } => {
                if self.trace_all {
                    let sent = crate::check::describe(&payload);
                    self.log(|| format!("{member} deliver {entity} {sent}"));
                }
                self.check.deliver(self.now, member, &entity, &payload);
                let passivate = self.opts.faults.passivate;
                if passivate > 0.0 && self.rng_entities.chance(passivate) {
                    let delay = self
                        .rng_entities
                        .duration(Duration::from_millis(1), Duration::from_secs(2));
                    self.schedule(self.now + delay, Ev::Passivate { member, entity });
                }
            }
            EntityEffect::Stop { entity, reason, .. } => {
                self.log(|| format!("{member} stop {entity} {reason:?}"));
                let Some(&incarnation) = self.incarnations.get(&(member, entity.clone())) else {
                    return;
                };
                let key = (member, entity.clone(), incarnation);
                let delay = match reason {
                    StopReason::Forced => {
                        if self.ignored_stops.remove(&key) {
                            self.mark("an entity that ignored its stop was forced");
                        }
                        Duration::from_millis(1)
                    }
                    _ if self.rng_entities.chance(self.opts.faults.ignore_stop) => {
                        self.ignored_stops.insert(key);
                        return;
                    }
                    _ => self
                        .rng_entities
                        .duration(Duration::from_millis(1), self.opts.faults.slow_stop),
                };
                self.pending_stops.insert(key, reason);
                self.schedule(
                    self.now + delay,
                    Ev::EntityStopped {
                        member,
                        entity,
                        incarnation,
                    },
                );
            }
        }
    }
}
