//! The membership state machine a [`crate::Node`] runs when it manages membership itself:
//! joining through seed nodes, gossip, heartbeats into phi-accrual detectors, reachability
//! observations, leader actions at convergence and downing. It produces the
//! [`MembershipView`] the sharding roles consume.

use std::collections::{BTreeMap, BTreeSet};

use crate::effect::Effects;
use crate::id::{Incarnation, MemberId, NodeId};
use crate::lease::{LeaseAnswer, LeaseCall};
use crate::members::{Gossip, GossipMember, Received, StateDigest, StateStamp, StatusMatch};
use crate::members::{MemberStatus, MembershipView};
use crate::membership::bootstrap::Bootstrap;
use crate::membership::detector::{PhiAccrual, monitored};
use crate::membership::downing::Downer;
use crate::membership::settings::MembershipSettings;
use crate::message::ClusterMessage;
use crate::rng::Rng;
use crate::time::{Instant, NamedDeadline, soonest};

mod joining;
mod receive;
mod rounds;
mod targets;

use targets::{GossipTargets, draw_targets};

/// Where this member is in its life.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Phase {
    /// Looking for a seed to join through.
    Joining,
    /// A member (Joining, Up, Leaving or Exiting in the gossip).
    Member,
    /// Removed after leaving: the host may stop this process.
    Removed,
    /// Downed (by the split brain resolver or an operator): it stopped every entity, and the
    /// host must stop this process and restart it as a new incarnation to rejoin.
    Downed,
}

/// The membership of one node.
#[derive(Debug)]
pub(crate) struct Membership {
    me: MemberId,
    joiner: GossipMember,
    settings: MembershipSettings,
    phase: Phase,
    gossip: Gossip,
    /// While joining: when to ask the seeds again, and (first seed only) when to form a new
    /// cluster if no other seed answered.
    next_join_attempt: Instant,
    form_cluster_at: Option<Instant>,
    /// Bootstrapping from discovered contacts, when configured (see `joining`).
    bootstrap: Option<Bootstrap>,
    next_gossip: Instant,
    next_heartbeat: Instant,
    heartbeat_sequence: u64,
    /// Monitored members: their detector, and when their first answer is due.
    detectors: BTreeMap<MemberId, (PhiAccrual, Instant)>,
    downer: Downer,
    /// An Exiting member that never hears of its removal considers itself removed then.
    exit_deadline: Option<Instant>,
    /// This member has seen itself Leaving: a removal is the end of its graceful leave. A
    /// member removed without leaving was downed by others (it never heard it was Down).
    leaving: bool,
    /// The counter this member stamps its states from (`Gossip::stamp`).
    stamps: u64,
    /// The state the last view was built from.
    published_state: Option<StateStamp>,
    /// The gossip may have changed since the view was last built.
    dirty: bool,
    /// The state and the seen set's digest for which the leader's actions last found nothing
    /// to do: they depend on nothing else, so they are not worked out again until either
    /// changes.
    leader_idle: Option<(StateStamp, u64)>,
    /// Whom a gossip round may go to, for the state they were worked out for: a round every
    /// second would otherwise look at every member.
    gossip_targets: Option<GossipTargets>,
    /// Whom heartbeats go to (the monitored members and those this member observes
    /// unreachable), for the state they were worked out for: every member's place on the ring
    /// is hashed, which a round every second would otherwise do for nothing.
    heartbeat_receivers: Option<rounds::HeartbeatReceivers>,
}

/// How many gossip rounds an Exiting member waits to hear of its removal.
const EXIT_ROUNDS: u32 = 10;

/// How often per heartbeat interval a decision held back by doubt is looked at again.
const DOUBT_CHECKS_PER_HEARTBEAT: u32 = 4;

/// How many members a downing decision is gossiped to at once (Akka gossips to 5 before a
/// downed member shuts itself down).
const DECISION_FANOUT: usize = 5;

impl Membership {
    /// A member that starts joining at `now`.
    pub(crate) fn new(
        me: MemberId,
        joiner: GossipMember,
        settings: MembershipSettings,
        now: Instant,
    ) -> Self {
        let is_first = settings.seed_nodes.first().map(|s| s.node) == Some(me.node);
        if is_first && !settings.may_form_cluster {
            crate::probe::hit(
                "membership: a restarted first seed joins instead of forming a cluster",
            );
        }
        let first_seed = is_first && settings.may_form_cluster;
        let alone = settings.seed_nodes.iter().all(|s| s.node == me.node);
        let form_cluster_at = match (first_seed, alone) {
            _ if settings.bootstrap.is_some() => None,
            (true, true) => Some(now),
            (true, false) => Some(now + settings.seed_node_timeout),
            (false, _) => None,
        };
        let bootstrap = settings.bootstrap.clone().map(|b| {
            let mut bootstrap = Bootstrap::new(b, now);
            bootstrap.discovered(now, &settings.seed_nodes);
            bootstrap
        });
        Self {
            me,
            joiner,
            phase: Phase::Joining,
            gossip: Gossip::default(),
            next_join_attempt: now,
            form_cluster_at,
            bootstrap,
            next_gossip: now + settings.gossip_interval,
            next_heartbeat: now + settings.heartbeat_interval,
            heartbeat_sequence: 0,
            detectors: BTreeMap::new(),
            downer: Downer::new(settings.downing, settings.monitored_by, now),
            exit_deadline: None,
            leaving: false,
            stamps: 0,
            published_state: None,
            dirty: true,
            leader_idle: None,
            gossip_targets: None,
            heartbeat_receivers: None,
            settings,
        }
    }

    /// Where this member is in its life.
    pub(crate) fn phase(&self) -> Phase {
        self.phase
    }

    /// This member's status in its own gossip.
    pub(crate) fn status(&self) -> Option<MemberStatus> {
        self.gossip.member(self.me).map(|m| m.status)
    }

    /// The stamp of the state this member holds.
    fn state_stamp(&mut self) -> StateStamp {
        self.gossip.stamp(&mut self.stamps)
    }

    /// Whether the state may have changed since the view was last taken (every change of the
    /// gossip marks it): nothing that depends on the state alone needs a second look otherwise.
    pub(crate) fn may_have_changed(&self) -> bool {
        self.dirty
    }

    /// The view, if it differs from `current`, the one the node holds (the last one taken):
    /// compared with the node's copy, so no second copy of every member is kept here.
    pub(crate) fn take_view(&mut self, current: &MembershipView) -> Option<MembershipView> {
        // Asked after every input the node handles: only rebuilt when the gossip may differ.
        if self.phase == Phase::Joining || !std::mem::take(&mut self.dirty) {
            return None;
        }
        // The view is a function of the state (members, removed, reachability): one the view
        // was built from needs no new view (a gossip found older changes nothing).
        let state = self.state_stamp();
        if self.published_state == Some(state) && self.phase != Phase::Removed {
            return None;
        }
        self.published_state = Some(state);
        let mut view = self.gossip.view();
        if self.phase == Phase::Removed {
            // Removed by its own deadline: the gossip it last heard still lists it Exiting.
            view = view.without(self.me);
        }
        (view != *current).then_some(view)
    }

    /// Starts leaving gracefully (the node hands off its shards meanwhile).
    pub(crate) fn leave(&mut self, now: Instant, rng: &mut Rng, out: &mut Effects) {
        if self
            .gossip
            .set_status(self.me, self.me, MemberStatus::Leaving)
        {
            self.after_change(now, rng, out);
        }
    }

    /// An operator moves `member` to `status` (Leaving or Down; never backwards). Whether it
    /// is a member. The change is spread at once, as a downing decision is.
    pub(crate) fn operator_moves(
        &mut self,
        now: Instant,
        member: MemberId,
        status: MemberStatus,
        rng: &mut Rng,
        out: &mut Effects,
    ) -> bool {
        if self.phase != Phase::Member || self.gossip.member(member).is_none() {
            return false;
        }
        tracing::info!(%member, ?status, "operator moves a member");
        crate::probe::hit("membership: an operator moves a member");
        if self.gossip.set_status(self.me, member, status) {
            self.observe_for_downing(now);
            self.act(now, true, rng, out);
            self.gossip_to(DECISION_FANOUT, rng, out);
        }
        true
    }

    /// The node's regions have handed off everything: this Leaving member may exit.
    pub(crate) fn ready_to_exit(&mut self, now: Instant, rng: &mut Rng, out: &mut Effects) {
        if self.status() == Some(MemberStatus::Leaving) && self.gossip.set_ready_to_exit(self.me) {
            self.after_change(now, rng, out);
        }
    }

    /// Runs whatever is due.
    pub(crate) fn handle_timeout(&mut self, now: Instant, rng: &mut Rng, out: &mut Effects) {
        match self.phase {
            Phase::Joining => self.try_join(now, rng, out),
            Phase::Member => {
                if now >= self.next_heartbeat {
                    self.next_heartbeat = now + self.settings.heartbeat_interval;
                    self.heartbeat(now, rng, out);
                }
                if now >= self.next_gossip {
                    self.next_gossip = now + self.gossip_round_interval();
                    self.gossip_to(1, rng, out);
                }
                if self.exit_deadline.is_some_and(|at| at <= now) {
                    crate::probe::hit(
                        "membership: an Exiting member gives up waiting for its removal",
                    );
                    self.phase = Phase::Removed;
                    // Its roles must see it removed too: they stop routing, and a region that
                    // stopped gracefully announces its exit (mass-shutdown seed 111339).
                    self.dirty = true;
                }
                self.act(now, false, rng, out);
            }
            Phase::Removed | Phase::Downed => {}
        }
    }

    fn try_join(&mut self, now: Instant, rng: &mut Rng, out: &mut Effects) {
        if self.form_cluster_at.is_some_and(|at| at <= now) {
            // No other seed answered: this first seed forms a new cluster.
            self.form(now, rng, out);
            return;
        }
        if self.bootstrap.is_some() {
            self.probe_contacts(now, out);
            self.try_form(now, rng, out);
            return;
        }
        if now < self.next_join_attempt {
            return;
        }
        self.next_join_attempt = now + self.settings.retry_join_after;
        for seed in &self.settings.seed_nodes {
            if seed.node != self.me.node {
                let init = ClusterMessage::InitJoin {
                    address: self.joiner.address.clone(),
                };
                out.send_cluster_at(anyone_at(seed.node), seed.address.clone(), init);
            }
        }
    }

    /// A local change: spread it and act on it.
    fn after_change(&mut self, now: Instant, rng: &mut Rng, out: &mut Effects) {
        self.act(now, true, rng, out);
        self.gossip_to(1, rng, out);
    }

    /// Leader actions, downing, and this member's own fate, after the gossip `changed` (or
    /// only its seen set, or time passed). Whether the leader's actions changed the state
    /// here (a local change the caller may spread; downing decisions spread themselves).
    fn act(&mut self, now: Instant, changed: bool, rng: &mut Rng, out: &mut Effects) -> bool {
        let mut changed = changed;
        let mut led = false;
        let key = (self.state_stamp(), self.gossip.seen_digest());
        let (min_members, per_role) = (
            self.settings.min_nr_of_members,
            &self.settings.min_nr_of_members_per_role,
        );
        if self.leader_idle != Some(key) {
            match self.gossip.leader_actions(self.me, min_members, per_role) {
                Some(exited) => {
                    changed = true;
                    led = true;
                    // A removed member hears it from the leader: nobody gossips to it any more.
                    let me = self.me;
                    for id in exited.into_iter().filter(|id| *id != me) {
                        let gossip = ClusterMessage::Gossip(self.state_to_send());
                        out.send_cluster(id, gossip);
                    }
                }
                None => self.leader_idle = Some(key),
            }
        }
        if changed {
            self.observe_for_downing(now);
        }
        if self.downer.deadline().is_some_and(|at| at <= now)
            && self
                .downer
                .doubt_matters(self.me, &self.gossip, &self.doubted(now))
        {
            // Looked at again soon, not a heartbeat later: a check in step with the heartbeat
            // rounds falls just before their answers arrive, so one late answer per round
            // held the decision back round after round, past the unstable bound, and the whole
            // majority downed itself (coordinator-crash seed 7003827: one crashed member, a
            // long latency tail).
            self.downer
                .postpone(now + self.settings.heartbeat_interval / DOUBT_CHECKS_PER_HEARTBEAT);
        }
        let down = self.downer.decide(now, self.me, &self.gossip);
        changed |= self.mark_down(now, down, rng, out);
        if let Some(call) = self.downer.poll_lease_call(now, self.me) {
            out.lease(call);
        }
        if let Some(notice) = (self.downer).poll_cover_notice(now, self.me, &self.gossip) {
            for id in notice.to {
                let cover = notice.cover;
                out.send_cluster(id, ClusterMessage::DowningLeaseHeld { cover });
            }
        }
        if !changed {
            return led;
        }
        self.dirty = true;
        match self.status() {
            None if self.gossip.is_removed(self.me) && self.leaving => self.phase = Phase::Removed,
            None if self.gossip.is_removed(self.me) => {
                crate::probe::hit(
                    "membership: removed without leaving, a member knows it was downed",
                );
                self.phase = Phase::Downed;
            }
            Some(MemberStatus::Down) => self.phase = Phase::Downed,
            Some(MemberStatus::Leaving) => self.leaving = true,
            Some(MemberStatus::Exiting) if self.exit_deadline.is_none() => {
                self.leaving = true;
                self.exit_deadline = Some(now + self.settings.gossip_interval * EXIT_ROUNDS);
            }
            _ => {}
        }
        led
    }

    /// The lease store answered the downing lease's `call`: the side downs the others or
    /// itself (see `Downer::handle_lease_answer`).
    pub(crate) fn handle_lease_answered(
        &mut self,
        now: Instant,
        call: &LeaseCall,
        answer: &LeaseAnswer,
        rng: &mut Rng,
        out: &mut Effects,
    ) {
        let down = (self.downer).handle_lease_answer(now, self.me, &self.gossip, call, answer);
        let changed = self.mark_down(now, down, rng, out);
        self.act(now, changed, rng, out);
    }

    /// Marks `down` Down, a downing decision: whether anything changed.
    fn mark_down(
        &mut self,
        now: Instant,
        down: BTreeSet<MemberId>,
        rng: &mut Rng,
        out: &mut Effects,
    ) -> bool {
        if down.is_empty() {
            return false;
        }
        for id in down {
            self.gossip.set_status(self.me, id, MemberStatus::Down);
        }
        self.observe_for_downing(now);
        crate::probe::hit("membership: a downing decision is spread at once");
        // A decision is spread at once, not at the next gossip round: members of this side
        // waiting for it would otherwise give up as unstable, and a member that downed
        // itself stops answering (Akka gossips to a few members before a downed member
        // shuts down). Unknown Down members look like unreachable live ones.
        self.gossip_to(DECISION_FANOUT, rng, out);
        true
    }

    /// Whether a monitored member that is not observed unreachable has gone quiet (an answer
    /// missed, or its suspicion level past a tenth of the threshold): downing waits
    /// until it answers or is declared unreachable. Exiting and Down members do not count:
    /// they go quiet because they stop, not because a partition is being detected (swarm seed
    /// 9000090: a member exiting after a graceful leave went quiet while a decision about a
    /// partitioned one was due; held back until the exited one was unreachable, which
    /// restarted the clock, the decision came after the unstable bound and the majority downed
    /// itself).
    /// Tells the downer the gossip changed, with when this member's detectors last heard
    /// each member (a confirmation's clock runs from then).
    fn observe_for_downing(&mut self, now: Instant) {
        let detectors = &self.detectors;
        let last_heard = |id: MemberId| detectors.get(&id).and_then(|(d, _)| d.last_heard());
        (self.downer).observe(now, self.me, &self.gossip, &last_heard);
    }

    /// The monitored members that went quiet without being declared unreachable yet: what
    /// this member believes about its own side may be stale for them.
    fn doubted(&self, now: Instant) -> BTreeSet<MemberId> {
        let settings = &self.settings.failure_detector;
        // A heartbeat answer missed: the acceptable pause keeps phi low for seconds, long
        // enough for a decision to count a member cut off since, on our side (flapping-links
        // seed 1092827: 2 and then 4 s of silence, phi still under a tenth of the threshold).
        let missed = self.settings.heartbeat_interval * 3 / 2;
        let stopping = |member: &MemberId| {
            self.gossip
                .member(*member)
                .is_some_and(|m| matches!(m.status, MemberStatus::Exiting | MemberStatus::Down))
        };
        self.detectors
            .iter()
            .filter(|(member, (detector, _))| {
                detector.is_monitoring()
                    && !self.gossip.observes_unreachable(self.me, **member)
                    && !stopping(member)
                    && (detector.phi(now, settings) > settings.threshold / 10.0
                        || detector.silence(now).is_some_and(|s| s > missed))
            })
            .map(|(member, _)| *member)
            .collect()
    }
}

/// Whoever runs at `node`: for `InitJoin`, before the seed's incarnation is known.
fn anyone_at(node: NodeId) -> MemberId {
    MemberId {
        node,
        incarnation: Incarnation(0),
    }
}

#[cfg(test)]
mod tests;
