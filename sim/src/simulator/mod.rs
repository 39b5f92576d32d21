//! The simulator: it owns the cluster (one core `Driver` per simulated node with its clock,
//! the network, the membership oracle), the event queue, the nemesis (faults), the workload
//! (clients), the entity host and the checker, and routes between them: events in time order
//! (true time, sequence number), every message through the real codec and the network model,
//! every entity effect through the host and the checker. Only this module knows every
//! component; none of them knows the simulator.

mod abandons;
mod after_call;
mod answers;
mod delivering;
mod direct;
mod direct_links;
mod drive;
mod explaining;
mod faults;
mod home_asks;
mod host;
mod io;
mod leasing;
mod node_events;
mod persisting;
mod quiescence;
mod rebalance;
mod remembering;
mod removals;
mod run;
mod survival;
mod trace;
mod unanswered;
mod views;
mod workload;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use shoal_core::{
    Config, Driver, EntityType, EntityTypeConfig, Incarnation, Input, Instant, MemberId,
    MembershipSettings, Node, NodeId, ShardingSettings,
};

use crate::asks::Asks;
use crate::bounds::STABLE_AFTER;
use crate::check::Checker;
use crate::clock::Clock;
use crate::connections::Connections;
use crate::entity_host::EntityHost;
use crate::events::{Ev, EventQueue};
use crate::nemesis::Nemesis;
use crate::net::Net;
use crate::nodes::{Nodes, SimNode};
use crate::options::{Downing, MembershipMode, Options};
use crate::oracle::Oracle;
use crate::remembering::Remembering;
use crate::requests::ClientRequests;
use crate::rng::{SimRng, Stream};
use crate::stall::Stalls;
use crate::trace::{TraceEvent, Tracer};
use crate::workload::Workload;

pub(crate) use run::run_with_sink;

/// The entity type every simulated node serves.
pub(crate) const TYPE: &str = "sim";

/// How long an entity of a run that does not remember entities stays idle before its node
/// passivates it: well within a run, so that the checker sees idle entities passivated.
const PASSIVATE_IDLE_AFTER: Duration = Duration::from_secs(60);

/// The simulated cluster and everything that acts on it.
#[derive(Debug)]
pub(crate) struct Simulator {
    opts: Options,
    /// True simulated time.
    now: Instant,
    events: EventQueue,
    // The cluster.
    nodes: Nodes,
    net: Net,
    oracle: Oracle,
    settings: ShardingSettings,
    /// The entity type every node serves (one name, shared as a real process shares it).
    ty: EntityType,
    /// Membership detection delays (the oracle's).
    rng_membership: SimRng,
    /// Node seeds and clock drift.
    rng_nodes: SimRng,
    /// Highest incarnation each address has used (every address ever started is here).
    last_incarnation: BTreeMap<NodeId, u64>,
    /// The entity type's number of shards now (another after a full restart).
    shards: u32,
    /// Nodes whose next start bootstraps a new cluster (after a full restart): the first seed
    /// among them may form it.
    forming: BTreeSet<NodeId>,
    /// Bumped whenever a process starts or stops (the workload's sender cache key).
    nodes_epoch: u64,
    /// Bumped whenever a node's status in its own view changed (real membership): the Up
    /// members clients send through depend on nothing else, and a thousand-node cluster
    /// changes views far more often than statuses.
    own_statuses_changed: u64,
    /// `(receiver, sender)`: the receiver heard from the sender, so it holds a connection it
    /// can answer on without knowing the sender's address (as a real transport does).
    connections: Connections,
    /// The node each address on an envelope names (remembered: parsed once per address).
    routes: crate::nodes::Routes,
    /// Graceful shutdown requests coordinators could act on (they leave such regions out of
    /// allocation and rebalancing).
    shutdowns: rebalance::Shutdowns,
    /// The effects of one driver call, reused from call to call.
    scratch: std::collections::VecDeque<io::Deferred>,
    // What acts on the cluster.
    nemesis: Nemesis,
    workload: Workload,
    host: EntityHost,
    /// The remember store and what remembering owes, when the run remembers entities (the
    /// store alone when entities only persist state).
    remembering: Option<Remembering>,
    /// The lease store, when shards hold leases.
    leasing: Option<crate::leasing::Leasing>,
    /// Persistent entities' writers, when entities persist state.
    persisting: Option<crate::persisting::Persisting>,
    /// Reliable producers and plain entities' consumers, when the run delivers reliably.
    delivering: Option<crate::delivering::Delivering>,
    /// Members' direct routes to their running entities, when the run uses them.
    direct: Option<direct::DirectRoutes>,
    /// Passivation asks, and when each entity was last active when the run passivates idle
    /// entities (remembered entities are not passivated for idleness).
    idleness: crate::idleness::Idleness,
    // What judges it.
    check: Checker,
    /// Graceful operations in progress, and the faults that excuse them.
    stalls: Stalls,
    /// Client commands and queries in flight and answered.
    requests: ClientRequests,
    /// Asks' replies sent and how they fared.
    asks: Asks,
    /// Connectivity over time, to judge downing decisions (see `survival`).
    survival: crate::survival::Survival,
    /// Down members on their way out (see `removals`).
    removals: removals::Removals,
    /// Members asked to leave gracefully (see `abandons`).
    leavers: abandons::Leavers,
    /// Regions' recent questions for shard homes (see `home_asks`).
    home_asks: home_asks::HomeAsks,
    /// `EntityLocated` answers sent in the calls under way: `(from, to, request)`.
    located_sent: Vec<(MemberId, MemberId, shoal_core::RequestId)>,
    /// The node whose wakeup call (which fires its due timers) is under way.
    waking: Option<NodeId>,
    /// Members whose internal invariants broke (each reported once).
    invariants_broken: BTreeSet<MemberId>,
    /// Dead letters reported by nodes.
    dead_letters: u64,
    /// What the nodes decided, for judging their explanations (runs that ask for them).
    truth: Option<explaining::Decided>,
    /// How often each interesting situation ("sometimes" marker) occurred.
    coverage: BTreeMap<&'static str, u64>,
    tracer: Tracer,
}

impl Simulator {
    /// A simulator for `opts` with its initial nodes started and told about each other.
    pub(crate) fn new(opts: Options) -> Self {
        let seed = opts.seed;
        // A shorter handoff timeout than Akka's 60 s. The removal margin covers stable-after
        // plus the longest detection delay (the oracle's; with the real membership, the spread
        // between the two sides' failure detectors plus the 3/4 of stable-after a minority may
        // take before downing itself as unstable), as down-removal-margin must.
        let detection = match opts.cluster.membership {
            MembershipMode::Oracle => opts.cluster.detection_delay + Duration::from_secs(1),
            MembershipMode::Real => STABLE_AFTER * 3 / 4 + Duration::from_secs(5),
        };
        let settings = if opts.cluster.default_timers {
            ShardingSettings {
                buffer_size: opts.cluster.buffer_size,
                ..ShardingSettings::default()
            }
        } else {
            let defaults = ShardingSettings::default();
            let tight = opts.cluster.tight_timers;
            ShardingSettings {
                handoff_timeout: tight.map_or(Duration::from_secs(30), |t| t.handoff_timeout),
                shard_start_timeout: tight
                    .map_or(defaults.shard_start_timeout, |t| t.shard_start_timeout),
                rebalance_interval: tight
                    .map_or(defaults.rebalance_interval, |t| t.rebalance_interval),
                buffer_size: opts.cluster.buffer_size,
                down_removal_margin: STABLE_AFTER + detection,
                broken_coordinator_gate: opts.cluster.broken_coordinator,
                ..defaults
            }
        };
        let stable_after = if opts.cluster.default_timers {
            Duration::from_secs(20)
        } else {
            STABLE_AFTER
        };
        let mut w = Self {
            stalls: Stalls::new(&opts, &settings, stable_after),
            oracle: Oracle::new(opts.cluster.downing),
            net: Net::new(SimRng::of(seed, Stream::Network), &opts.network),
            now: Instant::ZERO,
            events: EventQueue::default(),
            nodes: Nodes::default(),
            check: Checker::default(),
            nemesis: Nemesis::new(SimRng::of(seed, Stream::Faults)),
            workload: Workload::new(&opts),
            host: EntityHost::new(&opts),
            requests: ClientRequests::default(),
            shutdowns: rebalance::Shutdowns::default(),
            connections: Connections::default(),
            asks: Asks::default(),
            survival: crate::survival::Survival::default(),
            removals: removals::Removals::default(),
            leavers: abandons::Leavers::default(),
            home_asks: home_asks::HomeAsks::default(),
            waking: None,
            located_sent: Vec::new(),
            rng_membership: SimRng::of(seed, Stream::Membership),
            rng_nodes: SimRng::of(seed, Stream::Nodes),
            settings,
            last_incarnation: BTreeMap::new(),
            shards: opts.cluster.shards,
            forming: BTreeSet::new(),
            tracer: Tracer::from_env(),
            coverage: BTreeMap::new(),
            dead_letters: 0,
            truth: (opts.workload.explain != crate::options::ExplainQueries::Off)
                .then(explaining::Decided::default),
            ty: EntityType::new(TYPE),
            nodes_epoch: 0,
            own_statuses_changed: 0,
            invariants_broken: BTreeSet::new(),
            scratch: std::collections::VecDeque::new(),
            routes: crate::nodes::Routes::default(),
            remembering: Self::store_of(seed, &opts),
            leasing: crate::leasing::Leasing::of_run(seed, &opts),
            persisting: (opts.persist).map(|p| {
                let suppress = opts.delivery.is_none_or(|d| d.suppress_duplicates);
                let judging = (suppress, crate::delivering::window_of(&opts));
                crate::persisting::Persisting::new(p, EntityType::new(TYPE), judging)
            }),
            delivering: (opts.delivery).map(|d| crate::delivering::Delivering::new(d, &opts)),
            direct: (opts.direct).map(|d| direct::DirectRoutes::new(d.fault)),
            idleness: crate::idleness::Idleness::new(
                (opts.remember.is_none()).then_some(PASSIVATE_IDLE_AFTER),
            ),
            opts,
        };
        if w.opts.cluster.bystander.is_some() {
            w.mark("a member that runs no entity type");
        }
        for n in 1..=w.opts.cluster.nodes {
            w.start_node(NodeId(n), Incarnation(1));
        }
        let everyone: BTreeSet<NodeId> = w.nodes.keys().copied().collect();
        w.publish(&everyone, w.oracle.view());
        w
    }

    /// The core's membership settings in the simulator: Akka's mechanisms, with stable-after
    /// shortened like the oracle's; every address a run may use is a seed, and the first one
    /// forms the cluster when the run starts.
    fn membership_settings(
        &mut self,
        node: NodeId,
        incarnation: Incarnation,
    ) -> MembershipSettings {
        let seeds = (1..=self.opts.cluster.max_nodes).map(NodeId);
        let seeds = seeds.map(|n| shoal_core::SeedNode::new(n, crate::nodes::address_of(n)));
        let mut s = MembershipSettings::new(seeds);
        // Only a cluster's first bootstrap may form it; a restarted first seed joins one.
        s.may_form_cluster = incarnation == Incarnation(1) || self.forming.remove(&node);
        // A rolling restart is a rolling update: each restart runs a newer version.
        if self.opts.family == crate::options::Family::RollingRestart {
            let version = u32::try_from(incarnation.0).unwrap_or(u32::MAX);
            s.app_version = shoal_core::AppVersion(1, version, 0);
        }
        if self.opts.cluster.default_timers {
            // Akka's stable-after (20 s), with the run's strategy.
            let stable_after = s.downing.stable_after().unwrap_or(Duration::from_secs(20));
            s.downing = self.downing(stable_after);
            return s;
        }
        s.seed_node_timeout = Duration::from_secs(2);
        s.retry_join_after = Duration::from_secs(2);
        s.downing = self.downing(STABLE_AFTER);
        s
    }

    /// The run's downing strategy, deciding after `stable_after`.
    fn downing(&self, stable_after: Duration) -> shoal_core::Downing {
        match self.opts.cluster.downing {
            Downing::KeepMajority => shoal_core::Downing::KeepMajority { stable_after },
            Downing::Auto => shoal_core::Downing::AutoDown {
                after: stable_after,
            },
            Downing::StaticQuorum => shoal_core::Downing::StaticQuorum {
                stable_after,
                quorum_size: crate::bounds::static_quorum(self.opts.cluster.nodes),
            },
            Downing::KeepOldest { down_if_alone } => shoal_core::Downing::KeepOldest {
                stable_after,
                down_if_alone,
            },
            Downing::DownAll => shoal_core::Downing::DownAll { stable_after },
            Downing::LeaseMajority => shoal_core::Downing::LeaseMajority {
                stable_after,
                acquire_delay_for_minority: crate::bounds::LEASE_MAJORITY_DELAY,
                lease_ttl: crate::bounds::lease_majority_ttl(stable_after),
            },
        }
    }

    /// Schedules `ev` at `at` (never in the past).
    pub(crate) fn schedule(&mut self, at: Instant, ev: Ev) {
        self.events.schedule(at.max(self.now), ev);
    }

    /// Processes events until `until` (true time).
    pub(crate) fn run_until(&mut self, until: Instant) {
        while let Some((at, ev)) = self.events.pop_due(until) {
            self.now = at;
            self.prefetch_next();
            self.handle(ev);
            self.sample_hosting();
            self.watch_removals();
        }
        self.now = self.now.max(until);
    }

    /// Starts loading what the next deliveries read first. At a thousand nodes each of these
    /// reads is a cache miss at random; started early, they overlap with this event's work
    /// instead of stalling the next ones in turn (1,000 nodes: BENCHMARKS.md, nineteenth
    /// pass). Two stages, as each load's address comes from the one before: for the event
    /// after next (its slot loaded since the event before), the envelope, where the receiver's
    /// process starts, its connection bit and the link back (most envelopes are answered);
    /// for the next one, the receiver's record of the sender, found through the process.
    /// Hints only: nothing simulated depends on them.
    fn prefetch_next(&self) {
        if let Some(Ev::Deliver { link, envelope, .. }) = self.events.peek(1) {
            // The envelope's two lines (the message, then who sent it to whom).
            shoal_core::hint::prefetch(&**envelope);
            shoal_core::hint::prefetch(&envelope.to);
            self.nodes.prefetch(link.1);
            self.connections.prefetch(link.1, link.0);
            self.net.prefetch_link((link.1, link.0));
        }
        if let Some(Ev::Deliver { link, .. }) = self.events.peek(0) {
            if let Some(node) = self.nodes.get(&link.1) {
                node.driver.prefetch_peer(link.0);
            }
        }
    }

    /// The store a run with `opts` needs: when it remembers entities (with the store's drawn
    /// faults) or persists state (without faults of its own when it remembers nothing);
    /// appends skip the epoch condition in the negative control.
    fn store_of(seed: u64, opts: &Options) -> Option<Remembering> {
        let remember = match (&opts.remember, opts.persist) {
            (Some(remember), _) => remember.clone(),
            (None, Some(_)) => crate::options::Remember::faultless(),
            (None, None) => return None,
        };
        let remembers = opts.remember.is_some();
        let mut store = Remembering::new(seed, &remember, opts.duration, remembers);
        if opts.persist.is_some_and(|p| p.unfenced) {
            store.store_mut().skip_write_fencing();
        }
        Some(store)
    }

    /// Starts (or restarts) `node` as incarnation `incarnation` and adds it to the membership.
    pub(crate) fn start_node(&mut self, node: NodeId, incarnation: Incarnation) {
        // The type's name is shared by every node, as a clone of `self.ty` (comparisons are
        // pointer comparisons then, as with clones of one name in a real process).
        let mut t = EntityTypeConfig::new(TYPE);
        t.name = self.ty.clone();
        t.number_of_shards = self.shards;
        t.passivate_idle_after = Some(PASSIVATE_IDLE_AFTER);
        t.remember = self
            .opts
            .remember
            .as_ref()
            .map(|r| shoal_core::RememberSettings {
                recovery: r.recovery,
                retry_min: Duration::from_millis(200),
                retry_max: Duration::from_secs(5),
                restart_backoff: Duration::from_secs(5),
            });
        t.persistent = self.opts.persist.is_some();
        let forced_stop = self.opts.host.forced_stop;
        t.shard_lease = (self.opts.lease.as_ref()).map(|l| l.terms(forced_stop));
        t.coordinator_lease = (self.opts.lease.as_ref())
            .filter(|l| l.coordinator)
            .map(|l| l.terms(forced_stop));
        t.allocation = self.opts.cluster.allocation.clone();
        t.min_registered_regions = self.opts.cluster.min_registered_regions;
        t.active_entity_limit = self.opts.cluster.active_entity_limit;
        let bystander = self.opts.cluster.bystander == Some(node);
        let mut config = Config::new(node, incarnation);
        config.address = crate::nodes::address_of(node);
        if !bystander {
            config = config.with_entity_type(t);
        }
        config.seed = self.rng_nodes.next_u64();
        config.settings = self.settings.clone();
        if self.opts.cluster.membership == MembershipMode::Real {
            config.membership = Some(self.membership_settings(node, incarnation));
        }
        let drift = i64::from(self.opts.cluster.drift_ppm);
        let skew_ppm = if drift == 0 {
            0
        } else {
            self.rng_nodes.range(0, 2 * drift as u64) as i64 - drift
        };
        let offset = self.rng_nodes.range(0, 1_000_000_000);
        let id = config.member_id();
        let clock = Clock { offset, skew_ppm };
        let local = clock.local(self.now);
        let state = Node::new(config, local).expect("the simulator's config is valid");
        let sim = SimNode {
            driver: Driver::new(state, local),
            id,
            clock,
            wakeup: None,
            view_version: 0,
            own_status: None,
            status_before_down: None,
            letters_forwarded: 0,
            letters_delivered: 0,
            unanswered: crate::unanswered::Unanswered::default(),
            paused: None,
            next_invariant_check: self.now,
            ledger: shoal_core::EntityLedger::default(),
        };
        self.nodes.insert(node, sim);
        self.log(|| TraceEvent::ProcessStarted {
            member: id.to_string(),
        });
        self.nodes_epoch += 1;
        let last = self.last_incarnation.entry(node).or_default();
        // A member id never comes back (the README's protocol decision 7); reusing one is a simulator bug.
        assert!(incarnation.0 > *last, "{id} was started before");
        *last = incarnation.0;
        match self.opts.cluster.membership {
            MembershipMode::Oracle => {
                let hosts = if bystander {
                    vec![]
                } else {
                    vec![self.ty.clone()]
                };
                self.oracle.join(id, &hosts);
            }
            // It starts by joining through the seeds: run its first timers now.
            MembershipMode::Real => self.wake(node),
        }
        self.producers_restarted(node);
    }

    /// Removes a node's process (crash): its entities die at once.
    pub(crate) fn kill(&mut self, n: NodeId) -> Option<MemberId> {
        let node = self.nodes.remove(&n)?;
        self.log(|| TraceEvent::ProcessEnded {
            member: node.id.to_string(),
        });
        self.nodes_epoch += 1;
        self.check.crashed(node.id);
        self.stalls.region_gone(node.id);
        self.host.process_gone(node.id);
        self.idleness.process_gone(node.id);
        self.direct_routes_gone(node.id);
        if let Some(remembering) = &mut self.remembering {
            remembering.process_gone(node.id);
        }
        Some(node.id)
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver {
                link,
                flight,
                envelope,
            } => {
                if self.net.arrives(link, flight) {
                    self.receive(link.1, envelope);
                }
            }
            Ev::Wakeup(n) => {
                if self
                    .nodes
                    .get(&n)
                    .is_some_and(|node| node.wakeup == Some(self.now))
                {
                    self.wake(n);
                }
            }
            Ev::EntityStopped {
                member,
                entity,
                incarnation,
            } => self.entity_terminated((member, entity, incarnation)),
            Ev::Reply {
                member,
                entity,
                payload,
            } => {
                if let Some((to, payload)) = self
                    .is_running(member)
                    .then(|| self.asks.reply(&entity, &payload))
                    .flatten()
                {
                    let replaced_known = self.nodes.get(&member.node).is_some_and(|n| {
                        let view = n.driver.node().view();
                        view.members()
                            .iter()
                            .any(|m| m.id.node == to.node && m.id.incarnation < to.incarnation)
                    });
                    if replaced_known {
                        self.mark("a reply goes to a restarted asker whose old self is known");
                    }
                    self.input_to(member, Input::SendApp { to, payload });
                }
            }
            Ev::Store => self.handle_store_event(),
            Ev::Lease => self.handle_lease_event(),
            Ev::Reliable { member, input } => {
                // A producer's letter goes only through a member still hosting (one that
                // began to leave meanwhile stops, as a runtime's node does once out).
                let letter = matches!(*input, Input::Tell { .. });
                if !letter || self.is_up(member) {
                    self.input_to(member, *input);
                }
            }
            Ev::Producers => self.producers_due(),
            Ev::Refused { member, input } => self.input_to(member, *input),
            Ev::Passivate { member, entity } => {
                self.host.asks_to_passivate(self.now, member, &entity);
                self.idleness.asked_to_passivate(member, &entity);
                self.input_to(
                    member,
                    Input::Passivate {
                        entity_type: self.ty.clone(),
                        entity,
                    },
                );
            }
            Ev::View {
                member,
                version,
                view,
            } => self.deliver_view(member, version, view),
            Ev::Client => self.client_round(),
            Ev::Fault(fault) => {
                self.log(|| TraceEvent::Fault {
                    fault: format!("{fault:?}"),
                });
                self.apply_fault(fault);
            }
        }
    }
}
