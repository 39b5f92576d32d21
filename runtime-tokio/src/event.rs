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
            let was_down = before.is_some_and(|(status, _)| status == MemberStatus::Down);
            if m.status == MemberStatus::Down && !was_down {
                events.push(NodeEvent::MemberDowned { member: m.id });
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

/// Logs a membership event at INFO, with the member's address (as Akka logs its cluster
/// events): an operator reading one node's log sees the cluster change around it.
pub(crate) fn log_member_event(event: &NodeEvent, view: &MembershipView) {
    let address = |member: &MemberId| {
        view.members()
            .iter()
            .find(|m| m.id == *member)
            .and_then(|m| m.address.as_ref())
            .map_or_else(|| "?".to_string(), |a| a.to_string())
    };
    match event {
        NodeEvent::MemberUp { member, .. } => {
            tracing::info!(%member, address = %address(member), "member up");
        }
        NodeEvent::MemberUnreachable { member } => {
            tracing::info!(%member, address = %address(member), "member unreachable");
        }
        NodeEvent::MemberReachable { member } => {
            tracing::info!(%member, address = %address(member), "member reachable again");
        }
        NodeEvent::MemberDowned { member } => {
            tracing::info!(%member, address = %address(member), "member downed");
        }
        NodeEvent::MemberRemoved { member } => tracing::info!(%member, "member removed"),
        NodeEvent::Sharding(_) | NodeEvent::Stopped => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_core::{Member, MembershipView};

    fn member(id: u64, status: MemberStatus, reachable: bool) -> Member {
        let mut m = Member::up(MemberId::new(id, 1), id, &[]);
        m.status = status;
        m.reachable = reachable;
        m
    }

    #[test]
    fn view_changes_become_member_events_once_each() {
        let mut tracker = MemberTracker::default();
        let first = MembershipView::new(vec![
            member(1, MemberStatus::Up, true),
            member(2, MemberStatus::Joining, true),
        ]);
        let up1 = NodeEvent::MemberUp {
            member: MemberId::new(1, 1),
            address: None,
        };
        assert_eq!(tracker.changes(&first), vec![up1]);
        assert_eq!(tracker.changes(&first), vec![], "no change, no event");
        let second = MembershipView::new(vec![
            member(1, MemberStatus::Up, false),
            member(2, MemberStatus::Up, true),
        ]);
        let m1 = MemberId::new(1, 1);
        let m2 = MemberId::new(2, 1);
        assert_eq!(
            tracker.changes(&second),
            vec![
                NodeEvent::MemberUnreachable { member: m1 },
                NodeEvent::MemberUp {
                    member: m2,
                    address: None
                },
            ]
        );
        let third = MembershipView::new(vec![
            member(1, MemberStatus::Down, false),
            member(2, MemberStatus::Up, true),
        ]);
        assert_eq!(
            tracker.changes(&third),
            vec![NodeEvent::MemberDowned { member: m1 }]
        );
        let fourth = MembershipView::new(vec![member(2, MemberStatus::Up, true)]);
        assert_eq!(
            tracker.changes(&fourth),
            vec![NodeEvent::MemberRemoved { member: m1 }]
        );
    }
}
