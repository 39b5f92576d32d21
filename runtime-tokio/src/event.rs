//! The node's stream of cluster and sharding events ([`crate::Node::events`]).

use shoal_core::{Address, Event, MemberId};

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
    Sharding(Event),
    /// The node stopped (it left the cluster, or was aborted); no event follows.
    Stopped,
}

impl NodeEvent {
    /// The node event of one of the core's member events, with the member's address as the
    /// core gave it; `None` for any other event.
    pub(crate) fn of_member_event(event: &Event) -> Option<(Self, Option<&Address>)> {
        Some(match event {
            Event::MemberUp { member, address } => (
                Self::MemberUp {
                    member: *member,
                    address: address.clone(),
                },
                address.as_ref(),
            ),
            Event::MemberUnreachable { member, address } => (
                Self::MemberUnreachable { member: *member },
                address.as_ref(),
            ),
            Event::MemberReachable { member, address } => {
                (Self::MemberReachable { member: *member }, address.as_ref())
            }
            Event::MemberDowned { member, address } => {
                (Self::MemberDowned { member: *member }, address.as_ref())
            }
            Event::MemberRemoved { member, address } => {
                (Self::MemberRemoved { member: *member }, address.as_ref())
            }
            _ => return None,
        })
    }
}
