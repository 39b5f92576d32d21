//! Stores: where each shard's remembered entity ids live, so that entities that were running
//! start again after a rebalance or a crash without waiting for a message ([`RememberStore`]),
//! and where persistent entities keep their state ([`StateStore`], with the node's group-commit
//! writer in `journal`).
//!
//! One async trait, [`RememberStore`], and two implementations sharing one schema: SQLite (one
//! file in WAL mode, the embedded default, shared by the processes of a node set on one
//! machine) and PostgreSQL (production). Every write carries the shard allocation's fencing
//! [`Epoch`]: a shard instance claims its epoch when it loads, and the store refuses a load or
//! write from an older epoch with [`StoreError::Fenced`], in the same transaction as the change,
//! so an instance of the shard that should no longer exist cannot change the set. The verdict
//! is `shoal_core::FencingVerdict`'s, the same the simulator's store gives; a store of your own
//! should call it too, and pass the table of `shoal_core::FENCING_CASES` as both stores here do.
//!
//! The protocol that drives a store (loading at shard start, batching one write in flight per
//! shard, throttled recovery) belongs to the core and is simulated there; these are its
//! runtime adapters.

#[cfg(feature = "etcd")]
mod etcd_lease;
mod journal;
mod lease;
mod lease_link;
mod link;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_lease;
#[cfg(feature = "postgres")]
mod postgres_queue;
#[cfg(feature = "postgres")]
mod postgres_state;
mod queue;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
mod sqlite_lease;
#[cfg(feature = "sqlite")]
mod sqlite_queue;
#[cfg(feature = "sqlite")]
mod sqlite_state;
mod state;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod state_sql;

use futures_util::future::BoxFuture;
use shoal_core::{EntityId, EntityType, Epoch, ShardId, StoreCompletion, StoreRequest};

#[cfg(feature = "etcd")]
pub use etcd_lease::{DEFAULT_ETCD_PREFIX, EtcdLeaseStore};
pub(crate) use journal::Journal;
pub use lease::{LEASE_SCHEMA, LeaseStore};
pub(crate) use lease_link::LeaseLink;
pub(crate) use link::StoreLink;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use queue::{ProducerQueue, QUEUE_SCHEMA, QueueState, QueuedStream};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use state::{Delivered, Recovered, STATE_SCHEMA, StateKey, StateStore, StateWrite, Versioned};

/// Why a store operation did not complete.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
pub enum StoreError {
    /// The operation carried an epoch older than the newest the store has seen for the shard:
    /// it came from an instance of the shard that should no longer exist, and changed nothing.
    #[error("fenced: epoch {} is older than the shard's epoch {}", refused.0, current.0)]
    Fenced {
        /// The epoch refused.
        refused: Epoch,
        /// The shard's newest epoch in the store.
        current: Epoch,
    },
    /// The store could not be reached or failed; the operation changed nothing and may be
    /// retried.
    #[error("remember store unavailable: {0}")]
    Unavailable(String),
    /// A value the store cannot hold (an epoch beyond `i64::MAX`), or one read back that this
    /// runtime cannot read.
    #[error("invalid value for the store: {0}")]
    Invalid(String),
    /// A state write whose sequence number (or revision) does not follow the entity's newest:
    /// the writer's picture of the entity is stale. Nothing changed.
    #[error("conflict: the write follows {expected}, the entity's newest is {found}")]
    Conflict {
        /// The newest sequence number the writer believed the entity had.
        expected: u64,
        /// The entity's newest in the store.
        found: u64,
    },
}

/// A change to one shard's remembered set, made by the instance holding `epoch`.
#[derive(Clone, Copy, Debug)]
pub struct Update<'a> {
    /// The shard's entity type.
    pub entity_type: &'a EntityType,
    /// The shard.
    pub shard: ShardId,
    /// The writer's allocation epoch.
    pub epoch: Epoch,
    /// The writer's sequence number (1, 2, ... per instance): a write older than the newest
    /// applied at its epoch is refused, so one that timed out and lands late undoes nothing.
    pub seq: u64,
    /// Entities to remember (started).
    pub started: &'a [EntityId],
    /// Entities to forget (passivated).
    pub stopped: &'a [EntityId],
    /// Entities to keep as dormant (passivated by the active-entity limit): remembered, but
    /// not returned by [`RememberStore::load`] until a later update starts them again. One
    /// the store does not hold is added dormant.
    pub dormant: &'a [EntityId],
}

/// Where remembered entity ids are kept (object-safe: a node holds an `Arc<dyn RememberStore>`).
pub trait RememberStore: Send + Sync + 'static {
    /// Claims `epoch` for the shard and returns its remembered ids (sorted); refused with
    /// [`StoreError::Fenced`] if the shard already has a newer epoch.
    fn load<'a>(
        &'a self,
        entity_type: &'a EntityType,
        shard: ShardId,
        epoch: Epoch,
    ) -> BoxFuture<'a, Result<Vec<EntityId>, StoreError>>;

    /// Applies `update` atomically if its `(epoch, seq)` is not older than the shard's (which
    /// it then becomes); otherwise refuses it with [`StoreError::Fenced`] and changes nothing.
    fn update<'a>(&'a self, update: Update<'a>) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Every shard of `entity_type` the store has an epoch for (every shard ever loaded;
    /// sorted), with it: after a full cluster restart the coordinator starts each of them
    /// somewhere (as Akka's coordinator restarts every shard it had allocated), and allocates
    /// above every epoch.
    ///
    /// First, if the type's ids were last filed under another number of shards (the cluster
    /// restarted with another `number_of_shards`), it *refiles* them atomically: every id
    /// moves to the entry of the shard it maps to among `number_of_shards`
    /// ([`shard_of`](shoal_core::shard_of)), every entry changed gets an epoch above all the
    /// type's, and the count is recorded. Otherwise a shard would load ids that map elsewhere
    /// (never started), and entries beyond a lowered count would never load.
    fn shards<'a>(
        &'a self,
        entity_type: &'a EntityType,
        number_of_shards: u32,
    ) -> BoxFuture<'a, Result<Vec<(ShardId, Epoch)>, StoreError>>;
}

/// The schema both stores use (portable SQL: SQLite 3.24+ and PostgreSQL 9.5+).
pub const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS shoal_remembered_shards (
    entity_type TEXT NOT NULL,
    shard BIGINT NOT NULL,
    epoch BIGINT NOT NULL,
    seq BIGINT NOT NULL DEFAULT 0,
    lease_token BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (entity_type, shard)
);
CREATE TABLE IF NOT EXISTS shoal_remembered_entities (
    entity_type TEXT NOT NULL,
    shard BIGINT NOT NULL,
    entity_id TEXT NOT NULL,
    dormant BOOLEAN NOT NULL DEFAULT FALSE,
    PRIMARY KEY (entity_type, shard, entity_id)
);
CREATE TABLE IF NOT EXISTS shoal_remembered_types (
    entity_type TEXT PRIMARY KEY,
    number_of_shards BIGINT NOT NULL
);
";

/// Columns that tables made by earlier versions lack, as `(table, column, definition)`: the
/// claim table's shard-lease token and the entity table's dormant flag. The stores add them
/// when they open a database (PostgreSQL with `IF NOT EXISTS`, SQLite after looking).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
const ADDED_COLUMNS: [(&str, &str, &str); 2] = [
    (
        "shoal_remembered_shards",
        "lease_token",
        "BIGINT NOT NULL DEFAULT 0",
    ),
    (
        "shoal_remembered_entities",
        "dormant",
        "BOOLEAN NOT NULL DEFAULT FALSE",
    ),
];

/// Carries out one of the core's store requests against `store`, within `timeout`: the
/// completion the core is to be told. A refusal for the epoch is `Fenced`; anything else that
/// went wrong, a timeout or a panic of the store included, is `Failed` with the reason (the
/// core retries it, and treats its outcome as unknown).
pub async fn execute(
    store: &dyn RememberStore,
    request: &StoreRequest,
    timeout: std::time::Duration,
) -> StoreCompletion {
    use futures_util::FutureExt;
    // A store that panics still answers: the shard would otherwise wait for it forever.
    std::panic::AssertUnwindSafe(carry_out(store, request, timeout))
        .catch_unwind()
        .await
        .unwrap_or_else(|_| StoreCompletion::Failed("the remember store panicked".into()))
}

async fn carry_out(
    store: &dyn RememberStore,
    request: &StoreRequest,
    timeout: std::time::Duration,
) -> StoreCompletion {
    let outcome = match request {
        StoreRequest::Shards {
            entity_type,
            number_of_shards,
        } => tokio::time::timeout(timeout, store.shards(entity_type, *number_of_shards))
            .await
            .map(|listed| listed.map(StoreCompletion::Shards)),
        StoreRequest::Load {
            entity_type,
            shard,
            epoch,
        } => tokio::time::timeout(timeout, store.load(entity_type, *shard, *epoch))
            .await
            .map(|loaded| loaded.map(StoreCompletion::Loaded)),
        StoreRequest::Update {
            entity_type,
            shard,
            epoch,
            seq,
            started,
            stopped,
            dormant,
        } => {
            let update = Update {
                entity_type,
                shard: *shard,
                epoch: *epoch,
                seq: *seq,
                started,
                stopped,
                dormant,
            };
            tokio::time::timeout(timeout, store.update(update))
                .await
                .map(|written| written.map(|()| StoreCompletion::Written))
        }
    };
    match outcome {
        Ok(Ok(completion)) => completion,
        Ok(Err(StoreError::Fenced { current, .. })) => StoreCompletion::Fenced(current),
        Ok(Err(error)) => StoreCompletion::Failed(error.to_string()),
        Err(_) => StoreCompletion::Failed(format!("remember store timed out after {timeout:?}")),
    }
}
