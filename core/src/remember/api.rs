//! The public types of remembering entities: its settings, and the requests a node asks its
//! host to carry out against the remember store with their completions.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::id::{EntityId, EntityType, Epoch, ShardId};

/// How remembered entities are started again when their shard starts (Akka's
/// `entity-recovery-strategy`).
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub enum RecoveryStrategy {
    /// Every remembered entity at once.
    AllAtOnce,
    /// `number` entities every `every` (spreads the load of a large recovery).
    Constant {
        /// Entities started per step (at least one).
        number: usize,
        /// Time between steps.
        every: Duration,
    },
}

/// Settings of remembering, per entity type.
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub struct RememberSettings {
    /// How remembered entities are restarted.
    pub recovery: RecoveryStrategy,
    /// First delay before retrying a failed store request (doubled per failure).
    pub retry_min: Duration,
    /// Largest retry delay.
    pub retry_max: Duration,
    /// A remembered entity that stops without being passivated (it failed) is started again
    /// after this (Akka's `entity-restart-backoff`).
    pub restart_backoff: Duration,
}

impl RememberSettings {
    /// How long to wait before retrying after `failures` consecutive failures (at least one):
    /// `retry_min`, doubled per further failure, at most `retry_max`.
    pub(crate) fn retry_delay(&self, failures: u32) -> Duration {
        let doubled = self.retry_min * 2u32.saturating_pow(failures.saturating_sub(1));
        doubled.min(self.retry_max)
    }
}

impl Default for RememberSettings {
    fn default() -> Self {
        Self {
            recovery: RecoveryStrategy::AllAtOnce,
            retry_min: Duration::from_millis(200),
            retry_max: Duration::from_secs(10),
            restart_backoff: Duration::from_secs(10),
        }
    }
}

/// A request to the remember store; the host completes it with a [`StoreCompletion`] in
/// `Input::StoreCompleted`, echoing the request.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum StoreRequest {
    /// The coordinator reads every shard of the type the store has an epoch for, with it
    /// (after a full cluster restart it starts every one of them, and allocates above them).
    ///
    /// First the store *refiles* the type if it last filed it under another number of
    /// shards (the cluster restarted with another `number_of_shards`): every remembered id
    /// moves to the entry of the shard it now maps to ([`shard_of`](crate::shard_of)), and
    /// every entry it changes gets an epoch above all the type's epochs, which fences any
    /// instance that loaded it before. A shard therefore loads exactly the ids that map to it,
    /// and ids of shards beyond the new count are not lost. Nothing moves when the count is
    /// the one recorded.
    Shards {
        /// The type.
        entity_type: EntityType,
        /// The type's number of shards, under which the store files its ids.
        number_of_shards: u32,
    },
    /// Claim `epoch` for the shard and read its remembered ids, dormant ones excepted.
    Load {
        /// The shard's type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
        /// The allocation's epoch.
        epoch: Epoch,
    },
    /// Remember `started` and forget `stopped`, atomically, unless fenced.
    Update {
        /// The shard's type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
        /// The allocation's epoch.
        epoch: Epoch,
        /// Orders the instance's writes (1, 2, ...): the store refuses one older than the
        /// newest it applied, so a write that timed out and lands late cannot undo a newer one.
        seq: u64,
        /// Ids to remember (sorted).
        started: Vec<EntityId>,
        /// Ids to forget (sorted).
        stopped: Vec<EntityId>,
        /// Ids to keep as dormant (sorted): remembered, but not returned by `Load` until a
        /// later `started` names them again. An id the store does not hold is added dormant.
        #[serde(default)]
        dormant: Vec<EntityId>,
    },
}

impl StoreRequest {
    /// The entity type the request is about.
    pub fn entity_type(&self) -> &EntityType {
        match self {
            Self::Shards { entity_type, .. }
            | Self::Load { entity_type, .. }
            | Self::Update { entity_type, .. } => entity_type,
        }
    }

    /// The shard, epoch and write sequence (0 for a load) of a shard's request (`None` for
    /// the coordinator's `Shards`).
    pub fn shard(&self) -> Option<(ShardId, Epoch, u64)> {
        match self {
            Self::Shards { .. } => None,
            Self::Load { shard, epoch, .. } => Some((*shard, *epoch, 0)),
            Self::Update {
                shard, epoch, seq, ..
            } => Some((*shard, *epoch, *seq)),
        }
    }
}

/// How a store request ended.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum StoreCompletion {
    /// Every shard with an epoch in the store, with it (answers `Shards`).
    Shards(Vec<(ShardId, Epoch)>),
    /// The load's ids.
    Loaded(Vec<EntityId>),
    /// The update was applied.
    Written,
    /// The store refused the epoch: a newer allocation of the shard exists, with this epoch.
    Fenced(Epoch),
    /// The request failed (unreachable, timed out); nothing is known to have changed.
    Failed(String),
}
