//! Remembering entities in the simulator: the one store every node's requests go to (a
//! [`SimStore`] driven as one more event source, its faults drawn per seed), and the oracle of
//! the entities that must be remembered (started, and not passivated since). The simulator
//! checks against it (see `simulator/remembering.rs`): the store's own checks (no old epoch's
//! write accepted, no two allocations at one epoch) as requests apply, and after healing that
//! every entity that must be remembered runs exactly once.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use shoal_core::{EntityId, Epoch, Instant, MemberId, ShardId, StoreCompletion, StoreRequest};

use crate::entity_host::Life;
use crate::options::Remember;
use crate::rng::{SimRng, Stream};
use crate::store::{Answer, Call, SimStore, StateAnswer, StateCall, StoreSettings, Ticket};

/// The simulated store and what remembering owes.
#[derive(Debug)]
pub(crate) struct Remembering {
    store: SimStore,
    /// The type remembers entities (otherwise the store serves persistent entities only, and
    /// nothing is owed a life).
    remembers: bool,
    /// Requests on their way, with the member that sent them.
    tickets: BTreeMap<Ticket, (MemberId, StoreRequest)>,
    /// Persistent entities' calls on their way, with the incarnation that made them.
    state_tickets: BTreeMap<Ticket, (Life, StateCall)>,
    /// When an `Ev::Store` is scheduled.
    wakeup: Option<Instant>,
    /// Entities started and not passivated since: after healing each must run exactly once.
    owed: BTreeSet<EntityId>,
    /// Entities left out of that check (messaged after healing: see `forgive`).
    forgiven: BTreeSet<EntityId>,
    /// Forgiven entities started and not passivated since: still owed a life by their shard
    /// (one that loses its lease stops them and starts them again once it holds it), though
    /// left out of the check after healing.
    forgiven_lives: BTreeSet<EntityId>,
    /// Incarnations asked to passivate (a forced stop may follow; it is still a passivation),
    /// with whether the limit passivated them (they stay remembered, dormant).
    passivating: BTreeMap<Life, bool>,
    /// Entities the limit passivated and that have not started since.
    dormant: BTreeSet<EntityId>,
    /// Ids a member's shard loaded from the store and has not started since: its recovery
    /// may start them, owed or not (a load races the recording of a passivation elsewhere).
    recoverable: BTreeSet<(MemberId, EntityId)>,
    /// Messages and `StartEntity` commands sent to each entity and not delivered yet: any of
    /// them may start it (a message dropped from a full buffer still had its start written).
    asking: BTreeMap<EntityId, Asking>,
    /// Shard instances (member, shard, epoch) the store fenced: their writes in flight can
    /// never land, so they no longer hold a handoff back.
    fenced: BTreeSet<(MemberId, ShardId, Epoch)>,
}

/// What asks an entity to run: the last message each sender sent it that was not delivered
/// yet, and `StartEntity` commands not yet answered "started".
#[derive(Debug, Default)]
struct Asking {
    told: BTreeMap<MemberId, u64>,
    starts: u32,
    /// Copies of reliable producers' letters on their way (a resend of an old one may arrive
    /// after a newer one; one lost or dead-lettered on the way, which may still have started
    /// the entity, is counted for ever, which only makes the check lenient for that entity).
    copies: u64,
}

impl Asking {
    /// Nothing asks any more.
    fn is_done(&self) -> bool {
        self.told.is_empty() && self.starts == 0 && self.copies == 0
    }
}

impl Remembering {
    /// The store for a run of `seed` with `options`, whose faults end at `fault_end`;
    /// `remembers`: the type remembers entities.
    pub(crate) fn new(seed: u64, options: &Remember, fault_end: Duration, remembers: bool) -> Self {
        let at = |d: Duration| Instant::ZERO + d;
        let settings = StoreSettings {
            tail_rate: options.tail_rate,
            failure_rate: options.failure_rate,
            timeout_rate: options.timeout_rate,
            // Healing ends the faults: an outage that would begin after it never does (options
            // drawn for a longer run and then shortened, as the fuzzer does, would otherwise
            // take the store away while liveness is judged).
            outages: options
                .outages
                .iter()
                .filter(|&&(start, _)| start < fault_end)
                .map(|&(start, length)| (at(start), at(start + length)))
                .collect(),
            ..StoreSettings::default()
        };
        Self {
            store: SimStore::new(settings, SimRng::of(seed, Stream::Store)),
            remembers,
            tickets: BTreeMap::new(),
            state_tickets: BTreeMap::new(),
            wakeup: None,
            owed: BTreeSet::new(),
            forgiven: BTreeSet::new(),
            forgiven_lives: BTreeSet::new(),
            passivating: BTreeMap::new(),
            dormant: BTreeSet::new(),
            recoverable: BTreeSet::new(),
            asking: BTreeMap::new(),
            fenced: BTreeSet::new(),
        }
    }

    /// The store is unavailable from `now` for `lasts`.
    pub(crate) fn outage(&mut self, now: Instant, lasts: Duration) {
        self.store.add_outage(now, now + lasts);
    }

    /// `member` sends `request` at `now`.
    pub(crate) fn submit(&mut self, now: Instant, member: MemberId, request: StoreRequest) {
        let ticket = self
            .store
            .submit(now, member, Call::Remember(request.clone()));
        self.tickets.insert(ticket, (member, request));
    }

    /// The incarnation `life` makes `call` at `now`.
    pub(crate) fn submit_state(&mut self, now: Instant, life: Life, call: StateCall) {
        let ticket = self.store.submit(now, life.0, Call::State(call.clone()));
        self.state_tickets.insert(ticket, (life, call));
    }

    /// The store itself (persistence's checks and counts).
    pub(crate) fn store(&self) -> &SimStore {
        &self.store
    }

    /// The store, to change.
    pub(crate) fn store_mut(&mut self) -> &mut SimStore {
        &mut self.store
    }

    /// Applies what reached the store by `now`: the answers due (with who asked what), the
    /// store's own violations, and whether a late write was refused by its sequence. `None`
    /// for a stale wakeup: one scheduled before an earlier one was armed (which has run and
    /// armed the next), or a second one at the same instant. Polling on those cleared the
    /// wakeup armed since, so each re-armed another: the copies never died out (a run of five
    /// nodes took 37 of them per store event that did something).
    pub(crate) fn poll(&mut self, now: Instant) -> Option<StorePoll> {
        if self.wakeup.is_some_and(|armed| armed > now) {
            return None;
        }
        self.wakeup = None;
        let stale = self.store.stale;
        let late_before = self.store.landed_late();
        let answers = self.store.poll(now);
        let landed_late = self.store.landed_late() > late_before;
        let late_refused = self.store.stale > stale;
        let violations = self.store.take_violations();
        let journal_violations = self.store.take_journal_violations();
        let mut state_answers = Vec::new();
        let answers = answers
            .into_iter()
            .filter_map(|(ticket, answer)| {
                let completion = match answer {
                    Answer::Remember(completion) => completion,
                    Answer::State(answer) => {
                        let (life, call) = self.state_tickets.remove(&ticket)?;
                        state_answers.push((life, call, answer));
                        return None;
                    }
                };
                let (member, request) = self.tickets.remove(&ticket)?;
                if let (StoreCompletion::Fenced(_), Some((shard, epoch, _))) =
                    (&completion, request.shard())
                {
                    self.fenced.insert((member, shard, epoch));
                }
                Some((member, request, completion))
            })
            .collect();
        Some(StorePoll {
            answers,
            state_answers,
            violations,
            journal_violations,
            landed_late,
            late_refused,
        })
    }

    /// When the store must next be polled, if that is not armed already (at `now`).
    pub(crate) fn arm(&mut self, now: Instant) -> Option<Instant> {
        let next = self.store.next_event()?;
        if self.wakeup.is_none_or(|w| next < w || w < now) {
            self.wakeup = Some(next);
            return Some(next);
        }
        None
    }

    /// An entity started: it is owed a life until it is passivated. `true`: it was dormant
    /// (passivated by the limit).
    pub(crate) fn started(&mut self, entity: &EntityId) -> bool {
        if !self.remembers {
            return false;
        }
        let was_dormant = self.dormant.remove(entity);
        if self.forgiven.contains(entity) {
            self.forgiven_lives.insert(entity.clone());
        } else {
            self.owed.insert(entity.clone());
        }
        was_dormant
    }

    /// The node asked the incarnation `key` to passivate (`dormant`: for the limit).
    pub(crate) fn passivating(&mut self, key: Life, dormant: bool) {
        self.passivating.insert(key, dormant);
    }

    /// The incarnation `key` stopped: if it was passivating, the entity is no longer owed a
    /// life (forgotten, or dormant until its next message).
    pub(crate) fn stopped(&mut self, key: &Life) {
        if let Some(dormant) = self.passivating.remove(key) {
            self.owed.remove(&key.1);
            self.forgiven_lives.remove(&key.1);
            if dormant && self.remembers {
                self.dormant.insert(key.1.clone());
            }
        }
    }

    /// `member`'s process is gone: its passivations in progress never complete (a crash
    /// leaves those entities remembered).
    pub(crate) fn process_gone(&mut self, member: MemberId) {
        self.passivating.retain(|(m, _, _), _| *m != member);
    }

    /// `entities` run whether or not remembering works (messaged after healing): not owed.
    pub(crate) fn forgive(&mut self, entities: &[EntityId]) {
        for entity in entities {
            if self.owed.remove(entity) {
                self.forgiven_lives.insert(entity.clone());
            }
            self.forgiven.insert(entity.clone());
        }
    }

    /// Whether `entity` was forgiven and is still owed a life (started since and not
    /// passivated): only its shard, regaining a lease it lost, starts it again without a
    /// message.
    pub(crate) fn owes_a_forgiven_life(&self, entity: &EntityId) -> bool {
        self.forgiven_lives.contains(entity)
    }

    /// The entities owed a life.
    pub(crate) fn owed(&self) -> &BTreeSet<EntityId> {
        &self.owed
    }

    /// A shard on `member` loaded `ids` from the store: its recovery may start them.
    pub(crate) fn loaded(&mut self, member: MemberId, ids: &[EntityId]) {
        (self.recoverable).extend(ids.iter().map(|id| (member, id.clone())));
    }

    /// `member` stopped its instance of `shard` (a handoff): a write of the instance's it has
    /// not heard back from, if any. A handoff completes only once what the instance recorded
    /// is durable, or the next instance loads without it (a passivation would be undone).
    pub(crate) fn write_in_flight(
        &self,
        member: MemberId,
        shard: ShardId,
    ) -> Option<&StoreRequest> {
        (self.tickets.values()).find_map(|(m, request)| {
            let (s, epoch, seq) = request.shard()?;
            let fenced = self.fenced.contains(&(*m, s, epoch));
            (*m == member && s == shard && seq > 0 && !fenced).then_some(request)
        })
    }

    /// `sender` sent `entity` its message `seq`.
    pub(crate) fn told(&mut self, entity: &EntityId, sender: MemberId, seq: u64) {
        let asking = self.asking.entry(entity.clone()).or_default();
        asking.told.insert(sender, seq);
    }

    /// `sender`'s message `seq` reached `entity`: it asks no more (nor do earlier ones).
    pub(crate) fn delivered(&mut self, entity: &EntityId, sender: MemberId, seq: u64) {
        let Some(asking) = self.asking.get_mut(entity) else {
            return;
        };
        if asking.told.get(&sender).is_some_and(|&last| last <= seq) {
            asking.told.remove(&sender);
        }
        if asking.is_done() {
            self.asking.remove(entity);
        }
    }

    /// A reliable producer sent `entity` a copy of a letter.
    pub(crate) fn copy_sent(&mut self, entity: &EntityId) {
        self.asking.entry(entity.clone()).or_default().copies += 1;
    }

    /// A copy of a reliable letter reached `entity`.
    pub(crate) fn copy_arrived(&mut self, entity: &EntityId) {
        let Some(asking) = self.asking.get_mut(entity) else {
            return;
        };
        asking.copies = asking.copies.saturating_sub(1);
        if asking.is_done() {
            self.asking.remove(entity);
        }
    }

    /// A client asked for `entity` to start (`StartEntity`).
    pub(crate) fn start_commanded(&mut self, entity: &EntityId) {
        self.asking.entry(entity.clone()).or_default().starts += 1;
    }

    /// A `StartEntity` of `entity` was answered: it runs.
    pub(crate) fn start_answered(&mut self, entity: &EntityId) {
        let Some(asking) = self.asking.get_mut(entity) else {
            return;
        };
        asking.starts = asking.starts.saturating_sub(1);
        if asking.is_done() {
            self.asking.remove(entity);
        }
    }

    /// `entity` starts on `member`: whether anything accounts for the start: a message or
    /// `StartEntity` on its way to it, a life owed (a restart after a failure or a lease
    /// regained, recovery after a move), or a load of `member`'s that listed it (used up: a
    /// shard recovers an id at most once). Otherwise it was passivated (or never ran) and
    /// nothing asked for it since.
    pub(crate) fn accounts_for_start(&mut self, member: MemberId, entity: &EntityId) -> bool {
        let recovered = self.recoverable.remove(&(member, entity.clone()));
        !self.remembers
            || recovered
            || self.owed.contains(entity)
            || self.asking.contains_key(entity)
    }

    /// Where the store and the entities' lives disagree, `probed` left out (messaged after
    /// healing, they are owed whatever was recorded): an id the store lists that is owed no
    /// life (its passivation was never recorded: it would run again after the next move), or
    /// an entity owed a life the store does not list (it would not come back after a crash).
    /// Each with what is wrong.
    pub(crate) fn disagreements(
        &self,
        entity_type: &shoal_core::EntityType,
        probed: &[EntityId],
    ) -> Vec<(EntityId, &'static str)> {
        // Dormant ids (passivated by the limit) are kept but never started by a move.
        let stored: BTreeSet<EntityId> = (self.store.running_ids(entity_type).into_iter())
            .filter(|id| !probed.contains(id))
            .collect();
        let listed = stored
            .difference(&self.owed)
            .map(|e| (e.clone(), LISTED_NOT_OWED));
        let owed = self
            .owed
            .difference(&stored)
            .map(|e| (e.clone(), OWED_NOT_LISTED));
        listed.chain(owed).collect()
    }
}

/// An id the store lists whose entity was passivated.
const LISTED_NOT_OWED: &str =
    "passivated, but the store still lists it (it would start again after a move)";
/// An entity that runs remembered without the store listing it.
const OWED_NOT_LISTED: &str =
    "started and not passivated, but the store does not list it (a crash would lose it)";

/// What one poll of the store gave.
#[derive(Debug)]
pub(crate) struct StorePoll {
    /// The answers due: who asked, what, and the outcome.
    pub(crate) answers: Vec<(MemberId, StoreRequest, StoreCompletion)>,
    /// Persistent entities' answers due: the incarnation, its call, the answer.
    pub(crate) state_answers: Vec<(Life, StateCall, StateAnswer)>,
    /// What the store's own checks found.
    pub(crate) violations: Vec<String>,
    /// What the journal's checks found.
    pub(crate) journal_violations: Vec<String>,
    /// A persistent entity's write that timed out landed.
    pub(crate) landed_late: bool,
    /// A write that timed out landed late and was refused by its sequence.
    pub(crate) late_refused: bool,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use shoal_core::{EntityType, Epoch, ShardId};

    use super::*;

    fn load(shard: u32) -> StoreRequest {
        StoreRequest::Load {
            entity_type: EntityType::from("counter"),
            shard: ShardId(shard),
            epoch: Epoch(1),
        }
    }

    /// Drives the store as the simulator does: a request is submitted and a wakeup armed
    /// every `gap`, each wakeup polls and re-arms. Returns the wakeups that ran and the
    /// answers handed out.
    fn drive(requests: u32, gap: Duration) -> (usize, usize) {
        let options = Remember {
            recovery: shoal_core::RecoveryStrategy::AllAtOnce,
            failure_rate: 0.0,
            timeout_rate: 0.0,
            // Some slow requests, so a later request is answered first and arms earlier.
            tail_rate: 0.3,
            outages: Vec::new(),
            outages_around_moves: false,
        };
        let mut r = Remembering::new(11, &options, Duration::from_secs(3600), true);
        // Scheduled wakeups by (time, sequence number), as the event queue orders them.
        let mut wakeups = BTreeSet::new();
        let mut seq = 0_u64;
        let mut arm = |r: &mut Remembering, wakeups: &mut BTreeSet<(Instant, u64)>, now| {
            if let Some(next) = r.arm(now) {
                seq += 1;
                wakeups.insert((next, seq));
            }
        };
        let (mut ran, mut answers) = (0, 0);
        let mut submit_at = Instant::ZERO;
        for shard in 0..=requests {
            submit_at += gap;
            // After the last request, every wakeup left runs.
            let until = if shard < requests {
                submit_at
            } else {
                Instant::MAX
            };
            while let Some(&(at, n)) = wakeups.first().filter(|(at, _)| *at <= until) {
                wakeups.remove(&(at, n));
                ran += 1;
                if let Some(poll) = r.poll(at) {
                    answers += poll.answers.len();
                    arm(&mut r, &mut wakeups, at);
                }
            }
            if shard < requests {
                r.submit(submit_at, MemberId::new(1, 1), load(shard));
                arm(&mut r, &mut wakeups, submit_at);
            }
        }
        (ran, answers)
    }

    #[test]
    fn every_request_is_answered_with_at_most_three_wakeups_each() {
        for gap in [1, 3, 20, 200] {
            let requests = 400;
            let (ran, answers) = drive(requests, Duration::from_millis(gap));
            assert_eq!(answers, requests as usize, "gap {gap} ms");
            // A request needs a wakeup for its arrival, one for its answer, and leaves one
            // stale when it arms earlier than the one scheduled. Stale wakeups that polled
            // and re-armed each kept a copy alive for ever: 14,365 wakeups at 1 ms.
            assert!(ran <= 3 * requests as usize, "gap {gap} ms: {ran} wakeups");
        }
    }
}
