//! What one run does. Every option is drawn from the seed (swarm testing: each fault kind is
//! switched on or off per seed, with a random intensity), or forced by the caller.

use std::fmt;
use std::time::Duration;

use shoal_core::AllocationStrategyConfig;

use crate::rng::{SimRng, Stream};
use crate::schedule::Schedule;

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
}

impl Family {
    /// Every family, in the order the default batch cycles through them.
    pub const ALL: [Self; 10] = [
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
    ];

    /// The family the default batch, `sweep` and `replay` use for `seed`.
    pub fn of_seed(seed: u64) -> Self {
        Self::ALL[(seed % Self::ALL.len() as u64) as usize]
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
}

/// Fault kinds and their intensity; zero or `false` means off.
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
    /// Maximum clock drift per node, in parts per million.
    pub drift_ppm: u32,
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
    /// Mean time between clogs (a node's or a link's messages held for a while, not lost).
    pub clog_every: Option<Duration>,
    /// Mean time between process pauses (a node stops running for up to a few seconds).
    pub pause_every: Option<Duration>,
    /// Probability that the network delivers a message twice (the core must drop the copy).
    pub duplicate: f64,
    /// Mean time between an operator downing a member (`Command::Down`, from another member).
    pub down_every: Option<Duration>,
}

impl Faults {
    /// Turns off every recurring fault kind (crashes, partitions, breaks, leaves, joins,
    /// clogs, pauses), leaving the entity and network behaviour as is.
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
        ) = (None, None, None, None, None, None, None, None, None);
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

/// One run's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// The seed everything derives from.
    pub seed: u64,
    /// Nodes at the start.
    pub nodes: u64,
    /// Joins stop adding nodes beyond this many addresses.
    pub max_nodes: u64,
    /// Distinct entities the workload addresses (Zipf-distributed).
    pub entities: u32,
    /// Shards of the entity type.
    pub shards: u32,
    /// Length of the fault phase (then heal, then the liveness phase).
    pub duration: Duration,
    /// Mean time between client messages, cluster-wide.
    pub message_every: Duration,
    /// Fault kinds.
    pub faults: Faults,
    /// The downing strategy.
    pub downing: Downing,
    /// Where membership comes from.
    pub membership: MembershipMode,
    /// Run with the production defaults (Akka's: 20 s stable-after and down-removal-margin,
    /// 60 s handoff timeout) instead of the simulation's shortened timers.
    pub default_timers: bool,
    /// Negative control: run the core with its coordinator gate deliberately broken.
    pub broken_coordinator: bool,
    /// The scenario family these options come from.
    pub family: Family,
    /// Longest delay before a node learns of a membership or reachability change.
    pub detection_delay: Duration,
    /// Each region's buffer cap (`buffer_size`); small caps make buffers overflow.
    pub buffer_size: usize,
    /// The fault actions; `None` plans them from the seed and the fault rates
    /// ([`Schedule::plan`]).
    pub schedule: Option<Schedule>,
    /// One link slower than the others, if any.
    pub slow_link: Option<SlowLink>,
    /// A member that runs no entity type (a node built for another purpose, or not yet
    /// updated in a rolling deployment): it must neither hold allocation back nor be chosen
    /// to run a coordinator, even as the oldest member.
    pub bystander: Option<shoal_core::NodeId>,
    /// Probability that a client message comes with a `StartEntity` command for some entity
    /// (answered once it runs, or with the reason it could not).
    pub start_entity: f64,
    /// Timers much shorter than the simulation's usual ones, if drawn: handoffs time out while
    /// acknowledgements and stops are still on their way, `HostShard` is resent while the
    /// first is in flight, and rebalancing runs often. Legal settings that widen the race
    /// windows the defaults leave narrow.
    pub tight_timers: Option<TightTimers>,
    /// Share of messages that take 0.5–2 s longer than usual (0.1 % by default): with tight
    /// timers, acknowledgements miss the handoff deadline and arrive in a later round.
    pub long_tail: f64,
    /// Share of deliveries an entity answers with a reply to the sending member (an ask's
    /// reply, through `Input::SendApp`); 0 on half the seeds.
    pub asks: f64,
    /// The allocation strategy (least-shard on most seeds; consistent hashing or the
    /// external strategy with `SetShardLocation` commands on some).
    pub allocation: AllocationStrategyConfig,
    /// Probability that a client message comes with a query (`GetEntityLocation`,
    /// `GetClusterShardingStats`, and `SetShardLocation` under the external strategy) whose
    /// answer is checked.
    pub queries: f64,
    /// Each host's outbound queue to a peer holds at most this many envelopes of application
    /// traffic on their way (a clog or a slow link fills it); the rest are refused and
    /// dead-lettered (`Input::OutboundQueueFull`). `None`: unbounded.
    pub outbound_cap: Option<usize>,
    /// Entities' bounded mailboxes, if drawn: a message finding one full is dead-lettered
    /// (`Input::MailboxFull`).
    pub mailbox: Option<Mailbox>,
    /// `min_registered_regions`: 2 on some seeds (leaves always keep two hosting members, and
    /// crashed or downed ones come back), so allocation waits for a second region.
    pub min_registered_regions: usize,
    /// Control traffic (membership) may overtake data on a link, each lane FIFO on its own,
    /// as the runtime's transport does (on most seeds); otherwise one FIFO per link.
    pub lanes: bool,
    /// Remember entities, with a store that fails in the drawn ways (on about half the seeds).
    pub remember: Option<Remember>,
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
    pub outages: Vec<(Duration, Duration)>,
}

/// An entity's mailbox in the simulated host (see [`Options::mailbox`]).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct Mailbox {
    /// Messages it holds, the one being handled included.
    pub capacity: u32,
    /// How long the entity takes to handle one message.
    pub service: Duration,
}

/// Shortened coordinator timers (see [`Options::tight_timers`]).
#[derive(Clone, Copy, Debug, Eq, PartialEq)]
pub struct TightTimers {
    /// `handoff_timeout` (and so the entities' stop deadline during a handoff).
    pub handoff_timeout: Duration,
    /// `shard_start_timeout`: how soon an unacknowledged `HostShard` is resent.
    pub shard_start_timeout: Duration,
    /// `rebalance_interval`.
    pub rebalance_interval: Duration,
}

impl Options {
    /// Options drawn from `seed`.
    pub fn from_seed(seed: u64) -> Self {
        let mut r = SimRng::of(seed, Stream::Options);
        let every = |r: &mut SimRng, on: f64, lo: u64, hi: u64| {
            r.chance(on).then(|| Duration::from_secs(r.range(lo, hi)))
        };
        let faults = Faults {
            crash_every: every(&mut r, 0.3, 20, 90),
            partition_every: every(&mut r, 0.3, 30, 120),
            break_every: every(&mut r, 0.3, 5, 40),
            leave_every: every(&mut r, 0.3, 20, 90),
            join_every: every(&mut r, 0.3, 15, 60),
            crash_oldest_every: None,
            rejoin_after_leave: false,
            drift_ppm: if r.chance(0.5) {
                r.range(1, 1000) as u32
            } else {
                0
            },
            ignore_stop: if r.chance(0.3) { r.unit() * 0.3 } else { 0.0 },
            passivate: if r.chance(0.4) { r.unit() * 0.05 } else { 0.0 },
            slow_stop: Duration::from_millis(r.range(1, 3000)),
            clog_every: every(&mut r, 0.3, 5, 40),
            pause_every: every(&mut r, 0.2, 10, 60),
            duplicate: if r.chance(0.2) { r.unit() * 0.05 } else { 0.0 },
            down_every: None,
            forced_stop: Duration::from_millis(1),
            self_stop: 0.0,
        };
        let nodes = r.range(3, 7);
        let mut o = Self {
            seed,
            nodes,
            max_nodes: 12,
            entities: r.range(20, 300) as u32,
            shards: r.range(8, 64) as u32,
            duration: Duration::from_secs(r.range(60, 240)),
            message_every: Duration::from_millis(r.range(5, 50)),
            faults,
            downing: Downing::KeepMajority,
            membership: MembershipMode::Real,
            default_timers: false,
            broken_coordinator: false,
            family: Family::Swarm,
            detection_delay: Duration::from_millis(r.range(100, 3000)),
            // Usually Akka's default, sometimes small enough to overflow during a partition.
            buffer_size: if r.chance(0.2) {
                r.range(20, 500) as usize
            } else {
                100_000
            },
            schedule: None,
            slow_link: None,
            bystander: None,
            start_entity: 0.0,
            tight_timers: None,
            long_tail: 0.001,
            asks: 0.0,
            allocation: AllocationStrategyConfig::default(),
            queries: 0.0,
            outbound_cap: None,
            mailbox: None,
            min_registered_regions: 1,
            lanes: false,
            remember: None,
        };
        // Drawn last, so that the draws above stay what they were for every seed. The first
        // node is usually the oldest (the coordinator's), so the slow link often leads there:
        // what a region tells its coordinator arrives late.
        if r.chance(0.3) {
            let from = shoal_core::NodeId(r.range(2, o.nodes));
            let to = if r.chance(0.5) {
                shoal_core::NodeId(1)
            } else {
                shoal_core::NodeId(r.range(1, o.nodes))
            };
            let latency = Duration::from_millis(r.range(500, 3_000));
            o.slow_link = (from != to).then_some(SlowLink { from, to, latency });
        }
        // Usually the first node: the oldest member, where a coordinator would run if it
        // hosted the type.
        if r.chance(0.15) {
            let first = r.chance(0.5);
            let node = r.range(1, o.nodes);
            o.bystander = Some(shoal_core::NodeId(if first { 1 } else { node }));
        }
        o.faults.down_every = every(&mut r, 0.15, 30, 120);
        if r.chance(0.3) {
            o.faults.forced_stop = Duration::from_millis(r.range(2, 2_000));
        }
        if r.chance(0.2) {
            o.faults.self_stop = r.unit() * 0.02;
        }
        if r.chance(0.5) {
            o.start_entity = 0.01 + r.unit() * 0.04;
        }
        if r.chance(0.25) {
            let ms = |r: &mut SimRng, lo, hi| Duration::from_millis(r.range(lo, hi));
            // Acknowledgements must usually make it in time, or no handoff ever completes (a
            // configuration error, not a protocol one): they cross the slow link at most twice.
            let slow = o.slow_link.map_or(Duration::ZERO, |l| l.latency);
            let handoff_timeout = ms(&mut r, 1_000, 8_000).max(slow * 2 + Duration::from_secs(1));
            o.tight_timers = Some(TightTimers {
                handoff_timeout,
                shard_start_timeout: ms(&mut r, 100, 2_000),
                rebalance_interval: ms(&mut r, 1_000, 5_000),
            });
        }
        if r.chance(0.3) {
            o.long_tail = 0.002 + r.unit() * 0.02;
        }
        if r.chance(0.5) {
            o.asks = 0.05 + r.unit() * 0.95;
        }
        let strategy = r.unit();
        if strategy < 0.15 {
            o.allocation = AllocationStrategyConfig::External;
        } else if strategy < 0.3 {
            // Unlimited, or enough per round to converge well within the rebalance deadline.
            let limits = [0, 5, 20];
            o.allocation = AllocationStrategyConfig::ConsistentHashing {
                rebalance_limit: *r.pick(&limits),
            };
        }
        if r.chance(0.5) {
            o.queries = 0.01 + r.unit() * 0.04;
        }
        if r.chance(0.2) {
            o.outbound_cap = Some(r.range(2, 60) as usize);
        }
        if r.chance(0.2) {
            o.mailbox = Some(Mailbox {
                capacity: r.range(1, 16) as u32,
                service: Duration::from_millis(r.range(1, 30)),
            });
        }
        if r.chance(0.2) {
            o.min_registered_regions = 2;
        }
        o.lanes = r.chance(0.8);
        if r.chance(0.5) {
            o.remember = Some(Remember::draw(&mut r, o.duration));
        }
        o
    }

    /// These options with the knobs the generator grew later switched off (tight timers, a
    /// heavier latency tail, asks, other allocation strategies, queries, bounded queues, a
    /// second region before allocation, a control lane): what kept regressions and the failover measurement
    /// replay, so that their runs do not drift as the generator grows.
    pub fn without_extras(self) -> Self {
        Self {
            tight_timers: None,
            long_tail: 0.001,
            asks: 0.0,
            allocation: AllocationStrategyConfig::default(),
            queries: 0.0,
            outbound_cap: None,
            mailbox: None,
            min_registered_regions: 1,
            lanes: false,
            remember: None,
            ..self
        }
    }

    /// The options of `seed` in the default batch (families in turn, by seed).
    pub fn for_seed(seed: u64) -> Self {
        Self::for_family(seed, Family::of_seed(seed))
    }

    /// Options of `seed` shaped by `family`.
    pub fn for_family(seed: u64, family: Family) -> Self {
        let mut o = Self::from_seed(seed);
        o.family = family;
        if family == Family::Swarm {
            return o;
        }
        let secs = Duration::from_secs;
        let f = &mut o.faults;
        f.stop_recurring();
        f.duplicate = 0.0;
        f.passivate = 0.0;
        f.ignore_stop = 0.0;
        let mut nodes = o.nodes;
        match family {
            Family::Swarm | Family::Steady => {}
            Family::RollingRestart => {
                f.leave_every = Some(secs(15));
                f.rejoin_after_leave = true;
            }
            Family::ScaleOut => {
                nodes = 3;
                o.max_nodes = 7;
                f.join_every = Some(secs(15));
            }
            Family::ScaleIn => {
                nodes = 7;
                f.leave_every = Some(secs(20));
            }
            Family::Partitions => f.partition_every = Some(secs(30)),
            Family::CoordinatorCrash => f.crash_oldest_every = Some(secs(40)),
            Family::FlappingLinks => {
                f.break_every = Some(secs(3));
                f.partition_every = Some(secs(15));
                f.clog_every = Some(secs(5));
            }
            Family::MassPassivation => {
                f.passivate = 0.2;
                f.ignore_stop = 0.2;
            }
            Family::MassShutdown => {
                nodes = 7;
                f.leave_every = Some(secs(4));
            }
        }
        o.nodes = nodes;
        o.slow_link = o.slow_link.filter(|l| l.from.0 <= nodes && l.to.0 <= nodes);
        o.bystander = o.bystander.filter(|b| b.0 <= nodes);
        o
    }
}

impl Remember {
    /// Draws remembering's settings and store faults for a fault phase of `duration`.
    fn draw(r: &mut SimRng, duration: Duration) -> Self {
        let recovery = if r.chance(0.5) {
            shoal_core::RecoveryStrategy::AllAtOnce
        } else {
            shoal_core::RecoveryStrategy::Constant {
                number: r.range(1, 10) as usize,
                every: Duration::from_millis(r.range(20, 500)),
            }
        };
        let rate =
            |r: &mut SimRng, on: f64, max: f64| if r.chance(on) { r.unit() * max } else { 0.0 };
        let failure_rate = rate(r, 0.4, 0.2);
        let timeout_rate = rate(r, 0.3, 0.05);
        let tail_rate = rate(r, 0.3, 0.2);
        let mut outages = Vec::new();
        if r.chance(0.4) {
            for _ in 0..r.range(1, 3) {
                let start = r.duration(Duration::from_secs(5), duration);
                let length = r.duration(Duration::from_secs(1), Duration::from_secs(20));
                outages.push((start, length));
            }
        }
        Self {
            recovery,
            failure_rate,
            timeout_rate,
            tail_rate,
            outages,
        }
    }
}

impl fmt::Display for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on = |d: Option<Duration>| {
            d.map_or_else(|| "off".to_owned(), |d| format!("every ~{}s", d.as_secs()))
        };
        write!(
            f,
            "family={} membership={:?} nodes={} max_nodes={} entities={} shards={} duration={}s message_every={}ms downing={:?} detection<={}ms buffer={} crash={} crash_oldest={} partition={} break={} leave={} join={} clog={} pause={} duplicate={:.3} drift={}ppm ignore_stop={:.2} passivate={:.3} slow_stop={}ms",
            self.family.name(),
            self.membership,
            self.nodes,
            self.max_nodes,
            self.entities,
            self.shards,
            self.duration.as_secs(),
            self.message_every.as_millis(),
            self.downing,
            self.detection_delay.as_millis(),
            self.buffer_size,
            on(self.faults.crash_every),
            on(self.faults.crash_oldest_every),
            on(self.faults.partition_every),
            on(self.faults.break_every),
            on(self.faults.leave_every),
            on(self.faults.join_every),
            on(self.faults.clog_every),
            on(self.faults.pause_every),
            self.faults.duplicate,
            self.faults.drift_ppm,
            self.faults.ignore_stop,
            self.faults.passivate,
            self.faults.slow_stop.as_millis(),
        )?;
        if let Some(l) = self.slow_link {
            write!(
                f,
                " slow_link={}->{}+{}ms",
                l.from,
                l.to,
                l.latency.as_millis()
            )?;
        }
        if let Some(b) = self.bystander {
            write!(f, " bystander={b}")?;
        }
        if let Some(d) = self.faults.down_every {
            write!(f, " down=every ~{}s", d.as_secs())?;
        }
        if self.start_entity > 0.0 {
            write!(f, " start_entity={:.3}", self.start_entity)?;
        }
        if self.faults.forced_stop > Duration::from_millis(1) {
            write!(f, " forced_stop={}ms", self.faults.forced_stop.as_millis())?;
        }
        if self.faults.self_stop > 0.0 {
            write!(f, " self_stop={:.3}", self.faults.self_stop)?;
        }
        if self.asks > 0.0 {
            write!(f, " asks={:.2}", self.asks)?;
        }
        if self.allocation != AllocationStrategyConfig::default() {
            write!(f, " allocation={:?}", self.allocation)?;
        }
        if self.queries > 0.0 {
            write!(f, " queries={:.3}", self.queries)?;
        }
        if let Some(cap) = self.outbound_cap {
            write!(f, " outbound_cap={cap}")?;
        }
        if self.lanes {
            write!(f, " lanes")?;
        }
        if self.min_registered_regions != 1 {
            write!(f, " min_registered_regions={}", self.min_registered_regions)?;
        }
        if let Some(m) = self.mailbox {
            write!(f, " mailbox={}x{}ms", m.capacity, m.service.as_millis())?;
        }
        if self.long_tail != 0.001 {
            write!(f, " long_tail={:.4}", self.long_tail)?;
        }
        if let Some(m) = &self.remember {
            write!(
                f,
                " remember={:?},fail:{:.3},timeout:{:.3},tail:{:.3},outages:{}",
                m.recovery,
                m.failure_rate,
                m.timeout_rate,
                m.tail_rate,
                m.outages.len()
            )?;
        }
        if let Some(t) = self.tight_timers {
            write!(
                f,
                " tight_timers=handoff:{}ms,start:{}ms,rebalance:{}ms",
                t.handoff_timeout.as_millis(),
                t.shard_start_timeout.as_millis(),
                t.rebalance_interval.as_millis()
            )?;
        }
        Ok(())
    }
}
