//! The simulated remember-entities store: one service the whole cluster shares (as a
//! PostgreSQL server, or one SQLite file on one machine), with the semantics of the runtime's
//! stores (a request claims the shard's epoch; an older epoch is refused and changes nothing)
//! and their failures: latency with a tail, failed requests, timeouts whose change was applied
//! although the caller hears a failure, and windows when the store is unavailable.
//!
//! Not wired into the world yet (issue 12): the shard's remembering machine and the effects
//! that reach it come first.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use shoal_core::{EntityId, EntityType, Epoch, Instant, ShardId, StoreCompletion, StoreRequest};

use crate::rng::SimRng;

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
    ids: BTreeSet<EntityId>,
}

/// When and how a request completes.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Answer {
    pub(crate) at: Instant,
    pub(crate) completion: StoreCompletion,
}

/// The store and what it did.
#[derive(Debug)]
pub(crate) struct SimStore {
    settings: StoreSettings,
    rng: SimRng,
    records: BTreeMap<(EntityType, ShardId), Record>,
    /// Requests refused for their epoch (the checker's evidence that fencing worked).
    pub(crate) fenced: u64,
}

impl SimStore {
    /// A store with `settings`, its randomness from `rng` (a stream of its own).
    pub(crate) fn new(settings: StoreSettings, rng: SimRng) -> Self {
        Self {
            settings,
            rng,
            records: BTreeMap::new(),
            fenced: 0,
        }
    }

    fn in_outage(&self, now: Instant) -> bool {
        self.settings
            .outages
            .iter()
            .any(|&(from, to)| from <= now && now < to)
    }

    /// Takes `request` at `now`: applies it (unless it fails) and says when the caller hears
    /// what.
    pub(crate) fn handle(&mut self, now: Instant, request: &StoreRequest) -> Answer {
        let timeout = now + self.settings.timeout;
        if self.in_outage(now) {
            let completion = StoreCompletion::Failed("store unavailable".into());
            return Answer {
                at: timeout,
                completion,
            };
        }
        let (lo, hi) = if self.rng.chance(self.settings.tail_rate) {
            self.settings.tail
        } else {
            self.settings.latency
        };
        let at = now + self.rng.duration(lo, hi);
        if self.rng.chance(self.settings.failure_rate) {
            let completion = StoreCompletion::Failed("store error".into());
            return Answer { at, completion };
        }
        let completion = self.apply(request);
        if self.rng.chance(self.settings.timeout_rate) {
            // Applied, but the answer is lost.
            let completion = StoreCompletion::Failed("store timeout".into());
            return Answer {
                at: timeout,
                completion,
            };
        }
        Answer { at, completion }
    }

    fn apply(&mut self, request: &StoreRequest) -> StoreCompletion {
        let (entity_type, shard, epoch) = match request {
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
        if epoch.0 < record.epoch {
            self.fenced += 1;
            return StoreCompletion::Fenced;
        }
        record.epoch = epoch.0;
        match request {
            StoreRequest::Load { .. } => {
                StoreCompletion::Loaded(record.ids.iter().cloned().collect())
            }
            StoreRequest::Update {
                started, stopped, ..
            } => {
                for id in stopped {
                    record.ids.remove(id);
                }
                record.ids.extend(started.iter().cloned());
                StoreCompletion::Written
            }
        }
    }

    /// The ids remembered for a shard (for the checker).
    pub(crate) fn remembered(&self, entity_type: &EntityType, shard: ShardId) -> Vec<EntityId> {
        self.records
            .get(&(entity_type.clone(), shard))
            .map(|r| r.ids.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// The newest epoch seen for a shard.
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
        StoreRequest::Update {
            entity_type: counter(),
            shard: ShardId(1),
            epoch: Epoch(epoch),
            started: started.iter().map(|s| EntityId::from(*s)).collect(),
            stopped: stopped.iter().map(|s| EntityId::from(*s)).collect(),
        }
    }

    fn store(settings: StoreSettings) -> SimStore {
        SimStore::new(settings, SimRng::stream(7, 99))
    }

    #[test]
    fn writes_apply_and_older_epochs_are_fenced_without_effect() {
        let mut s = store(StoreSettings::default());
        let now = Instant::from_secs(1);
        assert_eq!(
            s.handle(now, &load(2)).completion,
            StoreCompletion::Loaded(vec![])
        );
        let answer = s.handle(now, &write(2, &["a", "b"], &[]));
        assert_eq!(answer.completion, StoreCompletion::Written);
        assert!(answer.at > now && answer.at <= now + Duration::from_millis(5));
        assert_eq!(
            s.handle(now, &write(1, &["stale"], &["a"])).completion,
            StoreCompletion::Fenced
        );
        assert_eq!(s.handle(now, &load(1)).completion, StoreCompletion::Fenced);
        assert_eq!(s.fenced, 2);
        s.handle(now, &write(3, &[], &["b"]));
        assert_eq!(
            s.remembered(&counter(), ShardId(1)),
            vec![EntityId::from("a")]
        );
        assert_eq!(s.epoch(&counter(), ShardId(1)), Epoch(3));
    }

    #[test]
    fn an_outage_fails_every_request_after_the_timeout_and_changes_nothing() {
        let settings = StoreSettings {
            outages: vec![(Instant::from_secs(10), Instant::from_secs(20))],
            ..StoreSettings::default()
        };
        let mut s = store(settings);
        let answer = s.handle(Instant::from_secs(15), &write(1, &["a"], &[]));
        assert_eq!(answer.at, Instant::from_secs(17));
        assert!(matches!(answer.completion, StoreCompletion::Failed(_)));
        assert!(s.remembered(&counter(), ShardId(1)).is_empty());
        let after = s.handle(Instant::from_secs(20), &write(1, &["a"], &[]));
        assert_eq!(after.completion, StoreCompletion::Written);
    }

    #[test]
    fn a_timeout_applies_the_change_although_the_caller_hears_a_failure() {
        let settings = StoreSettings {
            timeout_rate: 1.0,
            ..StoreSettings::default()
        };
        let mut s = store(settings);
        let answer = s.handle(Instant::from_secs(1), &write(1, &["a"], &[]));
        assert!(matches!(answer.completion, StoreCompletion::Failed(_)));
        assert_eq!(
            s.remembered(&counter(), ShardId(1)),
            vec![EntityId::from("a")]
        );
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
            let answers: Vec<Answer> = (0..50)
                .map(|i| s.handle(Instant::from_secs(i), &write(1, &[&format!("e{i}")], &[])))
                .collect();
            let written = answers
                .iter()
                .filter(|a| a.completion == StoreCompletion::Written)
                .count();
            assert_eq!(s.remembered(&counter(), ShardId(1)).len(), written);
            assert!(written > 0 && written < 50, "{written}");
            answers
        };
        assert_eq!(run(), run());
    }
}
