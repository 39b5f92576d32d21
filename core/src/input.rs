//! What a host feeds into a [`crate::Node`].

use serde::{Deserialize, Serialize};

use crate::id::{EntityId, EntityType, Epoch, MemberId, NodeId, RequestId, SeedNode, ShardId};
use crate::lease::{LeaseAnswer, LeaseCall};
use crate::members::MembershipView;
use crate::message::{Envelope, Payload};
use crate::remember::{StoreCompletion, StoreRequest};

/// One input. The sequence of `(now, Input)` a node saw is a complete, replayable trace.
#[derive(Clone, Debug, Deserialize, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[non_exhaustive]
pub enum Input {
    /// A decoded message from a peer.
    Receive(Box<Envelope>),
    /// Membership changed; replaces the node's view.
    MembershipChanged(MembershipView),
    /// The host's discovery (DNS) found these contacts: a node bootstrapping from discovered
    /// contacts (`MembershipSettings::bootstrap`) probes them, and the lowest may form the
    /// cluster if none is in one. Ignored otherwise.
    ContactsDiscovered(Vec<SeedNode>),
    /// Send `payload` to an entity (fire and forget; failures surface as dead-letter events).
    Tell {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
        /// The message.
        payload: Payload,
    },
    /// A command or query; answered by exactly one [`crate::Event::Reply`]. A query another
    /// member answers fails with `CommandError::QueryTimedOut` if the answer does not arrive
    /// within `shard_region_query_timeout` (twice that for the coordinator's queries).
    Command {
        /// Echoed in the reply.
        request: RequestId,
        /// What to do.
        command: Command,
    },
    /// An entity the host ran has terminated (after a stop, or on its own).
    EntityStopped {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
    },
    /// Running entities were handed messages the host delivered itself, on a direct route
    /// (see [`crate::direct`]): they count as active now, for idle passivation and for the
    /// active-entity limit's policy. Ids not running here (or stopping) are ignored.
    Accessed {
        /// The entities' type.
        entity_type: EntityType,
        /// The entities, each once, in the order of their first access since the last report.
        entities: Vec<EntityId>,
    },
    /// A connection's reader delivered the data-lane envelopes of `from` up to number `seq`
    /// itself, on direct routes (see [`crate::direct`]): the node counts the number as
    /// accepted, so a copy of one of them is refused as a duplicate. Ignored for an
    /// incarnation older than one already heard from at that address.
    LinkConsumed {
        /// The sending member.
        from: MemberId,
        /// The last number the reader consumed.
        seq: u64,
    },
    /// An entity asks to be passivated (stopped gracefully, buffering its new messages).
    Passivate {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
    },
    /// Send an application message to a member (an `ask`'s reply to the asker): it arrives
    /// there as `Event::AppMessage`, in order with everything else this node sends it, and
    /// only at that incarnation. One that cannot be sent becomes `Event::AppDeadLetter`.
    SendApp {
        /// The receiving member (its incarnation: a reply never reaches a restarted asker).
        to: MemberId,
        /// The message, opaque to the core.
        payload: Payload,
    },
    /// The host dropped an envelope this node sent before it left: the outbound queue to its
    /// receiver was full. A letter or application message in it becomes a dead letter with
    /// reason `OutboundQueueFull` (a start request's requester hears it was dropped). A host
    /// should bound only envelopes that [`Envelope::is_user_traffic`] and always queue the
    /// protocol's own: the protocol survives their loss, but only through its timeouts.
    OutboundQueueFull {
        /// The envelope, as the node sent it.
        envelope: Box<Envelope>,
    },
    /// A remember-store request (`Effect::Store`) ended. Every request gets exactly one
    /// completion; a host that gives up on one (a timeout) completes it with `Failed`.
    StoreCompleted {
        /// The request, as the node sent it.
        request: StoreRequest,
        /// How it ended.
        completion: StoreCompletion,
    },
    /// The lease store answered a call (`Effect::Lease`). Every call gets exactly one answer;
    /// a host that gives up on one (a timeout) answers `LeaseAnswer::Failed`.
    LeaseAnswered {
        /// The call, as the node sent it.
        call: LeaseCall,
        /// How it ended.
        answer: LeaseAnswer,
    },
    /// A state store refused a write of a running entity: the store holds `current`, newer
    /// than the `epoch` its `EntityEffect::Start` carried, or a newer holder of the shard's
    /// lease claimed the shard (`current` may then be `epoch`). The host stops the entity (it
    /// must not write again); the node reports [`crate::Event::WriteFenced`] and, for a newer
    /// epoch, stops its instance of the shard as a fenced one (ignored if that instance is
    /// gone; an instance that lost its lease stops its entities already).
    WriteFenced {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
        /// The epoch the refused write carried.
        epoch: Epoch,
        /// The newer epoch the store holds.
        current: Epoch,
    },
    /// The host could not hand a delivered message to its entity: the entity's mailbox was
    /// full. It becomes a dead letter with reason `MailboxFull`.
    MailboxFull {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
        /// The message.
        payload: Payload,
    },
}

/// Commands and queries from the application or operator.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[non_exhaustive]
pub enum Command {
    /// Start an entity without a message (Akka's `StartEntity`).
    StartEntity {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
    },
    /// Leave the cluster gracefully: every region hands off its shards, then the member
    /// becomes Exiting, is removed, and the node emits `Event::LeftCluster`. Needs
    /// `Config::membership`.
    Leave,
    /// Make another member leave gracefully (Akka's `Cluster.leave(address)`): it is marked
    /// Leaving, and when it hears so it hands off its shards and leaves as with `Leave`.
    /// Needs `Config::membership`.
    LeaveMember {
        /// The member (this member itself means `Leave`).
        member: MemberId,
    },
    /// Mark a member Down (Akka's `Cluster.down(address)`): an operator's decision, for
    /// example with `Downing::Off` or to speed up the removal of a member known to be dead.
    /// A Down member stops its entities as soon as it hears it; the others reallocate its
    /// shards once it is removed and `down_removal_margin` has passed. Needs
    /// `Config::membership`.
    Down {
        /// The member (this member itself downs itself).
        member: MemberId,
    },
    /// Hand off every shard of one type (or all types) and stop the region(s).
    GracefulShutdown {
        /// `None` shuts down every region of this node.
        entity_type: Option<EntityType>,
    },
    /// Change the type's active-entity limit in this node's region (Akka's
    /// `SetActiveEntityLimit`): shards over their new share passivate what no longer fits.
    /// Fails for a type configured without a limit, or for zero.
    SetActiveEntityLimit {
        /// The type.
        entity_type: EntityType,
        /// Most entities active at once in this node's region.
        limit: usize,
    },
    /// Desired location of a shard, for the external allocation strategy.
    SetShardLocation {
        /// The shard's type.
        entity_type: EntityType,
        /// The shard.
        shard: ShardId,
        /// Where it should live.
        node: NodeId,
    },
    /// This node's region: its shards and their live entities.
    GetShardRegionState {
        /// The region's type.
        entity_type: EntityType,
    },
    /// Where an entity lives and whether it runs.
    GetEntityLocation {
        /// The entity's type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
    },
    /// The regions registered with the type's coordinator.
    GetCurrentRegions {
        /// The type.
        entity_type: EntityType,
    },
    /// Entity counts per shard per region, gathered by the coordinator.
    GetClusterShardingStats {
        /// The type.
        entity_type: EntityType,
    },
    /// The type's coordinator's state: its allocation gate (and whom it waits for), the
    /// shards allocated, handed off and asked for.
    GetCoordinatorState {
        /// The type.
        entity_type: EntityType,
    },
    /// Why an entity's shard lives where it does and what became of its letters: the
    /// decisions the type's coordinator and this node's region still hold about them
    /// (`Reply::Explanation`).
    Explain {
        /// The type.
        entity_type: EntityType,
        /// The entity.
        entity: EntityId,
    },
}
