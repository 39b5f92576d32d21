//! One hosted shard: its entity table and each entity's lifecycle.
//!
//! ```text
//!  (absent) ──message──▶ Active ──Passivate / idle──▶ Stopping(Passivation) ──EntityStopped──▶ (absent)
//!                          │                              │  (messages arriving meanwhile are buffered and
//!                          │                              │   redelivered to a new incarnation)
//!                          └──────── HandOff ───────▶ Stopping(HandOff) ──EntityStopped──▶ (absent)
//! ```
//! A stopping entity that has not stopped by its deadline gets a forced stop. An entity that stops
//! on its own (no passivation) is simply removed.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::effect::{DeadLetterReason, Effects, EntityEffect, StopReason};
use crate::id::{EntityId, EntityType, ShardId};
use crate::message::Payload;
use crate::region::BufferBudget;
use crate::time::{Instant, earliest};

/// A message for an entity; `None` only starts it.
pub(crate) type Delivery = (EntityId, Option<Payload>);

/// Shard-level settings, copied from the node config.
#[derive(Clone, Debug)]
pub(crate) struct ShardSettings {
    pub(crate) stop_timeout: Duration,
    pub(crate) handoff_stop_timeout: Duration,
    pub(crate) idle_after: Option<Duration>,
}

#[derive(Debug)]
struct Entity {
    stopping: Option<Stopping>,
    last_activity: Instant,
    /// Messages that arrived while stopping; they go to the next incarnation.
    buffer: VecDeque<Option<Payload>>,
}

#[derive(Debug)]
struct Stopping {
    force_at: Instant,
    forced: bool,
}

/// The shard state machine.
#[derive(Debug)]
pub(crate) struct Shard {
    id: ShardId,
    entity_type: EntityType,
    settings: ShardSettings,
    entities: BTreeMap<EntityId, Entity>,
    handing_off: bool,
    next_idle_check: Option<Instant>,
}

impl Shard {
    pub(crate) fn new(
        id: ShardId,
        entity_type: EntityType,
        settings: ShardSettings,
        now: Instant,
    ) -> Self {
        let next_idle_check = settings
            .idle_after
            .map(|idle| now + idle_check_interval(idle));
        Self {
            id,
            entity_type,
            settings,
            entities: BTreeMap::new(),
            handing_off: false,
            next_idle_check,
        }
    }

    /// Delivers a message routed through sharding (or starts the entity if `payload` is None).
    /// Must not be called once the shard is handing off: the region buffers instead.
    /// Messages for a stopping entity are buffered within the region-wide `budget`.
    pub(crate) fn handle_delivery(
        &mut self,
        now: Instant,
        entity: EntityId,
        payload: Option<Payload>,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        debug_assert!(!self.handing_off, "delivery to a shard that is handing off");
        match self.entities.get_mut(&entity) {
            Some(e) if e.stopping.is_some() => {
                if !budget.try_take() {
                    out.dead_letter(
                        &self.entity_type,
                        Some(entity),
                        DeadLetterReason::BufferFull,
                    );
                    return;
                }
                e.buffer.push_back(payload);
            }
            _ => self.deliver_now(now, entity, payload, out),
        }
    }

    /// Delivers to the running incarnation, starting one first if there is none.
    fn deliver_now(
        &mut self,
        now: Instant,
        entity: EntityId,
        payload: Option<Payload>,
        out: &mut Effects,
    ) {
        match self.entities.get_mut(&entity) {
            Some(e) => e.last_activity = now,
            None => {
                out.entity(EntityEffect::Start {
                    entity_type: self.entity_type.clone(),
                    entity: entity.clone(),
                    shard: self.id,
                });
                let fresh = Entity {
                    stopping: None,
                    last_activity: now,
                    buffer: VecDeque::new(),
                };
                self.entities.insert(entity.clone(), fresh);
            }
        }
        if let Some(payload) = payload {
            out.entity(self.deliver(entity, payload));
        }
    }

    /// The entity asked to be passivated. Ignored if it is already stopping, or if messages
    /// are buffered for it (Akka's rule: those would have to be redelivered at once anyway).
    pub(crate) fn handle_passivate(&mut self, now: Instant, entity: &EntityId, out: &mut Effects) {
        let Some(e) = self.entities.get_mut(entity) else {
            tracing::debug!(%entity, shard = %self.id, "passivate for an unknown entity");
            return;
        };
        if e.stopping.is_some() || !e.buffer.is_empty() {
            return;
        }
        let force_at = now + self.settings.stop_timeout;
        e.stopping = Some(Stopping {
            force_at,
            forced: false,
        });
        out.entity(stop(&self.entity_type, entity, StopReason::Passivation));
    }

    /// The host reports that an entity terminated. Messages buffered for it are delivered to a
    /// new incarnation.
    pub(crate) fn handle_entity_stopped(
        &mut self,
        now: Instant,
        entity: &EntityId,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        let Some(e) = self.entities.remove(entity) else {
            tracing::debug!(%entity, shard = %self.id, "stop report for an unknown entity");
            return;
        };
        budget.release(e.buffer.len());
        if e.buffer.is_empty() {
            return;
        }
        // Messages that reached the shard while the entity stopped (passivation raced with
        // them) go to a new incarnation, here and in order, even during a handoff: handing them
        // back to the region would let the sender's newer messages overtake them.
        for payload in e.buffer {
            self.deliver_now(now, entity.clone(), payload, out);
        }
        if self.handing_off {
            let force_at = now + self.settings.handoff_stop_timeout;
            if let Some(e) = self.entities.get_mut(entity) {
                e.stopping = Some(Stopping {
                    force_at,
                    forced: false,
                });
                out.entity(stop(&self.entity_type, entity, StopReason::HandOff));
            }
        }
    }

    /// Stops every entity for a handoff. Returns true if the shard is already stopped.
    pub(crate) fn handle_handoff(&mut self, now: Instant, out: &mut Effects) -> bool {
        if self.handing_off {
            return self.is_stopped();
        }
        self.handing_off = true;
        let force_at = now + self.settings.handoff_stop_timeout;
        for (id, e) in &mut self.entities {
            match &mut e.stopping {
                Some(s) => s.force_at = s.force_at.min(force_at),
                None => {
                    e.stopping = Some(Stopping {
                        force_at,
                        forced: false,
                    });
                    out.entity(stop(&self.entity_type, id, StopReason::HandOff));
                }
            }
        }
        self.is_stopped()
    }

    /// Forces every entity to stop now (the member was downed or removed). Returns all
    /// buffered messages, their budget released, so the region can report them as dead letters.
    pub(crate) fn handle_terminate(
        &mut self,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) -> Vec<Delivery> {
        let mut dropped = Vec::new();
        for (id, e) in std::mem::take(&mut self.entities) {
            if !e.stopping.as_ref().is_some_and(|s| s.forced) {
                out.entity(stop(&self.entity_type, &id, StopReason::Forced));
            }
            dropped.extend(e.buffer.into_iter().map(|p| (id.clone(), p)));
        }
        budget.release(dropped.len());
        dropped
    }

    /// Fires forced stops and idle passivation that are due.
    pub(crate) fn handle_timeout(&mut self, now: Instant, out: &mut Effects) {
        for (id, e) in &mut self.entities {
            if let Some(s) = &mut e.stopping {
                if !s.forced && s.force_at <= now {
                    s.forced = true;
                    out.entity(stop(&self.entity_type, id, StopReason::Forced));
                }
            }
        }
        let (Some(check_at), Some(idle)) = (self.next_idle_check, self.settings.idle_after) else {
            return;
        };
        if check_at > now {
            return;
        }
        self.next_idle_check = Some(now + idle_check_interval(idle));
        if self.handing_off {
            return;
        }
        let idle_ids: Vec<EntityId> = self
            .entities
            .iter()
            .filter(|(_, e)| {
                e.stopping.is_none() && now.saturating_duration_since(e.last_activity) >= idle
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle_ids {
            self.handle_passivate(now, &id, out);
        }
    }

    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let force = self
            .entities
            .values()
            .filter_map(|e| {
                e.stopping
                    .as_ref()
                    .filter(|s| !s.forced)
                    .map(|s| s.force_at)
            })
            .min();
        let idle = self
            .next_idle_check
            .filter(|_| !self.entities.is_empty() && !self.handing_off);
        earliest(force, idle)
    }

    pub(crate) fn is_handing_off(&self) -> bool {
        self.handing_off
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.handing_off && self.entities.is_empty()
    }

    /// Whether the entity has a running (or stopping) incarnation here.
    pub(crate) fn is_alive(&self, entity: &EntityId) -> bool {
        self.entities.contains_key(entity)
    }

    /// Live entities in id order.
    pub(crate) fn entity_ids(&self) -> Vec<EntityId> {
        self.entities.keys().cloned().collect()
    }

    pub(crate) fn entity_count(&self) -> usize {
        self.entities.len()
    }

    fn deliver(&self, entity: EntityId, payload: Payload) -> EntityEffect {
        EntityEffect::Deliver {
            entity_type: self.entity_type.clone(),
            entity,
            payload,
        }
    }
}

/// Akka checks idleness every `timeout / 2`.
fn idle_check_interval(idle: Duration) -> Duration {
    (idle / 2).max(Duration::from_millis(1))
}

fn stop(entity_type: &EntityType, entity: &EntityId, reason: StopReason) -> EntityEffect {
    EntityEffect::Stop {
        entity_type: entity_type.clone(),
        entity: entity.clone(),
        reason,
    }
}
