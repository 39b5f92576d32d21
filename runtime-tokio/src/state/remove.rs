//! Removing a type's data (Akka's `RemoveInternalClusterShardingData`, Akka.NET's cleaning up of
//! persisted shard state): everything the state store keeps for an entity type, for a type that
//! is retired, renamed, or to be started afresh.

use shoal_core::{EntityType, MemberId, MemberStatus};

use crate::Node;
use crate::error::QueryError;
use crate::store::StoreError;

use super::StateStore;

/// Why a type's data was not removed.
#[derive(Clone, Debug, Eq, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RemoveError {
    /// These members run the type (they host it, and are not Down or gone): removing its data
    /// under them would lose their writes and confuse their recoveries. Stop them first.
    #[error("members run the type: {0:?}")]
    Running(Vec<MemberId>),
    /// The node could not tell which members run the type.
    #[error(transparent)]
    Query(#[from] QueryError),
    /// The store failed; nothing is known to have been deleted.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Deletes everything `store` keeps for `entity_type`: its journal, snapshots and durable
/// states, its remembered entities and its shards' epochs; how many rows went. Refused while
/// any member of `node`'s cluster runs the type, as `node` sees the membership: run it from a
/// node that hosts nothing of the type (a tool joining the cluster, or alone once the cluster
/// is stopped).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use shoal::store::SqliteStore;
/// use shoal::{EntityType, NodeBuilder};
///
/// let store = SqliteStore::open("/var/lib/bank/state.db")?;
/// // A node of its own (or one joining the running cluster through its seed nodes).
/// let tool = NodeBuilder::new("bank").state_store(store.clone()).start().await?;
/// let rows = shoal::state::remove_type_data(&tool, &store, &EntityType::new("account")).await?;
/// println!("removed {rows} rows");
/// tool.leave().await;
/// # Ok(()) }
/// ```
pub async fn remove_type_data(
    node: &Node,
    store: &dyn StateStore,
    entity_type: &EntityType,
) -> Result<u64, RemoveError> {
    let view = node.view().await?;
    let running: Vec<MemberId> = view
        .members()
        .iter()
        .filter(|m| m.status != MemberStatus::Down)
        .filter(|m| m.hosts.as_ref().is_none_or(|h| h.contains(entity_type)))
        .map(|m| m.id)
        .collect();
    if !running.is_empty() {
        return Err(RemoveError::Running(running));
    }
    let removed = store.delete_type(entity_type).await?;
    tracing::info!(%entity_type, removed, "a type's data was removed");
    Ok(removed)
}
