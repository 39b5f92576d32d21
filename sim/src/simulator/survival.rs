//! The simulator judges each downing against the true topology (see `crate::survival`): a
//! member downed while on a side that held a majority of a calm network is recorded, and a run
//! that then ends without survivors fails liveness instead of being classified.

use std::collections::BTreeSet;

use shoal_core::{MemberStatus, NodeId};

use super::Simulator;

impl Simulator {
    /// Notes a change of connectivity (partition, heal, crash, restart, pause, resume).
    pub(super) fn connectivity_changed(&mut self) {
        let whole = !self.net.partitioned()
            && self.nemesis.out().is_empty()
            && !self.nodes.values().any(|n| n.is_paused());
        self.survival.changed(self.now, whole);
    }

    /// Node `n`'s member was downed (it heard so). If the network was calm and `n` was on a
    /// side holding a majority of the members its view counts, record it.
    pub(super) fn judge_downing(&mut self, n: NodeId) {
        let Some(node) = self.nodes.get(&n) else {
            return;
        };
        if !self.survival.calm(self.now) || self.survival.is_operator_down(node.id) {
            return;
        }
        let view = node.driver.node().view();
        // As the core counts: all but Joining members count; a side holds only its Up and
        // Leaving ones (Down ones count against it, and an Exiting one is on its way out).
        let counted: Vec<_> = (view.members().iter())
            .filter(|m| m.status != MemberStatus::Joining)
            .collect();
        let Some(lowest) = counted.first().map(|m| m.id) else {
            return;
        };
        let holds = |status| matches!(status, MemberStatus::Up | MemberStatus::Leaving);
        let candidates = (counted.iter())
            .filter(|m| m.id == node.id || holds(m.status))
            .filter(|m| {
                (self.nodes.get(&m.id.node)).is_some_and(|p| p.id == m.id && !p.is_paused())
            })
            .map(|m| m.id);
        // The members that reach `n` and one another (as the oracle groups sides).
        let mut side: BTreeSet<shoal_core::MemberId> = [node.id].into();
        for id in candidates {
            if side.iter().all(|s| self.net.connected(s.node, id.node)) {
                side.insert(id);
            }
        }
        let majority = side.len() * 2 > counted.len()
            || (side.len() * 2 == counted.len() && side.contains(&lowest));
        if majority {
            let member = node.id;
            let names: Vec<String> = side.iter().map(ToString::to_string).collect();
            let detail = format!(
                "{member} was downed on a side holding a majority of a calm network: {} of {} \
                 counted members ({})",
                side.len(),
                counted.len(),
                names.join(", ")
            );
            self.mark("a member on a majority side of a calm network was downed");
            self.survival.downed_on_majority(self.now, member, detail);
        }
    }
}
