//! What handles ([`crate::Node`], [`crate::Region`], [`crate::EntityRef`]) ask of the host task.

use std::sync::Arc;
use std::time::Duration;

use shoal_core::{Command, Metrics, Payload, Reply, RouteCounts};
use tokio::sync::{mpsc, oneshot};

use crate::entity::letter::Letter;
use crate::entity::route::{Queued, Routes, Turn};
use crate::error::{AskError, QueryError, TellError};
use crate::transport::TransportStats;

/// The handles' one way into the host task: its command queue, with the requests they make,
/// and the node's direct routes, which bypass it. [`crate::Node`], [`crate::Region`] and
/// [`crate::EntityRef`] each hold a clone.
#[derive(Clone)]
pub(crate) struct HostHandle {
    commands: mpsc::Sender<HostCommand>,
    routes: Arc<Routes>,
}

impl HostHandle {
    pub(crate) fn new(commands: mpsc::Sender<HostCommand>, routes: Arc<Routes>) -> Self {
        Self { commands, routes }
    }

    /// The node's direct routes.
    pub(crate) fn routes(&self) -> &Arc<Routes> {
        &self.routes
    }

    /// Sends a core command and waits for the core's reply.
    pub(crate) async fn command(&self, command: Command) -> Result<Reply, QueryError> {
        let (answer, reply) = oneshot::channel();
        self.send(HostCommand::Command { command, answer })
            .await
            .map_err(|_| QueryError::ShuttingDown)?;
        reply.await.map_err(|_| QueryError::ShuttingDown)?
    }

    /// Sends an encoded message to an entity through the node, fire and forget, `queued` on
    /// the entity's route, whose `turn` is let go once it is in the host's queue. The letter
    /// is built here, on the sender's task, so the host (one task for the whole node) does
    /// not.
    pub(crate) async fn tell(
        &self,
        (queued, turn): (Queued, Turn),
        message: Vec<u8>,
    ) -> Result<(), TellError> {
        let payload = Letter {
            ask: None,
            message,
            delivery: None,
        }
        .to_payload();
        let sent = self.send(HostCommand::Tell { queued, payload }).await;
        drop(turn);
        sent.map_err(|_| TellError::ShuttingDown)
    }

    /// Sends an encoded message to an entity through the node (`queued` on its route, whose
    /// `turn` is let go once it is in the host's queue) and waits up to `timeout` for its
    /// encoded reply. The host builds the letter: its ask reference is the host's request id.
    pub(crate) async fn ask(
        &self,
        (queued, turn): (Queued, Turn),
        message: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, AskError> {
        let (answer, reply) = oneshot::channel();
        let sent = self
            .send(HostCommand::Ask {
                queued,
                message,
                timeout,
                answer,
            })
            .await;
        drop(turn);
        sent.map_err(|_| AskError::ShuttingDown)?;
        reply.await.map_err(|_| AskError::ShuttingDown)?
    }

    /// Queues a command, waiting while the queue is full; fails once the host has stopped.
    pub(crate) async fn send(&self, command: HostCommand) -> Result<(), HostStopped> {
        self.commands.send(command).await.map_err(|_| HostStopped)
    }

    /// Returns once the host task has stopped.
    pub(crate) async fn closed(&self) {
        self.commands.closed().await;
    }

    /// Whether the host task has stopped.
    pub(crate) fn is_closed(&self) -> bool {
        self.commands.is_closed()
    }
}

/// The host task has stopped: nothing more can be asked of it.
#[derive(Debug)]
pub(crate) struct HostStopped;

/// A request to the host task.
pub(crate) enum HostCommand {
    /// Send a message to an entity, already a letter's payload: the sender encodes it, so
    /// the host (one task for the whole node) does not. Queued on the entity's route.
    Tell { queued: Queued, payload: Payload },
    /// Send a message to an entity and wait for its reply (queued on its route).
    Ask {
        queued: Queued,
        message: Vec<u8>,
        timeout: Duration,
        answer: oneshot::Sender<Result<Vec<u8>, AskError>>,
    },
    /// A core command or query.
    Command {
        command: Command,
        answer: oneshot::Sender<Result<Reply, QueryError>>,
    },
    /// Register a reliable producer: answered with this member, or refused if the id is
    /// taken on this node.
    RegisterProducer {
        producer: shoal_core::delivery::ProducerId,
        confirms: super::delivery::Confirms,
        answer: oneshot::Sender<Result<shoal_core::MemberId, super::delivery::ProducerTaken>>,
    },
    /// Leave the cluster gracefully; answered once this member is out.
    Leave { done: oneshot::Sender<()> },
    /// Stop at once, as a crash would (no handoff; peers detect the failure).
    Abort,
    /// Counters of the node.
    Stats { answer: oneshot::Sender<NodeStats> },
    /// The membership as the node sees it.
    View {
        answer: oneshot::Sender<shoal_core::MembershipView>,
    },
    /// The member's readiness as the core knows it.
    Readiness {
        answer: oneshot::Sender<shoal_core::Readiness>,
    },
    /// Answered at once: the host loop turns.
    Ping { answer: oneshot::Sender<()> },
    /// DNS lists these contacts (`ip:port`); answered with whether more are wanted (the
    /// node still joins).
    #[cfg_attr(not(feature = "dns"), allow(dead_code))]
    Discovered {
        contacts: Vec<String>,
        answer: oneshot::Sender<bool>,
    },
}

/// Counters of one node ([`crate::Node::stats`]).
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct NodeStats {
    /// The transport's counters.
    pub transport: TransportStats,
    /// The core's counters.
    pub core: Metrics,
    /// How this node's regions routed messages (delivered here, forwarded, buffered).
    pub routes: RouteCounts,
    /// Entities running.
    pub entities: usize,
    /// Asks waiting for a reply (those sent on direct routes wait on their own).
    pub pending_asks: usize,
    /// Messages handles handed straight to running entities (the local fast path).
    pub direct_deliveries: u64,
    /// Replies that arrived after their ask had timed out.
    pub late_replies: u64,
}
