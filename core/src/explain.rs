//! Explain: each coordinator and region keeps a small bounded record of the decisions it took
//! (an allocation and the strategy's inputs, a rebalance move and its round, what the
//! allocation gate waited for, a letter dead-lettered and why), and answers
//! [`crate::Command::Explain`] about an entity from it: why its shard lives where it does, and
//! what happened to its letters. Bounded: a coordinator keeps the latest few decisions about
//! each shard (its allocations and moves stay however busy the other shards were) and the
//! latest few hundred others; the oldest go first, and an answer says where a full log may
//! have forgotten older ones.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::id::{EntityId, MemberId, ShardId};
use crate::message::AllocationGate;
use crate::reason::DeadLetterReason;
use crate::time::Instant;

/// How many of its latest decisions about each shard (allocations, rebalance moves) a
/// coordinator keeps: a shard's story stays however many other shards were decided on since.
pub const DECISIONS_KEPT_PER_SHARD: usize = 4;

/// How many of its other latest decisions (gate waits; a region's dead letters) a coordinator
/// or a region keeps.
pub const DECISIONS_KEPT: usize = 256;

/// How many of the shards waiting on the gate one record names.
const WAITING_NAMED: usize = 16;

/// One decision of a coordinator or a region.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[non_exhaustive]
pub enum Decision {
    /// The coordinator allocated `shard` to `region`.
    Allocated {
        /// The shard.
        shard: ShardId,
        /// Where it went.
        region: MemberId,
        /// Why there: the strategy's choice, or the region its fenced instance waits at.
        cause: AllocationCause,
    },
    /// A rebalance round moved `shard` away from `from`.
    Rebalanced {
        /// The shard.
        shard: ShardId,
        /// The region it was handed off from.
        from: MemberId,
        /// Shards the round moved.
        round: u32,
        /// Handoffs already under way when the round began (the strategy's limit counts them).
        in_progress: u32,
        /// The strategy, with its limits.
        strategy: String,
    },
    /// Requests for shards waited on the allocation gate.
    GateWaited {
        /// The first shards waiting, in order.
        shards: Vec<ShardId>,
        /// How many waited in all.
        waiting: u32,
        /// What the gate waited for.
        gate: AllocationGate,
    },
    /// A letter to `entity` was dead-lettered.
    DeadLettered {
        /// The entity.
        entity: EntityId,
        /// Its shard.
        shard: ShardId,
        /// Why.
        reason: DeadLetterReason,
    },
}

/// Why a coordinator allocated a shard where it did.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[non_exhaustive]
pub enum AllocationCause {
    /// The strategy chose the region from the regions' shard counts.
    Strategy {
        /// The strategy, with its settings.
        strategy: String,
        /// The region that asked first.
        requester: MemberId,
        /// Regions the strategy could choose from.
        regions: u32,
        /// Shards the chosen region held.
        chosen_held: u32,
        /// Fewest and most shards any of them held.
        fewest: u32,
        /// See `fewest`.
        most: u32,
    },
    /// A store had fenced the shard's instance at this region: it is hosted there again so
    /// that the letters the instance left keep their order.
    FencedHostedAgain,
}

impl Decision {
    /// Whether this decision concerns `shard` (and, for a dead letter, `entity`).
    fn concerns(&self, shard: ShardId, entity: &EntityId) -> bool {
        match self {
            Self::Allocated { shard: s, .. } | Self::Rebalanced { shard: s, .. } => *s == shard,
            Self::GateWaited { shards, .. } => shards.contains(&shard),
            Self::DeadLettered { entity: e, .. } => e == entity,
        }
    }

    /// Every shard the decision names (for validating a decoded answer).
    pub(crate) fn shards(&self) -> Vec<ShardId> {
        match self {
            Self::Allocated { shard, .. }
            | Self::Rebalanced { shard, .. }
            | Self::DeadLettered { shard, .. } => vec![*shard],
            Self::GateWaited { shards, .. } => shards.clone(),
        }
    }

    /// A gate's record: the first shards waiting and how many there are.
    pub(crate) fn gate_waited(waiting: &[ShardId], gate: AllocationGate) -> Self {
        Self::GateWaited {
            shards: waiting.iter().take(WAITING_NAMED).copied().collect(),
            waiting: u32::try_from(waiting.len()).unwrap_or(u32::MAX),
            gate,
        }
    }
}

/// A decision as an answer gives it: who took it and how long before the answer.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct DecisionRecord {
    /// The member whose coordinator or region took it.
    pub by: MemberId,
    /// How long before the answer, on that member's clock.
    pub ago: Duration,
    /// The decision.
    pub decision: Decision,
}

/// The answer to [`crate::Command::Explain`]: the decisions about an entity's shard and its
/// letters that the coordinator and the asked member's region still hold, oldest first.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub struct Explanation {
    /// The entity.
    pub entity: EntityId,
    /// Its shard.
    pub shard: ShardId,
    /// The coordinator that answered, if one was known.
    pub coordinator: Option<MemberId>,
    /// The decisions, oldest first.
    pub records: Vec<DecisionRecord>,
    /// How far back each log reached (its oldest record's age) where it was full: older
    /// decisions are forgotten.
    pub forgotten_before: Vec<(MemberId, Duration)>,
}

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

impl fmt::Display for DecisionRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ago = self.ago.as_secs_f64();
        write!(f, "{ago:.1} s ago, {}: ", self.by)?;
        match &self.decision {
            Decision::Allocated {
                shard,
                region,
                cause:
                    AllocationCause::Strategy {
                        strategy,
                        requester,
                        regions,
                        chosen_held,
                        fewest,
                        most,
                    },
            } => write!(
                f,
                "allocated shard {} to {region} ({strategy}; asked by {requester}; {region} \
                 held {chosen_held} shards, the {regions} regions {fewest} to {most})",
                shard.0
            ),
            Decision::Allocated {
                shard,
                region,
                cause: AllocationCause::FencedHostedAgain,
            } => write!(
                f,
                "hosted shard {} at {region} again, where its fenced instance left letters",
                shard.0
            ),
            Decision::Rebalanced {
                shard,
                from,
                round,
                in_progress,
                strategy,
            } => write!(
                f,
                "moved shard {} away from {from} in a rebalance round of {round} ({strategy}; \
                 {in_progress} handoffs already under way)",
                shard.0
            ),
            Decision::GateWaited {
                shards,
                waiting,
                gate,
            } => {
                let shards: Vec<u32> = shards.iter().map(|s| s.0).collect();
                write!(
                    f,
                    "{waiting} shards (first {shards:?}) waited for allocation: {}",
                    gate.describe()
                )
            }
            Decision::DeadLettered {
                entity,
                shard,
                reason,
            } => write!(
                f,
                "dead-lettered a letter to {entity} (shard {}): {reason:?}",
                shard.0
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
