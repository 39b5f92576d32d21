//! How the simulator drives a node process: inputs (deferred while it is paused), wakeups for its
//! timers, and what becomes of its effects: messages through the codec into the network, entity
//! effects to the simulated host, dead letters to the checker; then buffer caps and busy loops
//! are checked and the next wakeup armed.

use std::collections::VecDeque;
use std::time::Duration;

use shoal_core::{
    ClusterMessage, Driver, Envelope, Input, Instant, MemberId, Message, NodeId, Transmit, codec,
};

use crate::check::Property;
use crate::events::Ev;
use crate::net::{Flight, Link};
use crate::trace::TraceEvent;

use super::Simulator;
use super::io::{DeferIo, Deferred};

/// How often, at most, release builds check a node's internal invariants.
const INVARIANT_CHECK_EVERY: Duration = Duration::from_millis(100);

impl Simulator {
    /// Feeds `input` to node `n` (if it runs) and handles its effects; a paused node gets it
    /// when it resumes.
    pub(crate) fn input(&mut self, n: NodeId, input: Input) {
        let Some(node) = self.nodes.get_mut(&n) else {
            return;
        };
        if let Some(deferred) = &mut node.paused {
            deferred.push(input);
            return;
        }
        let mut owed = None;
        if let Input::Receive(envelope) = &input {
            self.note_coordinator_answer(n, envelope);
            self.connections.heard(envelope.to, envelope.from);
            if envelope.message.body() == Some(&shoal_core::Body::GracefulShutdownReq) {
                self.shutdowns.heard(envelope.to, envelope.from);
            }
            owed = self.answer_owed(n, envelope);
        }
        self.call_driver(n, |driver, local, io| driver.handle_input(local, input, io));
        if let Some(owed) = owed {
            self.check_answered(n, owed);
        }
    }

    /// Pauses node `n`'s process; whether it was running and not already paused.
    pub(crate) fn pause(&mut self, n: NodeId) -> bool {
        match self.nodes.get_mut(&n) {
            Some(node) if node.paused.is_none() => {
                node.paused = Some(Vec::new());
                let member = node.id;
                node.unanswered.paused();
                self.requests.paused(member);
                self.log(|| TraceEvent::Paused {
                    node: n.to_string(),
                });
                true
            }
            _ => false,
        }
    }

    /// Resumes a paused node: it handles what reached it meanwhile, in order, then its timers.
    pub(crate) fn resume(&mut self, n: NodeId) -> bool {
        let Some(node) = self.nodes.get_mut(&n) else {
            return false;
        };
        let member = node.id;
        let Some(deferred) = node.paused.take() else {
            return false;
        };
        // Requests made while it was paused reach it only now.
        self.requests.paused(member);
        let waiting = deferred.len();
        self.log(|| TraceEvent::Resumed {
            node: n.to_string(),
            waiting,
        });
        if !deferred.is_empty() {
            self.mark("a paused node resumed with inputs waiting");
        }
        for input in deferred {
            match input {
                // Its reader reads only now.
                Input::Receive(envelope) => self.receive(n, envelope),
                input => self.input(n, input),
            }
        }
        self.wake(n);
        true
    }

    /// Runs node `n`'s due timers (unless it is paused: it runs them when it resumes).
    pub(crate) fn wake(&mut self, n: NodeId) {
        let Some(node) = self.nodes.get_mut(&n) else {
            return;
        };
        node.wakeup = None;
        if node.is_paused() {
            return;
        }
        self.waking = Some(n);
        self.call_driver(n, |driver, local, io| driver.handle_wakeup(local, io));
        self.waking = None;
    }

    /// Makes one driver call on node `n` (if it runs) at its local time, with its effects kept
    /// in the reused queue, then handles them.
    fn call_driver(
        &mut self,
        n: NodeId,
        call: impl FnOnce(&mut Driver, Instant, &mut DeferIo<'_>),
    ) {
        // What clients handed the node's entities directly counts before anything else.
        for accessed in self.take_accessed(n) {
            self.call_driver_now(n, |driver, local, io| {
                driver.handle_input(local, accessed, io)
            });
        }
        self.call_driver_now(n, call);
    }

    /// [`Simulator::call_driver`], without feeding the node its direct accesses first.
    fn call_driver_now(
        &mut self,
        n: NodeId,
        call: impl FnOnce(&mut Driver, Instant, &mut DeferIo<'_>),
    ) {
        let Some(node) = self.nodes.get_mut(&n) else {
            return;
        };
        let mut out = std::mem::take(&mut self.scratch);
        let local = node.clock.local(self.now);
        call(&mut node.driver, local, &mut DeferIo(&mut out));
        self.after_call(n, &mut out);
        self.give_back(out);
    }

    /// Keeps a driver call's (emptied) effect queue for the next call. The queue taken from
    /// `scratch` left an empty one there, which only a nested call (an effect that feeds a node
    /// another input) filled: one that holds no allocation is let go without calling its drop,
    /// which did nothing once per event.
    fn give_back(&mut self, out: VecDeque<Deferred>) {
        let left = std::mem::replace(&mut self.scratch, out);
        if left.capacity() == 0 {
            std::mem::forget(left);
        }
    }

    pub(crate) fn input_to(&mut self, member: MemberId, input: Input) {
        if self.nodes.get(&member.node).is_some_and(|n| n.id == member) {
            self.input(member.node, input);
        }
    }

    /// Handles a driver call's effects, checks buffer caps and busy loops, re-arms the wakeup.
    fn after_call(&mut self, n: NodeId, out: &mut VecDeque<Deferred>) {
        let Some(node) = self.nodes.get_mut(&n) else {
            return out.clear();
        };
        let member = node.id;
        // Checked after a call, before its effects, at most every 100 simulated ms per node:
        // the checks walk every shard and entity, which after every call would make the
        // simulator several times slower; debug builds check after every drain (the driver
        // panics). A break is reported once per member.
        if self.now >= node.next_invariant_check {
            node.next_invariant_check = self.now + INVARIANT_CHECK_EVERY;
            if let Err(detail) = node.driver.node().check_invariants() {
                if self.invariants_broken.insert(member) {
                    self.check
                        .fail(self.now, Property::CoreInvariant, member, detail);
                }
            }
        }
        // A rebalance round is judged on the view it was decided on: not if this same call
        // changed the node's view afterwards (its membership timers run after the coordinator's).
        // Every envelope sent reads its link's state, at random in a table of a million links
        // at 1,000 nodes: when a call sends several (a heartbeat round), those loads start
        // together and overlap (see [`shoal_core::hint::prefetch`]).
        if out.len() > 1 {
            for effect in out.iter() {
                if let Deferred::Send(Transmit { envelope, .. }) = effect {
                    self.net
                        .prefetch_link((envelope.from.node, envelope.to.node));
                }
            }
        }
        let mut decided = super::node_events::Decided::default();
        while let Some(effect) = out.pop_front() {
            match effect {
                Deferred::Send(transmit) => self.send(transmit),
                Deferred::Entity(e) => self.entity(member, e),
                Deferred::Store(request) => self.store_request(member, request),
                Deferred::Lease(call) => self.lease_call(member, call),
                Deferred::Event(event) => self.node_event(n, member, event, &mut decided),
            }
        }
        for shards in decided.rounds {
            self.check_rebalance(n, &shards);
        }
        for (shard, waiting_for) in decided.abandoned {
            self.handoff_abandoned(n, shard, &waiting_for);
        }
        self.check_entity_limit(n, member);
        let node = self.nodes.get_mut(&n).expect("node still running");
        let busy = node.driver.busy_loops();
        let next = node
            .driver
            .next_wakeup()
            .map(|local| node.clock.true_time(local).max(self.now))
            // A busy loop (reported below as a violation) must not spin the simulator at one instant.
            .map(|at| {
                if busy > 0 {
                    at.max(self.now + Duration::from_millis(100))
                } else {
                    at
                }
            });
        if let Some(at) = next {
            if node.wakeup.is_none_or(|w| at < w || w < self.now) {
                node.wakeup = Some(at);
                self.schedule(at, Ev::Wakeup(n));
            }
        }
        self.check_after_call(n, member);
    }

    fn send(&mut self, transmit: Transmit) {
        // The network routes by address, as a real one does: an envelope must leave with its
        // receiver's (which membership carried here), or answer a member that reached this
        // one (over the connection that member opened).
        let Transmit { address, envelope } = transmit;
        if matches!(
            envelope.message.body(),
            Some(shoal_core::Body::Forward { .. } | shoal_core::Body::StartEntity { .. })
        ) {
            if let Some(node) = self.nodes.get_mut(&envelope.from.node) {
                node.letters_forwarded += 1;
            }
        }
        let routed_to = match &address {
            Some(address) => self.routes.node_at(address, envelope.to.node),
            None if self.connections.has_heard(envelope.from, envelope.to) => {
                Some(envelope.to.node)
            }
            // A member the sender's view does not name (named inside a message only, say a
            // coordinator that left): a real transport has no route either. It is dropped,
            // not counted as a network loss, so the other checks judge what that costs (a
            // user message dropped so in a run without loss breaks exactly-once).
            None if !self.in_view_of(envelope.from, envelope.to) => {
                self.mark("an envelope for a member its sender cannot reach had no route");
                return;
            }
            None => None,
        };
        if routed_to != Some(envelope.to.node) {
            let detail = format!(
                "an envelope for {} left for address {address:?}: {:?}",
                envelope.to, envelope.message
            );
            let (now, from) = (self.now, envelope.from);
            self.check.fail(now, Property::HostContract, from, detail);
            return;
        }
        // Test builds (the default batch) encode and decode every message and check the round
        // trip. Release builds (sweeps, the bench) measure control messages' frames, whose size
        // grows with the cluster, so one that does not fit a frame fails the run; they skip
        // those whose frames cannot outgrow the cap: forwarded entity messages (the core refuses
        // payloads over `max_payload_size`, a quarter of it) and the fixed-size heartbeats and
        // gossip digests, which together are most of the traffic.
        self.note_coordinator_request(&envelope);
        let body = envelope.message.body();
        if body == Some(&shoal_core::Body::RegisterAck) {
            self.shutdowns.registered(envelope.from, envelope.to);
        }
        let bounded = matches!(body, Some(shoal_core::Body::Forward { .. }))
            || matches!(
                &envelope.message,
                Message::Cluster(
                    ClusterMessage::Heartbeat { .. }
                        | ClusterMessage::HeartbeatRsp { .. }
                        | ClusterMessage::GossipStatus { .. }
                )
            );
        if cfg!(debug_assertions) {
            let frame = codec::encode(&envelope).expect("core messages fit in a frame");
            let decoded = codec::decode(&frame).expect("frames decode");
            assert_eq!(decoded, *envelope, "the codec round-trips every message");
        } else if !bounded {
            // Only the size matters here: measured without writing the frame.
            codec::frame_len(&envelope).expect("core messages fit in a frame");
        }
        let link = (envelope.from.node, envelope.to.node);
        match body {
            Some(shoal_core::Body::HandOff { shard }) => {
                if self.net.partitioned() {
                    self.mark("handoff during a partition");
                }
                let stall = self.stalls.hand_off(self.now, *shard);
                self.stall(stall);
            }
            Some(shoal_core::Body::Register { handing_off, .. }) if !handing_off.is_empty() => {
                self.mark("coordinator moved while a handoff was in flight");
            }
            Some(shoal_core::Body::BeginHandOff {
                shard,
                owner,
                round,
            }) => {
                self.mark("handoff begun");
                self.log(|| TraceEvent::HandOffBegun {
                    shard: shard.to_string(),
                    owner: owner.to_string(),
                });
                let roles = (envelope.from, *owner);
                let stall = self.stalls.begin_handoff(self.now, *shard, roles, *round);
                self.stall(stall);
            }
            Some(shoal_core::Body::HostShard { shard, .. }) => {
                self.log(|| TraceEvent::ShardHosted {
                    shard: shard.to_string(),
                    region: envelope.to.to_string(),
                });
                self.stalls.hosting(self.now, *shard, envelope.to);
                self.mark_rolling_allocation(envelope.to);
                self.check_coordinator_lease(envelope.from, *shard);
            }
            Some(shoal_core::Body::StartEntityAck {
                entity,
                outcome: shoal_core::StartOutcome::Started,
                ..
            }) => self.check_started_at(envelope.from, entity),
            Some(shoal_core::Body::GetShardHome { shard }) => {
                self.check_home_asked(envelope.from, *shard);
                self.check_home_ask_rate(envelope.from, *shard);
            }
            Some(shoal_core::Body::EntityLocated { request, .. }) => {
                self.note_located(envelope.from, envelope.to, *request);
            }
            Some(shoal_core::Body::ShardStopped { shard }) => {
                self.check_writes_settled(envelope.from, *shard);
            }
            Some(shoal_core::Body::RegionStatsReply { shards, .. }) => {
                self.check_region_stats(envelope.from, shards);
            }
            _ => {}
        }
        let (from, to) = (envelope.from, envelope.to);
        match body {
            Some(shoal_core::Body::Forward {
                shard,
                entity,
                payload,
            }) if self.tracer.wants_all() => {
                self.log(|| TraceEvent::Forwarded {
                    from: from.to_string(),
                    to: to.to_string(),
                    shard: shard.to_string(),
                    entity: entity.to_string(),
                    message: crate::check::describe(payload),
                });
            }
            Some(shoal_core::Body::Forward { .. }) => {}
            Some(body) => self.log(|| TraceEvent::Sent {
                from: from.to_string(),
                to: to.to_string(),
                message: format!("{body:?}"),
            }),
            // Membership traffic (heartbeats, gossip) only in full traces.
            None if self.tracer.wants_all() => {
                let message = &envelope.message;
                self.log(|| TraceEvent::MembershipSent {
                    from: from.to_string(),
                    to: to.to_string(),
                    message: format!("{message:?}"),
                });
            }
            None => {}
        }
        let (lane, user) = (envelope.lane(), envelope.is_user_traffic());
        let slower = match body {
            Some(shoal_core::Body::RegisterAck) => {
                self.opts.network.slow_register_acks.unwrap_or_default()
            }
            _ => Duration::ZERO,
        };
        let Some([first, copy]) = self.net.send(self.now, link, (lane, user, slower)) else {
            self.mark("a full outbound queue refused a message");
            let member = envelope.from;
            let input = Box::new(Input::OutboundQueueFull { envelope });
            return self.schedule(self.now, Ev::Refused { member, input });
        };
        if let Some(flight) = copy {
            self.mark("the network duplicated a message");
            self.arrive(link, flight, envelope.clone());
        }
        if let Some(flight) = first {
            if lane == shoal_core::Lane::Control && self.net.overtakes_data(link, flight.at) {
                self.mark("a control message overtook data on its link");
            }
            self.arrive(link, flight, envelope);
        }
    }

    /// Notes a shard allocated to `region` while members run different versions, and whether
    /// it went to the newest one (allocation prefers it).
    fn mark_rolling_allocation(&mut self, region: MemberId) {
        let versions = self.app_versions();
        if versions.len() < 2 {
            return;
        }
        let version = self
            .nodes
            .get(&region.node)
            .and_then(|n| n.driver.node().view().member(region).map(|m| m.app_version));
        if version.is_some() && version == versions.last().copied() {
            self.mark("a shard allocated to the newest version during a rolling update");
        }
    }

    /// Whether `member`'s current view names `other`.
    fn in_view_of(&self, member: MemberId, other: MemberId) -> bool {
        let node = self.nodes.get(&member.node).filter(|n| n.id == member);
        node.is_some_and(|n| n.driver.node().view().member(other).is_some())
    }

    /// Schedules the arrival of `envelope` on `link`.
    fn arrive(&mut self, link: Link, flight: Flight, envelope: Box<Envelope>) {
        let ev = Ev::Deliver {
            link,
            flight,
            envelope,
        };
        self.schedule(flight.at, ev);
    }
}
