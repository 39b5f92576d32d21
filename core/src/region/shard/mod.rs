//! One hosted shard: its entity table and each entity's lifecycle.
//!
//! ```text
//!  (absent) ──message──▶ Active ──Passivate / idle──▶ Stopping ──EntityStopped──▶ (absent)
//!                          │                             ▲  (messages arriving meanwhile are
//!                          └──────── HandOff ────────────┘   buffered, then delivered to a
//!                                                            new incarnation)
//! ```
//! A stopping entity that has not stopped by its deadline gets a forced stop. An entity that stops
//! on its own (no passivation) is simply removed.
//!
//! With remembering on (see `crate::remember` and `remembering`) a new entity starts only once
//! its start is durable, its letters waiting meanwhile; the remembered ones start when the shard
//! has loaded them; a handoff also waits for the recorded changes to be written.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::effect::{Effects, EntityEffect};
use crate::id::{EntityId, EntityType, Epoch, ShardId};
use crate::message::Body;
use crate::message::{Delivery, Letter, StartOutcome};
use crate::passivation::{ActiveEntities, ReplacementPolicy};
use crate::reason::{DeadLetterReason, PassivationCause, StopReason};
use crate::region::BufferBudget;
use crate::remember::Remembered;
use crate::time::Instant;

mod lease;
mod limit;
mod remembering;
mod timers;

use timers::idle_check_interval;

/// Shard-level settings, copied from the node config.
#[derive(Clone, Debug)]
pub(crate) struct ShardSettings {
    pub(crate) stop_timeout: Duration,
    pub(crate) handoff_stop_timeout: Duration,
    pub(crate) idle_after: Option<Duration>,
    /// The replacement policy, when the type has an active-entity limit (the region gives
    /// each shard its share).
    pub(crate) limit_policy: Option<ReplacementPolicy>,
}

#[derive(Debug)]
struct Entity {
    last_activity: Instant,
    /// Boxed: few entities stop at once, and a running one then costs 16 bytes, not 64.
    stopping: Option<Box<Stopping>>,
}

#[derive(Debug)]
struct Stopping {
    force_at: Instant,
    forced: bool,
    /// Why it is passivated, if it is: a passivation is remembered as a stop (a limit's as
    /// dormant); a handoff or a forced stop is not.
    passivation: Option<PassivationCause>,
    /// Letters that arrived while stopping; they go to the next incarnation.
    buffer: VecDeque<Letter>,
    /// A remembered entity's start arrived while stopping: it runs again once stopped, letters
    /// or not. Kept outside the buffer's budget, as a start waiting for the lease is: a full
    /// buffer dropped the start of a remembered entity whose shard regained its lease while
    /// the entity was still stopping, and it never ran again (rolling-restart seed 9410002824).
    restart: bool,
}

/// The shard state machine.
#[derive(Debug)]
pub(crate) struct Shard {
    id: ShardId,
    entity_type: EntityType,
    /// The allocation's fencing epoch (zero for a type that neither remembers entities nor
    /// persists state); every entity started here carries it to the host.
    epoch: Epoch,
    /// The newer epoch a store holds, once an entity's write was refused for this one.
    write_fenced_by: Option<Epoch>,
    settings: ShardSettings,
    entities: BTreeMap<EntityId, Entity>,
    /// Forced-stop deadlines of stopping entities not yet forced, earliest first, so that the
    /// next deadline is found without scanning every entity.
    deadlines: BTreeSet<(Instant, EntityId)>,
    handing_off: bool,
    next_idle_check: Option<Instant>,
    /// The remembered set, when the type remembers entities.
    remember: Option<Remembered>,
    /// Letters for entities whose start is not durable yet (or not loaded yet), in order.
    waiting: BTreeMap<EntityId, VecDeque<Letter>>,
    /// Remembered entities that stopped without passivation, restarted after a backoff.
    restarts: remembering::Restarts,
    /// The shard's lease, when its type has one: entities run only while it is held.
    lease: Option<lease::ShardLease>,
    /// The running entities not stopping, under the shard's share of the type's active-entity
    /// limit, once the region gave it one.
    active: Option<ActiveEntities>,
}

impl Shard {
    pub(crate) fn new(
        (id, epoch): (ShardId, Epoch),
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
            epoch,
            write_fenced_by: None,
            settings,
            entities: BTreeMap::new(),
            deadlines: BTreeSet::new(),
            handing_off: false,
            next_idle_check,
            remember: None,
            waiting: BTreeMap::new(),
            restarts: remembering::Restarts::default(),
            lease: None,
            active: None,
        }
    }

    /// Delivers a letter routed through sharding (a message, or a start request). Must not be
    /// called once the shard is handing off: the region buffers instead. Letters for a
    /// stopping entity are buffered within the region-wide `budget`.
    pub(crate) fn handle_delivery(
        &mut self,
        now: Instant,
        entity: EntityId,
        letter: Letter,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        debug_assert!(!self.handing_off, "delivery to a shard that is handing off");
        self.check_lease(now, budget, out);
        match self.entities.get_mut(&entity) {
            Some(Entity {
                stopping: Some(stopping),
                ..
            }) => {
                if matches!(letter, Letter::Start(None)) {
                    crate::probe::hit("shard: a remembered start waits for its entity's stop");
                    stopping.restart = true;
                    return;
                }
                if !budget.try_take() {
                    let reason = DeadLetterReason::BufferFull;
                    out.dead_letter(&self.entity_type, (entity, letter), reason);
                    return;
                }
                stopping.buffer.push_back(letter);
            }
            Some(e) => {
                // Running: the common case, with one lookup (`deliver_now` would look again).
                e.last_activity = now;
                self.note_access(now, &entity, out);
                self.hand_over(entity, letter, out);
            }
            None => self.deliver_or_wait(now, entity, letter, budget, out),
        }
    }

    /// The entity is to be passivated (for `cause`). Ignored if it is already stopping.
    pub(crate) fn handle_passivate(
        &mut self,
        now: Instant,
        entity: &EntityId,
        cause: PassivationCause,
        out: &mut Effects,
    ) {
        match self.entities.get(entity) {
            Some(e) if e.stopping.is_none() => {
                let force_at = now + self.settings.stop_timeout;
                self.begin_stop(entity, StopReason::Passivation(cause), force_at, out);
            }
            None if self.waiting.contains_key(entity) => {
                tracing::debug!(%entity, shard = %self.id, "passivate before the start is durable")
            }
            Some(_) => {}
            None => tracing::debug!(%entity, shard = %self.id, "passivate for an unknown entity"),
        }
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
        self.check_lease(now, budget, out);
        let Some(e) = self.entities.remove(entity) else {
            tracing::debug!(%entity, shard = %self.id, "stop report for an unknown entity");
            return;
        };
        let (mut buffer, restart) = match e.stopping {
            Some(s) => {
                self.deadlines.remove(&(s.force_at, entity.clone()));
                if let Some(cause) = s.passivation {
                    self.record_passivated(now, entity, cause, budget, out);
                }
                (s.buffer, s.restart)
            }
            None => {
                self.leave_active(entity);
                self.schedule_restart(now, entity);
                return;
            }
        };
        budget.release(buffer.len());
        if buffer.is_empty() {
            // During a handoff the next instance recovers a remembered entity.
            if !restart || self.handing_off {
                return;
            }
            buffer.push_back(Letter::Start(None));
        }
        // Messages that reached the shard while the entity stopped (passivation raced with
        // them) go to a new incarnation, here and in order, even during a handoff: handing them
        // back to the region would let the sender's newer messages overtake them.
        if self.handing_off {
            crate::probe::hit(
                "shard: letters that raced a stop restart the entity during a handoff",
            );
        }
        for letter in buffer {
            self.deliver_or_wait(now, entity.clone(), letter, budget, out);
        }
        if self.handing_off && self.entities.contains_key(entity) {
            let force_at = now + self.settings.handoff_stop_timeout;
            self.begin_stop(entity, StopReason::HandOff, force_at, out);
        }
    }

    /// Stops every entity for a handoff. Returns true if the shard is already stopped.
    pub(crate) fn handle_handoff(&mut self, now: Instant, out: &mut Effects) -> bool {
        if self.handing_off {
            return self.is_stopped();
        }
        self.handing_off = true;
        let force_at = now + self.settings.handoff_stop_timeout;
        let ids: Vec<EntityId> = self.entities.keys().cloned().collect();
        for id in ids {
            let stopping = self.entities[&id].stopping.as_ref();
            match stopping.map(|s| (s.forced, s.force_at)) {
                // Already passivating: keep its stop, but do not wait longer than the handoff.
                Some((false, at)) if at > force_at => {
                    crate::probe::hit(
                        "shard: a passivating entity's stop is bounded by the handoff",
                    );
                    self.deadlines.remove(&(at, id.clone()));
                    self.deadlines.insert((force_at, id.clone()));
                    let e = self.entities.get_mut(&id).expect("listed entity");
                    if let Some(s) = &mut e.stopping {
                        s.force_at = force_at;
                    }
                }
                Some(_) => {}
                None => self.begin_stop(&id, StopReason::HandOff, force_at, out),
            }
        }
        self.is_stopped()
    }

    /// Letters this shard holds within the region's budget: those for stopping entities and
    /// those waiting for a start to be durable.
    pub(crate) fn buffered_letters(&self) -> usize {
        let stopping = self.entities.values().filter_map(|e| e.stopping.as_ref());
        stopping.map(|s| s.buffer.len()).sum::<usize>()
            + self.waiting.values().map(VecDeque::len).sum::<usize>()
            + self
                .lease
                .as_ref()
                .map_or(0, lease::ShardLease::letter_count)
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
            if let Some(s) = e.stopping {
                dropped.extend(s.buffer.into_iter().map(|p| (id.clone(), p)));
            }
        }
        for (id, letters) in std::mem::take(&mut self.waiting) {
            dropped.extend(letters.into_iter().map(|p| (id.clone(), p)));
        }
        if let Some(lease) = &mut self.lease {
            dropped.extend(lease.take_letters());
        }
        self.deadlines.clear();
        self.restarts.clear();
        self.active = None;
        budget.release(dropped.len());
        dropped
    }

    /// This shard's id.
    pub(crate) fn id_ref(&self) -> &ShardId {
        &self.id
    }

    pub(crate) fn is_handing_off(&self) -> bool {
        self.handing_off
    }

    /// Whether a handoff is complete: every entity stopped and, when remembering, every
    /// recorded change written.
    pub(crate) fn is_stopped(&self) -> bool {
        self.handing_off && self.entities.is_empty() && self.writes_settled()
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

    /// Delivers to the running incarnation, starting one first if there is none; a start
    /// request's requester hears that it runs.
    fn deliver_now(
        &mut self,
        now: Instant,
        entity: EntityId,
        letter: Letter,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        let (entity, letter) = match self.entities.get_mut(&entity) {
            Some(e) => {
                e.last_activity = now;
                if e.stopping.is_none() {
                    self.note_access(now, &entity, out);
                }
                (entity, letter)
            }
            None => {
                let Some((entity, letter)) = self.hold_for_lease(entity, letter, budget, out)
                else {
                    return;
                };
                // Whatever starts it, a restart planned for an earlier failure is moot: firing
                // later, it would start the entity again after it passivated.
                self.restarts.cancel(&entity);
                // Room first: the victims' stops go out before the newcomer's start.
                self.note_access(now, &entity, out);
                out.entity(EntityEffect::Start {
                    entity_type: self.entity_type.clone(),
                    entity: entity.clone(),
                    shard: self.id,
                    epoch: self.epoch,
                    lease_token: self.lease.as_ref().and_then(lease::ShardLease::token),
                });
                let fresh = Entity {
                    stopping: None,
                    last_activity: now,
                };
                self.entities.insert(entity.clone(), fresh);
                (entity, letter)
            }
        };
        self.hand_over(entity, letter, out);
    }

    /// Gives a letter to its running entity: a message to the host, a start request's ack to
    /// its requester.
    fn hand_over(&self, entity: EntityId, letter: Letter, out: &mut Effects) {
        match letter {
            Letter::Message(payload) => {
                let entity_type = self.entity_type.clone();
                out.entity(EntityEffect::Deliver {
                    entity_type,
                    entity,
                    payload,
                });
            }
            Letter::Start(Some(ack)) => {
                let answer = Body::StartEntityAck {
                    request: ack.request,
                    entity,
                    outcome: StartOutcome::Started,
                };
                out.send(ack.requester, &self.entity_type, answer);
            }
            Letter::Start(None) => {}
        }
    }

    /// Asks the host to stop a running entity, with a deadline for forcing it.
    fn begin_stop(
        &mut self,
        id: &EntityId,
        reason: StopReason,
        force_at: Instant,
        out: &mut Effects,
    ) {
        self.leave_active(id);
        if let Some(e) = self.entities.get_mut(id) {
            let passivation = match reason {
                StopReason::Passivation(cause) => Some(cause),
                StopReason::HandOff | StopReason::Forced => None,
            };
            e.stopping = Some(Box::new(Stopping {
                force_at,
                forced: false,
                passivation,
                buffer: VecDeque::new(),
                restart: false,
            }));
            self.deadlines.insert((force_at, id.clone()));
            out.entity(stop(&self.entity_type, id, reason));
        }
    }
}

fn stop(entity_type: &EntityType, entity: &EntityId, reason: StopReason) -> EntityEffect {
    EntityEffect::Stop {
        entity_type: entity_type.clone(),
        entity: entity.clone(),
        reason,
    }
}

#[cfg(test)]
mod tests;
