//! The `Node`: one per cluster member. It composes, per entity type, a region and (while this
//! member is the oldest Up member with the type's role) a coordinator; routes inputs to them;
//! delivers messages between roles on this node in FIFO order; and owns the effect queue.

mod app;
mod backpressure;
mod cluster;
mod commands;
mod dispatch;
mod link_seq;
mod member_events;
mod peers;
mod queries;
mod readiness;
mod table;

pub use readiness::{Readiness, TypeReadiness};
mod type_table;
mod views;

use std::collections::{BTreeMap, BTreeSet};

use self::peers::Peers;
use self::type_table::TypeTable;
use crate::config::{Config, EntityTypeConfig};
use crate::coordinator::Coordinator;
use crate::effect::{Effect, Effects};
use crate::error::ConfigError;
use crate::explain::Decision;
use crate::hash::shard_of;
use crate::id::{EntityId, EntityType, MemberId, NodeId, ShardId};
use crate::input::Input;
use crate::members::{GossipMember, MembershipView};
use crate::membership::Membership;
use crate::message::ClusterMessage;
use crate::message::Letter;
use crate::message::{Envelope, Lane, Message, Payload};
use crate::node::link_seq::Acceptance;
use crate::reason::DeadLetterReason;
use crate::region::Region;
use crate::remember::{StoreCompletion, StoreRequest};
use crate::rng::Rng;
use crate::time::{Instant, earliest};

/// Counters of peer input that was dropped. Bad input never panics a node; it is counted here.
#[derive(Clone, Debug, Default, Eq, PartialEq)]
#[non_exhaustive]
pub struct Metrics {
    /// Envelopes addressed to another incarnation of this node.
    pub misaddressed: u64,
    /// Envelopes the transport delivered twice (or out of order), by their link sequence number.
    pub duplicates: u64,
    /// Envelopes from an incarnation of a peer older than one already heard from at its
    /// address: the old process is gone (see the link sequence numbers).
    pub from_older_incarnation: u64,
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
    types: TypeTable<TypeRoles>,
    /// The earliest deadline of the types' regions and coordinators, kept: worked out again
    /// after a call that lent any of them out to change (`TypeTable::take_touched`), not on
    /// every `poll_timeout` (asked after every input, most of which are membership traffic
    /// that reaches no type).
    types_deadline: Option<Instant>,
    effects: Effects,
    rng: Rng,
    /// When members left the view; coordinators starting soon after wait out the margin.
    removals: BTreeMap<MemberId, Instant>,
    /// Removed members this node knows of (seen leaving the view, or as tombstones).
    known_removed: BTreeSet<MemberId>,
    /// Where members can be reached (every envelope leaves with its receiver's address), and
    /// the numbers of the envelopes on each link, so that copies from the transport are
    /// dropped.
    peers: Peers,
    /// Membership, when this node manages it (`Config::membership`); otherwise the host
    /// supplies views.
    membership: Option<Membership>,
    /// Whether this member is leaving gracefully (its regions hand off, then it exits).
    leaving: bool,
    /// Whether [`Event::LeftCluster`](crate::Event::LeftCluster) was emitted.
    left: bool,
    /// Readiness as last reported (see `readiness`).
    ready: bool,
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
        let peers = Peers::new(&config);
        let mut node = Self {
            me,
            rng: Rng::new(config.seed),
            config,
            view: MembershipView::default(),
            types,
            types_deadline: None,
            effects: Effects::new(me),
            removals: BTreeMap::new(),
            known_removed: BTreeSet::new(),
            peers,
            membership,
            leaving: false,
            left: false,
            ready: false,
            metrics: Metrics::default(),
        };
        node.keep_types_deadline();
        Ok(node)
    }

    /// Starts loading this node's record of `node` (see [`crate::Driver::prefetch_peer`]).
    pub(crate) fn prefetch_peer(&self, node: NodeId) {
        self.peers.prefetch(node);
    }

    /// Feeds one input. Drain [`Node::poll_effect`] afterwards.
    pub fn handle_input(&mut self, now: Instant, input: Input) {
        // Letters never change readiness: it is not looked at for them.
        let letter = match &input {
            Input::Tell { .. } | Input::Accessed { .. } | Input::LinkConsumed { .. } => true,
            Input::Receive(envelope) => envelope.is_user_traffic(),
            _ => false,
        };
        match input {
            Input::Receive(envelope) => {
                if envelope.to != self.me && !is_init_join_for(&envelope, self.me) {
                    self.metrics.misaddressed += 1;
                    tracing::debug!(to = %envelope.to, me = %self.me, "envelope for another incarnation");
                } else {
                    match self
                        .peers
                        .accept(envelope.from, envelope.lane(), envelope.seq)
                    {
                        Acceptance::New => {
                            // Only the message moves out of the box (an envelope is 128 bytes).
                            let Envelope { from, message, .. } = *envelope;
                            self.dispatch(now, from, message);
                        }
                        Acceptance::Duplicate => {
                            self.metrics.duplicates += 1;
                            tracing::debug!(from = %envelope.from, seq = envelope.seq, "duplicate envelope");
                        }
                        Acceptance::FromOlderIncarnation => {
                            crate::probe::hit(
                                "node: what an incarnation replaced at its address sent is dropped",
                            );
                            self.metrics.from_older_incarnation += 1;
                            tracing::debug!(from = %envelope.from, "envelope from an incarnation replaced at its address");
                        }
                    }
                }
            }
            Input::MembershipChanged(view) if self.membership.is_none() => {
                self.handle_membership(now, view);
            }
            Input::ContactsDiscovered(contacts) => {
                if let Some(m) = &mut self.membership {
                    m.handle_contacts(now, &contacts, &mut self.rng, &mut self.effects);
                }
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
            Input::Accessed {
                entity_type,
                entities,
            } => {
                if let Some(t) = self.types.get_mut(&entity_type) {
                    t.region.handle_accessed(now, &entities, &mut self.effects);
                }
            }
            Input::LinkConsumed { from, seq } => {
                // Whatever it says, the number is passed: a copy of it is now a duplicate.
                let _ = self.peers.accept(from, Lane::Data, seq);
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
            Input::OutboundQueueFull { envelope } => self.handle_outbound_queue_full(*envelope),
            Input::MailboxFull {
                entity_type,
                entity,
                payload,
            } => self.handle_mailbox_full(entity_type, entity, payload),
            Input::StoreCompleted {
                request,
                completion,
            } => self.handle_store_completed(now, request, completion),
            Input::LeaseAnswered { call, answer } => self.handle_lease_answered(now, call, answer),
            Input::WriteFenced {
                entity_type,
                entity,
                epoch,
                current,
            } => {
                if let Some(t) = self.types.get_mut(&entity_type) {
                    let fence = (epoch, current);
                    t.region
                        .handle_write_fenced(now, entity, fence, &mut self.effects);
                }
            }
        }
        self.deliver_local(now);
        self.sync_membership(now);
        self.keep_types_deadline();
        self.log_dead_letters(now);
        if !letter {
            self.note_readiness();
        }
    }

    /// Runs every timer that is due at `now`. Idempotent; may be called early or spuriously.
    pub fn handle_timeout(&mut self, now: Instant) {
        // The types' roles only when one of their deadlines is due: most wakeups are
        // membership's (heartbeat and gossip rounds). A role acts on its own deadlines and its
        // inputs; one that waited for some other timer of the node to act was late (requests
        // a registration could answer waited so, until this ran them only when due).
        if self.types_deadline.is_some_and(|at| at <= now) {
            for t in self.types.values_mut() {
                t.region
                    .handle_timeout(now, &mut self.rng, &mut self.effects);
                if let Some(c) = &mut t.coordinator {
                    c.handle_timeout(now, &self.view, &mut self.effects);
                }
            }
        }
        let margin = self.config.settings.down_removal_margin;
        self.removals.retain(|_, at| now < *at + margin);
        if let Some(m) = &mut self.membership {
            m.handle_timeout(now, &mut self.rng, &mut self.effects);
        }
        self.deliver_local(now);
        self.sync_membership(now);
        self.keep_types_deadline();
        self.log_dead_letters(now);
        self.note_readiness();
    }

    /// Notes the letters dead-lettered by the last call in their type's region's decisions.
    fn log_dead_letters(&mut self, now: Instant) {
        for (entity_type, entity, reason) in self.effects.take_dead_lettered() {
            if let Some(t) = self.types.get_mut(&entity_type) {
                let shard = shard_of(&entity, t.config.number_of_shards);
                let decision = Decision::DeadLettered {
                    entity,
                    shard,
                    reason,
                };
                t.region.decisions.record(now, decision);
            }
        }
    }

    /// The next effect, in FIFO order across roles. Call after every `handle_*` until `None`.
    pub fn poll_effect(&mut self) -> Option<Effect> {
        let mut effect = self.effects.pop()?;
        self.stamp(&mut effect);
        Some(effect)
    }

    /// Hands every queued effect to `each`, in order, as [`Node::poll_effect`] until `None`
    /// would (one by one: a `VecDeque` drain's bookkeeping cost more than the moves, 2 % of a
    /// 100-node simulation's instructions; and not through `poll_effect`, whose return moved
    /// each effect once more).
    pub(crate) fn drain_effects(&mut self, mut each: impl FnMut(Effect)) {
        // Every envelope leaving reads its receiver's record, at random in a large cluster's
        // tables: when a call sends several (a heartbeat round), those loads start together
        // and overlap (see [`crate::hint::prefetch`]).
        if self.effects.queued() > 1 {
            for to in self.effects.receivers() {
                self.peers.prefetch(to.node);
            }
        }
        while let Some(mut effect) = self.effects.pop() {
            self.stamp(&mut effect);
            each(effect);
        }
    }

    /// Numbers an envelope about to leave and gives it its receiver's address.
    fn stamp(&mut self, effect: &mut Effect) {
        if let Effect::Send(transmit) = effect {
            self.peers.stamp(transmit);
        }
    }

    /// When [`Node::handle_timeout`] should next be called, if ever. Read after draining effects.
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Asked after every input: the common case (no removal waiting, one type, no
        // coordinator here) costs a few comparisons.
        let mut next = self.membership.as_ref().and_then(Membership::poll_timeout);
        if !self.removals.is_empty() {
            let margin = self.config.settings.down_removal_margin;
            next = earliest(next, self.removals.values().map(|at| *at + margin).min());
        }
        debug_assert_eq!(
            self.types_deadline,
            self.types_timeout(),
            "the kept deadline of the types' roles is current"
        );
        earliest(next, self.types_deadline)
    }

    /// Works the types' deadline out again if any type's roles were lent out to change.
    fn keep_types_deadline(&mut self) {
        if self.types.take_touched() {
            self.types_deadline = self.types_timeout();
        }
    }

    /// The earliest deadline of the types' regions and coordinators.
    fn types_timeout(&self) -> Option<Instant> {
        let mut next = None;
        for t in self.types.values() {
            next = earliest(next, t.region.poll_timeout());
            if let Some(c) = &t.coordinator {
                next = earliest(next, c.poll_timeout());
            }
        }
        next
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
}

/// Whether this node hosts `t` (runs a hosting region, not a proxy): it carries the type's
/// role and does not serve the type as a proxy only.
fn hosts_type(config: &Config, t: &EntityTypeConfig) -> bool {
    !t.proxy_only && t.role.as_ref().is_none_or(|r| config.roles.contains(r))
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
