//! Explain: each coordinator and region keeps a small bounded record of the decisions it took
//! (an allocation and the strategy's inputs, a rebalance move and its round, what the
//! allocation gate waited for, a letter dead-lettered and why), and answers
//! [`crate::Command::Explain`] about an entity from it: why its shard lives where it does, and
//! what happened to its letters. Bounded: a coordinator keeps the latest few decisions about
//! each shard (its allocations and moves stay however busy the other shards were) and the
//! latest few hundred others; the oldest go first, and an answer says where a full log may
//! have forgotten older ones.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use crate::id::{EntityId, MemberId, ShardId};
pub use crate::message::{AllocationCause, Decision, DecisionRecord, Explanation};
use crate::time::Instant;

/// How many of its latest decisions about each shard (allocations, rebalance moves) a
/// coordinator keeps: a shard's story stays however many other shards were decided on since.
pub const DECISIONS_KEPT_PER_SHARD: usize = 4;

/// How many of its other latest decisions (gate waits; a region's dead letters) a coordinator
/// or a region keeps.
pub const DECISIONS_KEPT: usize = 256;

/// A bounded log of one role's decisions: the latest few about each shard, and the latest
/// others.
#[derive(Debug, Default)]
pub(crate) struct DecisionLog {
    by_shard: BTreeMap<ShardId, VecDeque<(Instant, Decision)>>,
    others: VecDeque<(Instant, Decision)>,
}

impl DecisionLog {
    /// Notes `decision`, taken at `at`, forgetting the oldest of its kind if full.
    pub(crate) fn record(&mut self, at: Instant, decision: Decision) {
        let (kept, bound) = match &decision {
            Decision::Allocated { shard, .. } | Decision::Rebalanced { shard, .. } => (
                self.by_shard.entry(*shard).or_default(),
                DECISIONS_KEPT_PER_SHARD,
            ),
            _ => (&mut self.others, DECISIONS_KEPT),
        };
        if kept.len() == bound {
            kept.pop_front();
        }
        kept.push_back((at, decision));
    }

    /// The decisions about `shard` and `entity`'s letters, oldest first, as `by` answers at
    /// `now`; and, if a log they came from is full, the age of its oldest record (older
    /// decisions may be forgotten).
    pub(crate) fn about(
        &self,
        now: Instant,
        by: MemberId,
        shard: ShardId,
        entity: &EntityId,
    ) -> (Vec<DecisionRecord>, Option<Duration>) {
        let empty = VecDeque::new();
        let of_shard = self.by_shard.get(&shard).unwrap_or(&empty);
        let mut records: Vec<(Instant, &Decision)> = (of_shard.iter().chain(&self.others))
            .filter(|(_, d)| d.concerns(shard, entity))
            .map(|(at, d)| (*at, d))
            .collect();
        records.sort_by_key(|(at, _)| *at);
        let age = |log: &VecDeque<(Instant, Decision)>, bound: usize| {
            let oldest = log.front().filter(|_| log.len() == bound);
            oldest.map(|(at, _)| now.saturating_duration_since(*at))
        };
        let forgotten = [
            age(of_shard, DECISIONS_KEPT_PER_SHARD),
            age(&self.others, DECISIONS_KEPT),
        ];
        let records = (records.into_iter())
            .map(|(at, decision)| DecisionRecord {
                by,
                ago: now.saturating_duration_since(at),
                decision: decision.clone(),
            })
            .collect();
        (records, forgotten.into_iter().flatten().min())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::AllocationGate;
    use crate::reason::DeadLetterReason;

    fn at(secs: u64) -> Instant {
        Instant::ZERO + Duration::from_secs(secs)
    }

    fn dead(entity: &str, shard: u32) -> Decision {
        Decision::DeadLettered {
            entity: EntityId::new(entity),
            shard: ShardId(shard),
            reason: DeadLetterReason::BufferFull,
        }
    }

    #[test]
    fn the_log_answers_about_a_shard_and_an_entity_and_forgets_the_oldest() {
        let me = MemberId::new(1, 1);
        let mut log = DecisionLog::default();
        log.record(at(1), dead("a", 3));
        log.record(at(2), dead("b", 3));
        let gate = AllocationGate::default();
        log.record(
            at(3),
            Decision::gate_waited(&[ShardId(3), ShardId(4)], gate),
        );
        let (records, forgotten) = log.about(at(10), me, ShardId(3), &EntityId::new("a"));
        let ages: Vec<u64> = records.iter().map(|r| r.ago.as_secs()).collect();
        assert_eq!(ages, [9, 7], "a's letter and the gate, not b's letter");
        assert_eq!(forgotten, None);
        for i in 0..DECISIONS_KEPT {
            log.record(at(20 + i as u64), dead("c", 5));
        }
        let (records, forgotten) = log.about(at(400), me, ShardId(3), &EntityId::new("a"));
        assert!(records.is_empty(), "forgotten: {records:?}");
        assert_eq!(forgotten, Some(Duration::from_secs(380)));
    }

    /// A shard's allocations stay however many other shards were allocated since; only its own
    /// older ones go.
    #[test]
    fn a_shards_latest_allocations_are_kept_whatever_else_happened() {
        let me = MemberId::new(1, 1);
        let allocated = |shard: u32, region: u64| Decision::Allocated {
            shard: ShardId(shard),
            region: MemberId::new(region, 1),
            cause: AllocationCause::FencedHostedAgain,
        };
        let mut log = DecisionLog::default();
        log.record(at(1), allocated(7, 2));
        for shard in 0..2_000 {
            log.record(at(2), allocated(1_000 + shard, 3));
        }
        let (records, forgotten) = log.about(at(10), me, ShardId(7), &EntityId::new("x"));
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(forgotten, None);
        for region in 0..DECISIONS_KEPT_PER_SHARD as u64 {
            log.record(at(3 + region), allocated(7, 10 + region));
        }
        let (records, forgotten) = log.about(at(10), me, ShardId(7), &EntityId::new("x"));
        let regions: Vec<String> = (records.iter())
            .map(|r| match &r.decision {
                Decision::Allocated { region, .. } => region.to_string(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(
            regions,
            ["n10#1", "n11#1", "n12#1", "n13#1"],
            "oldest first"
        );
        assert_eq!(
            forgotten,
            Some(Duration::from_secs(7)),
            "the first is forgotten"
        );
    }
}
