//! The sharding protocol between regions and coordinators of one entity type: every message
//! [`Body`] can carry, and how a letter for an entity travels as one.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::DecisionRecord;
use super::{CoordinatorState, Payload, RegionShards, RegionStats};
use super::{Delivery, Letter, StartAck, StartOutcome};
use crate::hash::shard_of;
use crate::id::{
    EntityId, Epoch, HandoffRound, MemberId, NodeId, RequestId, ShardId, StatsQueryId,
};

/// The protocol: Akka Cluster Sharding's messages, with the differences the README lists under
/// its protocol decisions.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Body {
    // ---- region → coordinator ----
    /// A hosting region registers, reporting the shards it hosts and those it is still
    /// stopping for a handoff, so a new coordinator can rebuild its table without a store.
    Register {
        /// Shards the region hosts (running or starting).
        shards: Vec<ShardId>,
        /// Shards the region is stopping after a `HandOff`.
        handing_off: Vec<ShardId>,
    },
    /// A proxy (never hosts) registers; it must still acknowledge `BeginHandOff`.
    RegisterProxy,
    /// Where does this shard live?
    GetShardHome {
        /// The shard asked about.
        shard: ShardId,
    },
    /// Acknowledges `HostShard`: the shard runs here now.
    ShardStarted {
        /// The shard started.
        shard: ShardId,
    },
    /// `region` has forgotten the shard's home. Relayed by the shard's owner (see
    /// [`Body::RelayHandOffAck`]), so it arrives only after everything `region` forwarded.
    BeginHandOffAck {
        /// The shard being handed off.
        shard: ShardId,
        /// The region that acknowledges.
        region: MemberId,
        /// The handoff round acknowledged (from its `BeginHandOff`).
        round: HandoffRound,
    },
    /// Every entity of the shard has stopped; the region no longer hosts it. Also sent when a
    /// region is told a shard lives with it that it does not host.
    ShardStopped {
        /// The shard stopped.
        shard: ShardId,
    },
    /// The remember store refused the shard's epoch: a newer allocation claimed it, so the
    /// region stopped its instance. The coordinator allocates it again above `current`.
    ShardFenced {
        /// The shard fenced.
        shard: ShardId,
        /// The newest epoch the store has seen for it.
        current: Epoch,
    },
    /// The region is shutting down gracefully: hand off all its shards.
    GracefulShutdownReq,
    /// The region has stopped after a graceful shutdown.
    RegionStopped,
    /// Query: registered regions.
    GetCurrentRegions {
        /// Echoed in the answer.
        request: RequestId,
    },
    /// Query: entity counts per shard across the cluster.
    GetClusterShardingStats {
        /// Echoed in the answer.
        request: RequestId,
    },
    /// A region's answer to [`Body::GetRegionStats`].
    RegionStatsReply {
        /// The coordinator's query number.
        query: StatsQueryId,
        /// Entity counts per hosted shard.
        shards: Vec<(ShardId, u32)>,
    },

    // ---- coordinator → region ----
    /// Registration accepted.
    RegisterAck,
    /// A coordinator that started (or has not heard from this region) asks it to register.
    RegisterRequest,
    /// The answer to `GetShardHome`.
    ShardHome {
        /// The shard.
        shard: ShardId,
        /// The region hosting it.
        region: MemberId,
    },
    /// Known homes, sent to a region when it registers.
    ShardHomes {
        /// Homes grouped by region.
        homes: Vec<RegionShards>,
    },
    /// You are the shard's home now: start it and answer `ShardStarted`.
    HostShard {
        /// The shard to host.
        shard: ShardId,
        /// The allocation's fencing epoch (zero for types that remember nothing).
        epoch: Epoch,
    },
    /// The shard is about to move: forget its home, buffer new messages for it, and send the
    /// acknowledgement through `owner`.
    BeginHandOff {
        /// The shard being handed off.
        shard: ShardId,
        /// The region currently hosting it.
        owner: MemberId,
        /// Which handoff this is: an acknowledgement counts only for its own round, so a late
        /// one from an abandoned handoff cannot complete the barrier of the next.
        round: HandoffRound,
    },
    /// Stop every entity of the shard and answer `ShardStopped`.
    HandOff {
        /// The shard to stop.
        shard: ShardId,
    },
    /// Answer to `GetCurrentRegions`.
    CurrentRegions {
        /// Echoed request.
        request: RequestId,
        /// Registered hosting regions.
        regions: Vec<MemberId>,
    },
    /// Answer to `GetClusterShardingStats`.
    ClusterShardingStats {
        /// Echoed request.
        request: RequestId,
        /// Regions that answered.
        regions: Vec<RegionStats>,
        /// Regions that did not answer in time.
        failed: Vec<MemberId>,
    },
    /// The coordinator asks a region for its entity counts.
    GetRegionStats {
        /// Correlates the answer.
        query: StatsQueryId,
    },

    // ---- region → region ----
    /// A message for an entity, forwarded to the region believed to host its shard.
    Forward {
        /// The entity's shard.
        shard: ShardId,
        /// The entity.
        entity: EntityId,
        /// The application message.
        payload: Payload,
    },
    /// Sent to the shard's owner in answer to `BeginHandOff`; the owner relays it to the
    /// coordinator as [`Body::BeginHandOffAck`]. Travelling on the same FIFO link as the
    /// forwarded messages closes the gap of akka#30957.
    RelayHandOffAck {
        /// The shard being handed off.
        shard: ShardId,
        /// The coordinator that started the handoff.
        coordinator: MemberId,
        /// The handoff round acknowledged.
        round: HandoffRound,
    },
    /// Query an entity's liveness at its home region.
    LocateEntity {
        /// Echoed in the answer.
        request: RequestId,
        /// The entity.
        entity: EntityId,
    },
    /// Answer to `LocateEntity`.
    EntityLocated {
        /// Echoed request.
        request: RequestId,
        /// The entity.
        entity: EntityId,
        /// Its shard.
        shard: ShardId,
        /// Whether the shard is hosted there.
        hosted: bool,
        /// Whether the entity is running there.
        alive: bool,
    },

    // ---- any node → every node ----
    /// Desired shard locations for the external allocation strategy, spread to every node so
    /// that whichever node runs the coordinator knows them.
    SetShardLocations {
        /// `(shard, desired node)` pairs.
        locations: Vec<(ShardId, NodeId)>,
    },

    // ---- region ↔ coordinator (added in protocol version 3) ----
    /// Query: the coordinator's state.
    GetCoordinatorState {
        /// Echoed in the answer.
        request: RequestId,
    },
    /// Answer to `GetCoordinatorState`.
    CoordinatorState {
        /// Echoed request.
        request: RequestId,
        /// The state (boxed: every message would otherwise be this large).
        state: Box<CoordinatorState>,
    },

    // ---- region → region (added in protocol version 3) ----
    /// Start an entity without a message (Akka's `StartEntity`), routed like `Forward` (in
    /// order with the messages before and after it).
    StartEntity {
        /// The entity's shard.
        shard: ShardId,
        /// The entity.
        entity: EntityId,
        /// Who waits to hear that it runs, if anyone.
        ack: Option<StartAck>,
    },
    /// Answer to a `StartEntity` that asked for one (Akka's `StartEntityAck`), from the region
    /// that started the entity, or from the one that dropped the request.
    StartEntityAck {
        /// The requester's request id.
        request: RequestId,
        /// The entity.
        entity: EntityId,
        /// Whether it runs.
        outcome: StartOutcome,
    },
    /// Sent by a region that stopped gracefully (a proxy since) when its member is removed,
    /// to every member hosting the type: it forwards nothing any more. Each relays it to
    /// `coordinator` as [`Body::RegionExited`], behind everything the region forwarded to it
    /// (the same FIFO argument as [`Body::RelayHandOffAck`]).
    RelayExit {
        /// The coordinator the exited region was registered with.
        coordinator: MemberId,
    },
    /// `region` exited and everything it forwarded to the sender has arrived: it counts as
    /// having acknowledged every handoff of a shard the sender owns.
    RegionExited {
        /// The region that exited.
        region: MemberId,
    },

    // ---- region ↔ coordinator (added in protocol version 8) ----
    /// Query: the coordinator's decisions about `entity`'s shard (`Command::Explain`).
    Explain {
        /// Echoed in the answer.
        request: RequestId,
        /// The entity.
        entity: EntityId,
        /// Its shard.
        shard: ShardId,
    },
    /// Answer to `Explain`.
    Explanation {
        /// Echoed request.
        request: RequestId,
        /// The decisions, oldest first.
        records: Vec<DecisionRecord>,
        /// The age of the coordinator's oldest record, if its log is full.
        forgotten_before: Option<Duration>,
    },
}

impl Body {
    /// The letter this body carries to an entity (`Forward`, `StartEntity`), with its shard.
    pub(crate) fn into_letter(self) -> Result<(ShardId, Delivery), Self> {
        match self {
            Self::Forward {
                shard,
                entity,
                payload,
            } => Ok((shard, (entity, Letter::Message(payload)))),
            Self::StartEntity { shard, entity, ack } => Ok((shard, (entity, Letter::Start(ack)))),
            other => Err(other),
        }
    }

    /// How `letter` for `entity` of `shard` travels to another region.
    pub(crate) fn of_letter(shard: ShardId, (entity, letter): Delivery) -> Self {
        match letter {
            Letter::Message(payload) => Self::Forward {
                shard,
                entity,
                payload,
            },
            Letter::Start(ack) => Self::StartEntity { shard, entity, ack },
        }
    }

    /// Whether the shards this body names fit a type with `number_of_shards`: every shard id
    /// in range, and a forwarded entity under the shard its id hashes to. A peer configured
    /// with another `number_of_shards` (a deployment error) must not make this node host,
    /// allocate or route shards the type does not have.
    pub(crate) fn fits(&self, number_of_shards: u32) -> bool {
        let ok = |s: &ShardId| s.0 < number_of_shards;
        match self {
            Self::Register {
                shards,
                handing_off,
            } => shards.iter().chain(handing_off).all(ok),
            Self::GetShardHome { shard }
            | Self::ShardStarted { shard }
            | Self::BeginHandOffAck { shard, .. }
            | Self::ShardStopped { shard }
            | Self::ShardFenced { shard, .. }
            | Self::ShardHome { shard, .. }
            | Self::HostShard { shard, .. }
            | Self::BeginHandOff { shard, .. }
            | Self::HandOff { shard }
            | Self::RelayHandOffAck { shard, .. }
            | Self::EntityLocated { shard, .. } => ok(shard),
            Self::RegionStatsReply { shards, .. } => shards.iter().all(|(s, _)| ok(s)),
            Self::ShardHomes { homes } => homes.iter().flat_map(|h| &h.shards).all(ok),
            Self::ClusterShardingStats { regions, .. } => {
                regions.iter().flat_map(|r| &r.shards).all(|(s, _)| ok(s))
            }
            Self::Forward { shard, entity, .. } | Self::StartEntity { shard, entity, .. } => {
                *shard == shard_of(entity, number_of_shards)
            }
            Self::SetShardLocations { locations } => locations.iter().all(|(s, _)| ok(s)),
            Self::CoordinatorState { state, .. } => {
                state.handing_off.iter().chain(&state.waiting).all(ok)
            }
            Self::Explain { shard, entity, .. } => *shard == shard_of(entity, number_of_shards),
            Self::Explanation { records, .. } => records
                .iter()
                .flat_map(|r| r.decision.shards())
                .all(|s| ok(&s)),
            Self::RegisterProxy
            | Self::GracefulShutdownReq
            | Self::RegionStopped
            | Self::GetCurrentRegions { .. }
            | Self::GetClusterShardingStats { .. }
            | Self::RegisterAck
            | Self::RegisterRequest
            | Self::CurrentRegions { .. }
            | Self::GetRegionStats { .. }
            | Self::LocateEntity { .. }
            | Self::GetCoordinatorState { .. }
            | Self::StartEntityAck { .. }
            | Self::RelayExit { .. }
            | Self::RegionExited { .. } => true,
        }
    }
}
