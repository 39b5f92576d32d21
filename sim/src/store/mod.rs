//! The simulated remember-entities store: one service the whole cluster shares (as a
//! PostgreSQL server, or one SQLite file on one machine), with the semantics of the runtime's
//! stores (a request claims the shard's epoch; an older epoch is refused and changes nothing)
//! and their failures: latency with a tail, failed requests, timeouts whose change was applied
//! although the caller hears a failure, and windows when the store is unavailable.
//!
//! Requests are submitted and answered through `poll`, in time order, so the world can drive
//! the store as one more event source (see `remembering.rs`).
//!
//! It also checks fencing as it applies requests: no update is accepted with an epoch older
//! than one the shard was loaded with, and no two members ever load a shard at one epoch (the
//! coordinators' epochs are unique per allocation).

use std::collections::BTreeMap;
use std::time::Duration;

use shoal_core::{
    EntityId, EntityType, Epoch, FencingClaim, FencingVerdict, Instant, MemberId, ShardClaim,
    ShardId, StoreCompletion, StoreRequest,
};

use crate::rng::SimRng;

mod journal;

pub(crate) use journal::{StateAnswer, StateCall};

/// How the store behaves.
#[derive(Clone, Debug)]
pub(crate) struct StoreSettings {
    /// Usual latency of a request, answer included.
    pub(crate) latency: (Duration, Duration),
    /// Share of requests that take `tail` instead.
    pub(crate) tail_rate: f64,
    pub(crate) tail: (Duration, Duration),
    /// Share of requests that fail without changing anything.
    pub(crate) failure_rate: f64,
    /// Share of requests whose change is applied but whose answer is lost: the caller hears a
    /// timeout after `timeout`.
    pub(crate) timeout_rate: f64,
    pub(crate) timeout: Duration,
    /// Windows `[from, to)` in which every request fails after `timeout`, changing nothing.
    pub(crate) outages: Vec<(Instant, Instant)>,
}

impl Default for StoreSettings {
    fn default() -> Self {
        Self {
            latency: (Duration::from_millis(1), Duration::from_millis(5)),
            tail_rate: 0.0,
            tail: (Duration::from_millis(50), Duration::from_millis(500)),
            failure_rate: 0.0,
            timeout_rate: 0.0,
            timeout: Duration::from_secs(2),
            outages: Vec::new(),
        }
    }
}

/// One shard's record.
#[derive(Clone, Debug, Default, PartialEq)]
struct Record {
    epoch: u64,
    /// The sequence of the newest write applied at `epoch` (0 after a load).
    seq: u64,
    /// The newest shard-lease token a state call claimed.
    token: shoal_core::lease::FencingToken,
    /// Remembered ids, each with whether it is dormant (kept, but not loaded).
    ids: BTreeMap<EntityId, bool>,
    /// The newest accepted load: its epoch and the member whose instance made it.
    loaded: Option<(u64, MemberId)>,
    /// Listed by `Shards`: loaded once, or given ids by a refile.
    listed: bool,
}

impl Record {
    /// What the record holds, as the fencing verdict reads it.
    fn claim(&self) -> ShardClaim {
        ShardClaim {
            epoch: Epoch(self.epoch),
            seq: self.seq,
            token: self.token,
        }
    }

    /// Keeps the claim the fencing verdict accepted.
    fn keep(&mut self, claim: ShardClaim) {
        (self.epoch, self.seq, self.token) = (claim.epoch.0, claim.seq, claim.token);
    }
}

/// Names a submitted request; its answer carries it.
#[derive(Clone, Copy, Debug, Eq, Ord, PartialEq, PartialOrd)]
pub(crate) struct Ticket(pub(crate) u64);

/// A request to the store: the remember store's, or a persistent entity's.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Call {
    /// A node's remember-store request.
    Remember(StoreRequest),
    /// A persistent entity's recovery or write.
    State(StateCall),
}

/// The store's answer to a [`Call`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Answer {
    /// To a remember-store request.
    Remember(StoreCompletion),
    /// To a persistent entity's call.
    State(StateAnswer),
}

impl Call {
    /// The answer of a call that failed for `reason`, changing nothing.
    fn failed(&self, reason: &str) -> Answer {
        match self {
            Self::Remember(_) => Answer::Remember(StoreCompletion::Failed(reason.into())),
            Self::State(_) => Answer::State(StateAnswer::Failed(reason.into())),
        }
    }
}

/// A request on its way to the store.
#[derive(Debug)]
struct Arriving {
    ticket: Ticket,
    origin: MemberId,
    request: Call,
    /// How long the answer takes back; `None`: the caller has already heard a timeout.
    reply_after: Option<Duration>,
}

/// The store, what is in flight to and from it, and what it did.
#[derive(Debug)]
pub(crate) struct SimStore {
    settings: StoreSettings,
    rng: SimRng,
    records: BTreeMap<(EntityType, ShardId), Record>,
    /// The number of shards each type's ids are filed under (see `StoreRequest::Shards`).
    filed: BTreeMap<EntityType, u32>,
    /// Requests to apply, by arrival time (then submission order).
    arriving: BTreeMap<(Instant, u64), Arriving>,
    /// Answers to deliver, by time.
    answers: BTreeMap<(Instant, u64), (Ticket, Answer)>,
    /// Persistent entities' journals and the checks of what the store accepts.
    journals: journal::Journals,
    next: u64,
    /// Requests refused for their epoch (the checker's evidence that fencing worked).
    pub(crate) fenced: u64,
    /// Writes refused because a newer write of the same instance was applied first (a write
    /// that timed out and landed late).
    pub(crate) stale: u64,
    /// Ids moved to another shard's entry because the number of shards changed.
    pub(crate) refiled: u64,
    /// Fencing broken, as seen while applying requests (see the module doc).
    violations: Vec<String>,
}

impl SimStore {
    /// A store with `settings`, its randomness from `rng` (a stream of its own).
    pub(crate) fn new(settings: StoreSettings, rng: SimRng) -> Self {
        Self {
            settings,
            rng,
            records: BTreeMap::new(),
            filed: BTreeMap::new(),
            arriving: BTreeMap::new(),
            answers: BTreeMap::new(),
            journals: journal::Journals::default(),
            next: 0,
            fenced: 0,
            stale: 0,
            refiled: 0,
            violations: Vec::new(),
        }
    }

    /// The store is unavailable from `from` until `to` (besides the outages it was set up with).
    pub(crate) fn add_outage(&mut self, from: Instant, to: Instant) {
        self.settings.outages.push((from, to));
    }

    fn in_outage(&self, now: Instant) -> bool {
        self.settings
            .outages
            .iter()
            .any(|&(from, to)| from <= now && now < to)
    }

    fn sequence(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn answer(&mut self, at: Instant, ticket: Ticket, completion: Answer) {
        let key = (at, self.sequence());
        self.answers.insert(key, (ticket, completion));
    }

    /// Sends `request` at `now`. It reaches the store after half its latency and is applied
    /// then (against whatever the store holds at that moment); the answer takes the other half.
    /// A failed request is answered without being applied; a timed-out one is applied, possibly
    /// *after* the caller heard the timeout (a late write); during an outage nothing is applied
    /// and the caller hears a failure after the timeout.
    pub(crate) fn submit(&mut self, now: Instant, origin: MemberId, request: Call) -> Ticket {
        let ticket = Ticket(self.sequence());
        let timeout = self.settings.timeout;
        if self.in_outage(now) {
            let failed = request.failed("store unavailable");
            self.answer(now + timeout, ticket, failed);
            return ticket;
        }
        let (lo, hi) = if self.rng.chance(self.settings.tail_rate) {
            self.settings.tail
        } else {
            self.settings.latency
        };
        let latency = self.rng.duration(lo, hi);
        if self.rng.chance(self.settings.failure_rate) {
            let failed = request.failed("store error");
            self.answer(now + latency, ticket, failed);
            return ticket;
        }
        let (arrive, reply_after) = if self.rng.chance(self.settings.timeout_rate) {
            // The caller gives up; the write lands anyway, up to twice the timeout later.
            let failed = request.failed("store timeout");
            self.answer(now + timeout, ticket, failed);
            (self.rng.duration(timeout / 2, timeout * 2), None)
        } else {
            (latency / 2, Some(latency - latency / 2))
        };
        let key = (now + arrive, self.sequence());
        self.arriving.insert(
            key,
            Arriving {
                ticket,
                origin,
                request,
                reply_after,
            },
        );
        ticket
    }

    /// Applies what has arrived by `now` and returns the answers due by then, in time order.
    pub(crate) fn poll(&mut self, now: Instant) -> Vec<(Ticket, Answer)> {
        let mut due = Vec::new();
        loop {
            let arrival = self.arriving.first_key_value().map(|(k, _)| *k);
            let answer = self.answers.first_key_value().map(|(k, _)| *k);
            match (arrival, answer) {
                // An application first on a tie: its own answer may then be due as well.
                (Some(a), b) if a.0 <= now && b.is_none_or(|b| a.0 <= b.0) => {
                    let (_, arriving) = self.arriving.pop_first().expect("peeked");
                    let late = arriving.reply_after.is_none();
                    let completion = match &arriving.request {
                        Call::Remember(request) => {
                            Answer::Remember(self.apply(arriving.origin, request))
                        }
                        Call::State(call) => Answer::State(self.apply_state(a.0, call, late)),
                    };
                    if let Some(after) = arriving.reply_after {
                        self.answer(a.0 + after, arriving.ticket, completion);
                    }
                }
                (_, Some(b)) if b.0 <= now => {
                    let (_, answer) = self.answers.pop_first().expect("peeked");
                    due.push(answer);
                }
                _ => return due,
            }
        }
    }

    /// When `poll` next has something to do.
    pub(crate) fn next_event(&self) -> Option<Instant> {
        let arrival = self.arriving.first_key_value().map(|(k, _)| k.0);
        let answer = self.answers.first_key_value().map(|(k, _)| k.0);
        shoal_core::earliest(arrival, answer)
    }

    /// What the store saw break fencing since the last call.
    pub(crate) fn take_violations(&mut self) -> Vec<String> {
        std::mem::take(&mut self.violations)
    }

    fn apply(&mut self, origin: MemberId, request: &StoreRequest) -> StoreCompletion {
        let (entity_type, shard, epoch) = match request {
            StoreRequest::Shards {
                entity_type,
                number_of_shards,
            } => {
                self.refile(entity_type, *number_of_shards);
                let listed = self
                    .records
                    .iter()
                    .filter(|((t, _), r)| t == entity_type && r.listed)
                    .map(|((_, shard), r)| (*shard, Epoch(r.epoch)))
                    .collect();
                return StoreCompletion::Shards(listed);
            }
            StoreRequest::Load {
                entity_type,
                shard,
                epoch,
            }
            | StoreRequest::Update {
                entity_type,
                shard,
                epoch,
                ..
            } => (entity_type, *shard, *epoch),
        };
        let record = self
            .records
            .entry((entity_type.clone(), shard))
            .or_default();
        let seq = match request {
            StoreRequest::Update { seq, .. } => *seq,
            _ => 0,
        };
        let claim = FencingClaim::unleased(epoch, seq);
        match FencingVerdict::of(Some(record.claim()), claim) {
            FencingVerdict::Fenced(current) | FencingVerdict::Superseded(current) => {
                self.fenced += 1;
                return StoreCompletion::Fenced(current);
            }
            FencingVerdict::Stale(current) => {
                self.stale += 1;
                return StoreCompletion::Fenced(current);
            }
            FencingVerdict::Accept(claim) => record.keep(claim),
        }
        match request {
            StoreRequest::Shards { .. } => unreachable!("answered above"),
            StoreRequest::Load { .. } => {
                if let Some((at, by)) = record.loaded {
                    if at == epoch.0 && by != origin {
                        self.violations.push(format!(
                            "{shard} loaded at epoch {at} by {by} and again by {origin}: two \
                             allocations share an epoch"
                        ));
                    }
                }
                record.loaded = Some((epoch.0, origin));
                record.listed = true;
                let running = record.ids.iter().filter(|(_, dormant)| !**dormant);
                StoreCompletion::Loaded(running.map(|(id, _)| id.clone()).collect())
            }
            StoreRequest::Update {
                started,
                stopped,
                dormant,
                ..
            } => {
                // Writes come after the instance's load, from the member that loaded.
                if record.loaded != Some((epoch.0, origin)) {
                    self.violations.push(format!(
                        "{shard}: a write of epoch {} from {origin} was accepted, but the epoch \
                         was loaded by {:?}",
                        epoch.0, record.loaded
                    ));
                }
                for id in stopped {
                    record.ids.remove(id);
                }
                record
                    .ids
                    .extend(dormant.iter().map(|id| (id.clone(), true)));
                record
                    .ids
                    .extend(started.iter().map(|id| (id.clone(), false)));
                StoreCompletion::Written
            }
        }
    }

    /// Files every id of `entity_type` in the entry of the shard it maps to among
    /// `number_of_shards`, unless the type is filed under that count already, as the runtime's
    /// stores do: every entry changed gets an epoch above all of the type's, fencing the
    /// instances that loaded it before.
    fn refile(&mut self, entity_type: &EntityType, number_of_shards: u32) {
        if self.filed.insert(entity_type.clone(), number_of_shards) == Some(number_of_shards) {
            return;
        }
        let of_type = |(t, _): &&(EntityType, ShardId)| t == entity_type;
        let moves: Vec<(ShardId, ShardId, EntityId)> = (self.records.iter())
            .filter(|(key, _)| of_type(key))
            .flat_map(|((_, from), r)| {
                r.ids.keys().filter_map(move |id| {
                    let to = shoal_core::shard_of(id, number_of_shards);
                    (to != *from).then(|| (*from, to, id.clone()))
                })
            })
            .collect();
        let Some(top) = (self.records.iter())
            .filter(|(key, _)| of_type(key))
            .map(|(_, r)| r.epoch)
            .max()
        else {
            return;
        };
        self.refiled += moves.len() as u64;
        for (from, to, id) in moves {
            let source = self.records.get_mut(&(entity_type.clone(), from));
            let source = source.expect("a listed entry");
            let dormant = source.ids.remove(&id).unwrap_or(false);
            (source.epoch, source.seq) = (top + 1, 0);
            let target = self.records.entry((entity_type.clone(), to)).or_default();
            target.ids.entry(id).or_insert(dormant);
            (target.epoch, target.seq, target.listed) = (top + 1, 0, true);
        }
    }

    /// Every id of `entity_type` the store holds as running (not dormant): those a load
    /// returns, which their shard starts wherever it starts next.
    pub(crate) fn running_ids(&self, entity_type: &EntityType) -> Vec<EntityId> {
        (self.records.iter())
            .filter(|((t, _), _)| t == entity_type)
            .flat_map(|(_, r)| r.ids.iter().filter(|(_, dormant)| !**dormant))
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Every id of `entity_type` the store holds, with the shard whose entry holds it, by shard.
    pub(crate) fn remembered_ids(&self, entity_type: &EntityType) -> Vec<(String, u32)> {
        (self.records.iter())
            .filter(|((t, _), _)| t == entity_type)
            .flat_map(|((_, shard), r)| r.ids.keys().map(|id| (id.as_str().to_owned(), shard.0)))
            .collect()
    }

    /// The ids remembered for a shard.
    #[cfg(test)]
    pub(crate) fn remembered(&self, entity_type: &EntityType, shard: ShardId) -> Vec<EntityId> {
        self.records
            .get(&(entity_type.clone(), shard))
            .map(|r| r.ids.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The newest epoch seen for a shard.
    #[cfg(test)]
    pub(crate) fn epoch(&self, entity_type: &EntityType, shard: ShardId) -> Epoch {
        Epoch(
            self.records
                .get(&(entity_type.clone(), shard))
                .map_or(0, |r| r.epoch),
        )
    }
}

#[cfg(test)]
mod tests;
