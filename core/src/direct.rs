//! The host's direct route to its running entities: the rules that let a host hand its own
//! senders' messages straight to a running incarnation, bypassing the node, without breaking
//! a guarantee. The node stays the authority; the host only learns from its effects when a
//! route may open and when it must close.
//!
//! - **Opening.** A route to an entity opens only when a letter of this host's own senders,
//!   fed to the node as `Input::Tell`, was handed to the running incarnation in the same call
//!   (an `EntityEffect::Deliver` of that entity). The node delivers one sender region's
//!   messages to an entity in send order, so every earlier letter of this host to that entity
//!   was delivered (or dropped) by then: nothing of its own is left in the node's path for a
//!   direct letter to overtake. A letter the node buffered or forwarded instead closes the
//!   route, and it stays closed until a later letter is handed over at once.
//! - **Closing.** Any `EntityEffect::Stop` of the entity (passivation, handoff, forced) and
//!   any `Start` (a new incarnation) close its route before the stop is carried out, so a
//!   direct letter reaches only the incarnation it was granted for, ahead of its stop, and
//!   every later letter goes through the node, which buffers it for the next incarnation. A
//!   direct send that fails (a full or closed mailbox) goes through the node instead.
//! - **The host's part.** While any letter of its senders to the entity waits in the host's
//!   own queue for the node, they send through the node too: the host keeps that count and
//!   opens or closes a route before it lets the count drop.
//! - **Activity.** Direct deliveries do not pass the node, so the host notes them in an
//!   [`AccessLog`] and feeds them back as `Input::Accessed` before its next call that could
//!   depend on them (timers, any input): idle timeouts and the active-entity limit see every
//!   access, at most one host round late, each entity once per report.
//!
//! The simulator runs these rules with its own route caches and judges them with the order,
//! exactly-once and dead-incarnation checks.

use std::collections::{BTreeMap, BTreeSet};

use crate::effect::EntityEffect;
use crate::id::{EntityId, EntityType};
use crate::input::Input;

/// What the host must do to its route to an entity.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum RouteChange {
    /// The running incarnation may now be sent to directly.
    Open(EntityType, EntityId),
    /// Senders must go through the node from now on.
    Close(EntityType, EntityId),
}

/// The letter of the host's own senders being fed to the node, and whether it was handed over.
#[derive(Debug)]
struct InFlight {
    entity_type: EntityType,
    entity: EntityId,
    handed_over: bool,
}

/// Decides from the node's entity effects when the host's direct routes open and close.
#[derive(Debug, Default)]
pub struct RouteGate {
    in_flight: Option<InFlight>,
}

impl RouteGate {
    /// The host is about to feed the node a letter of its own senders to `entity`.
    pub fn begin_letter(&mut self, entity_type: &EntityType, entity: &EntityId) {
        self.in_flight = Some(InFlight {
            entity_type: entity_type.clone(),
            entity: entity.clone(),
            handed_over: false,
        });
    }

    /// An entity effect of the node, before the host carries it out: a route it closes.
    pub fn handle_effect(&mut self, effect: &EntityEffect) -> Option<RouteChange> {
        match effect {
            EntityEffect::Deliver {
                entity_type,
                entity,
                ..
            } => {
                if let Some(f) = &mut self.in_flight {
                    if f.entity == *entity && f.entity_type == *entity_type {
                        f.handed_over = true;
                    }
                }
                None
            }
            EntityEffect::Start {
                entity_type,
                entity,
                ..
            }
            | EntityEffect::Stop {
                entity_type,
                entity,
                ..
            } => Some(RouteChange::Close(entity_type.clone(), entity.clone())),
        }
    }

    /// The node's call with the letter is done: the route opens if the letter was handed to
    /// the running incarnation, else it closes.
    pub fn end_letter(&mut self) -> Option<RouteChange> {
        let f = self.in_flight.take()?;
        Some(if f.handed_over {
            RouteChange::Open(f.entity_type, f.entity)
        } else {
            RouteChange::Close(f.entity_type, f.entity)
        })
    }
}

/// Entities the host handed messages on a direct route since its last report.
#[derive(Debug, Default)]
pub struct AccessLog {
    /// Per type: the entities in the order of their first access, and the same as a set.
    by_type: BTreeMap<EntityType, (Vec<EntityId>, BTreeSet<EntityId>)>,
}

impl AccessLog {
    /// `entity` was handed a message directly.
    pub fn note(&mut self, entity_type: &EntityType, entity: &EntityId) {
        if let Some((order, seen)) = self.by_type.get_mut(entity_type) {
            if seen.insert(entity.clone()) {
                order.push(entity.clone());
            }
            return;
        }
        let first = (vec![entity.clone()], BTreeSet::from([entity.clone()]));
        self.by_type.insert(entity_type.clone(), first);
    }

    /// Whether nothing was noted since the last report.
    pub fn is_empty(&self) -> bool {
        self.by_type.is_empty()
    }

    /// The report: one `Input::Accessed` per type, in type order; the log is empty after.
    pub fn take_inputs(&mut self) -> Vec<Input> {
        std::mem::take(&mut self.by_type)
            .into_iter()
            .map(|(entity_type, (entities, _))| Input::Accessed {
                entity_type,
                entities,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::id::{Epoch, ShardId};
    use crate::message::Payload;
    use crate::reason::StopReason;

    fn key() -> (EntityType, EntityId) {
        (EntityType::new("t"), EntityId::new("e1"))
    }

    fn deliver(entity: &str) -> EntityEffect {
        EntityEffect::Deliver {
            entity_type: EntityType::new("t"),
            entity: EntityId::new(entity),
            payload: Payload(vec![1]),
        }
    }

    #[test]
    fn a_route_opens_only_when_the_hosts_letter_was_handed_over_in_the_same_call() {
        let (t, e) = key();
        let mut gate = RouteGate::default();
        gate.begin_letter(&t, &e);
        assert_eq!(gate.handle_effect(&deliver("other")), None);
        assert_eq!(
            gate.end_letter(),
            Some(RouteChange::Close(t.clone(), e.clone())),
            "another entity's delivery is not this letter's"
        );
        gate.begin_letter(&t, &e);
        assert_eq!(gate.handle_effect(&deliver("e1")), None);
        assert_eq!(gate.end_letter(), Some(RouteChange::Open(t, e)));
        assert_eq!(gate.end_letter(), None, "one answer per letter");
    }

    #[test]
    fn starts_and_stops_close_the_route_whatever_the_letter() {
        let (t, e) = key();
        let mut gate = RouteGate::default();
        let stop = EntityEffect::Stop {
            entity_type: t.clone(),
            entity: e.clone(),
            reason: StopReason::HandOff,
        };
        assert_eq!(
            gate.handle_effect(&stop),
            Some(RouteChange::Close(t.clone(), e.clone()))
        );
        let start = EntityEffect::Start {
            entity_type: t.clone(),
            entity: e.clone(),
            shard: ShardId(1),
            epoch: Epoch(0),
            lease_token: None,
        };
        gate.begin_letter(&t, &e);
        assert_eq!(
            gate.handle_effect(&start),
            Some(RouteChange::Close(t.clone(), e.clone()))
        );
        gate.handle_effect(&deliver("e1"));
        assert_eq!(
            gate.end_letter(),
            Some(RouteChange::Open(t, e)),
            "a letter that started its entity and was handed over opens the new route"
        );
    }

    #[test]
    fn the_access_log_reports_each_entity_once_per_type_in_first_access_order() {
        let mut log = AccessLog::default();
        assert!(log.is_empty());
        let (a, b) = (EntityType::new("a"), EntityType::new("b"));
        for (t, e) in [(&b, "x"), (&a, "y"), (&b, "z"), (&b, "x")] {
            log.note(t, &EntityId::new(e));
        }
        let inputs = log.take_inputs();
        assert_eq!(
            inputs,
            [
                Input::Accessed {
                    entity_type: a,
                    entities: vec![EntityId::new("y")],
                },
                Input::Accessed {
                    entity_type: b,
                    entities: vec![EntityId::new("x"), EntityId::new("z")],
                },
            ]
        );
        assert!(log.is_empty() && log.take_inputs().is_empty());
    }
}
