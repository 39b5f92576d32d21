//! The region: one per entity type per node. It routes messages to shards (local, forwarded, or
//! buffered while a home is unknown or moving), hosts the shards the coordinator gives it, and
//! takes part in handoffs. A proxy region routes and buffers but never hosts.
//!
//! ```text
//!  Tell ─▶ buffered for shard? ─yes─▶ append to buffer
//!            │no
//!            ├─ hosted & running ─▶ Shard::handle_delivery
//!            ├─ home is remote ───▶ Forward to home region
//!            └─ home unknown ─────▶ buffer + GetShardHome (first message only)
//! ```

mod buffers;
mod by_shard;
mod coordination;
mod explain;
mod from_peers;
mod invariants;
mod leases;
mod lifecycle;
mod limit;
mod pending_queries;
mod query;
mod remembering;
mod route_counts;
mod shard;
mod shard_table;
mod watch;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::{EntityTypeConfig, ShardingSettings};
use crate::effect::{Effects, Event};
use crate::explain::DecisionLog;
use crate::hash::shard_of;
use crate::id::{EntityId, EntityType, Epoch, MemberId, ShardId};
use crate::lease::{LeaseOwner, LeaseTerms};
use crate::members::MembershipView;
use crate::message::Body;
use crate::message::{Delivery, Letter};
use crate::reason::{DeadLetterReason, PassivationCause};
use crate::region::shard::{Shard, ShardSettings};
use crate::remember::RememberSettings;
use crate::rng::Rng;
use crate::time::Instant;

use crate::time::Deadlines;
pub(crate) use buffers::BufferBudget;
use buffers::ShardBuffers;
use by_shard::ByShard;
use lifecycle::initial_backoff;
use pending_queries::PendingQueries;
pub use route_counts::RouteCounts;
use shard_table::ShardTable;

/// Where the region is in its life.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
enum Lifecycle {
    Running,
    /// Handing off every shard before stopping.
    ShuttingDown,
    /// Graceful shutdown completed: it hosts nothing and acts as a proxy until its member leaves,
    /// so messages still forwarded to it are routed on rather than lost.
    Stopped,
    /// This member was downed or removed: every entity was stopped and nothing is routed.
    Terminated,
}

/// Registration with the coordinator the membership view names.
#[derive(Debug)]
struct Registration {
    coordinator: Option<MemberId>,
    registered: bool,
    next_attempt: Option<Instant>,
    backoff: Duration,
    /// Registrations sent to `coordinator` and not acknowledged.
    attempts: u32,
    /// Retry rounds in a row that asked `coordinator` for shard homes and heard none.
    home_rounds: u32,
}

/// The region state machine.
#[derive(Debug)]
pub(crate) struct Region {
    entity_type: EntityType,
    /// How this region's messages went (hosts export it as metrics).
    pub(crate) routes: RouteCounts,
    me: MemberId,
    role: Option<String>,
    proxy: bool,
    number_of_shards: u32,
    settings: ShardingSettings,
    shard_settings: ShardSettings,
    registration: Registration,
    next_tick: Instant,
    homes: ByShard<MemberId>,
    /// Shards whose home the coordinator was asked for and has not said yet, with when it was
    /// first asked: the wait for its answer is the coordinator round trip hosts record.
    home_asked: BTreeMap<ShardId, Instant>,
    shards: ShardTable,
    /// Each hosted shard's next deadline; kept current by [`Region::touch`].
    timers: Deadlines<ShardId>,
    /// `HostShard` arrived while the previous instance was still stopping (akka#32976), with
    /// the new allocation's epoch.
    start_after_stop: BTreeMap<ShardId, Epoch>,
    /// Remembering, when the type remembers entities.
    remember: Option<RememberSettings>,
    /// The terms of the shards' leases, when the type has them.
    shard_lease: Option<LeaseTerms>,
    /// Leases of shards stopped by force, to release once their entities have stopped.
    releases: leases::Releases,
    /// The last shard lease holder numbered here (each instance of a shard holds its lease
    /// as a holder of its own).
    lease_holders: u64,
    /// Shards stopping because the store fenced them, with the newer epoch it holds.
    fenced: BTreeMap<ShardId, Epoch>,
    /// Shards whose instance here the store fenced, with the newer epoch it holds: the
    /// coordinator hosts them here again (so that letters the instance left in front of their
    /// buffer keep their place), which this region accepts even while it shuts down.
    fenced_here: BTreeMap<ShardId, Epoch>,
    buffers: ShardBuffers,
    budget: BufferBudget,
    lifecycle: Lifecycle,
    /// Set once this member appeared in a view, so that its later absence means removal.
    seen_self: bool,
    /// The latest view: homes are only ever cached on one of its members.
    view: MembershipView,
    /// Queries asked of other members for the application, awaiting their answer.
    queries: PendingQueries,
    /// Most entities active at once here, divided among the hosted shards, when the type
    /// has an active-entity limit.
    entity_limit: Option<usize>,
    /// The letters this region dead-lettered, and why (`Command::Explain`).
    pub(crate) decisions: DecisionLog,
}

impl Region {
    pub(crate) fn new(
        me: MemberId,
        config: &EntityTypeConfig,
        settings: &ShardingSettings,
        proxy: bool,
        now: Instant,
    ) -> Self {
        Self {
            entity_type: config.name.clone(),
            routes: RouteCounts::default(),
            me,
            role: config.role.clone(),
            proxy,
            number_of_shards: config.number_of_shards,
            settings: settings.clone(),
            shard_settings: ShardSettings {
                stop_timeout: settings.passivation_stop_timeout,
                handoff_stop_timeout: settings.entity_handoff_timeout(),
                // As Akka: remembered entities are not passivated for idleness (they would be
                // forgotten); they stop only when they ask to.
                idle_after: config
                    .passivate_idle_after
                    .filter(|_| config.remember.is_none()),
                limit_policy: config.active_entity_limit.map(|limit| limit.policy),
            },
            registration: Registration {
                coordinator: None,
                registered: false,
                next_attempt: None,
                backoff: initial_backoff(settings.retry_interval),
                attempts: 0,
                home_rounds: 0,
            },
            next_tick: now + settings.retry_interval,
            homes: ByShard::default(),
            home_asked: BTreeMap::new(),
            shards: ShardTable::default(),
            timers: Deadlines::default(),
            start_after_stop: BTreeMap::new(),
            remember: config.remember,
            shard_lease: config.shard_lease.clone(),
            releases: leases::Releases::default(),
            lease_holders: 0,
            fenced: BTreeMap::new(),
            fenced_here: BTreeMap::new(),
            buffers: ShardBuffers::default(),
            budget: BufferBudget::new(settings.buffer_size),
            lifecycle: Lifecycle::Running,
            seen_self: false,
            view: MembershipView::default(),
            queries: PendingQueries::default(),
            entity_limit: config.active_entity_limit.map(|limit| limit.per_region),
            decisions: DecisionLog::default(),
        }
    }

    /// A letter from a local client.
    pub(crate) fn handle_tell(
        &mut self,
        now: Instant,
        entity: EntityId,
        letter: Letter,
        out: &mut Effects,
    ) {
        let shard = shard_of(&entity, self.number_of_shards);
        self.route(now, shard, entity, letter, out);
    }

    /// The host reports an entity terminated.
    pub(crate) fn handle_entity_stopped(
        &mut self,
        now: Instant,
        entity: &EntityId,
        out: &mut Effects,
    ) {
        let shard_id = shard_of(entity, self.number_of_shards);
        self.releases.stopped(shard_id, entity, out);
        let Some(shard) = self.shards.get_mut(&shard_id) else {
            tracing::debug!(%entity, "stop report for an entity of a shard not hosted here");
            return;
        };
        shard.handle_entity_stopped(now, entity, &mut self.budget, out);
        self.after_shard_change(now, shard_id, out);
    }

    /// An entity asks to passivate.
    pub(crate) fn handle_passivate(&mut self, now: Instant, entity: &EntityId, out: &mut Effects) {
        let shard_id = shard_of(entity, self.number_of_shards);
        match self.shards.get_mut(&shard_id) {
            Some(shard) => {
                shard.handle_passivate(now, entity, PassivationCause::Requested, out);
                self.touch(shard_id);
            }
            None => tracing::debug!(%entity, "passivate for a shard not hosted here"),
        }
    }

    /// Entities handed messages on the host's direct route count as active now.
    pub(crate) fn handle_accessed(
        &mut self,
        now: Instant,
        entities: &[EntityId],
        out: &mut Effects,
    ) {
        for entity in entities {
            let shard_id = shard_of(entity, self.number_of_shards);
            if let Some(shard) = self.shards.get_mut(&shard_id) {
                shard.handle_accessed(now, entity, out);
                self.touch(shard_id);
            }
        }
    }

    /// Fires due retries and the shards' timers.
    pub(crate) fn handle_timeout(&mut self, now: Instant, rng: &mut Rng, out: &mut Effects) {
        // Even a terminated region owes its queries an answer, and its leases a release.
        self.expire_queries(now, out);
        self.releases.handle_timeout(now, out);
        if self.lifecycle == Lifecycle::Terminated {
            return;
        }
        self.retry_registration(now, rng, out);
        if self.next_tick <= now {
            self.next_tick = now + self.settings.retry_interval;
            self.handle_retry_tick(now, out);
        }
        for id in self.timers.due(now) {
            if let Some(shard) = self.shards.get_mut(&id) {
                shard.handle_timeout(now, &mut self.budget, out);
            }
            self.after_shard_change(now, id, out);
        }
    }

    /// Whether the region stopped hosting: graceful shutdown done, or member downed.
    pub(crate) fn is_stopped(&self) -> bool {
        matches!(self.lifecycle, Lifecycle::Stopped | Lifecycle::Terminated)
    }

    /// Messages this region holds in its buffers and its shards' entity buffers.
    pub(crate) fn buffered(&self) -> usize {
        self.budget.used()
    }

    /// Shards hosted here (running or stopping).
    pub(crate) fn hosted_shards(&self) -> impl Iterator<Item = ShardId> + '_ {
        self.shards.keys().copied()
    }

    fn route(
        &mut self,
        now: Instant,
        shard: ShardId,
        entity: EntityId,
        letter: Letter,
        out: &mut Effects,
    ) {
        if self.lifecycle == Lifecycle::Terminated {
            let reason = DeadLetterReason::RegionStopped;
            return out.dead_letter(&self.entity_type, (entity, letter), reason);
        }
        if !self.buffers.contains(shard) {
            if let Some(hosted) = self.shards.get_mut(&shard) {
                if !hosted.is_handing_off() {
                    self.routes.delivered += 1;
                    hosted.handle_delivery(now, entity, letter, &mut self.budget, out);
                    // As `touch`, without looking the shard up again (this runs per message).
                    return self.timers.set(shard, hosted.poll_timeout());
                }
            } else if let Some(&home) = self.homes.get(&shard) {
                if home != self.me {
                    self.routes.forwarded += 1;
                    let body = Body::of_letter(shard, (entity, letter));
                    return out.send(home, &self.entity_type, body);
                }
            }
        }
        self.buffer(now, shard, (entity, letter), out);
    }

    fn buffer(&mut self, now: Instant, shard: ShardId, delivery: Delivery, out: &mut Effects) {
        self.routes.buffered += 1;
        match self.buffers.push(shard, delivery, &mut self.budget) {
            Err(refused) => {
                out.dead_letter(&self.entity_type, refused, DeadLetterReason::BufferFull)
            }
            Ok(true) if self.should_ask_home(shard) => self.ask_home(now, shard, out),
            Ok(_) => {}
        }
    }

    /// The coordinator this region registers with, and whether it registered: the region's
    /// part in readiness.
    pub(crate) fn registration_state(&self) -> (Option<MemberId>, bool) {
        (self.registration.coordinator, self.registration.registered)
    }

    /// Whether the coordinator must be asked where `shard` lives: not when it is hosted here or
    /// a `HostShard` for it is expected (the coordinator said it lives here).
    fn should_ask_home(&self, shard: ShardId) -> bool {
        self.registration.registered
            && !self.shards.contains_key(&shard)
            && self.homes.get(&shard) != Some(&self.me)
    }

    /// Delivers or forwards a shard's buffered messages now that its home is known.
    fn flush(&mut self, now: Instant, shard: ShardId, out: &mut Effects) {
        self.fenced_here.remove(&shard);
        for (entity, letter) in self.buffers.take(shard, &mut self.budget) {
            self.route(now, shard, entity, letter, out);
        }
    }

    fn handle_retry_tick(&mut self, now: Instant, out: &mut Effects) {
        let mut asked = 0;
        if self.registration.registered {
            for shard in self.buffers.shards() {
                if self.should_ask_home(shard) {
                    asked += 1;
                    self.ask_home(now, shard, out);
                }
            }
        }
        self.watch_coordinator(asked, out);
        if self.lifecycle == Lifecycle::ShuttingDown {
            self.send_to_coordinator(Body::GracefulShutdownReq, out);
            self.stop_if_nobody_takes_over(now, out);
            self.try_complete_shutdown(out);
        }
    }

    /// Asks the coordinator where `shard` lives, noting when it was first asked.
    fn ask_home(&mut self, now: Instant, shard: ShardId, out: &mut Effects) {
        self.home_asked.entry(shard).or_insert(now);
        self.send_to_coordinator(Body::GetShardHome { shard }, out);
    }

    /// The coordinator said where `shard` lives (`home`): if this region had asked, the wait
    /// is reported.
    fn home_answered(&mut self, now: Instant, shard: ShardId, home: MemberId, out: &mut Effects) {
        if let Some(asked) = self.home_asked.remove(&shard) {
            out.event(Event::ShardHomeAnswered {
                entity_type: self.entity_type.clone(),
                shard,
                home,
                waited: now.saturating_duration_since(asked),
            });
        }
    }

    fn send_to_coordinator(&self, body: Body, out: &mut Effects) {
        if let Some(coordinator) = self.registration.coordinator {
            out.send(coordinator, &self.entity_type, body);
        }
    }

    /// A shard finished stopping after `HandOff`: report it, then restart it if the coordinator
    /// already gave it back, or re-route its leftover messages.
    fn finish_shard_stop(&mut self, now: Instant, shard: ShardId, out: &mut Effects) {
        if let Some(mut instance) = self.shards.remove(&shard) {
            // Letters whose entity never started (the store fenced the instance before their
            // start was durable) go back in front of what the region buffered since, so their
            // order holds; the coordinator hosts the shard here again for them.
            self.buffers.prepend(shard, instance.take_waiting());
            let release = instance.take_lease_release();
            self.release_shard_lease(now, (shard, release), Vec::new(), out);
            self.divide_entity_limit(now, out);
        }
        self.touch(shard);
        out.event(Event::ShardStopped {
            entity_type: self.entity_type.clone(),
            shard,
        });
        match self.fenced.remove(&shard) {
            Some(current) => {
                self.fenced_here.insert(shard, current);
                self.send_to_coordinator(Body::ShardFenced { shard, current }, out);
            }
            None => self.send_to_coordinator(Body::ShardStopped { shard }, out),
        }
        if let Some(epoch) = self.start_after_stop.remove(&shard) {
            self.start_shard(now, shard, epoch, out);
        } else if self.buffers.contains(shard) && self.should_ask_home(shard) {
            self.ask_home(now, shard, out);
        }
        self.try_complete_shutdown(out);
    }

    /// Re-reads a shard's next deadline after anything that may have changed it.
    pub(super) fn touch(&mut self, shard: ShardId) {
        let at = self.shards.get(&shard).and_then(Shard::poll_timeout);
        self.timers.set(shard, at);
    }

    fn start_shard(&mut self, now: Instant, shard: ShardId, epoch: Epoch, out: &mut Effects) {
        let mut instance = Shard::new(
            (shard, epoch),
            self.entity_type.clone(),
            self.shard_settings.clone(),
            now,
        );
        if let Some(terms) = &self.shard_lease {
            self.lease_holders += 1;
            let owner = LeaseOwner {
                member: self.me,
                holder: self.lease_holders,
            };
            instance.start_lease(now, owner, terms.clone(), out);
        }
        // After the lease: a remembered shard under a lease loads once it holds it.
        if let Some(settings) = self.remember {
            instance.start_remembering(settings, self.number_of_shards, out);
        }
        self.shards.insert(shard, instance);
        // Before any letter reaches it.
        self.divide_entity_limit(now, out);
        self.touch(shard);
        self.homes.insert(shard, self.me);
        self.send_to_coordinator(Body::ShardStarted { shard }, out);
        out.event(Event::ShardStarted {
            entity_type: self.entity_type.clone(),
            shard,
        });
        self.flush(now, shard, out);
    }
}

#[cfg(test)]
mod tests;
