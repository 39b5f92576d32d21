//! Persistent entities: state that survives every move the protocol makes (a rebalance, a
//! graceful leave, a crash), a passivation and a panic.
//!
//! Two kinds, typed with serde like [`crate::Entity`]:
//!
//! - [`EventSourced`] (Akka's `EventSourcedBehavior`): a command handler decides events (and a
//!   reply) from the current state; an event handler applies an event to the state. The events
//!   are appended to a journal, a snapshot of the state is saved every N events
//!   ([`Snapshots`]), and an incarnation recovers from the latest snapshot plus the events
//!   after it. Run as [`EventSourcedEntity`].
//! - [`DurableState`] (Akka's `DurableStateBehavior`, Orleans' `IPersistentState`): the whole
//!   state is saved with a revision whenever a command changed it. Run as
//!   [`DurableStateEntity`].
//!
//! A reply is sent only once what the command changed is durable, and the next command is
//! handled only after that. Every write carries the fencing epoch of the shard's allocation
//! (`EntityContext::epoch`), and the [`StateStore`] refuses it once it has seen a newer one for
//! the shard (a newer incarnation recovered or wrote): a stale incarnation, a paused process or
//! the losing side of a partition, can never write after a newer one has, so two incarnations
//! can never interleave events. A refused write stops the entity for good, and its shard here
//! (the node reports `NodeEvent` `WriteFenced` with both epochs); a write that failed (store
//! unavailable, timed out, so its outcome is unknown) answers with [`PersistError`] and
//! restarts the entity after a backoff, recovering from the store: nothing is retried blindly.
//! A panic restarts it the same way.
//!
//! **Removing a type's data**: [`remove_type_data`] deletes everything the store keeps for a
//! type, refusing while members run it.
//!
//! **Schema evolution.** Events and states are stored with the version of their type that
//! wrote them (`VERSION`); reading one of an older version goes through `upcast_event` /
//! `upcast_state`, which decode the old shape and convert it.

mod durable;
mod event_sourced;
mod remove;
mod versioned;

pub use crate::store::{Recovered, STATE_SCHEMA, StateKey, StateStore, StateWrite, Versioned};
pub use durable::{DurableState, DurableStateEntity};
pub use event_sourced::{EventSourced, EventSourcedEntity, Persist, Snapshots};
pub use remove::{RemoveError, remove_type_data};

use crate::EntityContext;
use crate::entity::Verdict;
use crate::store::{Journal, StoreError};

/// Why a persistent entity's command was not carried out. Its state is as it was before the
/// command, unless said otherwise.
#[derive(Clone, Debug, Eq, PartialEq, serde::Deserialize, serde::Serialize, thiserror::Error)]
#[non_exhaustive]
pub enum PersistError {
    /// The state could not be read or written (the store failed or timed out: a write's
    /// outcome is then unknown, and the entity recovers from the store to find out). The
    /// entity restarts after a backoff.
    #[error("the entity's state could not be persisted: {0}")]
    Failed(String),
    /// A newer incarnation of the entity exists (its shard was allocated again): this one
    /// stopped without writing.
    #[error("fenced: a newer incarnation of the entity exists (epoch {0})")]
    Fenced(u64),
}

/// The key of the entity `ctx` runs, at its epoch.
fn key_of(ctx: &EntityContext) -> StateKey {
    StateKey {
        entity_type: ctx.entity_type().clone(),
        entity: ctx.id().clone(),
        shard: ctx.shard(),
        epoch: ctx.epoch(),
        lease_token: ctx.lease_token(),
    }
}

/// What a failed read or write means for the entity: its supervision's verdict, and the
/// error its caller gets.
fn failure(ctx: &mut EntityContext, error: StoreError) -> PersistError {
    match error {
        StoreError::Fenced { current, .. } => {
            ctx.set_verdict(Verdict::Fenced(current));
            PersistError::Fenced(current.0)
        }
        other => {
            let reason = other.to_string();
            ctx.set_verdict(Verdict::Restart(reason.clone()));
            PersistError::Failed(reason)
        }
    }
}

/// The node's state store, or the failure of an entity of a persistent type on a node that
/// has none (the builder refuses that, so only a misuse reaches it).
fn journal_of(ctx: &mut EntityContext) -> Result<Journal, PersistError> {
    match ctx.journal() {
        Some(journal) => Ok(journal.clone()),
        None => {
            let error = StoreError::Unavailable("the node has no state store".into());
            Err(failure(ctx, error))
        }
    }
}
