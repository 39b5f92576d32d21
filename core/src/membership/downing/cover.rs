//! Lease-majority's cover: while a member holds the downing lease, it and the members it
//! reaches keep going past the unstable bound, so that a network that never settles (links
//! flapping one after another) leaves the side holding the lease standing instead of every
//! member downing itself.
//!
//! The unstable bound is there so that a member nobody can decide about stops before the side
//! that downs it moves its shards (`down_removal_margin` after the decision). Under
//! lease-majority only the holder of a grant downs anyone, and the store grants nobody else
//! while the grant runs, so nobody can down a member before that grant ends, except its holder.
//! The holder downs only members it has found cut off for `stable_after` (see
//! `downed_by_grant`), and it covers only members it does not find cut off at all:
//!
//! - it sends `ClusterMessage::DowningLeaseHeld` every eighth of `stable_after` to each member
//!   it reaches, covering half of `stable_after` from when it arrives (or the rest of the
//!   grant, if shorter); a member counts a cover only from a member it does not itself
//!   observe unreachable;
//! - once the holder finds a member cut off it stops covering it, so that member's cover ends
//!   within half of `stable_after` (and a message's delay) while a grant downs it no
//!   sooner than `stable_after` after, and its shards move `down_removal_margin` later still;
//! - the holder covers itself until its grant runs out on its own clock; after that (no
//!   renewal came) the covers stop, and each member's bound, long passed, downs it at once:
//!   another side can be granted the lease only from then on, and moves shards a removal
//!   margin after its decision;
//! - once nobody is left to decide about, the holder goes on covering until every member it
//!   reaches has seen that state (still within its grant): a member its decision reaches
//!   late would otherwise outlive its last cover still seeing someone unreachable, and down
//!   itself on the side that won (lease-majority equal-halves seed 6407054934: the gossip
//!   downing the last member cut off arrived late, after the holder had stopped covering).
//!
//! A holder whose side still has someone unreachable asks again before half of its grant is
//! left, so a picture that keeps changing for longer than the ttl stays covered.

use std::collections::BTreeSet;
use std::time::Duration;

use super::Downer;
use crate::id::MemberId;
use crate::members::{Gossip, MemberStatus};
use crate::membership::settings::Downing;
use crate::time::Instant;

/// What a holder of the downing lease sends now: how long it covers each member it reaches
/// from when the notice arrives, and who they are.
#[derive(Debug, Eq, PartialEq)]
pub(crate) struct CoverNotice {
    /// How long the cover runs from its arrival.
    pub(crate) cover: Duration,
    /// The members covered: those the holder reaches, neither Down nor itself.
    pub(crate) to: BTreeSet<MemberId>,
}

/// How often a holder sends its cover: twice per cover, so that one notice lost or late does
/// not end it.
fn notice_every(stable_after: Duration) -> Duration {
    stable_after / 8
}

/// How long one notice covers: short against `stable_after`, which is how soon a grant can
/// down a member its holder stopped covering, yet longer than the time between two notices
/// plus a slow message's delay. Links are FIFO, so one message held up (a retransmission)
/// holds up the notices behind it: with a quarter of `stable_after` (1.75 s of 7 s), notices
/// 0.9 s apart behind a gossip delayed 2 s left a gap, and a member of the winning side downed
/// itself in it (equal-halves seed 13500003973).
fn cover_span(stable_after: Duration) -> Duration {
    stable_after / 2
}

impl Downer {
    /// Until when a cover holds the unstable bound back: the holder's own grant, or the
    /// newest notice received (lease-majority only).
    pub(super) fn covered_until(&self) -> Option<Instant> {
        if !matches!(self.strategy, Downing::LeaseMajority { .. }) {
            return None;
        }
        // `None` orders below any time: the later of the two, if either.
        self.lease_held_until.max(self.cover_received)
    }

    /// When the holder next sends its cover, if it holds the lease while someone is
    /// unreachable, or while its side has not all seen that nobody is left to decide about.
    pub(super) fn notice_due(&self) -> Option<Instant> {
        let held = self.lease_held_until?;
        let covering = self.unreachable_since.is_some() || self.settling;
        (covering && self.next_notice < held).then_some(self.next_notice)
    }

    /// A grant of the downing lease, asked for at `sent`, came in: the holder covers the
    /// members it reaches from now on, and asks again with half of the grant left.
    pub(super) fn handle_grant(&mut self, now: Instant, sent: Instant, ttl: Duration) {
        self.lease_held_until = Some(sent + ttl);
        self.next_notice = now;
        self.renew_at = Some(sent + ttl / 2);
    }

    /// The holder asks for the lease again (the store extends its grant) if someone is still
    /// unreachable when half of the grant is left: its cover must not end while the picture
    /// keeps changing.
    pub(super) fn renew_if_due(&mut self, now: Instant) {
        if self.renew_at.is_none_or(|at| at > now) {
            return;
        }
        self.renew_at = None;
        if self.pending && self.holds_lease(now) {
            crate::probe::hit(
                "downing: the holder of the lease asks again while someone is unreachable",
            );
            self.ask_for_lease(now, true, Duration::ZERO);
        }
        self.reckon();
    }

    /// Whether a cover holds back an unstable bound that has passed (probes only).
    pub(super) fn cover_holds_bound(&self, now: Instant, bound: Instant) -> bool {
        bound <= now && self.covered_until().is_some_and(|cover| now < cover)
    }

    /// The cover to send now, if one is due (see the module documentation).
    pub(crate) fn poll_cover_notice(
        &mut self,
        now: Instant,
        me: MemberId,
        gossip: &Gossip,
    ) -> Option<CoverNotice> {
        let stable_after = self.stable_after()?;
        self.notice_due().filter(|at| *at <= now)?;
        let held = self.lease_held_until?;
        let cut_off = gossip.unreachable_from(me);
        let to: BTreeSet<MemberId> = gossip
            .members()
            .filter(|m| m.id != me && m.status != MemberStatus::Down && !cut_off.contains(&m.id))
            .map(|m| m.id)
            .collect();
        if self.unreachable_since.is_none() {
            if to.iter().all(|id| gossip.seen().contains(id)) {
                self.settling = false;
                self.reckon();
                return None;
            }
            crate::probe::hit("downing: the holder covers its side until it has seen the decision");
        }
        self.next_notice = now + notice_every(stable_after);
        self.reckon();
        crate::probe::hit("downing: the holder of the lease covers the members it reaches");
        Some(CoverNotice {
            cover: cover_span(stable_after).min(held.saturating_duration_since(now)),
            to,
        })
    }

    /// `from` says it holds the downing lease and covers `me` for `cover` from now. Counted
    /// only from a current member that is not Down and that `me` does not itself observe
    /// unreachable, and only while someone is unreachable.
    pub(crate) fn handle_cover(
        &mut self,
        now: Instant,
        me: MemberId,
        from: MemberId,
        cover: Duration,
        gossip: &Gossip,
    ) {
        let Some(stable_after) = self.stable_after() else {
            return;
        };
        let counts = matches!(self.strategy, Downing::LeaseMajority { .. })
            && self.unreachable_since.is_some()
            && gossip
                .member(from)
                .is_some_and(|m| m.status != MemberStatus::Down)
            && !gossip.observes_unreachable(me, from);
        if !counts {
            crate::probe::hit("downing: a cover that does not count is ignored");
            return;
        }
        let until = now + cover.min(cover_span(stable_after));
        self.cover_received = self.cover_received.max(Some(until));
        self.reckon();
    }
}
