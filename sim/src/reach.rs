//! Faults planned to reach situations that random faults seldom produce, each drawn from a
//! random stream of its own, so that the schedules planned before stay what they were:
//!
//! - *last words*: after a partition, about when keep-majority decides, a node joins. A
//!   partition blocks only the links that exist, so the joiner reaches both sides: the
//!   minority, which never gossips to members it cannot reach, gossips to it, and what a downed
//!   member observed (the survivors unreachable) reaches the survivors, who must not count it;
//! - *a ratchet*: before a partition, shorter ones cutting one member of its minority off from
//!   part of its majority, each a little longer than the one before, so that a failure
//!   detector learning such gaps as its peer's rhythm would sit through the long one, believing
//!   that part still reachable;
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
    let partitions = matches!(o.family, Family::Partitions | Family::FlappingLinks);
    if partitions || o.family == Family::Swarm {
        plan_last_words(o, actions);
    }
    if partitions {
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

/// How many short partitions lead up to a long one, how far apart, the first one's length
/// and the growth of each next one's.
const RATCHET_STEPS: u32 = 8;
const RATCHET_EVERY: Duration = Duration::from_secs(12);
const RATCHET_FIRST: Duration = Duration::from_millis(2_800);
const RATCHET_GROWTH: f64 = 1.25;

/// Before most partitions (seven in ten, their lead-ups apart), eight shorter ones, 12 s apart, each a quarter longer than the one
/// before (2.8 s to 13.4 s), the last ending at least 20 s before it. A partition just shorter
/// than what a detector tolerates is a gap just under its threshold; one that learnt it would
/// tolerate a longer one next. Each cuts one member of the coming minority, with part of the
/// coming majority, off from the rest of it: only the detectors across that cut live through
/// the gaps, so such detectors would keep that member believing it still reaches those members
/// of the majority, and on their side, long after the others decided.
fn plan_ratchets(o: &Options, actions: &mut Vec<Action>) {
    let mut r = SimRng::of(o.seed, Stream::Ratchets);
    let known = o.cluster.nodes.max(2);
    let lead = RATCHET_EVERY * RATCHET_STEPS + Duration::from_secs(20);
    let mut added = Vec::new();
    let mut windows: Vec<std::ops::Range<Duration>> = Vec::new();
    for action in actions.iter() {
        let Act::Partition { side, .. } = &action.act else {
            continue;
        };
        // The cluster forms in the first ten seconds; ratchets do not overlap.
        let start = action.at.saturating_sub(lead);
        let free = windows.last().is_none_or(|w| w.end <= start);
        if !r.chance(0.7) || action.at < lead + Duration::from_secs(10) || !free {
            continue;
        }
        let rest: Vec<NodeId> = (1..=known)
            .map(NodeId)
            .filter(|n| !side.contains(n))
            .collect();
        let (minority, majority): (Vec<NodeId>, Vec<NodeId>) = if side.len() <= rest.len() {
            (side.iter().copied().collect(), rest)
        } else {
            (rest, side.iter().copied().collect())
        };
        let Some(&member) = minority.first().filter(|_| majority.len() >= 2) else {
            continue;
        };
        // With it, part of the majority: never its lowest address, whose detectors keep
        // their rhythm.
        let mut blip: std::collections::BTreeSet<NodeId> = [member].into();
        blip.extend(majority[1..].iter().filter(|_| r.chance(0.5)));
        let mut length = RATCHET_FIRST.as_secs_f64();
        for step in 0..RATCHET_STEPS {
            let jitter = 0.95 + r.unit() * 0.1;
            let heal_after = Duration::from_millis((length * jitter * 1000.0) as u64);
            let act = Act::Partition {
                side: blip.clone(),
                one_way: false,
                heal_after,
            };
            let at = action.at - lead + RATCHET_EVERY * step;
            added.push(Action { at, act });
            length *= RATCHET_GROWTH;
        }
        windows.push(start..action.at);
    }
    // Other partitions in a ratchet's way would cut it short (a partition is ignored while
    // another holds, and a heal ends them all); the partition it leads up to stays.
    actions.retain(|a| {
        let cut = matches!(a.act, Act::Partition { .. } | Act::Heal);
        !cut || !windows.iter().any(|w| w.contains(&a.at))
    });
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
