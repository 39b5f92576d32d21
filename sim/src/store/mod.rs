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
mod tests {
    use super::*;

    fn counter() -> EntityType {
        EntityType::from("counter")
    }

    fn load(epoch: u64) -> StoreRequest {
        StoreRequest::Load {
            entity_type: counter(),
            shard: ShardId(1),
            epoch: Epoch(epoch),
        }
    }

    fn write(epoch: u64, started: &[&str], stopped: &[&str]) -> StoreRequest {
        write_seq(epoch, 1, started, stopped)
    }

    fn write_seq(epoch: u64, seq: u64, started: &[&str], stopped: &[&str]) -> StoreRequest {
        StoreRequest::Update {
            entity_type: counter(),
            shard: ShardId(1),
            epoch: Epoch(epoch),
            seq,
            started: started.iter().map(|s| EntityId::from(*s)).collect(),
            stopped: stopped.iter().map(|s| EntityId::from(*s)).collect(),
            dormant: Vec::new(),
        }
    }

    fn store(settings: StoreSettings) -> SimStore {
        SimStore::new(settings, SimRng::stream(7, 99))
    }

    /// Submits `request` at `now` and runs the store until it answers.
    fn ask(s: &mut SimStore, now: Instant, request: StoreRequest) -> (Instant, StoreCompletion) {
        match call(s, now, Call::Remember(request)) {
            (at, Answer::Remember(completion)) => (at, completion),
            (_, other) => panic!("a remember request answered {other:?}"),
        }
    }

    /// Submits `call` at `now` and runs the store until it answers.
    fn call(s: &mut SimStore, now: Instant, call: Call) -> (Instant, Answer) {
        let ticket = s.submit(now, MemberId::new(1, 1), call);
        loop {
            let at = s.next_event().expect("an answer is pending");
            let mut answers = s.poll(at).into_iter();
            if let Some((_, answer)) = answers.find(|(t, _)| *t == ticket) {
                return (at, answer);
            }
        }
    }

    #[test]
    fn the_store_passes_every_fencing_case() {
        for case in shoal_core::FENCING_CASES {
            let mut s = store(StoreSettings::default());
            let now = Instant::from_secs(1);
            for (i, &step) in case.steps.iter().enumerate() {
                let (epoch, seq, token, expected) = step;
                let request = match (token, seq) {
                    (1.., _) => Call::State(StateCall::Recover {
                        entity_type: counter(),
                        entity: EntityId::from("e"),
                        shard: ShardId(1),
                        epoch: Epoch(epoch),
                        lease_token: shoal_core::FencingCase::claim(step).token,
                    }),
                    (0, 0) => Call::Remember(load(epoch)),
                    (0, _) => Call::Remember(write_seq(epoch, seq, &[], &[])),
                };
                let got = match call(&mut s, now, request).1 {
                    Answer::Remember(StoreCompletion::Fenced(current))
                    | Answer::State(StateAnswer::Fenced(current)) => Some(current.0),
                    Answer::Remember(StoreCompletion::Loaded(_) | StoreCompletion::Written)
                    | Answer::State(StateAnswer::Recovered { .. }) => None,
                    other => panic!("{}: step {i}: {other:?}", case.name),
                };
                assert_eq!(got, expected, "{}: step {i}", case.name);
            }
        }
    }

    #[test]
    fn writes_apply_and_older_epochs_are_fenced_without_effect() {
        let mut s = store(StoreSettings::default());
        let now = Instant::from_secs(1);
        assert_eq!(ask(&mut s, now, load(2)).1, StoreCompletion::Loaded(vec![]));
        let (at, completion) = ask(&mut s, now, write(2, &["a", "b"], &[]));
        assert_eq!(completion, StoreCompletion::Written);
        assert!(at > now && at <= now + Duration::from_millis(5));
        let stale = ask(&mut s, now, write(1, &["stale"], &["a"])).1;
        assert_eq!(stale, StoreCompletion::Fenced(Epoch(2)));
        assert_eq!(
            ask(&mut s, now, load(1)).1,
            StoreCompletion::Fenced(Epoch(2))
        );
        assert_eq!(s.fenced, 2);
        ask(&mut s, now, write(3, &[], &["b"]));
        assert_eq!(
            s.remembered(&counter(), ShardId(1)),
            vec![EntityId::from("a")]
        );
        assert_eq!(s.epoch(&counter(), ShardId(1)), Epoch(3));
        assert_eq!(s.next_event(), None);
    }

    #[test]
    fn an_outage_fails_every_request_after_the_timeout_and_changes_nothing() {
        let settings = StoreSettings {
            outages: vec![(Instant::from_secs(10), Instant::from_secs(20))],
            ..StoreSettings::default()
        };
        let mut s = store(settings);
        let (at, completion) = ask(&mut s, Instant::from_secs(15), write(1, &["a"], &[]));
        assert_eq!(at, Instant::from_secs(17));
        assert!(matches!(completion, StoreCompletion::Failed(_)));
        assert!(s.remembered(&counter(), ShardId(1)).is_empty());
        let after = ask(&mut s, Instant::from_secs(20), write(1, &["a"], &[]));
        assert_eq!(after.1, StoreCompletion::Written);
    }

    #[test]
    fn a_timed_out_write_can_land_after_the_caller_gave_up_and_after_a_newer_write() {
        let settings = StoreSettings {
            timeout_rate: 1.0,
            ..StoreSettings::default()
        };
        let mut s = store(settings);
        let start = Instant::from_secs(1);
        let first = s.submit(
            start,
            MemberId::new(1, 1),
            Call::Remember(write(1, &["a"], &[])),
        );
        let heard = s.poll(start + Duration::from_secs(2));
        assert!(
            matches!(heard[..], [(t, Answer::Remember(StoreCompletion::Failed(_)))] if t == first)
        );
        // Whether or not it has landed yet, it lands by twice the timeout.
        s.poll(start + Duration::from_secs(4));
        assert_eq!(
            s.remembered(&counter(), ShardId(1)),
            vec![EntityId::from("a")]
        );
        // A late write applies against what the store holds when it arrives: the newer
        // epoch fences it.
        let mut s = store(StoreSettings {
            timeout_rate: 1.0,
            ..StoreSettings::default()
        });
        s.submit(
            start,
            MemberId::new(1, 1),
            Call::Remember(write(1, &["late"], &[])),
        );
        s.settings.timeout_rate = 0.0;
        s.submit(start, MemberId::new(2, 1), Call::Remember(load(2)));
        s.poll(start + Duration::from_secs(10));
        assert!(s.remembered(&counter(), ShardId(1)).is_empty());
        assert_eq!(s.fenced, 1);
        assert!(s.take_violations().is_empty());
    }

    #[test]
    fn a_late_write_of_an_instance_cannot_undo_its_newer_one() {
        let mut s = store(StoreSettings {
            timeout_rate: 1.0,
            ..StoreSettings::default()
        });
        let start = Instant::from_secs(1);
        s.settings.timeout_rate = 0.0;
        ask(&mut s, start, load(3));
        ask(&mut s, start, write_seq(3, 1, &["a"], &[]));
        s.settings.timeout_rate = 1.0;
        // The stop times out and lands up to two timeouts later; the restart is written first.
        s.submit(
            start,
            MemberId::new(1, 1),
            Call::Remember(write_seq(3, 2, &[], &["a"])),
        );
        s.settings.timeout_rate = 0.0;
        ask(&mut s, start, write_seq(3, 3, &["a"], &[]));
        s.poll(start + Duration::from_secs(10));
        assert_eq!(
            s.remembered(&counter(), ShardId(1)),
            vec![EntityId::from("a")]
        );
        assert_eq!((s.stale, s.fenced), (1, 0));
    }

    #[test]
    fn two_members_loading_one_epoch_is_a_violation_and_the_shards_list_has_epochs() {
        let mut s = store(StoreSettings::default());
        let now = Instant::from_secs(1);
        ask(&mut s, now, load(4));
        ask(&mut s, now, write(4, &["a"], &[]));
        assert!(s.take_violations().is_empty(), "one member, one epoch");
        let ticket = s.submit(now, MemberId::new(2, 1), Call::Remember(load(4)));
        while !s
            .poll(s.next_event().unwrap())
            .iter()
            .any(|(t, _)| *t == ticket)
        {}
        assert_eq!(s.take_violations().len(), 1);
        // A count under which "a" is where it was written: nothing is refiled.
        let number_of_shards = (2..)
            .find(|n| shoal_core::shard_of(&EntityId::from("a"), *n) == ShardId(1))
            .expect("some count maps a to shard 1");
        let listed = ask(
            &mut s,
            now,
            StoreRequest::Shards {
                entity_type: counter(),
                number_of_shards,
            },
        )
        .1;
        assert_eq!(
            listed,
            StoreCompletion::Shards(vec![(ShardId(1), Epoch(4))])
        );
    }

    /// Remembers `ids` as a shard count of `n` files them, each shard loaded at `epoch`.
    fn file(s: &mut SimStore, ids: &[EntityId], n: u32, epoch: u64) {
        let now = Instant::from_secs(1);
        for shard in 0..n {
            let started: Vec<EntityId> = (ids.iter())
                .filter(|id| shoal_core::shard_of(id, n).0 == shard)
                .cloned()
                .collect();
            let (entity_type, shard, epoch) = (counter(), ShardId(shard), Epoch(epoch));
            let load = StoreRequest::Load {
                entity_type: entity_type.clone(),
                shard,
                epoch,
            };
            ask(s, now, load);
            let (seq, stopped) = (1, Vec::new());
            let write = StoreRequest::Update {
                entity_type,
                shard,
                epoch,
                seq,
                started,
                stopped,
                dormant: Vec::new(),
            };
            assert_eq!(ask(s, now, write).1, StoreCompletion::Written);
        }
    }

    fn shards(s: &mut SimStore, number_of_shards: u32) -> Vec<(ShardId, Epoch)> {
        let read = StoreRequest::Shards {
            entity_type: counter(),
            number_of_shards,
        };
        match ask(s, Instant::from_secs(2), read).1 {
            StoreCompletion::Shards(listed) => listed,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn another_number_of_shards_refiles_every_id_and_fences_what_loaded_before() {
        let mut s = store(StoreSettings::default());
        let ids: Vec<EntityId> = (0..40).map(|i| EntityId::from(format!("e{i}"))).collect();
        file(&mut s, &ids, 8, 3);
        assert_eq!(shards(&mut s, 8).len(), 8);
        assert_eq!(s.refiled, 0, "filed under 8 already");

        let listed = shards(&mut s, 5);
        assert!(s.refiled > 0);
        for shard in 0..8 {
            let held = s.remembered(&counter(), ShardId(shard));
            let belong = |id: &EntityId| shoal_core::shard_of(id, 5).0 == shard;
            assert!(held.iter().all(belong), "shard {shard} holds {held:?}");
        }
        let mut all: Vec<EntityId> = (0..8)
            .flat_map(|shard| s.remembered(&counter(), ShardId(shard)))
            .collect();
        all.sort();
        let mut expected = ids.clone();
        expected.sort();
        assert_eq!(all, expected, "nothing lost, nothing twice");
        // Entries 5 to 7 are empty now, still listed (with their epochs, which fence).
        assert_eq!(listed.len(), 8);
        assert!(listed.iter().all(|(_, epoch)| *epoch == Epoch(4)));
        // An instance that loaded under the old count can no longer write.
        let late = StoreRequest::Update {
            entity_type: counter(),
            shard: ShardId(1),
            epoch: Epoch(3),
            seq: 2,
            started: vec![EntityId::from("x")],
            stopped: Vec::new(),
            dormant: Vec::new(),
        };
        let now = Instant::from_secs(3);
        assert_eq!(ask(&mut s, now, late).1, StoreCompletion::Fenced(Epoch(4)));

        let moved = s.refiled;
        shards(&mut s, 5);
        assert_eq!(s.refiled, moved, "filed under 5 already");
        shards(&mut s, 13);
        let held: Vec<(ShardId, EntityId)> = (0..13)
            .flat_map(|shard| {
                let held = s.remembered(&counter(), ShardId(shard));
                held.into_iter().map(move |id| (ShardId(shard), id))
            })
            .collect();
        assert_eq!(held.len(), ids.len());
        assert!(
            held.iter()
                .all(|(shard, id)| shoal_core::shard_of(id, 13) == *shard)
        );
        assert!(s.take_violations().is_empty());
    }

    #[test]
    fn failures_change_nothing_and_the_same_seed_gives_the_same_answers() {
        let settings = StoreSettings {
            failure_rate: 0.5,
            tail_rate: 0.3,
            ..StoreSettings::default()
        };
        let run = || {
            let mut s = store(settings.clone());
            let answers: Vec<(Instant, StoreCompletion)> = (0..50)
                .map(|i| {
                    ask(
                        &mut s,
                        Instant::from_secs(i),
                        write(1, &[&format!("e{i}")], &[]),
                    )
                })
                .collect();
            let written = answers
                .iter()
                .filter(|(_, c)| *c == StoreCompletion::Written)
                .count();
            assert_eq!(s.remembered(&counter(), ShardId(1)).len(), written);
            assert!(written > 0 && written < 50, "{written}");
            answers
        };
        assert_eq!(run(), run());
    }
}
