//! A reliable producer's durable queue: what it numbered for each entity and the messages not
//! yet confirmed, kept in a store so that a producer started again with the same id (after its
//! process crashed) resumes its session and resends them.

use futures_util::future::BoxFuture;
use shoal_core::EntityId;

use super::StoreError;

/// One entity's part of a producer's queue.
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct QueuedStream {
    /// The entity.
    pub entity: EntityId,
    /// The newest sequence number numbered for it (0: none).
    pub numbered: u64,
    /// The messages not yet confirmed, in order: the last ones numbered.
    pub unconfirmed: Vec<Vec<u8>>,
}

/// What a producer's queue held when it was opened.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
pub struct QueueState {
    /// The producer's session: the one it had, or the one given to open it.
    pub session: u64,
    /// Each entity's sequence, in entity order.
    pub streams: Vec<QueuedStream>,
}

/// A store of reliable producers' queues (object-safe: a producer holds an
/// `Arc<dyn ProducerQueue>`). Producer ids are unique in the cluster, and one producer runs at
/// a time for an id.
pub trait ProducerQueue: Send + Sync + 'static {
    /// Opens `producer`'s queue: what it holds, with its session (`session` is stored and
    /// given back if the producer had none).
    fn open<'a>(
        &'a self,
        producer: &'a str,
        session: u64,
    ) -> BoxFuture<'a, Result<QueueState, StoreError>>;

    /// Keeps `messages` (entity, sequence number, message), in one transaction: each follows
    /// what its entity's stream numbered before.
    fn push<'a>(
        &'a self,
        producer: &'a str,
        messages: &'a [(EntityId, u64, Vec<u8>)],
    ) -> BoxFuture<'a, Result<(), StoreError>>;

    /// Drops what each entity confirmed, `(entity, up to)`, in one transaction.
    fn confirm<'a>(
        &'a self,
        producer: &'a str,
        confirmed: &'a [(EntityId, u64)],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
}

/// The queue's tables, beside the state store's (portable SQL).
pub const QUEUE_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS shoal_producers (
    producer TEXT PRIMARY KEY,
    session BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS shoal_producer_streams (
    producer TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    numbered BIGINT NOT NULL,
    PRIMARY KEY (producer, entity_id)
);
CREATE TABLE IF NOT EXISTS shoal_producer_queue (
    producer TEXT NOT NULL,
    entity_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    payload BYTEA NOT NULL,
    PRIMARY KEY (producer, entity_id, seq)
);
";

/// The statements both SQL stores run (PostgreSQL's `$n`; SQLite's store rewrites them).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(super) mod statements {
    /// Stores the producer's session unless it has one. `$1` producer, `$2` session.
    pub(crate) const CLAIM_SESSION: &str = "INSERT INTO shoal_producers (producer, session)
VALUES ($1, $2) ON CONFLICT (producer) DO NOTHING";

    /// The producer's session. `$1` producer.
    pub(crate) const SESSION: &str = "SELECT session FROM shoal_producers WHERE producer = $1";

    /// Each stream's newest number. `$1` producer.
    pub(crate) const STREAMS: &str = "SELECT entity_id, numbered FROM shoal_producer_streams
WHERE producer = $1 ORDER BY entity_id";

    /// Every unconfirmed message. `$1` producer.
    pub(crate) const QUEUED: &str = "SELECT entity_id, seq, payload FROM shoal_producer_queue
WHERE producer = $1 ORDER BY entity_id, seq";

    /// Keeps a message: `$1` producer, `$2` entity, `$3` seq, `$4` payload.
    pub(crate) const PUSH: &str = "INSERT INTO shoal_producer_queue
(producer, entity_id, seq, payload) VALUES ($1, $2, $3, $4)";

    /// Moves a stream's newest number: `$1` producer, `$2` entity, `$3` seq.
    pub(crate) const NUMBERED: &str = "INSERT INTO shoal_producer_streams
(producer, entity_id, numbered) VALUES ($1, $2, $3)
ON CONFLICT (producer, entity_id) DO UPDATE SET numbered = excluded.numbered";

    /// Drops what an entity confirmed: `$1` producer, `$2` entity, `$3` up to.
    pub(crate) const CONFIRM: &str = "DELETE FROM shoal_producer_queue
WHERE producer = $1 AND entity_id = $2 AND seq <= $3";
}

/// Builds the queue's state from its rows: streams `(entity, numbered)` and queued messages
/// `(entity, seq, payload)`, both in entity order (messages in sequence order).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(super) fn state_of(
    session: u64,
    streams: Vec<(String, u64)>,
    queued: Vec<(String, u64, Vec<u8>)>,
) -> QueueState {
    let mut streams: Vec<QueuedStream> = streams
        .into_iter()
        .map(|(entity, numbered)| QueuedStream {
            entity: EntityId::new(entity),
            numbered,
            unconfirmed: Vec::new(),
        })
        .collect();
    let index: std::collections::HashMap<String, usize> = (streams.iter().enumerate())
        .map(|(i, s)| (s.entity.as_str().to_owned(), i))
        .collect();
    for (entity, _, payload) in queued {
        if let Some(&i) = index.get(&entity) {
            streams[i].unconfirmed.push(payload);
        }
    }
    QueueState { session, streams }
}
