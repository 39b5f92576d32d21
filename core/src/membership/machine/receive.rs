//! What a member does with the membership messages it receives: joins, full gossip, digest
//! exchanges, seen sets, heartbeats and their answers, a removed member's last words.

use super::*;

impl Membership {
    /// A membership message from `from`.
    pub(crate) fn handle_message(
        &mut self,
        now: Instant,
        from: MemberId,
        message: ClusterMessage,
        rng: &mut Rng,
        out: &mut Effects,
    ) {
        if matches!(self.phase, Phase::Removed | Phase::Downed) {
            return;
        }
        match message {
            ClusterMessage::InitJoin { address } => {
                if self.accepts_joins() {
                    out.send_cluster_at(from, address, ClusterMessage::InitJoinAck);
                } else {
                    self.answer_probe(from, address, out);
                }
            }
            ClusterMessage::InitJoinNack { known, may_form } => {
                self.handle_nack(now, from, (known, may_form), rng, out);
            }
            ClusterMessage::InitJoinAck => {
                if self.phase == Phase::Joining {
                    let join = ClusterMessage::Join {
                        roles: self.joiner.roles.clone(),
                        app_version: self.joiner.app_version,
                        hosts: BTreeSet::clone(&self.joiner.hosts),
                        address: self.joiner.address.clone(),
                    };
                    out.send_cluster(from, join);
                }
            }
            ClusterMessage::Join {
                roles,
                app_version,
                hosts,
                address,
            } => {
                if self.accepts_joins() {
                    let joiner =
                        GossipMember::joining(from, roles, app_version, hosts).at(address.clone());
                    if self.gossip.add_joining(self.me, joiner) {
                        self.after_change(now, rng, out);
                    }
                    if self.gossip.member(from).is_some() {
                        let welcome = ClusterMessage::Welcome(self.state_to_send());
                        out.send_cluster_at(from, address, welcome);
                    }
                }
            }
            ClusterMessage::Welcome(gossip) | ClusterMessage::Gossip(gossip) => {
                self.handle_gossip(now, from, *gossip, rng, out);
            }
            ClusterMessage::GossipStatus {
                state,
                seen,
                answer,
            } => {
                self.handle_gossip_status(now, from, (state, seen, answer), rng, out);
            }
            ClusterMessage::GossipSeen {
                state,
                seen,
                answer,
            } => {
                if self.phase != Phase::Member {
                    return;
                }
                let (grew, more) = self.gossip.receive_seen(state, &seen);
                if answer && more {
                    let seen = ClusterMessage::GossipSeen {
                        state,
                        seen: self.gossip.seen().clone(),
                        answer: false,
                    };
                    out.send_cluster(from, seen);
                }
                if grew {
                    self.act(now, false, rng, out);
                }
            }
            ClusterMessage::Heartbeat { sequence } => {
                // A member this state downed or removed is told so instead of answered: taking
                // answers for reachability, it would restart its own split-brain decision and
                // keep its entities past the removal margin, after which its shards run
                // elsewhere (flapping-links seed 10800001737: the majority answered a member
                // it had removed). Our state shows it Down or removed, and it stops.
                if self.gossip.is_removed(from) || self.is_down(from) {
                    crate::probe::hit(
                        "membership: a downed or removed member's heartbeat is answered with our state",
                    );
                    let state = ClusterMessage::Gossip(self.state_to_send());
                    out.send_cluster(from, state);
                    return;
                }
                out.send_cluster(from, ClusterMessage::HeartbeatRsp { sequence });
            }
            ClusterMessage::HeartbeatRsp { .. } => self.handle_heartbeat_rsp(now, from, rng, out),
            ClusterMessage::DowningLeaseHeld { cover } => {
                if self.phase == Phase::Member {
                    (self.downer).handle_cover(now, self.me, from, cover, &self.gossip);
                }
            }
        }
    }

    /// Whether this state has `id` as a Down member.
    fn is_down(&self, id: MemberId) -> bool {
        self.gossip
            .member(id)
            .is_some_and(|m| m.status == MemberStatus::Down)
    }

    fn accepts_joins(&self) -> bool {
        self.phase == Phase::Member
            && matches!(
                self.status(),
                Some(MemberStatus::Up | MemberStatus::Joining)
            )
    }

    fn handle_gossip(
        &mut self,
        now: Instant,
        from: MemberId,
        remote: Gossip,
        rng: &mut Rng,
        out: &mut Effects,
    ) {
        if self.phase == Phase::Joining {
            // Welcomed (or told by gossip that we are in): adopt the cluster's state.
            if remote.member(self.me).is_none() {
                return;
            }
            self.phase = Phase::Member;
        }
        let sender_knew_we_saw_it = remote.seen().contains(&self.me);
        let received = self.gossip.receive(self.me, remote);
        if matches!(received, Received::Older | Received::Merged) {
            out.send_cluster(from, ClusterMessage::Gossip(self.state_to_send()));
        } else if !sender_knew_we_saw_it && self.gossip.member(from).is_some() {
            // Akka's talkback, as digests: the sender learns that we hold its state.
            out.send_cluster(from, self.gossip_status(false));
        }
        // A state learned from a peer is not pushed on at once (Akka's `receiveGossip` only
        // talks back): the rounds spread it, three times as often while fewer than half the
        // members have seen it. Pushing every newer state on made a forming cluster send
        // each member a few full states a second for every one it needed. What this member
        // changes itself (here, leader actions) is still spread at once.
        if self.act(now, received != Received::Same, rng, out) {
            self.gossip_to(1, rng, out);
        }
    }

    /// A digest exchange: equal states need nothing more (the sender has seen ours, which may
    /// complete convergence); otherwise the sender gets our full state to merge.
    fn handle_gossip_status(
        &mut self,
        now: Instant,
        from: MemberId,
        (state, seen, answer): (StateDigest, u64, bool),
        rng: &mut Rng,
        out: &mut Effects,
    ) {
        if self.phase != Phase::Member || self.gossip.member(from).is_none() {
            return;
        }
        let seen_before = self.gossip.seen().len();
        match self.gossip.receive_status(from, state, seen) {
            StatusMatch::InSync => {}
            _ if !answer => {}
            StatusMatch::SeenDiffers => {
                let seen = ClusterMessage::GossipSeen {
                    state,
                    seen: self.gossip.seen().clone(),
                    answer: true,
                };
                out.send_cluster(from, seen);
            }
            StatusMatch::StateDiffers => {
                out.send_cluster(from, ClusterMessage::Gossip(self.state_to_send()));
            }
        }
        if self.gossip.seen().len() != seen_before {
            self.act(now, false, rng, out);
        }
    }

    fn handle_heartbeat_rsp(
        &mut self,
        now: Instant,
        from: MemberId,
        rng: &mut Rng,
        out: &mut Effects,
    ) {
        let settings = &self.settings.failure_detector;
        let Some((detector, _)) = self.detectors.get_mut(&from) else {
            return;
        };
        detector.heartbeat(now, settings);
        if self.gossip.observes_unreachable(self.me, from)
            && self.gossip.observe(self.me, from, true)
        {
            self.after_change(now, rng, out);
        }
    }
}
