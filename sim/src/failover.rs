//! `sim failover`: how long failures take to recover from with the production defaults (Akka's
//! timers: 1 s heartbeats with 3 s acceptable pause, 20 s stable-after, 20 s
//! down-removal-margin), measured on a five-node cluster under steady traffic: keep-majority
//! with the removal margin, lease-majority downing (the downing lease from a store without
//! faults; the minority asks 2 s later) with the margin, and keep-majority with shard leases
//! in the margin's place (10 s ttl, renewed every 2 s; no margin: a shard moves as soon as its
//! old home is removed, and serves once its lease is granted there):
//!
//! - a crash: from the crash until every shard the crashed node served serves again elsewhere;
//! - a 2|3 partition: from its start until every minority member has stopped its entities
//!   (downed itself), and until the majority serves the minority's shards.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use crate::options::{
    ClusterOptions, Downing, Family, Lease, MembershipMode, NetworkOptions, Options,
    WorkloadOptions,
};
use crate::run::run_recorded;
use crate::trace::{TraceEvent, TraceLine};

/// When the failure happens.
const FAULT_AT: Duration = Duration::from_secs(60);

/// The measured recovery times, with the removal margin and with shard leases.
#[derive(Debug)]
pub struct Failover {
    /// Keep-majority with the removal margin.
    pub margin: Recovery,
    /// Lease-majority downing with the removal margin.
    pub lease_majority: Recovery,
    /// Keep-majority with shard leases and no removal margin.
    pub leases: Recovery,
}

/// How long one configuration takes to recover.
#[derive(Debug)]
pub struct Recovery {
    /// Crash → every shard of the crashed node serving elsewhere (median, slowest).
    pub crash_to_serving: (Duration, Duration),
    /// Partition start → every minority member stopped its entities.
    pub partition_to_minority_stopped: Duration,
    /// Partition start → every shard of the minority serving on the majority (slowest).
    pub partition_to_serving: Duration,
}

impl fmt::Display for Failover {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "five nodes, production defaults, steady traffic:")?;
        writeln!(f, "  keep-majority, 20 s removal margin:")?;
        write!(f, "{}", self.margin)?;
        writeln!(f, "  lease-majority, 20 s removal margin:")?;
        write!(f, "{}", self.lease_majority)?;
        writeln!(
            f,
            "  keep-majority, shard leases (10 s ttl), no removal margin:"
        )?;
        write!(f, "{}", self.leases)
    }
}

impl fmt::Display for Recovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = |d: Duration| format!("{:.1} s", d.as_secs_f64());
        writeln!(
            f,
            "    crash of a node -> its shards serving again elsewhere: median {}, all {}",
            s(self.crash_to_serving.0),
            s(self.crash_to_serving.1)
        )?;
        writeln!(
            f,
            "    2|3 partition -> minority stopped its entities: {}",
            s(self.partition_to_minority_stopped)
        )?;
        writeln!(
            f,
            "    2|3 partition -> minority's shards serving on the majority: {}",
            s(self.partition_to_serving)
        )
    }
}

/// Runs both scenarios, with the removal margin and with shard leases.
pub fn measure() -> Failover {
    let lease = Lease::faultless();
    Failover {
        margin: recover(Downing::KeepMajority, None),
        lease_majority: recover(Downing::LeaseMajority, None),
        leases: recover(Downing::KeepMajority, Some(lease)),
    }
}

/// Both scenarios with `downing` and shard leases from `lease`.
fn recover(downing: Downing, lease: Option<Lease>) -> Recovery {
    let crash = trace_of("@60 crash n3 restart 1000", downing, lease.clone());
    let (served, _) = shards_served(&crash, &["n3#1"]);
    let crash_times = recovery_times(&crash, &served, &["n3#1"]);
    let partition = trace_of("@60 partition n4,n5 heal 1000", downing, lease);
    let minority = ["n4#1", "n5#1"];
    let stopped = partition
        .iter()
        .filter(|(t, e)| *t > FAULT_AT && matches!(e, TraceEvent::LeftCluster { downed: true, .. }))
        .map(|(t, _)| *t - FAULT_AT)
        .max()
        .unwrap_or(Duration::MAX);
    let (served, _) = shards_served(&partition, &minority);
    let partition_times = recovery_times(&partition, &served, &minority);
    Recovery {
        crash_to_serving: (median(&crash_times), max(&crash_times)),
        partition_to_minority_stopped: stopped,
        partition_to_serving: max(&partition_times),
    }
}

/// The trace (time, event) of a steady five-node run with `schedule`, default timers,
/// `downing` and shard leases from `lease`.
fn trace_of(schedule: &str, downing: Downing, lease: Option<Lease>) -> Vec<(Duration, TraceEvent)> {
    let base = Options::for_family(7, Family::Steady).without_extras();
    let options = Options {
        duration: Duration::from_secs(180),
        schedule: Some(schedule.parse().expect("a valid schedule")),
        cluster: ClusterOptions {
            nodes: 5,
            shards: 100,
            membership: MembershipMode::Real,
            default_timers: true,
            downing,
            ..base.cluster.clone()
        },
        network: NetworkOptions {
            slow_link: None,
            ..base.network.clone()
        },
        workload: WorkloadOptions {
            entities: 1_000,
            message_every: Duration::from_millis(5),
            ..base.workload.clone()
        },
        lease,
        ..base
    };
    let (_, lines) = run_recorded(options);
    lines
        .into_iter()
        .map(|TraceLine { t_ns, event }| (Duration::from_nanos(t_ns), event))
        .collect()
}

/// The member, entity and shard of an entity start.
fn started(event: &TraceEvent) -> Option<(&str, &str, &str)> {
    match event {
        TraceEvent::EntityStarted {
            member,
            entity,
            shard,
        } => Some((member, entity, shard)),
        _ => None,
    }
}

/// Shards whose entities ran on `members` before the fault, with one of their entities.
fn shards_served(
    trace: &[(Duration, TraceEvent)],
    members: &[&str],
) -> (BTreeSet<String>, BTreeMap<String, String>) {
    let mut shards = BTreeSet::new();
    let mut entity = BTreeMap::new();
    for (t, e) in trace {
        if *t > FAULT_AT {
            break;
        }
        if let Some((_, ent, shard)) = started(e).filter(|(m, ..)| members.contains(m)) {
            shards.insert(shard.to_owned());
            entity.insert(shard.to_owned(), ent.to_owned());
        }
    }
    (shards, entity)
}

/// For each of `shards`, how long after the fault an entity of it first started on a member
/// other than `gone`.
fn recovery_times(
    trace: &[(Duration, TraceEvent)],
    shards: &BTreeSet<String>,
    gone: &[&str],
) -> Vec<Duration> {
    let mut first: BTreeMap<&str, Duration> = BTreeMap::new();
    for (t, e) in trace {
        if *t <= FAULT_AT {
            continue;
        }
        if let Some((member, _, shard)) = started(e) {
            if shards.contains(shard) && !gone.contains(&member) {
                first.entry(shard).or_insert(*t - FAULT_AT);
            }
        }
    }
    shards
        .iter()
        .map(|s| first.get(s.as_str()).copied().unwrap_or(Duration::MAX))
        .collect()
}

fn median(times: &[Duration]) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    sorted
        .get(sorted.len() / 2)
        .copied()
        .unwrap_or(Duration::MAX)
}

fn max(times: &[Duration]) -> Duration {
    times.iter().max().copied().unwrap_or(Duration::MAX)
}
