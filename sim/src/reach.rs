//! Faults planned to reach situations that random faults seldom produce, each drawn from a
//! random stream of its own, so that the schedules planned before stay what they were:
//!
//! - *last words*: after a partition, about when keep-majority decides, the minority can send
//!   to the majority again but still not hear from it, so what a downed member observed (the
//!   survivors unreachable) reaches the survivors, who must not count it;
//! - *a ratchet*: before a partition, shorter ones of the same side, each just past the
//!   acceptable heartbeat pause and longer than the one before, so that a failure detector
//!   learning such gaps as its peer's rhythm would sit through the long one;
//! - *askers restarting*: where entities answer asks, members crash and restart within
//!   seconds, so that replies go to a new incarnation while its node's old one is still known.

use std::collections::BTreeSet;
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

/// The side of a partition of the addresses `1..=known` that keep-majority keeps: the larger,
/// or on a tie the one holding the lowest address.
fn majority_of(side: &BTreeSet<NodeId>, known: u64) -> BTreeSet<NodeId> {
    let rest: BTreeSet<NodeId> = (1..=known)
        .map(NodeId)
        .filter(|n| !side.contains(n))
        .collect();
    let side_wins =
        side.len() > rest.len() || (side.len() == rest.len() && side.contains(&NodeId(1)));
    if side_wins { side.clone() } else { rest }
}

/// After some partitions, while the majority decides to down the minority, the partition
/// turns one-way: the majority no longer reaches the minority, which still reaches it.
fn plan_last_words(o: &Options, actions: &mut Vec<Action>) {
    let mut r = SimRng::of(o.seed, Stream::LastWords);
    let known = o.cluster.nodes.max(2);
    let mut added = Vec::new();
    for action in actions.iter() {
        let Act::Partition {
            side,
            one_way: false,
            heal_after,
        } = &action.act
        else {
            continue;
        };
        if !r.chance(0.4) {
            continue;
        }
        // Failure detection takes about 4 s, then `stable-after`; the downed minority keeps
        // gossiping what it observed.
        let after = STABLE_AFTER + ms(&mut r, Duration::from_secs(2), Duration::from_secs(7));
        if after >= *heal_after || action.at + after >= o.duration {
            continue;
        }
        let at = action.at + after;
        added.push(Action { at, act: Act::Heal });
        let act = Act::Partition {
            side: majority_of(side, known),
            one_way: true,
            heal_after: *heal_after - after,
        };
        added.push(Action { at, act });
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
    fn the_majority_is_the_larger_side_or_on_a_tie_the_lowest_address() {
        let set = |ns: &[u64]| ns.iter().map(|n| NodeId(*n)).collect::<BTreeSet<_>>();
        assert_eq!(majority_of(&set(&[1]), 3), set(&[2, 3]));
        assert_eq!(majority_of(&set(&[2, 3]), 3), set(&[2, 3]));
        assert_eq!(majority_of(&set(&[3, 4]), 4), set(&[1, 2]));
        assert_eq!(majority_of(&set(&[1, 4]), 4), set(&[1, 4]));
    }
}
