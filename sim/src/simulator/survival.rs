//! The simulator judges each downing against the true topology (see `crate::survival`): a
//! member downed while on a side that held a majority of a calm network is a liveness
//! violation, whether or not others survive (a run that ends without survivors is then not
//! classified as having lost its majority).

use std::collections::BTreeSet;

use shoal_core::{Instant, Member, MemberId, MemberStatus, NodeId};

use crate::check::Property;
use crate::options::{Downing, Lease};

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
    /// side that survives under the run's strategy, of the members its view counts (as the
    /// core counts them), that is a violation.
    pub(super) fn judge_downing(&mut self, n: NodeId) {
        let Some(node) = self.nodes.get(&n) else {
            return;
        };
        if !self.survival.calm(self.now) || self.survival.is_operator_down(node.id) {
            return;
        }
        if !self.sides_are_cliques() {
            // A node that joined during a partition reaches both sides: each member sees all
            // but the bridge observed unreachable by someone, and keep-majority (like Akka's
            // split brain resolver, which downs every indirectly connected member) keeps no
            // side. Only a network that splits into sides is judged.
            self.mark("a member was downed in a network bridged by a node reaching both sides");
            return;
        }
        // The members that reach `n` and one another (as the oracle groups sides), among the
        // Up and Leaving ones: only those hold a side. A member that was Exiting (or still
        // Joining) when it was downed held none: keep-majority counts it on no side.
        let holds = |status| matches!(status, MemberStatus::Up | MemberStatus::Leaving);
        if !node.status_before_down.is_some_and(holds) {
            self.mark("a member downed while it held no side (Exiting or Joining) is not judged");
            return;
        }
        let view = node.driver.node().view();
        // A member that learned it is Down (an operator's Down the others never heard, say)
        // has stopped serving and heartbeating: it holds no side, however it is connected.
        let process = |id: MemberId| self.nodes.get(&id.node).filter(|p| p.id == id);
        let learned_down =
            |id| process(id).is_some_and(|p| p.own_status == Some(MemberStatus::Down));
        let runs = |id| process(id).is_some_and(|p| !p.is_paused()) && !learned_down(id);
        let joins = |side: &BTreeSet<MemberId>, id: MemberId| {
            side.iter().all(|s| self.net.connected(s.node, id.node))
        };
        let mut side: BTreeSet<MemberId> = [node.id].into();
        for m in view
            .members()
            .iter()
            .filter(|m| holds(m.status) && runs(m.id))
        {
            if joins(&side, m.id) {
                side.insert(m.id);
            }
        }
        let downed_on_side = (view.members().iter())
            .any(|m| holds(m.status) && learned_down(m.id) && joins(&side, m.id));
        // Counted as keep-majority counts: Up, Leaving and Down members, and Joining or
        // Exiting ones off the side (the other side may count them as Up or Leaving).
        let reached = |id: MemberId| runs(id) && joins(&side, id);
        let counted: Vec<&Member> = (view.members().iter())
            .filter(|m| holds(m.status) || m.status == MemberStatus::Down || !reached(m.id))
            .collect();
        if self.opts.cluster.downing == Downing::LeaseMajority && !self.side_holds_the_lease(&side)
        {
            // The majority asks first, but a minority whose detectors were seconds faster, a
            // store that failed, or a grant from an earlier partition held by another leader
            // decides otherwise: only a side that got the lease is owed survival.
            self.mark("a lease-majority downing on a side without the lease is not judged");
            return;
        }
        let member = node.id;
        let survives = side_survives(self.opts.cluster.downing, &self.opts, &side, &counted);
        let counted = counted.len();
        if downed_on_side {
            self.mark("a member that learned it is Down holds no side");
        }
        if survives {
            let names: Vec<String> = side.iter().map(ToString::to_string).collect();
            let detail = format!(
                "{member} was downed on a side that survives a calm network under {}: {} of {} \
                 counted members ({})",
                self.opts.cluster.downing.name(),
                side.len(),
                counted,
                names.join(", ")
            );
            self.check
                .fail(self.now, Property::Liveness, member, detail);
        }
    }

    /// Whether the side's leader (its lowest member) held the downing lease within the
    /// decision window, from a store whose answers all arrive: under lease-majority, the side
    /// then survives. (A grant held by another member of the side, from an earlier partition
    /// it led, refuses its leader now; a grant whose answer was lost or came as a failure was
    /// never acted on.)
    fn side_holds_the_lease(&self, side: &BTreeSet<MemberId>) -> bool {
        let window = crate::survival::DECISION_WINDOW.as_nanos() as u64;
        let since = Instant(self.now.as_nanos().saturating_sub(window));
        let faultless = self.opts.lease.as_ref().is_none_or(Lease::is_faultless);
        (self.leasing.as_ref().filter(|_| faultless))
            .and_then(|l| l.downing_holder(since))
            .is_some_and(|holder| side.first() == Some(&holder))
    }

    /// Whether the running nodes split into sides that reach all of their own side and none of
    /// the others (connectivity is transitive).
    fn sides_are_cliques(&self) -> bool {
        let running: Vec<NodeId> = self.nodes.keys().copied().collect();
        let connected = |a: NodeId, b: NodeId| self.net.connected(a, b);
        running.iter().all(|&a| {
            running
                .iter()
                .filter(|&&b| b != a && connected(a, b))
                .all(|&b| {
                    (running.iter())
                        .all(|&c| c == a || c == b || !connected(b, c) || connected(a, c))
                })
        })
    }
}

/// Whether `side` (the members reaching one another, all Up or Leaving) survives under
/// `downing`, against the `counted` members (counted as the core counts them: Up, Leaving and
/// Down members, and Joining or Exiting ones off the side).
fn side_survives(
    downing: Downing,
    opts: &crate::options::Options,
    side: &BTreeSet<MemberId>,
    counted: &[&Member],
) -> bool {
    let others = counted.iter().filter(|m| !side.contains(&m.id)).count();
    match downing {
        // Judged only on a side holding the lease (see `side_holds_the_lease`), and owed
        // survival when it also holds a majority: a minority decides after the delay and
        // the store's answer, late enough to meet its unstable bound first.
        Downing::KeepMajority | Downing::Auto | Downing::LeaseMajority => {
            let lowest = counted.iter().map(|m| m.id).min();
            side.len() * 2 > counted.len()
                || (side.len() * 2 == counted.len() && lowest.is_some_and(|l| side.contains(&l)))
        }
        Downing::StaticQuorum => {
            let quorum = crate::bounds::static_quorum(opts.cluster.nodes);
            side.len() >= quorum && counted.len() < 2 * quorum
        }
        Downing::KeepOldest { down_if_alone } => {
            let oldest = (counted.iter())
                .filter(|m| m.status != MemberStatus::Joining)
                .min_by_key(|m| (m.up_number, m.id));
            oldest.is_some_and(|oldest| {
                if side.contains(&oldest.id) {
                    !(down_if_alone && side.len() == 1 && others >= 2)
                } else {
                    down_if_alone
                        && others == 1
                        && side.len() >= 2
                        && oldest.status != MemberStatus::Down
                }
            })
        }
        Downing::DownAll => false,
    }
}
