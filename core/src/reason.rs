//! Why things stop and why messages are dropped: the reasons the wire, the effects and the
//! errors all name, so they sit below all three.

use serde::{Deserialize, Serialize};

/// Why an entity is stopped.
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
pub enum StopReason {
    /// It is passivated (for the cause given): send it its stop message after queued messages.
    Passivation(PassivationCause),
    /// Its shard is being handed off: send it its stop message after queued messages.
    HandOff,
    /// It did not stop in time, or its node left the cluster: terminate it now.
    Forced,
}

/// Why an entity is passivated.
#[derive(Clone, Copy, Debug, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
pub enum PassivationCause {
    /// It asked to (`Input::Passivate`).
    Requested,
    /// It received nothing for `passivate_idle_after`.
    Idle,
    /// Its shard was over its share of the type's active-entity limit, and the replacement
    /// policy chose it. A remembered entity stays remembered, dormant: it starts again on its
    /// next message, not when its shard starts again.
    Limit,
}

impl PassivationCause {
    /// Every cause, for counters by cause.
    pub const ALL: [Self; 3] = [Self::Requested, Self::Idle, Self::Limit];

    /// The cause's name in metrics and logs: `requested`, `idle`, `limit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requested => "requested",
            Self::Idle => "idle",
            Self::Limit => "limit",
        }
    }
}

/// Why a message was dropped.
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
#[non_exhaustive]
pub enum DeadLetterReason {
    /// The region's (or shard's) buffer was at `buffer_size`.
    BufferFull,
    /// No region of that entity type runs on this node.
    UnknownEntityType,
    /// The region has stopped (graceful shutdown finished, or this member was downed/removed).
    RegionStopped,
    /// The payload exceeds `max_payload_size`.
    PayloadTooLarge,
    /// A peer forwarded it under a shard its entity does not hash to (the peer runs with a
    /// different `number_of_shards`: a deployment error).
    ShardMismatch,
    /// An application message for a member that is gone: removed, or replaced by a newer
    /// incarnation of its node (a reply to an asker that restarted).
    MemberGone,
    /// The host's outbound queue to the receiving member was full
    /// (`Input::OutboundQueueFull`).
    OutboundQueueFull,
    /// The entity's mailbox in the host was full (`Input::MailboxFull`).
    MailboxFull,
    /// The remember store fenced this member's instance of the shard, and a coordinator that
    /// took over meanwhile placed the shard on another member: the letters held here would
    /// reach it after newer ones their senders send there directly, out of order.
    FencedShardMoved,
}

impl DeadLetterReason {
    /// The reason's name in snake case (`"buffer_full"`): the label every host's logs and
    /// metrics use.
    pub fn label(self) -> &'static str {
        match self {
            Self::BufferFull => "buffer_full",
            Self::UnknownEntityType => "unknown_entity_type",
            Self::RegionStopped => "region_stopped",
            Self::PayloadTooLarge => "payload_too_large",
            Self::ShardMismatch => "shard_mismatch",
            Self::MemberGone => "member_gone",
            Self::OutboundQueueFull => "outbound_queue_full",
            Self::MailboxFull => "mailbox_full",
            Self::FencedShardMoved => "fenced_shard_moved",
        }
    }
}
