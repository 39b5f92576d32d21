//! The split brain resolver's strategies, each a pure function of what `me`'s side counts
//! (see [`super::sides::count`]): whether the side survives, downing the members it cannot
//! reach, or downs itself.
//!
//! Every strategy must keep two sides from both surviving whatever each believes about the
//! other's statuses; the counting rules give each side a conservative total, and each strategy
//! argues from it below.

use std::collections::BTreeSet;

use super::sides::{Count, count, majority_side};
use crate::id::MemberId;
use crate::members::{Gossip, MemberStatus};
use crate::membership::settings::Downing;

/// Whether `me`'s side survives under `strategy`, counting `also_cut_off` as cut off too.
/// `None` for the strategies that do not decide by sides (auto-down, off).
pub(super) fn survives(
    strategy: Downing,
    me: MemberId,
    gossip: &Gossip,
    also_cut_off: &BTreeSet<MemberId>,
) -> Option<bool> {
    Some(match strategy {
        // Lease-majority's majority only says which side asks first (the lease decides).
        Downing::KeepMajority { .. } | Downing::LeaseMajority { .. } => {
            majority_side(me, gossip, also_cut_off)
        }
        Downing::StaticQuorum { quorum_size, .. } => {
            holds_quorum(&count(me, gossip, also_cut_off), quorum_size)
        }
        Downing::KeepOldest { down_if_alone, .. } => {
            keeps_oldest(&count(me, gossip, also_cut_off), down_if_alone)
        }
        Downing::DownAll { .. } => {
            crate::probe::hit("downing: down-all downs every member");
            false
        }
        Downing::AutoDown { .. } | Downing::Off => return None,
    })
}

/// Static quorum: the side holding at least `quorum` members survives. With more than
/// `2 × quorum − 1` members counted, two sides could each hold a quorum, so every side downs
/// itself (the cluster grew past what the quorum was chosen for). Safe: both sides surviving
/// needs `2 × quorum` members of theirs, all in either side's total.
fn holds_quorum(count: &Count<'_>, quorum: usize) -> bool {
    if count.total() > (2 * quorum).saturating_sub(1) {
        crate::probe::hit(
            "downing: more members than the static quorum allows, a side downs itself",
        );
        return false;
    }
    count.ours() >= quorum
}

/// Keep-oldest: the side holding the oldest member (the lowest up-number) survives. With
/// `down_if_alone`, an oldest member cut off from all others downs itself and the others keep
/// going: its side survives only if it is not alone or at most one other is counted, and the
/// other side survives only if the oldest is the only member it counts beyond its own and it
/// holds at least two.
///
/// Safe: each side's total holds every member the other side holds (see `count`), so two
/// sides agree on which of their members is older; Joining members have no age yet and are
/// the youngest once Up, so leaving them out changes no oldest. A Down oldest holds no side.
fn keeps_oldest(count: &Count<'_>, down_if_alone: bool) -> bool {
    let oldest = (count.total.iter())
        .filter(|m| m.status != MemberStatus::Joining)
        .min_by_key(|m| (m.up_number, m.id));
    let Some(oldest) = oldest else {
        return false;
    };
    let others = count.total() - count.ours();
    if count.ours.contains(&oldest.id) {
        let alone = down_if_alone && count.ours() == 1 && others >= 2;
        if alone {
            crate::probe::hit("downing: the oldest member, alone, downs itself");
        }
        !alone
    } else {
        let oldest_alone = down_if_alone
            && others == 1
            && count.ours() >= 2
            && oldest.status != MemberStatus::Down;
        if oldest_alone {
            crate::probe::hit("downing: the oldest member, cut off alone, is downed by the others");
        }
        oldest_alone
    }
}
