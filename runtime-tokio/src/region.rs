//! Typed access to one entity type: [`Region`] (queries about the type) and [`EntityRef`]
//! (`tell` and `ask` to one entity).

use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use shoal_core::explain::Explanation;
use shoal_core::{
    Command, CoordinatorState, EntityId, EntityType, MemberId, RegionStats, Reply, ShardId,
};

use crate::entity::Entity;
use crate::entity::mailbox::DirectMail;
use crate::entity::route::Route;
use crate::error::{AskError, QueryError, TellError};
use crate::host::command::HostHandle;
use crate::metric_names;
use tokio::sync::oneshot;

/// The entities of one type, wherever they run.
pub struct Region<E> {
    pub(crate) entity_type: EntityType,
    pub(crate) host: HostHandle,
    pub(crate) entity: PhantomData<fn() -> E>,
}

impl<E> Clone for Region<E> {
    fn clone(&self) -> Self {
        Self {
            entity_type: self.entity_type.clone(),
            host: self.host.clone(),
            entity: PhantomData,
        }
    }
}

/// Where an entity lives ([`Region::location`]).
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct EntityLocation {
    /// Its shard.
    pub shard: ShardId,
    /// The member hosting the shard, if allocated.
    pub region: Option<MemberId>,
    /// Whether the entity is running there.
    pub alive: bool,
}

/// Entity counts per shard of each region ([`Region::stats`]).
#[derive(Clone, Debug, Eq, PartialEq)]
pub struct ClusterStats {
    /// Regions that answered.
    pub regions: Vec<RegionStats>,
    /// Regions that did not answer in time.
    pub failed: Vec<MemberId>,
}

impl<E: Entity> Region<E> {
    /// The type's name.
    pub fn entity_type(&self) -> &EntityType {
        &self.entity_type
    }

    /// A reference to entity `id` (it starts on its first message).
    pub fn entity_ref(&self, id: impl Into<EntityId>) -> EntityRef<E> {
        EntityRef {
            region: self.clone(),
            entity: id.into(),
            route: OnceLock::new(),
        }
    }

    /// Starts entity `id` without a message (Akka's `StartEntity`); returns where it runs.
    pub async fn start_entity(&self, id: impl Into<EntityId>) -> Result<MemberId, QueryError> {
        let command = Command::StartEntity {
            entity_type: self.entity_type.clone(),
            entity: id.into(),
        };
        match self.command(command).await? {
            Reply::EntityStarted { region, .. } => Ok(region),
            other => unexpected(other),
        }
    }

    /// Changes the type's active-entity limit in this node's region (Akka's
    /// `SetActiveEntityLimit`): its shards passivate what no longer fits their new share.
    /// Refused for a type configured without a limit, or for zero.
    pub async fn set_active_entity_limit(&self, limit: usize) -> Result<(), QueryError> {
        let command = Command::SetActiveEntityLimit {
            entity_type: self.entity_type.clone(),
            limit,
        };
        match self.command(command).await? {
            Reply::Accepted => Ok(()),
            other => unexpected(other),
        }
    }

    /// This node's shards of the type and their running entities.
    pub async fn local_state(&self) -> Result<Vec<(ShardId, Vec<EntityId>)>, QueryError> {
        let command = Command::GetShardRegionState {
            entity_type: self.entity_type.clone(),
        };
        match self.command(command).await? {
            Reply::ShardRegionState { shards } => Ok(shards),
            other => unexpected(other),
        }
    }

    /// Where entity `id` lives and whether it runs.
    pub async fn location(&self, id: impl Into<EntityId>) -> Result<EntityLocation, QueryError> {
        let command = Command::GetEntityLocation {
            entity_type: self.entity_type.clone(),
            entity: id.into(),
        };
        match self.command(command).await? {
            Reply::EntityLocation {
                shard,
                region,
                alive,
                ..
            } => Ok(EntityLocation {
                shard,
                region,
                alive,
            }),
            other => unexpected(other),
        }
    }

    /// Why entity `id`'s shard lives where it does and what became of its letters: the
    /// recent decisions of the type's coordinator (allocations, rebalance moves, gate waits)
    /// and of this node's region (dead letters), oldest first.
    pub async fn explain(&self, id: impl Into<EntityId>) -> Result<Explanation, QueryError> {
        let command = Command::Explain {
            entity_type: self.entity_type.clone(),
            entity: id.into(),
        };
        match self.command(command).await? {
            Reply::Explanation(explanation) => Ok(*explanation),
            other => unexpected(other),
        }
    }

    /// The regions registered with the type's coordinator.
    pub async fn current_regions(&self) -> Result<Vec<MemberId>, QueryError> {
        let command = Command::GetCurrentRegions {
            entity_type: self.entity_type.clone(),
        };
        match self.command(command).await? {
            Reply::CurrentRegions { regions } => Ok(regions),
            other => unexpected(other),
        }
    }

    /// Entity counts per shard of every region, gathered by the coordinator.
    pub async fn stats(&self) -> Result<ClusterStats, QueryError> {
        let command = Command::GetClusterShardingStats {
            entity_type: self.entity_type.clone(),
        };
        match self.command(command).await? {
            Reply::ClusterShardingStats { regions, failed } => Ok(ClusterStats { regions, failed }),
            other => unexpected(other),
        }
    }

    /// The type's coordinator's state (its allocation gate and allocations).
    pub async fn coordinator_state(&self) -> Result<CoordinatorState, QueryError> {
        let command = Command::GetCoordinatorState {
            entity_type: self.entity_type.clone(),
        };
        match self.command(command).await? {
            Reply::CoordinatorState(state) => Ok(*state),
            other => unexpected(other),
        }
    }

    async fn command(&self, command: Command) -> Result<Reply, QueryError> {
        self.host.command(command).await
    }
}

fn unexpected<T>(reply: Reply) -> Result<T, QueryError> {
    tracing::error!(?reply, "a query answered with another kind of reply");
    Err(QueryError::Unexpected)
}

/// One entity of type `E`.
///
/// A message goes straight into the entity's mailbox when it runs on this node and the node
/// has handed it one of this node's messages before (the local fast path), and through the
/// node otherwise; either way, messages from this node to the entity arrive in the order
/// they were sent, across moves, passivations and restarts.
pub struct EntityRef<E> {
    region: Region<E>,
    entity: EntityId,
    /// The entity's route on this node, looked up by the first message.
    route: OnceLock<Arc<Route>>,
}

impl<E> Clone for EntityRef<E> {
    fn clone(&self) -> Self {
        Self {
            region: self.region.clone(),
            entity: self.entity.clone(),
            route: self.route.clone(),
        }
    }
}

impl<E: Entity> EntityRef<E> {
    /// The entity's id.
    pub fn id(&self) -> &EntityId {
        &self.entity
    }

    fn route(&self) -> &Arc<Route> {
        self.route.get_or_init(|| {
            let region = &self.region;
            region
                .host
                .routes()
                .route(&region.entity_type, &self.entity)
        })
    }

    /// Sends `message` (fire and forget; a message that cannot be delivered becomes a
    /// dead-letter event). Waits only while the node's command queue is full.
    pub async fn tell(&self, message: &E::Message) -> Result<(), TellError> {
        let message =
            postcard::to_allocvec(message).map_err(|e| TellError::Codec(e.to_string()))?;
        let (route, host) = (self.route(), &self.region.host);
        let mail = DirectMail {
            message,
            answer: None,
        };
        match route.send(mail, host.routes()).await {
            Ok(()) => Ok(()),
            Err((mail, queued, turn)) => host.tell((queued, turn), mail.message).await,
        }
    }

    /// Sends `message` and waits up to `timeout` for the entity's reply.
    pub async fn ask(&self, message: &E::Message, timeout: Duration) -> Result<E::Reply, AskError> {
        let message = postcard::to_allocvec(message).map_err(|e| AskError::Codec(e.to_string()))?;
        let (route, host) = (self.route(), &self.region.host);
        let (answer, reply) = oneshot::channel();
        let mail = DirectMail {
            message,
            answer: Some(answer),
        };
        let started = std::time::Instant::now();
        let (answered, path) = match route.send(mail, host.routes()).await {
            Ok(()) => (self.direct_reply(reply, timeout).await, "direct"),
            Err((mail, queued, turn)) => {
                let answered = host.ask((queued, turn), mail.message, timeout).await;
                (answered, "node")
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        metrics::histogram!(metric_names::ASK_SECONDS, "path" => path).record(seconds);
        let bytes = answered?;
        postcard::from_bytes(&bytes).map_err(|e| AskError::Codec(e.to_string()))
    }

    /// The reply to an ask sent on the direct route, within `timeout`.
    async fn direct_reply(
        &self,
        reply: oneshot::Receiver<Result<Vec<u8>, AskError>>,
        timeout: Duration,
    ) -> Result<Vec<u8>, AskError> {
        let deadline = tokio::time::Instant::now() + timeout;
        match tokio::time::timeout_at(deadline, reply).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) if self.region.host.is_closed() => Err(AskError::ShuttingDown),
            Ok(Err(_)) => {
                // The incarnation ended with the message unhandled (a forced stop): the asker
                // learns what it would have on the node's path, once the timeout is up.
                tokio::time::sleep_until(deadline).await;
                Err(AskError::Timeout)
            }
            Err(_) => Err(AskError::Timeout),
        }
    }
}
