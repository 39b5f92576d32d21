//! Remembering a shard's entities (Akka's remember-entities, shard side), as a sans-IO
//! sub-machine a shard will own: it asks the store for the remembered ids when the shard
//! starts, recovers them throttled, and records starts and passivations with **one write in
//! flight**, batching later changes behind it. Every request carries the shard allocation's
//! fencing [`Epoch`]; a store that has seen a newer one refuses it, and this instance then
//! stops writing for good (it should no longer exist).
//!
//! ```text
//!  Loading ──Loaded(ids)──▶ Ready: recovery starts ids (all at once, or N every D)
//!     │  ▲                    │  record_started / record_stopped → batched; one Update in
//!     └──┘ Failed: retry      │  flight; Written → next batch; Failed → the batch goes back
//!          with backoff       ▼  and is retried with backoff; Fenced → stop writing
//! ```
//!
//! A start is durable before the entity runs: `record_started` of an id not remembered yet
//! makes it *pending*, and `Written` returns the ids whose start became durable, which the
//! shard then starts (buffering their messages meanwhile, as Akka's `RememberingStart`).
//! Passivation forgets an id; a crash of the entity or its node does not (the shard never
//! calls `record_stopped` for it). A passivation by the active-entity limit keeps the id as
//! *dormant*: remembered, but not loaded for recovery, so it starts again only on its next
//! message (whose start is written first, as a new one's: it then runs through crashes).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::hash::shard_of;
use crate::id::{EntityId, EntityType, Epoch, ShardId};
use crate::time::{Instant, earliest};

mod api;
mod fencing;

pub use api::{RecoveryStrategy, RememberSettings, StoreCompletion, StoreRequest};
pub use fencing::{FENCING_CASES, FencingCase, FencingClaim, FencingVerdict, ShardClaim};

/// What a call produced, for the shard to act on.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct RememberOut {
    /// Requests for the store (at most one in flight).
    pub(crate) requests: Vec<StoreRequest>,
    /// Entities to start now: recovered ones, or ones whose start became durable.
    pub(crate) start: Vec<EntityId>,
    /// Store failures to report (the request will be retried unless fenced).
    pub(crate) failures: Vec<String>,
    /// Loaded ids that map to another shard: never started here.
    pub(crate) misfiled: Vec<EntityId>,
}

/// How a stopped entity leaves the remembered set.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(crate) enum Leaving {
    /// Forgotten (it was passivated on request or for idleness).
    Forgotten,
    /// Kept, dormant: not started again until it gets a message (passivated by the limit).
    Dormant,
}

#[derive(Debug, PartialEq)]
enum Phase {
    /// Waiting for the load (or for its retry).
    Loading,
    /// Loaded: recording changes.
    Ready,
    /// Refused by the store: nothing more is written.
    Fenced,
}

/// One shard's remembered set and its conversation with the store.
#[derive(Debug)]
pub(crate) struct Remembered {
    entity_type: EntityType,
    shard: ShardId,
    /// The type's shard count: a loaded id starts here only if it maps to `shard`.
    number_of_shards: u32,
    epoch: Epoch,
    settings: RememberSettings,
    phase: Phase,
    /// A request is out; its completion has not arrived.
    in_flight: bool,
    /// The load waits for `handle_go` (a shard under a lease loads once it holds the lease:
    /// the holder before it may record starts until its grant ends).
    held: bool,
    /// The ids the store holds as running (not dormant), as far as this shard knows.
    stored: BTreeSet<EntityId>,
    /// Changes not yet sent.
    to_start: BTreeSet<EntityId>,
    to_stop: BTreeMap<EntityId, Leaving>,
    /// Changes sent in the request in flight.
    sent_start: BTreeSet<EntityId>,
    sent_stop: BTreeMap<EntityId, Leaving>,
    failures: u32,
    retry_at: Option<Instant>,
    /// Loaded ids not started yet (throttled recovery), and when the next step is due.
    recovering: BTreeSet<EntityId>,
    next_recovery: Option<Instant>,
    /// The newer epoch that fenced this instance.
    fenced_by: Option<Epoch>,
    /// The sequence number of the last write sent.
    seq: u64,
}

impl Remembered {
    /// Starts remembering for the allocation `epoch` of `shard` (of `number_of_shards`): asks
    /// for the load, or, `held`, waits for [`Remembered::handle_go`] to.
    pub(crate) fn new(
        entity_type: EntityType,
        (shard, number_of_shards): (ShardId, u32),
        (epoch, held): (Epoch, bool),
        settings: RememberSettings,
        out: &mut RememberOut,
    ) -> Self {
        let mut remembered = Self {
            entity_type,
            shard,
            number_of_shards,
            epoch,
            settings,
            phase: Phase::Loading,
            in_flight: false,
            held,
            stored: BTreeSet::new(),
            to_start: BTreeSet::new(),
            to_stop: BTreeMap::new(),
            sent_start: BTreeSet::new(),
            sent_stop: BTreeMap::new(),
            failures: 0,
            retry_at: None,
            recovering: BTreeSet::new(),
            next_recovery: None,
            fenced_by: None,
            seq: 0,
        };
        remembered.send(out);
        remembered
    }

    /// The load may be sent (a held one, see `new`).
    pub(crate) fn handle_go(&mut self, out: &mut RememberOut) {
        if std::mem::take(&mut self.held) {
            self.send(out);
        }
    }

    /// Whether the remembered set is loaded (and not fenced).
    #[cfg(test)]
    pub(crate) fn is_ready(&self) -> bool {
        self.phase == Phase::Ready
    }

    /// The newer epoch, if the store refused this instance: the shard should stop.
    pub(crate) fn fenced_by(&self) -> Option<Epoch> {
        self.fenced_by
    }

    /// The settings.
    pub(crate) fn settings(&self) -> &RememberSettings {
        &self.settings
    }

    /// Whether every recorded change is durable (or can never be: fenced). A shard handing
    /// off waits for this, so the next instance loads what this one recorded.
    pub(crate) fn is_settled(&self) -> bool {
        // A load still in flight does not count: it records nothing, and landing after the
        // next instance's it is fenced.
        self.phase == Phase::Fenced
            || (self.to_start.is_empty()
                && self.to_stop.is_empty()
                && self.sent_start.is_empty()
                && self.sent_stop.is_empty())
    }

    /// Entities loaded and not started yet (throttled recovery).
    pub(crate) fn recovering(&self) -> usize {
        self.recovering.len()
    }

    /// Whether `id` is remembered (stored, or being written).
    #[cfg(test)]
    pub(crate) fn remembers(&self, id: &EntityId) -> bool {
        (self.stored.contains(id) || self.sent_start.contains(id) || self.to_start.contains(id))
            && !self.sent_stop.contains_key(id)
            && !self.to_stop.contains_key(id)
    }

    /// An entity is about to start. `true`: it may start now (already durable); `false`: its
    /// start is being written, and `Written` will return it in `start`.
    pub(crate) fn record_started(&mut self, id: &EntityId, out: &mut RememberOut) -> bool {
        if self.phase == Phase::Fenced {
            // A newer instance runs the shard's entities: this one starts nothing, not even
            // an entity it remembers (its letters go back to the region).
            return false;
        }
        self.to_stop.remove(id);
        // Started now: recovery must not start it again.
        self.recovering.remove(id);
        if self.stored.contains(id) && !self.sent_stop.contains_key(id) {
            return true;
        }
        if !self.sent_start.contains(id) || self.sent_stop.contains_key(id) {
            self.to_start.insert(id.clone());
        }
        self.send(out);
        false
    }

    /// An entity was passivated: forget it, or keep it dormant. (A crash is not a
    /// passivation: never call this for an entity that stopped on its own or died with its
    /// node.)
    pub(crate) fn record_stopped(
        &mut self,
        id: &EntityId,
        leaving: Leaving,
        out: &mut RememberOut,
    ) {
        self.to_start.remove(id);
        self.recovering.remove(id);
        let written = self.stored.contains(id) || self.sent_start.contains(id);
        // A stop sent already settles it, unless this one asks for more (to forget an id the
        // write in flight makes dormant).
        let settled = self.sent_stop.get(id).is_some_and(|sent| *sent == leaving);
        if written && !settled {
            self.to_stop.insert(id.clone(), leaving);
        }
        self.send(out);
    }

    /// The store answered a request of this instance: `seq` is the answered write's sequence
    /// (0 for the load). An answer to anything but the request in flight is ignored.
    pub(crate) fn handle_completion(
        &mut self,
        now: Instant,
        seq: u64,
        completion: StoreCompletion,
        out: &mut RememberOut,
    ) {
        let expected = if self.phase == Phase::Loading {
            0
        } else {
            self.seq
        };
        if !self.in_flight || seq != expected {
            return;
        }
        self.in_flight = false;
        match completion {
            StoreCompletion::Loaded(ids) if self.phase == Phase::Loading => {
                self.failures = 0;
                self.phase = Phase::Ready;
                // Changes recorded while loading apply on top of what was loaded; an id
                // recorded as starting that was remembered already is durable: it starts now,
                // once, and not again through recovery.
                // An id that maps to another shard must never run here (single activation):
                // its own shard starts it. The store refiles ids when the shard count
                // changes, so this takes an entry written around that refile.
                let (mine, misfiled): (Vec<EntityId>, Vec<EntityId>) = ids
                    .into_iter()
                    .partition(|id| shard_of(id, self.number_of_shards) == self.shard);
                if !misfiled.is_empty() {
                    crate::probe::hit("remember: a load's ids that map elsewhere are not started");
                }
                out.misfiled = misfiled;
                self.stored = mine.into_iter().collect();
                let durable: BTreeSet<EntityId> =
                    self.to_start.intersection(&self.stored).cloned().collect();
                self.to_start.retain(|id| !durable.contains(id));
                self.recovering = self.stored.difference(&durable).cloned().collect();
                out.start.extend(durable);
                self.next_recovery = Some(now);
                self.handle_wakeup(now, out);
            }
            StoreCompletion::Written if self.phase == Phase::Ready => {
                self.failures = 0;
                for id in std::mem::take(&mut self.sent_stop).into_keys() {
                    self.stored.remove(&id);
                }
                for id in std::mem::take(&mut self.sent_start) {
                    if !self.to_stop.contains_key(&id) {
                        out.start.push(id.clone());
                    }
                    self.stored.insert(id);
                }
            }
            StoreCompletion::Fenced(current) if current == self.epoch => {
                // Not a newer allocation: an older write of this instance landed late (after
                // its timeout) with a newer sequence? Impossible with one write in flight, so
                // the outcome is unknown, as after a failure.
                self.requeue(now);
                out.failures
                    .push("the store refused a write at this instance's own epoch".into());
                return;
            }
            StoreCompletion::Fenced(current) => {
                self.phase = Phase::Fenced;
                self.fenced_by = Some(current);
                self.retry_at = None;
                self.next_recovery = None;
                self.recovering.clear();
                out.failures.push(format!(
                    "shard {} of {} fenced at epoch {}: a newer allocation exists",
                    self.shard.0,
                    self.entity_type.as_str(),
                    self.epoch.0
                ));
                return;
            }
            StoreCompletion::Failed(why) => {
                self.requeue(now);
                out.failures.push(why);
                return;
            }
            StoreCompletion::Loaded(_) | StoreCompletion::Written | StoreCompletion::Shards(_) => {
                // An answer that does not fit the request: a host bug. Its outcome is unknown,
                // as after a failure.
                self.requeue(now);
                out.failures
                    .push("a store completion did not match its request".into());
                return;
            }
        }
        self.send(out);
    }

    /// After a failed request (whose outcome is unknown: a timeout may have applied it), puts
    /// what was sent back in front of what came since (newer changes win) and schedules the
    /// retry. Stops sent count as no longer stored: if the entity starts again before the
    /// retry, its start is written again rather than assumed durable.
    fn requeue(&mut self, now: Instant) {
        for id in std::mem::take(&mut self.sent_start) {
            if !self.to_stop.contains_key(&id) {
                self.to_start.insert(id);
            }
        }
        for (id, leaving) in std::mem::take(&mut self.sent_stop) {
            self.stored.remove(&id);
            if !self.to_start.contains(&id) {
                // A newer stop of the same id (forgetting one sent as dormant) wins.
                self.to_stop.entry(id).or_insert(leaving);
            }
        }
        self.failures += 1;
        self.retry_at = Some(now + self.settings.retry_delay(self.failures));
    }

    /// Timers: a retry, or the next recovery step.
    pub(crate) fn handle_wakeup(&mut self, now: Instant, out: &mut RememberOut) {
        if self.retry_at.is_some_and(|at| at <= now) {
            self.retry_at = None;
            self.send(out);
        }
        if self.next_recovery.is_some_and(|at| at <= now) {
            let (number, every) = match self.settings.recovery {
                RecoveryStrategy::AllAtOnce => (usize::MAX, Duration::ZERO),
                RecoveryStrategy::Constant { number, every } => (number.max(1), every),
            };
            for _ in 0..number {
                let Some(id) = self.recovering.pop_first() else {
                    break;
                };
                out.start.push(id);
            }
            self.next_recovery = (!self.recovering.is_empty()).then(|| now + every);
        }
    }

    /// When `handle_wakeup` is next due.
    pub(crate) fn next_wakeup(&self) -> Option<Instant> {
        earliest(self.retry_at, self.next_recovery)
    }

    /// Sends the load, or the next batch, if nothing is in flight or waiting for a retry.
    fn send(&mut self, out: &mut RememberOut) {
        if self.in_flight || self.retry_at.is_some() || self.held {
            return;
        }
        let request = match self.phase {
            Phase::Loading => StoreRequest::Load {
                entity_type: self.entity_type.clone(),
                shard: self.shard,
                epoch: self.epoch,
            },
            Phase::Ready if !self.to_start.is_empty() || !self.to_stop.is_empty() => {
                self.sent_start = std::mem::take(&mut self.to_start);
                self.sent_stop = std::mem::take(&mut self.to_stop);
                self.seq += 1;
                let leaving = |kind| {
                    let sent = self.sent_stop.iter().filter(move |(_, l)| **l == kind);
                    sent.map(|(id, _)| id.clone()).collect()
                };
                StoreRequest::Update {
                    entity_type: self.entity_type.clone(),
                    shard: self.shard,
                    epoch: self.epoch,
                    seq: self.seq,
                    started: self.sent_start.iter().cloned().collect(),
                    stopped: leaving(Leaving::Forgotten),
                    dormant: leaving(Leaving::Dormant),
                }
            }
            Phase::Ready | Phase::Fenced => return,
        };
        self.in_flight = true;
        out.requests.push(request);
    }
}

#[cfg(test)]
mod tests;
