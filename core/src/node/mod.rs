//! The `Node`: one per cluster member. It composes, per entity type, a region and (while this
//! member is the oldest Up member with the type's role) a coordinator; routes inputs to them;
//! delivers messages between roles on this node in FIFO order; and owns the effect queue.

mod addresses;
mod app;
mod backpressure;
mod cluster;
mod commands;

use std::collections::{BTreeMap, BTreeSet};

use self::addresses::AddressBook;
use crate::config::{Config, EntityTypeConfig};
use crate::coordinator::Coordinator;
use crate::effect::{DeadLetterReason, Effect, Effects, Event};
use crate::error::ConfigError;
use crate::id::{EntityId, EntityType, MemberId, NodeId, ShardId};
use crate::input::Input;
use crate::letter::Letter;
use crate::link_seq::LinkSequences;
use crate::membership::{ClusterMessage, GossipMember, MemberStatus, Membership, MembershipView};
use crate::message::{Body, Envelope, Message, Payload};
use crate::region::{Handled, Region};
use crate::remember::{StoreCompletion, StoreRequest};
use crate::rng::Rng;
use crate::time::{Instant, earliest};

/// How the regions of a node routed messages, counted since it started. A buffered message
/// is counted again when it is later delivered or forwarded.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
#[non_exhaustive]
pub struct RouteCounts {
    /// Handed to a shard hosted on this node.
    pub delivered: u64,
    /// Forwarded to the member hosting the shard.
    pub forwarded: u64,
    /// Held while the shard's home was unknown or the shard was being handed off.
    pub buffered: u64,
}

/// Counters of peer input that was dropped. Bad input never panics a node; it is counted here.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
#[non_exhaustive]
pub struct Metrics {
    /// Envelopes addressed to another incarnation of this node.
    pub misaddressed: u64,
    /// Envelopes the transport delivered twice (or out of order), by their link sequence number.
    pub duplicates: u64,
    /// Messages for an entity type this node does not serve.
    pub unknown_entity_type: u64,
    /// Coordinator messages from a coordinator the membership view does not name.
    pub fenced: u64,
    /// Messages ignored because they did not fit the receiver's state or role.
    pub rejected: u64,
}

/// The roles serving one entity type on this node.
#[derive(Debug)]
struct TypeRoles {
    config: EntityTypeConfig,
    region: Region,
    coordinator: Option<Coordinator>,
    /// Desired shard locations for the external strategy, kept on every node so that any
    /// node can take over as coordinator.
    desired: BTreeMap<ShardId, NodeId>,
}

/// One cluster member's sharding state machines. See the crate docs for the drive contract.
#[derive(Debug)]
pub struct Node {
    me: MemberId,
    config: Config,
    view: MembershipView,
    types: BTreeMap<EntityType, TypeRoles>,
    effects: Effects,
    rng: Rng,
    /// When members left the view; coordinators starting soon after wait out the margin.
    removals: BTreeMap<MemberId, Instant>,
    /// Removed members this node knows of (seen leaving the view, or as tombstones).
    known_removed: BTreeSet<MemberId>,
    /// Numbers envelopes per link so that copies from the transport are dropped.
    links: LinkSequences,
    /// Where members can be reached; every envelope leaves with its receiver's address.
    addresses: AddressBook,
    /// Membership, when this node manages it (`Config::membership`); otherwise the host
    /// supplies views.
    membership: Option<Membership>,
    /// Whether this member is leaving gracefully (its regions hand off, then it exits).
    leaving: bool,
    /// Whether [`Event::LeftCluster`] was emitted.
    left: bool,
    metrics: Metrics,
}

impl Node {
    /// Creates a node.
    ///
    /// # Errors
    /// The config is invalid; see [`ConfigError`].
    pub fn new(config: Config, now: Instant) -> Result<Self, ConfigError> {
        config.validate()?;
        let me = config.member_id();
        let types = config
            .entity_types
            .iter()
            .map(|t| {
                let proxy = !hosts_type(&config, t);
                let region = Region::new(me, t, &config.settings, proxy, now);
                let roles = TypeRoles {
                    config: t.clone(),
                    region,
                    coordinator: None,
                    desired: BTreeMap::new(),
                };
                (t.name.clone(), roles)
            })
            .collect();
        let hosts: BTreeSet<EntityType> = config
            .entity_types
            .iter()
            .filter(|t| hosts_type(&config, t))
            .map(|t| t.name.clone())
            .collect();
        let membership = config.membership.clone().map(|settings| {
            let roles = config.roles.clone();
            let joiner = GossipMember::joining(me, roles, settings.app_version, hosts)
                .at(config.address.clone());
            Membership::new(me, joiner, settings, now)
        });
        let addresses = AddressBook::new(&config);
        Ok(Self {
            me,
            rng: Rng::new(config.seed),
            config,
            view: MembershipView::default(),
            types,
            effects: Effects::new(me),
            removals: BTreeMap::new(),
            known_removed: BTreeSet::new(),
            links: LinkSequences::default(),
            addresses,
            membership,
            leaving: false,
            left: false,
            metrics: Metrics::default(),
        })
    }

    /// Feeds one input. Drain [`Node::poll_effect`] afterwards.
    pub fn handle_input(&mut self, now: Instant, input: Input) {
        match input {
            Input::Receive(envelope) => {
                if envelope.to != self.me && !is_init_join_for(&envelope, self.me) {
                    self.metrics.misaddressed += 1;
                    tracing::debug!(to = %envelope.to, me = %self.me, "envelope for another incarnation");
                } else if !self
                    .links
                    .accept(envelope.from, envelope.lane(), envelope.seq)
                {
                    self.metrics.duplicates += 1;
                    tracing::debug!(from = %envelope.from, seq = envelope.seq, "duplicate envelope");
                } else {
                    self.dispatch(now, envelope);
                }
            }
            Input::MembershipChanged(view) if self.membership.is_none() => {
                self.handle_membership(now, view);
            }
            Input::MembershipChanged(_) => {
                // This node manages membership itself; a host's view would contradict it.
                self.metrics.rejected += 1;
                tracing::warn!("membership view from the host ignored: membership is managed");
            }
            Input::Tell {
                entity_type,
                entity,
                payload,
            } => {
                self.handle_tell(now, entity_type, entity, payload);
            }
            Input::Command { request, command } => self.handle_command(now, request, command),
            Input::EntityStopped {
                entity_type,
                entity,
            } => {
                if let Some(t) = self.types.get_mut(&entity_type) {
                    t.region
                        .handle_entity_stopped(now, &entity, &mut self.effects);
                }
            }
            Input::Passivate {
                entity_type,
                entity,
            } => {
                if let Some(t) = self.types.get_mut(&entity_type) {
                    t.region.handle_passivate(now, &entity, &mut self.effects);
                }
            }
            Input::SendApp { to, payload } => self.handle_send_app(to, payload),
            Input::OutboundQueueFull { envelope } => self.handle_outbound_queue_full(envelope),
            Input::MailboxFull {
                entity_type,
                entity,
                payload,
            } => self.handle_mailbox_full(entity_type, entity, payload),
            Input::StoreCompleted {
                request,
                completion,
            } => self.handle_store_completed(now, request, completion),
        }
        self.deliver_local(now);
        self.sync_membership(now);
    }

    /// Runs every timer that is due at `now`. Idempotent; may be called early or spuriously.
    pub fn handle_timeout(&mut self, now: Instant) {
        for t in self.types.values_mut() {
            t.region
                .handle_timeout(now, &mut self.rng, &mut self.effects);
            if let Some(c) = &mut t.coordinator {
                c.handle_timeout(now, &self.view, &mut self.effects);
            }
        }
        let margin = self.config.settings.down_removal_margin;
        self.removals.retain(|_, at| now < *at + margin);
        if let Some(m) = &mut self.membership {
            m.handle_timeout(now, &mut self.rng, &mut self.effects);
        }
        self.deliver_local(now);
        self.sync_membership(now);
    }

    /// The next effect, in FIFO order across roles. Call after every `handle_*` until `None`.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        let mut effect = self.effects.pop()?;
        stamp(&mut self.links, &self.addresses, &mut effect);
        Some(effect)
    }

    /// Hands every queued effect to `each`, in order, as [`Node::poll_effect`] until `None`
    /// would: the driver's drain. Effects are large (an envelope inline), and moving each one
    /// out through an `Option` copied it several times per message.
    pub(crate) fn drain_effects(&mut self, each: impl FnMut(Effect)) {
        for effect in self.effects.queued_mut() {
            stamp(&mut self.links, &self.addresses, effect);
        }
        self.effects.drain_queued().for_each(each);
    }

    /// When [`Node::handle_timeout`] should next be called, if ever. Read after draining effects.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let margin = self.config.settings.down_removal_margin;
        let mut next = self.removals.values().map(|at| *at + margin).min();
        for t in self.types.values() {
            next = earliest(next, t.region.poll_timeout());
            next = earliest(
                next,
                t.coordinator.as_ref().and_then(Coordinator::poll_timeout),
            );
        }
        earliest(
            next,
            self.membership.as_ref().and_then(Membership::poll_timeout),
        )
    }

    /// This member's id.
    pub fn member_id(&self) -> MemberId {
        self.me
    }

    /// Checks the node's internal invariants, which hold after every drain whatever the
    /// inputs were: each coordinator's allocation table against its per-region shard lists
    /// (no shard in two lists, none allocated but unlisted, acknowledgements and handoffs only
    /// for allocated shards), and each region's buffer budget and shard timers against what it
    /// buffers and hosts. The simulator checks them after every driver call; debug builds
    /// after every drain.
    ///
    /// # Errors
    /// The first invariant found broken, described.
    pub fn check_invariants(&self) -> Result<(), String> {
        for roles in self.types.values() {
            roles.region.check_invariants()?;
            if let Some(coordinator) = &roles.coordinator {
                coordinator.check_invariants()?;
            }
        }
        Ok(())
    }

    /// Counters of dropped peer input.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// How this node's regions routed messages, summed over entity types.
    pub fn route_counts(&self) -> RouteCounts {
        let mut sum = RouteCounts::default();
        for roles in self.types.values() {
            let routes = &roles.region.routes;
            sum.delivered += routes.delivered;
            sum.forwarded += routes.forwarded;
            sum.buffered += routes.buffered;
        }
        sum
    }

    /// The current membership view.
    pub fn view(&self) -> &MembershipView {
        &self.view
    }

    /// The shard locations the application asked for (`Command::SetShardLocation`), as this
    /// node heard of them; `None` for a type it does not run.
    pub fn desired_shard_locations(
        &self,
        entity_type: &EntityType,
    ) -> Option<&BTreeMap<ShardId, NodeId>> {
        self.types.get(entity_type).map(|t| &t.desired)
    }

    /// The coordinator's allocation table for a type, if this node runs its coordinator.
    pub fn coordinator_allocations(
        &self,
        entity_type: &EntityType,
    ) -> Option<&BTreeMap<ShardId, MemberId>> {
        self.types
            .get(entity_type)?
            .coordinator
            .as_ref()
            .map(Coordinator::allocations)
    }

    /// Shards of a type hosted on this node (running or stopping), in order.
    pub fn hosted_shards(&self, entity_type: &EntityType) -> Vec<ShardId> {
        self.types
            .get(entity_type)
            .map(|t| t.region.hosted_shards().collect())
            .unwrap_or_default()
    }

    /// Messages of a type buffered on this node (never more than `buffer_size`).
    pub fn buffered(&self, entity_type: &EntityType) -> usize {
        self.types
            .get(entity_type)
            .map_or(0, |t| t.region.buffered())
    }

    /// Whether the type's region has stopped (graceful shutdown done, or member downed).
    pub fn is_region_stopped(&self, entity_type: &EntityType) -> bool {
        self.types
            .get(entity_type)
            .is_some_and(|t| t.region.is_stopped())
    }

    fn handle_tell(
        &mut self,
        now: Instant,
        entity_type: EntityType,
        entity: EntityId,
        payload: Payload,
    ) {
        let reason = match self.types.get_mut(&entity_type) {
            None => DeadLetterReason::UnknownEntityType,
            Some(_) if payload.0.len() > self.config.settings.max_payload_size => {
                DeadLetterReason::PayloadTooLarge
            }
            Some(t) => {
                let letter = Letter::Message(payload);
                return t.region.handle_tell(now, entity, letter, &mut self.effects);
            }
        };
        let delivery = (entity, Letter::Message(payload));
        self.effects.dead_letter(&entity_type, delivery, reason);
    }

    /// Routes a store completion to the coordinator (the shards' read) or the region.
    fn handle_store_completed(
        &mut self,
        now: Instant,
        request: StoreRequest,
        completion: StoreCompletion,
    ) {
        let Some(t) = self.types.get_mut(request.entity_type()) else {
            tracing::warn!(
                ?request,
                "store completion for an entity type this node does not serve"
            );
            return;
        };
        match request.shard() {
            None => match &mut t.coordinator {
                Some(c) => c.handle_store_completed(now, &self.view, completion, &mut self.effects),
                None => tracing::debug!("shards' read completed after the coordinator stopped"),
            },
            Some(instance) => {
                t.region
                    .handle_store_completed(now, instance, completion, &mut self.effects)
            }
        }
    }

    fn handle_membership(&mut self, now: Instant, view: MembershipView) {
        // A member removed after Exiting had stopped all its regions (it could not exit
        // before): nothing of it can still run, so its removal needs no margin. Others may
        // have hosted shards a new coordinator has not heard of.
        let mut exited = BTreeSet::new();
        let mut removed = Vec::new();
        // Both views are sorted by id: one walk finds the members gone.
        let mut current = view.members().iter().map(|m| m.id).peekable();
        for old in self.view.members() {
            while current.next_if(|id| *id < old.id).is_some() {}
            if current.peek() == Some(&old.id) {
                continue;
            }
            self.known_removed.insert(old.id);
            if old.status == MemberStatus::Exiting {
                exited.insert(old.id);
            } else {
                removed.push(old.id);
            }
        }
        // A removal this node never saw happen (it joined afterwards) may be as recent as now:
        // a coordinator it comes to run must wait the margin out for it too (flapping-links
        // seed 21747: the oldest member ran no entity type, so a member that had joined after
        // another's removal ran the coordinator and allocated that member's shards while it,
        // cut off and not yet aware it was downed, still ran them).
        for &id in view.removed() {
            if self.known_removed.insert(id) {
                crate::probe::hit("node: a removal this node never saw is waited out");
                removed.push(id);
            }
        }
        for id in removed {
            self.removals.insert(id, now);
            for t in self.types.values_mut() {
                if let Some(c) = &mut t.coordinator {
                    c.note_removal(id, now);
                }
            }
        }
        self.addresses.learn(&self.view, &view);
        self.view = view;
        for t in self.types.values_mut() {
            let role = t.config.role.as_deref();
            let should_run = self.view.coordinator_of(&t.config.name, role) == Some(self.me);
            match (&mut t.coordinator, should_run) {
                (None, true) => {
                    let recent = self.removals.clone();
                    let settings = &self.config.settings;
                    t.coordinator = Some(Coordinator::new(
                        self.me, &t.config, settings, &t.desired, recent, now,
                    ));
                    self.effects.event(Event::CoordinatorStarted {
                        entity_type: t.config.name.clone(),
                    });
                }
                (Some(_), false) => {
                    t.coordinator = None;
                    self.effects.event(Event::CoordinatorStopped {
                        entity_type: t.config.name.clone(),
                    });
                }
                _ => {}
            }
            if let Some(c) = &mut t.coordinator {
                c.handle_membership(now, &self.view, &exited, &mut self.effects);
            }
            t.region
                .handle_membership(now, &self.view, &mut self.rng, &mut self.effects);
        }
    }

    fn dispatch(&mut self, now: Instant, envelope: Envelope) {
        let Envelope { from, message, .. } = envelope;
        let (entity_type, body) = match message {
            Message::Sharding { entity_type, body } => (entity_type, body),
            Message::Cluster(message) => return self.handle_cluster(now, from, message),
            Message::App { payload } => {
                return self.effects.event(Event::AppMessage { from, payload });
            }
        };
        let Some(t) = self.types.get_mut(&entity_type) else {
            self.metrics.unknown_entity_type += 1;
            tracing::debug!(%entity_type, %from, "message for an unknown entity type");
            if let Ok((_, delivery)) = body.into_letter() {
                let reason = DeadLetterReason::UnknownEntityType;
                self.effects.dead_letter(&entity_type, delivery, reason);
            }
            return;
        };
        if !body.fits(t.config.number_of_shards) {
            self.metrics.rejected += 1;
            tracing::warn!(%entity_type, %from, ?body, "shards that do not fit this type's number_of_shards");
            if let Ok((_, delivery)) = body.into_letter() {
                let reason = DeadLetterReason::ShardMismatch;
                self.effects.dead_letter(&entity_type, delivery, reason);
            }
            return;
        }
        let out = &mut self.effects;
        match body {
            Body::SetShardLocations { locations } => {
                for (shard, node) in locations {
                    t.desired.insert(shard, node);
                    if let Some(c) = &mut t.coordinator {
                        c.set_desired_location(shard, node);
                    }
                }
            }
            body if is_for_coordinator(&body) => {
                let accepted = match &mut t.coordinator {
                    Some(c) => c.handle_message(now, &self.view, from, body, out),
                    None => false,
                };
                if !accepted {
                    self.metrics.rejected += 1;
                }
            }
            body => match t.region.handle_message(now, from, body, out) {
                Handled::Accepted => {}
                Handled::Fenced => self.metrics.fenced += 1,
                Handled::Rejected => self.metrics.rejected += 1,
            },
        }
    }

    /// Delivers messages between roles on this node until none is left.
    fn deliver_local(&mut self, now: Instant) {
        while let Some(envelope) = self.effects.pop_local() {
            self.dispatch(now, envelope);
        }
    }
}

/// Numbers an envelope leaving this node on its link and gives it its receiver's address.
/// Envelopes to "whoever runs at an address" (a join's first contact) go unnumbered: numbering
/// restarts once the receiver's incarnation is known.
fn stamp(links: &mut LinkSequences, addresses: &AddressBook, effect: &mut Effect) {
    if let Effect::Send(transmit) = effect {
        let to = transmit.envelope.to;
        if to.incarnation.0 != 0 {
            transmit.envelope.seq = links.next_to(to, transmit.envelope.lane());
        }
        if transmit.address.is_none() {
            transmit.address = addresses.address_of(to.node).cloned();
        }
    }
}

/// Whether this node hosts `t` (runs a hosting region, not a proxy): it carries the type's
/// role and does not serve the type as a proxy only.
fn hosts_type(config: &Config, t: &EntityTypeConfig) -> bool {
    !t.proxy_only && t.role.as_ref().is_none_or(|r| config.roles.contains(r))
}

/// Messages addressed to a coordinator rather than a region.
fn is_for_coordinator(body: &Body) -> bool {
    matches!(
        body,
        Body::Register { .. }
            | Body::RegisterProxy
            | Body::GetShardHome { .. }
            | Body::ShardStarted { .. }
            | Body::BeginHandOffAck { .. }
            | Body::ShardStopped { .. }
            | Body::ShardFenced { .. }
            | Body::GracefulShutdownReq
            | Body::RegionStopped
            | Body::GetCurrentRegions { .. }
            | Body::GetClusterShardingStats { .. }
            | Body::RegionStatsReply { .. }
            | Body::GetCoordinatorState { .. }
            | Body::RegionExited { .. }
    )
}

/// Whether `envelope` is a join's first contact addressed to whoever runs at this address.
fn is_init_join_for(envelope: &Envelope, me: MemberId) -> bool {
    envelope.to.node == me.node
        && envelope.to.incarnation.0 == 0
        && matches!(
            envelope.message,
            Message::Cluster(ClusterMessage::InitJoin { .. })
        )
}
