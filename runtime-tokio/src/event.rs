//! The node's stream of cluster and sharding events ([`crate::Node::events`]).

use shoal_core::{Address, MemberId};

/// Something that happened in the cluster or on this node.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum NodeEvent {
    /// A member became Up (this node included).
    MemberUp {
        /// The member.
        member: MemberId,
        /// Where it is reached.
        address: Option<Address>,
    },
    /// A member was removed from the cluster (after leaving, or downed).
    MemberRemoved {
        /// The member.
        member: MemberId,
    },
    /// This node's failure detector (or a peer's, through gossip) lost a member.
    MemberUnreachable {
        /// The member.
        member: MemberId,
    },
    /// A member unreachable before is reachable again.
    MemberReachable {
        /// The member.
        member: MemberId,
    },
    /// A member was marked Down (by the split-brain resolver or by hand); it is removed once
    /// every member has seen that.
    MemberDowned {
        /// The member.
        member: MemberId,
    },
    /// A sharding event of this node: shards started and stopped, dead letters with their
    /// reasons, rebalances, coordinator changes, allocation waiting.
    Sharding(shoal_core::Event),
    /// The node stopped (it left the cluster, or was aborted); no event follows.
    Stopped,
}
