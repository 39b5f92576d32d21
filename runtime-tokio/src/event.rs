//! The node's stream of cluster and sharding events ([`crate::Node::events`]).

use std::collections::BTreeMap;

use shoal_core::{Address, MemberId, MemberStatus, MembershipView};

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
    /// A sharding event of this node: shards started and stopped, dead letters with their
    /// reasons, rebalances, coordinator changes, allocation waiting.
    Sharding(shoal_core::Event),
    /// The node stopped (it left the cluster, or was aborted); no event follows.
    Stopped,
}

/// What the host last told about each member, to turn view changes into events.
#[derive(Debug, Default)]
pub(crate) struct MemberTracker {
    known: BTreeMap<MemberId, (MemberStatus, bool)>,
}

impl MemberTracker {
    /// The events between the last view and `view`, in member order.
    pub(crate) fn changes(&mut self, view: &MembershipView) -> Vec<NodeEvent> {
        let mut events = Vec::new();
        let mut now = BTreeMap::new();
        for m in view.members() {
            let before = self.known.get(&m.id).copied();
            let was_up = before.is_some_and(|(status, _)| status == MemberStatus::Up);
            if m.status == MemberStatus::Up && !was_up {
                events.push(NodeEvent::MemberUp {
                    member: m.id,
                    address: m.address.clone(),
                });
            }
            let was_reachable = before.is_none_or(|(_, reachable)| reachable);
            if was_reachable && !m.reachable {
                events.push(NodeEvent::MemberUnreachable { member: m.id });
            } else if !was_reachable && m.reachable {
                events.push(NodeEvent::MemberReachable { member: m.id });
            }
            now.insert(m.id, (m.status, m.reachable));
        }
        for member in self.known.keys() {
            if !now.contains_key(member) {
                events.push(NodeEvent::MemberRemoved { member: *member });
            }
        }
        self.known = now;
        events
    }
}
