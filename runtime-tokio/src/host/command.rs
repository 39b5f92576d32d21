//! What handles ([`crate::Node`], [`crate::Region`], [`crate::EntityRef`]) ask of the host task.

use std::time::Duration;

use shoal_core::{Command, EntityId, EntityType, Metrics, Payload, Reply, RouteCounts};
use tokio::sync::oneshot;

use crate::error::{AskError, QueryError};
use crate::transport::TransportStats;

/// A request to the host task.
pub(crate) enum HostCommand {
    /// Send a message to an entity, already a letter's payload: the sender encodes it, so
    /// the host (one task for the whole node) does not.
    Tell {
        entity_type: EntityType,
        entity: EntityId,
        payload: Payload,
    },
    /// Send a message to an entity and wait for its reply.
    Ask {
        entity_type: EntityType,
        entity: EntityId,
        message: Vec<u8>,
        timeout: Duration,
        answer: oneshot::Sender<Result<Vec<u8>, AskError>>,
    },
    /// A core command or query.
    Command {
        command: Command,
        answer: oneshot::Sender<Result<Reply, QueryError>>,
    },
    /// Leave the cluster gracefully; answered once this member is out.
    Leave { done: oneshot::Sender<()> },
    /// Stop at once, as a crash would (no handoff; peers detect the failure).
    Abort,
    /// Counters of the node.
    Stats { answer: oneshot::Sender<NodeStats> },
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
    /// Entity tasks running.
    pub entities: usize,
    /// Asks waiting for a reply.
    pub pending_asks: usize,
    /// Replies that arrived after their ask had timed out.
    pub late_replies: u64,
}
