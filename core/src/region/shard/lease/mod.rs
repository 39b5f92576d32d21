//! The shard's lease, for a type with `shard_lease`: an instance runs entities only while it
//! holds the shard's lease, so that a member cut off from the rest (or paused) stops them on
//! its own clock before anyone else can be granted the lease and start them, whatever the
//! downing decision and however late it comes.
//!
//! ```text
//!  started ──▶ acquiring: letters wait ──Acquired──▶ running ──Lost──▶ entities forced to
//!                 ▲                                                     stop; letters wait
//!                 └─────────────────────────────────────────────────────┘
//! ```
//!
//! Every start of an entity goes through [`Shard::hold_for_lease`]: while the lease is not
//! held the letter that would start it waits (a remembered entity's start too; those running
//! when the lease was lost start again once it is held again). While it waits for the lease
//! the instance still answers a handoff: its entities stop, but letters that waited for the
//! lease hold the handoff back until they have run (as letters waiting for a durable start
//! do: handed back, newer ones sent to the next home could overtake them), unless a store
//! fenced the instance. The lease is released when the instance stops.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::{Shard, Stopping, stop};
use crate::effect::{Effects, Event};
use crate::id::EntityId;
use crate::lease::{
    FencingToken, LeaseAnswer, LeaseCall, LeaseChange, LeaseHolder, LeaseName, LeaseOwner,
    LeaseTerms,
};
use crate::message::{Delivery, Letter};
use crate::reason::{DeadLetterReason, StopReason};
use crate::region::BufferBudget;
use crate::time::Instant;

/// A shard instance's hold on its lease.
#[derive(Debug)]
pub(crate) struct ShardLease {
    /// Entities may run while it holds the lease.
    holder: LeaseHolder,
    /// Letters for entities that may not start before the lease is held, in order per entity,
    /// within the region's buffer budget.
    letters: BTreeMap<EntityId, VecDeque<Letter>>,
    /// Remembered entities to start once the lease is held (outside the budget: a full buffer
    /// must not make the shard forget to start one).
    starts: BTreeSet<EntityId>,
}

impl ShardLease {
    /// Whether the lease is held (see `LeaseHolder::is_held`).
    pub(super) fn holds(&self) -> bool {
        self.holder.is_held()
    }

    /// The token the lease is held under, if it is (entities start only then).
    pub(super) fn token(&self) -> Option<FencingToken> {
        self.holder.held_token()
    }

    /// Whether no letter waits for the lease.
    pub(super) fn is_settled(&self) -> bool {
        self.letters.is_empty()
    }

    /// Letters waiting for the lease.
    pub(super) fn letter_count(&self) -> usize {
        self.letters.values().map(VecDeque::len).sum()
    }

    /// The letters waiting for the lease, taken, in order per entity.
    pub(super) fn take_letters(&mut self) -> impl Iterator<Item = Delivery> {
        std::mem::take(&mut self.letters)
            .into_iter()
            .flat_map(|(id, letters)| letters.into_iter().map(move |l| (id.clone(), l)))
    }
}

impl Shard {
    /// Makes this instance run entities only while it holds its lease, for `owner` on
    /// `terms`, and asks for it.
    pub(crate) fn start_lease(
        &mut self,
        now: Instant,
        owner: LeaseOwner,
        terms: LeaseTerms,
        out: &mut Effects,
    ) {
        let name = LeaseName::Shard {
            entity_type: self.entity_type.clone(),
            shard: self.id,
        };
        let mut holder = LeaseHolder::new(name, owner, terms);
        holder.handle_want(now);
        self.lease = Some(ShardLease {
            holder,
            letters: BTreeMap::new(),
            starts: BTreeSet::new(),
        });
        self.poll_lease_calls(now, out);
    }

    /// Keeps `letter`, which would start `entity`, until the lease is held; gives it back if
    /// the entity may start now.
    pub(super) fn hold_for_lease(
        &mut self,
        entity: EntityId,
        letter: Letter,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) -> Option<(EntityId, Letter)> {
        let Some(lease) = self.lease.as_mut().filter(|l| !l.holder.is_held()) else {
            return Some((entity, letter));
        };
        crate::probe::hit("shard: a start waits for the shard's lease");
        if matches!(letter, Letter::Start(None)) {
            lease.starts.insert(entity);
        } else if budget.try_take() {
            lease.letters.entry(entity).or_default().push_back(letter);
        } else {
            // The letter is dropped, not the start: a remembered entity (its start durable)
            // must run once the lease is held, whether or not a letter waits for it.
            if self.remember.is_some() {
                crate::probe::hit(
                    "shard: a remembered entity starts though its letter waiting for the lease was dropped",
                );
                lease.starts.insert(entity.clone());
            }
            let reason = DeadLetterReason::BufferFull;
            out.dead_letter(&self.entity_type, (entity, letter), reason);
        }
        None
    }

    /// The lease store answered the acquire sent at `sent`.
    pub(crate) fn handle_lease_answer(
        &mut self,
        now: Instant,
        sent: Instant,
        answer: LeaseAnswer,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        let Some(lease) = &mut self.lease else {
            return;
        };
        let change = lease.holder.handle_answer(now, sent, answer);
        self.apply_lease_change(now, change, budget, out);
        self.poll_lease_calls(now, out);
    }

    /// The lease's timers: renewals, retries, a call out too long, a validity running out.
    pub(super) fn handle_lease_timeout(
        &mut self,
        now: Instant,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        let Some(lease) = &mut self.lease else {
            return;
        };
        let change = lease.holder.handle_timeout(now);
        self.apply_lease_change(now, change, budget, out);
        self.poll_lease_calls(now, out);
    }

    /// Loses the lease at once if its validity has run out by `now`: an input can come before
    /// the timer that would have said so (a paused process resumes with its inputs first), and
    /// nothing may start or be delivered on a lease past its validity.
    pub(super) fn check_lease(
        &mut self,
        now: Instant,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        if (self.lease.as_ref())
            .is_some_and(|l| l.holder.is_held() && l.holder.token(now).is_none())
        {
            crate::probe::hit("shard: a lease found run out before a timer said so");
            self.handle_lease_timeout(now, budget, out);
        }
    }

    /// When the lease next needs `handle_timeout`.
    pub(super) fn lease_timeout(&self) -> Option<Instant> {
        self.lease.as_ref().and_then(|l| l.holder.poll_timeout())
    }

    /// Gives the lease up: the call that releases it, if it was held (to send once no entity
    /// of the shard runs here any more).
    pub(crate) fn take_lease_release(&mut self) -> Option<LeaseCall> {
        self.lease.as_mut()?.holder.give_up()
    }

    fn poll_lease_calls(&mut self, now: Instant, out: &mut Effects) {
        if let Some(lease) = &mut self.lease {
            while let Some(call) = lease.holder.poll_call(now) {
                out.lease(call);
            }
        }
    }

    fn apply_lease_change(
        &mut self,
        now: Instant,
        change: Option<LeaseChange>,
        budget: &mut BufferBudget,
        out: &mut Effects,
    ) {
        if self.lease.is_none() {
            return;
        }
        match change {
            None => {}
            Some(LeaseChange::Acquired(token)) => {
                out.event(Event::ShardLeaseAcquired {
                    entity_type: self.entity_type.clone(),
                    shard: self.id,
                    token,
                });
                self.load_after_lease(out);
                let Some(lease) = &mut self.lease else {
                    return;
                };
                let starts = std::mem::take(&mut lease.starts);
                let letters: Vec<Delivery> = lease.take_letters().collect();
                budget.release(letters.len());
                // A remembered entity with letters starts with them; during a handoff the next
                // instance recovers the rest.
                let lettered: BTreeSet<&EntityId> = letters.iter().map(|(id, _)| id).collect();
                let starts: Vec<Delivery> = (starts.into_iter())
                    .filter(|id| !self.handing_off && !lettered.contains(id))
                    .map(|id| (id, Letter::Start(None)))
                    .collect();
                let letters: Vec<Delivery> = starts.into_iter().chain(letters).collect();
                if !self.handing_off {
                    for (id, letter) in letters {
                        self.handle_delivery(now, id, letter, budget, out);
                    }
                    return;
                }
                // A handoff waited for these letters (handed back, newer ones sent to the
                // next home could overtake them): their entities run them, then stop.
                crate::probe::hit("shard: letters that waited for the lease run during a handoff");
                let mut started = Vec::new();
                for (id, letter) in letters {
                    started.push(id.clone());
                    self.deliver_now(now, id, letter, budget, out);
                }
                let force_at = now + self.settings.handoff_stop_timeout;
                for id in started {
                    if self.entities.get(&id).is_some_and(|e| e.stopping.is_none()) {
                        self.begin_stop(&id, StopReason::HandOff, force_at, out);
                    }
                }
            }
            Some(LeaseChange::Lost) => {
                crate::probe::hit("shard: a lease lost while serving stops its entities");
                out.event(Event::ShardLeaseLost {
                    entity_type: self.entity_type.clone(),
                    shard: self.id,
                });
                self.force_stop_all(budget, out);
            }
        }
    }

    /// Stops every entity at once (the lease can no longer be counted on): a remembered one
    /// starts again when the lease is held again; letters arriving meanwhile wait.
    fn force_stop_all(&mut self, budget: &mut BufferBudget, out: &mut Effects) {
        let mut restart = Vec::new();
        for (id, entity) in &mut self.entities {
            match &mut entity.stopping {
                Some(stopping) if stopping.forced => continue,
                Some(stopping) => {
                    self.deadlines.remove(&(stopping.force_at, id.clone()));
                    stopping.forced = true;
                }
                None => {
                    entity.stopping = Some(Box::new(Stopping {
                        force_at: Instant::ZERO,
                        forced: true,
                        passivation: None,
                        buffer: VecDeque::new(),
                        restart: false,
                    }));
                    restart.push(id.clone());
                }
            }
            out.entity(stop(&self.entity_type, id, StopReason::Forced));
        }
        for id in &restart {
            self.leave_active(id);
        }
        // During a handoff the next instance recovers the remembered entities.
        if self.remember.is_some() && !self.handing_off {
            for id in restart {
                let start = self.hold_for_lease(id, Letter::Start(None), budget, out);
                debug_assert!(start.is_none(), "the lease is not held");
            }
        }
    }
}

#[cfg(test)]
mod tests;
