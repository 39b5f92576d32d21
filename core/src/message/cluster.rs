//! Membership messages between nodes (Akka's cluster daemon protocol, reduced to what Shoal
//! needs): joining through seed nodes, gossip of the membership state, and heartbeats.

use std::collections::BTreeSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::id::{Address, AppVersion, EntityType};
use crate::members::Seen;
use crate::members::{Gossip, StateDigest};

/// One membership message.
#[derive(Clone, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub enum ClusterMessage {
    /// A node that wants to join asks a seed node whether it is a member that takes joins.
    /// Addressed to the seed's node with incarnation 0 (the joiner cannot know it).
    InitJoin {
        /// Where the joiner can be reached (it is no member yet, so nobody else knows).
        address: Address,
    },
    /// A seed node that is a member answers `InitJoin`.
    InitJoinAck,
    /// A bootstrapping node in no cluster answers `InitJoin` (added in protocol version 8):
    /// the contacts it knows, and whether it may form a cluster (see
    /// `MembershipSettings::bootstrap`).
    InitJoinNack {
        /// The contacts the sender knows.
        known: KnownDigest,
        /// Whether the sender may form a cluster.
        may_form: bool,
    },
    /// Asks to join the cluster: the receiver adds the sender as Joining and answers `Welcome`.
    Join {
        /// The joiner's roles.
        roles: BTreeSet<String>,
        /// The joiner's application version.
        app_version: AppVersion,
        /// The entity types the joiner hosts.
        hosts: BTreeSet<EntityType>,
        /// Where the joiner can be reached.
        address: Address,
    },
    /// The join was accepted; here is the current membership state.
    Welcome(Box<Gossip>),
    /// The sender's membership state. A receiver that knows something the sender does not
    /// answers with its own.
    Gossip(Box<Gossip>),
    /// A gossip round to a member that has seen the sender's state: digests instead of the
    /// state (Akka's `GossipStatus`); also the answer to a gossip whose seen set lacked the
    /// receiver, so that the sender learns it was seen. A receiver whose state differs answers
    /// with its full `Gossip`; one whose seen set differs, with `GossipSeen`.
    GossipStatus {
        /// The digest of the sender's state.
        state: StateDigest,
        /// The digest of the sender's seen set.
        seen: u64,
        /// A gossip round, which a receiver holding another state or seen set answers; not
        /// a talkback, which only tells the receiver that the sender holds that state (if the
        /// receiver's state moved on meanwhile, answering would send it back for nothing).
        answer: bool,
    },
    /// The members that have seen the state with this digest, as the sender knows them (the
    /// answer to a `GossipStatus` whose seen digest differed), so that both ends learn the
    /// union.
    GossipSeen {
        /// The digest of the sender's state.
        state: StateDigest,
        /// Who has seen it.
        seen: Seen,
        /// The receiver should answer with the members it knows beyond `seen`, if any.
        answer: bool,
    },
    /// A failure-detector probe, answered by `HeartbeatRsp`.
    Heartbeat {
        /// Echoed in the answer.
        sequence: u64,
    },
    /// Answers `Heartbeat`.
    HeartbeatRsp {
        /// The probe's sequence number.
        sequence: u64,
    },
    /// Lease-majority: the sender holds the cluster's downing lease and reaches the receiver,
    /// which may keep going past its unstable bound for `cover` from the message's arrival
    /// (see the downing module's `cover`).
    DowningLeaseHeld {
        /// How long the cover runs.
        cover: Duration,
    },
}

/// A known set as answers carry it: its size and a digest of its addresses in order.
#[derive(Clone, Copy, Debug, Deserialize, Eq, PartialEq, Serialize)]
#[cfg_attr(feature = "arbitrary", derive(arbitrary::Arbitrary))]
pub struct KnownDigest {
    /// How many contacts.
    pub contacts: u32,
    /// A hash of their addresses, in address order.
    pub digest: u64,
}
