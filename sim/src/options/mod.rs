//! What one run does. Every option is drawn from the seed (swarm testing: each fault kind is
//! switched on or off per seed, with a random intensity), or forced by the caller.

use std::time::Duration;

use shoal_core::AllocationStrategyConfig;

use crate::schedule::Schedule;

mod display;
mod draw;

/// A scenario family: a fault profile. `Swarm` draws every fault kind at random per seed.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Family {
    /// Every fault kind switched on or off per seed, with a random intensity.
    Swarm,
    /// Traffic without faults (exactly-once is checked).
    Steady,
    /// Members leave gracefully one after another and come back as new incarnations.
    RollingRestart,
    /// Three nodes grow to seven.
    ScaleOut,
    /// Seven nodes shrink by graceful leaves.
    ScaleIn,
    /// Repeated network partitions (some one-way).
    Partitions,
    /// The coordinator's node (the oldest) crashes repeatedly.
    CoordinatorCrash,
    /// Connections break often and short partitions come and go.
    FlappingLinks,
    /// Entities passivate themselves often and some ignore stops.
    MassPassivation,
    /// Several members shut down gracefully at about the same time.
    MassShutdown,
    /// The whole cluster goes down and starts again with another number of shards, entities
    /// remembered (the only way to change the shard function).
    FullRestart,
    /// Four or six members split into two equal halves again and again, and the member
    /// holding a lease (the downing lease, else a shard's) pauses while downing decides:
    /// exactly one side may serve. Half the seeds of the partitions family.
    EqualHalves,
    /// Small active-entity limits over few shards, every replacement policy: entities
    /// passivated by the limit all the time while members leave and come back, some
    /// remembered (dormant until their next message). Half the seeds of the
    /// mass-passivation family.
    ActiveLimit,
}

impl Family {
    /// Every family (the default batch cycles through those before `EqualHalves`).
    pub const ALL: [Self; 13] = [
        Self::Swarm,
        Self::Steady,
        Self::RollingRestart,
        Self::ScaleOut,
        Self::ScaleIn,
        Self::Partitions,
        Self::CoordinatorCrash,
        Self::FlappingLinks,
        Self::MassPassivation,
        Self::MassShutdown,
        Self::FullRestart,
        Self::EqualHalves,
        Self::ActiveLimit,
    ];

    /// The family the default batch, `sweep` and `replay` use for `seed`: those before
    /// `EqualHalves` in turn by seed, half of the partitions seeds splitting into equal
    /// halves and half of the mass-passivation seeds running under active-entity limits.
    pub fn of_seed(seed: u64) -> Self {
        let cycle = &Self::ALL[..Self::ALL.len() - 2];
        let family = cycle[(seed % cycle.len() as u64) as usize];
        let halves = || crate::rng::SimRng::of(seed, crate::rng::Stream::Family).chance(0.5);
        match family {
            Self::Partitions if halves() => Self::EqualHalves,
            Self::MassPassivation if halves() => Self::ActiveLimit,
            _ => family,
        }
    }

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Swarm => "swarm",
            Self::Steady => "steady",
            Self::RollingRestart => "rolling-restart",
            Self::ScaleOut => "scale-out",
            Self::ScaleIn => "scale-in",
            Self::Partitions => "partitions",
            Self::CoordinatorCrash => "coordinator-crash",
            Self::FlappingLinks => "flapping-links",
            Self::MassPassivation => "mass-passivation",
            Self::MassShutdown => "mass-shutdown",
            Self::FullRestart => "full-restart",
            Self::EqualHalves => "equal-halves",
            Self::ActiveLimit => "active-limit",
        }
    }

    /// The family named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// Where the nodes' membership comes from.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum MembershipMode {
    /// The core's own membership: joining through seeds, gossip, heartbeats and failure
    /// detection, downing by the split brain resolver. The default.
    Real,
    /// The simulator's oracle tells nodes about joins, unreachability and removals, and downs
    /// with perfect knowledge of connectivity: isolates sharding bugs from membership.
    Oracle,
}

/// How unreachable members are downed (by the core's split brain resolver, or the oracle).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum Downing {
    /// Keep the side holding a majority (ties: the side with the lowest address); the other
    /// side downs itself. Safe.
    KeepMajority,
    /// Each side downs every member it cannot reach. Unsafe: a negative control that must
    /// produce duplicate entities which the checker catches.
    Auto,
    /// The side holding a quorum of the starting members (half of them and one) survives;
    /// with more members than twice that less one, every side downs itself.
    StaticQuorum,
    /// The side of the oldest member survives; with `down_if_alone`, an oldest member cut
    /// off alone downs itself and the others survive.
    KeepOldest {
        /// An oldest member alone on its side downs itself.
        down_if_alone: bool,
    },
    /// Every member downs itself once someone stays unreachable.
    DownAll,
    /// The side whose leader gets the downing lease survives (the side without a majority asks
    /// after a delay); from the run's lease store, or a faultless one if it has none.
    LeaseMajority,
}

impl Downing {
    /// The strategies a seed may draw besides keep-majority, and their names.
    pub const DRAWN: [(Self, &'static str); 5] = [
        (Self::StaticQuorum, "static-quorum"),
        (
            Self::KeepOldest {
                down_if_alone: false,
            },
            "keep-oldest",
        ),
        (
            Self::KeepOldest {
                down_if_alone: true,
            },
            "keep-oldest-down-if-alone",
        ),
        (Self::DownAll, "down-all"),
        (Self::LeaseMajority, "lease-majority"),
    ];

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::KeepMajority => "keep-majority",
            Self::Auto => "auto",
            other => (Self::DRAWN.iter())
                .find(|(d, _)| *d == other)
                .map_or("?", |(_, name)| name),
        }
    }

    /// The strategy named `name` on the command line.
    pub fn parse(name: &str) -> Option<Self> {
        [(Self::KeepMajority, "keep-majority"), (Self::Auto, "auto")]
            .iter()
            .chain(Self::DRAWN.iter())
            .find(|(_, n)| *n == name)
            .map(|(d, _)| *d)
    }
}

/// The nemesis: which fault kinds recur and how often; `None` or `false` means off.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    /// Mean time between node crashes (then restarts as a new incarnation).
    pub crash_every: Option<Duration>,
    /// Mean time between network partitions (healed after a while).
    pub partition_every: Option<Duration>,
    /// Mean time between connection breaks (in-flight messages on a link are lost).
    pub break_every: Option<Duration>,
    /// Mean time between graceful leaves (a member hands off its shards and leaves).
    pub leave_every: Option<Duration>,
    /// Mean time between new nodes joining (scale out).
    pub join_every: Option<Duration>,
    /// Mean time between crashes of the oldest member (where the coordinator runs).
    pub crash_oldest_every: Option<Duration>,
    /// Members that left come back as new incarnations (rolling restart).
    pub rejoin_after_leave: bool,
    /// Mean time between clogs (a node's or a link's messages held for a while, not lost).
    pub clog_every: Option<Duration>,
    /// Mean time between process pauses (a node stops running for up to a few seconds).
    pub pause_every: Option<Duration>,
    /// Mean time between an operator downing a member (`Command::Down`, from another member).
    pub down_every: Option<Duration>,
    /// Mean time between full restarts of the cluster with another number of shards.
    pub full_restart_every: Option<Duration>,
}

impl Faults {
    /// Turns off every recurring fault kind (crashes, partitions, breaks, leaves, joins,
    /// clogs, pauses, operators' downs, full restarts).
    pub fn stop_recurring(&mut self) {
        (
            self.crash_every,
            self.partition_every,
            self.break_every,
            self.leave_every,
            self.join_every,
            self.crash_oldest_every,
            self.clog_every,
            self.pause_every,
            self.down_every,
            self.full_restart_every,
        ) = (None, None, None, None, None, None, None, None, None, None);
    }
}

/// A link slower than the others (a congested or distant path): messages from `from` to `to`
/// take `latency` longer, in order and without loss. Not a fault: graceful operations must
/// not stall because of it.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct SlowLink {
    /// The sending end.
    pub from: shoal_core::NodeId,
    /// The receiving end.
    pub to: shoal_core::NodeId,
    /// The extra latency of every message on it.
    pub latency: Duration,
}

/// One run's settings, per component of the simulator.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The seed everything derives from.
    pub seed: u64,
    /// The scenario family these options come from.
    pub family: Family,
    /// Length of the fault phase (then heal, then the liveness phase).
    pub duration: Duration,
    /// The fault actions; `None` plans them from the seed and the fault rates
    /// ([`Schedule::plan`]).
    pub schedule: Option<Schedule>,
    /// The simulated cluster: its nodes and their settings.
    pub cluster: ClusterOptions,
    /// The network between the nodes.
    pub network: NetworkOptions,
    /// The clients.
    pub workload: WorkloadOptions,
    /// How the host's entities behave.
    pub host: HostOptions,
    /// The nemesis: which faults recur.
    pub faults: Faults,
    /// Remember entities, with a store that fails in the drawn ways (on about half the seeds).
    pub remember: Option<Remember>,
    /// Entities persist their state (event sourced) through the store: each message delivered
    /// is an event appended, after a recovery at the shard's epoch (on about half the seeds).
    pub persist: Option<Persist>,
    /// Reliable producers send a share of the messages, resending until confirmed (on about
    /// half the seeds; drawn from a stream of its own, so every other option stays as it was).
    pub delivery: Option<Delivery>,
    /// Clients send straight to running entities on their member's direct routes (see
    /// `shoal_core::direct`), as the runtime's fast path does (on half the seeds; drawn from a
    /// stream of its own).
    pub direct: Option<Direct>,
    /// Shard leases from a lease store that fails in the drawn ways, with no removal margin
    /// (on about a third of the seeds; drawn from a stream of its own).
    pub lease: Option<Lease>,
}

/// Shard leases (see [`Options::lease`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Lease {
    /// How long a grant lasts.
    pub ttl: Duration,
    /// Share of calls that fail without changing anything.
    pub failure_rate: f64,
    /// Share of calls applied whose answer is lost (the caller hears a timeout).
    pub lost_rate: f64,
    /// Windows `[from, to)` (from the start of the run) in which the store is unreachable.
    pub outages: Vec<(Duration, Duration)>,
    /// Windows in which one node cannot reach the store (the others can): its calls fail.
    pub isolations: Vec<(u64, Duration, Duration)>,
    /// The store grants this share of the ttl asked for: 1 but in the negative control,
    /// whose holders then act past their grant (as holders ignoring expiry would).
    pub store_ttl_factor: f64,
    /// Holders take neither clock drift nor a safety margin off their validity: a negative
    /// control, with clocks that drift.
    pub no_margin: bool,
    /// The type's coordinator holds a lease too, and allocates only while it holds it.
    pub coordinator: bool,
}

impl Lease {
    /// A store without faults, granting what is asked (lease-majority downing's store in a
    /// run without shard leases).
    pub fn faultless() -> Self {
        Self {
            ttl: Duration::from_secs(10),
            failure_rate: 0.0,
            lost_rate: 0.0,
            outages: Vec::new(),
            isolations: Vec::new(),
            store_ttl_factor: 1.0,
            no_margin: false,
            coordinator: false,
        }
    }

    /// Whether every call succeeds and is answered.
    pub fn is_faultless(&self) -> bool {
        self.failure_rate == 0.0
            && self.lost_rate == 0.0
            && self.outages.is_empty()
            && self.isolations.is_empty()
    }

    /// The terms a holder uses with these options, on a host whose forced stops take up to
    /// `forced_stop`: the safety margin covers the longest pause a process takes and a forced
    /// stop after it (a holder paused as its validity ends must still have stopped its
    /// entities before its grant expires).
    pub fn terms(&self, forced_stop: Duration) -> shoal_core::lease::LeaseTerms {
        let (max_drift_ppm, safety_margin) = if self.no_margin {
            (0, Duration::ZERO)
        } else {
            // The simulator's clocks drift by up to 1,000 ppm.
            let margin = crate::schedule::MAX_PAUSE + forced_stop + Duration::from_millis(20);
            (1_000, margin)
        };
        shoal_core::lease::LeaseTerms {
            ttl: self.ttl,
            renew_every: self.ttl / 5,
            max_drift_ppm,
            safety_margin,
            retry_interval: Duration::from_millis(500),
            operation_timeout: Duration::from_secs(1),
        }
    }

    /// Draws a lease store's behaviour for a run of `duration`.
    pub(crate) fn draw(r: &mut crate::rng::SimRng, duration: Duration) -> Self {
        let outages = if r.chance(0.3) {
            let from = Duration::from_millis(r.range(0, duration.as_millis() as u64));
            // Some outlast the ttl: every holder loses its leases, and gets them back after.
            let lasts = Duration::from_millis(r.range(200, 20_000));
            vec![(from, from + lasts)]
        } else {
            Vec::new()
        };
        let mut lease = Self {
            // Longer than the safety margin (the longest pause, 4 s, and the slowest forced
            // stop, 2 s) and a renewal interval together, with room for a failed renewal.
            ttl: Duration::from_millis(r.range(10_000, 16_000)),
            failure_rate: if r.chance(0.5) { r.unit() * 0.2 } else { 0.0 },
            lost_rate: if r.chance(0.3) { r.unit() * 0.05 } else { 0.0 },
            outages,
            isolations: Vec::new(),
            store_ttl_factor: 1.0,
            no_margin: false,
            coordinator: false,
        };
        // A node cut off from the store (not from the cluster) loses its leases, and its
        // shards wait until it is back.
        lease.isolations = (0..r.range(0, 3))
            .map(|_| {
                let node = r.range(1, 4);
                let from = Duration::from_millis(r.range(0, duration.as_millis() as u64));
                let lasts = Duration::from_millis(r.range(1_000, 25_000));
                (node, from, from + lasts)
            })
            .collect();
        // Drawn last: the stream's earlier draws stay what they were before it existed.
        lease.coordinator = r.chance(0.5);
        lease
    }
}

/// Reliable delivery (see [`Options::delivery`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Delivery {
    /// Reliable producers, each on a node of its own (the first ones).
    pub producers: u64,
    /// The share of client messages a producer sends instead of a plain tell.
    pub share: f64,
    /// Entities drop a message their marks say was applied: off only in the negative control,
    /// which the checks must catch.
    pub suppress_duplicates: bool,
}

/// The host's direct routes (see [`Options::direct`]).
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub struct Direct {
    /// A rule deliberately broken: a negative control the checks must catch.
    pub fault: Option<DirectFault>,
}

/// The negative controls of direct routes.
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub enum DirectFault {
    /// A route opens even when the host's letter was buffered or forwarded, not handed over:
    /// a direct letter overtakes it.
    OpenUndrained,
    /// Starts and stops leave routes open: direct letters reach an incarnation told to stop.
    KeepAfterStop,
    /// Links' readers never report the numbers they consumed: the node accepts a copy of a
    /// letter a reader delivered itself.
    SkipReport,
}

/// Persistent entities (see [`Options::persist`]).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Persist {
    /// A snapshot with every this many events.
    pub snapshot_every: u64,
    /// Appends skip the epoch condition: a negative control, which the checks must catch.
    pub unfenced: bool,
}

/// The simulated cluster: its nodes, their sharding and membership settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterOptions {
    /// Nodes at the start.
    pub nodes: u64,
    /// Joins stop adding nodes beyond this many addresses.
    pub max_nodes: u64,
    /// Shards of the entity type.
    pub shards: u32,
    /// Where membership comes from.
    pub membership: MembershipMode,
    /// The downing strategy.
    pub downing: Downing,
    /// Longest delay before a node learns of a membership or reachability change (the
    /// oracle's).
    pub detection_delay: Duration,
    /// Run with the production defaults (Akka's: 20 s stable-after and down-removal-margin,
    /// 60 s handoff timeout) instead of the simulation's shortened timers.
    pub default_timers: bool,
    /// Timers much shorter than the simulation's usual ones, if drawn: handoffs time out while
    /// acknowledgements and stops are still on their way, `HostShard` is resent while the
    /// first is in flight, and rebalancing runs often. Legal settings that widen the race
    /// windows the defaults leave narrow.
    pub tight_timers: Option<TightTimers>,
    /// Negative control: run the core with its coordinator gate deliberately broken.
    pub broken_coordinator: bool,
    /// Each region's buffer cap (`buffer_size`); small caps make buffers overflow.
    pub buffer_size: usize,
    /// A member that runs no entity type (a node built for another purpose, or not yet
    /// updated in a rolling deployment): it must neither hold allocation back nor be chosen
    /// to run a coordinator, even as the oldest member.
    pub bystander: Option<shoal_core::NodeId>,
    /// The allocation strategy (least-shard on most seeds; consistent hashing or the
    /// external strategy with `SetShardLocation` commands on some).
    pub allocation: AllocationStrategyConfig,
    /// `min_registered_regions`: 2 on some seeds (leaves always keep two hosting members, and
    /// crashed or downed ones come back), so allocation waits for a second region.
    pub min_registered_regions: usize,
    /// Maximum clock drift per node, in parts per million.
    pub drift_ppm: u32,
    /// The type's active-entity limit per region, if any (the active-limit family).
    pub active_entity_limit: Option<shoal_core::passivation::ActiveEntityLimit>,
}

/// The network between the nodes.
#[derive(Clone, Debug, PartialEq)]
pub struct NetworkOptions {
    /// One link slower than the others, if any.
    pub slow_link: Option<SlowLink>,
    /// Share of messages that take 0.5–2 s longer than usual (0.1 % by default): with tight
    /// timers, acknowledgements miss the handoff deadline and arrive in a later round.
    pub long_tail: f64,
    /// Each host's outbound queue to a peer holds at most this many envelopes of application
    /// traffic on their way (a clog or a slow link fills it); the rest are refused and
    /// dead-lettered (`Input::OutboundQueueFull`). `None`: unbounded.
    pub outbound_cap: Option<usize>,
    /// Control traffic (membership) may overtake data on a link, each lane FIFO on its own,
    /// as the runtime's transport does (on most seeds); otherwise one FIFO per link.
    pub lanes: bool,
    /// Probability that the network delivers a message twice (the core must drop the copy).
    pub duplicate: f64,
    /// A coordinator's acknowledgements of registrations take this much longer, if set (and
    /// what follows them on the link waits behind them): regions send their registrations
    /// again while the allocations that follow are on their way to them.
    pub slow_register_acks: Option<Duration>,
}

/// The clients.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadOptions {
    /// Distinct entities the workload addresses (Zipf-distributed).
    pub entities: u32,
    /// Mean time between client messages, cluster-wide.
    pub message_every: Duration,
    /// Probability that a client message comes with a `StartEntity` command for some entity
    /// (answered once it runs, or with the reason it could not).
    pub start_entity: f64,
    /// Probability that a client message comes with a query (`GetEntityLocation`,
    /// `GetClusterShardingStats`, and `SetShardLocation` under the external strategy) whose
    /// answer is checked.
    pub queries: f64,
    /// Whether some location queries are `Explain` instead, whose decisions are checked
    /// against what happened (off in drawn runs; tests turn it on).
    pub explain: ExplainQueries,
}

/// `Explain` queries in a run, and the negative control of their check.
#[derive(Clone, Copy, Debug, Default, Eq, PartialEq)]
pub enum ExplainQueries {
    /// None.
    #[default]
    Off,
    /// Half of the location queries, their answers checked.
    On,
    /// As `On`, with each answer's newest decision dropped before the check (the negative
    /// control: the check must find an allocation or a dead letter missing).
    DropNewest,
}

/// How the host's entities behave; zero means never.
#[derive(Clone, Debug, PartialEq)]
pub struct HostOptions {
    /// Probability that an entity ignores a graceful stop (it is force-stopped later).
    pub ignore_stop: f64,
    /// Probability that an entity passivates itself after a message.
    pub passivate: f64,
    /// Longest time an entity takes to stop.
    pub slow_stop: Duration,
    /// Longest time a forced stop takes to end the entity (an abort waits for the entity to
    /// reach a point where it can be stopped).
    pub forced_stop: Duration,
    /// Probability that an entity stops on its own after a message (no passivation: it just
    /// ends, and the next message starts a new incarnation).
    pub self_stop: f64,
    /// Share of deliveries an entity answers with a reply to the sending member (an ask's
    /// reply, through `Input::SendApp`); 0 on half the seeds.
    pub asks: f64,
    /// Entities' bounded mailboxes, if drawn: a message finding one full is dead-lettered
    /// (`Input::MailboxFull`).
    pub mailbox: Option<Mailbox>,
}

/// Remembering entities and its store's faults (see [`Options::remember`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Remember {
    /// How a shard restarts its remembered entities.
    pub recovery: shoal_core::RecoveryStrategy,
    /// Share of store requests that fail without changing anything.
    pub failure_rate: f64,
    /// Share of store requests whose change is applied but whose caller hears a timeout (the
    /// write may land after a newer one).
    pub timeout_rate: f64,
    /// Share of store requests that take 50–500 ms instead of 1–5 ms.
    pub tail_rate: f64,
    /// Windows `(start, length)` from the start of the run in which the store is unavailable.
    /// One may outlast the fault phase; one that would begin after it (at or past `duration`)
    /// never happens, since healing ends every fault.
    pub outages: Vec<(Duration, Duration)>,
    /// Half the leaves and oldest-member crashes come with an outage around them (see
    /// `Act::StoreOutage`); off in kept regressions planned before these existed.
    pub outages_around_moves: bool,
}

/// An entity's mailbox in the simulated host (see [`HostOptions::mailbox`]).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Mailbox {
    /// Messages it holds, the one being handled included.
    pub capacity: u32,
    /// How long the entity takes to handle one message.
    pub service: Duration,
}

/// Shortened coordinator timers (see [`ClusterOptions::tight_timers`]).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct TightTimers {
    /// `handoff_timeout` (and so the entities' stop deadline during a handoff).
    pub handoff_timeout: Duration,
    /// `shard_start_timeout`: how soon an unacknowledged `HostShard` is resent.
    pub shard_start_timeout: Duration,
    /// `rebalance_interval`.
    pub rebalance_interval: Duration,
}
