//! Reliable delivery to sharded entities: a [`ReliableProducer`] numbers what it sends each
//! entity, resends what the entity has not confirmed (after a timeout: the message or its
//! confirmation was lost, the entity's shard moved, its node crashed), and completes each
//! [`ReliableProducer::send`] once the entity confirms it applied the message. The entity side
//! needs no code: every entity drops a duplicate by its sequence number and confirms.
//!
//! How often a message takes effect depends on the entity's kind:
//!
//! - **Persistent entities** ([`crate::EventSourced`], [`crate::DurableState`]): *effectively
//!   once*. The entity writes its mark of the message (producer, session, sequence number)
//!   in the same conditional write as the state the message changed, and reads its marks back
//!   on recovery, so a message redelivered after a crash or a handoff is recognised.
//! - **Plain entities**: *at least once*. Their marks live in memory; a message whose
//!   confirmation was lost and that reaches the entity's next incarnation (after a move or a
//!   crash) is applied again.
//!
//! A producer's id must be stable and unique in the cluster: entities keep one mark per
//! producer id. Without a durable queue ([`Region::reliable_producer`]) a producer started
//! again with the same id starts a new *session* (numbered from 1): what the old one had not
//! had confirmed is lost with it (its `send`s did not complete), and the entities drop
//! whatever of the old session still arrives. With one ([`Region::durable_producer`]) each
//! message is kept in the store before its `send` is accepted, until it is confirmed: a
//! producer started again with the same id (after its process crashed) resumes the same
//! session and sends again what was not confirmed, so a crash loses nothing a `send` accepted.
//!
//! The pure machines deciding windows, resends and duplicates are
//! `shoal_core::delivery`'s, which the simulator checks through every fault it injects.

mod task;

use std::marker::PhantomData;
use std::sync::Arc;

use shoal_core::EntityId;
pub use shoal_core::delivery::{ProducerId, ProducerSettings};
use tokio::sync::{mpsc, oneshot};

use crate::host::command::HostCommand;
pub use crate::host::delivery::ProducerTaken;
pub use crate::store::ProducerQueue;
use crate::{Entity, Region};

/// Why a reliable send did not complete.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The message did not encode.
    #[error("the message did not encode: {0}")]
    Codec(String),
    /// The producer stopped (its node is shutting down or crashed) before the entity
    /// confirmed the message. `kept`: it had been handed over (a durable producer had kept
    /// it in its queue, and one started again with the same id sends it again; an in-memory
    /// one may or may not have had it applied). Not kept: it was never sent.
    #[error("the producer stopped before the message was confirmed (handed over: {kept})")]
    Stopped {
        /// Whether the message had been handed over.
        kept: bool,
    },
    /// The durable queue could not keep the message: it was not sent.
    #[error("the durable queue could not keep the message: {0}")]
    Queue(String),
}

/// Why a reliable producer did not start.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerError {
    /// A producer with this id runs on this node already.
    #[error(transparent)]
    Taken(#[from] ProducerTaken),
    /// The node is shutting down.
    #[error("the node is shutting down")]
    ShuttingDown,
    /// The durable queue could not be read.
    #[error("the durable queue could not be read: {0}")]
    Queue(String),
}

/// A request of a handle to its producer's task.
struct Send {
    entity: EntityId,
    message: Vec<u8>,
    /// Answered once the message is handed over (kept in the durable queue, if any).
    accepted: oneshot::Sender<()>,
    done: oneshot::Sender<Result<(), SendError>>,
}

/// Sends messages to entities of type `E` reliably; cheap to clone (the clones share the
/// producer). Its task runs until every handle is dropped and every message sent has been
/// confirmed, or the node stops.
pub struct ReliableProducer<E> {
    id: ProducerId,
    sends: mpsc::Sender<Send>,
    entity: PhantomData<fn() -> E>,
}

impl<E> Clone for ReliableProducer<E> {
    fn clone(&self) -> Self {
        Self {
            id: self.id.clone(),
            sends: self.sends.clone(),
            entity: PhantomData,
        }
    }
}

impl<E: Entity> Region<E> {
    /// Starts reliable producer `id` on this node, sending to this type's entities, paced by
    /// `settings`; its unconfirmed messages live in memory only.
    pub async fn reliable_producer(
        &self,
        id: impl Into<Arc<str>>,
        settings: ProducerSettings,
    ) -> Result<ReliableProducer<E>, ProducerError> {
        self.start_producer(ProducerId::new(id), settings, None)
            .await
    }

    /// Starts reliable producer `id` with a durable queue in `queue` (a state store: SQLite's
    /// or PostgreSQL's): it resumes what a producer of this id left unconfirmed there, and
    /// keeps every message there from its send until it is confirmed.
    pub async fn durable_producer(
        &self,
        id: impl Into<Arc<str>>,
        settings: ProducerSettings,
        queue: Arc<dyn ProducerQueue>,
    ) -> Result<ReliableProducer<E>, ProducerError> {
        self.start_producer(ProducerId::new(id), settings, Some(queue))
            .await
    }

    async fn start_producer(
        &self,
        id: ProducerId,
        settings: ProducerSettings,
        queue: Option<Arc<dyn ProducerQueue>>,
    ) -> Result<ReliableProducer<E>, ProducerError> {
        let (confirms, confirmed) = mpsc::unbounded_channel();
        let (answer, registered) = oneshot::channel();
        let register = HostCommand::RegisterProducer {
            producer: id.clone(),
            confirms,
            answer,
        };
        (self.host.send(register).await).map_err(|_| ProducerError::ShuttingDown)?;
        let me = registered
            .await
            .map_err(|_| ProducerError::ShuttingDown)??;
        let resumed = match &queue {
            Some(queue) => Some(
                (queue.open(id.0.as_ref(), task::new_session()).await)
                    .map_err(|e| ProducerError::Queue(e.to_string()))?,
            ),
            None => None,
        };
        let (sends, requests) = mpsc::channel(1024);
        let producer = task::ProducerTask::new(
            (id.clone(), me),
            (self.entity_type.clone(), self.host.clone()),
            settings,
            (queue, resumed),
        );
        tokio::spawn(producer.run(requests, confirmed));
        Ok(ReliableProducer {
            id,
            sends,
            entity: PhantomData,
        })
    }
}

impl<E: Entity> ReliableProducer<E> {
    /// The producer's id.
    pub fn id(&self) -> &ProducerId {
        &self.id
    }

    /// Sends `message` to entity `id` and returns once the entity confirms it applied it
    /// (for a persistent entity: once its effect is durable). Messages to one entity are
    /// applied in the order their sends were called. Waits while the producer holds as many
    /// unconfirmed messages for the entity as its settings allow (backpressure).
    pub async fn send(
        &self,
        id: impl Into<EntityId>,
        message: &E::Message,
    ) -> Result<(), SendError> {
        let message =
            postcard::to_allocvec(message).map_err(|e| SendError::Codec(e.to_string()))?;
        let (done, confirmed) = oneshot::channel();
        let (accepted, handed_over) = oneshot::channel();
        let send = Send {
            entity: id.into(),
            message,
            accepted,
            done,
        };
        let not_kept = SendError::Stopped { kept: false };
        self.sends.send(send).await.map_err(|_| not_kept)?;
        // A send that failed before it was handed over is answered without being accepted.
        let kept = handed_over.await.is_ok();
        confirmed.await.map_err(|_| SendError::Stopped { kept })?
    }
}
