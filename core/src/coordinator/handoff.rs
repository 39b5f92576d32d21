//! Handoff of one shard from its owner (rebalance, graceful shutdown):
//!
//! ```text
//!  BeginHandOff ─▶ every region & proxy ──acks (relayed by the owner; a removed region counts)──▶
//!  HandOff ─▶ owner ──ShardStopped──▶ deallocate, re-allocate, answer deferred requests
//! ```
//! One deadline (`handoff-timeout`) covers both phases. If the acks do not all arrive in time the
//! handoff is abandoned: the owner never stopped anything, so the shard stays with it and deferred
//! requests are answered with it. If the owner does not report `ShardStopped` in time, requests
//! stay deferred and `HandOff` is repeated: answering with an owner that is stopping the shard
//! would route messages into it that come out later, behind newer ones (found by the
//! random-operations test). A `ShardStopped` completes the handoff whenever it arrives, late
//! ones included (Akka.NET#7500).

use std::collections::BTreeSet;

use crate::coordinator::Coordinator;
use crate::effect::{Effects, Event};
use crate::id::{Epoch, HandoffRound, MemberId, ShardId};
use crate::members::{MemberStatus, MembershipView};
use crate::message::Body;
use crate::time::Instant;

/// The phase of one handoff.
#[derive(Debug)]
enum Phase {
    /// Waiting for these regions and proxies to forget the shard's home and acknowledge
    /// this round.
    Acking {
        round: HandoffRound,
        pending: BTreeSet<MemberId>,
    },
    /// `HandOff` sent; waiting for the owner's `ShardStopped`.
    Stopping,
}

/// A shard on its way out of its owner.
#[derive(Debug)]
pub(super) struct Handoff {
    pub(super) owner: MemberId,
    phase: Phase,
    /// When it began (or the coordinator learned of it).
    started: Instant,
    pub(super) deadline: Instant,
    /// Regions that asked for the shard meanwhile; answered once it has a new home.
    pub(super) requesters: BTreeSet<MemberId>,
    /// `HandOff` was repeated after the deadline (probes only).
    repeated: bool,
}

impl Handoff {
    /// A handoff learned from a registration, or of a region shutting down, at `now`: the
    /// owner is already stopping the shard.
    pub(super) fn stopping(owner: MemberId, now: Instant, deadline: Instant) -> Self {
        Self {
            owner,
            phase: Phase::Stopping,
            started: now,
            deadline,
            requesters: BTreeSet::new(),
            repeated: false,
        }
    }
}

impl Coordinator {
    /// Starts handing `shard` off from its owner, unless it is already moving or not yet
    /// acknowledged by its owner. Whether it started.
    pub(super) fn start_handoff(
        &mut self,
        now: Instant,
        shard: ShardId,
        out: &mut Effects,
    ) -> bool {
        let Some(&owner) = self.shards.get(&shard) else {
            return false;
        };
        if self.handoffs.contains_key(&shard) || self.unacked.contains_key(&shard) {
            return false;
        }
        let pending: BTreeSet<MemberId> = self
            .regions
            .keys()
            .chain(&self.proxies)
            .filter(|r| !self.terminating.contains_key(r))
            .filter(|r| {
                let exited = self.exits.get(r).is_some_and(|via| via.contains(&owner));
                if exited {
                    crate::probe::hit("coordinator: a handoff skips a region that exited");
                }
                !exited
            })
            .copied()
            .collect();
        // Rounds are unique across this member's coordinators too: they start from the time
        // the coordinator started.
        let round = HandoffRound(self.next_round);
        self.next_round += 1;
        for &region in &pending {
            let begin = Body::BeginHandOff {
                shard,
                owner,
                round,
            };
            out.send(region, &self.entity_type, begin);
        }
        let handoff = Handoff {
            owner,
            phase: Phase::Acking { round, pending },
            started: now,
            deadline: now + self.settings.handoff_timeout,
            requesters: BTreeSet::new(),
            repeated: false,
        };
        self.handoffs.insert(shard, handoff);
        self.advance_handoff(shard, out);
        true
    }

    pub(super) fn handle_handoff_ack(
        &mut self,
        shard: ShardId,
        region: MemberId,
        acked: HandoffRound,
        out: &mut Effects,
    ) {
        if let Some(Handoff {
            phase: Phase::Acking { round, pending },
            ..
        }) = self.handoffs.get_mut(&shard)
        {
            if *round != acked {
                tracing::debug!(%shard, %region, acked = acked.0, round = round.0, "acknowledgement of another handoff round");
                crate::probe::hit(
                    "coordinator: an acknowledgement of another handoff round is ignored",
                );
                return;
            }
            pending.remove(&region);
            self.advance_handoff(shard, out);
        }
    }

    /// A region or proxy is gone: it will never ack, and it holds no stale home.
    pub(super) fn count_as_acked(&mut self, _now: Instant, region: MemberId, out: &mut Effects) {
        let shards: Vec<ShardId> = self.handoffs.keys().copied().collect();
        let probe = "coordinator: a region that is gone counts as having acknowledged";
        self.ack_for(region, shards, probe, out);
    }

    /// `region` exited and everything it forwarded to `owner` has arrived: it acknowledges
    /// every handoff of a shard `owner` owns, now and while it is still a member (its
    /// registration as a proxy may arrive after this).
    pub(super) fn handle_region_exited(
        &mut self,
        view: &MembershipView,
        region: MemberId,
        owner: MemberId,
        out: &mut Effects,
    ) {
        if view.member(region).is_some() {
            self.exits.entry(region).or_default().insert(owner);
        }
        let shards: Vec<ShardId> = self
            .handoffs
            .iter()
            .filter(|(_, h)| h.owner == owner)
            .map(|(&shard, _)| shard)
            .collect();
        let probe = "coordinator: an exited region acknowledges through the owner";
        self.ack_for(region, shards, probe, out);
    }

    /// Takes `region`'s acknowledgement of every handoff of `shards` still waiting for it.
    fn ack_for(
        &mut self,
        region: MemberId,
        shards: Vec<ShardId>,
        probe: &'static str,
        out: &mut Effects,
    ) {
        for shard in shards {
            if let Some(Handoff {
                phase: Phase::Acking { pending, .. },
                ..
            }) = self.handoffs.get_mut(&shard)
            {
                if pending.remove(&region) {
                    crate::probe::hit(probe);
                    self.advance_handoff(shard, out);
                }
            }
        }
    }

    /// Every ack is in: tell the owner to stop the shard.
    fn advance_handoff(&mut self, shard: ShardId, out: &mut Effects) {
        let Some(handoff) = self.handoffs.get_mut(&shard) else {
            return;
        };
        if matches!(&handoff.phase, Phase::Acking { pending, .. } if pending.is_empty()) {
            handoff.phase = Phase::Stopping;
            out.send(handoff.owner, &self.entity_type, Body::HandOff { shard });
        }
    }

    /// `from` stopped its instance of `shard` (the end of a handoff, or a late answer).
    pub(super) fn handle_shard_stopped(
        &mut self,
        now: Instant,
        view: &MembershipView,
        from: MemberId,
        shard: ShardId,
        out: &mut Effects,
    ) {
        self.complete_stop(now, view, from, shard, None, out);
    }

    /// `from`'s instance of `shard` was fenced by the store at `current` and has stopped: later
    /// epochs go above `current`, and the shard is hosted by `from` again.
    pub(super) fn handle_shard_fenced(
        &mut self,
        now: Instant,
        view: &MembershipView,
        from: MemberId,
        (shard, current): (ShardId, Epoch),
        out: &mut Effects,
    ) {
        self.note_fenced(current);
        self.complete_stop(now, view, from, shard, Some(current), out);
    }

    /// A region's instance of `shard` stopped (after a handoff, or `fenced` by a store holding
    /// that newer epoch): the handoff completes and the shard is allocated again.
    fn complete_stop(
        &mut self,
        now: Instant,
        view: &MembershipView,
        from: MemberId,
        shard: ShardId,
        fenced: Option<Epoch>,
        out: &mut Effects,
    ) {
        if self.shards.get(&shard) != Some(&from) {
            return;
        }
        if self.handoffs.get(&shard).is_some_and(|h| h.owner != from) {
            return;
        }
        // A region may say it does not host a shard while our `HostShard` is still in flight;
        // the resend settles that. Otherwise it is a completed (or late) handoff. Not when the
        // store fenced the very allocation in flight (its epoch is older than the store's):
        // resent at that epoch, it would be refused again and again, for as long as the
        // region's acknowledgement takes (mass-shutdown seed 7001586: a new coordinator had
        // read the store's epochs before its predecessor's last load landed, and hosted the
        // shard below it on a region whose `ShardStarted` was slow).
        let in_flight_fenced = fenced.is_some_and(|current| self.epoch_of(shard) < current);
        if in_flight_fenced {
            crate::probe::hit("coordinator: a fenced allocation in flight is allocated again");
        }
        if !self.handoffs.contains_key(&shard)
            && self.unacked.contains_key(&shard)
            && !in_flight_fenced
        {
            crate::probe::hit("coordinator: ShardStopped while HostShard is in flight is ignored");
            return;
        }
        if self.handoffs.get(&shard).is_some_and(|h| h.repeated) {
            crate::probe::hit("coordinator: a late ShardStopped completes the handoff");
        }
        let requesters = match self.handoffs.remove(&shard) {
            Some(handoff) => {
                out.event(Event::HandoffCompleted {
                    entity_type: self.entity_type.clone(),
                    shard,
                    from,
                    took: now.saturating_duration_since(handoff.started),
                });
                self.handoff_ended(now, shard, out);
                handoff.requesters
            }
            None => BTreeSet::new(),
        };
        self.deallocate(shard);
        let host_again = fenced.is_some() && Self::may_host_again(view, from);
        if host_again && !self.lease_allows(now) {
            // Hosted there again once the lease is held (rolling-restart seed 9300001427: a
            // coordinator that lost its lease to a store outage heard of the fencing, and
            // once granted again placed the shard on a newcomer; the letters were dropped).
            crate::probe::hit("coordinator: a fenced shard waits for the lease to be hosted again");
            self.fenced_regions.insert(shard, from);
            self.allocate(now, view, shard, requesters, out);
        } else if host_again {
            // Its instance may have stopped holding letters whose entity never started (the
            // store refused it before the start was durable); they went back in front of its
            // region's buffer. Hosted there again, they are delivered before anything other
            // regions send once they learn the home. Anywhere else, they and the newer letters
            // their senders send straight to the new home would race (seed 21052, oracle
            // membership). A region shutting down hands it off again once it starts it.
            crate::probe::hit("coordinator: a fenced shard is hosted again by its region");
            self.host(now, shard, from, requesters, out);
        } else {
            self.allocate(now, view, shard, requesters, out);
        }
    }

    /// Whether `region`, whose instance of a shard the store fenced, may host it again: it is
    /// still a member, and not Down. It is registered (shards are assigned to registered
    /// regions only), and a region in its removal margin has already left the view.
    pub(super) fn may_host_again(view: &MembershipView, region: MemberId) -> bool {
        view.member(region)
            .is_some_and(|m| m.status != MemberStatus::Down)
    }

    /// Ends handoffs whose deadline passed: the shard stays with its owner.
    pub(super) fn expire_handoffs(
        &mut self,
        now: Instant,
        view: &MembershipView,
        out: &mut Effects,
    ) {
        let expired: Vec<ShardId> = self
            .handoffs
            .iter()
            .filter(|(_, h)| h.deadline <= now)
            .map(|(s, _)| *s)
            .collect();
        for shard in expired {
            let handoff = self
                .handoffs
                .get_mut(&shard)
                .expect("expired handoff exists");
            if matches!(handoff.phase, Phase::Stopping) {
                // The owner was told to stop the shard: pointing anyone back at it would send
                // messages to a stopping shard, to be re-routed later out of order. Keep
                // deferring, and repeat `HandOff` in case it was lost.
                tracing::warn!(%shard, owner = %handoff.owner, "shard not stopped in time; repeating HandOff");
                crate::probe::hit("coordinator: HandOff is repeated after the deadline");
                handoff.repeated = true;
                handoff.deadline = now + self.settings.handoff_timeout;
                out.send(handoff.owner, &self.entity_type, Body::HandOff { shard });
                continue;
            }
            let Some(Handoff {
                owner,
                phase: Phase::Acking { pending, .. },
                requesters,
                ..
            }) = self.handoffs.remove(&shard)
            else {
                continue;
            };
            let waiting_for: Vec<MemberId> = pending.into_iter().collect();
            tracing::warn!(%shard, %owner, ?waiting_for, "handoff acks timed out; shard stays with its owner");
            crate::probe::hit(
                "coordinator: a handoff whose acknowledgements timed out is abandoned",
            );
            out.event(Event::HandoffAbandoned {
                entity_type: self.entity_type.clone(),
                shard,
                owner,
                waiting_for,
            });
            self.handoff_ended(now, shard, out);
            // A region shutting down stays out of allocations (rebalancing would otherwise
            // give back shards to a region that is leaving, rolling-restart seed 8089 with the
            // oracle); its next `GracefulShutdownReq` starts the handoff again. Akka forgets
            // the shutdown here until that request comes.
            self.waiting.entry(shard).or_default().extend(requesters);
        }
        self.serve_waiting(now, view, out);
    }
}
