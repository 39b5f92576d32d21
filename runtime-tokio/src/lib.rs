//! # Shoal
//!
//! Cluster sharding for Rust, in the tradition of Akka Cluster Sharding: applications
//! address stateful entities by type and id and never care where they run. Entities are
//! grouped into shards; a coordinator allocates shards to the members' regions; regions route
//! and buffer messages, start entities on demand, hand shards off when the cluster changes and
//! passivate idle entities. Every protocol decision is made by `shoal-core`'s sans-IO state
//! machines, the same code the deterministic simulator checks; this crate is their tokio host:
//! TCP transport with an authenticated handshake, typed entities, `tell` and `ask`, persistent
//! entities ([`state`]) and reliable producers whose messages are applied effectively once
//! ([`delivery`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use shoal::{Entity, EntityContext, EntityTypeConfig, NodeBuilder};
//!
//! struct Counter(u64);
//!
//! impl Entity for Counter {
//!     type Message = u64;
//!     type Reply = u64;
//!     async fn handle(&mut self, _ctx: &mut EntityContext, add: u64) -> u64 {
//!         self.0 += add;
//!         self.0
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let node = NodeBuilder::new("shop")
//!     .bind("127.0.0.1:2551")
//!     .seed_nodes(["127.0.0.1:2551"])
//!     .secret("a shared secret")
//!     .entity(EntityTypeConfig::new("counter"), |_id| Counter(0))
//!     .start()
//!     .await?;
//! let counters = node.region::<Counter>("counter")?;
//! let total = counters.entity_ref("basket-7").ask(&3, Duration::from_secs(5)).await?;
//! assert_eq!(total, 3);
//! node.leave().await;
//! # Ok(())
//! # }
//! ```
//!
//! How it runs: one task owns the protocol state (no locks); one task per peer writes to it
//! and one per accepted connection reads, with membership traffic on a lane of its own; one
//! task per hosted shard runs its entities, each with a bounded mailbox and a turn only while
//! mail waits for it. Queues never block the protocol: a full one turns
//! the message into a dead letter with its reason ([`NodeEvent::Sharding`]).
//!
//! The transport reaches the network through the [`Network`] seam: real TCP ([`Tcp`]) by
//! default, mutual TLS around any network with the `tls` feature (`MutualTls`), and
//! turmoil's simulated TCP in this crate's deterministic tests.
//!
//! ## The layering
//!
//! Modules import only from floors below; the workspace test `tests/tests/layering.rs` holds
//! this table and fails on an import that climbs it or closes a circle:
//!
//! | floor | modules |
//! |---|---|
//! | 8 | `builder` (validates, binds, configures and spawns a node) |
//! | 7 | `state` (persistent entities: event sourced, durable state; removing a type's data), `management` (the HTTP endpoint) |
//! | 6 | `node` (the handle of a running node), `delivery` (reliable producers) |
//! | 5 | `region` (typed handles of one entity type: `Region`, `EntityRef`), `discovery` (contacts from DNS for bootstrapping) |
//! | 4 | `host` (the one task that owns the core's `Driver`, its `Io`, its request tables) |
//! | 3 | `transport` (TCP, handshake; connections' readers deliver on direct routes) |
//! | 2 | `entity` (entities, their mailboxes and direct routes, the shards' drivers) |
//! | 1 | `store` (remember and state stores, the group-commit writer) |
//! | 0 | `clock`, `error`, `event`, `metric_names` |
//!
//! The handles reach the host only through its command queue (`host::command::HostHandle`);
//! the transport never knows the node's face, only the entities' direct routes.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod builder;
mod clock;
pub mod delivery;
#[cfg(feature = "dns")]
pub mod discovery;
pub mod entity;
mod error;
mod event;
mod host;
#[cfg(feature = "management")]
pub mod management;
mod metric_names;
mod node;
mod region;
pub mod state;
pub mod store;
pub mod transport;

pub use builder::NodeBuilder;
pub use delivery::{ReliableProducer, SendError};
pub use entity::{Entity, EntityContext};
pub use error::{AskError, QueryError, RegionError, StartError, TellError};
pub use event::NodeEvent;
pub use host::command::NodeStats;
pub use node::Node;
pub use region::{ClusterStats, EntityLocation, EntityRef, Region};
pub use shoal_core::{
    AllocationStrategyConfig, AppVersion, BootstrapSettings, DeadLetterReason, Downing, EntityId,
    EntityType, EntityTypeConfig, Event, FailureDetectorSettings, Member, MemberId, MemberStatus,
    MembershipSettings, MembershipView, Metrics, NodeId, Readiness, RecoveryStrategy,
    RememberSettings, RouteCounts, SeedNode, ShardingSettings, TypeReadiness, shard_of,
};
/// Decisions behind an entity's placement and its dead letters (`Region::explain`).
pub mod explain {
    pub use shoal_core::explain::{
        AllocationCause, DECISIONS_KEPT, DECISIONS_KEPT_PER_SHARD, Decision, DecisionRecord,
        Explanation,
    };
}
/// Active-entity limits (`EntityTypeConfig::active_entity_limit`, `Region::set_active_entity_limit`).
pub mod passivation {
    pub use shoal_core::PassivationCause;
    pub use shoal_core::passivation::{ActiveEntityLimit, Admission, ReplacementPolicy};
}
/// Leases with fencing tokens (`EntityTypeConfig::shard_lease`, `NodeBuilder::lease_store`).
pub mod lease {
    pub use shoal_core::lease::{FencingToken, LeaseTerms};
}
pub use state::{
    DurableState, DurableStateEntity, EventSourced, EventSourcedEntity, Persist, PersistError,
    Snapshots, StateStore,
};
pub use transport::network::{BoxConnection, Connection, Listener, Network, Tcp};
#[cfg(feature = "tls")]
pub use transport::tls::{MutualTls, TlsError, TlsSettings};
pub use transport::{TransportSettings, TransportStats};

/// The README's examples are compiled as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
