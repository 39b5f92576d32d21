//! Error types, one per API family.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::id::{EntityType, NodeId};

/// Why a [`crate::Config`] was rejected by [`crate::Node::new`]. No node was created.
#[derive(Clone, Debug, Eq, Error, PartialEq)]
#[non_exhaustive]
pub enum ConfigError {
    /// A timer setting is zero; the named field must be positive.
    #[error("setting `{0}` must be greater than zero")]
    ZeroDuration(&'static str),
    /// `buffer_size` is zero: no message could ever be buffered.
    #[error("setting `buffer_size` must be greater than zero")]
    ZeroBufferSize,
    /// An entity type's `min_registered_regions` is zero; use 1 to allocate as soon as one
    /// region registered.
    #[error("entity type `{0}`: setting `min_registered_regions` must be at least 1")]
    ZeroMinRegisteredRegions(EntityType),
    /// `MembershipSettings::min_nr_of_members` (or a per-role minimum) is zero; use 1 to move
    /// members Up as soon as they join.
    #[error("setting `min_nr_of_members` must be at least 1")]
    ZeroMinMembers,
    /// An entity type has an empty name.
    #[error("an entity type has an empty name")]
    EmptyEntityTypeName,
    /// Two entity types share a name.
    #[error("entity type `{0}` is configured twice")]
    DuplicateEntityType(EntityType),
    /// An entity type's `active_entity_limit` allows no entity at all.
    #[error("entity type `{0}`: `active_entity_limit.per_region` must be at least 1")]
    ZeroActiveEntityLimit(EntityType),
    /// An entity type's W-TinyLFU admission window is outside 1..=1000 per mille.
    #[error("entity type `{0}`: the admission window's `window_per_mille` must be in 1..=1000")]
    InvalidAdmissionWindow(EntityType),
    /// An entity type has zero shards.
    #[error("entity type `{0}` must have at least one shard")]
    ZeroShards(EntityType),
    /// `max_payload_size` is zero or larger than a frame can carry.
    #[error("setting `max_payload_size` ({0}) must be in 1..=MAX_PAYLOAD_SIZE")]
    InvalidMaxPayloadSize(usize),
    /// A rebalance limit is out of range.
    #[error("invalid rebalance limit: {0}")]
    InvalidRebalanceLimit(&'static str),
    /// Membership is managed by the node but no seed node is configured.
    #[error("membership needs at least one seed node")]
    NoSeedNodes,
    /// A membership setting is out of range.
    #[error("invalid membership setting: {0}")]
    InvalidMembership(&'static str),
    /// This member's address or a seed's is empty: nobody could reach it.
    #[error("an address (this member's or a seed's) is empty")]
    EmptyAddress,
    /// One node id is given two addresses (two seeds, or a seed and this member).
    #[error("node {0} is given two different addresses")]
    ConflictingAddresses(NodeId),
}

/// Why a wire frame could not be decoded. The frame is dropped and counted; state is unchanged.
#[derive(Clone, Debug, Eq, Error, PartialEq)]
#[non_exhaustive]
pub enum CodecError {
    /// The frame is empty.
    #[error("empty frame")]
    Empty,
    /// The frame was written by an incompatible protocol version.
    #[error("unsupported protocol version {found} (expected {expected})")]
    UnsupportedVersion {
        /// Version byte found in the frame.
        found: u8,
        /// The version this build speaks.
        expected: u8,
    },
    /// The frame exceeds [`crate::codec::MAX_FRAME_LEN`].
    #[error("frame of {0} bytes exceeds the frame cap")]
    TooLarge(usize),
    /// The body is not a valid message.
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// Bytes remain after a complete message.
    #[error("{0} trailing bytes after the message")]
    TrailingBytes(usize),
}

/// Why a command failed. State is unchanged unless the variant says otherwise.
#[derive(Clone, Debug, Deserialize, Eq, Error, PartialEq, Serialize)]
#[non_exhaustive]
pub enum CommandError {
    /// No region of this entity type runs on this node.
    #[error("unknown entity type `{0}`")]
    UnknownEntityType(EntityType),
    /// The type's coordinator is not known yet (no Up member with the role); retry later.
    #[error("no coordinator for entity type `{0}` is known yet")]
    NoCoordinator(EntityType),
    /// The shard id is outside `0..number_of_shards`.
    #[error("shard {shard} is out of range for `{entity_type}`")]
    ShardOutOfRange {
        /// The type.
        entity_type: EntityType,
        /// The offending shard.
        shard: crate::id::ShardId,
    },
    /// The region has stopped; it takes no more work.
    #[error("the region of `{0}` has stopped")]
    RegionStopped(EntityType),
    /// The host manages membership (`Config::membership` is `None`): it leaves the cluster
    /// through its own membership, not through the node.
    #[error("membership is managed by the host")]
    MembershipIsExternal,
    /// The member is not (or no longer) a member as this node sees it.
    #[error("{0} is not a member")]
    UnknownMember(crate::id::MemberId),
    /// `SetActiveEntityLimit` for a type configured without an active-entity limit.
    #[error("entity type `{0}` has no active-entity limit to change")]
    NoActiveEntityLimit(EntityType),
    /// `SetActiveEntityLimit` to zero: at least one entity must be allowed to run.
    #[error("the active-entity limit of `{0}` must be at least 1")]
    ZeroActiveEntityLimit(EntityType),
    /// A query asked of another member got no answer within `shard_region_query_timeout`
    /// (the member, or the network to it, is down or slow).
    #[error("no answer from {asked} within the query timeout")]
    QueryTimedOut {
        /// The member that was asked.
        asked: crate::id::MemberId,
    },
    /// A query with this request id is still waiting for its answer; request ids must be
    /// unique among queries in flight.
    #[error("a query with request id {0} is already in flight")]
    RequestInFlight(crate::id::RequestId),
    /// A `StartEntity` was dropped before the entity could start (the reason is also reported
    /// as a dead letter where it was dropped).
    #[error("entity `{entity}` was not started: {reason:?}")]
    NotStarted {
        /// The entity.
        entity: crate::id::EntityId,
        /// Why.
        reason: crate::reason::DeadLetterReason,
    },
    /// No region reported the entity started in time: its shard's home may be unreachable.
    /// The start may still happen.
    #[error("no region reported entity `{entity}` started in time")]
    StartTimedOut {
        /// The entity.
        entity: crate::id::EntityId,
    },
}
