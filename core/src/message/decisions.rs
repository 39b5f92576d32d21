//! What coordinators and regions decided, as `Command::Explain` answers it and as it travels
//! between members (`Body::Explanation`): allocations with the strategy's inputs, rebalance
//! moves, gate waits, dead letters.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::AllocationGate;
use crate::id::{EntityId, MemberId, ShardId};
use crate::reason::DeadLetterReason;

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
    pub(crate) fn concerns(&self, shard: ShardId, entity: &EntityId) -> bool {
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
