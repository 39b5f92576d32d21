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
//! producer id. A producer started again with the same id starts a new *session* (numbered
//! from 1); what the old one had not had confirmed is lost with it (its `send`s did not
//! complete), and the entities drop whatever of the old session still arrives.
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
use crate::{Entity, Region};

/// Why a reliable send did not complete.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The message did not encode.
    #[error("the message did not encode: {0}")]
    Codec(String),
    /// The producer stopped (its node is shutting down) before the entity confirmed the
    /// message: it may or may not have been applied.
    #[error("the producer stopped before the message was confirmed")]
    Stopped,
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
}

/// A request of a handle to its producer's task.
struct Send {
    entity: EntityId,
    message: Vec<u8>,
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
    /// `settings`.
    pub async fn reliable_producer(
        &self,
        id: impl Into<Arc<str>>,
        settings: ProducerSettings,
    ) -> Result<ReliableProducer<E>, ProducerError> {
        let id = ProducerId::new(id);
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
        let (sends, requests) = mpsc::channel(1024);
        let producer = task::ProducerTask::new(
            (id.clone(), me),
            self.entity_type.clone(),
            self.host.clone(),
            settings,
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
        let send = Send {
            entity: id.into(),
            message,
            done,
        };
        self.sends
            .send(send)
            .await
            .map_err(|_| SendError::Stopped)?;
        confirmed.await.map_err(|_| SendError::Stopped)?
    }
}
