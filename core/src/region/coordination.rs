//! How a region handles protocol messages: from its coordinator (fenced by the membership view)
//! and from other regions.

use crate::effect::{Effects, Event};
use crate::id::{Epoch, MemberId, ShardId};
use crate::message::{Body, Handled, RegionShards, Route};
use crate::reason::DeadLetterReason;
use crate::region::lifecycle::initial_backoff;
use crate::region::shard::Shard;
use crate::region::{Lifecycle, Region};
use crate::time::Instant;

impl Region {
    /// A protocol message addressed to this region.
    pub(crate) fn handle_message(
        &mut self,
        now: Instant,
        from: MemberId,
        body: Body,
        out: &mut Effects,
    ) -> Handled {
        if body.route() == Route::RegionFromCoordinator
            && Some(from) != self.registration.coordinator
        {
            tracing::debug!(%from, ?body, "ignoring a coordinator that the view does not name");
            return Handled::Fenced;
        }
        let body = match body.into_letter() {
            Ok((shard, (entity, letter))) => {
                if self.lifecycle == Lifecycle::Terminated {
                    let reason = DeadLetterReason::RegionStopped;
                    out.dead_letter(&self.entity_type, (entity, letter), reason);
                    return Handled::Rejected;
                }
                self.route(now, shard, entity, letter, out);
                return Handled::Accepted;
            }
            Err(body) => body,
        };
        if self.lifecycle == Lifecycle::Terminated {
            return Handled::Rejected;
        }
        match body.route() {
            Route::RegionFromCoordinator => self.handle_from_coordinator(now, from, body, out),
            Route::Region => self.handle_from_peer(now, from, body, out),
            Route::Coordinator | Route::Node => {
                tracing::debug!(%from, ?body, "not a region message");
                Handled::Rejected
            }
        }
    }

    /// A message from the coordinator the view names.
    fn handle_from_coordinator(
        &mut self,
        now: Instant,
        from: MemberId,
        body: Body,
        out: &mut Effects,
    ) -> Handled {
        match body {
            Body::RegisterAck => self.handle_register_ack(now, from, out),
            Body::RegisterRequest => {
                self.registration.registered = false;
                // Retried like any registration, in case this Register is lost.
                self.registration.backoff = initial_backoff(self.settings.retry_interval);
                self.registration.next_attempt = Some(now + self.registration.backoff);
                let body = self.register_body();
                out.send(from, &self.entity_type, body);
            }
            Body::ShardHome { shard, region } => {
                self.registration.home_rounds = 0;
                return self.apply_home(now, shard, region, true, out);
            }
            Body::ShardHomes { homes } => {
                self.registration.home_rounds = 0;
                for RegionShards { region, shards } in homes {
                    for shard in shards {
                        self.apply_home(now, shard, region, false, out);
                    }
                }
            }
            Body::HostShard { shard, epoch } => {
                return self.handle_host_shard(now, shard, epoch, out);
            }
            Body::BeginHandOff {
                shard,
                owner,
                round,
            } => {
                self.homes.remove(&shard);
                if owner == self.me {
                    let ack = Body::BeginHandOffAck {
                        shard,
                        region: self.me,
                        round,
                    };
                    out.send(from, &self.entity_type, ack);
                } else {
                    let relay = Body::RelayHandOffAck {
                        shard,
                        coordinator: from,
                        round,
                    };
                    out.send(owner, &self.entity_type, relay);
                }
            }
            Body::HandOff { shard } => self.handle_handoff(now, from, shard, out),
            Body::GetRegionStats { query } => {
                let shards = self
                    .shards
                    .iter()
                    .map(|(&id, s)| (id, count(s.entity_count())))
                    .collect();
                out.send(
                    from,
                    &self.entity_type,
                    Body::RegionStatsReply { query, shards },
                );
            }
            other => {
                tracing::debug!(%from, ?other, "not a coordinator's message");
                return Handled::Rejected;
            }
        }
        Handled::Accepted
    }

    fn handle_register_ack(&mut self, now: Instant, coordinator: MemberId, out: &mut Effects) {
        if self.registration.registered {
            return;
        }
        self.registration.registered = true;
        self.registration.next_attempt = None;
        self.registration.attempts = 0;
        out.event(Event::RegionRegistered {
            entity_type: self.entity_type.clone(),
            coordinator,
        });
        // Letters a fenced instance left wait here for the coordinator to host their shard
        // here again; a new one (the fencing's coordinator failed over) hears of the fencing
        // now, before it answers where the shard lives. The registration claimed the shard, so
        // no other region got it meanwhile (rolling-restart seed 5449 with the oracle: the new
        // coordinator placed it elsewhere, and the letters were dropped as `FencedShardMoved`).
        for (shard, current) in self.fenced_waiting() {
            crate::probe::hit("region: a new coordinator hears of a fenced shard's letters");
            out.send(
                coordinator,
                &self.entity_type,
                Body::ShardFenced { shard, current },
            );
        }
        for shard in self.buffers.shards() {
            if self.should_ask_home(shard) {
                self.ask_home(now, shard, out);
            }
        }
        if self.lifecycle == Lifecycle::ShuttingDown {
            out.send(coordinator, &self.entity_type, Body::GracefulShutdownReq);
        }
    }

    /// The coordinator says `shard` lives at `region`.
    fn apply_home(
        &mut self,
        now: Instant,
        shard: ShardId,
        region: MemberId,
        answer: bool,
        out: &mut Effects,
    ) -> Handled {
        if region == self.me {
            self.home_answered(now, shard, region, out);
            // Told it lives here, but it does not: say so, so that a coordinator that lost our
            // `ShardStopped` deallocates it (it ignores this while `HostShard` is unacknowledged,
            // i.e. possibly still in flight). A hosted shard has nothing to flush: the region
            // buffers nothing for it but while it hands off (see `check_invariants`).
            if answer && !self.shards.contains_key(&shard) && self.buffers.contains(shard) {
                crate::probe::hit("region: told a shard lives here that does not, it says so");
                out.send(
                    self.registration.coordinator.unwrap_or(region),
                    &self.entity_type,
                    Body::ShardStopped { shard },
                );
            }
            return Handled::Accepted;
        }
        if self.view.member(region).is_none() {
            // A home on a member this region's view does not (or no longer) hold, e.g. a
            // crashed incarnation the coordinator has not noticed yet: forwarding there would
            // lose messages. Keep them buffered; the retry tick asks again.
            tracing::debug!(%shard, %region, "home on a member outside the view");
            crate::probe::hit("region: a home on a member outside the view is ignored");
            return Handled::Rejected;
        }
        if self.shards.contains_key(&shard) {
            tracing::warn!(%shard, %region, "coordinator names another home for a shard hosted here");
            return Handled::Rejected;
        }
        if self.fenced_here.remove(&shard).is_some() && self.buffers.contains(shard) {
            // Only after a coordinator failover between our `ShardFenced` and the re-hosting
            // here it leads to. The letters the fenced instance left (and those forwarded here
            // since) came from other regions too, which now send to the new home directly:
            // relayed, they would arrive after those senders' newer letters (swarm seed
            // 602228, order). Dropped instead, reported (at most once).
            crate::probe::hit("region: letters a fenced instance left are dropped, not relayed");
            let reason = DeadLetterReason::FencedShardMoved;
            for delivery in self.buffers.take(shard, &mut self.budget) {
                out.dead_letter(&self.entity_type, delivery, reason);
            }
        }
        self.home_answered(now, shard, region, out);
        self.homes.insert(shard, region);
        self.flush(now, shard, out);
        Handled::Accepted
    }

    fn handle_host_shard(
        &mut self,
        now: Instant,
        shard: ShardId,
        epoch: Epoch,
        out: &mut Effects,
    ) -> Handled {
        if self.proxy {
            tracing::warn!(%shard, "a proxy region was asked to host a shard");
            return Handled::Rejected;
        }
        // A shard hosted already is acknowledged again (the first `ShardStarted` may have been
        // lost), even while shutting down: the coordinator then hands it off.
        let hosted = self.shards.get(&shard).map(Shard::is_handing_off);
        if hosted == Some(false) {
            crate::probe::hit("region: a repeated HostShard is acknowledged again");
            self.send_to_coordinator(Body::ShardStarted { shard }, out);
            return Handled::Accepted;
        }
        if let Some(&current) = self.fenced_here.get(&shard).filter(|c| epoch < **c) {
            // A store already refused this shard here at a newer epoch than this allocation's:
            // an instance would be refused again, and its letters asked about again, at every
            // resend of a `HostShard` whose acknowledgement is slow (mass-shutdown seed
            // 7001586). The coordinator hears of the fence again and allocates above it.
            crate::probe::hit("region: a HostShard below a fence it knows is answered with it");
            self.send_to_coordinator(Body::ShardFenced { shard, current }, out);
            return Handled::Accepted;
        }
        if self.lifecycle == Lifecycle::ShuttingDown && self.fenced_here.contains_key(&shard) {
            // The coordinator hosts a fenced shard on its region again: letters its fenced
            // instance left go first, then it is handed off (refused, it would stay unhosted:
            // this region's shutdown is under way, so a refusal moves nothing).
            crate::probe::hit("region: a fenced shard is hosted again while shutting down");
        } else if self.lifecycle == Lifecycle::ShuttingDown {
            crate::probe::hit("region: HostShard is refused while shutting down");
            self.send_to_coordinator(Body::GracefulShutdownReq, out);
            return Handled::Rejected;
        }
        self.home_answered(now, shard, self.me, out);
        if hosted.is_some() {
            // The old instance is still stopping: start the new one once it has (akka#32976).
            crate::probe::hit("region: HostShard while the old instance stops waits for the stop");
            self.start_after_stop.insert(shard, epoch);
        } else {
            self.start_shard(now, shard, epoch, out);
        }
        Handled::Accepted
    }

    fn handle_handoff(
        &mut self,
        now: Instant,
        coordinator: MemberId,
        shard: ShardId,
        out: &mut Effects,
    ) {
        self.homes.remove(&shard);
        self.start_after_stop.remove(&shard);
        if !self.shards.contains_key(&shard) {
            out.send(coordinator, &self.entity_type, Body::ShardStopped { shard });
            return;
        }
        self.stop_shard(now, shard, out);
    }

    /// Stops a hosted shard's entities for a handoff; the stop finishes once they have.
    pub(super) fn stop_shard(&mut self, now: Instant, shard: ShardId, out: &mut Effects) {
        let Some(hosted) = self.shards.get_mut(&shard) else {
            return;
        };
        let stopped = hosted.handle_handoff(now, out);
        self.touch(shard);
        if stopped {
            self.finish_shard_stop(now, shard, out);
        }
    }
}

fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}
