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
//! The other strategies of Akka's split brain resolver decide the same way, by sides (see
//! `strategy`): static-quorum (a side holding a fixed quorum survives), keep-oldest (the side
//! of the oldest member survives; with down-if-alone an isolated oldest downs itself) and
//! down-all (every member downs itself). Each waits for the same stable picture and the same
//! unstable bound. Lease-majority (see `lease`) lets the lease decide between sides instead;
//! its leaders also ask when the picture has not settled by 5/4 of `stable-after`, and the
//! holder covers the members it reaches past their unstable bound (see `cover`), so that a
//! network that keeps changing leaves the lease's holder standing rather than nobody.
//!
//! That needs a bound on how late a minority decides, so two rules keep its decision from
//! drifting: members joining (which never count for their own side) do not reset the
//! stability clock, and, as Akka's `down-all-when-unstable`, a member that has seen someone
//! unreachable for 7/4 of `stable-after` without reaching a decision downs itself.

use std::collections::{BTreeMap, BTreeSet};

use crate::id::MemberId;
use crate::members::Gossip;
use crate::membership::settings::Downing;
use crate::time::Instant;

mod cover;
mod lease;
mod sides;
mod strategy;

use lease::LeaseAsk;

use sides::{counted_ids, is_down, needs_no_decision, undowned_unreachable, unvouched};

/// What a downing decision rests on; any change restarts the stability clock.
#[derive(Debug, Default, PartialEq)]
struct Observed {
    /// The members `me`'s side cannot reach (Down ones included).
    cut_off: BTreeSet<MemberId>,
    /// The members a decision counts (all but Joining ones), in id order (only compared: a
    /// vector is built and compared faster than a set, once per state change).
    counted: Vec<MemberId>,
    /// The members `me` itself observes unreachable.
    own: BTreeSet<MemberId>,
}

/// Tracks how long reachability has been stable and decides whom to down.
#[derive(Debug)]
pub(crate) struct Downer {
    strategy: Downing,
    /// How many members monitor each (the heartbeat ring's `monitored_by`): which members
    /// `me`'s side can vouch for (see `sides::unvouched`).
    monitored_by: usize,
    /// What a decision rests on, as last seen.
    observed: Observed,
    /// Some member `me`'s side cannot reach is not Down yet: a decision is pending.
    pending: bool,
    /// How many unreachable members needed a decision (not Down nor Exiting), and how many
    /// members were joining, as last seen (probes only).
    undowned: usize,
    joining: usize,
    stable_since: Instant,
    /// Since when someone has been unreachable without interruption.
    unreachable_since: Option<Instant>,
    /// The decision for this stable situation was taken (possibly "nothing to do, I do not
    /// lead"): no deadline until the situation changes.
    decided: bool,
    /// No decision before this: a monitored member was falling silent (see `postpone`).
    not_before: Instant,
    /// [`Downer::deadline`], worked out again whenever what it depends on changes (the node
    /// asks for it after every input).
    deadline: Option<Instant>,
    /// Lease-majority: the downing lease this member (a side's leader) is to ask for, or
    /// asked for and awaits the answer to.
    lease: Option<LeaseAsk>,
    /// Lease-majority: until when (on `me`'s clock) the last grant of the downing lease to `me`
    /// runs, counted from when it was asked for.
    lease_held_until: Option<Instant>,
    /// Since when each member `me`'s side cannot reach has been cut off without interruption
    /// (lease-majority: a grant downs only those cut off for `stable_after`, see `lease`).
    cut_off_since: BTreeMap<MemberId, Instant>,
    /// The earliest of those times among the members cut off that are not Down yet.
    longest_cut_off_since: Option<Instant>,
    /// Lease-majority: the member cut off longest when the last decision was taken (its
    /// `cut_off_since`), so that a picture that does not settle is decided once for it (see
    /// `unsettled_ask_due`).
    decided_for: Option<Instant>,
    /// Lease-majority: until when the newest cover from the lease's holder runs (see `cover`).
    cover_received: Option<Instant>,
    /// Lease-majority: when this member, holding the lease, next sends its cover.
    next_notice: Instant,
    /// Lease-majority: this member, holding the lease, has nobody left to decide about, and
    /// covers the members it reaches until they have all seen that state (see `cover`).
    settling: bool,
    /// Lease-majority: when this member, holding the lease, asks again if someone is still
    /// unreachable.
    renew_at: Option<Instant>,
}

impl Downer {
    pub(crate) fn new(strategy: Downing, monitored_by: usize, now: Instant) -> Self {
        Self {
            strategy,
            monitored_by,
            observed: Observed::default(),
            pending: false,
            undowned: 0,
            joining: 0,
            stable_since: now,
            unreachable_since: None,
            decided: false,
            not_before: now,
            deadline: None,
            lease: None,
            lease_held_until: None,
            decided_for: None,
            cut_off_since: BTreeMap::new(),
            longest_cut_off_since: None,
            cover_received: None,
            next_notice: Instant::ZERO,
            settling: false,
            renew_at: None,
        }
    }

    fn stable_after(&self) -> Option<std::time::Duration> {
        self.strategy.stable_after()
    }

    /// Notes the current state as `me` sees it; a change of what a decision rests on restarts
    /// the stability clock. An unreachable member being marked Down is not such a change: it
    /// counts against `me`'s side the same either way (see `majority_side`). Restarting the
    /// clock for it (as when a crashed member's new incarnation joins) pushed the leader's
    /// decision past the moment its own side's members gave up as unstable, and the whole side
    /// downed itself (swarm seed 7302570).
    ///
    /// `me`'s own observations changing restarts the clock even when what its side cannot reach
    /// did not change: a member `me` reaches again may still be unreachable in an older record of
    /// another member's (one now cut off), and a decision resting on that record alone could
    /// come right after a new partition starts, before the other side has had `stable-after`
    /// to decide (flapping-links seed 1039587). `me` confirming a member its side already cannot
    /// reach is the exception: the picture did not change, only `me`'s evidence for it, so the
    /// clock runs from when it started or from when `me` last heard that member (`last_heard`,
    /// from its failure detector), whichever is later. A stale record is one `me` contradicted
    /// by hearing the member during the clock, so it still gets a clock of its own from there;
    /// a detector that is merely slow (a slow link) no longer restarts it after the decision
    /// was held back waiting for that very detector, which pushed the leader past its side's
    /// unstable bound (coordinator-crash seed 27182830252).
    pub(crate) fn observe(
        &mut self,
        now: Instant,
        me: MemberId,
        gossip: &Gossip,
        last_heard: &dyn Fn(MemberId) -> Option<Instant>,
    ) {
        let cut_off = gossip.unreachable_from(me);
        self.track_cut_off(now, &cut_off, gossip);
        // An unreachable Exiting member keeps no decision pending: the leader removes it at
        // the next convergence. Kept pending, it ran every member's unstable bound on from
        // an earlier unreachability through that convergence's gossip, and a member it
        // reached late downed itself (swarm seed 7300003601).
        let undowned = (cut_off.iter())
            .filter(|id| !needs_no_decision(gossip, **id))
            .count();
        if undowned == 0 && cut_off.iter().any(|id| !is_down(gossip, *id)) {
            crate::probe::hit("downing: an unreachable Exiting member keeps no decision pending");
        }
        let (counted, joining) = counted_ids(gossip);
        let (last_undowned, last_joining) = (self.undowned, self.joining);
        (self.undowned, self.joining) = (undowned, joining);
        let was_pending = self.pending;
        self.pending = undowned > 0;
        if was_pending && !self.pending && self.lease_held_until.is_some() {
            self.settling = true;
        }
        if !self.pending && self.lease_due().is_some() {
            // Healed before the lease was asked for (or asked again): nothing to decide.
            self.lease = None;
        }
        // Others seeing `me` unreachable is as unstable as `me` seeing others so: they may
        // down `me` once that has lasted `stable-after`, counted from before `me` heard of
        // it, so `me`'s unstable bound runs from then too (flapping-links seed 1092827: a
        // one-way link let 2 hear everyone while nobody heard 2; when the partition then
        // turned symmetric, 2 detected it late and downed itself just after 1 reallocated).
        let seen_unreachable = gossip.unreachable().contains(&me);
        if seen_unreachable && !self.pending {
            crate::probe::hit(
                "downing: seen unreachable by others, a member's unstable bound runs",
            );
        }
        if self.pending || seen_unreachable {
            self.unreachable_since.get_or_insert(now);
        } else {
            self.unreachable_since = None;
            self.decided_for = None;
            self.cover_received = None;
        }
        let observed = Observed {
            cut_off,
            counted,
            own: gossip.observed_unreachable_by(me),
        };
        if observed == self.observed && self.unreachable_since.is_some() {
            // The gossip changed, not what a decision rests on: the clock keeps running.
            if undowned < last_undowned {
                crate::probe::hit("downing: an unreachable member marked Down keeps the clock");
            }
            if joining > last_joining {
                crate::probe::hit("downing: a join keeps the clock");
            }
        }
        if observed != self.observed {
            if last_undowned > 0 && only_stoppers_lost(&self.observed, &observed, gossip) {
                // A decision was pending and all that changed is that members stopping (Exiting
                // or Down) became unreachable: they count against `me`'s side either way or
                // from now on, so no decision this change allows is one `me` could not take
                // before. Restarting the clock pushed the pending one past the unstable bound,
                // and the whole majority downed itself (swarm seed 11010439: a member that had
                // left exited 3 ms before the leader's decision about a crashed member).
                crate::probe::hit(
                    "downing: a stopping member becoming unreachable keeps the clock",
                );
                self.observed = observed;
            } else if let Some(since) = self.confirmed_since(&observed, last_heard) {
                if since > self.stable_since {
                    // `me` heard a member it now confirms after the clock started: the record
                    // the clock ran on may be stale; it runs again from when `me` last heard it.
                    crate::probe::hit("downing: a member's own observation restarts the clock");
                    self.stable_since = since;
                } else {
                    crate::probe::hit(
                        "downing: a member's own observation confirming a cut-off keeps the clock",
                    );
                }
                self.observed = observed;
            } else {
                if observed.cut_off == self.observed.cut_off
                    && observed.counted == self.observed.counted
                {
                    crate::probe::hit("downing: a member's own observation restarts the clock");
                }
                self.observed = observed;
                self.stable_since = now;
                self.decided = false;
            }
        }
        self.reckon();
    }

    /// If `observed` only adds `me`'s own observations of members its side already cannot reach
    /// (a pending decision not taken yet): since when the picture has held for `me` too, the
    /// later of the clock's start and the last time `me` heard one of the members it confirms.
    fn confirmed_since(
        &self,
        observed: &Observed,
        last_heard: &dyn Fn(MemberId) -> Option<Instant>,
    ) -> Option<Instant> {
        let confirms = self.stable_after().is_some()
            && !self.decided
            && observed.cut_off == self.observed.cut_off
            && observed.counted == self.observed.counted
            && observed.own.is_superset(&self.observed.own)
            && observed.own.is_subset(&observed.cut_off);
        confirms.then(|| {
            observed
                .own
                .difference(&self.observed.own)
                .filter_map(|id| last_heard(*id))
                .fold(self.stable_since, Instant::max)
        })
    }

    /// When a member deciding by sides that has been unable to decide downs itself: the
    /// unstable bound, or later while the holder of the downing lease covers it (see `cover`).
    fn unstable_deadline(&self) -> Option<Instant> {
        match self.strategy {
            Downing::AutoDown { .. } | Downing::Off => None,
            _ => {
                let bound = self.unstable_bound()?;
                Some(self.covered_until().map_or(bound, |cover| cover.max(bound)))
            }
        }
    }

    /// 7/4 of `stable_after` after someone became unreachable (Akka's down-all-when-unstable).
    fn unstable_bound(&self) -> Option<Instant> {
        Some(self.unreachable_since? + self.stable_after()? * 7 / 4)
    }

    /// When a decision may be due.
    pub(crate) fn deadline(&self) -> Option<Instant> {
        debug_assert_eq!(
            self.deadline,
            self.next_deadline(),
            "the kept deadline is current"
        );
        self.deadline
    }

    /// Works [`Downer::deadline`] out again, after a change to what it depends on.
    fn reckon(&mut self) {
        self.deadline = self.next_deadline();
    }

    fn next_deadline(&self) -> Option<Instant> {
        let stable_after = self.stable_after()?;
        let stable = (self.pending && !self.decided)
            .then_some((self.stable_since + stable_after).max(self.not_before));
        [
            stable,
            self.unstable_deadline(),
            self.lease_due(),
            self.unsettled_ask_due(),
            self.notice_due(),
            self.renew_at.filter(|_| self.pending),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Holds a due decision back until `until`: some member `me` monitors has gone quiet
    /// without being declared unreachable yet, so what `me` believes about its own side may be
    /// stale (a partition that is still being detected). Deciding now could count that member
    /// on `me`'s side, win, down the others, and leave two sides each believing it won. (The
    /// unstable bound is not held back: downing oneself is always safe.)
    pub(crate) fn postpone(&mut self, until: Instant) {
        crate::probe::hit("downing: a decision waits while a monitored member goes quiet");
        self.not_before = self.not_before.max(until);
        self.reckon();
    }

    /// Whether a decision due now could come out differently were the `doubted` members (ones
    /// `me` monitors that went quiet without being declared unreachable yet) in fact cut off:
    /// only then is it worth holding back (see `postpone`). A doubt that cannot change which
    /// side wins is no reason to wait: a leader whose answers from one member after another
    /// were late (a long latency tail) held a decision about a crashed member back for four
    /// seconds, and a member that then missed the decision's gossip downed itself as unstable
    /// (coordinator-crash seed 4242432640).
    pub(crate) fn doubt_matters(
        &self,
        me: MemberId,
        gossip: &Gossip,
        doubted: &BTreeSet<MemberId>,
    ) -> bool {
        let unvouched = self.unvouched(me, gossip);
        let doubted: BTreeSet<MemberId> = unvouched.union(doubted).copied().collect();
        match strategy::survives(self.strategy, me, gossip, &unvouched) {
            Some(survives) => {
                let matters = survives
                    != (strategy::survives(self.strategy, me, gossip, &doubted))
                        .expect("the same strategy decides by sides");
                if !matters {
                    crate::probe::hit(
                        "downing: a doubt that cannot change the decision does not hold it back",
                    );
                }
                matters
            }
            None => !doubted.is_empty(),
        }
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
        if (self.unstable_bound()).is_some_and(|bound| self.cover_holds_bound(now, bound)) {
            crate::probe::hit("downing: the lease's cover holds a member's unstable bound back");
        }
        if self.unstable_deadline().is_some_and(|at| at <= now) {
            crate::probe::hit("downing: unstable for too long, a member downs itself");
            // Nor does it ask for the downing lease any more.
            self.lease = None;
            self.reckon();
            return [me].into();
        }
        let Some(stable_after) = self.stable_after() else {
            return BTreeSet::new();
        };
        self.renew_if_due(now);
        let stable_due = self.pending
            && !self.decided
            && (self.stable_since + stable_after).max(self.not_before) <= now;
        let unsettled_due = self.unsettled_ask_due().is_some_and(|at| at <= now);
        if !stable_due && !unsettled_due {
            // Not due, or due only for the lease's ask (see `poll_lease_call`).
            return BTreeSet::new();
        }
        if stable_due {
            self.decided = true;
        } else {
            crate::probe::hit("downing: a side whose picture did not settle asks for the lease");
        }
        self.reckon();
        if let Downing::LeaseMajority { .. } = self.strategy {
            return self.decide_by_lease(now, me, gossip);
        }
        let unreachable = undowned_unreachable(me, gossip);
        let leads = gossip.leader(me) == Some(me);
        match strategy::survives(self.strategy, me, gossip, &self.unvouched(me, gossip)) {
            Some(true) if leads => unreachable,
            Some(true) => BTreeSet::new(),
            Some(false) => {
                crate::probe::hit("downing: a member on a losing side downs itself");
                [me].into()
            }
            None if leads && matches!(self.strategy, Downing::AutoDown { .. }) => unreachable,
            None => BTreeSet::new(),
        }
    }
}

impl Downer {
    /// The members `me`'s side cannot vouch for (see `sides::unvouched`): a decision counts
    /// them as cut off.
    fn unvouched(&self, me: MemberId, gossip: &Gossip) -> BTreeSet<MemberId> {
        let unvouched = unvouched(me, gossip, self.monitored_by);
        if !unvouched.is_empty() {
            crate::probe::hit("downing: a member nobody on our side monitors is not counted ours");
        }
        unvouched
    }
}

/// Whether `now` differs from `before` only by members that are stopping (Exiting or Down in
/// `gossip`, or gone) becoming unreachable, to `me`'s side or to `me` itself.
fn only_stoppers_lost(before: &Observed, now: &Observed, gossip: &Gossip) -> bool {
    let stopping = |id: &MemberId| needs_no_decision(gossip, *id);
    now.counted == before.counted
        && now.cut_off.is_superset(&before.cut_off)
        && now.own.is_superset(&before.own)
        && now.cut_off.difference(&before.cut_off).all(stopping)
        && now.own.difference(&before.own).all(stopping)
}

#[cfg(test)]
mod tests;
