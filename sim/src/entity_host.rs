//! The simulated host's entities: which incarnation runs where, which stops are pending or
//! ignored, how full each mailbox is, and the entities' random behaviour (stop delays,
//! ignoring stops, passivating themselves, stopping on their own, answering asks). The
//! simulator acts on what it decides (see `simulator/host.rs`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use shoal_core::{EntityId, Instant, MemberId, StopReason};

use crate::options::{HostOptions, Options};
use crate::rng::{SimRng, Stream};

/// One running incarnation of an entity: where, which, and its incarnation number.
pub(crate) type Life = (MemberId, EntityId, u64);

/// How an incarnation asked to stop goes about it.
#[derive(Debug)]
pub(crate) enum StopPlan {
    /// It ignores a graceful stop (until it is forced).
    Ignored,
    /// It terminates after `delay`; `was_ignoring`: a forced stop of one that ignored its stop.
    After { delay: Duration, was_ignoring: bool },
}

/// A mailbox's key: the member, a hash of the entity's id, the id. Looked up for every
/// delivery among thousands, and never walked in order: with the hash before the id, the
/// search compares integers where it compared strings a dozen times.
type MailboxKey = (MemberId, u32, EntityId);

fn mailbox_key(member: MemberId, entity: &EntityId) -> MailboxKey {
    let hash = shoal_core::murmur2(entity.as_str().as_bytes());
    (member, hash, entity.clone())
}

/// The entities of every simulated process.
#[derive(Debug)]
pub(crate) struct EntityHost {
    options: HostOptions,
    /// Stop delays, ignoring stops, passivation.
    rng_entities: SimRng,
    /// Forced stops' delays and stopping on their own.
    rng_host: SimRng,
    /// Answers to asks.
    rng_replies: SimRng,
    /// Stops under way: the incarnation, and the stop the node asked for (`None`: on its own).
    pending_stops: BTreeMap<Life, Option<StopReason>>,
    /// Incarnations ignoring a graceful stop.
    ignored_stops: BTreeSet<Life>,
    /// The running incarnation of each entity on each member.
    incarnations: BTreeMap<(MemberId, EntityId), u64>,
    /// When each mailbox will have handled what it holds (see [`mailbox_key`]).
    mailboxes: BTreeMap<MailboxKey, Instant>,
    /// The stop being reported to its node right now, so a start it causes at once is seen
    /// as racing it.
    reporting_stop: Option<(MemberId, EntityId, Option<StopReason>)>,
    /// Incarnations that asked to be passivated, and when, until their node asks them to stop
    /// (or they end): a node must carry out a passivation it is asked for.
    passivation_asks: BTreeMap<Life, Instant>,
}

impl EntityHost {
    /// The host of a run with `opts`.
    pub(crate) fn new(opts: &Options) -> Self {
        let seed = opts.seed;
        Self {
            options: opts.host.clone(),
            rng_entities: SimRng::of(seed, Stream::Entities),
            rng_host: SimRng::of(seed, Stream::Host),
            rng_replies: SimRng::of(seed, Stream::Replies),
            pending_stops: BTreeMap::new(),
            ignored_stops: BTreeSet::new(),
            incarnations: BTreeMap::new(),
            mailboxes: BTreeMap::new(),
            reporting_stop: None,
            passivation_asks: BTreeMap::new(),
        }
    }

    /// `entity` started on `member` as incarnation `incarnation`.
    pub(crate) fn started(&mut self, member: MemberId, entity: EntityId, incarnation: u64) {
        self.incarnations.insert((member, entity), incarnation);
    }

    /// If this start follows at once the stop being reported for the same entity on the same
    /// member: the reason of that stop.
    pub(crate) fn raced_stop(
        &self,
        member: MemberId,
        entity: &EntityId,
    ) -> Option<Option<StopReason>> {
        match &self.reporting_stop {
            Some((m, e, reason)) if *m == member && e == entity => Some(*reason),
            _ => None,
        }
    }

    /// The stop of `life` is being reported to its node (`None`: the report is done).
    pub(crate) fn reporting(&mut self, stop: Option<(MemberId, EntityId, Option<StopReason>)>) {
        self.reporting_stop = stop;
    }

    /// The key of `member`'s running incarnation of `entity`, if one runs.
    pub(crate) fn running(&self, member: MemberId, entity: &EntityId) -> Option<Life> {
        let incarnation = *self.incarnations.get(&(member, entity.clone()))?;
        Some((member, entity.clone(), incarnation))
    }

    /// Every running incarnation: where, and which entity.
    pub(crate) fn lives(&self) -> impl Iterator<Item = &(MemberId, EntityId)> + '_ {
        self.incarnations.keys()
    }

    /// Whether the node told the host to stop `member`'s running incarnation of `entity`.
    pub(crate) fn stop_requested(&self, member: MemberId, entity: &EntityId) -> bool {
        // Asked for every delivery: most of the time no stop is under way anywhere.
        if self.ignored_stops.is_empty() && self.pending_stops.is_empty() {
            return false;
        }
        let Some(key) = self.running(member, entity) else {
            return false;
        };
        self.ignored_stops.contains(&key)
            || self.pending_stops.get(&key).is_some_and(Option::is_some)
    }

    /// Whether `entity`'s mailbox on `member` is full at `now`; if not, it takes one more
    /// message.
    pub(crate) fn mailbox_full(
        &mut self,
        now: Instant,
        member: MemberId,
        entity: &EntityId,
    ) -> bool {
        let Some(mailbox) = self.options.mailbox else {
            return false;
        };
        let through = self
            .mailboxes
            .entry(mailbox_key(member, entity))
            .or_insert(now);
        // Messages not yet handled, the one in hand included.
        let backlog = (through.saturating_duration_since(now).as_nanos())
            .div_ceil(mailbox.service.as_nanos());
        if backlog >= u128::from(mailbox.capacity) {
            return true;
        }
        *through = (*through).max(now) + mailbox.service;
        false
    }

    /// Whether a delivered message is answered (an ask), and after how long.
    pub(crate) fn reply_delay(&mut self) -> Option<Duration> {
        if self.options.asks > 0.0 && self.rng_replies.chance(self.options.asks) {
            let (least, most) = (Duration::from_millis(1), Duration::from_millis(20));
            return Some(self.rng_replies.duration(least, most));
        }
        None
    }

    /// Whether the entity a message was delivered to decides to stop on its own.
    pub(crate) fn stops_on_its_own(&mut self) -> bool {
        let p = self.options.self_stop;
        p > 0.0 && self.rng_host.chance(p)
    }

    /// Whether the entity a message was delivered to asks to passivate, and after how long.
    pub(crate) fn passivates(&mut self) -> Option<Duration> {
        let p = self.options.passivate;
        if p > 0.0 && self.rng_entities.chance(p) {
            let (least, most) = (Duration::from_millis(1), Duration::from_secs(2));
            return Some(self.rng_entities.duration(least, most));
        }
        None
    }

    /// The running incarnation of `entity` on `member` ends by itself (it was not asked to):
    /// which, and after how long; `None` if none runs or it is stopping already.
    pub(crate) fn stop_by_itself(
        &mut self,
        member: MemberId,
        entity: &EntityId,
    ) -> Option<(Life, Duration)> {
        let key = self.running(member, entity)?;
        if self.pending_stops.contains_key(&key) || self.ignored_stops.contains(&key) {
            return None;
        }
        let delay = self
            .rng_host
            .duration(Duration::from_millis(1), Duration::from_secs(1));
        Some((key, delay))
    }

    /// `member`'s running incarnation of `entity` asks its node to passivate it at `now`
    /// (nothing to owe if none runs, or its node already asked it to stop).
    pub(crate) fn asks_to_passivate(&mut self, now: Instant, member: MemberId, entity: &EntityId) {
        let Some(key) = self.running(member, entity) else {
            return;
        };
        let stop_asked = self.ignored_stops.contains(&key)
            || self.pending_stops.get(&key).is_some_and(Option::is_some);
        if !stop_asked {
            self.passivation_asks.entry(key).or_insert(now);
        }
    }

    /// Incarnations that asked to be passivated before `before` and still run, their node
    /// never having asked them to stop.
    pub(crate) fn unhonoured_passivations(
        &self,
        before: Instant,
    ) -> impl Iterator<Item = (&Life, Instant)> + '_ {
        (self.passivation_asks.iter())
            .filter(move |(_, at)| **at < before)
            .map(|(key, at)| (key, *at))
    }

    /// How `key`, asked to stop for `reason`, goes about it.
    pub(crate) fn plan_stop(&mut self, key: &Life, reason: StopReason) -> StopPlan {
        self.passivation_asks.remove(key);
        if reason == StopReason::Forced {
            let was_ignoring = self.ignored_stops.remove(key);
            let slowest = self.options.forced_stop;
            let delay = if slowest > Duration::from_millis(1) {
                self.rng_host.duration(Duration::from_millis(1), slowest)
            } else {
                slowest
            };
            return StopPlan::After {
                delay,
                was_ignoring,
            };
        }
        if self.rng_entities.chance(self.options.ignore_stop) {
            self.ignored_stops.insert(key.clone());
            return StopPlan::Ignored;
        }
        let delay = self
            .rng_entities
            .duration(Duration::from_millis(1), self.options.slow_stop);
        StopPlan::After {
            delay,
            was_ignoring: false,
        }
    }

    /// `key` is stopping (`reason`: what the node asked for; `None`: on its own).
    pub(crate) fn stopping(&mut self, key: Life, reason: Option<StopReason>) {
        self.pending_stops.insert(key, reason);
    }

    /// `key` terminated: the stop it was under, if it was stopping (else it is a stale event).
    pub(crate) fn terminated(&mut self, key: &Life) -> Option<Option<StopReason>> {
        let reason = self.pending_stops.remove(key)?;
        self.passivation_asks.remove(key);
        self.incarnations.remove(&(key.0, key.1.clone()));
        self.mailboxes.remove(&mailbox_key(key.0, &key.1));
        Some(reason)
    }

    /// `member`'s process is gone, and its entities with it: a stop of one of them still on
    /// its way is stale (it must not end a later incarnation's life in the checks).
    pub(crate) fn process_gone(&mut self, member: MemberId) {
        self.pending_stops.retain(|(m, _, _), _| *m != member);
        self.ignored_stops.retain(|(m, _, _)| *m != member);
        self.incarnations.retain(|(m, _), _| *m != member);
        self.mailboxes.retain(|(m, _, _), _| *m != member);
        self.passivation_asks.retain(|(m, _, _), _| *m != member);
    }
}
