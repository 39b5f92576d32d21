//! What a [`crate::Node`] asks its host to do, in one FIFO queue across roles.

mod ledger;
mod queue;

use serde::{Deserialize, Serialize};

use crate::error::CommandError;
use crate::id::{Address, EntityId, EntityType, Epoch, MemberId, RequestId, ShardId};
use crate::lease::{FencingToken, LeaseCall};
use crate::message::{AllocationGate, CoordinatorState, Envelope, Payload, RegionStats};
use crate::reason::{DeadLetterReason, StopReason};
use crate::remember::StoreRequest;

pub use ledger::{ContractBreach, EntityLedger};
pub(crate) use queue::Effects;

/// One effect. Effects must be executed in the order they are polled; dropping one is a bug.
#[must_use]
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[non_exhaustive]
pub enum Effect {
    /// Send an envelope to another member.
    Send(Transmit),
    /// Act on an entity the host runs.
    Entity(EntityEffect),
    /// Tell the application something.
    Event(Event),
    /// Send a request to the remember store; answer it with `Input::StoreCompleted`.
    Store(StoreRequest),
    /// Call the lease store; answer it with `Input::LeaseAnswered`.
    Lease(LeaseCall),
}

/// An envelope for another member, and where that member can be reached (after quinn-proto's
/// `Transmit`: the state machine names the destination, the host owns the socket).
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub struct Transmit {
    /// The receiver's address as membership knows it (seed list, join, gossip, or a view the
    /// host supplied). `None` only when nobody said: a host that supplies views without
    /// addresses routes by `envelope.to` itself.
    pub address: Option<Address>,
    /// The envelope; its `to` names the receiving member. Boxed once where it is made and
    /// handed on as it is (a host's network, then the receiver's `Input::Receive`): an
    /// envelope is over a hundred bytes, and every effect and input moved it whole.
    pub envelope: Box<Envelope>,
}

/// Entity lifecycle commands for the host, which runs the entities.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub enum EntityEffect {
    /// Start a new incarnation of the entity (before its first `Deliver`).
    Start {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
        /// Its shard.
        shard: ShardId,
        /// The shard allocation's fencing epoch (zero for a type that neither remembers
        /// entities nor persists state): the entity's writes to a state store carry it, and a
        /// store refuses them once it has seen a newer one for the shard (`Input::WriteFenced`).
        epoch: Epoch,
        /// The token the shard holds its lease under, for a type with shard leases: the
        /// entity's writes carry it too, and a store refuses them once a newer holder of the
        /// lease has read or written, whatever the epochs.
        lease_token: Option<FencingToken>,
    },
    /// Deliver a message to the running entity.
    Deliver {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
        /// The message.
        payload: Payload,
    },
    /// Stop the entity. The host answers with `Input::EntityStopped` once it has terminated.
    Stop {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
        /// Why, and how hard.
        reason: StopReason,
    },
}

/// Notifications for the application.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[non_exhaustive]
pub enum Event {
    /// The answer to an `Input::Command`.
    Reply {
        /// The command's request id.
        request: RequestId,
        /// The outcome.
        result: Result<Reply, CommandError>,
    },
    /// A message was not delivered, for the stated reason. Nothing is dropped silently.
    DeadLetter {
        /// The message's entity type.
        entity_type: EntityType,
        /// The target entity.
        entity: EntityId,
        /// The message's payload (`None` for a bare start-entity request), handed back so the
        /// application can log, retry or account for it.
        payload: Option<Payload>,
        /// Why it was dropped.
        reason: DeadLetterReason,
    },
    /// This member became ready for traffic, or stopped being ready (see
    /// [`crate::Readiness`]; [`crate::Node::readiness`] says what it waits for).
    ReadinessChanged {
        /// Whether it is ready now.
        ready: bool,
    },
    /// The region registered with the coordinator at `coordinator`.
    RegionRegistered {
        /// The region's type.
        entity_type: EntityType,
        /// The coordinator's member.
        coordinator: MemberId,
    },
    /// A shard started on this node.
    ShardStarted {
        /// The shard's type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
    },
    /// A shard stopped on this node (handed off).
    ShardStopped {
        /// The shard's type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
    },
    /// A remember-store request failed; it is retried with backoff, and what waits for it
    /// (entity starts, a handoff) waits on. Nothing recorded is dropped.
    RememberStoreFailed {
        /// The type.
        entity_type: EntityType,
        /// The shard (`None` for the coordinator's read of the remembered shards).
        shard: Option<ShardId>,
        /// What failed.
        reason: String,
    },
    /// The region's requests to its coordinator go unanswered while it holds messages
    /// (Akka's "Trying to register to coordinator at [...], but no acknowledgement. Total
    /// [...] buffered messages."): emitted every `retry_interval` from the fifth unanswered
    /// attempt on, until an answer comes. Usual causes: the member the view names for the
    /// coordinator does not run the type (a host whose views do not say which types members
    /// run), or it cannot be reached.
    CoordinatorUnanswered {
        /// The region's type.
        entity_type: EntityType,
        /// The member the region's view names for the type's coordinator (`None`: no member
        /// of the view hosts the type).
        coordinator: Option<MemberId>,
        /// Whether the region is registered: then its requests for shard homes go
        /// unanswered, otherwise its registrations.
        registered: bool,
        /// Unanswered attempts so far: registrations, rounds of shard-home requests, or
        /// retry rounds without a coordinator to ask.
        attempts: u32,
        /// Messages the region holds meanwhile.
        buffered: u32,
    },
    /// A shard's load returned ids that map to other shards (they were filed under another
    /// number of shards and not refiled: see [`StoreRequest::Shards`]). They were not started
    /// here, where they can never be hosted; each starts in its own shard when messaged. They
    /// stay in this shard's entry.
    RememberedIdsMisfiled {
        /// The type.
        entity_type: EntityType,
        /// The shard that loaded them.
        shard: ShardId,
        /// The ids, sorted.
        entities: Vec<EntityId>,
    },
    /// The remember store refused this node's instance of a shard: a newer allocation of it
    /// exists (at `current`). The instance stopped its entities; the coordinator allocates the
    /// shard again.
    ShardFenced {
        /// The type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
        /// The newer epoch the store holds.
        current: Epoch,
    },
    /// This node's instance of a shard holds its lease (the type has `shard_lease`): it runs
    /// the shard's entities from now on, its writes fenced by `token`.
    ShardLeaseAcquired {
        /// The type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
        /// The grant's fencing token.
        token: FencingToken,
    },
    /// This node's instance of a shard can no longer count on its lease (a renewal was refused,
    /// or none came before the lease's validity ran out on this node's clock): its entities
    /// were stopped at once, and its messages wait until it holds the lease again.
    ShardLeaseLost {
        /// The type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
    },
    /// A state store refused an entity's write: it holds a newer epoch for the entity's
    /// shard, so another incarnation of the entity (a newer allocation of the shard) has
    /// written or recovered since. The host stopped the entity; its shard here stops as
    /// [`Event::ShardFenced`] says, and the coordinator allocates it again.
    WriteFenced {
        /// The type.
        entity_type: EntityType,
        /// The entity whose write was refused.
        entity: EntityId,
        /// Its shard.
        shard: ShardId,
        /// The epoch the write carried.
        epoch: Epoch,
        /// The newer epoch the store holds.
        current: Epoch,
    },
    /// This node's membership view changed (when it manages membership); read it with
    /// `Node::view`.
    MembershipChanged,
    /// A member became Up (this node included), as this node's view first shows it.
    MemberUp {
        /// The member.
        member: MemberId,
        /// Where it is reached, if the view says.
        address: Option<Address>,
    },
    /// A member this node's view held reachable is unreachable (its failure detector, or a
    /// peer's through gossip, lost it).
    MemberUnreachable {
        /// The member.
        member: MemberId,
        /// Where it is reached, if the view says.
        address: Option<Address>,
    },
    /// A member unreachable before is reachable again.
    MemberReachable {
        /// The member.
        member: MemberId,
        /// Where it is reached, if the view says.
        address: Option<Address>,
    },
    /// A member was marked Down (by the split-brain resolver or by an operator); it is
    /// removed once every member has seen that.
    MemberDowned {
        /// The member.
        member: MemberId,
        /// Where it is reached, if the view says.
        address: Option<Address>,
    },
    /// A member left the view: removed after leaving, or after being downed.
    MemberRemoved {
        /// The member.
        member: MemberId,
        /// Where it was reached, if the view said.
        address: Option<Address>,
    },
    /// An application message from another member (sent with `Input::SendApp` there; an
    /// `ask`'s reply, say). It travels on the same numbered FIFO link as the sharding protocol
    /// and only reaches the incarnation it was addressed to.
    AppMessage {
        /// The sending member.
        from: MemberId,
        /// The message, opaque to the core.
        payload: Payload,
    },
    /// An application message (`Input::SendApp`) that was not sent, for the stated reason.
    AppDeadLetter {
        /// The member it was for.
        to: MemberId,
        /// The message, handed back.
        payload: Payload,
        /// Why it was dropped.
        reason: DeadLetterReason,
    },
    /// This member is out of the cluster: removed after leaving (`downed: false`), or downed
    /// (its entities were stopped). The host should stop the process; to rejoin, restart it as
    /// a new incarnation.
    LeftCluster {
        /// Whether it was downed rather than removed after a graceful leave.
        downed: bool,
    },
    /// The region finished its graceful shutdown.
    RegionStopped {
        /// The region's type.
        entity_type: EntityType,
    },
    /// This node started the type's coordinator (it is the oldest member with the role).
    CoordinatorStarted {
        /// The type.
        entity_type: EntityType,
    },
    /// This node stopped running the type's coordinator.
    CoordinatorStopped {
        /// The type.
        entity_type: EntityType,
    },
    /// The type's coordinator (on this node) allocated `shard` to `region` (a shard nobody
    /// hosted, or one moving after a handoff): `HostShard` is on its way there.
    ShardAllocated {
        /// The type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
        /// Where it goes.
        region: MemberId,
    },
    /// The type's coordinator (on this node) began a rebalance round: these shards are being
    /// handed off, to be allocated where the strategy puts them.
    Rebalance {
        /// The type.
        entity_type: EntityType,
        /// The shards moved, in order.
        shards: Vec<ShardId>,
    },
    /// The type's coordinator (on this node) abandoned handing `shard` off from `owner`: these
    /// regions and proxies had not acknowledged within `handoff_timeout`. Nothing was stopped:
    /// the shard stays with its owner, and the next rebalance round or graceful shutdown
    /// request tries again. Regions that crashed or were downed are never waited for; one
    /// that keeps appearing here cannot be reached.
    HandoffAbandoned {
        /// The type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
        /// Its owner, which keeps it.
        owner: MemberId,
        /// The regions and proxies whose acknowledgements did not come, in order.
        waiting_for: Vec<MemberId>,
    },
    /// A handoff the type's coordinator (on this node) ran completed: `from` stopped the shard,
    /// `took` after the handoff began (or after the coordinator learned of it, for a handoff a
    /// registration reported).
    HandoffCompleted {
        /// The type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
        /// The region that stopped it.
        from: MemberId,
        /// From the handoff's start to the shard stopped.
        took: std::time::Duration,
    },
    /// The type's coordinator said where `shard` lives, `waited` after this region first asked
    /// (the coordinator round trip, allocation included when the shard had no home).
    ShardHomeAnswered {
        /// The type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
        /// The region it lives at.
        home: MemberId,
        /// From the region's first request to the answer.
        waited: std::time::Duration,
    },
    /// Every handoff a rebalance round of the type's coordinator (on this node) started has
    /// ended (completed or abandoned), `took` after the round.
    RebalanceCompleted {
        /// The type.
        entity_type: EntityType,
        /// The shards the round moved.
        shards: u32,
        /// From the round to its last handoff's end.
        took: std::time::Duration,
    },
    /// The type's coordinator (on this node) holds requests for shards nobody has reported
    /// back until its allocation gate opens; emitted when what the gate waits for changes.
    /// Members listed as unregistered that should not host the type are misconfigured: their
    /// membership says they do.
    AllocationWaiting {
        /// The type.
        entity_type: EntityType,
        /// What the gate waits for.
        gate: AllocationGate,
        /// The shards asked for, in order.
        shards: Vec<ShardId>,
    },
}

impl Event {
    /// The event's name in snake case (`"dead_letter"`, `"member_up"`): one name per kind for
    /// every host's logs and metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Reply { .. } => "reply",
            Self::DeadLetter { .. } => "dead_letter",
            Self::ReadinessChanged { .. } => "readiness_changed",
            Self::RegionRegistered { .. } => "region_registered",
            Self::ShardStarted { .. } => "shard_started",
            Self::ShardStopped { .. } => "shard_stopped",
            Self::RememberStoreFailed { .. } => "remember_store_failed",
            Self::CoordinatorUnanswered { .. } => "coordinator_unanswered",
            Self::RememberedIdsMisfiled { .. } => "remembered_ids_misfiled",
            Self::ShardFenced { .. } => "shard_fenced",
            Self::ShardLeaseAcquired { .. } => "shard_lease_acquired",
            Self::ShardLeaseLost { .. } => "shard_lease_lost",
            Self::WriteFenced { .. } => "write_fenced",
            Self::MembershipChanged => "membership_changed",
            Self::MemberUp { .. } => "member_up",
            Self::MemberUnreachable { .. } => "member_unreachable",
            Self::MemberReachable { .. } => "member_reachable",
            Self::MemberDowned { .. } => "member_downed",
            Self::MemberRemoved { .. } => "member_removed",
            Self::AppMessage { .. } => "app_message",
            Self::AppDeadLetter { .. } => "app_dead_letter",
            Self::LeftCluster { .. } => "left_cluster",
            Self::RegionStopped { .. } => "region_stopped",
            Self::CoordinatorStarted { .. } => "coordinator_started",
            Self::CoordinatorStopped { .. } => "coordinator_stopped",
            Self::Rebalance { .. } => "rebalance",
            Self::ShardAllocated { .. } => "shard_allocated",
            Self::HandoffAbandoned { .. } => "handoff_abandoned",
            Self::HandoffCompleted { .. } => "handoff_completed",
            Self::RebalanceCompleted { .. } => "rebalance_completed",
            Self::ShardHomeAnswered { .. } => "shard_home_answered",
            Self::AllocationWaiting { .. } => "allocation_waiting",
        }
    }
}

/// Successful answers to commands.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[non_exhaustive]
pub enum Reply {
    /// The command was accepted; its effects follow asynchronously.
    Accepted,
    /// This node's region state.
    ShardRegionState {
        /// Hosted shards with their live entities, in shard order.
        shards: Vec<(ShardId, Vec<EntityId>)>,
    },
    /// Where an entity lives.
    EntityLocation {
        /// The entity.
        entity: EntityId,
        /// Its shard.
        shard: ShardId,
        /// The region hosting the shard, if known.
        region: Option<MemberId>,
        /// Whether the entity is running there.
        alive: bool,
    },
    /// Registered hosting regions.
    CurrentRegions {
        /// Their members, in order.
        regions: Vec<MemberId>,
    },
    /// Entity counts per shard per region.
    ClusterShardingStats {
        /// Regions that answered.
        regions: Vec<RegionStats>,
        /// Regions that did not answer in time.
        failed: Vec<MemberId>,
    },
    /// The type's coordinator's state (boxed: it is the largest reply by far, and every effect
    /// is as large as the largest).
    CoordinatorState(Box<CoordinatorState>),
    /// The decisions about an entity's shard and letters (boxed, as the coordinator's state).
    Explanation(Box<crate::message::Explanation>),
    /// The entity runs (it was started, or was already running).
    EntityStarted {
        /// The entity.
        entity: EntityId,
        /// Its shard.
        shard: ShardId,
        /// The region it runs in.
        region: MemberId,
    },
}
