//! Faults planned to reach situations that random faults seldom produce, each drawn from a
//! random stream of its own, so that the schedules planned before stay what they were:
//!
//! - *last words*: after a partition, about when keep-majority decides, a node joins. A
//!   partition blocks only the links that exist, so the joiner reaches both sides: the
//!   minority, which never gossips to members it cannot reach, gossips to it, and what a downed
//!   member observed (the survivors unreachable) reaches the survivors, who must not count it;
//! - *a ratchet*: before a partition, shorter ones of the same side, each just past the
//!   acceptable heartbeat pause and longer than the one before, so that a failure detector
//!   learning such gaps as its peer's rhythm would sit through the long one;
//! - *askers restarting*: where entities answer asks, members crash and restart within
//!   seconds, so that replies go to a new incarnation while its node's old one is still known.

use std::time::Duration;

use shoal_core::NodeId;

use crate::bounds::STABLE_AFTER;
use crate::options::{Family, Options};
use crate::rng::{SimRng, Stream};
use crate::schedule::{Act, Action};

/// Adds the faults of every kind above that `o`'s family calls for.
pub(crate) fn plan_reach(o: &Options, actions: &mut Vec<Action>) {
    let partitions = matches!(
        o.family,
        Family::Swarm | Family::Partitions | Family::FlappingLinks
    );
    if partitions {
        plan_last_words(o, actions);
        plan_ratchets(o, actions);
    }
    if o.family == Family::Swarm && o.host.asks > 0.0 {
        plan_asker_restarts(o, actions);
    }
    actions.sort_by_key(|a| a.at);
}

/// Whole milliseconds between `lo` and `hi`, so that a schedule reads back as it prints.
fn ms(r: &mut SimRng, lo: Duration, hi: Duration) -> Duration {
    Duration::from_millis(r.duration(lo, hi).as_millis() as u64)
}

/// After some partitions, while the majority decides to down the minority, a node joins.
fn plan_last_words(o: &Options, actions: &mut Vec<Action>) {
    let mut r = SimRng::of(o.seed, Stream::LastWords);
    let mut added = Vec::new();
    for action in actions.iter() {
        let Act::Partition { heal_after, .. } = &action.act else {
            continue;
        };
        if !r.chance(0.4) {
            continue;
        }
        // Failure detection takes about 4 s, then `stable-after`.
        let after = STABLE_AFTER + ms(&mut r, Duration::from_secs(2), Duration::from_secs(7));
        if after < *heal_after && action.at + after < o.duration {
            added.push(Action {
                at: action.at + after,
                act: Act::Join,
            });
        }
    }
    actions.extend(added);
}

/// Before some partitions, three shorter ones of the same side: 3.5–4.5 s, 6–7 s and 9–11 s,
/// ending well before it.
fn plan_ratchets(o: &Options, actions: &mut Vec<Action>) {
    let mut r = SimRng::of(o.seed, Stream::Ratchets);
    let mut added = Vec::new();
    let lengths = [(3_500, 4_500), (6_000, 7_000), (9_000, 11_000)];
    for action in actions.iter() {
        let Act::Partition { side, one_way, .. } = &action.act else {
            continue;
        };
        // The first blip must come after the cluster formed and heartbeats flow.
        if !r.chance(0.3) || action.at < Duration::from_secs(60) {
            continue;
        }
        for (i, (lo, hi)) in lengths.into_iter().enumerate() {
            let before = Duration::from_secs(15 * (3 - i as u64));
            let heal_after = ms(&mut r, Duration::from_millis(lo), Duration::from_millis(hi));
            let act = Act::Partition {
                side: side.clone(),
                one_way: *one_way,
                heal_after,
            };
            added.push(Action {
                at: action.at - before,
                act,
            });
        }
    }
    actions.extend(added);
}

/// Every ~40 s a member crashes and restarts within 1–4 s.
fn plan_asker_restarts(o: &Options, actions: &mut Vec<Action>) {
    let mut r = SimRng::of(o.seed, Stream::Askers);
    let mut at = Duration::ZERO;
    loop {
        at += ms(&mut r, Duration::from_secs(20), Duration::from_secs(60));
        if at >= o.duration {
            return;
        }
        let act = Act::Crash {
            node: NodeId(r.range(1, o.cluster.nodes)),
            restart_after: ms(&mut r, Duration::from_secs(1), Duration::from_secs(4)),
        };
        actions.push(Action { at, act });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_planned_in_its_families() {
        let mut o = Options::for_family(3, Family::Partitions);
        o.duration = Duration::from_secs(400);
        o.faults.partition_every = Some(Duration::from_secs(20));
        let mut actions = Vec::new();
        for i in 1..40 {
            let side = [NodeId(1)].into();
            let at = Duration::from_secs(10 * i);
            let heal_after = Duration::from_secs(15);
            let act = Act::Partition {
                side,
                one_way: false,
                heal_after,
            };
            actions.push(Action { at, act });
        }
        plan_reach(&o, &mut actions);
        assert!(actions.iter().any(|a| a.act == Act::Join), "last words");
        let short = |a: &Action| matches!(a.act, Act::Partition { heal_after, .. } if heal_after < Duration::from_secs(12));
        assert!(actions.iter().any(short), "ratchets");
        assert!(
            actions.windows(2).all(|w| w[0].at <= w[1].at),
            "in time order"
        );
    }
}
