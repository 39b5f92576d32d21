//! Downing unreachable members (Akka's split brain resolver). Every member watches the
//! reachability it knows; once it has stayed the same for `stable-after`, the leader of the
//! reachable side decides with the configured strategy and marks members Down in its gossip.
//!
//! Keep-majority: the side holding more than half of the Up and Leaving members downs the
//! unreachable ones; on a tie the side holding the lowest address wins; a minority side downs
//! itself (its members see themselves Down, stop their entities and stop). The majority
//! reallocates the minority's shards only after `down-removal-margin`, by which time the
//! minority has stopped: this is what keeps single activation under partitions.

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

    /// The members `me` should mark Down now (empty unless `me` leads its side and the
    /// situation has been stable long enough). Decides once per stable situation.
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
        if gossip.leader(me) != Some(me) {
            return BTreeSet::new();
        }
        match self.strategy {
            Downing::AutoDown { .. } => unreachable.clone(),
            Downing::KeepMajority { .. } => keep_majority(gossip, unreachable),
            Downing::Off => BTreeSet::new(),
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

/// Keep-majority: whom the side of the reachable members downs.
fn keep_majority(gossip: &Gossip, unreachable: &BTreeSet<MemberId>) -> BTreeSet<MemberId> {
    let counted: BTreeSet<MemberId> = gossip
        .members()
        .filter(|m| matches!(m.status, MemberStatus::Up | MemberStatus::Leaving))
        .map(|m| m.id)
        .collect();
    let ours = counted.iter().filter(|m| !unreachable.contains(m)).count();
    let we_win = match (ours * 2).cmp(&counted.len()) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => counted.first().is_some_and(|l| !unreachable.contains(l)),
        std::cmp::Ordering::Less => false,
    };
    if we_win {
        unreachable.clone()
    } else {
        // Our side is the minority: down ourselves, so the majority can take over.
        gossip
            .members()
            .filter(|m| !unreachable.contains(&m.id) && m.status != MemberStatus::Down)
            .map(|m| m.id)
            .collect()
    }
}

#[cfg(test)]
#[path = "downing_tests.rs"]
mod tests;
