//! The membership oracle (until the membership state machine lands, issue 4): it knows the true
//! membership, tells each node about changes after a per-node detection delay, and after
//! `stable-after` of unchanged connectivity decides who is downed:
//!
//! - keep-majority: the side holding more than half of the members survives (a tie goes to the
//!   side with the lowest address); every other side is told it is Down (its regions stop their
//!   entities) and the survivors remove it. Without a surviving side everyone downs itself.
//! - auto-down (negative control): every side removes the members it cannot reach and goes on.

use std::collections::{BTreeMap, BTreeSet};

use shoal_core::{EntityType, Member, MemberId, MemberStatus, MembershipView, NodeId};

use crate::options::Downing;

/// The oracle's knowledge.
#[derive(Debug)]
pub(crate) struct Oracle {
    /// Current members (Down members included until removed), by address.
    members: BTreeMap<NodeId, Member>,
    /// Removed members (tombstones, listed in every view).
    removed: BTreeSet<MemberId>,
    next_up_number: u64,
    downing: Downing,
    /// Incremented on every change; nodes apply only views newer than the one they have.
    pub(crate) version: u64,
}

/// Who gets which view after a downing decision.
#[derive(Debug, Default)]
pub(crate) struct Decision {
    /// Views to deliver: each node of the set gets the view.
    pub(crate) views: Vec<(BTreeSet<NodeId>, MembershipView)>,
    /// Members downed by this decision (they stop and must restart to rejoin).
    pub(crate) downed: Vec<MemberId>,
    /// No side kept a majority: the whole cluster downed itself.
    pub(crate) no_survivors: bool,
}

impl Oracle {
    /// An oracle with no members yet.
    pub(crate) fn new(downing: Downing) -> Self {
        Self {
            members: BTreeMap::new(),
            removed: BTreeSet::new(),
            next_up_number: 1,
            downing,
            version: 0,
        }
    }

    /// A new member (or a new incarnation of a node) hosting `hosts` joins and becomes Up.
    pub(crate) fn join(&mut self, id: MemberId, hosts: &[EntityType]) {
        let up_number = self.next_up_number;
        self.next_up_number += 1;
        let member = Member::up(id, up_number, &[])
            .hosting(hosts)
            .at(crate::nodes::address_of(id.node));
        if let Some(old) = self.members.insert(id.node, member) {
            self.removed.insert(old.id);
        }
        self.version += 1;
    }

    /// The cluster is gone (every process stopped): every member is removed, and the next
    /// ones join a new cluster.
    pub(crate) fn dissolve(&mut self) {
        let gone = std::mem::take(&mut self.members);
        self.removed.extend(gone.values().map(|m| m.id));
        self.version += 1;
    }

    /// The cluster's current view.
    pub(crate) fn view(&self) -> MembershipView {
        MembershipView::new(self.members.values().cloned().collect())
            .with_removed(self.removed.iter().copied())
    }

    /// Removes the member at `node`, keeping its tombstone; whether there was one.
    fn drop_member(&mut self, node: NodeId) -> bool {
        let Some(old) = self.members.remove(&node) else {
            return false;
        };
        self.removed.insert(old.id);
        true
    }

    /// Marks an Up member Leaving (it is handing off its shards).
    pub(crate) fn leaving(&mut self, node: NodeId) {
        self.advance(node, MemberStatus::Up, MemberStatus::Leaving);
    }

    /// Marks a Leaving member Exiting: its regions have stopped (it hosts nothing any more).
    pub(crate) fn exiting(&mut self, node: NodeId) {
        self.advance(node, MemberStatus::Leaving, MemberStatus::Exiting);
    }

    /// Moves the member at `node` from status `from` to `to`; a status never goes back.
    fn advance(&mut self, node: NodeId, from: MemberStatus, to: MemberStatus) {
        if let Some(m) = self.members.get_mut(&node).filter(|m| m.status == from) {
            m.status = to;
            self.version += 1;
        }
    }

    /// The status of `id`, if it is a current member.
    pub(crate) fn status(&self, id: MemberId) -> Option<MemberStatus> {
        self.members
            .get(&id.node)
            .filter(|m| m.id == id)
            .map(|m| m.status)
    }

    /// Removes a member that left gracefully.
    pub(crate) fn remove(&mut self, node: NodeId) {
        if self.drop_member(node) {
            self.version += 1;
        }
    }

    /// Marks exactly the members at `unreachable` addresses unreachable; whether anything
    /// changed.
    pub(crate) fn set_unreachable(&mut self, unreachable: &BTreeSet<NodeId>) -> bool {
        let mut changed = false;
        for (node, m) in &mut self.members {
            let reachable = !unreachable.contains(node);
            changed |= m.reachable != reachable;
            m.reachable = reachable;
        }
        if changed {
            self.version += 1;
        }
        changed
    }

    /// Whether no member is left (the cluster downed itself).
    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Whether `id` is a current Up member.
    pub(crate) fn is_up(&self, id: MemberId) -> bool {
        self.members
            .get(&id.node)
            .is_some_and(|m| m.id == id && m.status == MemberStatus::Up)
    }

    /// Whether `id` is a current member (and not Down).
    pub(crate) fn is_member(&self, id: MemberId) -> bool {
        self.members
            .get(&id.node)
            .is_some_and(|m| m.id == id && m.status != MemberStatus::Down)
    }

    /// Decides downing for the connectivity `sides` (groups of members that reach each
    /// other; crashed members are in no side).
    pub(crate) fn decide(&mut self, sides: &[BTreeSet<NodeId>]) -> Decision {
        let all: BTreeSet<NodeId> = self.members.keys().copied().collect();
        let reachable: BTreeSet<NodeId> = sides.iter().flatten().copied().collect();
        if sides.len() <= 1 && reachable == all {
            return Decision::default();
        }
        match self.downing {
            Downing::KeepMajority => self.keep_majority(&all, sides),
            Downing::Auto => self.auto_down(sides),
            // The oracle stands in for membership: it keeps the majority whatever strategy
            // the members are configured with (they do not decide while it does).
            Downing::StaticQuorum
            | Downing::KeepOldest { .. }
            | Downing::DownAll
            | Downing::LeaseMajority => self.keep_majority(&all, sides),
        }
    }

    fn keep_majority(&mut self, all: &BTreeSet<NodeId>, sides: &[BTreeSet<NodeId>]) -> Decision {
        let lowest = all.first().copied();
        let winner = sides.iter().find(|side| {
            let n = side.len() * 2;
            n > all.len() || (n == all.len() && lowest.is_some_and(|l| side.contains(&l)))
        });
        let mut decision = Decision::default();
        let losers: Vec<NodeId> = all
            .iter()
            .filter(|n| winner.is_none_or(|w| !w.contains(n)))
            .copied()
            .collect();
        // The losers are told they are Down: their regions stop every entity.
        let mut downed_view = self.view();
        let downed_members: Vec<Member> = downed_view
            .members()
            .iter()
            .cloned()
            .map(|mut m| {
                if losers.contains(&m.id.node) {
                    m.status = MemberStatus::Down;
                }
                m
            })
            .collect();
        downed_view = MembershipView::new(downed_members);
        let losing_nodes: BTreeSet<NodeId> = losers.iter().copied().collect();
        decision.views.push((losing_nodes, downed_view));
        decision.downed = losers
            .iter()
            .filter_map(|n| self.members.get(n))
            .map(|m| m.id)
            .collect();
        for n in &losers {
            self.drop_member(*n);
        }
        self.version += 1;
        match winner {
            Some(w) => decision.views.push((w.clone(), self.view())),
            None => decision.no_survivors = true,
        }
        decision
    }

    fn auto_down(&mut self, sides: &[BTreeSet<NodeId>]) -> Decision {
        // Each side removes everyone it cannot reach and carries on: split brain. The oracle's
        // own record follows the largest side.
        let mut decision = Decision::default();
        for side in sides {
            let members: Vec<Member> = self
                .members
                .values()
                .filter(|m| side.contains(&m.id.node))
                .cloned()
                .collect();
            decision
                .views
                .push((side.clone(), MembershipView::new(members)));
        }
        let largest = sides
            .iter()
            .max_by_key(|s| s.len())
            .cloned()
            .unwrap_or_default();
        let gone: Vec<NodeId> = self
            .members
            .keys()
            .filter(|n| !largest.contains(n))
            .copied()
            .collect();
        decision.downed = gone
            .iter()
            .filter_map(|n| self.members.get(n))
            .map(|m| m.id)
            .collect();
        for n in gone {
            self.drop_member(n);
        }
        self.version += 1;
        decision
    }
}
