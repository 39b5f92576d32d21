//! # shoal-core
//!
//! Shoal's cluster-sharding protocol as pure, sans-IO state machines.
//! (Crate documentation with the drive contract is completed with the `Node`.)

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod allocation;
pub mod codec;
mod config;
mod effect;
mod error;
mod hash;
mod id;
mod input;
mod membership;
mod message;
mod rng;
mod time;

pub use config::{AllocationStrategyConfig, Config, EntityTypeConfig, ShardingSettings};
pub use effect::{DeadLetterReason, Effect, EntityEffect, Event, Reply, StopReason};
pub use error::{CodecError, CommandError, ConfigError};
pub use hash::{murmur2, shard_of, shard_of_bytes};
pub use id::{AppVersion, EntityId, EntityType, Incarnation, MemberId, NodeId, RequestId, ShardId};
pub use input::{Command, Input};
pub use membership::{Member, MemberStatus, MembershipView};
pub use message::{Body, Envelope, Message, Payload, RegionShards, RegionStats};
pub use time::Instant;
