//! A region's life and its timers: following the coordinator the membership view names
//! (registration with backoff), graceful shutdown (after which it routes as a proxy), and
//! termination when its member is downed or removed.

use std::time::Duration;

use crate::effect::{Effects, Event};
use crate::id::{Epoch, MemberId, ShardId};
use crate::members::{MemberStatus, MembershipView};
use crate::message::Body;
use crate::reason::DeadLetterReason;
use crate::region::{Lifecycle, Region};
use crate::rng::Rng;
use crate::time::{Instant, NamedDeadline, soonest};

impl Region {
    /// When the region's next timer is due.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        soonest(&self.deadlines())
    }

    /// Each of the region's timers with its name (for [`Region::poll_timeout`] and for
    /// naming the timer of a busy loop).
    pub(crate) fn deadlines(&self) -> [NamedDeadline; 5] {
        let queries = ("query deadline", self.queries.next_deadline());
        let releases = ("lease release", self.releases.next_due());
        if self.lifecycle == Lifecycle::Terminated {
            return [
                ("tick", None),
                ("registration", None),
                ("shard timer", None),
                queries,
                releases,
            ];
        }
        [
            ("tick", Some(self.next_tick)),
            ("registration", self.registration.next_attempt),
            ("shard timer", self.timers.next()),
            queries,
            releases,
        ]
    }

    /// Membership changed: follow the coordinator the view names (`coordinator`, which the
    /// node works out once for both its roles), forgetting the homes the old one gave; forget
    /// homes on removed members, and stop everything if this member was downed or removed.
    pub(crate) fn handle_membership(
        &mut self,
        now: Instant,
        view: &MembershipView,
        coordinator: Option<MemberId>,
        rng: &mut Rng,
        out: &mut Effects,
    ) {
        if self.lifecycle == Lifecycle::Terminated {
            return;
        }
        match view.status(self.me) {
            Some(MemberStatus::Down) => return self.terminate(now, view, out),
            Some(_) => self.seen_self = true,
            None if self.seen_self => return self.terminate(now, view, out),
            None => {}
        }
        // The view itself (shared), not a set built from it for every change.
        self.view = view.clone();
        self.homes.retain(|home| view.member(*home).is_some());
        // Where the type's coordinator runs in `view` (the node works it out for both roles).
        let expected = coordinator;
        debug_assert_eq!(
            expected,
            view.coordinator_of(&self.entity_type, self.role.as_deref())
        );
        if expected != self.registration.coordinator {
            // Homes elsewhere are the old coordinator's word. The new one hands shards off
            // with acknowledgements from the regions registered with it; a region still
            // routing on an old home it never told about would reach the old owner after it
            // stopped the shard, and its messages would come round behind newer ones
            // (rolling-restart seed 799887892: a member registered with the leaving
            // coordinator while Joining, and the next coordinator moved a shard before it
            // registered there).
            if self.homes.values().any(|home| *home != self.me) {
                crate::probe::hit("region: a new coordinator's homes replace the old one's");
            }
            self.homes.retain(|home| *home == self.me);
            self.registration.coordinator = expected;
            self.registration.registered = false;
            self.registration.attempts = 0;
            self.registration.home_rounds = 0;
            self.registration.backoff = initial_backoff(self.settings.retry_interval);
            self.registration.next_attempt = expected.map(|_| now);
            self.handle_timeout(now, rng, out);
        }
        self.stop_if_nobody_takes_over(now, out);
    }

    /// Shutting down with nobody left to take its shards over (no other member that is, or
    /// may become, Up runs the type: the last members of the cluster are leaving), there is
    /// no coordinator to hand them off: the region stops them itself, and what waits for a
    /// home comes out as dead letters. Akka's shutdown goes on after its phase timeout.
    pub(super) fn stop_if_nobody_takes_over(&mut self, now: Instant, out: &mut Effects) {
        if self.lifecycle != Lifecycle::ShuttingDown || self.anyone_may_take_over() {
            return;
        }
        if self.view.members().is_empty() {
            // No view yet (a member told to leave right after it started): it knows nobody,
            // which is not knowing that nobody is left. Its letters waited for a home, and
            // came out as dead letters before the first view named the members taking over
            // (oracle rolling-restart seed 6410002381).
            crate::probe::hit("region: a shutdown before the first view waits for it");
            return;
        }
        let running: Vec<ShardId> = (self.shards.iter())
            .filter(|(_, shard)| !shard.is_handing_off())
            .map(|(id, _)| *id)
            .collect();
        if !running.is_empty() || !self.buffers.is_empty() {
            crate::probe::hit("region: nobody is left to take its shards, they stop here");
        }
        for shard in running {
            self.stop_shard(now, shard, out);
        }
        for delivery in self.buffers.drain_all(&mut self.budget) {
            out.dead_letter(&self.entity_type, delivery, DeadLetterReason::RegionStopped);
        }
        self.try_complete_shutdown(out);
    }

    /// Whether another member of the view runs the type and is, or may become, Up.
    fn anyone_may_take_over(&self) -> bool {
        let (ty, role) = (&self.entity_type, self.role.as_deref());
        self.view.members().iter().any(|m| {
            m.id != self.me
                && matches!(m.status, MemberStatus::Joining | MemberStatus::Up)
                && m.hosts_type(ty, role)
        })
    }

    /// Begins a graceful shutdown: every shard is handed off, then the region stops.
    pub(crate) fn handle_graceful_shutdown(&mut self, out: &mut Effects) {
        if self.lifecycle != Lifecycle::Running {
            return;
        }
        self.lifecycle = Lifecycle::ShuttingDown;
        self.send_to_coordinator(Body::GracefulShutdownReq, out);
        self.try_complete_shutdown(out);
    }

    pub(super) fn retry_registration(&mut self, now: Instant, rng: &mut Rng, out: &mut Effects) {
        let reg = &mut self.registration;
        let Some(at) = reg.next_attempt else { return };
        let Some(coordinator) = reg.coordinator else {
            // Nobody to register with: the next membership change that names a coordinator
            // re-arms the attempt. Leaving it armed would keep a past deadline due forever.
            reg.next_attempt = None;
            return;
        };
        if reg.registered {
            reg.next_attempt = None;
            return;
        }
        if at > now {
            return;
        }
        // Akka's backoff: start at max(100 ms, retry/8), double up to retry-interval; ±10 %
        // jitter so that regions restarted together do not register in lockstep.
        let jitter = reg.backoff / 5;
        let jitter = Duration::from_nanos(rng.below(jitter.as_nanos().max(1) as u64));
        reg.next_attempt = Some(now + (reg.backoff - reg.backoff / 10 + jitter));
        reg.backoff = (reg.backoff * 2).min(self.settings.retry_interval);
        reg.attempts = reg.attempts.saturating_add(1);
        let body = self.register_body();
        out.send(coordinator, &self.entity_type, body);
    }

    pub(super) fn register_body(&self) -> Body {
        if self.proxy {
            return Body::RegisterProxy;
        }
        let (handing_off, mut shards): (Vec<ShardId>, Vec<ShardId>) = self
            .shards
            .keys()
            .partition(|id| self.shards[*id].is_handing_off());
        // A fenced shard whose letters wait here is claimed too: the coordinator is to host
        // it here again (see `handle_register_ack`).
        shards.extend(self.fenced_waiting().map(|(shard, _)| shard));
        shards.sort_unstable();
        Body::Register {
            shards,
            handing_off,
        }
    }

    /// Fenced shards not hosted here now whose letters wait here, with the epoch that fenced
    /// them.
    pub(super) fn fenced_waiting(&self) -> impl Iterator<Item = (ShardId, Epoch)> + '_ {
        self.fenced_here
            .iter()
            .filter(|(shard, _)| !self.shards.contains_key(shard) && self.buffers.contains(**shard))
            .map(|(&shard, &current)| (shard, current))
    }

    pub(super) fn try_complete_shutdown(&mut self, out: &mut Effects) {
        if self.lifecycle == Lifecycle::ShuttingDown
            && self.shards.is_empty()
            && self.buffers.is_empty()
        {
            self.lifecycle = Lifecycle::Stopped;
            self.send_to_coordinator(Body::RegionStopped, out);
            out.event(Event::RegionStopped {
                entity_type: self.entity_type.clone(),
            });
            // From now on a proxy: register as one so the coordinator still answers us.
            self.proxy = true;
            self.registration.registered = false;
            self.registration.backoff = initial_backoff(self.settings.retry_interval);
            self.registration.next_attempt = Some(Instant::ZERO);
        }
    }

    /// This member was downed or removed: stop every entity now and drop what is buffered,
    /// reporting each message as a dead letter.
    pub(super) fn terminate(&mut self, now: Instant, view: &MembershipView, out: &mut Effects) {
        let mut dropped = self.buffers.drain_all(&mut self.budget);
        let mut releases = Vec::new();
        for shard in self.shards.values_mut() {
            let running = shard.entity_ids();
            dropped.extend(shard.handle_terminate(&mut self.budget, out));
            releases.push(((*shard.id_ref(), shard.take_lease_release()), running));
        }
        for (release, running) in releases {
            self.release_shard_lease(now, release, running, out);
        }
        self.shards.clear();
        self.start_after_stop.clear();
        self.timers.clear();
        self.homes.clear();
        self.fenced_here.clear();
        let already_stopped = self.lifecycle == Lifecycle::Stopped;
        self.lifecycle = Lifecycle::Terminated;
        for delivery in dropped {
            out.dead_letter(&self.entity_type, delivery, DeadLetterReason::RegionStopped);
        }
        if already_stopped {
            self.announce_exit(view, out);
        } else {
            out.event(Event::RegionStopped {
                entity_type: self.entity_type.clone(),
            });
        }
    }

    /// A region that stopped gracefully went on routing as a proxy; what it forwarded last
    /// may still be on its way when its member is removed. Every member that may own a shard
    /// hears that it forwards nothing more, and relays that to the coordinator behind those
    /// forwards: handoffs then need not wait for this region's acknowledgement (mass-shutdown
    /// seeds 100869 and 100089).
    fn announce_exit(&self, view: &MembershipView, out: &mut Effects) {
        let Some(coordinator) = self.registration.coordinator else {
            return;
        };
        let role = self.role.as_deref();
        for member in view.members() {
            if member.id != self.me && member.hosts_type(&self.entity_type, role) {
                out.send(
                    member.id,
                    &self.entity_type,
                    Body::RelayExit { coordinator },
                );
            }
        }
    }
}

pub(super) fn initial_backoff(retry_interval: Duration) -> Duration {
    (retry_interval / 8)
        .max(Duration::from_millis(100))
        .min(retry_interval)
}
