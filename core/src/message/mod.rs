//! Wire messages between nodes: plain serde data, encoded by [`crate::codec`].
//!
//! Every message belongs to one entity type and travels in an [`Envelope`] naming the sending
//! and the receiving member (address plus incarnation), so a message for an earlier incarnation
//! of a restarted node is recognised and dropped. Messages *from* a coordinator are fenced by
//! `Envelope::from`: a region obeys only the coordinator its membership view names.

mod body;
mod cluster;
mod decisions;
mod letter;
mod reports;
mod route;

use serde::{Deserialize, Serialize};

pub use body::Body;
pub use cluster::{ClusterMessage, KnownDigest};
pub use decisions::{AllocationCause, Decision, DecisionRecord, Explanation};
pub(crate) use letter::{Delivery, Letter};
pub use letter::{StartAck, StartOutcome};
pub use reports::{AllocationGate, CoordinatorState, RegionShards, RegionStats};
pub(crate) use route::{Handled, Route};

use crate::id::{EntityType, MemberId};

/// Opaque application bytes carried to an entity.
#[derive(Clone, Debug, Default, Deserialize, Eq, Hash, Ord, PartialEq, PartialOrd, Serialize)]
pub struct Payload(#[serde(with = "serde_bytes")] pub Vec<u8>);

impl From<&[u8]> for Payload {
    fn from(bytes: &[u8]) -> Self {
        Self(bytes.to_vec())
    }
}

impl From<Vec<u8>> for Payload {
    fn from(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }
}

/// A message in flight from one member to another.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct Envelope {
    /// The sending member.
    pub from: MemberId,
    /// The receiving member; a node drops envelopes addressed to another incarnation.
    pub to: MemberId,
    /// Link sequence number: the sending `Node` numbers its envelopes to each member from 1,
    /// per [`Lane`], and the receiver drops any number it has already passed, so a frame the
    /// transport delivers twice is handled once. 0 means unnumbered (never deduplicated).
    pub seq: u64,
    /// What is sent.
    pub message: Message,
}

/// The two ordered streams of a link. A transport may let control traffic overtake data (so
/// membership and failure detection are never starved behind user traffic); each lane is
/// numbered on its own, so an overtaken envelope is still new to its receiver.
#[derive(Clone, Copy, Debug, Eq, Hash, Ord, PartialEq, PartialOrd)]
pub enum Lane {
    /// Cluster membership: gossip, heartbeats, joins.
    Control,
    /// Everything else: the sharding protocol, letters for entities, application messages.
    Data,
}

impl Envelope {
    /// The lane it travels on; [`Envelope::seq`] counts per lane.
    pub fn lane(&self) -> Lane {
        match self.message {
            Message::Cluster(_) => Lane::Control,
            Message::Sharding { .. } | Message::App { .. } => Lane::Data,
        }
    }

    /// Whether it carries the application's traffic (a letter for an entity, or an
    /// application message), which a host may refuse when its outbound queue is full
    /// (`Input::OutboundQueueFull`), rather than the protocol's own messages.
    pub fn is_user_traffic(&self) -> bool {
        match &self.message {
            Message::Sharding { body, .. } => {
                matches!(body, Body::Forward { .. } | Body::StartEntity { .. })
            }
            Message::App { .. } => true,
            Message::Cluster(_) => false,
        }
    }
}

/// What an envelope carries: one entity type's sharding protocol, or cluster membership.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum Message {
    /// A sharding protocol message of one entity type.
    Sharding {
        /// The entity type whose region or coordinator handles it.
        entity_type: EntityType,
        /// The message itself.
        body: Body,
    },
    /// A membership message (joining, gossip, heartbeats).
    Cluster(ClusterMessage),
    /// An application message between members (`Input::SendApp`, `Event::AppMessage`).
    App {
        /// The message, opaque to the core.
        payload: Payload,
    },
}

impl Message {
    /// The sharding message's body, if this is one.
    pub fn body(&self) -> Option<&Body> {
        match self {
            Self::Sharding { body, .. } => Some(body),
            Self::Cluster(_) | Self::App { .. } => None,
        }
    }
}
