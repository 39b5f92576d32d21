//! Lease-majority downing: a side's leader asks the lease store for the cluster's downing
//! lease once the picture is stable, or once someone has been unreachable for 5/4 of
//! `stable_after` if it never settles (the side without a majority only after a delay), and its
//! answer decides the side's fate: granted, the side downs the members it cannot reach;
//! refused or failed, nobody is downed from here, the ask is repeated now and then, and the
//! side downs itself at the unstable bound (it still sees the winners unreachable), unless a
//! repeat is granted or the winners' decision reaches it first.
//!
//! Repeating a refused ask is what lets a side outlive a grant nobody uses any more (its
//! holder crashed or was downed since): the store refuses while that grant runs, and grants
//! once it has run out. It stays safe because the unstable bound ends the repeats within
//! 7/4 of `stable_after` of the side's picture turning unstable, and a grant lasts at least
//! twice `stable_after` and the delay from the winner's decision (see the settings' check).
//!
//! The member holding the grant decides again while it runs, leader or not: a second
//! decision on the winning side (a member of it crashing) would otherwise go to its leader,
//! whom the store refuses while the earlier grant runs, and the whole cluster went down.

use std::collections::BTreeSet;
use std::time::Duration;

use super::Downer;
use super::sides::{self, is_down, undowned_unreachable};
use crate::id::MemberId;
use crate::lease::{LeaseAnswer, LeaseCall, LeaseName, LeaseOwner};
use crate::members::{Gossip, MemberStatus};
use crate::membership::settings::Downing;
use crate::time::Instant;

/// Where the downing lease stands for the side this member leads.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub(super) enum LeaseAsk {
    /// To be asked for at this time (now on a majority side, after the delay on the other).
    Due(Instant),
    /// Asked for at this time; the answer is awaited.
    Sent(Instant),
}

/// How long after a refused or failed ask it is repeated: a tenth of `stable_after`, so that
/// a grant running out (or a store coming back) is noticed well before the unstable bound.
fn ask_again_after(stable_after: Duration) -> Duration {
    stable_after / 10
}

/// The downing lease's owner on `me`: one per member (a member's leadership of its side is
/// what holds it).
fn owner(me: MemberId) -> LeaseOwner {
    LeaseOwner {
        member: me,
        holder: 0,
    }
}

/// How long after someone became unreachable a side whose picture has not settled asks for the
/// lease anyway: 5/4 of `stable_after`, which leaves half of it before the unstable bound for
/// the minority's delay, the store's answer and the winner's decision reaching its side.
fn unsettled_ask_after(stable_after: Duration) -> Duration {
    stable_after * 5 / 4
}

impl Downer {
    /// A decision is due (the picture stable for `stable_after`, or unsettled for long, see
    /// `unsettled_ask_due`): a side holding no Up member downs itself; the leader (or the
    /// holder of a running grant) asks for the lease; the others wait for its decision.
    pub(super) fn decide_by_lease(
        &mut self,
        now: Instant,
        me: MemberId,
        gossip: &Gossip,
    ) -> BTreeSet<MemberId> {
        let Downing::LeaseMajority {
            acquire_delay_for_minority,
            ..
        } = self.strategy
        else {
            return BTreeSet::new();
        };
        self.decided_for = self.longest_cut_off_since;
        self.reckon();
        let count = sides::count(me, gossip, &self.unvouched(me, gossip));
        if count.ours() == 0 {
            // Only Joining, Exiting or Down members here: nobody the other side could
            // count for it, and the lease must not let it down those who are (a restarted
            // member leading a side of joiners took the lease and downed the Up members
            // across a partition: lease-majority partitions seed 60072).
            crate::probe::hit("downing: a side holding no Up member downs itself");
            return [me].into();
        }
        // The holder of a running grant decides too: the store refuses any other asker
        // until it runs out, the leader of the holder's own side included.
        let leads = gossip.leader(me) == Some(me);
        if leads || self.holds_lease(now) {
            if !leads {
                crate::probe::hit("downing: the holder of a running grant decides again");
            }
            self.ask_for_lease(
                now,
                sides::holds_majority(&count),
                acquire_delay_for_minority,
            );
        }
        BTreeSet::new()
    }

    /// When a leader whose side has had someone unreachable for a while asks for the lease
    /// although the picture keeps changing (a partition followed by another, a link flapping):
    /// the lease arbitrates between sides whatever they believe, so rather than every member
    /// downing itself at the unstable bound (as Akka's `down-all-when-unstable` does), the side
    /// granted the lease keeps going. Due 5/4 of `stable_after` after someone became
    /// unreachable, once some member has been cut off for `stable_after` (only those are downed,
    /// see `downed_by_grant`), and again when the member cut off longest is another one. It
    /// stays safe: the other sides' repeats are refused while the grant runs, and they still
    /// down themselves at their unstable bound, no later than after a decision on a stable
    /// picture.
    pub(super) fn unsettled_ask_due(&self) -> Option<Instant> {
        let Downing::LeaseMajority { stable_after, .. } = self.strategy else {
            return None;
        };
        let longest = self.longest_cut_off_since?;
        if !self.pending || self.lease.is_some() || self.decided_for == Some(longest) {
            return None;
        }
        let since = self.unreachable_since?;
        Some(
            (since + unsettled_ask_after(stable_after))
                .max(longest + stable_after)
                .max(self.not_before),
        )
    }

    /// Lease-majority: notes since when each member in `cut_off` has been cut off, and the
    /// earliest of those among the members not Down yet (other strategies keep nothing: this
    /// runs after every change of the membership state).
    pub(super) fn track_cut_off(
        &mut self,
        now: Instant,
        cut_off: &BTreeSet<MemberId>,
        gossip: &Gossip,
    ) {
        if !matches!(self.strategy, Downing::LeaseMajority { .. }) {
            return;
        }
        self.cut_off_since.retain(|id, _| cut_off.contains(id));
        self.longest_cut_off_since = None;
        for id in cut_off {
            let since = *self.cut_off_since.entry(*id).or_insert(now);
            if !is_down(gossip, *id) {
                let longest = self.longest_cut_off_since.get_or_insert(since);
                *longest = (*longest).min(since);
            }
        }
    }

    /// The members a grant downs: those `me`'s side cannot reach that have been cut off for
    /// `stable_after` at least (or are Exiting: their shards have moved already). One cut off
    /// more recently may have seen nothing unreachable until then, so its own unstable bound
    /// could come up to 7/4 of `stable_after` from now, past the removal margin; it waits for
    /// the next decision. A decision on a stable picture downs every one of them anyway; this
    /// holds a side whose picture did not settle, and an answer that took long, to the same.
    fn downed_by_grant(&self, now: Instant, me: MemberId, gossip: &Gossip) -> BTreeSet<MemberId> {
        let Some(stable_after) = self.stable_after() else {
            return BTreeSet::new();
        };
        let mut downed = undowned_unreachable(me, gossip);
        downed.retain(|id| {
            let long =
                (self.cut_off_since.get(id)).is_some_and(|since| *since + stable_after <= now);
            let exiting = gossip
                .member(*id)
                .is_some_and(|m| m.status == MemberStatus::Exiting);
            if !long && !exiting {
                crate::probe::hit("downing: a member cut off lately waits for the next decision");
            }
            long || exiting
        });
        downed
    }

    /// A leader deciding: the lease is to be asked for now on a `majority` side, after
    /// `delay` on the other. An ask still awaiting its answer (from an earlier picture) is
    /// not repeated: its answer decides.
    pub(super) fn ask_for_lease(&mut self, now: Instant, majority: bool, delay: Duration) {
        if matches!(self.lease, Some(LeaseAsk::Sent(_))) {
            return;
        }
        let at = if majority {
            now
        } else {
            crate::probe::hit("downing: a minority side waits before asking for the lease");
            now + delay
        };
        self.lease = Some(LeaseAsk::Due(at));
        self.reckon();
    }

    /// When the lease is next to be asked for.
    pub(super) fn lease_due(&self) -> Option<Instant> {
        match self.lease {
            Some(LeaseAsk::Due(at)) => Some(at),
            _ => None,
        }
    }

    /// The lease call to make now, if one is due.
    pub(crate) fn poll_lease_call(&mut self, now: Instant, me: MemberId) -> Option<LeaseCall> {
        let Downing::LeaseMajority { lease_ttl, .. } = self.strategy else {
            return None;
        };
        self.lease_due().filter(|at| *at <= now)?;
        self.lease = Some(LeaseAsk::Sent(now));
        self.reckon();
        Some(LeaseCall::Acquire {
            name: LeaseName::Downing,
            owner: owner(me),
            ttl: lease_ttl,
            sent: now,
        })
    }

    /// Whether `me` holds a grant of the downing lease that has not run out on its own clock
    /// (the store decides each ask anyway: this only says whether `me` decides).
    pub(super) fn holds_lease(&self, now: Instant) -> bool {
        self.lease_held_until.is_some_and(|until| now < until)
    }

    /// The store answered `call`: the members to mark Down. Granted, those `me`'s side cannot
    /// reach; refused or failed, none (the ask is repeated, and the unstable bound downs the
    /// side). An answer to no ask of this member's, or one arriving when nobody is cut off any
    /// more, decides nothing.
    pub(crate) fn handle_lease_answer(
        &mut self,
        now: Instant,
        me: MemberId,
        gossip: &Gossip,
        call: &LeaseCall,
        answer: &LeaseAnswer,
    ) -> BTreeSet<MemberId> {
        let LeaseCall::Acquire { sent, ttl, .. } = call else {
            return BTreeSet::new();
        };
        if self.lease != Some(LeaseAsk::Sent(*sent)) {
            return BTreeSet::new();
        }
        self.lease = None;
        if let LeaseAnswer::Granted(_) = answer {
            // The grant runs from no earlier than the ask left.
            self.handle_grant(now, *sent, *ttl);
        }
        self.reckon();
        if !self.pending {
            crate::probe::hit("downing: a lease answer after the picture healed decides nothing");
            return BTreeSet::new();
        }
        match answer {
            LeaseAnswer::Granted(_) => {
                crate::probe::hit("downing: the side holding the lease downs the others");
                self.downed_by_grant(now, me, gossip)
            }
            LeaseAnswer::Refused | LeaseAnswer::Failed(_) => {
                if let Some(stable_after) = self.stable_after() {
                    crate::probe::hit("downing: a refused or failed lease ask is repeated");
                    self.lease = Some(LeaseAsk::Due(now + ask_again_after(stable_after)));
                    self.reckon();
                }
                // Nobody is marked Down from here: the side, its leader included, still sees
                // the winners unreachable and downs itself at the unstable bound, unless the
                // winners' decision reaches it first. Marking the side Down from here marked
                // members across a one-way partition that the leader took for its own, and a
                // member of the side it took for cut off, finding every other member Down,
                // went on alone beside the winners (lease-majority flapping-links seed 70836);
                // and a member that took itself for a leader in a view a one-way partition
                // made (partitions seed 70295) downed itself although its side had won.
                crate::probe::hit("downing: a side refused the lease waits for the unstable bound");
                BTreeSet::new()
            }
            LeaseAnswer::Released => BTreeSet::new(),
        }
    }
}
