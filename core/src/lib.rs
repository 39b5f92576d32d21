//! # shoal-core
//!
//! Shoal's cluster-sharding protocol (Akka Cluster Sharding's, with the changes listed in
//! the README) as pure, sans-IO state machines. Per cluster member one [`Node`] composes, for
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
//!    [`Input::Passivate`]. An entity that persists state writes with the epoch its `Start`
//!    carried, and a store's refusal of it is reported with [`Input::WriteFenced`].
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
//!     fn lease(&mut self, call: shoal_core::lease::LeaseCall) {
//!         /* shard leases: run it against the lease store, then feed the answer back as
//!            Input::LeaseAnswered */
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
//!
//! ## Where things live, and the layering
//!
//! Read first the host contract: `driver` ([`Driver`], [`Io`]), `input` ([`Input`]),
//! `effect` ([`Effect`], [`Event`]) and `node` ([`Node`]). Then the roles it composes:
//! `region` (routing, buffering, and the shards it hosts under `region/shard/`),
//! `coordinator`, `remember` (remembering a shard's entities) and `membership` (the membership
//! state machine). Beneath them lie the wire (`message`: [`Envelope`], [`Body`],
//! [`ClusterMessage`]; [`codec`]), the membership state that is gossiped (`members`: [`Gossip`],
//! [`MembershipView`]), the settings ([`Config`]) and errors, and the leaves: ids, time,
//! reasons ([`DeadLetterReason`]), hashing, randomness.
//!
//! A module with children is a folder with a `mod.rs`; a module's unit tests are its `tests`
//! child, written at the end of its file or, in a folder, as `tests.rs`.
//!
//! Modules sit on floors and import only from floors below (inside a folder, siblings obey
//! the same rule, without circles):
//!
//! | floor | modules |
//! |---|---|
//! | 10 | `driver`, `direct` (the rules of a host's direct routes to its entities) |
//! | 9 | `node` |
//! | 8 | `region` (with its shards), `coordinator` |
//! | 7 | `allocation` |
//! | 6 | `config` |
//! | 5 | `membership` (the state machine) |
//! | 4 | `effect`, `input`, `codec`, `fuzz_domain`, `delivery` (reliable delivery's producer and consumer machines), `explain` (the bounded logs of decisions) |
//! | 3 | `message` (the wire), `remember` (a sub-machine with its own output, and the store API), `lease` (a lease holder with fencing tokens) |
//! | 2 | `members` (the gossiped state), `error`, `hash`, `passivation` (active-entity limits) |
//! | 1 | `id`, `time`, `reason`, `rng`, `probe`, `hint` |
//! | 0 | `fnv` (the hash ids and digests are computed with) |
//!
//! So the wire depends on no state machine and no effect, a role never knows its node, and
//! the leaves know nothing of the crate. The workspace test `tests/tests/layering.rs` holds
//! this table and fails on an import that climbs a floor or closes a circle.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

// The host contract: read these first.
mod driver;
mod effect;
mod input;
mod node;

// The roles a node composes, and the membership state machine.
mod coordinator;
pub mod delivery;
pub mod direct;
pub mod explain;
pub mod lease;
mod membership;
mod region;
mod remember;

// What travels and what is named: the wire, membership state, ids, reasons, settings.
pub mod allocation;
pub mod codec;
mod config;
mod error;
mod id;
mod members;
mod message;
mod reason;

// Leaves: time, hashing, randomness, and tools for the simulator and the fuzzers.
mod fnv;
#[cfg(feature = "arbitrary")]
mod fuzz_domain;
mod hash;
pub mod hint;
pub mod passivation;
pub mod probe;
mod rng;
mod time;

pub use config::{
    AllocationStrategyConfig, Config, EntityTypeConfig, MAX_PAYLOAD_SIZE, ShardingSettings,
};
pub use driver::{Driver, Io};
pub use effect::{ContractBreach, Effect, EntityEffect, EntityLedger, Event, Reply, Transmit};
pub use error::{CodecError, CommandError, ConfigError};
#[cfg(feature = "arbitrary")]
pub use fuzz_domain::{FUZZ_ENTITY_TYPES, FUZZ_SHARDS};
pub use hash::{murmur2, shard_of, shard_of_bytes};
pub use id::{
    Address, AppVersion, EntityId, EntityType, Epoch, HandoffRound, Incarnation, MemberId, NodeId,
    RequestId, SeedNode, ShardId, StatsQueryId,
};
pub use input::{Command, Input};
pub use members::{Gossip, GossipMember, Member, MemberStatus, MembershipView, Seen, StateDigest};
pub use membership::{
    BootstrapSettings, Downing, FailureDetectorSettings, MembershipSettings, Phase,
};
pub use message::{
    AllocationGate, Body, ClusterMessage, CoordinatorState, Envelope, KnownDigest, Lane, Message,
    Payload, RegionShards, RegionStats, StartAck, StartOutcome,
};
pub use node::{Metrics, Node, Readiness, TypeReadiness};
pub use reason::{DeadLetterReason, PassivationCause, StopReason};
pub use region::RouteCounts;
pub use remember::{
    FENCING_CASES, FencingCase, FencingClaim, FencingVerdict, RecoveryStrategy, RememberSettings,
    ShardClaim, StoreCompletion, StoreRequest,
};
pub use rng::Rng;
pub use time::{Instant, earliest};
