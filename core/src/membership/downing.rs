//! Downing unreachable members (Akka's split brain resolver). Every member watches the
//! reachability it knows; once it has stayed the same for `stable-after`, it decides with the
//! configured strategy.
//!
//! Keep-majority: on the side holding more than half of the members (on a tie, the side holding
//! the lowest address; see `majority_side` for how members changing status are counted), the leader marks the unreachable members Down. On a
//! minority side every member downs *itself*: it stops its entities and its process, without
//! waiting to hear it from a leader that may already have stopped. The majority reallocates the
//! minority's shards only after `down-removal-margin`, by which time every minority member has
//! stopped: this is what keeps single activation under partitions.

use std::collections::BTreeSet;

use crate::id::MemberId;
use crate::membership::gossip::Gossip;
use crate::membership::settings::Downing;
use crate::membership::view::MemberStatus;
use crate::time::Instant;

/// Tracks how long reachability has been stable and decides whom to down.
#[derive(Debug)]
pub(crate) struct Downer {
    strategy: Downing,
    /// The unreachable members (not yet Down) and the members, as last seen.
    observed: (BTreeSet<MemberId>, BTreeSet<MemberId>),
    stable_since: Instant,
    /// The decision for this stable situation was taken (possibly "nothing to do, I do not
    /// lead"): no deadline until the situation changes.
    decided: bool,
}

impl Downer {
    pub(crate) fn new(strategy: Downing, now: Instant) -> Self {
        Self {
            strategy,
            observed: (BTreeSet::new(), BTreeSet::new()),
            stable_since: now,
            decided: false,
        }
    }

    /// Notes the current state as `me` sees it; any change restarts the stability clock.
    pub(crate) fn observe(&mut self, now: Instant, me: MemberId, gossip: &Gossip) {
        let observed = (undowned_unreachable(me, gossip), member_ids(gossip));
        if observed != self.observed {
            self.observed = observed;
            self.stable_since = now;
            self.decided = false;
        }
    }

    /// When a decision may be due.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let stable_after = match self.strategy {
            Downing::KeepMajority { stable_after }
            | Downing::AutoDown {
                after: stable_after,
            } => stable_after,
            Downing::Off => return None,
        };
        (!self.observed.0.is_empty() && !self.decided).then_some(self.stable_since + stable_after)
    }

    /// The members `me` should mark Down now, once the situation has been stable long enough:
    /// the unreachable ones if `me` leads a winning side, `me` itself on a losing side.
    /// Decides once per stable situation.
    pub(crate) fn decide(
        &mut self,
        now: Instant,
        me: MemberId,
        gossip: &Gossip,
    ) -> BTreeSet<MemberId> {
        if self.deadline().is_none_or(|at| now < at) {
            return BTreeSet::new();
        }
        self.decided = true;
        let unreachable = &self.observed.0;
        let leads = gossip.leader(me) == Some(me);
        match self.strategy {
            Downing::AutoDown { .. } if leads => unreachable.clone(),
            Downing::KeepMajority { .. } if majority_side(gossip, unreachable) => {
                if leads {
                    unreachable.clone()
                } else {
                    BTreeSet::new()
                }
            }
            Downing::KeepMajority { .. } => [me].into(),
            Downing::AutoDown { .. } | Downing::Off => BTreeSet::new(),
        }
    }
}

fn member_ids(gossip: &Gossip) -> BTreeSet<MemberId> {
    gossip.members().map(|m| m.id).collect()
}

/// Members `me`'s side cannot reach that are not Down yet.
fn undowned_unreachable(me: MemberId, gossip: &Gossip) -> BTreeSet<MemberId> {
    gossip
        .unreachable_from(me)
        .into_iter()
        .filter(|id| {
            gossip
                .member(*id)
                .is_some_and(|m| m.status != MemberStatus::Down)
        })
        .collect()
}

/// Keep-majority, decided pessimistically so that two sides can never both win while a member
/// changes status across the partition: the side must hold more than half of every member that
/// anyone might count (Joining, Up or Leaving), counting on its own side only members that are
/// surely counted everywhere (Up or Leaving); on an exact half, the side holding the lowest
/// address wins.
///
/// Why both halves of the rule: a member moved Up by the leader right before the partition is
/// Up on one side and still Joining on the other; and a member that joins during the partition
/// is known to one side only. A side never counts for itself a member the other side might not
/// count, and counts against itself every member the other side might count, so the two sides'
/// own counts are disjoint parts of a total both see, and at most one exceeds half of it.
fn majority_side(gossip: &Gossip, unreachable: &BTreeSet<MemberId>) -> bool {
    let (mut total, mut ours) = (BTreeSet::new(), 0);
    for m in gossip.members() {
        match m.status {
            MemberStatus::Joining => {
                total.insert(m.id);
            }
            MemberStatus::Up | MemberStatus::Leaving => {
                total.insert(m.id);
                ours += usize::from(!unreachable.contains(&m.id));
            }
            MemberStatus::Exiting | MemberStatus::Down => {}
        }
    }
    let lowest_is_ours = total.first().is_some_and(|l| {
        !unreachable.contains(l)
            && gossip
                .member(*l)
                .is_some_and(|m| m.status != MemberStatus::Joining)
    });
    match (ours * 2).cmp(&total.len()) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => lowest_is_ours,
        std::cmp::Ordering::Less => false,
    }
}

#[cfg(test)]
#[path = "downing_tests.rs"]
mod tests;
