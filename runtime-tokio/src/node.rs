//! [`Node`]: the cheap-clone handle of a running node. It holds channel ends only; the
//! protocol state lives in the host task.

use std::any::TypeId;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use shoal_core::{Address, Command, EntityType, MemberId, Reply};
use tokio::sync::{broadcast, oneshot};

use crate::entity::Entity;
use crate::error::{QueryError, RegionError};
use crate::event::NodeEvent;
use crate::host::command::{HostCommand, HostHandle, NodeStats};
use crate::region::Region;

/// The Rust type registered for an entity type name.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RegisteredType {
    pub(crate) rust_type: TypeId,
    pub(crate) name: &'static str,
}

struct Inner {
    me: MemberId,
    address: Address,
    host: HostHandle,
    events: broadcast::Sender<NodeEvent>,
    types: HashMap<EntityType, RegisteredType>,
}

/// A running node (cheap to clone).
#[derive(Clone)]
pub struct Node {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("member", &self.inner.me)
            .field("address", &self.inner.address)
            .finish_non_exhaustive()
    }
}

impl Node {
    pub(crate) fn new(
        me: MemberId,
        address: Address,
        host: HostHandle,
        events: broadcast::Sender<NodeEvent>,
        types: HashMap<EntityType, RegisteredType>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                me,
                address,
                host,
                events,
                types,
            }),
        }
    }

    /// This member (node id and incarnation).
    pub fn member(&self) -> MemberId {
        self.inner.me
    }

    /// The address others reach this node at.
    pub fn address(&self) -> &Address {
        &self.inner.address
    }

    /// The region of entity type `name`, registered with the builder as `E`.
    pub fn region<E: Entity>(&self, name: &str) -> Result<Region<E>, RegionError> {
        // The registered name itself, not a copy: the core compares names by pointer first,
        // so every message of this handle finds its type without comparing strings.
        let (entity_type, registered) = self
            .inner
            .types
            .get_key_value(&EntityType::new(name))
            .ok_or_else(|| RegionError::NotRegistered(name.into()))?;
        if registered.rust_type != TypeId::of::<E>() {
            tracing::warn!(
                name,
                registered = registered.name,
                "region asked with another type"
            );
            return Err(RegionError::WrongType(name.into()));
        }
        Ok(Region {
            entity_type: entity_type.clone(),
            host: self.inner.host.clone(),
            entity: PhantomData,
        })
    }

    /// Cluster and sharding events from now on. A receiver that falls behind by more than
    /// the buffer (1024 events) skips the oldest and is told how many it missed.
    pub fn events(&self) -> broadcast::Receiver<NodeEvent> {
        self.inner.events.subscribe()
    }

    /// Leaves the cluster gracefully: every shard is handed off, then the member is removed
    /// and the node stops. Returns once it has.
    pub async fn leave(&self) {
        let (done, left) = oneshot::channel();
        if self
            .inner
            .host
            .send(HostCommand::Leave { done })
            .await
            .is_ok()
        {
            let _ = left.await;
        }
    }

    /// Stops the node at once, as a crash would: no handoff; the others detect the failure
    /// and move its shards. For tests and for processes that cannot wait.
    pub async fn abort(&self) {
        let _ = self.inner.host.send(HostCommand::Abort).await;
        self.inner.host.closed().await;
    }

    /// Whether the node has stopped.
    pub fn is_stopped(&self) -> bool {
        self.inner.host.is_closed()
    }

    /// The node's counters (transport, core, entities).
    pub async fn stats(&self) -> Result<NodeStats, QueryError> {
        self.ask_host(|answer| HostCommand::Stats { answer }).await
    }

    /// The cluster's members as this node sees them: status, reachability, roles, and the
    /// entity types each hosts.
    pub async fn view(&self) -> Result<shoal_core::MembershipView, QueryError> {
        self.ask_host(|answer| HostCommand::View { answer }).await
    }

    /// Whether this member is ready for traffic, as Akka Management's sharding health check
    /// says: Up and not leaving, every entity type's region (or proxy) registered with the
    /// type's coordinator, and every coordinator allocating shards (its allocation gate open;
    /// the coordinators on other members are asked, each within the query timeout, and one
    /// that does not answer is left unknown, not held against the member).
    /// [`Readiness::waiting_for`](shoal_core::Readiness::waiting_for) says what it waits for.
    /// Changes of what the member knows itself arrive as `Event::ReadinessChanged`.
    pub async fn readiness(&self) -> Result<shoal_core::Readiness, QueryError> {
        let mut readiness = self
            .ask_host(|answer| HostCommand::Readiness { answer })
            .await?;
        for t in &mut readiness.types {
            if t.allocating.is_none() && t.registered {
                let entity_type = t.entity_type.clone();
                let command = Command::GetCoordinatorState { entity_type };
                if let Ok(Reply::CoordinatorState(state)) = self.command(command).await {
                    t.allocating = Some(state.gate.open);
                }
            }
        }
        Ok(readiness)
    }

    /// Whether the node's host loop turns: it answers within `within` (a liveness probe; a
    /// stopped node is not alive).
    pub async fn is_alive(&self, within: Duration) -> bool {
        let ping = self.ask_host(|answer| HostCommand::Ping { answer });
        matches!(tokio::time::timeout(within, ping).await, Ok(Ok(())))
    }

    /// Sends the host the command `make` builds around an answer channel, and waits for it.
    async fn ask_host<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> HostCommand,
    ) -> Result<T, QueryError> {
        let (answer, answered) = oneshot::channel();
        self.inner
            .host
            .send(make(answer))
            .await
            .map_err(|_| QueryError::ShuttingDown)?;
        answered.await.map_err(|_| QueryError::ShuttingDown)
    }

    /// Marks `member` Down (an operator's decision, Akka's `Cluster.down`).
    pub async fn down(&self, member: MemberId) -> Result<(), QueryError> {
        self.command(Command::Down { member }).await.map(drop)
    }

    /// Makes `member` leave gracefully (Akka's `Cluster.leave(address)`).
    pub async fn leave_member(&self, member: MemberId) -> Result<(), QueryError> {
        self.command(Command::LeaveMember { member })
            .await
            .map(drop)
    }

    /// Sends a core command and waits for its reply.
    pub(crate) async fn command(&self, command: Command) -> Result<Reply, QueryError> {
        self.inner.host.command(command).await
    }
}

/// Leaves gracefully on SIGTERM or ctrl-c.
pub(crate) async fn leave_on_signal(node: Node) {
    #[cfg(unix)]
    {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            tracing::warn!("cannot listen for SIGTERM");
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    tracing::info!("signal received: leaving the cluster");
    node.leave().await;
}
