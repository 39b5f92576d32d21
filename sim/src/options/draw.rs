//! Options drawn from a seed (swarm testing: each fault kind switched on or off per seed, with
//! a random intensity), and shaped by a scenario family.

use std::time::Duration;

use shoal_core::AllocationStrategyConfig;

use super::{
    ClusterOptions, Delivery, Direct, Downing, ExplainQueries, Family, Faults, HostOptions,
    Mailbox, MembershipMode, NetworkOptions, Options, Persist, Remember, SlowLink, TightTimers,
    WorkloadOptions,
};
use crate::rng::{SimRng, Stream};

impl Options {
    /// Options drawn from `seed`.
    pub fn from_seed(seed: u64) -> Self {
        let mut r = SimRng::of(seed, Stream::Options);
        let every = |r: &mut SimRng, on: f64, lo: u64, hi: u64| {
            r.chance(on).then(|| Duration::from_secs(r.range(lo, hi)))
        };
        // The draws keep the order they had when every option was one flat list, so each
        // seed draws what it always did.
        let crash_every = every(&mut r, 0.3, 20, 90);
        let partition_every = every(&mut r, 0.3, 30, 120);
        let break_every = every(&mut r, 0.3, 5, 40);
        let leave_every = every(&mut r, 0.3, 20, 90);
        let join_every = every(&mut r, 0.3, 15, 60);
        let drift_ppm = if r.chance(0.5) {
            r.range(1, 1000) as u32
        } else {
            0
        };
        let ignore_stop = if r.chance(0.3) { r.unit() * 0.3 } else { 0.0 };
        let passivate = if r.chance(0.4) { r.unit() * 0.05 } else { 0.0 };
        let slow_stop = Duration::from_millis(r.range(1, 3000));
        let clog_every = every(&mut r, 0.3, 5, 40);
        let pause_every = every(&mut r, 0.2, 10, 60);
        let duplicate = if r.chance(0.2) { r.unit() * 0.05 } else { 0.0 };
        let nodes = r.range(3, 7);
        let entities = r.range(20, 300) as u32;
        let shards = r.range(8, 64) as u32;
        let duration = Duration::from_secs(r.range(60, 240));
        let message_every = Duration::from_millis(r.range(5, 50));
        let detection_delay = Duration::from_millis(r.range(100, 3000));
        // Usually Akka's default, sometimes small enough to overflow during a partition.
        let buffer_size = if r.chance(0.2) {
            r.range(20, 500) as usize
        } else {
            100_000
        };
        let mut o = Self {
            seed,
            family: Family::Swarm,
            duration,
            schedule: None,
            cluster: ClusterOptions {
                nodes,
                max_nodes: 12,
                shards,
                membership: MembershipMode::Real,
                downing: Downing::KeepMajority,
                detection_delay,
                default_timers: false,
                tight_timers: None,
                broken_coordinator: false,
                buffer_size,
                bystander: None,
                allocation: AllocationStrategyConfig::default(),
                min_registered_regions: 1,
                drift_ppm,
                active_entity_limit: None,
            },
            network: NetworkOptions {
                slow_link: None,
                long_tail: 0.001,
                outbound_cap: None,
                lanes: false,
                duplicate,
                slow_register_acks: None,
            },
            workload: WorkloadOptions {
                entities,
                message_every,
                start_entity: 0.0,
                queries: 0.0,
                explain: ExplainQueries::Off,
            },
            host: HostOptions {
                ignore_stop,
                passivate,
                slow_stop,
                forced_stop: Duration::from_millis(1),
                self_stop: 0.0,
                asks: 0.0,
                mailbox: None,
            },
            faults: Faults {
                crash_every,
                partition_every,
                break_every,
                leave_every,
                join_every,
                crash_oldest_every: None,
                rejoin_after_leave: false,
                clog_every,
                pause_every,
                down_every: None,
                full_restart_every: None,
            },
            remember: None,
            persist: None,
            delivery: None,
            lease: None,
            direct: None,
        };
        // Drawn last, so that the draws above stay what they were for every seed. The first
        // node is usually the oldest (the coordinator's), so the slow link often leads there:
        // what a region tells its coordinator arrives late.
        if r.chance(0.3) {
            let from = shoal_core::NodeId(r.range(2, o.cluster.nodes));
            let to = if r.chance(0.5) {
                shoal_core::NodeId(1)
            } else {
                shoal_core::NodeId(r.range(1, o.cluster.nodes))
            };
            let latency = Duration::from_millis(r.range(500, 3_000));
            o.network.slow_link = (from != to).then_some(SlowLink { from, to, latency });
        }
        // Usually the first node: the oldest member, where a coordinator would run if it
        // hosted the type.
        if r.chance(0.15) {
            let first = r.chance(0.5);
            let node = r.range(1, o.cluster.nodes);
            o.cluster.bystander = Some(shoal_core::NodeId(if first { 1 } else { node }));
        }
        o.faults.down_every = every(&mut r, 0.15, 30, 120);
        if r.chance(0.3) {
            o.host.forced_stop = Duration::from_millis(r.range(2, 2_000));
        }
        if r.chance(0.2) {
            o.host.self_stop = r.unit() * 0.02;
        }
        if r.chance(0.5) {
            o.workload.start_entity = 0.01 + r.unit() * 0.04;
        }
        if r.chance(0.25) {
            let ms = |r: &mut SimRng, lo, hi| Duration::from_millis(r.range(lo, hi));
            // Acknowledgements must usually make it in time, or no handoff ever completes (a
            // configuration error, not a protocol one): they cross the slow link at most twice.
            let slow = o.network.slow_link.map_or(Duration::ZERO, |l| l.latency);
            let handoff_timeout = ms(&mut r, 1_000, 8_000).max(slow * 2 + Duration::from_secs(1));
            o.cluster.tight_timers = Some(TightTimers {
                handoff_timeout,
                shard_start_timeout: ms(&mut r, 100, 2_000),
                rebalance_interval: ms(&mut r, 1_000, 5_000),
            });
        }
        if r.chance(0.3) {
            o.network.long_tail = 0.002 + r.unit() * 0.02;
        }
        if r.chance(0.5) {
            o.host.asks = 0.05 + r.unit() * 0.95;
        }
        let strategy = r.unit();
        if strategy < 0.15 {
            o.cluster.allocation = AllocationStrategyConfig::External;
        } else if strategy < 0.3 {
            // Unlimited, or enough per round to converge well within the rebalance deadline.
            let limits = [0, 5, 20];
            o.cluster.allocation = AllocationStrategyConfig::ConsistentHashing {
                rebalance_limit: *r.pick(&limits),
            };
        }
        if r.chance(0.5) {
            o.workload.queries = 0.01 + r.unit() * 0.04;
        }
        if r.chance(0.2) {
            o.network.outbound_cap = Some(r.range(2, 60) as usize);
        }
        if r.chance(0.2) {
            o.host.mailbox = Some(Mailbox {
                capacity: r.range(1, 16) as u32,
                service: Duration::from_millis(r.range(1, 30)),
            });
        }
        if r.chance(0.2) {
            o.cluster.min_registered_regions = 2;
        }
        o.network.lanes = r.chance(0.8);
        if r.chance(0.5) {
            o.remember = Some(Remember::draw(&mut r, o.duration));
        }
        if r.chance(0.25) {
            o.network.slow_register_acks = Some(Duration::from_millis(r.range(300, 1_500)));
        }
        if r.chance(0.5) {
            o.persist = Some(Persist {
                snapshot_every: r.range(2, 20),
                unfenced: false,
            });
        }
        let mut d = SimRng::of(seed, Stream::Delivery);
        if d.chance(0.5) {
            o.delivery = Some(Delivery {
                producers: d.range(1, 4).min(o.cluster.nodes),
                share: 0.1 + d.unit() * 0.4,
                suppress_duplicates: true,
            });
        }
        let mut l = SimRng::of(seed, Stream::Lease);
        if l.chance(0.3) {
            o.lease = Some(crate::options::Lease::draw(&mut l, o.duration));
        }
        if SimRng::of(seed, Stream::Direct).chance(0.5) {
            o.direct = Some(Direct::default());
        }
        o
    }

    /// These options with the knobs the generator grew later switched off (tight timers, a
    /// heavier latency tail, asks, other allocation strategies, queries, bounded queues, a
    /// second region before allocation, a control lane, direct routes): what kept regressions and the failover measurement
    /// replay, so that their runs do not drift as the generator grows.
    pub fn without_extras(self) -> Self {
        Self {
            cluster: ClusterOptions {
                tight_timers: None,
                allocation: AllocationStrategyConfig::default(),
                min_registered_regions: 1,
                ..self.cluster
            },
            network: NetworkOptions {
                long_tail: 0.001,
                outbound_cap: None,
                lanes: false,
                slow_register_acks: None,
                ..self.network
            },
            workload: WorkloadOptions {
                queries: 0.0,
                explain: ExplainQueries::Off,
                ..self.workload
            },
            host: HostOptions {
                asks: 0.0,
                mailbox: None,
                ..self.host
            },
            remember: None,
            persist: None,
            delivery: None,
            lease: None,
            direct: None,
            ..self
        }
        .before_strategies()
    }

    /// These options with the split brain resolver keeping the majority, as before the other
    /// strategies were drawn (the unsafe auto-down of a negative control stays).
    pub fn before_strategies(mut self) -> Self {
        if self.cluster.downing != Downing::Auto {
            self.cluster.downing = Downing::KeepMajority;
        }
        self
    }

    /// The options of `seed` in the default batch (families in turn, by seed).
    pub fn for_seed(seed: u64) -> Self {
        Self::for_family(seed, Family::of_seed(seed))
    }

    /// Options of `seed` shaped by `family`.
    pub fn for_family(seed: u64, family: Family) -> Self {
        let mut o = Self::from_seed(seed);
        o.family = family;
        let mut d = SimRng::of(seed, Stream::Downing);
        if d.chance(0.3) {
            // Down-all ends every run with a fault without survivors: drawn less often.
            let weights = [0.2, 0.2, 0.2, 0.1, 0.3];
            let mut pick = d.unit();
            let at = weights.iter().position(|w| {
                pick -= w;
                pick < 0.0
            });
            o.cluster.downing = Downing::DRAWN[at.unwrap_or(0)].0;
        }
        if family == Family::Swarm {
            return o;
        }
        let secs = Duration::from_secs;
        o.faults.stop_recurring();
        o.network.duplicate = 0.0;
        o.host.passivate = 0.0;
        o.host.ignore_stop = 0.0;
        if family == Family::EqualHalves {
            // Equal halves are where the strategies differ most: lease-majority on half the
            // seeds that keep the majority (the store then arbitrates a tie keep-majority
            // breaks by address), and shard leases on half of those drawn without.
            let mut h = SimRng::of(seed, Stream::Family);
            if o.cluster.downing == Downing::KeepMajority && h.chance(0.5) {
                o.cluster.downing = Downing::LeaseMajority;
            }
            if o.lease.is_none() && h.chance(0.5) {
                o.lease = Some(crate::options::Lease::draw(&mut h, o.duration));
            }
        }
        let f = &mut o.faults;
        let mut nodes = o.cluster.nodes;
        match family {
            Family::Swarm | Family::Steady => {}
            Family::RollingRestart => {
                f.leave_every = Some(secs(15));
                f.rejoin_after_leave = true;
            }
            Family::ScaleOut => {
                nodes = 3;
                o.cluster.max_nodes = 7;
                f.join_every = Some(secs(15));
            }
            Family::ScaleIn => {
                nodes = 7;
                f.leave_every = Some(secs(20));
            }
            Family::Partitions => f.partition_every = Some(secs(30)),
            Family::EqualHalves => {
                nodes = if seed % 2 == 0 { 4 } else { 6 };
                f.partition_every = Some(secs(30));
            }
            Family::CoordinatorCrash => f.crash_oldest_every = Some(secs(40)),
            Family::FlappingLinks => {
                f.break_every = Some(secs(3));
                f.partition_every = Some(secs(15));
                f.clog_every = Some(secs(5));
            }
            Family::MassPassivation => {
                o.host.passivate = 0.2;
                o.host.ignore_stop = 0.2;
                // Some entities also fail: a remembered one restarts after a backoff, and a
                // message may start it sooner, after which it may passivate before the
                // backoff ends (the restart must then not happen).
                o.host.self_stop = o.host.self_stop.max(0.01);
            }
            Family::ActiveLimit => {
                // Few shards, so that a region's limit is more than one per shard; members
                // leave and come back, so that shards move and the limit is re-divided.
                let (shards, limit) = draw_limit(seed);
                (o.cluster.shards, o.cluster.active_entity_limit) = (shards, Some(limit));
                f.leave_every = Some(secs(25));
                f.rejoin_after_leave = true;
                o.host.passivate = 0.01;
                // Some queries change the limit at run time.
                o.workload.queries = o.workload.queries.max(0.01);
            }
            Family::MassShutdown => {
                nodes = 7;
                f.leave_every = Some(secs(4));
            }
            Family::FullRestart => {
                f.full_restart_every = Some(secs(60));
                // What must survive the restart is what was remembered: the store works
                // (its faults have families of their own), recovery throttled on some seeds.
                let recovery = if seed % 2 == 0 {
                    shoal_core::RecoveryStrategy::AllAtOnce
                } else {
                    shoal_core::RecoveryStrategy::Constant {
                        number: 8,
                        every: Duration::from_millis(100),
                    }
                };
                o.remember = Some(Remember {
                    recovery,
                    failure_rate: 0.0,
                    timeout_rate: 0.0,
                    tail_rate: 0.0,
                    outages: Vec::new(),
                    outages_around_moves: false,
                });
            }
        }
        o.cluster.nodes = nodes;
        o.network.slow_link =
            (o.network.slow_link).filter(|l| l.from.0 <= nodes && l.to.0 <= nodes);
        o.cluster.bystander = o.cluster.bystander.filter(|b| b.0 <= nodes);
        o
    }
}

impl Remember {
    /// A store without faults (for persistent entities in a run that remembers nothing).
    pub(crate) fn faultless() -> Self {
        Self {
            recovery: shoal_core::RecoveryStrategy::AllAtOnce,
            failure_rate: 0.0,
            timeout_rate: 0.0,
            tail_rate: 0.0,
            outages: Vec::new(),
            outages_around_moves: false,
        }
    }

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
            outages_around_moves: true,
        }
    }
}

/// Draws the active-limit family's number of shards and limit (from a stream of its own): 2 to
/// 8 shards, under a limit per region of 1 to 4 entities per shard of the whole type, so that
/// regions hold several shards each and their entities (tens to hundreds, Zipf-addressed) are
/// passivated by the limit all the time.
fn draw_limit(seed: u64) -> (u32, shoal_core::passivation::ActiveEntityLimit) {
    use shoal_core::passivation::{ActiveEntityLimit, Admission, ReplacementPolicy};
    let mut r = SimRng::of(seed, Stream::Limit);
    let shards = r.range(2, 8) as u32;
    let per_region = shards as usize * r.range(1, 4) as usize;
    let last = ReplacementPolicy::ALL.len() as u64 - 1;
    let (_, mut policy) = ReplacementPolicy::ALL[r.range(0, last) as usize];
    match &mut policy {
        ReplacementPolicy::SegmentedLeastRecentlyUsed { protected_percent } => {
            *protected_percent = r.range(0, 100) as u8;
        }
        ReplacementPolicy::WindowTinyLfu(admission) => {
            *admission = Admission {
                window_per_mille: r.range(1, 1000) as u16,
                adaptive: r.chance(0.7),
                frequency_filter: r.chance(0.7),
            };
        }
        _ => {}
    }
    (shards, ActiveEntityLimit { per_region, policy })
}
