//! The shard's side of remembering entities: it owns a [`Remembered`] and turns what that
//! machine produces into effects (store requests, failure events, entity starts).
//!
//! A new entity runs only once its start is durable: its letters wait in `waiting` meanwhile
//! (within the region's buffer budget) and are delivered, in order, when `Written` returns it.
//! Remembered entities start when the load arrives, throttled by the recovery strategy. During
//! a handoff recovery stops (the next instance recovers the rest), and the shard is stopped
//! only once what it recorded is written.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::Shard;
use crate::effect::{Effects, Event};
use crate::id::{EntityId, Epoch};
use crate::message::{Delivery, Letter};
use crate::reason::DeadLetterReason;
use crate::reason::{PassivationCause, StopReason};
use crate::region::BufferBudget;
use crate::remember::{Leaving, RememberOut, RememberSettings, Remembered, StoreCompletion};
use crate::time::Instant;

impl Shard {
    /// Turns remembering on for this instance, one of `number_of_shards`: asks for the load
    /// at the instance's epoch, once the instance holds its lease if it has one (the lease's
    /// previous holder may record starts until its grant ends: a load before would miss them,
    /// and their entities would never start again; seed 5130005646).
    pub(crate) fn start_remembering(
        &mut self,
        settings: RememberSettings,
        number_of_shards: u32,
        out: &mut Effects,
    ) {
        let mut produced = RememberOut::default();
        let held = (self.lease.as_ref()).is_some_and(|l| !l.holds());
        let remembered = Remembered::new(
            self.entity_type.clone(),
            (self.id, number_of_shards),
            (self.epoch, held),
            settings,
            &mut produced,
        );
        self.remember = Some(remembered);
        for request in produced.requests {
            out.store(request);
        }
    }

    /// The lease is held: a load that waited for it goes out.
    pub(super) fn load_after_lease(&mut self, out: &mut Effects) {
        let Some(remembered) = &mut self.remember else {
            return;
        };
        let mut produced = RememberOut::default();
        remembered.handle_go(&mut produced);
        for request in produced.requests {
            crate::probe::hit("shard: a remembered shard loads once its lease is held");
            out.store(request);
        }
    }

    /// The allocation's fencing epoch.
    pub(crate) fn epoch(&self) -> Epoch {
        self.epoch
    }

    /// The newer epoch that fenced this instance, if a store refused it: the remember store,
    /// or the state store an entity of the shard wrote to.
    pub(crate) fn fenced_by(&self) -> Option<Epoch> {
        let remembered = self.remember.as_ref().and_then(Remembered::fenced_by);
        remembered.max(self.write_fenced_by)
    }

    /// A store refused an entity's write at this instance's epoch: it holds `current`, a newer
    /// allocation of the shard. The region then stops the instance (see `fenced_by`).
    pub(crate) fn handle_write_fenced(&mut self, current: Epoch) {
        self.write_fenced_by = self.write_fenced_by.max(Some(current));
    }

    /// The store answered this instance's request (`seq`: the write's, 0 for the load).
    pub(crate) fn handle_store_completed(
        &mut self,
        now: Instant,
        seq: u64,
        completion: StoreCompletion,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        self.check_lease(now, budget, out);
        let Some(remembered) = &mut self.remember else {
            return;
        };
        let mut produced = RememberOut::default();
        remembered.handle_completion(now, seq, completion, &mut produced);
        self.apply(now, produced, budget, out);
    }

    /// Delivers to a running entity; otherwise, when remembering, records the start first and
    /// keeps the letter until it is durable.
    pub(super) fn deliver_or_wait(
        &mut self,
        now: Instant,
        entity: EntityId,
        letter: Letter,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        let Some(remembered) = &mut self.remember else {
            return self.deliver_now(now, entity, letter, budget, out);
        };
        if self.entities.contains_key(&entity) {
            return self.deliver_now(now, entity, letter, budget, out);
        }
        if !self.waiting.contains_key(&entity) {
            let mut produced = RememberOut::default();
            if remembered.record_started(&entity, &mut produced) {
                self.apply(now, produced, budget, out);
                return self.deliver_now(now, entity, letter, budget, out);
            }
            self.waiting.insert(entity.clone(), VecDeque::new());
            self.apply(now, produced, budget, out);
        }
        if !budget.try_take() {
            let reason = DeadLetterReason::BufferFull;
            return out.dead_letter(&self.entity_type, (entity, letter), reason);
        }
        if let Some(letters) = self.waiting.get_mut(&entity) {
            letters.push_back(letter);
        }
    }

    /// A passivated entity stopped: the store forgets it, or, passivated by the limit, keeps
    /// it as dormant (remembered, but started again only by its next message).
    pub(super) fn record_passivated(
        &mut self,
        now: Instant,
        entity: &EntityId,
        cause: PassivationCause,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        let Some(remembered) = &mut self.remember else {
            return;
        };
        let mut produced = RememberOut::default();
        let leaving = match cause {
            PassivationCause::Limit => Leaving::Dormant,
            PassivationCause::Requested | PassivationCause::Idle => Leaving::Forgotten,
        };
        remembered.record_stopped(entity, leaving, &mut produced);
        self.apply(now, produced, budget, out);
    }

    /// The store's retries, recovery steps and restarts of failed entities.
    pub(super) fn handle_remember_timeout(
        &mut self,
        now: Instant,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        self.restart_due(now, budget, out);
        let Some(remembered) = &mut self.remember else {
            return;
        };
        if remembered.next_wakeup().is_some_and(|at| at <= now) {
            let mut produced = RememberOut::default();
            remembered.handle_wakeup(now, &mut produced);
            if !produced.start.is_empty() && remembered.recovering() > 0 && !self.handing_off {
                crate::probe::hit("shard: remembered entities are recovered in throttled steps");
            }
            self.apply(now, produced, budget, out);
        }
    }

    /// A remembered entity stopped without being passivated (it failed): it stays remembered
    /// and starts again after the restart backoff, unless the shard is handing off (the next
    /// instance recovers it).
    pub(super) fn schedule_restart(&mut self, now: Instant, entity: &EntityId) {
        let Some(remembered) = &self.remember else {
            return;
        };
        if !self.handing_off {
            let at = now + remembered.settings().restart_backoff;
            self.restarts.schedule(at, entity.clone());
        }
    }

    /// Restarts the failed remembered entities that are due.
    fn restart_due(&mut self, now: Instant, budget: &mut BufferBudget, out: &mut Effects) {
        while let Some(id) = self.restarts.pop_due(now) {
            // A message whose start is being written will start it; during a handoff the
            // next instance recovers it. (A start by a message cancels the restart.)
            if self.handing_off || self.entities.contains_key(&id) || self.waiting.contains_key(&id)
            {
                continue;
            }
            crate::probe::hit("shard: a failed remembered entity is restarted after backoff");
            self.deliver_or_wait(now, id, Letter::Start(None), budget, out);
        }
    }

    /// When remembering next needs `handle_timeout`.
    pub(super) fn remember_timeout(&self) -> Option<Instant> {
        let remembered = self.remember.as_ref()?;
        let restart = self.restarts.next_due();
        crate::time::earliest(remembered.next_wakeup(), restart)
    }

    /// Whether a handoff may complete as far as the store goes: every recorded change is
    /// written (or the store fenced this instance). A store that fails delays the handoff
    /// (the coordinator repeats `HandOff`) rather than losing a start it was asked for:
    /// handing the waiting letters back would let newer ones sent to the next home overtake
    /// them.
    pub(super) fn writes_settled(&self) -> bool {
        let letters_settled = self.waiting.is_empty()
            && (self.lease.as_ref()).is_none_or(super::lease::ShardLease::is_settled);
        self.remember.as_ref().is_none_or(Remembered::is_settled)
            && (letters_settled || self.fenced_by().is_some())
    }

    /// Letters whose entity never started because a store fenced this instance (before their
    /// start was durable, or while it waited for its lease), in order per entity, their budget
    /// still held: the region routes them on.
    pub(crate) fn take_waiting(&mut self) -> Vec<Delivery> {
        let mut taken: Vec<Delivery> = std::mem::take(&mut self.waiting)
            .into_iter()
            .flat_map(|(id, letters)| letters.into_iter().map(move |l| (id.clone(), l)))
            .collect();
        if let Some(lease) = &mut self.lease {
            taken.extend(lease.take_letters());
        }
        taken
    }

    /// Carries out what the remember machine produced.
    fn apply(
        &mut self,
        now: Instant,
        produced: RememberOut,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        for request in produced.requests {
            out.store(request);
        }
        for reason in produced.failures {
            if self.handing_off {
                crate::probe::hit("shard: a store failure during a handoff");
            }
            out.event(Event::RememberStoreFailed {
                entity_type: self.entity_type.clone(),
                shard: Some(self.id),
                reason,
            });
        }
        if !produced.misfiled.is_empty() {
            tracing::warn!(
                shard = %self.id,
                entity_type = %self.entity_type,
                count = produced.misfiled.len(),
                "remembered ids that map to other shards were not started here"
            );
            out.event(Event::RememberedIdsMisfiled {
                entity_type: self.entity_type.clone(),
                shard: self.id,
                entities: produced.misfiled,
            });
        }
        for id in produced.start {
            self.start_durable(now, id, budget, out);
        }
    }

    /// Starts an entity whose start is durable (or that was remembered), delivering the
    /// letters that waited for it. During a handoff a recovered entity is left to the next
    /// instance, and one with letters runs them and stops again.
    fn start_durable(
        &mut self,
        now: Instant,
        id: EntityId,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        let letters = self.waiting.remove(&id);
        if self.handing_off && letters.is_none() && !self.entities.contains_key(&id) {
            return;
        }
        let letters = letters.unwrap_or_default();
        budget.release(letters.len());
        if letters.is_empty() {
            self.deliver_now(now, id.clone(), Letter::Start(None), budget, out);
        }
        for letter in letters {
            self.deliver_now(now, id.clone(), letter, budget, out);
        }
        let stopping = self.entities.get(&id).is_some_and(|e| e.stopping.is_some());
        if self.handing_off && !stopping {
            let force_at = now + self.settings.handoff_stop_timeout;
            self.begin_stop(&id, StopReason::HandOff, force_at, out);
        }
    }
}

/// Restarts of remembered entities that failed, one per entity, earliest first.
#[derive(Debug, Default)]
pub(super) struct Restarts {
    by_time: BTreeSet<(Instant, EntityId)>,
    by_entity: BTreeMap<EntityId, Instant>,
}

impl Restarts {
    /// Restarts `entity` at `at`, replacing a restart planned for an earlier failure.
    fn schedule(&mut self, at: Instant, entity: EntityId) {
        self.cancel(&entity);
        self.by_time.insert((at, entity.clone()));
        self.by_entity.insert(entity, at);
    }

    /// Forgets `entity`'s restart: it started by other means.
    pub(super) fn cancel(&mut self, entity: &EntityId) {
        if self.by_entity.is_empty() {
            return;
        }
        if let Some(at) = self.by_entity.remove(entity) {
            crate::probe::hit("shard: a start cancels a failed entity's pending restart");
            self.by_time.remove(&(at, entity.clone()));
        }
    }

    /// The next entity whose restart is due at `now`, taken.
    fn pop_due(&mut self, now: Instant) -> Option<EntityId> {
        if self.by_time.first().is_none_or(|(at, _)| *at > now) {
            return None;
        }
        let (_, entity) = self.by_time.pop_first()?;
        self.by_entity.remove(&entity);
        Some(entity)
    }

    /// When the next restart is due.
    fn next_due(&self) -> Option<Instant> {
        self.by_time.first().map(|(at, _)| *at)
    }

    /// Forgets every restart (the shard terminates).
    pub(super) fn clear(&mut self) {
        self.by_time.clear();
        self.by_entity.clear();
    }
}

#[cfg(test)]
mod tests;
