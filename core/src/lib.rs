//! # shoal-core
//!
//! Shoal's cluster-sharding protocol (Akka Cluster Sharding's, with the changes listed in
//! `DESIGN.md`) as pure, sans-IO state machines. Per cluster member one [`Node`] composes, for
//! each entity type, a *region* (routes, buffers, hosts *shards*, which track *entities*) and,
//! while the member is the oldest Up member with the type's role, the type's *coordinator*
//! (allocates shards to regions, rebalances, hands shards off).
//!
//! The core never reads a clock, opens a socket, spawns a thread or draws OS randomness.
//! Hosts (the deterministic simulator, the tokio runtime) feed it inputs and execute its effects.
//!
//! ## The drive contract
//!
//! ```text
//! Node::new(config, now) -> Result<Node, ConfigError>
//! node.handle_input(now, Input)        // a message from a peer, a command, an entity signal, ...
//! node.handle_timeout(now)             // idempotent; may be called early
//! node.poll_effect() -> Option<Effect> // FIFO across roles; drain to None after every handle_*
//! node.poll_timeout() -> Option<Instant>
//! ```
//!
//! 1. `now` never decreases (the [`Driver`] clamps it).
//! 2. After every `handle_*` call, drain [`Node::poll_effect`] to `None`, then read
//!    [`Node::poll_timeout`] and call [`Node::handle_timeout`] when that time comes.
//! 3. Effects are executed in the order they are polled. Dropping one is a bug.
//! 4. `handle_timeout` may be called early or spuriously; it only runs what is due.
//! 5. Entities are run by the host: it starts them on [`EntityEffect::Start`], delivers
//!    [`EntityEffect::Deliver`] in order, stops them on [`EntityEffect::Stop`] and reports
//!    [`Input::EntityStopped`] exactly once per started incarnation, when it has terminated
//!    (on its own, after a graceful stop, or after a forced one); an entity asks to stop with
//!    [`Input::Passivate`].
//! 6. Bad peer input never panics: it is dropped, logged with `tracing`, and counted in
//!    [`Metrics`]. Messages dropped for a reason become [`Event::DeadLetter`].
//!
//! Hosts do not write this loop themselves: [`Driver`] runs it over an [`Io`]:
//!
//! ```no_run
//! use shoal_core::{
//!     Config, Driver, EntityEffect, Event, Incarnation, Instant, Io, Node, NodeId, StoreRequest,
//!     Transmit,
//! };
//!
//! struct MyIo;
//! impl Io for MyIo {
//!     fn send(&mut self, transmit: Transmit) {
//!         /* encode transmit.envelope with shoal_core::codec and write it to the connection
//!            to transmit.envelope.to, dialling transmit.address if there is none */
//!     }
//!     fn entity(&mut self, effect: EntityEffect) { /* start / deliver to / stop an entity */ }
//!     fn emit(&mut self, event: Event) { /* replies, dead letters, notifications */ }
//!     fn store(&mut self, request: StoreRequest) {
//!         /* remember entities: run it against the store, then feed the outcome back as
//!            Input::StoreCompleted */
//!     }
//! }
//!
//! let config = Config::new(NodeId(1), Incarnation(1));
//! let mut driver = Driver::new(Node::new(config, Instant::ZERO).unwrap(), Instant::ZERO);
//! let mut io = MyIo;
//! loop {
//!     // Wait for an input or for `driver.next_wakeup()`, then:
//!     # let now = Instant::ZERO; let input: Option<shoal_core::Input> = None;
//!     match input {
//!         Some(input) => driver.handle_input(now, input, &mut io),
//!         None => driver.handle_wakeup(now, &mut io),
//!     }
//!     # break;
//! }
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod allocation;
pub mod codec;
mod config;
mod coordinator;
mod deadlines;
mod driver;
mod effect;
mod error;
#[cfg(feature = "arbitrary")]
mod fuzz_domain;
mod hash;
pub mod hint;
mod id;
mod input;
mod link_seq;
mod members;
mod membership;
mod message;
mod node;
mod node_table;
pub mod probe;
mod reason;
mod region;
mod remember;
mod rng;
mod time;

pub use config::{
    AllocationStrategyConfig, Config, EntityTypeConfig, MAX_PAYLOAD_SIZE, ShardingSettings,
};
pub use driver::{Driver, Io};
pub use effect::{Effect, EntityEffect, Event, Reply, Transmit};
pub use error::{CodecError, CommandError, ConfigError};
#[cfg(feature = "arbitrary")]
pub use fuzz_domain::{FUZZ_ENTITY_TYPES, FUZZ_SHARDS};
pub use hash::{murmur2, shard_of, shard_of_bytes};
pub use id::{
    Address, AppVersion, EntityId, EntityType, Epoch, Incarnation, MemberId, NodeId, RequestId,
    ShardId,
};
pub use input::{Command, Input};
pub use members::{Gossip, GossipMember, Member, MemberStatus, MembershipView, Seen, StateDigest};
pub use membership::{
    Downing, FailureDetectorSettings, LeaseEvent, LeaseRequest, LeaseSettings, MembershipSettings,
    Phase, SeedNode,
};
pub use message::{
    AllocationGate, Body, ClusterMessage, CoordinatorState, Envelope, Lane, Message, Payload,
    RegionShards, RegionStats, StartAck, StartOutcome,
};
pub use node::{Metrics, Node};
pub use reason::{DeadLetterReason, StopReason};
pub use region::RouteCounts;
pub use remember::{RecoveryStrategy, RememberSettings, StoreCompletion, StoreRequest};
pub use rng::Rng;
pub use time::{Instant, earliest};
