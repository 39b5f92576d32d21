//! The builder's persistent entity types, their state store, and the lease store.

use std::sync::Arc;

use shoal_core::{EntityId, EntityTypeConfig};

use super::NodeBuilder;
use crate::state::{
    DurableState, DurableStateEntity, EventSourced, EventSourcedEntity, Snapshots, StateStore,
};
use crate::store::{LeaseStore, RememberStore};

impl NodeBuilder {
    /// Where persistent entity types (`NodeBuilder::event_sourced`, `durable_state`) keep their
    /// state. It is the node's remember store too: the shards' fencing epochs, which every
    /// write is checked against, live in one table for both (this replaces any
    /// `remember_store`). Required when a hosted type persists state.
    pub fn state_store<S: StateStore>(mut self, store: S) -> Self {
        let store = Arc::new(store);
        self.remember_store = Some(Arc::clone(&store) as Arc<dyn RememberStore>);
        self.state_store = Some(store);
        self
    }

    /// Where entity types with `EntityTypeConfig::shard_lease` keep their shards' leases:
    /// `SqliteStore` (one machine) or `PostgresStore`, granting on the database's clock.
    /// Required when a hosted type holds shard leases. Calls share the remember store's
    /// timeout.
    pub fn lease_store(mut self, store: impl LeaseStore) -> Self {
        self.lease_store = Some(Arc::new(store));
        self
    }

    /// Hosts event-sourced entities of state `S`: each starts from `initial(id)` and recovers
    /// from the state store (its latest snapshot, saved as `snapshots` says, and the events
    /// after it). Address them as `Region<EventSourcedEntity<S>>`.
    pub fn event_sourced<S: EventSourced>(
        self,
        mut config: EntityTypeConfig,
        snapshots: Snapshots,
        initial: impl Fn(&EntityId) -> S + Send + Sync + 'static,
    ) -> Self {
        config.persistent = true;
        self.entity(config, move |id| {
            EventSourcedEntity::new(initial(id), snapshots)
        })
    }

    /// Hosts durable-state entities of state `S`: each starts from `initial(id)` and recovers
    /// its saved state from the state store. Address them as `Region<DurableStateEntity<S>>`.
    pub fn durable_state<S: DurableState>(
        self,
        mut config: EntityTypeConfig,
        initial: impl Fn(&EntityId) -> S + Send + Sync + 'static,
    ) -> Self {
        config.persistent = true;
        self.entity(config, move |id| DurableStateEntity::new(initial(id)))
    }
}
