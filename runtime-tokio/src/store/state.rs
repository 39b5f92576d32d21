//! Where persistent entities keep their state: the [`StateStore`] trait, what it reads and
//! writes, and the schema both SQL stores share.

use futures_util::future::BoxFuture;
use shoal_core::delivery::{HighWater, Mark, ProducerId};
use shoal_core::lease::FencingToken;
use shoal_core::{EntityId, EntityType, Epoch, FencingClaim, ShardId};

use super::{RememberStore, StoreError};

/// A value as stored: its bytes (postcard) and the version of its type that wrote them, so a
/// later version of the type can still read it (see `EventSourced::upcast_event`).
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Versioned {
    /// The version of the type that encoded `bytes`.
    pub version: u32,
    /// The encoded value.
    pub bytes: Vec<u8>,
}

/// Which entity a request is for, and the incarnation making it: the fencing epoch of its
/// shard's allocation (`EntityContext::epoch`) and the token of its shard's lease, if any.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct StateKey {
    /// The entity's type.
    pub entity_type: EntityType,
    /// The entity.
    pub entity: EntityId,
    /// Its shard, whose newest epoch fences the write.
    pub shard: ShardId,
    /// The writer's epoch.
    pub epoch: Epoch,
    /// The token the writer's shard holds its lease under, for a type with shard leases
    /// (`EntityContext::lease_token`): the store refuses the request once a newer holder of
    /// the lease has read or written, whatever the epochs.
    pub lease_token: Option<FencingToken>,
}

impl StateKey {
    /// What the request claims for the entity's shard: a state request always claims
    /// sequence 0 (its own order is the journal's).
    pub fn claim(&self) -> FencingClaim {
        FencingClaim {
            epoch: self.epoch,
            seq: 0,
            token: self.lease_token,
        }
    }
}

/// What a recovery reads: the latest snapshot (or durable state) and the events after it.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
pub struct Recovered {
    /// The latest snapshot, with the sequence number (event-sourced) or revision (durable
    /// state) it holds the state at.
    pub snapshot: Option<(u64, Versioned)>,
    /// The events after the snapshot, in order, with their sequence numbers.
    pub events: Vec<(u64, Versioned)>,
    /// The newest reliably delivered message applied, per producer: written with the state it
    /// changed, so a redelivered message is recognised after a move or a crash.
    pub delivered: HighWater,
}

impl Recovered {
    /// The sequence number (or revision) of the newest thing read: the next write follows it.
    pub fn last_seq(&self) -> u64 {
        let snapshot = self.snapshot.as_ref().map_or(0, |(seq, _)| *seq);
        self.events.last().map_or(snapshot, |(seq, _)| *seq)
    }
}

/// The reliably delivered message whose command made a write: its producer's mark moves to it
/// in the write's transaction.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct Delivered {
    /// The producer.
    pub producer: ProducerId,
    /// The message's session and sequence number.
    pub mark: Mark,
}

/// One entity's write.
#[derive(Clone, Debug, Eq, PartialEq)]
pub enum StateWrite {
    /// Events appended to the journal, numbered from `first_seq`, which must follow the
    /// entity's newest (no gap, no duplicate); with a snapshot of the state after the last
    /// one, replacing the entity's snapshot, when one is due.
    Events {
        /// The first event's sequence number.
        first_seq: u64,
        /// The events, in order.
        events: Vec<Versioned>,
        /// The state after the last event.
        snapshot: Option<Versioned>,
        /// The delivered message the events are the effect of, if any.
        delivered: Option<Delivered>,
    },
    /// The whole state (durable state) at `revision`, which must follow the stored one.
    State {
        /// The new revision (1 for the first save).
        revision: u64,
        /// The state.
        state: Versioned,
        /// The delivered message the change is the effect of, if any.
        delivered: Option<Delivered>,
    },
}

impl StateWrite {
    /// The delivered message the write is the effect of, if any.
    pub fn delivered(&self) -> Option<&Delivered> {
        match self {
            Self::Events { delivered, .. } | Self::State { delivered, .. } => delivered.as_ref(),
        }
    }
}

/// A store of entity state: an event journal with snapshots, and whole durable states. It is
/// also the node's remember store: the shards' newest epochs, which fence every write, live in
/// one table for remembering and for state, and the coordinator reads them to allocate above.
///
/// Every write is conditional, in the transaction that makes it: its epoch must be at least the
/// newest the store has seen for the entity's shard (it then becomes the newest), or it is
/// refused with [`StoreError::Fenced`]; and its sequence number (revision) must follow the
/// entity's newest, or it is refused with [`StoreError::Conflict`]. Either refusal changes
/// nothing. A recovery claims its epoch the same way: once a newer incarnation has read the
/// state, an older one can no longer write.
pub trait StateStore: RememberStore {
    /// Claims `key.epoch` for the entity's shard and reads the entity's latest snapshot (or
    /// durable state) and the events after it.
    fn recover<'a>(&'a self, key: &'a StateKey) -> BoxFuture<'a, Result<Recovered, StoreError>>;

    /// Every event of `entity` in its journal, in order with their sequence numbers, claiming
    /// nothing: for inspection and tools (a running incarnation goes on writing).
    fn events<'a>(
        &'a self,
        entity_type: &'a EntityType,
        entity: &'a EntityId,
    ) -> BoxFuture<'a, Result<Vec<(u64, Versioned)>, StoreError>>;

    /// Carries out `writes` in one transaction (group commit), each conditional on its own:
    /// one outcome per write, in order. An `Err` for the whole call means none is known to
    /// have been made.
    fn write<'a>(
        &'a self,
        writes: &'a [(StateKey, StateWrite)],
    ) -> BoxFuture<'a, Result<Vec<Result<(), StoreError>>, StoreError>>;

    /// Deletes everything stored for `entity_type`: its journal, snapshots, durable states,
    /// delivery marks, remembered entities and shard epochs. How many rows went.
    fn delete_type<'a>(
        &'a self,
        entity_type: &'a EntityType,
    ) -> BoxFuture<'a, Result<u64, StoreError>>;
}

/// The state tables, beside the remember store's [`super::SCHEMA`] (portable SQL:
/// SQLite reads `BYTEA` as a column that keeps blobs as they are).
pub const STATE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS shoal_journal (
    entity_type TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    version BIGINT NOT NULL,
    payload BYTEA NOT NULL,
    epoch BIGINT NOT NULL,
    PRIMARY KEY (entity_type, entity_id, seq)
);
CREATE TABLE IF NOT EXISTS shoal_snapshots (
    entity_type TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    version BIGINT NOT NULL,
    payload BYTEA NOT NULL,
    epoch BIGINT NOT NULL,
    PRIMARY KEY (entity_type, entity_id)
);
CREATE TABLE IF NOT EXISTS shoal_delivered (
    entity_type TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    producer TEXT NOT NULL,
    session BIGINT NOT NULL,
    seq BIGINT NOT NULL,
    PRIMARY KEY (entity_type, entity_id, producer)
);
";
