//! A member's periodic rounds and their timers: gossip (full states to those that have not
//! seen them, digests otherwise) and heartbeats to the monitored members, which update
//! reachability.

use std::time::Duration;

use super::*;

impl Membership {
    /// When [`Membership::handle_timeout`] should run next.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        soonest(&self.deadlines())
    }

    /// Each of the machine's timers with its name (for [`Membership::poll_timeout`] and for
    /// naming the timer of a busy loop).
    pub(crate) fn deadlines(&self) -> [NamedDeadline; 4] {
        match self.phase {
            Phase::Joining => [
                ("join attempt", Some(self.next_join_attempt)),
                ("form cluster", self.form_cluster_at),
                ("heartbeat or gossip", None),
                ("downing or exit", None),
            ],
            Phase::Member => [
                (
                    "heartbeat or gossip",
                    Some(self.next_heartbeat.min(self.next_gossip)),
                ),
                ("downing", self.downer.deadline()),
                ("exit", self.exit_deadline),
                ("join attempt", None),
            ],
            Phase::Removed | Phase::Downed => [("none", None); 4],
        }
    }

    /// How long until the next gossip round: a third of the interval while fewer than half
    /// the members have seen this state (Akka's `isGossipSpeedupNeeded`), since rounds alone
    /// spread what a member learns from its peers.
    pub(super) fn gossip_round_interval(&self) -> Duration {
        let interval = self.settings.gossip_interval;
        if self.gossip.seen().len() < self.gossip.member_count() / 2 {
            interval / 3
        } else {
            interval
        }
    }

    /// Sends the state to `count` random members, preferring those that have not seen it.
    /// Always, as Akka does today: its reference.conf documents a preference of 0.8 lowered
    /// above `reduce-gossip-different-view-probability` (400) members, but its
    /// `GossipTargetSelector` is built with that 400 as the probability (Akka 2.4 lowered it).
    pub(super) fn gossip_to(&mut self, count: usize, rng: &mut Rng, out: &mut Effects) {
        let state = self.state_stamp();
        let mut targets =
            GossipTargets::refresh(self.gossip_targets.take(), state, &self.gossip, self.me);
        let chosen = {
            let split = targets.split(self.gossip.seen().as_slice());
            draw_targets([split.unseen(), split.seen()], count, rng)
        };
        self.gossip_targets = Some(targets);
        for (pool, to) in chosen {
            // A member that has seen this state (drawn from the second pool) gets its digests
            // (Akka's GossipStatus).
            let message = if pool == 1 {
                self.gossip_status(true)
            } else {
                ClusterMessage::Gossip(self.state_to_send())
            };
            out.send_cluster(to, message);
        }
    }

    /// A copy of the state to send whole, with its digest worked out first: the copy carries
    /// it (in-process copies do, as the simulator's), so a receiver holding the same state
    /// knows at once and a host measures the frame without walking a large cluster's state.
    pub(super) fn state_to_send(&mut self) -> Box<Gossip> {
        self.gossip.digest();
        Box::new(self.gossip.clone())
    }

    /// This member's digests, as a round (`answer`) or a talkback.
    pub(super) fn gossip_status(&mut self, answer: bool) -> ClusterMessage {
        ClusterMessage::GossipStatus {
            state: self.gossip.digest(),
            seen: self.gossip.seen_digest(),
            answer,
        }
    }

    /// Heartbeats to the monitored members (and to those observed unreachable, to notice
    /// their return); updates reachability from the detectors. Down members are monitored too:
    /// they are removed once they are unreachable (stopped), which only a detector can tell.
    pub(super) fn heartbeat(&mut self, now: Instant, rng: &mut Rng, out: &mut Effects) {
        let cached = self.heartbeat_receivers();
        let settings = &self.settings.failure_detector;
        self.detectors
            .retain(|m, _| cached.receivers.binary_search(m).is_ok());
        let expect_by = now + self.settings.heartbeat_interval + settings.first_heartbeat_estimate;
        let mut changed = false;
        for &r in cached.receivers.iter() {
            let (detector, first_due) = self
                .detectors
                .entry(r)
                .or_insert_with(|| (PhiAccrual::new(settings), expect_by));
            if cached.down.contains(&r) {
                crate::probe::hit("membership: a Down member is monitored until unreachable");
            }
            // A member that never answered is judged from when its first answer was due.
            if !detector.is_monitoring() && *first_due <= now {
                detector.heartbeat(*first_due, settings);
            }
            if detector.is_monitoring() && !detector.is_available(now, settings) {
                changed |= self.gossip.observe(self.me, r, false);
            }
            self.heartbeat_sequence += 1;
            let probe = ClusterMessage::Heartbeat {
                sequence: self.heartbeat_sequence,
            };
            out.send_cluster(r, probe);
        }
        self.heartbeat_receivers = Some(cached);
        if changed {
            self.after_change(now, rng, out);
        }
    }

    /// The monitored members and those this member observes unreachable, sorted (worked out
    /// again only when the state changed: both depend on nothing else).
    fn heartbeat_receivers(&mut self) -> HeartbeatReceivers {
        let state = self.state_stamp();
        if let Some(cached) = self.heartbeat_receivers.take().filter(|c| c.state == state) {
            return cached;
        }
        let members: Vec<MemberId> = self.gossip.members().map(|m| m.id).collect();
        let mut receivers: BTreeSet<MemberId> =
            monitored(self.me, &members, self.settings.monitored_by)
                .into_iter()
                .collect();
        receivers.extend(
            members
                .iter()
                .filter(|m| self.gossip.observes_unreachable(self.me, **m)),
        );
        let down = receivers
            .iter()
            .copied()
            .filter(|r| {
                self.gossip
                    .member(*r)
                    .is_some_and(|m| m.status == MemberStatus::Down)
            })
            .collect();
        HeartbeatReceivers {
            state,
            receivers: receivers.into_iter().collect(),
            down,
        }
    }
}

/// Whom heartbeats go to under one state (see [`Membership::heartbeat_receivers`]).
#[derive(Debug)]
pub(super) struct HeartbeatReceivers {
    state: StateStamp,
    receivers: Vec<MemberId>,
    /// Those of them that are Down, for a probe (usually none: a round looked each receiver's
    /// status up in a thousand-member map every second for it).
    down: Vec<MemberId>,
}
