//! How long the protocol may legitimately take, derived from the run's settings and its
//! entities' behaviour rather than fixed: the checks that bound time (liveness after healing,
//! graceful operations) use these, so a bound is never tighter than what the protocol allows
//! and never looser than it needs to be.

use std::time::Duration;

use shoal_core::ShardingSettings;

use crate::options::Options;

/// Connectivity must stay unchanged this long before the oracle downs anyone (Akka's SBR
/// `stable-after`, shortened for simulation).
pub(crate) const STABLE_AFTER: Duration = Duration::from_secs(7);

/// The quorum a static-quorum run's members are configured with: a majority of the members it
/// starts with (joins may grow it past what the quorum allows, as a fixed-size cluster must
/// not).
pub(crate) fn static_quorum(nodes: u64) -> usize {
    nodes as usize / 2 + 1
}

/// How long a lease-majority side without a majority waits before asking for the lease
/// (Akka's `acquire-lease-delay-for-minority`).
pub(crate) const LEASE_MAJORITY_DELAY: Duration = Duration::from_secs(2);

/// How long a lease-majority grant lasts: twice `stable-after` and the delay, as the core
/// requires at least, and the failure detection's spread between the sides.
pub(crate) fn lease_majority_ttl(stable_after: Duration) -> Duration {
    stable_after * 2 + LEASE_MAJORITY_DELAY + Duration::from_secs(6)
}

/// The longest the network takes to deliver one message on a healthy link: the latency's
/// long tail (0.5–2 s on 0.1 % of messages) plus the run's slowest link.
pub(crate) fn hop(opts: &Options) -> Duration {
    Duration::from_millis(2_010) + opts.network.slow_link.map_or(Duration::ZERO, |l| l.latency)
}

/// The longest an entity takes to stop once told to, for a handoff (`handoff: true`) or a
/// passivation: entities that ignore graceful stops run until forced, and the host takes up to
/// `forced_stop` to carry a forced stop out.
pub(crate) fn entity_stop(opts: &Options, settings: &ShardingSettings, handoff: bool) -> Duration {
    let forced = opts.host.forced_stop;
    if opts.host.ignore_stop > 0.0 {
        let timeout = if handoff {
            settings.entity_handoff_timeout()
        } else {
            settings.passivation_stop_timeout
        };
        timeout + forced
    } else {
        opts.host.slow_stop + forced
    }
}

/// The longest a healthy remember store takes to make what a shard recorded durable: the
/// write in flight, then the batch behind it, each at the latency's tail. Zero when the run
/// remembers nothing. (A failed request is a fault: the stall checks judge from after it.)
pub(crate) fn store_writes(opts: &Options) -> Duration {
    let store = crate::store::StoreSettings::default();
    match &opts.remember {
        None => Duration::ZERO,
        Some(r) if r.tail_rate > 0.0 => store.tail.1 * 2,
        Some(_) => store.latency.1 * 2,
    }
}

/// The longest a shard's handoff keeps its entities stopping after `HandOff`: an entity already
/// passivating may first stop, restart for the messages that raced its stop, and be stopped
/// again for the handoff; a remembering shard then waits for its writes.
pub(crate) fn handoff_stop(opts: &Options, settings: &ShardingSettings) -> Duration {
    entity_stop(opts, settings, false).min(entity_stop(opts, settings, true))
        + entity_stop(opts, settings, true)
        + store_writes(opts)
}

/// A move's acknowledgements: every region's travels through the owner (three hops).
pub(crate) fn handoff_acks(opts: &Options) -> Duration {
    hop(opts) * 3
}

/// From `HandOff` to the owner's `ShardStopped`: the hop, then the entities' stop.
pub(crate) fn handoff_stopping(opts: &Options, settings: &ShardingSettings) -> Duration {
    handoff_stop(opts, settings) + hop(opts)
}

/// From the owner's `ShardStopped` to a new home: `ShardStopped` to the coordinator, then
/// `HostShard` to the new home (two hops).
pub(crate) fn rehoming(opts: &Options) -> Duration {
    hop(opts) * 2
}

/// The longest one shard's move takes in a calm cluster: its three phases.
pub(crate) fn handoff(opts: &Options, settings: &ShardingSettings) -> Duration {
    handoff_acks(opts) + handoff_stopping(opts, settings) + rehoming(opts)
}

/// The longest one rebalance round takes in a calm cluster: until the coordinator's next tick,
/// then the move, or the coordinator's deadline if that is shorter than the move may take
/// (the round is then abandoned and retried).
pub(crate) fn rebalance_round(opts: &Options, settings: &ShardingSettings) -> Duration {
    settings.rebalance_interval + handoff(opts, settings).max(settings.handoff_timeout)
}

/// How long after it is sent a message may wait, in a cluster without faults: for its shard's
/// handoff to finish (and the new home to start), then for its entity's passivation at the new
/// home (and for its start to be durable, when remembering), plus the region's retry ticks and
/// a few hops.
pub(crate) fn message_wait(opts: &Options, settings: &ShardingSettings) -> Duration {
    handoff_stop(opts, settings)
        + store_writes(opts)
        + entity_stop(opts, settings, false)
        + settings.retry_interval * 2
        + hop(opts) * 3
}
