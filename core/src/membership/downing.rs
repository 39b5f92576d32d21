//! Downing unreachable members (Akka's split brain resolver). Every member watches the
//! reachability it knows; once it has stayed the same for `stable-after`, it decides with the
//! configured strategy.
//!
//! Keep-majority: on the side holding more than half of the members (on a tie, the side holding
//! the lowest address; see `majority_side` for how members changing status are counted), the
//! leader marks the unreachable members Down. On a minority side every member downs *itself*:
//! it stops its entities and its process, without waiting to hear it from a leader that may
//! already have stopped. The majority reallocates the minority's shards only after
//! `down-removal-margin`, by which time every minority member has stopped: this is what keeps
//! single activation under partitions.
//!
//! That needs a bound on how late a minority decides, so two rules keep its decision from
//! drifting: members joining (which never count for their own side) do not reset the
//! stability clock, and, as Akka's `down-all-when-unstable`, a member that has seen someone
//! unreachable for 7/4 of `stable-after` without reaching a decision downs itself.

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
    /// The unreachable members (not yet Down) and the counted members, as last seen.
    observed: (BTreeSet<MemberId>, BTreeSet<MemberId>),
    stable_since: Instant,
    /// Since when someone has been unreachable without interruption.
    unreachable_since: Option<Instant>,
    /// The decision for this stable situation was taken (possibly "nothing to do, I do not
    /// lead"): no deadline until the situation changes.
    decided: bool,
    /// No decision before this: a monitored member was falling silent (see `postpone`).
    not_before: Instant,
}

impl Downer {
    pub(crate) fn new(strategy: Downing, now: Instant) -> Self {
        Self {
            strategy,
            observed: (BTreeSet::new(), BTreeSet::new()),
            stable_since: now,
            unreachable_since: None,
            decided: false,
            not_before: now,
        }
    }

    fn stable_after(&self) -> Option<std::time::Duration> {
        match self.strategy {
            Downing::KeepMajority { stable_after }
            | Downing::AutoDown {
                after: stable_after,
            } => Some(stable_after),
            Downing::Off => None,
        }
    }

    /// Notes the current state as `me` sees it; any change restarts the stability clock.
    pub(crate) fn observe(&mut self, now: Instant, me: MemberId, gossip: &Gossip) {
        let observed = (undowned_unreachable(me, gossip), counted_ids(gossip));
        if observed.0.is_empty() {
            self.unreachable_since = None;
        } else {
            self.unreachable_since.get_or_insert(now);
        }
        if observed != self.observed {
            self.observed = observed;
            self.stable_since = now;
            self.decided = false;
        }
    }

    /// When a keep-majority member that has been unable to decide downs itself.
    fn unstable_deadline(&self) -> Option<Instant> {
        match self.strategy {
            Downing::KeepMajority { stable_after } => self
                .unreachable_since
                .map(|since| since + stable_after * 7 / 4),
            Downing::AutoDown { .. } | Downing::Off => None,
        }
    }

    /// When a decision may be due.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        let stable_after = self.stable_after()?;
        let stable = (!self.observed.0.is_empty() && !self.decided)
            .then_some((self.stable_since + stable_after).max(self.not_before));
        match (stable, self.unstable_deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Holds a due decision back until `until`: some member `me` monitors has gone quiet
    /// without being declared unreachable yet, so what `me` believes about its own side may be
    /// stale (a partition that is still being detected). Deciding now could count that member
    /// on `me`'s side, win, down the others, and leave two sides each believing it won. (The
    /// unstable bound is not held back: downing oneself is always safe.)
    pub(crate) fn postpone(&mut self, until: Instant) {
        self.not_before = self.not_before.max(until);
    }

    /// The members `me` should mark Down now: once the situation has been stable long enough,
    /// the unreachable ones if `me` leads a winning side, `me` itself on a losing side; `me`
    /// itself when it has been unstable too long. Decides once per stable situation.
    pub(crate) fn decide(
        &mut self,
        now: Instant,
        me: MemberId,
        gossip: &Gossip,
    ) -> BTreeSet<MemberId> {
        if self.unstable_deadline().is_some_and(|at| at <= now) {
            return [me].into();
        }
        if self.deadline().is_none_or(|at| now < at) {
            return BTreeSet::new();
        }
        self.decided = true;
        let unreachable = &self.observed.0;
        let leads = gossip.leader(me) == Some(me);
        match self.strategy {
            Downing::AutoDown { .. } if leads => unreachable.clone(),
            Downing::KeepMajority { .. } if majority_side(me, gossip, unreachable) => {
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

/// The members whose arrival or departure changes a decision: all but Joining ones (a side
/// never counts its own Joining members, and learns of the other side's only by gossip, which
/// a partition stops).
fn counted_ids(gossip: &Gossip) -> BTreeSet<MemberId> {
    gossip
        .members()
        .filter(|m| m.status != MemberStatus::Joining)
        .map(|m| m.id)
        .collect()
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

/// Keep-majority, safe while members change status across the partition: the side counts its
/// own Up and Leaving members, against all those plus every unreachable member that might be
/// counted by the other side for itself (Joining, Exiting and Down ones included); on an exact
/// half, the side holding the lowest address of that total wins.
///
/// Why: two sides can both win only if one side's total misses a member the other counts for
/// itself. Statuses move at different times on the two sides: a member moved Up right before
/// the partition is Up on one side and still Joining on the other, and a member moved from
/// Leaving to Exiting is Exiting on one side and still Leaving on the other (swarm seed
/// 20015120). Counting such unreachable members against ourselves covers their older status
/// over there; not counting our own Joining and Exiting members at all covers the newer status
/// over there. Unreachable members we downed count against us until removed: a side that
/// downed others on a stale picture (a partition that moved before it was detected) must not
/// then win a tie against what is left.
fn majority_side(me: MemberId, gossip: &Gossip, unreachable: &BTreeSet<MemberId>) -> bool {
    let cut_off = gossip.unreachable_from(me);
    let (mut total, mut ours) = (BTreeSet::new(), BTreeSet::new());
    for m in gossip.members() {
        let counted = match m.status {
            MemberStatus::Up | MemberStatus::Leaving => true,
            MemberStatus::Joining => unreachable.contains(&m.id),
            // Downed by us but not yet removed (removal needs our side to converge): we may
            // have downed them on a stale picture, and they may be alive over there. Exiting
            // over here may still be Leaving over there, counted by that side for itself.
            MemberStatus::Down | MemberStatus::Exiting => cut_off.contains(&m.id),
        };
        if counted {
            total.insert(m.id);
            if !cut_off.contains(&m.id) {
                ours.insert(m.id);
            }
        }
    }
    match (ours.len() * 2).cmp(&total.len()) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => total.first().is_some_and(|l| ours.contains(l)),
        std::cmp::Ordering::Less => false,
    }
}

#[cfg(test)]
#[path = "downing_tests.rs"]
mod tests;
