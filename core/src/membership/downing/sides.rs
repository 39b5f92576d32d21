//! Counting sides: which members a decision counts, which are on `me`'s side, and whether
//! that side holds the majority.

use std::collections::BTreeSet;

use crate::id::MemberId;
use crate::members::MemberStatus;
use crate::members::{Gossip, GossipMember};
use crate::membership::detector::ring_order;

/// The members whose arrival or departure changes a decision: all but Joining ones (a side
/// never counts its own Joining members, and learns of the other side's only by gossip, which
/// a partition stops); and how many are Joining. One walk: every member observes every change.
pub(super) fn counted_ids(gossip: &Gossip) -> (Vec<MemberId>, usize) {
    let mut counted = Vec::with_capacity(gossip.member_count());
    let mut joining = 0;
    for m in gossip.members() {
        if m.status == MemberStatus::Joining {
            joining += 1;
        } else {
            counted.push(m.id);
        }
    }
    (counted, joining)
}

/// Members `me`'s side cannot reach that are not Down yet.
pub(super) fn undowned_unreachable(me: MemberId, gossip: &Gossip) -> BTreeSet<MemberId> {
    gossip
        .unreachable_from(me)
        .into_iter()
        .filter(|id| !is_down(gossip, *id))
        .collect()
}

/// Whether `id` is Down, or gone from the state.
pub(super) fn is_down(gossip: &Gossip, id: MemberId) -> bool {
    gossip
        .member(id)
        .is_none_or(|m| m.status == MemberStatus::Down)
}

/// Whether `id`, unreachable, needs no decision: Down, Exiting or gone. The leader removes an
/// unreachable Exiting member at the next convergence (which skips it), as it removes a Down
/// one; it handed its shards off before it was moved to Exiting.
pub(super) fn needs_no_decision(gossip: &Gossip, id: MemberId) -> bool {
    gossip
        .member(id)
        .is_none_or(|m| matches!(m.status, MemberStatus::Down | MemberStatus::Exiting))
}

/// The members `me`'s side cannot vouch for: neither cut off nor known to be on its side. A
/// side knows a member is with it only from someone who monitors that member: `me` for those
/// it monitors, and, through their gossip, each member so vouched for for those it monitors
/// (the heartbeat ring, `monitored_by` members after each). A member nobody vouched for
/// monitors has no observation on this side at all, and absence of a record is not
/// reachability: an oldest member cut off alone in a cluster larger than the ring (it heard
/// the others, they did not hear it), counted as its side the one member it did not monitor,
/// kept its shards as the oldest, while the others downed it as the oldest alone (flapping-
/// links seed 6407061250). Decisions count these members as cut off: never ours, and never
/// downed for it (`undowned_unreachable` does not list them).
pub(super) fn unvouched(me: MemberId, gossip: &Gossip, monitored_by: usize) -> BTreeSet<MemberId> {
    let ids: Vec<MemberId> = gossip.members().map(|m| m.id).collect();
    let ring = ring_order(&ids);
    let Some(start) = ring.iter().position(|id| *id == me) else {
        return BTreeSet::new();
    };
    let cut_off = gossip.unreachable_from(me);
    let ahead = monitored_by.min(ring.len() - 1);
    let mut vouched = vec![false; ring.len()];
    vouched[start] = true;
    let mut to_visit = vec![start];
    while let Some(at) = to_visit.pop() {
        for step in 1..=ahead {
            let next = (at + step) % ring.len();
            if vouched[next] || cut_off.contains(&ring[next]) {
                continue;
            }
            vouched[next] = true;
            // A Down member has stopped: its silence about those it monitored says nothing.
            if !is_down(gossip, ring[next]) {
                to_visit.push(next);
            }
        }
    }
    (ring.iter().zip(vouched))
        .filter(|(id, vouched)| !vouched && !cut_off.contains(id))
        .map(|(id, _)| *id)
        .collect()
}

/// The members a decision counts, as `me`'s side sees them.
pub(super) struct Count<'g> {
    /// Every member counted: Up and Leaving ones, Down ones, and unreachable Joining and
    /// Exiting ones (see [`count`]).
    pub(super) total: Vec<&'g GossipMember>,
    /// Those on `me`'s side: reachable, Up or Leaving.
    pub(super) ours: BTreeSet<MemberId>,
}

impl Count<'_> {
    /// How many members are counted in all.
    pub(super) fn total(&self) -> usize {
        self.total.len()
    }

    /// How many members are on `me`'s side.
    pub(super) fn ours(&self) -> usize {
        self.ours.len()
    }
}

/// Counts sides, safe while members change status across the partition: the side counts its
/// own Up and Leaving members, against all those plus every Down member and every unreachable
/// member that might be counted by the other side for itself (Joining, Exiting).
///
/// Why: two sides can both win only if one side's total misses a member the other counts for
/// itself. Statuses move at different times on the two sides: a member moved Up right before
/// the partition is Up on one side and still Joining on the other, and a member moved from
/// Leaving to Exiting is Exiting on one side and still Leaving on the other (swarm seed
/// 20015120). Counting such unreachable members against ourselves covers their older status
/// over there; not counting our own Joining and Exiting members at all covers the newer status
/// over there. Down members count against us until removed, reachable or not: a side that
/// downed others on a stale picture (a partition that moved before it was detected) must not
/// then win a tie against what is left, and a member of ours that downed itself may have been
/// counted, still Up, by the other side for itself when it decided on such a stale picture
/// (partitions seed 1128: n2 counted n3 and downed n1; n3 then downed itself; n1, reaching
/// only the Down n3, won a tie against n2 and both sides lived).
///
/// `also_cut_off` are counted as if `me`'s side could not reach them either.
pub(super) fn count<'g>(
    me: MemberId,
    gossip: &'g Gossip,
    also_cut_off: &BTreeSet<MemberId>,
) -> Count<'g> {
    let mut cut_off = gossip.unreachable_from(me);
    cut_off.extend(also_cut_off.iter().copied());
    let (mut total, mut ours) = (Vec::new(), BTreeSet::new());
    for m in gossip.members() {
        let counted = match m.status {
            MemberStatus::Up | MemberStatus::Leaving => true,
            MemberStatus::Joining | MemberStatus::Down | MemberStatus::Exiting => {
                let reachable = !cut_off.contains(&m.id);
                let probe = match (m.status, reachable) {
                    (MemberStatus::Down, true) => {
                        Some("downing: a reachable Down member counts against us")
                    }
                    (MemberStatus::Down, false) => {
                        Some("downing: an unreachable Down member counts against us")
                    }
                    (MemberStatus::Joining, false) => {
                        Some("downing: an unreachable Joining member counts against us")
                    }
                    (MemberStatus::Joining, true) => {
                        Some("downing: a Joining member on our side is not counted")
                    }
                    (_, false) => Some("downing: an unreachable Exiting member counts against us"),
                    (_, true) => None,
                };
                if let Some(probe) = probe {
                    crate::probe::hit(probe);
                }
                m.status == MemberStatus::Down || !reachable
            }
        };
        if counted {
            total.push(m);
            if !cut_off.contains(&m.id) && m.status != MemberStatus::Down {
                ours.insert(m.id);
            }
        }
    }
    Count { total, ours }
}

/// Keep-majority: `me`'s side holds more than half of the members [`count`] counts; on an
/// exact half, the side holding the lowest address of them wins.
pub(super) fn majority_side(
    me: MemberId,
    gossip: &Gossip,
    also_cut_off: &BTreeSet<MemberId>,
) -> bool {
    holds_majority(&count(me, gossip, also_cut_off))
}

/// Whether the side `count` counted holds the majority (see [`majority_side`]).
pub(super) fn holds_majority(count: &Count<'_>) -> bool {
    match (count.ours() * 2).cmp(&count.total()) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => {
            crate::probe::hit("downing: a tie goes to the side with the lowest address");
            let lowest = count.total.iter().map(|m| m.id).min();
            lowest.is_some_and(|l| count.ours.contains(&l))
        }
        std::cmp::Ordering::Less => false,
    }
}
