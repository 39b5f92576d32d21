//! The coordinator: one per entity type, on the oldest Up member with the type's role.
//!
//! It keeps no store (the README's protocol decision 1). A new coordinator starts empty and rebuilds its
//! table from registrations: every `Register` lists the shards the region hosts and those it is
//! still stopping. Shards it learns this way are answered at once; an *unknown* shard is
//! allocated only once the gate opens: every member that may host shards has registered (or was
//! removed longer than `down-removal-margin` ago) and `min-nr-of-members` regions registered.
//!
//! ```text
//!  GetShardHome ─▶ handoff in progress? ─yes─▶ defer until it ends
//!                     │no
//!                     ├─ acknowledged ────────▶ ShardHome (unless its region is being removed)
//!                     ├─ allocated, unacked ──▶ wait for its ShardStarted
//!                     ├─ gate closed ─────────▶ wait for the gate
//!                     └─ strategy.allocate ───▶ HostShard to the home; the asker waits for
//!                                               its ShardStarted, then gets ShardHome
//! ```

mod gate;
mod handoff;
mod invariants;
mod lease;
mod placement;
mod query;
mod rebalance;
mod registration;
mod remembered;
mod timers;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::allocation::{AllocationStrategy, strategy_for};
use crate::config::{EntityTypeConfig, ShardingSettings};
use crate::effect::Effects;
use crate::explain::DecisionLog;
use crate::id::{EntityType, MemberId, NodeId, ShardId, StatsQueryId};
use crate::members::MembershipView;
use crate::message::{Body, Handled};
use crate::time::Deadlines;
use crate::time::Instant;

use handoff::Handoff;
use query::StatsQuery;
use remembered::RememberedShards;

/// Most shards per `ShardHomes` message, so no frame grows without bound.
const SHARD_HOMES_BATCH: usize = 500;

/// The coordinator state machine.
#[derive(Debug)]
pub(crate) struct Coordinator {
    entity_type: EntityType,
    me: MemberId,
    role: Option<String>,
    settings: ShardingSettings,
    strategy: Box<dyn AllocationStrategy>,
    /// Registered hosting regions with their shards in allocation order.
    regions: BTreeMap<MemberId, Arc<Vec<ShardId>>>,
    proxies: BTreeSet<MemberId>,
    shards: BTreeMap<ShardId, MemberId>,
    /// Shards whose `HostShard` is not acknowledged yet, with the next resend time.
    unacked: Deadlines<ShardId>,
    handoffs: BTreeMap<ShardId, Handoff>,
    /// Rebalance rounds whose handoffs have not all ended, oldest first.
    rounds: Vec<rebalance::RoundInFlight>,
    shutting_down: BTreeSet<MemberId>,
    /// Removed regions whose shards move once `removal_margin` has passed.
    terminating: BTreeMap<MemberId, Instant>,
    /// How long a removed region may still run shards: `down-removal-margin`, or nothing for
    /// a type with shard leases (an instance there stops its entities once its lease runs out
    /// on its own clock, and the new home starts them only once granted the lease).
    removal_margin: std::time::Duration,
    /// Requests for shards that cannot be answered yet (gate closed, no region, home removed,
    /// home not acknowledged yet).
    waiting: BTreeMap<ShardId, BTreeSet<MemberId>>,
    /// Shards the store fenced while allocation could not go on (the coordinator's lease
    /// lost), with the region whose fenced instance holds their letters: hosted there again
    /// once it can.
    fenced_regions: BTreeMap<ShardId, MemberId>,
    gate_open: bool,
    /// What the last `Event::AllocationWaiting` said the gate waits for.
    reported_gate: Option<crate::message::AllocationGate>,
    /// Recently removed members; the gate waits out their margin (they may have hosted shards).
    recent_removals: BTreeMap<MemberId, Instant>,
    next_rebalance: Instant,
    next_register_request: Option<Instant>,
    stats: BTreeMap<StatsQueryId, StatsQuery>,
    next_query: u64,
    /// The next handoff round (see `Body::BeginHandOff`).
    next_round: u64,
    /// Regions that exited, with the owners that relayed it (`Body::RegionExited`): nothing
    /// they forwarded to those owners is still on its way. Kept while they are members.
    exits: BTreeMap<MemberId, BTreeSet<MemberId>>,
    /// The type's shard count (shards the store lists beyond it are ignored).
    number_of_shards: u32,
    /// Regions of the type that must register before anything is allocated.
    min_registered_regions: usize,
    /// The store's shards and epochs, when the type remembers entities or persists state.
    remember: Option<RememberedShards>,
    /// The type's lease, when it has `coordinator_lease`: the gate opens only while it holds
    /// it (see `lease`).
    lease: Option<crate::lease::LeaseHolder>,
    /// Its allocations, rebalance moves and gate waits (`Command::Explain`).
    decisions: DecisionLog,
    /// The strategy and its settings, as decisions name it.
    strategy_name: String,
}

impl Coordinator {
    /// Whether the allocation gate is open: shards are being allocated.
    pub(crate) fn is_allocating(&self) -> bool {
        self.gate_open
    }

    /// Starts a coordinator; it asks every member that may host the type to register.
    pub(crate) fn new(
        me: MemberId,
        config: &EntityTypeConfig,
        settings: &ShardingSettings,
        desired: &BTreeMap<ShardId, NodeId>,
        recent_removals: BTreeMap<MemberId, Instant>,
        now: Instant,
    ) -> Self {
        let mut strategy = strategy_for(&config.allocation);
        for (&shard, &node) in desired {
            strategy.set_desired_location(shard, node);
        }
        let mut coordinator = Self {
            entity_type: config.name.clone(),
            me,
            role: config.role.clone(),
            settings: settings.clone(),
            strategy,
            regions: BTreeMap::new(),
            proxies: BTreeSet::new(),
            shards: BTreeMap::new(),
            unacked: Deadlines::default(),
            handoffs: BTreeMap::new(),
            rounds: Vec::new(),
            shutting_down: BTreeSet::new(),
            terminating: BTreeMap::new(),
            removal_margin: if config.shard_lease.is_some() {
                std::time::Duration::ZERO
            } else {
                settings.down_removal_margin
            },
            waiting: BTreeMap::new(),
            fenced_regions: BTreeMap::new(),
            gate_open: false,
            reported_gate: None,
            recent_removals,
            next_rebalance: now + settings.rebalance_interval,
            // Regions register by themselves when their view names this member; the request is
            // for those whose view did not change (this member restarted its coordinator).
            next_register_request: Some(now + settings.retry_interval),
            stats: BTreeMap::new(),
            next_query: 0,
            next_round: now.as_nanos(),
            exits: BTreeMap::new(),
            number_of_shards: config.number_of_shards,
            min_registered_regions: config.min_registered_regions,
            remember: (config.remember.is_some() || config.persistent).then(|| {
                let settings = config.remember.unwrap_or_default();
                RememberedShards::new(me, settings, config.remember.is_some(), now)
            }),
            lease: None,
            decisions: DecisionLog::default(),
            strategy_name: format!("{:?}", config.allocation),
        };
        if let Some(terms) = &config.coordinator_lease {
            coordinator.lease = Some(coordinator.new_lease(terms.clone(), now));
        }
        coordinator
    }

    /// A message for the coordinator. Members absent from `view` are ignored, but for the
    /// last words of a region that left (see [`Coordinator::handle_last_words`]).
    pub(crate) fn handle_message(
        &mut self,
        now: Instant,
        view: &MembershipView,
        from: MemberId,
        body: Body,
        out: &mut Effects,
    ) -> Handled {
        self.handle_lease_timeout(now, view, out);
        let Some(status) = view.status(from) else {
            return self.handle_last_words(now, view, from, body, out);
        };
        match body {
            Body::Register {
                shards,
                handing_off,
            } => {
                if !status.may_host_shards() || !self.has_role(view, from) {
                    tracing::debug!(%from, ?status, "registration refused");
                    return Handled::Rejected;
                }
                let reported: Vec<ShardId> = shards.iter().chain(&handing_off).copied().collect();
                self.handle_register(now, from, shards, handing_off, out);
                self.try_open_gate(now, view, out);
                // The registration may have acknowledged shards that requesters wait for. Their
                // homes are answered before the gate opens too: left waiting, they were
                // answered only when some timer of this node ran next.
                if self.gate_open {
                    self.serve_waiting(now, view, out);
                } else {
                    self.serve_waiting_for(now, view, reported, out);
                }
            }
            Body::RegisterProxy => {
                self.proxies.insert(from);
                self.send_homes(from, out);
                out.send(from, &self.entity_type, Body::RegisterAck);
                self.try_open_gate(now, view, out);
            }
            Body::GetShardHome { shard } => {
                if !self.is_registered(from) {
                    out.send(from, &self.entity_type, Body::RegisterRequest);
                    return Handled::Rejected;
                }
                self.answer_or_defer(now, view, shard, [from].into(), out);
            }
            Body::ShardStarted { shard } => self.handle_shard_started(now, view, from, shard, out),
            Body::BeginHandOffAck {
                shard,
                region,
                round,
            } => self.handle_handoff_ack(shard, region, round, out),
            Body::ShardStopped { shard } => self.handle_shard_stopped(now, view, from, shard, out),
            Body::ShardFenced { shard, current } => {
                self.handle_shard_fenced(now, view, from, (shard, current), out)
            }
            Body::RegionExited { region } => self.handle_region_exited(view, region, from, out),
            Body::GracefulShutdownReq => self.handle_graceful_shutdown(now, from, out),
            Body::RegionStopped => self.remove_region(now, view, from, out),
            Body::GetCurrentRegions { request } => {
                let regions = self.regions.keys().copied().collect();
                out.send(
                    from,
                    &self.entity_type,
                    Body::CurrentRegions { request, regions },
                );
            }
            Body::GetClusterShardingStats { request } => {
                self.start_stats_query(now, from, request, out)
            }
            Body::RegionStatsReply { query, shards } => {
                self.handle_stats_reply(query, from, shards, out)
            }
            Body::Explain {
                request,
                entity,
                shard,
            } => {
                let (records, forgotten_before) =
                    self.decisions.about(now, self.me, shard, &entity);
                let answer = Body::Explanation {
                    request,
                    records,
                    forgotten_before,
                };
                out.send(from, &self.entity_type, answer);
            }
            Body::GetCoordinatorState { request } => {
                let state = self.state(view);
                let answer = Body::CoordinatorState {
                    request,
                    state: Box::new(state),
                };
                out.send(from, &self.entity_type, answer);
            }
            other => {
                tracing::debug!(%from, ?other, "not a coordinator message");
                return Handled::Rejected;
            }
        }
        Handled::Accepted
    }

    /// Membership changed: regions of removed members are terminated (after the margin, unless
    /// they were removed after `exited`: Exiting, their regions had stopped), proxies of
    /// removed members forgotten, and the gate re-evaluated.
    pub(crate) fn handle_membership(
        &mut self,
        now: Instant,
        view: &MembershipView,
        exited: &BTreeSet<MemberId>,
        out: &mut Effects,
    ) {
        self.handle_lease_timeout(now, view, out);
        let gone: Vec<MemberId> = self
            .regions
            .keys()
            .chain(&self.proxies)
            .filter(|r| view.member(**r).is_none() && !self.terminating.contains_key(r))
            .copied()
            .collect();
        for region in gone {
            self.proxies.remove(&region);
            // A crashed or downed region counts as having acknowledged every handoff (the README's
            // protocol decision 5). One that exited gracefully does not: its process lives on for a
            // while and what it forwarded last, and its acknowledgement behind it, may still
            // be on their way to the owner (mass-shutdown seed 100869: counting it let the
            // owner stop the shard before those forwards arrived, and they were lost).
            if exited.contains(&region) {
                crate::probe::hit("coordinator: an exited region's acknowledgement is awaited");
            } else {
                self.count_as_acked(now, region, out);
            }
            if exited.contains(&region) {
                // Nothing runs there any more: what it hosted moves at once.
                crate::probe::hit("coordinator: an exited region's shards move at once");
                self.remove_region(now, view, region, out);
            } else if self.regions.contains_key(&region) {
                self.terminating.insert(region, now + self.removal_margin);
            }
        }
        self.exits
            .retain(|region, _| view.member(*region).is_some());
        for removed in view_removals(&self.recent_removals, view) {
            self.recent_removals.remove(&removed);
        }
        self.handle_timeout(now, view, out);
    }

    /// What a region that is no longer a member still tells us: that a shard stopped, or that
    /// it stopped altogether. Both are facts about its last life (nothing runs there after
    /// them), and both may arrive after its removal: a leaving member is removed as soon as
    /// its regions have stopped, and the removal can overtake them on another path.
    /// Ignoring them left the region's shards homeless for the removal margin, as if it had
    /// crashed (akka GracefulShutdownSpec: a shutdown never waits for member removal).
    fn handle_last_words(
        &mut self,
        now: Instant,
        view: &MembershipView,
        from: MemberId,
        body: Body,
        out: &mut Effects,
    ) -> Handled {
        if !self.regions.contains_key(&from) {
            tracing::debug!(%from, "coordinator ignores a non-member");
            return Handled::Rejected;
        }
        crate::probe::hit("coordinator: the last words of a region that left are heard");
        match body {
            Body::ShardStopped { shard } => self.handle_shard_stopped(now, view, from, shard, out),
            Body::ShardFenced { shard, current } => {
                self.handle_shard_fenced(now, view, from, (shard, current), out)
            }
            Body::RegionStopped => self.remove_region(now, view, from, out),
            other => {
                tracing::debug!(%from, ?other, "coordinator ignores a region that left");
                return Handled::Rejected;
            }
        }
        Handled::Accepted
    }

    /// Records a removal observed by the node (used by the gate).
    pub(crate) fn note_removal(&mut self, member: MemberId, at: Instant) {
        self.recent_removals.insert(member, at);
        self.removal_noted();
    }

    /// A desired location for the external strategy.
    pub(crate) fn set_desired_location(&mut self, shard: ShardId, node: NodeId) {
        self.strategy.set_desired_location(shard, node);
    }

    /// The allocation table: shard → region. Used by checkers and tests.
    pub(crate) fn allocations(&self) -> &BTreeMap<ShardId, MemberId> {
        &self.shards
    }
}

/// Removals that are members again (a removal record is only about absent members).
fn view_removals(removals: &BTreeMap<MemberId, Instant>, view: &MembershipView) -> Vec<MemberId> {
    removals
        .keys()
        .filter(|m| view.member(**m).is_some())
        .copied()
        .collect()
}

#[cfg(test)]
mod tests;
