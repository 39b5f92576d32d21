//! The nemesis: which nodes are out of the cluster because of a fault (crashed, downed, left
//! and about to exit), the connectivity epoch downing decisions are taken on, and the random
//! stream the fault machinery draws its delays from. It decides nothing about the cluster
//! itself; the simulator applies faults (see `simulator/faults.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

use shoal_core::NodeId;

use crate::rng::SimRng;
use crate::schedule::Act;

/// Something the fault machinery schedules: a planned action, or a consequence of one.
#[derive(Clone, Debug, Eq, PartialEq)]
pub(crate) enum Fault {
    /// A planned action of the run's [`Schedule`](crate::Schedule) fires.
    Act(Act),
    /// Restart a crashed or downed node as a new incarnation.
    Restart(NodeId),
    /// Remove every partition.
    Heal,
    /// The downing decision for connectivity epoch `n` (skipped if connectivity changed since).
    Decide(u64),
    /// Checks whether a leaving member's region has stopped; if so it becomes Exiting.
    LeaveDone(NodeId),
    /// An Exiting member is removed, once every member has seen it Exiting.
    Remove(NodeId),
    /// A member that left exits, once every member has seen it removed.
    Exit(NodeId),
    /// A paused node runs again.
    Resume(NodeId),
}

/// What the faults did to the cluster's nodes so far.
#[derive(Debug)]
pub(crate) struct Nemesis {
    rng: SimRng,
    crashed: BTreeSet<NodeId>,
    downed: BTreeSet<NodeId>,
    left: BTreeSet<NodeId>,
    /// Crashed after leaving gracefully: their restart is not a fault.
    rejoining: BTreeSet<NodeId>,
    topology_epoch: u64,
    no_survivors: bool,
    lost_members: bool,
}

impl Nemesis {
    /// A nemesis drawing from `rng` (the run's fault stream).
    pub(crate) fn new(rng: SimRng) -> Self {
        Self {
            rng,
            crashed: BTreeSet::new(),
            downed: BTreeSet::new(),
            left: BTreeSet::new(),
            rejoining: BTreeSet::new(),
            topology_epoch: 0,
            no_survivors: false,
            lost_members: false,
        }
    }

    /// `node` crashed.
    pub(crate) fn crashed(&mut self, node: NodeId) {
        self.lost_members = true;
        self.crashed.insert(node);
    }

    /// A member is (about to be) downed: something was lost, whatever becomes of its process.
    pub(crate) fn member_lost(&mut self) {
        self.lost_members = true;
    }

    /// `node`'s process was downed and must restart: after the delay returned.
    pub(crate) fn downed(&mut self, node: NodeId) -> Duration {
        self.lost_members = true;
        self.downed.insert(node);
        self.rng
            .duration(Duration::from_secs(5), Duration::from_secs(30))
    }

    /// `node` was removed after leaving; its process exits once the others saw it.
    pub(crate) fn left(&mut self, node: NodeId) {
        self.left.insert(node);
    }

    /// `node` learned it was removed after leaving: it exits after the delay returned.
    pub(crate) fn left_cluster(&mut self, node: NodeId) -> Duration {
        self.left(node);
        self.rng
            .duration(Duration::from_secs(3), Duration::from_secs(4))
    }

    /// Whether `node` left and has not exited yet.
    pub(crate) fn has_left(&self, node: NodeId) -> bool {
        self.left.contains(&node)
    }

    /// `node` exited after leaving and comes back as a new incarnation after the delay
    /// returned (not a fault).
    pub(crate) fn rejoin_after_exit(&mut self, node: NodeId) -> Duration {
        self.left.remove(&node);
        self.crashed.insert(node);
        self.rejoining.insert(node);
        self.rng
            .duration(Duration::from_secs(1), Duration::from_secs(5))
    }

    /// Takes `node` out of the crashed or downed ones to restart it: `None` if it is neither,
    /// else whether the restart counts as a fault (not after a graceful leave).
    pub(crate) fn take_for_restart(&mut self, node: NodeId) -> Option<bool> {
        if !self.crashed.remove(&node) && !self.downed.remove(&node) {
            return None;
        }
        Some(!self.rejoining.remove(&node))
    }

    /// The whole cluster goes down: every one of `nodes` is out as crashed (whether it ran,
    /// was downed, or had left and not exited yet), to start again together.
    pub(crate) fn cluster_down(&mut self, nodes: &BTreeSet<NodeId>) {
        self.lost_members = true;
        for node in nodes {
            self.downed.remove(node);
            self.left.remove(node);
            self.rejoining.remove(node);
            self.crashed.insert(*node);
        }
    }

    /// Every downed node is taken for crashed instead (an operator stops them all).
    pub(crate) fn crash_downed(&mut self) -> Vec<NodeId> {
        let old: Vec<NodeId> = std::mem::take(&mut self.downed).into_iter().collect();
        self.crashed.extend(&old);
        old
    }

    /// Whether some node is crashed or downed now.
    pub(crate) fn any_out(&self) -> bool {
        !self.crashed.is_empty() || !self.downed.is_empty()
    }

    /// The crashed and downed nodes, to restart when the faults end.
    pub(crate) fn out(&self) -> Vec<NodeId> {
        self.crashed.iter().chain(&self.downed).copied().collect()
    }

    /// Connectivity changed: the epoch a downing decision must still match.
    pub(crate) fn topology_changed(&mut self) -> u64 {
        self.topology_epoch += 1;
        self.topology_epoch
    }

    /// Whether connectivity is as it was at `epoch`.
    pub(crate) fn is_current(&self, epoch: u64) -> bool {
        epoch == self.topology_epoch
    }

    /// Records that no side kept a surviving majority, if `none` says so.
    pub(crate) fn no_survivors_if(&mut self, none: bool) {
        self.no_survivors |= none;
    }

    /// Whether the whole cluster downed itself.
    pub(crate) fn no_survivors(&self) -> bool {
        self.no_survivors
    }

    /// Whether a process crashed or a member was downed (exactly-once is not owed then).
    pub(crate) fn lost_members(&self) -> bool {
        self.lost_members
    }
}
