//! Membership as the simulator shows it: who is Up and a member (from the nodes' own membership, or
//! the oracle's), the views the oracle publishes to nodes (each after its own detection delay),
//! who is unreachable, and the Up members clients send through.

use std::collections::BTreeSet;
use std::time::Duration;

use shoal_core::{Input, MemberId, MemberStatus, MembershipView, NodeId};

use crate::events::Ev;
use crate::options::MembershipMode;
use crate::trace::TraceEvent;

use super::Simulator;

impl Simulator {
    /// Running processes of current Up members that serve the entity type (those clients
    /// send through; the bystander runs none).
    pub(crate) fn up_members(&self) -> Vec<MemberId> {
        (self.nodes.values())
            .map(|n| n.id)
            .filter(|&id| self.is_up(id))
            .collect()
    }

    /// Whether `id` runs, is Up and hosts the type (not the bystander): what clients send
    /// through.
    pub(crate) fn is_up(&self, id: MemberId) -> bool {
        self.opts.cluster.bystander != Some(id.node)
            && self.own_status(id) == Some(MemberStatus::Up)
    }

    /// Where the coordinator runs (the oldest Up member hosting the type), as the cluster
    /// sees it.
    pub(crate) fn oldest_up(&self) -> Option<MemberId> {
        match self.opts.cluster.membership {
            MembershipMode::Real => self
                .nodes
                .values()
                .filter(|n| self.is_member(n.id))
                .find_map(|n| n.driver.node().view().coordinator_of(&self.ty, None)),
            MembershipMode::Oracle => self.oracle.view().coordinator_of(&self.ty, None),
        }
    }

    /// The application versions of the running Up members.
    pub(crate) fn app_versions(&self) -> BTreeSet<shoal_core::AppVersion> {
        self.up_members()
            .into_iter()
            .filter_map(|id| {
                let node = self.nodes.get(&id.node)?;
                node.driver.node().view().member(id).map(|m| m.app_version)
            })
            .collect()
    }

    /// Whether the process of `member` (that incarnation) runs.
    pub(crate) fn is_running(&self, member: MemberId) -> bool {
        self.nodes.get(&member.node).is_some_and(|n| n.id == member)
    }

    /// Whether `id` runs and is a member (not Down, not removed).
    pub(crate) fn is_member(&self, id: MemberId) -> bool {
        self.own_status(id).is_some_and(|s| s != MemberStatus::Down)
    }

    /// `id`'s status: in its own view with the real membership, in the oracle's otherwise.
    fn own_status(&self, id: MemberId) -> Option<MemberStatus> {
        match self.opts.cluster.membership {
            MembershipMode::Real => {
                let node = self.nodes.get(&id.node).filter(|n| n.id == id)?;
                node.driver.node().view().status(id)
            }
            MembershipMode::Oracle => self.oracle.is_member(id).then(|| {
                if self.oracle.is_up(id) {
                    MemberStatus::Up
                } else {
                    MemberStatus::Leaving
                }
            }),
        }
    }

    /// Brings up to date the running Up members clients send through (worked out again only
    /// when the membership or the set of processes changed: clients send thousands of
    /// messages, commands and queries between).
    pub(crate) fn refresh_senders(&mut self) {
        let key = (
            self.oracle.version + self.own_statuses_changed,
            self.nodes_epoch,
        );
        if self.workload.senders_stale(key) {
            let up = self.up_members();
            self.workload.set_senders(key, up);
        }
    }

    /// Delivers the oracle's current view to every running node.
    pub(crate) fn publish_to_everyone(&mut self) {
        let everyone: BTreeSet<NodeId> = self.nodes.keys().copied().collect();
        self.publish(&everyone, self.oracle.view());
    }

    /// Delivers `view` to each of `to` (running nodes) after its own detection delay (with the
    /// oracle; the real membership spreads views itself).
    pub(crate) fn publish(&mut self, to: &BTreeSet<NodeId>, view: MembershipView) {
        if self.opts.cluster.membership == MembershipMode::Real {
            return;
        }
        let version = self.oracle.version;
        for n in to {
            let Some(node) = self.nodes.get(n) else {
                continue;
            };
            let member = node.id;
            let delay = self
                .rng_membership
                .duration(Duration::from_millis(10), self.opts.cluster.detection_delay);
            let ev = Ev::View {
                member,
                version,
                view: view.clone(),
            };
            self.schedule(self.now + delay, ev);
        }
    }

    /// `member` hears the oracle's view `version`, unless it has heard a newer one.
    pub(crate) fn deliver_view(&mut self, member: MemberId, version: u64, view: MembershipView) {
        let Some(node) = self.nodes.get_mut(&member.node).filter(|n| n.id == member) else {
            return;
        };
        if version > node.view_version {
            node.view_version = version;
            self.log(|| TraceEvent::View {
                member: member.to_string(),
                version: Some(version),
                members: crate::trace::view_entries(&view),
            });
            self.input(member.node, Input::MembershipChanged(view));
            // The oracle's views come without a view-change event.
            self.coordinator_view_changed(member.node);
        }
    }

    /// Members (by address) that some running member cannot reach: crashed but not yet
    /// removed, paused, or cut off by a partition in either direction.
    pub(crate) fn unreachable(&self) -> BTreeSet<NodeId> {
        // Observers: members whose process runs (a downed process that still runs is no
        // longer a member, and what it cannot reach does not count).
        let live: Vec<NodeId> = self
            .nodes
            .values()
            .filter(|n| !n.is_paused() && self.oracle.is_member(n.id))
            .map(|n| n.id.node)
            .collect();
        self.oracle
            .view()
            .members()
            .iter()
            .map(|m| m.id)
            .filter(|m| {
                let running = self.nodes.get(&m.node).is_some_and(|n| n.id == *m);
                !running
                    || !live.contains(&m.node)
                    || live.iter().any(|o| !self.net.connected(m.node, *o))
            })
            .map(|m| m.node)
            .collect()
    }
}
