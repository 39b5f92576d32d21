//! The discrete-event world: one core `Driver` per simulated node, events ordered by
//! (true time, sequence number), every message through the real codec and the network model,
//! every entity effect through the checker.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use std::time::Duration;

use shoal_core::{
    Config, Driver, Effect, EntityId, EntityType, EntityTypeConfig, Envelope, Incarnation, Input,
    Instant, MemberId, MembershipSettings, MembershipView, Node, NodeId, ShardingSettings,
    StopReason,
};

use crate::check::Checker;
use crate::clock::Clock;
use crate::net::{Flight, Link, Net};
use crate::nodes::{Nodes, SimNode};
use crate::options::{Downing, MembershipMode, Options};
use crate::oracle::Oracle;
use crate::rng::{SimRng, Stream};
use crate::trace::TraceEvent;

/// The entity type every simulated node serves.
pub(crate) const TYPE: &str = "sim";

/// Something scheduled to happen.
#[derive(Debug)]
pub(crate) enum Ev {
    Deliver {
        link: Link,
        flight: Flight,
        envelope: Envelope,
    },
    Wakeup(NodeId),
    EntityStopped {
        member: MemberId,
        entity: EntityId,
        incarnation: u64,
    },
    Passivate {
        member: MemberId,
        entity: EntityId,
    },
    View {
        member: MemberId,
        version: u64,
        view: MembershipView,
    },
    Client,
    Fault(crate::faults::Fault),
    /// The host tells a node what its bounded queues refused (`Input::OutboundQueueFull`,
    /// `Input::MailboxFull`).
    Refused {
        member: MemberId,
        input: Box<Input>,
    },
    /// An entity answers a message it was delivered (an ask's reply).
    Reply {
        member: MemberId,
        entity: EntityId,
        payload: shoal_core::Payload,
    },
    /// The remember store applies what reached it and answers (see `remembering.rs`).
    Store,
}

/// The simulated cluster.
#[derive(Debug)]
pub(crate) struct World {
    pub(crate) opts: Options,
    pub(crate) now: Instant,
    seq: u64,
    /// Pending events by (time, sequence number), each naming its slot in `slots`.
    queue: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    /// Scheduled events; freed slots are reused (`free`), so scheduling rarely allocates.
    slots: Vec<Option<Ev>>,
    free: Vec<usize>,
    pub(crate) nodes: Nodes,
    pub(crate) oracle: Oracle,
    pub(crate) net: Net,
    /// The guarantees, checked as the run goes.
    pub(crate) check: Checker,
    /// Graceful operations in progress, and the faults that excuse them.
    pub(crate) stalls: crate::stall::Stalls,
    /// `(receiver, region)`: the receiver handled a graceful shutdown request of the region
    /// (a coordinator leaves such regions out of allocation and rebalancing).
    pub(crate) shutdowns_heard: BTreeSet<(MemberId, MemberId)>,
    /// `(receiver, sender)`: the receiver heard from the sender, so it holds a connection it
    /// can answer on without knowing the sender's address (as a real transport does).
    pub(crate) heard_from: BTreeSet<(MemberId, MemberId)>,
    /// Client commands and queries in flight and answered.
    pub(crate) requests: crate::requests::ClientRequests,
    pub(crate) rng_commands: SimRng,
    pub(crate) rng_faults: SimRng,
    pub(crate) rng_work: SimRng,
    pub(crate) rng_entities: SimRng,
    /// The host's adversarial timing (forced stops, entities stopping on their own).
    pub(crate) rng_host: SimRng,
    /// Which deliveries entities answer, and when.
    pub(crate) rng_replies: SimRng,
    pub(crate) rng_queries: SimRng,
    /// Asks' replies sent and how they fared.
    pub(crate) asks: crate::asks::Asks,
    pub(crate) rng_membership: SimRng,
    rng_nodes: SimRng,
    /// Entity stops the host has not reported yet: (member, entity, incarnation).
    /// Entity stops the host has not reported yet, with the reason the node gave (`None`: the
    /// entity stops on its own).
    pub(crate) pending_stops: BTreeMap<(MemberId, EntityId, u64), Option<StopReason>>,
    /// Graceful stops an entity ignored (it runs on until forced).
    pub(crate) ignored_stops: BTreeSet<(MemberId, EntityId, u64)>,
    /// Current incarnation number of each running entity.
    pub(crate) incarnations: BTreeMap<(MemberId, EntityId), u64>,
    /// Running entities' mailboxes (with `Options::mailbox`): when each is through with what
    /// it holds.
    pub(crate) mailboxes: BTreeMap<(MemberId, EntityId), Instant>,
    pub(crate) settings: ShardingSettings,
    /// Crashed nodes (no process) and downed nodes (process running, must restart).
    pub(crate) crashed: BTreeSet<NodeId>,
    pub(crate) downed: BTreeSet<NodeId>,
    /// Nodes that left gracefully (their process exited).
    pub(crate) left: BTreeSet<NodeId>,
    /// Nodes that left gracefully and restart as a new incarnation (a rolling restart).
    pub(crate) rejoining: BTreeSet<NodeId>,
    /// Highest incarnation each address has used (every address ever started is here).
    pub(crate) last_incarnation: BTreeMap<NodeId, u64>,
    /// Bumped on every connectivity change; a downing decision applies only to its epoch.
    pub(crate) topology_epoch: u64,
    /// Some downing decision left no surviving majority (no progress possible afterwards).
    pub(crate) no_survivors: bool,
    /// A process crashed or a member was downed: messages it held may be lost.
    pub(crate) crashed_or_downed: bool,
    /// Whether clients send messages.
    pub(crate) traffic: bool,
    pub(crate) zipf: crate::workload::Zipf,
    /// Print a readable trace of the run to stderr (`SIM_TRACE=1`).
    pub(crate) trace: bool,
    /// Also trace forwarded messages and deliveries (`SIM_TRACE=2`, or a trace file).
    pub(crate) trace_all: bool,
    /// The JSON-lines trace file, if one was asked for.
    pub(crate) sink: Option<crate::trace::TraceSink>,
    /// When the trace next samples what each region hosts.
    pub(crate) next_sample: Instant,
    /// How often each interesting situation ("sometimes" marker) occurred.
    pub(crate) coverage: BTreeMap<&'static str, u64>,
    /// The entity whose stop is being reported in the current driver call.
    pub(crate) reporting_stop: Option<(MemberId, EntityId, Option<StopReason>)>,
    /// Events processed.
    pub(crate) events_processed: u64,
    /// Dead letters reported by nodes.
    pub(crate) dead_letters: u64,
    /// The entity type every node serves, and the names of the workload's entities.
    pub(crate) ty: EntityType,
    pub(crate) entity_ids: Vec<EntityId>,
    /// Bumped whenever a process starts or stops, to know when `senders` is stale.
    pub(crate) nodes_epoch: u64,
    /// Bumped whenever a node's own membership view changed (real membership).
    pub(crate) views_changed: u64,
    /// Up members clients send through, as of (oracle version, nodes epoch).
    pub(crate) senders: ((u64, u64), Vec<MemberId>),
    /// Members whose internal invariants broke (each reported once).
    pub(crate) invariants_broken: BTreeSet<MemberId>,
    /// The effects of one driver call, reused from call to call.
    pub(crate) scratch: Vec<Effect>,
    /// The remember store and what remembering owes, when the run remembers entities.
    pub(crate) remembering: Option<crate::remembering::Remembering>,
    digest: u64,
}

impl World {
    /// A world for `opts` with its initial nodes started and told about each other.
    pub(crate) fn new(opts: Options) -> Self {
        let seed = opts.seed;
        let opts_entities = opts.entities;
        // A shorter handoff timeout than Akka's 60 s. The removal margin covers stable-after
        // plus the longest detection delay (the oracle's; with the real membership, the spread
        // between the two sides' failure detectors plus the 3/4 of stable-after a minority may
        // take before downing itself as unstable), as down-removal-margin must.
        let detection = match opts.membership {
            MembershipMode::Oracle => opts.detection_delay + Duration::from_secs(1),
            MembershipMode::Real => crate::faults::STABLE_AFTER * 3 / 4 + Duration::from_secs(5),
        };
        let settings = if opts.default_timers {
            ShardingSettings {
                buffer_size: opts.buffer_size,
                min_registered_regions: opts.min_registered_regions,
                ..ShardingSettings::default()
            }
        } else {
            let defaults = ShardingSettings::default();
            let tight = opts.tight_timers;
            ShardingSettings {
                handoff_timeout: tight.map_or(Duration::from_secs(30), |t| t.handoff_timeout),
                shard_start_timeout: tight
                    .map_or(defaults.shard_start_timeout, |t| t.shard_start_timeout),
                rebalance_interval: tight
                    .map_or(defaults.rebalance_interval, |t| t.rebalance_interval),
                buffer_size: opts.buffer_size,
                down_removal_margin: crate::faults::STABLE_AFTER + detection,
                broken_coordinator_gate: opts.broken_coordinator,
                min_registered_regions: opts.min_registered_regions,
                ..defaults
            }
        };
        let stable_after = if opts.default_timers {
            Duration::from_secs(20)
        } else {
            crate::faults::STABLE_AFTER
        };
        let mut w = Self {
            stalls: crate::stall::Stalls::new(&opts, &settings, stable_after),
            oracle: Oracle::new(opts.downing),
            net: Net::new(
                SimRng::of(seed, Stream::Network),
                opts.faults.duplicate,
                opts.slow_link,
                opts.long_tail,
                opts.outbound_cap,
                opts.lanes,
            ),
            opts,
            now: Instant::ZERO,
            seq: 0,
            queue: BinaryHeap::new(),
            slots: Vec::new(),
            free: Vec::new(),
            nodes: Nodes::default(),
            check: Checker::default(),
            rng_faults: SimRng::of(seed, Stream::Faults),
            rng_commands: SimRng::of(seed, Stream::Commands),
            requests: crate::requests::ClientRequests::default(),
            shutdowns_heard: BTreeSet::new(),
            heard_from: BTreeSet::new(),
            rng_work: SimRng::of(seed, Stream::Workload),
            rng_entities: SimRng::of(seed, Stream::Entities),
            rng_host: SimRng::of(seed, Stream::Host),
            rng_replies: SimRng::of(seed, Stream::Replies),
            rng_queries: SimRng::of(seed, Stream::Queries),
            asks: crate::asks::Asks::default(),
            rng_membership: SimRng::of(seed, Stream::Membership),
            rng_nodes: SimRng::of(seed, Stream::Nodes),
            pending_stops: BTreeMap::new(),
            ignored_stops: BTreeSet::new(),
            incarnations: BTreeMap::new(),
            mailboxes: BTreeMap::new(),
            settings,
            crashed: BTreeSet::new(),
            downed: BTreeSet::new(),
            left: BTreeSet::new(),
            rejoining: BTreeSet::new(),
            last_incarnation: BTreeMap::new(),
            topology_epoch: 0,
            no_survivors: false,
            crashed_or_downed: false,
            traffic: true,
            zipf: crate::workload::Zipf::new(opts_entities),
            trace: std::env::var_os("SIM_TRACE").is_some(),
            trace_all: std::env::var("SIM_TRACE").is_ok_and(|v| v == "2"),
            sink: None,
            next_sample: Instant::ZERO,
            coverage: BTreeMap::new(),
            reporting_stop: None,
            events_processed: 0,
            dead_letters: 0,
            ty: EntityType::new(TYPE),
            entity_ids: (0..opts_entities)
                .map(|i| EntityId::new(format!("e{i}")))
                .collect(),
            nodes_epoch: 0,
            views_changed: 0,
            senders: ((u64::MAX, 0), Vec::new()),
            invariants_broken: BTreeSet::new(),
            scratch: Vec::new(),
            remembering: None,
            digest: 0xcbf2_9ce4_8422_2325,
        };
        w.remembering = w
            .opts
            .remember
            .as_ref()
            .map(|r| crate::remembering::Remembering::new(seed, r));
        if w.opts.bystander.is_some() {
            w.mark("a member that runs no entity type");
        }
        for n in 1..=w.opts.nodes {
            w.start_node(NodeId(n), Incarnation(1));
        }
        let everyone: BTreeSet<NodeId> = w.nodes.keys().copied().collect();
        w.publish(&everyone, w.oracle.view());
        w
    }

    /// The core's membership settings in the simulator: Akka's mechanisms, with stable-after
    /// shortened like the oracle's; every address a run may use is a seed, and the first one
    /// forms the cluster when the run starts.
    fn membership_settings(&self, incarnation: Incarnation) -> MembershipSettings {
        let seeds = (1..=self.opts.max_nodes).map(NodeId);
        let seeds = seeds.map(|n| shoal_core::SeedNode::new(n, crate::nodes::address_of(n)));
        let mut s = MembershipSettings::new(seeds);
        // Only the first bootstrap may form a cluster; a restarted first seed joins one.
        s.may_form_cluster = incarnation == Incarnation(1);
        // A rolling restart is a rolling update: each restart runs a newer version.
        if self.opts.family == crate::options::Family::RollingRestart {
            let version = u32::try_from(incarnation.0).unwrap_or(u32::MAX);
            s.app_version = shoal_core::AppVersion(1, version, 0);
        }
        if self.opts.default_timers {
            return s;
        }
        s.seed_node_timeout = Duration::from_secs(2);
        s.retry_join_after = Duration::from_secs(2);
        let stable_after = crate::faults::STABLE_AFTER;
        s.downing = match self.opts.downing {
            Downing::KeepMajority => shoal_core::Downing::KeepMajority { stable_after },
            Downing::Auto => shoal_core::Downing::AutoDown {
                after: stable_after,
            },
        };
        s
    }

    /// Schedules `ev` at `at` (never in the past).
    pub(crate) fn schedule(&mut self, at: Instant, ev: Ev) {
        self.seq += 1;
        let slot = match self.free.pop() {
            Some(slot) => {
                self.slots[slot] = Some(ev);
                slot
            }
            None => {
                self.slots.push(Some(ev));
                self.slots.len() - 1
            }
        };
        self.queue.push(Reverse((at.max(self.now), self.seq, slot)));
    }

    /// Processes events until `until` (true time).
    pub(crate) fn run_until(&mut self, until: Instant) {
        while let Some(&Reverse((at, _, slot))) = self.queue.peek() {
            if at > until {
                break;
            }
            self.queue.pop();
            let ev = self.slots[slot].take().expect("scheduled event");
            self.free.push(slot);
            self.now = at;
            self.events_processed += 1;
            self.handle(ev);
            if self.sink.is_some() && self.now >= self.next_sample {
                self.sample_hosting();
            }
        }
        self.now = self.now.max(until);
    }

    /// A digest of everything that happened, equal for equal seeds.
    pub(crate) fn digest(&self) -> u64 {
        self.digest
    }

    /// Starts (or restarts) `node` as incarnation `incarnation` and adds it to the membership.
    pub(crate) fn start_node(&mut self, node: NodeId, incarnation: Incarnation) {
        // The type's name is shared by every node, as a clone of `self.ty` (comparisons are
        // pointer comparisons then, as with clones of one name in a real process).
        let mut t = EntityTypeConfig::new(TYPE);
        t.name = self.ty.clone();
        t.number_of_shards = self.opts.shards;
        t.passivate_idle_after = Some(Duration::from_secs(60));
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
        t.allocation = self.opts.allocation.clone();
        let bystander = self.opts.bystander == Some(node);
        let mut config = Config::new(node, incarnation);
        config.address = crate::nodes::address_of(node);
        if !bystander {
            config = config.with_entity_type(t);
        }
        config.seed = self.rng_nodes.next_u64();
        config.settings = self.settings.clone();
        if self.opts.membership == MembershipMode::Real {
            config.membership = Some(self.membership_settings(incarnation));
        }
        let drift = i64::from(self.opts.faults.drift_ppm);
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
            paused: None,
            next_invariant_check: self.now,
        };
        self.nodes.insert(node, sim);
        self.log(|| TraceEvent::ProcessStarted {
            member: id.to_string(),
        });
        self.nodes_epoch += 1;
        let last = self.last_incarnation.entry(node).or_default();
        // A member id never comes back (DESIGN.md decision 7); reusing one is a simulator bug.
        assert!(incarnation.0 > *last, "{id} was started before");
        *last = incarnation.0;
        match self.opts.membership {
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
        self.incarnations.retain(|(m, _), _| *m != node.id);
        self.mailboxes.retain(|(m, _), _| *m != node.id);
        Some(node.id)
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Deliver {
                link,
                flight,
                envelope,
            } => {
                self.mix(1, link.1.0);
                if self.net.arrives(link, flight) {
                    self.input(link.1, Input::Receive(envelope));
                }
            }
            Ev::Wakeup(n) => {
                self.mix(2, n.0);
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
            } => {
                self.mix(3, member.node.0);
                let paused = self
                    .nodes
                    .get(&member.node)
                    .is_some_and(|n| n.id == member && n.is_paused());
                if paused {
                    // Entities run in their node's process: while it is paused they cannot
                    // finish stopping either.
                    let again = Ev::EntityStopped {
                        member,
                        entity,
                        incarnation,
                    };
                    return self.schedule(self.now + Duration::from_millis(50), again);
                }
                if let Some(reason) =
                    self.pending_stops
                        .remove(&(member, entity.clone(), incarnation))
                {
                    self.incarnations.remove(&(member, entity.clone()));
                    self.mailboxes.remove(&(member, entity.clone()));
                    self.remembered_stopped(&(member, entity.clone(), incarnation));
                    self.log(|| TraceEvent::EntityStopped {
                        member: member.to_string(),
                        entity: entity.to_string(),
                    });
                    self.check.stopped(member, &entity);
                    let entity_type = self.ty.clone();
                    self.reporting_stop = Some((member, entity.clone(), reason));
                    self.input_to(
                        member,
                        Input::EntityStopped {
                            entity_type,
                            entity,
                        },
                    );
                    self.reporting_stop = None;
                }
            }
            Ev::Reply {
                member,
                entity,
                payload,
            } => {
                self.mix(6, member.node.0);
                if let Some((to, payload)) = self
                    .is_running(member)
                    .then(|| self.asks.reply(&entity, &payload))
                    .flatten()
                {
                    self.input_to(member, Input::SendApp { to, payload });
                }
            }
            Ev::Store => {
                self.mix(9, 0);
                self.handle_store_event();
            }
            Ev::Refused { member, input } => {
                self.mix(8, member.node.0);
                self.input_to(member, *input);
            }
            Ev::Passivate { member, entity } => {
                self.mix(4, member.node.0);
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
            } => {
                self.mix(5, member.node.0);
                let Some(node) = self.nodes.get_mut(&member.node).filter(|n| n.id == member) else {
                    return;
                };
                if version > node.view_version {
                    node.view_version = version;
                    self.log(|| TraceEvent::View {
                        member: member.to_string(),
                        version: Some(version),
                        members: crate::trace::view_entries(&view),
                    });
                    self.input(member.node, Input::MembershipChanged(view));
                }
            }
            Ev::Client => {
                self.mix(6, 0);
                crate::workload::client_message(self);
            }
            Ev::Fault(fault) => {
                self.mix(7, 0);
                self.log(|| TraceEvent::Fault {
                    fault: format!("{fault:?}"),
                });
                crate::faults::apply(self, fault);
            }
        }
    }

    /// Folds one event (its time, kind and node) into the digest.
    fn mix(&mut self, kind: u64, node: u64) {
        for word in [self.now.as_nanos(), kind, node] {
            // FNV-1a over whole words, then a xor-shift so high bits reach low ones.
            self.digest = (self.digest ^ word).wrapping_mul(0x0100_0000_01b3);
            self.digest ^= self.digest >> 29;
        }
    }
}
